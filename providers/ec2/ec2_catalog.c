/* The ec2 catalog refresh. DescribeRegions first; then, while the calling
 * thread pages through DescribeInstanceTypes, a few worker threads carry
 * out four independent chains of pages per region (the region's and the
 * zones' offerings, the spot price history, the Price List's on-demand
 * prices); the last chain of a region to end merges them into its offers.
 * Everything reaches the sink from the calling thread once all is done,
 * so that a refresh that fails hands nothing over. */
#include "providers/ec2/ec2_catalog.h"

#include "providers/cancel.h"
#include "providers/ec2/aws_json.h"
#include "providers/ec2/ec2_types.h"
#include "providers/ec2/ec2_xml.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EC2_CAT_THREADS	   16
#define EC2_CAT_ERR	   512
#define EC2_NAME	   64
#define EC2_ZONE	   48
#define EC2_FIRST_REGION   "us-east-1"
#define EC2_PRICING_TARGET "AWSPriceListService.GetProducts"
#define EC2_PRICING_REGION "us-east-1"
/* The APIs' largest pages: fewer calls. */
#define EC2_TYPES_PAGE	   "100"
#define EC2_OFFERINGS_PAGE "1000"
#define EC2_SPOT_PAGE	   "1000"
#define EC2_PRICES_PAGE	   100

/* The chains of calls of one region. */
enum ec2_chain {
	EC2_CHAIN_REGION, /* DescribeInstanceTypeOfferings, region */
	EC2_CHAIN_ZONES,  /* DescribeInstanceTypeOfferings, zones */
	EC2_CHAIN_SPOT,	  /* DescribeSpotPriceHistory */
	EC2_CHAIN_PRICES, /* pricing GetProducts */
	EC2_CHAINS,
};

/* What one chain read: (type, zone or "", value, time) rows. */
struct ec2_row {
	char type[EC2_NAME];
	char zone[EC2_ZONE];
	double value;
	time_t when;
};

struct ec2_rows {
	struct ec2_row *v;
	size_t n, cap;
};

struct ec2_offer {
	char *zones; /* space-separated */
	char type[EC2_NAME];
	double price, spot;
	size_t zlen, zcap;
};

struct ec2_region {
	struct ec2_client *ec2;
	struct ec2_offer *offers; /* sorted by type once merged */
	size_t noffers;
	struct ec2_rows rows[EC2_CHAINS];
	char name[EC2_NAME];
	char err[EC2_CHAINS][EC2_CAT_ERR]; /* "" when the chain succeeded */
	int rc[EC2_CHAINS];
	int left; /* chains not ended yet (under the refresh's lock) */
};

struct ec2_refresh {
	pthread_mutex_t lock;
	const struct provider_catalog_sink *sink;
	struct cancel *cancel;
	struct ec2_client *pricing;
	struct ec2_region *regions;
	const struct ec2_retry *retry;
	struct aws_config cfg;
	char start_time[32]; /* StartTime of DescribeSpotPriceHistory */
	char pricing_denied[EC2_CAT_ERR];
	size_t nregions, next_task, done;
	atomic_bool abort; /* the refresh failed: the workers stop */
};

/* --- rows --- */

static int ec2_rows_add(struct ec2_rows *l, const char *type, const char *zone,
			double value, time_t when)
{
	struct ec2_row *r;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		struct ec2_row *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	r = &l->v[l->n++];
	snprintf(r->type, sizeof(r->type), "%s", type);
	snprintf(r->zone, sizeof(r->zone), "%s", zone);
	r->value = value;
	r->when = when;
	return 0;
}

