/* Catalog refreshes: a provider's catalog_refresh run in a thread of its
 * own, its rows merged with what the catalog knew (prices the refresh could
 * not obtain, facts the provider's API does not give), stored in the state
 * store and put in place of the provider's compiled-in rows; the state
 * catalog/PROVIDER/refresh reads back; the stored rows loaded at mount. */
#include "lifecycle/refresh.h"

#include "catalog/catalog.h"
#include "lifecycle/model_priv.h"
#include "lifecycle/resolution.h"
#include "lifecycle/store.h"
#include "providers/cancel.h"
#include "providers/provider.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The columns of a refreshed types.csv, as the catalog reads them. */
static const char refresh_header[] =
	"instance_type,vcpus,memory_bytes,ecu,accelerator_count,"
	"accelerator_type,accelerator_manufacturer,accelerator_architecture,"
	"accelerator,accelerator_memory_bytes,processor_manufacturer,"
	"processor_microarchitecture,processor,storage_type,storage_bytes,"
	"network_bits_per_s,architecture,network_up_to";

/* Facts no provider API gives that the catalog's own row may know: kept
 * from it when the refreshed row has none (the catalog's file name). */
static const char *const refresh_kept[] = {
	"node_ecu_count", "processor_microarchitecture", "processor"};

/* One provider's refresh. */
struct refresh_slot {
	struct provider *p;
	struct model *m;
	pthread_t thread;
	struct cancel cancel;
	char *types, *offers; /* the stored rows as CSV text, or NULL */
	size_t types_len, offers_len;
	char *summary; /* the last refresh's outcome, or NULL: never */
	/* While one runs (a sink's data). */
	char **lines;
	struct store_offer *rows;
	char *notes;
	size_t nlines, caplines, nrows, caprows, notes_len;
	size_t done, total;
	int64_t state_ns;
	bool running, started;
	char provider[32];
};

struct refresh {
	pthread_mutex_t lock; /* the slots' state; never held over a call */
	/* One request at a time (a refresh's thread never takes it). */
	pthread_mutex_t request;
	struct refresh_slot slot[MODEL_PROVIDERS_MAX];
	size_t nslots;
	int64_t catalog_ns;
};

static struct refresh_slot *refresh_slot_find(struct model *m,
					      const char *provider)
{
	struct refresh *r = m->refresh;

	for (size_t i = 0; r && i < r->nslots; i++)
		if (strcmp(r->slot[i].provider, provider) == 0)
			return &r->slot[i];
	return NULL;
}

static void refresh_notify(struct model *m, const char *provider)
{
	char path[96];

	snprintf(path, sizeof(path), "catalog/%s/refresh", provider);
	model_notify_path(m, path);
}

