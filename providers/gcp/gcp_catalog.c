/* The gcp catalog refresh. A thread reads the Compute SKUs' pages of the
 * Cloud Billing Catalog while the calling thread reads the machine types'
 * and accelerator types' aggregatedLists; the offers (a type in a region,
 * its zones, its prices) are made once both are done, and everything
 * reaches the sink from the calling thread at the end, so that a refresh
 * that fails hands nothing over. */
#include "providers/gcp/gcp_catalog.h"

#include "providers/cancel.h"
#include "providers/gcp/gcp_billing.h"
#include "providers/gcp/gcp_machine.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GCP_CAT_ERR  512
#define GCP_CAT_NAME 64
#define GCP_CAT_ZONE 48
/* The Billing API's largest page: fewer calls. */
#define GCP_SKU_PAGE	5000
#define GCP_MISSING_MAX 4

/* A machine type or an accelerator type in a zone. */
struct gcp_cat_row {
	char name[GCP_CAT_NAME];
	char region[GCP_CAT_ZONE];
	char zone[GCP_CAT_ZONE];
	char description[GCP_CAT_NAME]; /* accelerator types' */
};

struct gcp_cat_list {
	void *v;
	size_t n, cap, size;
};

struct gcp_cat_offer {
	const struct gcp_machine *type;
	const char *region; /* a row's */
	char *zones;
	double price, spot;
};

struct gcp_refresh {
	struct gcp_api *api;
	struct cancel *cancel;
	const char *billing_url, *billing_key;
	struct gcp_cat_list types, rows, accels, offers, notes;
	struct gcp_rates rates;
	atomic_bool abort; /* the machine types failed: the SKUs stop */
	int billing_rc;
	char billing_err[GCP_CAT_ERR];
};

/* --- lists --- */

static void *gcp_list_add(struct gcp_cat_list *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *v = realloc(l->v, cap * l->size);

		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	return memset((char *)l->v + l->n++ * l->size, 0, l->size);
}

__attribute__((format(printf, 2, 3))) static void
gcp_note(struct gcp_refresh *r, const char *fmt, ...)
{
	char **slot = gcp_list_add(&r->notes);
	char line[PROVIDER_MSG_MAX];
	va_list ap;

	if (!slot)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	*slot = strdup(line);
	if (!*slot)
		r->notes.n--;
}

static int gcp_type_cmp(const void *a, const void *b)
{
	return strcmp(((const struct gcp_machine *)a)->name,
		      ((const struct gcp_machine *)b)->name);
}

static int gcp_row_cmp(const void *a, const void *b)
{
	const struct gcp_cat_row *x = a, *y = b;
	int c = strcmp(x->region, y->region);

	if (c || (c = strcmp(x->name, y->name)))
		return c;
	return strcmp(x->zone, y->zone);
}

/* Sort the types by name, one of each kept (every zone lists them). */
static void gcp_types_compact(struct gcp_cat_list *l)
{
	struct gcp_machine *v = l->v;
	size_t o = 0;

	if (!l->n)
		return;
	qsort(v, l->n, sizeof(*v), gcp_type_cmp);
	for (size_t i = 0; i < l->n; i++)
		if (!o || strcmp(v[o - 1].name, v[i].name) != 0)
			v[o++] = v[i];
	l->n = o;
}

static const struct gcp_machine *gcp_type_find(const struct gcp_cat_list *l,
					       const char *name)
{
	struct gcp_machine key = {0};

	snprintf(key.name, sizeof(key.name), "%s", name);
	return l->n ? bsearch(&key, l->v, l->n, sizeof(key), gcp_type_cmp)
		    : NULL;
}

/* --- what the lists give --- */

/* "zones/us-central1-a": the zone and its region; -1 for another scope. */
static int gcp_scope_zone(const char *scope, char *zone, char *region)
{
	const char *dash;

	if (!scope || strncmp(scope, "zones/", 6) != 0 || !scope[6])
		return -1;
	snprintf(zone, GCP_CAT_ZONE, "%s", scope + 6);
	dash = strrchr(zone, '-');
	if (!dash)
		return -1;
	snprintf(region, GCP_CAT_ZONE, "%.*s", (int)(dash - zone), zone);
	return 0;
}

/* An aggregatedList item's row in l (its name, zone and region): 0, 1 when
 * it has no name or is not of a zone, -ENOMEM. */