static void ec2_rows_free(struct ec2_rows *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int ec2_row_cmp(const void *a, const void *b)
{
	const struct ec2_row *x = a, *y = b;
	int c = strcmp(x->type, y->type);

	return c ? c : strcmp(x->zone, y->zone);
}

/* "2026-07-01T12:00:00.000Z" as seconds since the epoch; 0 unknown. */
static time_t ec2_time(const char *s)
{
	struct tm tm = {0};

	if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

/* --- reading the EC2 answers --- */

static int ec2_offering_item(const xmlNode *item, void *ctx)
{
	char type[EC2_NAME], loc[EC2_ZONE], lt[32];

	ec2_xml_text(item, "instanceType", type, sizeof(type));
	ec2_xml_text(item, "location", loc, sizeof(loc));
	ec2_xml_text(item, "locationType", lt, sizeof(lt));
	if (!*type)
		return 0;
	return ec2_rows_add(ctx, type, strcmp(lt, "region") == 0 ? "" : loc,
			    NAN, 0);
}

static int ec2_spot_item(const xmlNode *item, void *ctx)
{
	char type[EC2_NAME], zone[EC2_ZONE], price[32], when[48], product[48];
	char *end;
	double v;

	ec2_xml_text(item, "instanceType", type, sizeof(type));
	ec2_xml_text(item, "availabilityZone", zone, sizeof(zone));
	ec2_xml_text(item, "spotPrice", price, sizeof(price));
	ec2_xml_text(item, "timestamp", when, sizeof(when));
	ec2_xml_text(item, "productDescription", product, sizeof(product));
	v = strtod(price, &end);
	if (!*type || end == price || *end ||
	    strcmp(product, "Linux/UNIX") != 0)
		return 0;
	return ec2_rows_add(ctx, type, zone, v, ec2_time(when));
}

/* --- the chains --- */

/* Every page of one EC2 call with the parameters given as NAME, VALUE
 * pairs (NULL-terminated) and NextToken, each page's items of `set` read
 * by fn(item, ctx). */
static int ec2_pages(struct ec2_refresh *r, struct ec2_client *c,
		     const char *action, const char *const *params,
		     const char *set, int (*fn)(const xmlNode *, void *),
		     void *ctx, char *err, size_t errlen)
{
	char next[2048] = "";

	do {
		struct ec2_query q;
		char code[EC2_CODE_MAX], *body = NULL;
		size_t len = 0;
		int rc, prc;

		if (atomic_load(&r->abort)) {
			snprintf(err, errlen, "%s: stopped", action);
			return -ECANCELED;
		}
		ec2_query_init(&q, action);
		for (size_t i = 0; params[i]; i += 2)
			ec2_query_add(&q, params[i], params[i + 1]);
		if (*next)
			ec2_query_add(&q, "NextToken", next);
		rc = ec2_call(c, &q, r->cancel, &body, &len, code, sizeof(code),
			      err, errlen);
		ec2_query_free(&q);
		if (rc == 0) {
			prc = ec2_xml_items(body, len, set, fn, ctx, next,
					    sizeof(next));
			if (prc == -1) {
				snprintf(err, errlen,
					 "%s: the answer does not parse",
					 action);
				rc = -EIO;
			} else if (prc) {
				snprintf(err, errlen, "out of memory");
				rc = -ENOMEM;
			}
		}
		free(body);
		if (rc)
			return rc;
	} while (*next);
	return 0;
}

/* The on-demand price of one PriceList entry (a JSON string): its type
 * and terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD. */
static int ec2_price_entry(const char *text, struct ec2_rows *rows)
{
	cJSON *e = cJSON_Parse(text);
	const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(e, "product"), "attributes");
	const cJSON *type =
		cJSON_GetObjectItemCaseSensitive(attrs, "instanceType");
	const cJSON *od = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(e, "terms"), "OnDemand");
	const cJSON *term = od ? od->child : NULL;
	const cJSON *dims =
		cJSON_GetObjectItemCaseSensitive(term, "priceDimensions");
	const cJSON *usd = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(dims ? dims->child : NULL,
						 "pricePerUnit"),
		"USD");
	int rc = 0;

	if (cJSON_IsString(type) && cJSON_IsString(usd)) {
		char *end;
		double v = strtod(usd->valuestring, &end);

		if (end != usd->valuestring && !*end && v >= 0)
			rc = ec2_rows_add(rows, type->valuestring, "", v, 0);
	}
	cJSON_Delete(e);
	return rc;
}

