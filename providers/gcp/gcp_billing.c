/* The SKU side of the gcp catalog refresh: Compute SKU descriptions read
 * into (series, core | RAM), GPUs and whole shared-core VMs, their region
 * rates kept sorted, and a machine type's price summed from them. */
#include "providers/gcp/gcp_billing.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GCP_SKU_WORDS 16

/* Where a description starts with one of these, it prices Spot VMs. */
static const char *const gcp_sku_spot_prefixes[] = {"Spot Preemptible ",
						    "Preemptible "};

/* Where the description names the place: what follows is not read. */
static const char *const gcp_sku_tails[] = {" running in ", " attached to "};

/* Words between a series and Core / Ram that do not change what is priced
 * ("N1 Predefined Instance Core", "N2D AMD Instance Ram"); any other word
 * (Custom, Sole Tenancy, Extended, Commitment, ...) makes the SKU one no
 * offer uses. */
static const char *const gcp_sku_plain_words[] = {"Instance", "Predefined",
						  "AMD", "Arm", "Intel"};

/* Series whose SKUs do not start with the series' name. */
static const struct {
	const char *phrase;
	const char *series;
} gcp_sku_phrases[] = {
	{"Compute optimized", "c2"},
	{"Memory-optimized", "m1"},
};

/* The shared-core types of an older generation, priced per VM. */
static const struct {
	const char *head;
	const char *type;
} gcp_sku_vms[] = {
	{"Micro Instance with burstable CPU", "f1-micro"},
	{"Small Instance with 1 VCPU", "g1-small"},
};

/* The shared-core E2 types are billed for a fraction of their vCPUs (so
 * e2-micro costs an eighth of e2-standard-2, whose memory is 8 times its). */
static const struct {
	const char *type;
	double vcpus;
} gcp_shared_cores[] = {
	{"e2-micro", 0.25},
	{"e2-small", 0.5},
	{"e2-medium", 1.0},
};

/* Words of GPU names that say nothing of the model; and variants the
 * hierarchy does not tell apart (still part of the price key). */
static const char *const gcp_gpu_noise[] = {"nvidia", "tesla", "gpu"};
static const char *const gcp_gpu_variants[] = {"mega"};

static const char *const gcp_rate_kinds[] = {"core", "RAM", "GPU", "VM"};

static bool gcp_word_in(const char *w, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(w, list[i]) == 0)
			return true;
	return false;
}

#define GCP_IN(w, table) gcp_word_in(w, table, sizeof(table) / sizeof(*(table)))