static int gcp_row_add(struct gcp_cat_list *l, const cJSON *item,
		       const char *scope, struct gcp_cat_row **out)
{
	char zone[GCP_CAT_ZONE], region[GCP_CAT_ZONE];
	struct gcp_cat_row *row;

	if (!*gcp_machine_text(item, "name") ||
	    gcp_scope_zone(scope, zone, region))
		return 1;
	row = gcp_list_add(l);
	if (!row)
		return -ENOMEM;
	snprintf(row->name, sizeof(row->name), "%s",
		 gcp_machine_text(item, "name"));
	snprintf(row->zone, sizeof(row->zone), "%s", zone);
	snprintf(row->region, sizeof(row->region), "%s", region);
	*out = row;
	return 0;
}

/* A machineTypes.aggregatedList item: its zone's row, and the type. */
static int gcp_machine_type_item(void *ctx, const cJSON *item,
				 const char *scope)
{
	struct gcp_refresh *r = ctx;
	const char *state = gcp_machine_text(
		cJSON_GetObjectItemCaseSensitive(item, "deprecated"), "state");
	struct gcp_cat_row *row = NULL;
	struct gcp_machine *x;
	int rc;

	if (strcmp(state, "OBSOLETE") == 0 || strcmp(state, "DELETED") == 0)
		return 0;
	rc = gcp_row_add(&r->rows, item, scope, &row);
	if (rc)
		return rc < 0 ? rc : 0;
	/* Every zone lists the types again: compact before growing. */
	if (r->types.n == r->types.cap && r->types.cap)
		gcp_types_compact(&r->types);
	if (r->types.n &&
	    strcmp(((struct gcp_machine *)r->types.v)[r->types.n - 1].name,
		   row->name) == 0)
		return 0;
	x = gcp_list_add(&r->types);
	if (!x)
		return -ENOMEM;
	gcp_machine_fill(x, item);
	return 0;
}

static int gcp_accelerator_item(void *ctx, const cJSON *item, const char *scope)
{
	struct gcp_refresh *r = ctx;
	struct gcp_cat_row *row = NULL;
	int rc = gcp_row_add(&r->accels, item, scope, &row);

	if (rc)
		return rc < 0 ? rc : 0;
	snprintf(row->description, sizeof(row->description), "%s",
		 gcp_machine_text(item, "description"));
	return 0;
}

/* --- the SKUs --- */

/* One page of SKUs; its next page token into next ("" at the end). */
static int gcp_sku_page(struct gcp_refresh *r, char *next, size_t nextlen)
{
	char tok[3 * 1024] = "", key[3 * 256 + 1] = "";
	const char *base = r->billing_url;
	size_t bl = strlen(base);
	const cJSON *sku, *skus, *nt;
	struct gcp_call c;
	int rc;

	if (gcp_api_encode(next, tok, sizeof(tok)) ||
	    gcp_api_encode(r->billing_key, key, sizeof(key))) {
		snprintf(r->billing_err, sizeof(r->billing_err),
			 "the Cloud Billing page token or key is too long");
		return -ENAMETOOLONG;
	}
	gcp_call_init(&c, "GET", "%s%sservices/%s/skus?pageSize=%d%s%s%s%s",
		      base, bl && base[bl - 1] == '/' ? "" : "/",
		      GCP_BILLING_COMPUTE, GCP_SKU_PAGE,
		      *tok ? "&pageToken=" : "", tok, *key ? "&key=" : "", key);
	c.no_auth = *key != '\0';
	explicit_bzero(key, sizeof(key));
	rc = gcp_api_do(r->api, &c, 1, r->cancel);
	explicit_bzero(c.url, sizeof(c.url));
	if (rc) {
		snprintf(r->billing_err, sizeof(r->billing_err), "%s", c.err);
		gcp_call_clear(&c);
		return rc;
	}
	skus = cJSON_GetObjectItemCaseSensitive(c.answer, "skus");
	cJSON_ArrayForEach(sku, skus)
	{
		if (gcp_rates_add(&r->rates, sku) < 0) {
			snprintf(r->billing_err, sizeof(r->billing_err),
				 "out of memory");
			gcp_call_clear(&c);
			return -ENOMEM;
		}
	}
	nt = cJSON_GetObjectItemCaseSensitive(c.answer, "nextPageToken");
	snprintf(next, nextlen, "%s",
		 cJSON_IsString(nt) ? nt->valuestring : "");
	gcp_call_clear(&c);
	return 0;
}