static cJSON *ec2_price_query(const char *region, const char *next)
{
	static const char *const terms[][2] = {
		{"operatingSystem", "Linux"}, {"tenancy", "Shared"},
		{"preInstalledSw", "NA"},     {"capacitystatus", "Used"},
		{"regionCode", NULL},
	};
	cJSON *q = cJSON_CreateObject(), *filters = cJSON_CreateArray();

	if (!q || !filters) {
		cJSON_Delete(q);
		cJSON_Delete(filters);
		return NULL;
	}
	cJSON_AddItemToObject(q, "Filters", filters);
	for (size_t i = 0; i < sizeof(terms) / sizeof(terms[0]); i++) {
		cJSON *f = cJSON_CreateObject();

		if (!f) {
			cJSON_Delete(q);
			return NULL;
		}
		cJSON_AddItemToArray(filters, f);
		if (!cJSON_AddStringToObject(f, "Type", "TERM_MATCH") ||
		    !cJSON_AddStringToObject(f, "Field", terms[i][0]) ||
		    !cJSON_AddStringToObject(
			    f, "Value", terms[i][1] ? terms[i][1] : region)) {
			cJSON_Delete(q);
			return NULL;
		}
	}
	if (!cJSON_AddStringToObject(q, "ServiceCode", "AmazonEC2") ||
	    !cJSON_AddStringToObject(q, "FormatVersion", "aws_v1") ||
	    !cJSON_AddNumberToObject(q, "MaxResults", EC2_PRICES_PAGE) ||
	    (*next && !cJSON_AddStringToObject(q, "NextToken", next))) {
		cJSON_Delete(q);
		return NULL;
	}
	return q;
}

static int ec2_prices(struct ec2_refresh *r, const char *region,
		      struct ec2_rows *rows, char *err, size_t errlen)
{
	char next[4096] = "";

	do {
		cJSON *q = ec2_price_query(region, next), *a = NULL;
		const cJSON *list, *tok, *e;
		char code[EC2_CODE_MAX];
		int rc;

		if (atomic_load(&r->abort)) {
			cJSON_Delete(q);
			snprintf(err, errlen, "GetProducts: stopped");
			return -ECANCELED;
		}
		if (!q) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		rc = aws_json_call(r->pricing, EC2_PRICING_TARGET, q, r->cancel,
				   &a, code, sizeof(code), err, errlen);
		cJSON_Delete(q);
		if (rc)
			return rc;
		list = cJSON_GetObjectItemCaseSensitive(a, "PriceList");
		tok = cJSON_GetObjectItemCaseSensitive(a, "NextToken");
		cJSON_ArrayForEach(e, list)
		{
			if (cJSON_IsString(e) &&
			    ec2_price_entry(e->valuestring, rows)) {
				cJSON_Delete(a);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
		}
		snprintf(next, sizeof(next), "%s",
			 cJSON_IsString(tok) ? tok->valuestring : "");
		cJSON_Delete(a);
	} while (*next);
	return 0;
}

static int ec2_chain_run(struct ec2_refresh *r, struct ec2_region *g,
			 enum ec2_chain k)
{
	const char *const region[] = {"LocationType", "region", "MaxResults",
				      EC2_OFFERINGS_PAGE, NULL};
	const char *const zones[] = {"LocationType", "availability-zone",
				     "MaxResults", EC2_OFFERINGS_PAGE, NULL};
	const char *const spot[] = {"ProductDescription.1",
				    "Linux/UNIX",
				    "StartTime",
				    r->start_time,
				    "MaxResults",
				    EC2_SPOT_PAGE,
				    NULL};
	char *err = g->err[k];
	size_t errlen = sizeof(g->err[k]);

	switch (k) {
	case EC2_CHAIN_REGION:
		return ec2_pages(r, g->ec2, "DescribeInstanceTypeOfferings",
				 region, "instanceTypeOfferingSet",
				 ec2_offering_item, &g->rows[k], err, errlen);
	case EC2_CHAIN_ZONES:
		return ec2_pages(r, g->ec2, "DescribeInstanceTypeOfferings",
				 zones, "instanceTypeOfferingSet",
				 ec2_offering_item, &g->rows[k], err, errlen);
	case EC2_CHAIN_SPOT:
		return ec2_pages(r, g->ec2, "DescribeSpotPriceHistory", spot,
				 "spotPriceHistorySet", ec2_spot_item,
				 &g->rows[k], err, errlen);
	default:
		break;
	}
	/* The account may not be allowed the Price List: once it is
	 * refused, the other regions do not ask again. */
	pthread_mutex_lock(&r->lock);
	if (*r->pricing_denied) {
		snprintf(err, errlen, "%s", r->pricing_denied);
		pthread_mutex_unlock(&r->lock);
		return -EACCES;
	}
	pthread_mutex_unlock(&r->lock);
	{
		int rc = ec2_prices(r, g->name, &g->rows[k], err, errlen);

		if (rc == -EACCES) {
			pthread_mutex_lock(&r->lock);
			snprintf(r->pricing_denied, sizeof(r->pricing_denied),
				 "%s", err);
			pthread_mutex_unlock(&r->lock);
		}
		return rc;
	}
}

/* --- merging a region --- */

static int ec2_offer_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ec2_offer *)a)->type,
		      ((const struct ec2_offer *)b)->type);
}