/* "E2", "N2D", "T2A", "C4A": letters, digits, then letters. */
static bool gcp_series_word(const char *w)
{
	const char *p = w;

	while (isupper((unsigned char)*p))
		p++;
	if (p == w || !isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	while (isupper((unsigned char)*p))
		p++;
	return *p == '\0' && p - w < 8;
}

static void gcp_lower(char *out, size_t len, const char *in)
{
	size_t i = 0;

	for (; in[i] && i + 1 < len; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	out[i] = '\0';
}

/* Split s in place at spaces: the word count (GCP_SKU_WORDS at most). */
static size_t gcp_split(char *s, char **w)
{
	size_t n = 0;

	for (char *t = strtok(s, " "); t && n < GCP_SKU_WORDS;
	     t = strtok(NULL, " "))
		w[n++] = t;
	return n;
}

void gcp_billing_gpu_key(const char *words, char *key, size_t keylen,
			 char *model, size_t modellen, double *memory_gib)
{
	char buf[128], *save = NULL;
	size_t k = 0, m = 0;
	double mem = 0;

	snprintf(buf, sizeof(buf), "%s", words ? words : "");
	for (char *t = strtok_r(buf, " -", &save); t;
	     t = strtok_r(NULL, " -", &save)) {
		char *end;
		double gb = strtod(t, &end);

		if (GCP_IN(t, gcp_gpu_noise))
			continue;
		if (end != t && strcasecmp(end, "gb") == 0 && gb > 0) {
			mem = gb;
			continue;
		}
		for (const char *c = t; *c; c++) {
			char u = (char)toupper((unsigned char)*c);

			if (k + 1 < keylen)
				key[k++] = u;
			if (!GCP_IN(t, gcp_gpu_variants) && m + 1 < modellen)
				model[m++] = u;
		}
	}
	if (keylen)
		key[k] = '\0';
	if (modellen)
		model[m] = '\0';
	if (k && mem > 0 && keylen > k)
		snprintf(key + k, keylen - k, "-%.0fGB", mem);
	if (memory_gib)
		*memory_gib = mem;
}

void gcp_billing_series(const char *type, char *out, size_t len)
{
	size_t n = strcspn(type, "-");

	snprintf(out, len, "%.*s", (int)n, type);
	gcp_lower(out, len, out);
}

/* Core or Ram of a series: its words w[0..n-1], the last the kind. */
static int gcp_describe_series(char **w, size_t n, struct gcp_sku_use *u)
{
	size_t first = 1;

	char two[96];

	u->key[0] = '\0';
	snprintf(two, sizeof(two), "%s %s", w[0], n > 2 ? w[1] : "");
	for (size_t i = 0;
	     i < sizeof(gcp_sku_phrases) / sizeof(*gcp_sku_phrases); i++) {
		/* A phrase of one word or of two. */
		if (strcmp(w[0], gcp_sku_phrases[i].phrase) == 0)
			first = 1;
		else if (n > 2 && strcmp(two, gcp_sku_phrases[i].phrase) == 0)
			first = 2;
		else
			continue;
		snprintf(u->key, sizeof(u->key), "%s",
			 gcp_sku_phrases[i].series);
		break;
	}
	if (!u->key[0]) {
		if (!gcp_series_word(w[0]))
			return -1;
		gcp_lower(u->key, sizeof(u->key), w[0]);
	}
	for (size_t i = first; i + 1 < n; i++)
		if (!GCP_IN(w[i], gcp_sku_plain_words))
			return -1;
	return n > first ? 0 : -1;
}

int gcp_billing_describe(const char *description, struct gcp_sku_use *u)
{
	char buf[256], *w[GCP_SKU_WORDS], *head = buf;
	size_t n;

	memset(u, 0, sizeof(*u));
	if (!description)
		return -1;
	snprintf(buf, sizeof(buf), "%s", description);
	for (size_t i = 0;
	     i < sizeof(gcp_sku_spot_prefixes) / sizeof(*gcp_sku_spot_prefixes);
	     i++) {
		size_t pl = strlen(gcp_sku_spot_prefixes[i]);

		if (strncmp(head, gcp_sku_spot_prefixes[i], pl) == 0) {
			head += pl;
			u->spot = true;
			break;
		}
	}
	for (size_t i = 0; i < sizeof(gcp_sku_tails) / sizeof(*gcp_sku_tails);
	     i++) {
		char *t = strstr(head, gcp_sku_tails[i]);

		if (t)
			*t = '\0';
	}
	for (size_t i = 0; i < sizeof(gcp_sku_vms) / sizeof(*gcp_sku_vms); i++)
		if (strcmp(head, gcp_sku_vms[i].head) == 0) {
			u->kind = GCP_RATE_VM;
			snprintf(u->key, sizeof(u->key), "%s",
				 gcp_sku_vms[i].type);
			return 0;
		}
	n = gcp_split(head, w);
	if (n < 2)
		return -1;
	if (strcmp(w[n - 1], "GPU") == 0) {
		char words[128] = "";
		size_t len = 0;

		for (size_t i = 0; i + 1 < n && len < sizeof(words); i++)
			len += (size_t)snprintf(words + len,
						sizeof(words) - len, "%s%s",
						i ? " " : "", w[i]);
		u->kind = GCP_RATE_GPU;
		gcp_billing_gpu_key(words, u->key, sizeof(u->key), NULL, 0,
				    NULL);
		return u->key[0] ? 0 : -1;
	}
	if (strcmp(w[n - 1], "Core") == 0)
		u->kind = GCP_RATE_CORE;
	else if (strcmp(w[n - 1], "Ram") == 0)
		u->kind = GCP_RATE_RAM;
	else
		return -1;
	return gcp_describe_series(w, n, u);
}

/* --- rates --- */

/* A Money's amount: units (an int64 as a string, or a number) + nanos. */
static double gcp_money(const cJSON *m)
{
	const cJSON *units = cJSON_GetObjectItemCaseSensitive(m, "units");
	const cJSON *nanos = cJSON_GetObjectItemCaseSensitive(m, "nanos");
	const cJSON *cur = cJSON_GetObjectItemCaseSensitive(m, "currencyCode");
	double v = 0;

	if (!cJSON_IsObject(m) ||
	    (cJSON_IsString(cur) && strcmp(cur->valuestring, "USD") != 0))
		return NAN;
	if (cJSON_IsString(units)) {
		char *end;

		v = strtod(units->valuestring, &end);
		if (end == units->valuestring || *end)
			return NAN;
	} else if (cJSON_IsNumber(units)) {
		v = units->valuedouble;
	}
	if (cJSON_IsNumber(nanos))
		v += nanos->valuedouble / 1e9;
	return v >= 0 ? v : NAN;
}

/* The rate of the first tier (the one from zero use), in USD per unit. */
static double gcp_sku_rate(const cJSON *sku, const char **unit)
{
	const cJSON *info = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(sku, "pricingInfo"), 0);
	const cJSON *expr =
		cJSON_GetObjectItemCaseSensitive(info, "pricingExpression");
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(expr, "usageUnit");
	const cJSON *tiers =
		cJSON_GetObjectItemCaseSensitive(expr, "tieredRates");
	const cJSON *tier, *best = NULL;
	double best_start = INFINITY;

	*unit = cJSON_IsString(u) ? u->valuestring : "";
	cJSON_ArrayForEach(tier, tiers)
	{
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(
			tier, "startUsageAmount");
		double start = cJSON_IsNumber(s) ? s->valuedouble : 0;

		if (start < best_start) {
			best_start = start;
			best = tier;
		}
	}
	return best ? gcp_money(cJSON_GetObjectItemCaseSensitive(best,
								 "unitPrice"))
		    : NAN;
}

static const char *gcp_sku_text(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : "";
}

int gcp_rates_add(struct gcp_rates *r, const cJSON *sku)
{
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(sku, "category");
	const cJSON *regions =
		cJSON_GetObjectItemCaseSensitive(sku, "serviceRegions");
	const char *usage = gcp_sku_text(cat, "usageType"), *unit;
	const cJSON *region;
	struct gcp_sku_use u;
	double rate;
	bool spot;

	if (strcmp(gcp_sku_text(cat, "resourceFamily"), "Compute") != 0)
		return 1;
	if (strcmp(usage, "OnDemand") == 0)
		spot = false;
	else if (strcmp(usage, "Preemptible") == 0)
		spot = true;
	else
		return 1; /* commitments */
	if (gcp_billing_describe(gcp_sku_text(sku, "description"), &u) ||
	    (u.spot && !spot))
		return 1;
	rate = gcp_sku_rate(sku, &unit);
	if (isnan(rate) ||
	    strcmp(unit, u.kind == GCP_RATE_RAM ? "GiBy.h" : "h") != 0)
		return 1;
	r->seq++;
	cJSON_ArrayForEach(region, regions)
	{
		struct gcp_rate *x;

		if (!cJSON_IsString(region))
			continue;
		if (r->n == r->cap) {
			size_t cap = r->cap ? r->cap * 2 : 256;
			struct gcp_rate *v = realloc(r->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			r->v = v;
			r->cap = cap;
		}
		x = &r->v[r->n++];
		memset(x, 0, sizeof(*x));
		snprintf(x->key, sizeof(x->key), "%s", u.key);
		snprintf(x->region, sizeof(x->region), "%s",
			 region->valuestring);
		x->kind = u.kind;
		x->spot = spot;
		x->value = rate;
		x->seq = r->seq;
	}
	r->used++;
	return 0;
}

static int gcp_rate_cmp_key(const struct gcp_rate *x, const struct gcp_rate *y)
{
	int c;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if ((c = strcmp(x->key, y->key)) || (c = strcmp(x->region, y->region)))
		return c;
	return (int)x->spot - (int)y->spot;
}

static int gcp_rate_cmp(const void *a, const void *b)
{
	const struct gcp_rate *x = a, *y = b;
	int c = gcp_rate_cmp_key(x, y);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void gcp_rates_sort(struct gcp_rates *r)
{
	size_t o = 0;

	if (!r->n)
		return;
	qsort(r->v, r->n, sizeof(*r->v), gcp_rate_cmp);
	/* Of two SKUs that price the same, the first listed stays. */
	for (size_t i = 0; i < r->n; i++)
		if (!o || gcp_rate_cmp_key(&r->v[o - 1], &r->v[i]) != 0)
			r->v[o++] = r->v[i];
	r->n = o;
}

double gcp_rates_get(const struct gcp_rates *r, enum gcp_rate_kind kind,
		     const char *key, const char *region, bool spot)
{
	struct gcp_rate k = {.kind = kind, .spot = spot};
	size_t lo = 0, hi = r->n;

	snprintf(k.key, sizeof(k.key), "%s", key);
	snprintf(k.region, sizeof(k.region), "%s", region);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = gcp_rate_cmp_key(&r->v[mid], &k);

		if (c == 0)
			return r->v[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NAN;
}

void gcp_rates_free(struct gcp_rates *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

/* --- prices --- */

static double gcp_billing_rate(const struct gcp_rates *r,
			       enum gcp_rate_kind kind, const char *key,
			       const char *region, bool spot, char *missing,
			       size_t mlen)
{
	double v = gcp_rates_get(r, kind, key, region, spot);

	if (isnan(v) && missing && mlen && !*missing)
		snprintf(missing, mlen, "%.47s %s", key, gcp_rate_kinds[kind]);
	return v;
}

double gcp_billing_price(const struct gcp_rates *r, const struct gcp_vm *vm,
			 const char *region, bool spot, char *missing,
			 size_t mlen)
{
	char series[GCP_BILLING_KEY_MAX];
	double vcpus = vm->vcpus, total, core, ram;

	if (missing && mlen)
		*missing = '\0';
	total = gcp_rates_get(r, GCP_RATE_VM, vm->name, region, spot);
	if (!isnan(total))
		return total;
	for (size_t i = 0;
	     i < sizeof(gcp_shared_cores) / sizeof(*gcp_shared_cores); i++)
		if (strcmp(vm->name, gcp_shared_cores[i].type) == 0)
			vcpus = gcp_shared_cores[i].vcpus;
	gcp_billing_series(vm->name, series, sizeof(series));
	core = gcp_billing_rate(r, GCP_RATE_CORE, series, region, spot, missing,
				mlen);
	ram = gcp_billing_rate(r, GCP_RATE_RAM, series, region, spot, missing,
			       mlen);
	if (isnan(vcpus) || isnan(vm->memory_bytes))
		return NAN;
	total = vcpus * core + vm->memory_bytes / (1024.0 * 1024 * 1024) * ram;
	if (vm->accelerator && *vm->accelerator && vm->accelerator_count > 0) {
		char key[GCP_BILLING_KEY_MAX], model[GCP_BILLING_KEY_MAX];

		gcp_billing_gpu_key(vm->accelerator, key, sizeof(key), model,
				    sizeof(model), NULL);
		total += vm->accelerator_count *
			 gcp_billing_rate(r, GCP_RATE_GPU, key, region, spot,
					  missing, mlen);
	}
	return total;
}