/* A line of the catalog's log (the store is the model's: its lock). */
__attribute__((format(printf, 2, 3))) static void
refresh_log(struct model *m, const char *fmt, ...)
{
	char line[MODEL_ERR_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	model_log(m, "catalog", "%s", line);
	pthread_mutex_unlock(&m->lock);
}

/* "2026-11-24T20:00Z". */
static void refresh_time(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%MZ", &tm);
}

/* 19119 as "19,119". */
static void refresh_count(size_t n, char *buf, size_t len)
{
	char digits[32];
	size_t d = (size_t)snprintf(digits, sizeof(digits), "%zu", n), o = 0;

	for (size_t i = 0; i < d && o + 2 < len; i++) {
		if (i && (d - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
}

/* --- the sink: what the provider hands over, as catalog rows --- */

static void refresh_note_add(struct refresh_slot *s, const char *sentence)
{
	size_t n = strlen(sentence);
	char *grown;

	while (n && sentence[n - 1] == '\n')
		n--;
	grown = realloc(s->notes, s->notes_len + n + 2);

	if (!grown)
		return;
	s->notes = grown;
	memcpy(s->notes + s->notes_len, sentence, n);
	s->notes_len += n;
	s->notes[s->notes_len++] = '\n';
	s->notes[s->notes_len] = '\0';
}

/* A CSV field: a word of the API without the separators of the format. */
static void refresh_field(char *out, size_t len, const char *v)
{
	size_t o = 0;

	for (; v && *v && o + 1 < len; v++)
		out[o++] = (*v == ',' || *v == '\n' || *v == '\r' || *v == '"')
				   ? ' '
				   : *v;
	out[o] = '\0';
}

static void refresh_number(char *out, size_t len, double v)
{
	if (isnan(v))
		*out = '\0';
	else
		snprintf(out, len, "%.17g", v);
}

/* The catalog's value of a fact the API does not give (see
 * refresh_kept), as text for the CSV. */
static void refresh_kept_value(struct model *m, const char *provider,
			       const char *type, const char *file, char *out,
			       size_t len)
{
	char *buf = NULL;
	size_t n = 0;

	*out = '\0';
	if (resolution_feature(m->resolution, provider, type, file, &buf, &n) ==
		    0 &&
	    n > 1)
		snprintf(out, len, "%.*s", (int)(n - 1), buf);
	free(buf);
}

static int refresh_sink_type(void *ctx, const struct provider_catalog_type *t)
{
	struct refresh_slot *s = ctx;
	char f[18][160], line[4096];
	char *copy;

	if (!t->name || !*t->name)
		return 0;
	refresh_field(f[0], sizeof(f[0]), t->name);
	refresh_number(f[1], sizeof(f[1]), t->vcpus);
	refresh_number(f[2], sizeof(f[2]), t->memory_bytes);
	refresh_kept_value(s->m, s->provider, t->name, refresh_kept[0], f[3],
			   sizeof(f[3]));
	refresh_number(f[4], sizeof(f[4]), t->accelerator_count);
	refresh_field(f[5], sizeof(f[5]), t->accelerator_type);
	refresh_field(f[6], sizeof(f[6]), t->accelerator_manufacturer);
	refresh_field(f[7], sizeof(f[7]), t->accelerator_architecture);
	refresh_field(f[8], sizeof(f[8]), t->accelerator);
	refresh_number(f[9], sizeof(f[9]), t->accelerator_memory_bytes);
	refresh_field(f[10], sizeof(f[10]), t->processor_manufacturer);
	refresh_kept_value(s->m, s->provider, t->name, refresh_kept[1], f[11],
			   sizeof(f[11]));
	refresh_field(f[12], sizeof(f[12]), t->processor);
	if (!*f[12])
		refresh_kept_value(s->m, s->provider, t->name, refresh_kept[2],
				   f[12], sizeof(f[12]));
	refresh_field(f[13], sizeof(f[13]), t->storage_type);
	refresh_number(f[14], sizeof(f[14]), t->storage_bytes);
	refresh_number(f[15], sizeof(f[15]), t->network_bits_per_s);
	refresh_field(f[16], sizeof(f[16]), t->architecture);
	snprintf(f[17], sizeof(f[17]), "%s", t->network_up_to ? "1" : "");
	snprintf(line, sizeof(line),
		 "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s", f[0],
		 f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10],
		 f[11], f[12], f[13], f[14], f[15], f[16], f[17]);
	if (s->nlines == s->caplines) {
		size_t cap = s->caplines ? s->caplines * 2 : 1024;
		char **v = realloc(s->lines, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->lines = v;
		s->caplines = cap;
	}
	copy = strdup(line);
	if (!copy)
		return -ENOMEM;
	s->lines[s->nlines++] = copy;
	return 0;
}

static int refresh_sink_offer(void *ctx, const struct provider_catalog_offer *o)
{
	struct refresh_slot *s = ctx;
	struct store_offer *x;
	char type[160], region[64], zones[1024];

	if (!o->type || !o->region)
		return 0;
	if (s->nrows == s->caprows) {
		size_t cap = s->caprows ? s->caprows * 2 : 4096;
		struct store_offer *v = realloc(s->rows, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->rows = v;
		s->caprows = cap;
	}
	refresh_field(type, sizeof(type), o->type);
	refresh_field(region, sizeof(region), o->region);
	refresh_field(zones, sizeof(zones), o->zones);
	x = &s->rows[s->nrows];
	x->type = strdup(type);
	x->region = strdup(region);
	x->zones = strdup(zones);
	x->price = o->price;
	x->spot = o->spot;
	if (!x->type || !x->region || !x->zones) {
		free((char *)x->type);
		free((char *)x->region);
		free((char *)x->zones);
		return -ENOMEM;
	}
	/* A price not obtained keeps the one the catalog has. */
	if (isnan(x->price) || isnan(x->spot)) {
		double price = NAN, spot = NAN;

		if (resolution_offer_price(s->m->resolution, s->provider, type,
					   region, &price, &spot) == 0) {
			if (isnan(x->price))
				x->price = price;
			if (isnan(x->spot))
				x->spot = spot;
		}
	}
	s->nrows++;
	return 0;
}

static void refresh_sink_progress(void *ctx, size_t done, size_t total)
{
	struct refresh_slot *s = ctx;
	struct refresh *r = s->m->refresh;

	pthread_mutex_lock(&r->lock);
	s->done = done;
	s->total = total;
	s->state_ns = model_now();
	pthread_mutex_unlock(&r->lock);
	refresh_notify(s->m, s->provider);
}

static void refresh_sink_note(void *ctx, const char *sentence)
{
	refresh_note_add(ctx, sentence);
}

static void refresh_rows_free(struct refresh_slot *s)
{
	for (size_t i = 0; i < s->nlines; i++)
		free(s->lines[i]);
	for (size_t i = 0; i < s->nrows; i++) {
		free((char *)s->rows[i].type);
		free((char *)s->rows[i].region);
		free((char *)s->rows[i].zones);
	}
	free(s->lines);
	free(s->rows);
	free(s->notes);
	s->lines = NULL;
	s->rows = NULL;
	s->notes = NULL;
	s->nlines = s->caplines = s->nrows = s->caprows = s->notes_len = 0;
}

/* --- putting rows in place --- */

/* The kernel keeps a type's entries for a while: tell the filesystem of
 * every type of `provider` the replacement removed, and of its regions'
 * links to it. `before` holds the type names before, one per line, each
 * followed by its regions file. */
static void refresh_forget(struct model *m, const char *provider,
			   const char *before)
{
	char path[512], name[256];

	for (const char *l = before; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);

		if (*l == '\t') { /* a region line of the last name */
			l = nl ? nl + 1 : NULL;
			continue;
		}
		snprintf(name, sizeof(name), "%.*s", (int)len, l);
		l = nl ? nl + 1 : NULL;
		if (resolution_type_exists(m->resolution, provider, name))
			continue;
		snprintf(path, sizeof(path), "catalog/%s/%s", provider, name);
		model_notify_path(m, path);
		while (l && *l == '\t') {
			nl = strchr(l, '\n');
			len = strcspn(l + 1, "\t\n");
			snprintf(path, sizeof(path),
				 "catalog/regions/%s/%.*s/%s", provider,
				 (int)len, l + 1, name);
			model_notify_path(m, path);
			l = nl ? nl + 1 : NULL;
		}
	}
}

/* The names of a provider's types, each followed by its regions lines
 * (a tab first), for refresh_forget; NULL when out of memory. */
static char *refresh_names(struct model *m, const char *provider)
{
	size_t len = 0, cap = 65536;
	char *out = malloc(cap);
	const char *name;

	if (!out)
		return NULL;
	*out = '\0';
	for (size_t i = 0;
	     (name = resolution_provider_type(m->resolution, provider, i));
	     i++) {
		char *regions = NULL;
		size_t rl = 0, need;

		if (resolution_feature(m->resolution, provider, name, "regions",
				       &regions, &rl))
			rl = 0;
		need = len + strlen(name) + 2 + 2 * rl + 1;
		if (need > cap) {
			char *grown = realloc(out, need * 2);

			if (!grown) {
				free(regions);
				free(out);
				return NULL;
			}
			out = grown;
			cap = need * 2;
		}
		len += (size_t)snprintf(out + len, cap - len, "%s\n", name);
		for (const char *l = regions; l && *l;) {
			const char *nl = strchr(l, '\n');
			size_t n = strcspn(l, "\t\n");

			len += (size_t)snprintf(out + len, cap - len,
						"\t%.*s\n", (int)n, l);
			l = nl ? nl + 1 : NULL;
		}
		free(regions);
	}
	return out;
}

/* Every provider's stored rows (with `provider`'s taken from its slot's
 * new texts) as the catalog's sources, then the catalog replaced; the
 * filesystem is told of what `changed` (a provider, or NULL at mount)
 * lost. */
static int refresh_apply(struct model *m, const char *changed, char *err,
			 size_t errlen)
{
	struct refresh *r = m->refresh;
	struct catalog_source src[MODEL_PROVIDERS_MAX];
	char *before = changed ? refresh_names(m, changed) : NULL;
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < r->nslots; i++) {
		const struct refresh_slot *s = &r->slot[i];

		if (!s->types)
			continue;
		src[n].provider = s->provider;
		src[n].types = s->types;
		src[n].types_len = s->types_len;
		src[n].offers = s->offers;
		src[n].offers_len = s->offers_len;
		n++;
	}
	rc = resolution_env_replace(m->resolution, src, n, err, errlen);
	if (rc == 0) {
		char dir[64];

		pthread_mutex_lock(&r->lock);
		r->catalog_ns = model_now();
		pthread_mutex_unlock(&r->lock);
		if (changed) {
			refresh_forget(m, changed, before);
			snprintf(dir, sizeof(dir), "catalog/%s", changed);
			model_notify_path(m, dir);
		}
	}
	free(before);
	return rc;
}

/* The rows of a finished refresh as the text the catalog and the store
 * read: the types under refresh_header, the offers. -ENOMEM or 0. */
static int refresh_texts(struct refresh_slot *s, char **types, size_t *tlen,
			 char **offers, size_t *olen)
{
	size_t tn = sizeof(refresh_header) + 1, on = 128;
	char *t, *o;

	for (size_t i = 0; i < s->nlines; i++)
		tn += strlen(s->lines[i]) + 1;
	for (size_t i = 0; i < s->nrows; i++)
		on += strlen(s->rows[i].type) + strlen(s->rows[i].region) +
		      strlen(s->rows[i].zones) + 64; /* two %.17g and commas */
	t = malloc(tn);
	o = malloc(on);
	if (!t || !o) {
		free(t);
		free(o);
		return -ENOMEM;
	}
	*tlen = (size_t)snprintf(t, tn, "%s\n", refresh_header);
	for (size_t i = 0; i < s->nlines; i++)
		*tlen += (size_t)snprintf(t + *tlen, tn - *tlen, "%s\n",
					  s->lines[i]);
	*olen = (size_t)snprintf(o, on,
				 "instance_type,region,price_usd_hour,"
				 "spot_price_usd_hour,zones\n");
	for (size_t i = 0; i < s->nrows; i++) {
		char p[32], sp[32];

		refresh_number(p, sizeof(p), s->rows[i].price);
		refresh_number(sp, sizeof(sp), s->rows[i].spot);
		*olen += (size_t)snprintf(o + *olen, on - *olen,
					  "%s,%s,%s,%s,%s\n", s->rows[i].type,
					  s->rows[i].region, p, sp,
					  s->rows[i].zones);
	}
	*types = t;
	*offers = o;
	return 0;
}

/* A finished refresh: store it, put it in place, say so. */
static void refresh_finish(struct refresh_slot *s)
{
	struct model *m = s->m;
	struct refresh *r = m->refresh;
	char *types = NULL, *offers = NULL, *old_t, *old_o;
	char err[MODEL_ERR_MAX] = "", when[32], a[32], b[32], c[32];
	char *summary = NULL;
	size_t tlen = 0, olen = 0, priced = 0, len;
	int64_t now = model_now();
	int rc;

	for (size_t i = 0; i < s->nrows; i++)
		priced += !isnan(s->rows[i].price);
	rc = refresh_texts(s, &types, &tlen, &offers, &olen);
	if (rc == 0) {
		/* Check that the rows load before storing them. */
		struct catalog_source src = {s->provider, types, tlen, offers,
					     olen};
		struct catalog *check =
			catalog_open_with(&src, 1, err, sizeof(err));

		if (!check)
			rc = -EINVAL;
		else if (*catalog_notes(check))
			/* What the catalog placed (types new to the
			 * hierarchy) belongs to the summary. */
			refresh_note_add(s, catalog_notes(check));
		catalog_close(check);
	}
	if (rc == 0) {
		struct store_catalog sc = {
			.provider = s->provider,
			.header = refresh_header,
			.types = (const char *const *)s->lines,
			.ntypes = s->nlines,
			.offers = s->rows,
			.noffers = s->nrows,
			.at_ns = now,
		};
		refresh_time(now, when, sizeof(when));
		refresh_count(s->nlines, a, sizeof(a));
		refresh_count(s->nrows, b, sizeof(b));
		refresh_count(priced, c, sizeof(c));
		len = strlen(when) + strlen(a) + strlen(b) + strlen(c) +
		      s->notes_len + 64;
		summary = malloc(len);
		if (!summary) {
			rc = -ENOMEM;
		} else {
			snprintf(summary, len,
				 "done %s: %s types, %s offers, %s priced\n%s",
				 when, a, b, c, s->notes ? s->notes : "");
			sc.summary = summary;
			pthread_mutex_lock(&m->lock);
			rc = store_catalog_put(m->store, &sc, err, sizeof(err));
			pthread_mutex_unlock(&m->lock);
		}
	}
	if (rc == 0) {
		pthread_mutex_lock(&r->lock);
		old_t = s->types;
		old_o = s->offers;
		s->types = types;
		s->types_len = tlen;
		s->offers = offers;
		s->offers_len = olen;
		types = old_t;
		offers = old_o;
		pthread_mutex_unlock(&r->lock);
		rc = refresh_apply(m, s->provider, err, sizeof(err));
	}
	free(types);
	free(offers);
	pthread_mutex_lock(&r->lock);
	if (rc == 0) {
		free(s->summary);
		s->summary = summary;
		summary = NULL;
	} else {
		char line[MODEL_ERR_MAX + 128];

		refresh_time(now, when, sizeof(when));
		snprintf(line, sizeof(line),
			 "failed %s: the rows could not be put in place: %s; "
			 "the catalog is unchanged\n",
			 when, *err ? err : strerror(-rc));
		free(s->summary);
		s->summary = strdup(line);
	}
	s->state_ns = now;
	pthread_mutex_unlock(&r->lock);
	free(summary);
	refresh_log(m, "%s catalog refresh: %.*s", s->provider,
		    (int)strcspn(s->summary ? s->summary : "", "\n"),
		    s->summary ? s->summary : "");
}

static void *refresh_thread(void *arg)
{
	struct refresh_slot *s = arg;
	struct model *m = s->m;
	struct refresh *r = m->refresh;
	struct provider_catalog_sink sink = {
		.ctx = s,
		.type = refresh_sink_type,
		.offer = refresh_sink_offer,
		.progress = refresh_sink_progress,
		.note = refresh_sink_note,
	};
	char err[PROVIDER_ERR_MAX] = "";
	int rc = s->p->ops->catalog_refresh(s->p, &sink, &s->cancel, err,
					    sizeof(err));

	if (rc == 0 && s->nlines == 0) {
		snprintf(err, sizeof(err),
			 "the provider's API listed no instance types");
		rc = -ENODATA;
	}
	if (rc == 0) {
		refresh_finish(s);
	} else {
		char when[32], line[PROVIDER_ERR_MAX + 128];

		refresh_time(model_now(), when, sizeof(when));
		snprintf(line, sizeof(line),
			 "failed %s: %s; the catalog is unchanged\n", when,
			 rc == -ECANCELED ? "cancelled (unmount)"
			 : *err		  ? err
					  : strerror(-rc));
		pthread_mutex_lock(&r->lock);
		free(s->summary);
		s->summary = strdup(line);
		s->state_ns = model_now();
		pthread_mutex_unlock(&r->lock);
		refresh_log(m, "%s catalog refresh %.*s", s->provider,
			    (int)strcspn(line, "\n"), line);
	}
	refresh_rows_free(s);
	pthread_mutex_lock(&r->lock);
	s->running = false;
	pthread_mutex_unlock(&r->lock);
	refresh_notify(m, s->provider);
	return NULL;
}

/* --- the file --- */

bool refresh_offered(struct model *m, const char *provider)
{
	return refresh_slot_find(m, provider) != NULL;
}

int refresh_state(struct model *m, const char *provider, char **text,
		  size_t *len, int64_t *mtime_ns)
{
	struct refresh_slot *s = refresh_slot_find(m, provider);
	struct refresh *r = m->refresh;
	char line[128];
	const char *v;

	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&r->lock);
	if (s->running) {
		if (s->total)
			snprintf(line, sizeof(line),
				 "running %zu/%zu regions\n", s->done,
				 s->total);
		else
			snprintf(line, sizeof(line), "running\n");
		v = line;
	} else {
		v = s->summary ? s->summary
			       : "default: the compiled-in catalog\n";
	}
	*text = strdup(v);
	*len = strlen(v);
	if (mtime_ns)
		*mtime_ns = s->state_ns;
	pthread_mutex_unlock(&r->lock);
	return *text ? 0 : -ENOMEM;
}

/* Back to the compiled-in rows. */
static int refresh_default(struct model *m, struct refresh_slot *s)
{
	struct refresh *r = m->refresh;
	char err[MODEL_ERR_MAX] = "", *old_t, *old_o;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = store_catalog_drop(m->store, s->provider, err, sizeof(err));
	pthread_mutex_unlock(&m->lock);
	if (rc) {
		refresh_log(m, "catalog/%s/refresh: default was refused: %s",
			    s->provider, err);
		return rc;
	}
	pthread_mutex_lock(&r->lock);
	old_t = s->types;
	old_o = s->offers;
	s->types = s->offers = NULL;
	free(s->summary);
	s->summary = NULL;
	s->state_ns = model_now();
	pthread_mutex_unlock(&r->lock);
	free(old_t);
	free(old_o);
	rc = refresh_apply(m, s->provider, err, sizeof(err));
	refresh_log(m, "%s catalog: back to the compiled-in rows%s%s",
		    s->provider, rc ? ": " : "", rc ? err : "");
	refresh_notify(m, s->provider);
	return rc;
}

static bool refresh_word_is(const char *v, size_t n, const char *word)
{
	return n == strlen(word) && memcmp(v, word, n) == 0;
}

/* A request of refresh_request, the request lock held. */
static int refresh_start(struct model *m, struct refresh_slot *s,
			 const char *value, size_t n)
{
	struct refresh *r = m->refresh;
	const char *provider = s->provider;
	bool running;

	pthread_mutex_lock(&r->lock);
	running = s->running;
	pthread_mutex_unlock(&r->lock);
	if (running) {
		refresh_log(
			m, "catalog/%s/refresh: a refresh is under way already",
			provider);
		return -EBUSY;
	}
	if (n && !refresh_word_is(value, n, "refresh") &&
	    !refresh_word_is(value, n, "default")) {
		refresh_log(m,
			    "catalog/%s/refresh: \"%.*s\" is not default or "
			    "refresh (touch the file to refresh)",
			    provider, (int)(n < 40 ? n : 40), value);
		return -EINVAL;
	}
	if (refresh_word_is(value, n, "default"))
		return refresh_default(m, s);
	if (s->started) {
		pthread_join(s->thread, NULL);
		s->started = false;
	}
	pthread_mutex_lock(&r->lock);
	s->running = true;
	s->done = s->total = 0;
	s->state_ns = model_now();
	pthread_mutex_unlock(&r->lock);
	if (pthread_create(&s->thread, NULL, refresh_thread, s)) {
		pthread_mutex_lock(&r->lock);
		s->running = false;
		pthread_mutex_unlock(&r->lock);
		return -EAGAIN;
	}
	s->started = true;
	refresh_log(m, "%s catalog refresh started", provider);
	refresh_notify(m, provider);
	return 0;
}

int refresh_request(struct model *m, const char *provider, const char *value,
		    size_t len)
{
	struct refresh_slot *s = refresh_slot_find(m, provider);
	struct refresh *r = m->refresh;
	size_t b = 0, n;
	int rc;

	if (!s)
		return -ENOENT;
	while (len && (value[len - 1] == '\n' || value[len - 1] == ' ' ||
		       value[len - 1] == '\t'))
		len--;
	while (b < len && (value[b] == ' ' || value[b] == '\t'))
		b++;
	value += b;
	n = len - b;
	pthread_mutex_lock(&r->request);
	rc = refresh_start(m, s, value, n);
	pthread_mutex_unlock(&r->request);
	return rc;
}

int64_t refresh_catalog_ns(struct model *m)
{
	struct refresh *r = m->refresh;
	int64_t ns;

	if (!r)
		return 0;
	pthread_mutex_lock(&r->lock);
	ns = r->catalog_ns;
	pthread_mutex_unlock(&r->lock);
	return ns;
}

/* --- mount and unmount --- */

static int refresh_load_one(void *ctx, const struct store_catalog_text *text)
{
	struct model *m = ctx;
	struct refresh_slot *s = refresh_slot_find(m, text->provider);

	/* A provider no longer set up: its rows wait in the store. */
	if (!s)
		return 0;
	s->types = malloc(text->types_len + 1);
	s->offers = malloc(text->offers_len + 1);
	s->summary = strdup(text->summary);
	if (!s->types || !s->offers || !s->summary)
		return -ENOMEM;
	memcpy(s->types, text->types, text->types_len + 1);
	memcpy(s->offers, text->offers, text->offers_len + 1);
	s->types_len = text->types_len;
	s->offers_len = text->offers_len;
	s->state_ns = text->at_ns;
	return 0;
}

int refresh_open(struct model *m, char *err, size_t errlen)
{
	struct refresh *r = calloc(1, sizeof(*r));
	char why[MODEL_ERR_MAX] = "";
	bool any = false;
	int rc;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->request, NULL);
	r->catalog_ns = model_now();
	m->refresh = r;
	for (size_t i = 0; i < m->nproviders; i++) {
		struct refresh_slot *s = &r->slot[r->nslots];

		if (!m->providers[i]->ops->catalog_refresh)
			continue;
		s->p = m->providers[i];
		s->m = m;
		s->state_ns = r->catalog_ns;
		cancel_init(&s->cancel);
		snprintf(s->provider, sizeof(s->provider), "%s",
			 m->providers[i]->entry->name);
		r->nslots++;
	}
	rc = store_catalog_load(m->store, refresh_load_one, m, why,
				sizeof(why));
	if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	if (rc)
		refresh_log(m,
			    "the refreshed catalog was not read: %s; the "
			    "compiled-in rows serve",
			    why);
	for (size_t i = 0; i < r->nslots; i++)
		any = any || r->slot[i].types;
	if (any && refresh_apply(m, NULL, why, sizeof(why))) {
		refresh_log(m,
			    "the refreshed catalog does not load: %s; the "
			    "compiled-in rows serve until the next refresh",
			    why);
		for (size_t i = 0; i < r->nslots; i++) {
			free(r->slot[i].types);
			free(r->slot[i].offers);
			r->slot[i].types = r->slot[i].offers = NULL;
		}
	}
	return 0;
}

void refresh_close(struct model *m)
{
	struct refresh *r = m->refresh;

	if (!r)
		return;
	for (size_t i = 0; i < r->nslots; i++)
		cancel_fire(&r->slot[i].cancel);
	for (size_t i = 0; i < r->nslots; i++) {
		struct refresh_slot *s = &r->slot[i];

		if (s->started)
			pthread_join(s->thread, NULL);
		cancel_destroy(&s->cancel);
		free(s->types);
		free(s->offers);
		free(s->summary);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->request);
	free(r);
	m->refresh = NULL;
}