static struct ec2_offer *ec2_offer_find(struct ec2_region *g, const char *type)
{
	struct ec2_offer key = {0};

	if (!g->noffers)
		return NULL;
	snprintf(key.type, sizeof(key.type), "%s", type);
	return bsearch(&key, g->offers, g->noffers, sizeof(*g->offers),
		       ec2_offer_cmp);
}

static int ec2_zone_add(struct ec2_offer *o, const char *zone)
{
	size_t zl = strlen(zone), need = o->zlen + zl + 2;

	if (need > o->zcap) {
		size_t cap = o->zcap ? o->zcap * 2 : 64;
		char *z;

		while (cap < need)
			cap *= 2;
		z = realloc(o->zones, cap);
		if (!z)
			return -1;
		o->zones = z;
		o->zcap = cap;
	}
	if (o->zlen)
		o->zones[o->zlen++] = ' ';
	memcpy(o->zones + o->zlen, zone, zl + 1);
	o->zlen += zl;
	return 0;
}

/* The offers of a region from its chains' rows: the spot price is the
 * lowest of its zones' latest prices, the latest of a zone the one with
 * the newest timestamp. */
static int ec2_merge(struct ec2_region *g)
{
	struct ec2_rows *types = &g->rows[EC2_CHAIN_REGION];
	struct ec2_rows *zones = &g->rows[EC2_CHAIN_ZONES];
	struct ec2_rows *spot = &g->rows[EC2_CHAIN_SPOT];
	struct ec2_rows *prices = &g->rows[EC2_CHAIN_PRICES];

	g->offers = calloc(types->n ? types->n : 1, sizeof(*g->offers));
	if (!g->offers)
		return -ENOMEM;
	if (types->n) /* v is NULL when empty */
		qsort(types->v, types->n, sizeof(*types->v), ec2_row_cmp);
	for (size_t i = 0; i < types->n; i++) {
		struct ec2_offer *o;

		if (g->noffers && strcmp(g->offers[g->noffers - 1].type,
					 types->v[i].type) == 0)
			continue;
		o = &g->offers[g->noffers++];
		snprintf(o->type, sizeof(o->type), "%s", types->v[i].type);
		o->price = o->spot = NAN;
	}
	/* Zones in name order, as the catalog lists them. */
	if (zones->n) /* v is NULL when empty */
		qsort(zones->v, zones->n, sizeof(*zones->v), ec2_row_cmp);
	for (size_t i = 0; i < zones->n; i++) {
		struct ec2_offer *o = ec2_offer_find(g, zones->v[i].type);

		if (o && ec2_zone_add(o, zones->v[i].zone))
			return -ENOMEM;
	}
	if (spot->n) /* v is NULL when empty */
		qsort(spot->v, spot->n, sizeof(*spot->v), ec2_row_cmp);
	for (size_t i = 0; i < spot->n;) {
		const struct ec2_row *latest = &spot->v[i];
		struct ec2_offer *o;
		size_t k = i + 1;

		for (; k < spot->n && ec2_row_cmp(&spot->v[k], latest) == 0;
		     k++)
			if (spot->v[k].when > latest->when)
				latest = &spot->v[k];
		o = ec2_offer_find(g, latest->type);
		if (o && (isnan(o->spot) || latest->value < o->spot))
			o->spot = latest->value;
		i = k;
	}
	for (size_t i = 0; i < prices->n; i++) {
		struct ec2_offer *o = ec2_offer_find(g, prices->v[i].type);

		/* One entry per type with the query's filters; should AWS
		 * list another, the first stays. */
		if (o && isnan(o->price))
			o->price = prices->v[i].value;
	}
	for (int k = 0; k < EC2_CHAINS; k++)
		ec2_rows_free(&g->rows[k]);
	return 0;
}

/* --- the workers --- */