static void *gcp_skus_thread(void *arg)
{
	struct gcp_refresh *r = arg;
	char next[1024] = "";
	int rc;

	do {
		if (atomic_load(&r->abort)) {
			rc = -ECANCELED;
			snprintf(r->billing_err, sizeof(r->billing_err),
				 "stopped");
			break;
		}
		rc = gcp_sku_page(r, next, sizeof(next));
	} while (rc == 0 && *next);
	if (rc == 0)
		gcp_rates_sort(&r->rates);
	r->billing_rc = rc;
	return NULL;
}

/* --- offers --- */

static bool gcp_accel_in(const struct gcp_refresh *r, const char *name,
			 const char *region, const char *zone)
{
	struct gcp_cat_row key = {0};

	snprintf(key.name, sizeof(key.name), "%s", name);
	snprintf(key.region, sizeof(key.region), "%s", region);
	snprintf(key.zone, sizeof(key.zone), "%s", zone);
	return r->accels.n && bsearch(&key, r->accels.v, r->accels.n,
				      sizeof(key), gcp_row_cmp);
}

/* Whether the accelerator list names name anywhere (a type whose GPU it
 * does not know keeps every zone of its own list). */
static const struct gcp_cat_row *gcp_accel_any(const struct gcp_refresh *r,
					       const char *name)
{
	const struct gcp_cat_row *v = r->accels.v;

	for (size_t i = 0; i < r->accels.n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

/* Prices missing, for one note per market. */
struct gcp_missing {
	char what[GCP_MISSING_MAX][GCP_BILLING_KEY_MAX + 8];
	size_t nwhat, offers;
};

static void gcp_missing_add(struct gcp_missing *m, const char *what)
{
	m->offers++;
	for (size_t i = 0; i < m->nwhat; i++)
		if (strcmp(m->what[i], what) == 0)
			return;
	if (m->nwhat < GCP_MISSING_MAX)
		snprintf(m->what[m->nwhat++], sizeof(m->what[0]), "%s", what);
}

static void gcp_missing_note(struct gcp_refresh *r, const struct gcp_missing *m,
			     const char *market)
{
	char list[GCP_MISSING_MAX * (GCP_BILLING_KEY_MAX + 10)] = "";
	size_t len = 0;

	if (!m->offers)
		return;
	for (size_t i = 0; i < m->nwhat && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", m->what[i]);
	gcp_note(r,
		 "%zu offers have no %s price (no SKU for %s%s); the "
		 "catalog's are kept",
		 m->offers, market, list,
		 m->nwhat == GCP_MISSING_MAX ? ", ..." : "");
}

static int gcp_offer_zone(struct gcp_cat_offer *o, size_t *len, size_t *cap,
			  const char *zone)
{
	size_t zl = strlen(zone);

	if (*len + zl + 2 > *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		char *z;

		while (c < *len + zl + 2)
			c *= 2;
		z = realloc(o->zones, c);
		if (!z)
			return -ENOMEM;
		o->zones = z;
		*cap = c;
	}
	if (*len)
		o->zones[(*len)++] = ' ';
	memcpy(o->zones + *len, zone, zl + 1);
	*len += zl;
	return 0;
}

/* The offer of rows [i, k) (one type in one region). */
static int gcp_offer_make(struct gcp_refresh *r, const struct gcp_machine *t,
			  size_t i, size_t k, struct gcp_missing *miss)
{
	const struct gcp_cat_row *rows = r->rows.v;
	bool filter = *t->accel_api && gcp_accel_any(r, t->accel_api);
	struct gcp_cat_offer *o = gcp_list_add(&r->offers);
	struct gcp_vm vm = {t->name, t->t.vcpus, t->t.memory_bytes,
			    t->accel_api, t->t.accelerator_count};
	size_t len = 0, cap = 0;
	char missing[GCP_BILLING_KEY_MAX + 8];

	if (!o)
		return -ENOMEM;
	o->type = t;
	o->region = rows[i].region;
	for (; i < k; i++)
		if ((!filter || gcp_accel_in(r, t->accel_api, rows[i].region,
					     rows[i].zone)) &&
		    gcp_offer_zone(o, &len, &cap, rows[i].zone))
			return -ENOMEM;
	if (!o->zones) { /* its GPU is in none of its zones */
		r->offers.n--;
		return 0;
	}
	o->price = o->spot = NAN;
	if (r->billing_rc || !r->rates.used)
		return 0;
	o->price = gcp_billing_price(&r->rates, &vm, o->region, false, missing,
				     sizeof(missing));
	if (isnan(o->price))
		gcp_missing_add(&miss[0], missing);
	o->spot = gcp_billing_price(&r->rates, &vm, o->region, true, missing,
				    sizeof(missing));
	if (isnan(o->spot))
		gcp_missing_add(&miss[1], missing);
	return 0;
}

static int gcp_offers_make(struct gcp_refresh *r)
{
	const struct gcp_cat_row *rows = r->rows.v;
	struct gcp_missing miss[2];

	memset(miss, 0, sizeof(miss));
	if (r->rows.n)
		qsort(r->rows.v, r->rows.n, sizeof(*rows), gcp_row_cmp);
	if (r->accels.n)
		qsort(r->accels.v, r->accels.n, sizeof(*rows), gcp_row_cmp);
	for (size_t i = 0; i < r->rows.n;) {
		const struct gcp_machine *t =
			gcp_type_find(&r->types, rows[i].name);
		size_t k = i + 1;

		while (k < r->rows.n &&
		       strcmp(rows[k].region, rows[i].region) == 0 &&
		       strcmp(rows[k].name, rows[i].name) == 0)
			k++;
		if (t && gcp_offer_make(r, t, i, k, miss))
			return -ENOMEM;
		i = k;
	}
	gcp_missing_note(r, &miss[0], "on-demand");
	gcp_missing_note(r, &miss[1], "spot");
	return 0;
}

/* The types' accelerators named as the catalog does. */
static void gcp_types_accelerators(struct gcp_refresh *r)
{
	struct gcp_machine *v = r->types.v;

	for (size_t i = 0; i < r->types.n; i++) {
		const struct gcp_cat_row *a;

		if (!*v[i].accel_api)
			continue;
		a = gcp_accel_any(r, v[i].accel_api);
		gcp_machine_name_accelerator(&v[i], a ? a->description : NULL);
	}
}

/* --- the refresh --- */

static int gcp_deliver(struct gcp_refresh *r,
		       const struct provider_catalog_sink *s, char *err,
		       size_t errlen)
{
	const struct gcp_machine *types = r->types.v;
	const struct gcp_cat_offer *offers = r->offers.v;
	char **notes = r->notes.v;
	size_t regions = 0, done = 0;
	int rc;

	for (size_t i = 0; i < r->types.n; i++) {
		struct provider_catalog_type t = types[i].t;

		t.name = types[i].name; /* not kept: the array moved */
		if (s->type && (rc = s->type(s->ctx, &t))) {
			snprintf(err, errlen,
				 "the catalog did not take type %s: %s",
				 types[i].name, strerror(-rc));
			return rc;
		}
	}
	for (size_t i = 0; i < r->offers.n; i++)
		regions += !i ||
			   strcmp(offers[i].region, offers[i - 1].region) != 0;
	for (size_t i = 0; i < r->offers.n; i++) {
		struct provider_catalog_offer o = {
			offers[i].type->name, offers[i].region, offers[i].price,
			offers[i].spot,	      offers[i].zones,
		};

		if (s->offer && (rc = s->offer(s->ctx, &o))) {
			snprintf(err, errlen,
				 "the catalog did not take the offer of %s "
				 "in %s: %s",
				 o.type, o.region, strerror(-rc));
			return rc;
		}
		if (s->progress &&
		    (i + 1 == r->offers.n ||
		     strcmp(offers[i + 1].region, offers[i].region) != 0))
			s->progress(s->ctx, ++done, regions);
	}
	for (size_t i = 0; s->note && i < r->notes.n; i++)
		s->note(s->ctx, notes[i]);
	return 0;
}

static void gcp_refresh_free(struct gcp_refresh *r)
{
	struct gcp_cat_offer *offers = r->offers.v;
	char **notes = r->notes.v;

	for (size_t i = 0; i < r->offers.n; i++)
		free(offers[i].zones);
	for (size_t i = 0; i < r->notes.n; i++)
		free(notes[i]);
	free(r->types.v);
	free(r->rows.v);
	free(r->accels.v);
	free(r->offers.v);
	free(r->notes.v);
	gcp_rates_free(&r->rates);
}

/* The Compute lists: the machine types (the refresh fails without them),
 * then the accelerator types (a note when they fail). */
static int gcp_compute_lists(struct gcp_refresh *r, char *err, size_t errlen)
{
	const char *project = gcp_api_project(r->api);
	char url[GCP_URL_MAX], lerr[GCP_CAT_ERR] = "";
	int rc;

	if (!*project) {
		snprintf(err, errlen,
			 "no project is known to list the machine types of "
			 "(set [gcp] project)");
		return -EINVAL;
	}
	/* A zone that does not answer is a warning of its scope, not the
	 * list's failure. */
	snprintf(url, sizeof(url),
		 "projects/%.256s/aggregated/machineTypes"
		 "?returnPartialSuccess=true",
		 project);
	rc = gcp_api_list(r->api, url, NULL, gcp_machine_type_item, r,
			  r->cancel, lerr, sizeof(lerr));
	if (rc) {
		snprintf(err, errlen, "machineTypes.aggregatedList: %s",
			 rc == -ENOMEM ? "out of memory" : lerr);
		return rc;
	}
	gcp_types_compact(&r->types);
	if (!r->types.n) {
		snprintf(err, errlen,
			 "machineTypes.aggregatedList lists no machine type in "
			 "project %s",
			 project);
		return -ENOENT;
	}
	snprintf(url, sizeof(url),
		 "projects/%.256s/aggregated/acceleratorTypes"
		 "?returnPartialSuccess=true",
		 project);
	rc = gcp_api_list(r->api, url, NULL, gcp_accelerator_item, r, r->cancel,
			  lerr, sizeof(lerr));
	if (rc == -ECANCELED || rc == -ENOMEM) {
		snprintf(err, errlen, "acceleratorTypes.aggregatedList: %s",
			 rc == -ENOMEM ? "out of memory" : lerr);
		return rc;
	}
	if (rc) {
		r->accels.n = 0;
		gcp_note(r,
			 "the accelerator types were not obtained "
			 "(acceleratorTypes.aggregatedList: %s); the zones of "
			 "types with GPUs are the machine types' own",
			 lerr);
	}
	gcp_types_accelerators(r);
	return 0;
}

int gcp_catalog_refresh(struct gcp_api *api, const char *billing_url,
			const char *billing_key,
			const struct provider_catalog_sink *sink,
			struct cancel *cancel, char *err, size_t errlen)
{
	struct gcp_refresh *r = calloc(1, sizeof(*r));
	pthread_t tid;
	bool billing = false;
	int rc;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->api = api;
	r->cancel = cancel;
	r->billing_url =
		billing_url && *billing_url ? billing_url : GCP_BILLING_DEFAULT;
	r->billing_key = billing_key ? billing_key : "";
	r->types.size = sizeof(struct gcp_machine);
	r->rows.size = r->accels.size = sizeof(struct gcp_cat_row);
	r->offers.size = sizeof(struct gcp_cat_offer);
	r->notes.size = sizeof(char *);
	if (pthread_create(&tid, NULL, gcp_skus_thread, r) == 0)
		billing = true;
	else
		gcp_skus_thread(
			r); /* no thread to spare: one after the other */
	rc = gcp_compute_lists(r, err, errlen);
	if (rc)
		atomic_store(&r->abort, true);
	if (billing)
		pthread_join(tid, NULL);
	if (cancel_requested(cancel)) {
		snprintf(err, errlen, "the catalog refresh was cancelled");
		rc = -ECANCELED;
	}
	if (rc == 0 && r->billing_rc)
		gcp_note(r,
			 "on-demand and spot prices were not obtained (Cloud "
			 "Billing: %s); the catalog's prices are kept",
			 r->billing_err);
	else if (rc == 0 && !r->rates.used)
		gcp_note(r, "the Cloud Billing Catalog lists no Compute SKU "
			    "the prices are made of; the catalog's prices are "
			    "kept");
	if (rc == 0 && gcp_offers_make(r)) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	if (rc == 0)
		rc = gcp_deliver(r, sink, err, errlen);
	gcp_refresh_free(r);
	free(r);
	return rc;
}