static void *ec2_worker(void *arg)
{
	struct ec2_refresh *r = arg;

	for (;;) {
		struct ec2_region *g;
		enum ec2_chain k;
		size_t t;
		int rc, last;

		pthread_mutex_lock(&r->lock);
		t = r->next_task;
		if (t < r->nregions * EC2_CHAINS)
			r->next_task++;
		pthread_mutex_unlock(&r->lock);
		if (t >= r->nregions * EC2_CHAINS)
			return NULL;
		g = &r->regions[t / EC2_CHAINS];
		k = (enum ec2_chain)(t % EC2_CHAINS);
		rc = atomic_load(&r->abort) ? -ECANCELED
					    : ec2_chain_run(r, g, k);
		pthread_mutex_lock(&r->lock);
		g->rc[k] = rc;
		if (rc && !*g->err[k])
			snprintf(g->err[k], sizeof(g->err[k]), "%s",
				 strerror(-rc));
		last = --g->left == 0;
		pthread_mutex_unlock(&r->lock);
		if (!last)
			continue;
		if (g->rc[EC2_CHAIN_REGION] == 0 && ec2_merge(g)) {
			g->rc[EC2_CHAIN_REGION] = -ENOMEM;
			snprintf(g->err[EC2_CHAIN_REGION],
				 sizeof(g->err[EC2_CHAIN_REGION]),
				 "out of memory");
		}
		/* Progress calls never overlap. */
		pthread_mutex_lock(&r->lock);
		r->done++;
		if (r->sink->progress)
			r->sink->progress(r->sink->ctx, r->done, r->nregions);
		pthread_mutex_unlock(&r->lock);
	}
}

/* --- the steps of the calling thread --- */

struct ec2_region_list {
	char (*names)[EC2_NAME];
	size_t n, cap;
};

static int ec2_region_item(const xmlNode *item, void *ctx)
{
	struct ec2_region_list *l = ctx;
	char name[EC2_NAME], optin[48];

	ec2_xml_text(item, "regionName", name, sizeof(name));
	ec2_xml_text(item, "optInStatus", optin, sizeof(optin));
	if (!*name || strcmp(optin, "not-opted-in") == 0)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		char(*v)[EC2_NAME] = realloc(l->names, cap * sizeof(*v));

		if (!v)
			return -1;
		l->names = v;
		l->cap = cap;
	}
	snprintf(l->names[l->n++], EC2_NAME, "%s", name);
	return 0;
}

static int ec2_describe_regions(struct ec2_refresh *r, struct ec2_client *c,
				struct ec2_region_list *l, char *err,
				size_t errlen)
{
	struct ec2_query q;
	char code[EC2_CODE_MAX], *body = NULL, next[8];
	size_t len = 0;
	int rc;

	ec2_query_init(&q, "DescribeRegions");
	ec2_query_add(&q, "AllRegions", "true");
	rc = ec2_call(c, &q, r->cancel, &body, &len, code, sizeof(code), err,
		      errlen);
	ec2_query_free(&q);
	if (rc == 0 && ec2_xml_items(body, len, "regionInfo", ec2_region_item,
				     l, next, sizeof(next))) {
		snprintf(err, errlen,
			 "DescribeRegions: the answer does not parse");
		rc = -EIO;
	}
	free(body);
	if (rc == 0 && l->n == 0) {
		snprintf(err, errlen,
			 "DescribeRegions lists no region the account can use");
		rc = -ENOENT;
	}
	return rc;
}

static int ec2_describe_types(struct ec2_refresh *r, struct ec2_client *c,
			      struct ec2_types *types, struct ec2_notes *notes,
			      char *err, size_t errlen)
{
	/* Every type, not only the region's: one region's call describes
	 * the offers of all. */
	static const char *const params[] = {"MaxResults", EC2_TYPES_PAGE,
					     "IncludeUnsupportedInRegion",
					     "true", NULL};
	struct ec2_types_page pg = {types, notes};
	int rc = ec2_pages(r, c, "DescribeInstanceTypes", params,
			   "instanceTypeSet", ec2_types_item, &pg, err, errlen);

	if (rc)
		return rc;
	ec2_types_sort(types);
	if (types->n == 0) {
		snprintf(err, errlen, "DescribeInstanceTypes lists no type");
		return -ENOENT;
	}
	return 0;
}

/* A note per distinct failure of a chain across the regions ("spot prices
 * were not obtained in 3 regions (...)"). */
static void ec2_chain_notes(const struct ec2_refresh *r, enum ec2_chain k,
			    const char *what, struct ec2_notes *notes)
{
	for (size_t i = 0; i < r->nregions; i++) {
		const struct ec2_region *g = &r->regions[i];
		size_t same = 0;
		bool seen = false;

		if (!g->rc[k] || g->rc[EC2_CHAIN_REGION])
			continue;
		for (size_t j = 0; j < r->nregions && !seen; j++) {
			const struct ec2_region *h = &r->regions[j];

			if (h->rc[k] && !h->rc[EC2_CHAIN_REGION] &&
			    strcmp(h->err[k], g->err[k]) == 0) {
				seen = j < i;
				same++;
			}
		}
		if (seen)
			continue;
		if (same == 1)
			ec2_notes_add(notes,
				      "%s were not obtained in %s (%s); the "
				      "catalog's prices are kept",
				      what, g->name, g->err[k]);
		else
			ec2_notes_add(notes,
				      "%s were not obtained in %zu regions "
				      "(%s); the catalog's prices are kept",
				      what, same, g->err[k]);
	}
}

/* Hand everything to the sink; 0, or the sink's -errno. */
static int ec2_deliver(const struct ec2_refresh *r,
		       const struct ec2_types *types,
		       const struct ec2_notes *notes, char *err, size_t errlen)
{
	const struct provider_catalog_sink *s = r->sink;
	size_t unknown = 0;
	int rc;

	for (size_t i = 0; i < types->n; i++)
		if (s->type && (rc = s->type(s->ctx, &types->v[i].t))) {
			snprintf(err, errlen,
				 "the catalog did not take type %s: %s",
				 types->v[i].name, strerror(-rc));
			return rc;
		}
	for (size_t i = 0; i < r->nregions; i++) {
		const struct ec2_region *g = &r->regions[i];

		for (size_t k = 0; k < g->noffers; k++) {
			const struct ec2_offer *o = &g->offers[k];
			const struct ec2_type *t =
				ec2_types_find(types, o->type);
			struct provider_catalog_offer off = {
				.type = t ? t->name : NULL,
				.region = g->name,
				.price = o->price,
				.spot = o->spot,
				.zones = o->zones ? o->zones : "",
			};

			if (!t) {
				unknown++;
				continue;
			}
			if (s->offer && (rc = s->offer(s->ctx, &off))) {
				snprintf(err, errlen,
					 "the catalog did not take the offer "
					 "of %s in %s: %s",
					 o->type, g->name, strerror(-rc));
				return rc;
			}
		}
	}
	for (size_t i = 0; s->note && i < notes->n; i++)
		s->note(s->ctx, notes->v[i]);
	if (unknown && s->note) {
		char line[PROVIDER_MSG_MAX];

		snprintf(line, sizeof(line),
			 "%zu offers of types DescribeInstanceTypes did not "
			 "list were left out",
			 unknown);
		s->note(s->ctx, line);
	}
	return 0;
}

static void ec2_refresh_free(struct ec2_refresh *r)
{
	for (size_t i = 0; i < r->nregions; i++) {
		struct ec2_region *g = &r->regions[i];

		ec2_client_free(g->ec2);
		for (size_t k = 0; k < g->noffers; k++)
			free(g->offers[k].zones);
		free(g->offers);
		for (int k = 0; k < EC2_CHAINS; k++)
			ec2_rows_free(&g->rows[k]);
	}
	free(r->regions);
	ec2_client_free(r->pricing);
	aws_config_clear(&r->cfg);
	pthread_mutex_destroy(&r->lock);
}

/* The regions' clients and the pricing client. */
static int ec2_refresh_clients(struct ec2_refresh *r,
			       const struct ec2_region_list *l, char *err,
			       size_t errlen)
{
	struct aws_config *cfg = calloc(1, sizeof(*cfg));
	int rc = 0;

	r->regions = calloc(l->n, sizeof(*r->regions));
	if (!cfg || !r->regions) {
		free(cfg);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->nregions = l->n;
	for (size_t i = 0; i < l->n && rc == 0; i++) {
		struct ec2_region *g = &r->regions[i];

		snprintf(g->name, sizeof(g->name), "%s", l->names[i]);
		g->left = EC2_CHAINS;
		aws_config_in_region(&r->cfg, g->name, cfg);
		g->ec2 = ec2_client_new(cfg, r->retry, err, errlen);
		if (!g->ec2)
			rc = -EINVAL;
	}
	if (rc == 0) {
		r->pricing = aws_json_client_new(
			&r->cfg, r->cfg.pricing_endpoint, "pricing",
			EC2_PRICING_REGION, r->retry, err, errlen);
		if (!r->pricing)
			rc = -EINVAL;
	}
	aws_config_clear(cfg);
	free(cfg);
	return rc;
}

/* The refresh's outcome once the workers are done: the first region's
 * error when every region failed. */
static int ec2_refresh_outcome(const struct ec2_refresh *r, char *err,
			       size_t errlen, struct ec2_notes *notes)
{
	size_t failed = 0;
	const struct ec2_region *first = NULL;

	if (cancel_requested(r->cancel)) {
		snprintf(err, errlen, "the catalog refresh was cancelled");
		return -ECANCELED;
	}
	for (size_t i = 0; i < r->nregions; i++) {
		const struct ec2_region *g = &r->regions[i];
		int bad = g->rc[EC2_CHAIN_REGION]  ? EC2_CHAIN_REGION
			  : g->rc[EC2_CHAIN_ZONES] ? EC2_CHAIN_ZONES
						   : -1;

		if (bad < 0)
			continue;
		failed++;
		if (!first)
			first = g;
		ec2_notes_add(notes,
			      "the offers of %s were not obtained (%s); the "
			      "catalog's are kept",
			      g->name, g->err[bad]);
	}
	if (failed == r->nregions && first) {
		int bad = first->rc[EC2_CHAIN_REGION] ? EC2_CHAIN_REGION
						      : EC2_CHAIN_ZONES;

		snprintf(err, errlen,
			 "the offers of no region were obtained: %s: %s",
			 first->name, first->err[bad]);
		return first->rc[bad];
	}
	ec2_chain_notes(r, EC2_CHAIN_PRICES, "on-demand prices", notes);
	ec2_chain_notes(r, EC2_CHAIN_SPOT, "spot prices", notes);
	return 0;
}

int ec2_catalog_refresh(const struct aws_config *cfg,
			const struct ec2_retry *retry, int threads,
			const struct provider_catalog_sink *sink,
			struct cancel *cancel, char *err, size_t errlen)
{
	struct ec2_refresh *r = calloc(1, sizeof(*r));
	struct ec2_region_list regions = {0};
	struct ec2_types types = {0};
	struct ec2_notes notes = {0};
	struct ec2_client *first = NULL;
	struct aws_config *fcfg = calloc(1, sizeof(*fcfg));
	pthread_t tid[EC2_CAT_THREADS];
	size_t nthreads = 0;
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	if (!r || !fcfg) {
		free(r);
		free(fcfg);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->sink = sink;
	r->cancel = cancel;
	r->retry = retry;
	r->cfg = *cfg;
	gmtime_r(&now, &tm);
	strftime(r->start_time, sizeof(r->start_time), "%Y-%m-%dT%H:%M:%SZ",
		 &tm);
	aws_config_in_region(cfg, *cfg->region ? cfg->region : EC2_FIRST_REGION,
			     fcfg);
	first = ec2_client_new(fcfg, retry, err, errlen);
	aws_config_clear(fcfg);
	free(fcfg);
	rc = first ? ec2_describe_regions(r, first, &regions, err, errlen)
		   : -EINVAL;
	if (rc == 0)
		rc = ec2_refresh_clients(r, &regions, err, errlen);
	if (threads <= 0 || threads > EC2_CAT_THREADS)
		threads = EC2_CAT_THREADS;
	while (rc == 0 && nthreads < (size_t)threads &&
	       nthreads < r->nregions * EC2_CHAINS &&
	       pthread_create(&tid[nthreads], NULL, ec2_worker, r) == 0)
		nthreads++;
	if (rc == 0 && nthreads == 0) {
		snprintf(err, errlen, "cannot start a thread");
		rc = -EAGAIN;
	}
	if (rc == 0) {
		rc = ec2_describe_types(r, first, &types, &notes, err, errlen);
		if (rc)
			atomic_store(&r->abort, true);
	}
	for (size_t i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	if (rc == 0)
		rc = ec2_refresh_outcome(r, err, errlen, &notes);
	else if (cancel_requested(cancel)) {
		snprintf(err, errlen, "the catalog refresh was cancelled");
		rc = -ECANCELED;
	}
	if (rc == 0)
		rc = ec2_deliver(r, &types, &notes, err, errlen);
	ec2_client_free(first);
	ec2_types_free(&types);
	ec2_notes_free(&notes);
	free(regions.names);
	ec2_refresh_free(r);
	free(r);
	return rc;
}
