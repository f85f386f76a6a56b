/* Resolution of a contract: gathers the contract's assumptions per role
 * (role files override contract-level ones), runs the resolver over the
 * catalog, applies the resolve policy, renders resolution/candidates, and
 * serves the catalog for browsing. */
#include "lifecycle/resolution.h"

#include "catalog/catalog.h"
#include "lifecycle/config.h"
#include "lifecycle/contract.h"
#include "providers/provider.h"
#include "resolver/match.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file of a catalog type that is not an assumption file. */
#define RESOLUTION_PRICE_FILE "price_per_hour"

/* The catalog's extra files of a type, beyond its assumption files. */
#define RESOLUTION_ARCH_FILE	"architecture"
#define RESOLUTION_REGIONS_FILE "regions"

/* A provider's configured region (provider_entry.default_region). */
struct resolution_default {
	char provider[32];
	char region[64];
};

/*
 * The catalog is replaced whole by a refresh, under the write lock; every
 * reader holds the read lock. Names handed out by the browsing calls point
 * into a catalog: the one replaced is kept until the next replacement, so
 * that a reader between the call and its copy never reads freed memory.
 */
struct resolution_env {
	const struct config *config;
	const struct provider_entry *const *registry;
	struct catalog *catalog;
	struct catalog *retired;
	const struct hierarchy *types;
	pthread_rwlock_t lock;
	size_t ndefaults;
	struct resolution_default defaults[8];
};

/* One instance type a provider offers of its own (this machine, the hosts
 * of cclfs.conf). An accelerator the hierarchy does not know is an error
 * where the type was written down, and left out where it was detected. */
static int resolution_add_type(struct resolution_env *env,
			       const struct provider_entry *e,
			       const struct provider_type *t, char *err,
			       size_t errlen)
{
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS] = {0};
	size_t acc = (size_t)assumption_field_find("accelerator");
	size_t arch = (size_t)assumption_field_find("node_architecture");

	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		number[f] = NAN;
	number[assumption_field_find("node_vcpus_count")] = t->vcpus;
	number[assumption_field_find("node_memory_size")] = t->memory_bytes;
	number[assumption_field_find("accelerator_count")] = t->accelerators;
	type[assumption_field_find("node_provider")] = e->name;
	type[assumption_field_find("node_machinetype")] = t->name;
	if (*t->architecture &&
	    hierarchy_find(env->types, arch, t->architecture) >= 0)
		type[arch] = t->architecture;
	if (*t->accelerator &&
	    hierarchy_find(env->types, acc, t->accelerator) >= 0)
		type[acc] = t->accelerator;
	else if (*t->accelerator && *t->origin) {
		snprintf(err, errlen,
			 "%s: \"%s\" is not a known accelerator type",
			 t->origin, t->accelerator);
		return -1;
	}
	return catalog_add(env->catalog, e->name, t->name, number, type,
			   t->price, err, errlen);
}

/* The types every provider of the registry offers of its own. */
static int resolution_add_providers(struct resolution_env *env,
				    const struct provider_entry *const *reg,
				    char *err, size_t errlen)
{
	int rc = 0;

	for (size_t p = 0; reg[p] && rc == 0; p++) {
		struct provider_type *v = NULL;
		size_t n = 0;

		if (!reg[p]->types)
			continue;
		if (reg[p]->types(env->config, &v, &n, err, errlen))
			return -1;
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = resolution_add_type(env, reg[p], &v[i], err,
						 errlen);
		free(v);
	}
	if (rc == 0 && catalog_sort(env->catalog)) {
		snprintf(err, errlen, "catalog: out of memory");
		rc = -1;
	}
	return rc;
}

/* Each provider's configured region, read once: resolution never touches
 * a provider. */
static void resolution_defaults(struct resolution_env *env,
				const struct provider_entry *const *reg)
{
	for (size_t p = 0; reg && reg[p]; p++) {
		struct resolution_default *d = &env->defaults[env->ndefaults];

		if (!reg[p]->default_region ||
		    env->ndefaults ==
			    sizeof(env->defaults) / sizeof(*env->defaults))
			continue;
		if (reg[p]->default_region(env->config, d->region,
					   sizeof(d->region)) == 1 &&
		    *d->region) {
			snprintf(d->provider, sizeof(d->provider), "%s",
				 reg[p]->name);
			env->ndefaults++;
		}
	}
}

static struct resolution_env *resolution_env_new(const struct config *cfg)
{
	struct resolution_env *env = calloc(1, sizeof(*env));

	if (!env)
		return NULL;
	if (pthread_rwlock_init(&env->lock, NULL)) {
		free(env);
		return NULL;
	}
	env->config = cfg;
	return env;
}

struct resolution_env *
resolution_env_open(const struct config *cfg,
		    const struct provider_entry *const *reg, char *err,
		    size_t errlen)
{
	struct resolution_env *env = resolution_env_new(cfg);

	if (!env) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	env->registry = reg;
	resolution_defaults(env, reg);
	env->catalog = catalog_open(err, errlen);
	if (!env->catalog)
		goto fail;
	env->types = catalog_hierarchy(env->catalog);
	if (resolution_add_providers(env, reg, err, errlen))
		goto fail;
	return env;
fail:
	resolution_env_close(env);
	return NULL;
}

int resolution_env_replace(struct resolution_env *env,
			   const struct catalog_source *src, size_t n,
			   char *err, size_t errlen)
{
	struct resolution_env fresh = {.config = env->config};
	struct catalog *old;

	fresh.catalog = catalog_open_with(src, n, err, errlen);
	if (!fresh.catalog)
		return -EINVAL;
	fresh.types = catalog_hierarchy(fresh.catalog);
	if (resolution_add_providers(&fresh, env->registry, err, errlen)) {
		catalog_close(fresh.catalog);
		return -EINVAL;
	}
	pthread_rwlock_wrlock(&env->lock);
	old = env->retired;
	env->retired = env->catalog;
	env->catalog = fresh.catalog;
	env->types = fresh.types;
	pthread_rwlock_unlock(&env->lock);
	catalog_close(old);
	return 0;
}

struct resolution_env *resolution_env_wrap(const struct config *cfg,
					   struct catalog *cat)
{
	struct resolution_env *env = resolution_env_new(cfg);

	if (!env) {
		catalog_close(cat);
		return NULL;
	}
	env->catalog = cat;
	env->types = catalog_hierarchy(cat);
	return env;
}

void resolution_env_close(struct resolution_env *env)
{
	if (!env)
		return;
	catalog_close(env->catalog);
	catalog_close(env->retired);
	pthread_rwlock_destroy(&env->lock);
	free(env);
}

int resolution_check_name(const struct resolution_env *env, int field,
			  const char *name, char *out, size_t outlen, char *why,
			  size_t whylen)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const char *spelling, *near[3];
	size_t n, o;

	pthread_rwlock_rdlock(&w->lock);
	spelling = hierarchy_spelling(env->types, (size_t)field, name);
	if (spelling) {
		snprintf(out, outlen, "%s", spelling);
		pthread_rwlock_unlock(&w->lock);
		return 0;
	}
	n = hierarchy_suggest(env->types, (size_t)field, name, near, 3);
	o = (size_t)snprintf(why, whylen, "\"%.60s\" is not a known %s", name,
			     assumption_fields[field].name);
	for (size_t i = 0; i < n && o < whylen; i++)
		o += (size_t)snprintf(why + o, whylen - o, "%s%s",
				      i == 0	   ? "; did you mean "
				      : i + 1 == n ? " or "
						   : ", ",
				      near[i]);
	if (n && o < whylen)
		snprintf(why + o, whylen - o, "?");
	pthread_rwlock_unlock(&w->lock);
	return -EINVAL;
}

/* The query of a role: the role's own file when it is not empty, else the
 * contract-level file. role is CONTRACT_DIR_TOP for one role. */
static int resolution_query(const struct resolution_env *env,
			    resolution_value_fn value, void *ctx,
			    enum contract_dir role, struct resolver_query *q,
			    char *why, size_t whylen)
{
	memset(q, 0, sizeof(*q)); /* every field ASSUMPTION_ANY */
	for (size_t f = 0; f < assumption_field_count; f++) {
		const char *name = assumption_fields[f].name;
		int top = contract_field_find(CONTRACT_DIR_TOP, name);
		int own = role == CONTRACT_DIR_TOP
				  ? top
				  : contract_field_find(role, name);
		const char *v = value(ctx, own);
		char err[256];

		if (!*v)
			v = value(ctx, top);
		q->type[f] = -1;
		if (assumption_parse(assumption_fields[f].kind, v, strlen(v),
				     &q->a[f], err, sizeof(err))) {
			snprintf(why, whylen, "%s: %s", name, err);
			return -EINVAL;
		}
		if (q->a[f].op != ASSUMPTION_NAME)
			continue;
		q->type[f] = hierarchy_find(env->types, f, q->a[f].name);
		if (q->type[f] < 0) {
			/* Stored before the catalog changed, say. */
			snprintf(why, whylen,
				 "\"%.60s\" is not a known %s (any more)",
				 q->a[f].name, name);
			return -EINVAL;
		}
	}
	return 0;
}

/* The resolve policy: config/resolve_policy, else cclfs.conf, else unique. */
static const char *resolution_policy(const struct resolution_env *env,
				     resolution_value_fn value, void *ctx)
{
	const char *p = value(ctx, contract_field_find(CONTRACT_DIR_CONFIG,
						       "resolve_policy"));
	const char *d = config_get(env->config, "defaults", "resolve_policy");

	if (*p)
		return p;
	return d && *d ? d : "unique";
}

static void resolution_price_text(double price, char *buf, size_t len)
{
	if (isnan(price))
		snprintf(buf, len, "unknown");
	else
		snprintf(buf, len, "%.15g", price); /* the CSV's precision */
}

/* One answer resolution can give for a role: a type, and the offer (the
 * region) it would be bought in; NULL for a type without regions. */
struct resolution_hit {
	const struct resolver_instance *t;
	const struct resolver_offer *o;
	bool spot; /* bought on the spot market: priced at o->spot */
};

struct resolution_hits {
	struct resolution_hit *v;
	size_t n, cap;
	size_t types;	 /* distinct types among them */
	size_t excluded; /* offers left out for the configured region only */
	const char *excluded_provider, *excluded_region;
};

/* The price per hour of the hit's market; a type without offers (local,
 * hosts) has one price whatever the market. */
static double resolution_hit_price(const struct resolution_hit *h)
{
	if (!h->o)
		return h->t->price;
	return h->spot ? h->o->spot : h->o->price;
}

/* Whether config/market buys `role`'s nodes on the spot market: a bare
 * word is every role's, ROLE=MARKET one role's (the nodes of PeerWorkers
 * are workers). */
static bool resolution_spot(resolution_value_fn value, void *ctx,
			    const char *role)
{
	const char *v =
		value(ctx, contract_field_find(CONTRACT_DIR_CONFIG, "market"));
	bool spot = false;

	if (strcmp(role, "node") == 0)
		role = "worker";
	while (*v) {
		size_t l = strcspn(v, " "), rl = strlen(role);
		const char *eq = memchr(v, '=', l);

		if (!eq ||
		    ((size_t)(eq - v) == rl && strncmp(v, role, rl) == 0))
			spot = l >= 4 && strncmp(v + l - 4, "spot", 4) == 0;
		v += l;
		v += strspn(v, " ");
	}
	return spot;
}

/* The region resolution considers for a type of `provider` without a
 * cluster_locale assumption: the provider's configured one, or NULL. */
static const char *resolution_default_region(const struct resolution_env *env,
					     const char *provider)
{
	for (size_t i = 0; i < env->ndefaults; i++)
		if (strcmp(env->defaults[i].provider, provider) == 0)
			return env->defaults[i].region;
	return NULL;
}

/* Hits in the catalog's price order (catalog_at): a type's price, then
 * fewer vCPUs, then name and provider; a type's offers as they are. */
static int resolution_cmp_hits(const void *pa, const void *pb)
{
	const struct resolution_hit *a = pa, *b = pb;
	int vc = assumption_field_find("node_vcpus_count");
	double x = isnan(a->t->price) ? INFINITY : a->t->price;
	double y = isnan(b->t->price) ? INFINITY : b->t->price;
	int c;

	if (a->t == b->t)
		return a->o < b->o ? -1 : a->o > b->o;
	if (x != y)
		return x < y ? -1 : 1;
	if (a->t->number[vc] != b->t->number[vc] && !isnan(a->t->number[vc]) &&
	    !isnan(b->t->number[vc]))
		return a->t->number[vc] < b->t->number[vc] ? -1 : 1;
	c = strcmp(a->t->name, b->t->name);
	return c ? c : strcmp(a->t->provider, b->t->provider);
}

/* What an offer's region is for a query, worked out once per region. */
enum {
	RESOLUTION_REGION_UNKNOWN,  /* not worked out yet */
	RESOLUTION_REGION_OUT,	    /* cluster_locale rules it out */
	RESOLUTION_REGION_IN,	    /* allowed */
	RESOLUTION_REGION_DEFAULTS, /* out for the configured region only */
};

/* The verdict on offer o's region for q (see above). */
static unsigned char resolution_judge(const struct resolution_env *env,
				      const struct resolver_query *q,
				      const struct resolver_instance *t,
				      const struct resolver_offer *o)
{
	const char *def = q->a[ASSUMPTION_FIELD_LOCALE].op != ASSUMPTION_ANY
				  ? NULL
				  : resolution_default_region(env, t->provider);

	if (!resolver_offer_allowed(env->types, q, o))
		return RESOLUTION_REGION_OUT;
	return def && strcmp(o->region, def) != 0 ? RESOLUTION_REGION_DEFAULTS
						  : RESOLUTION_REGION_IN;
}

static int resolution_add_hit(struct resolution_hits *hits,
			      const struct resolver_instance *t,
			      const struct resolver_offer *o, bool spot)
{
	if (hits->n == hits->cap) {
		size_t cap = hits->cap ? hits->cap * 2 : 256;
		struct resolution_hit *v = realloc(hits->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		hits->v = v;
		hits->cap = cap;
	}
	hits->v[hits->n].t = t;
	hits->v[hits->n].spot = spot;
	hits->v[hits->n++].o = o;
	return 0;
}

/* Every (type, region) that satisfies q, a type's offers together.
 * Types are scanned as they lie in memory, each region is judged once,
 * and only the matching types' offers are looked at; the hits are put in
 * the catalog's price order only when a message lists them. -ENOMEM or
 * 0. */
static int resolution_collect(const struct resolution_env *env,
			      const struct catalog *cat,
			      const struct resolver_query *q, bool spot,
			      struct resolution_hits *hits)
{
	size_t n = catalog_count(cat), nreg = catalog_region_count(cat);
	unsigned char *judged = calloc(nreg ? nreg : 1, 1);
	int rc = 0;

	memset(hits, 0, sizeof(*hits));
	if (!judged)
		return -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct resolver_instance *t = catalog_type_at(cat, i);
		size_t before = hits->n;

		if (!resolver_match_features(env->types, q, t))
			continue;
		if (!t->noffers)
			rc = resolution_add_hit(hits, t, NULL, spot);
		for (size_t k = 0; k < t->noffers && rc == 0; k++) {
			const struct resolver_offer *o = &t->offers[k];
			bool cached = o->region_index >= 0 &&
				      (size_t)o->region_index < nreg;
			unsigned char v = cached ? judged[o->region_index]
						 : RESOLUTION_REGION_UNKNOWN;

			if (v == RESOLUTION_REGION_UNKNOWN)
				v = resolution_judge(env, q, t, o);
			if (cached)
				judged[o->region_index] = v;
			if (v == RESOLUTION_REGION_IN) {
				rc = resolution_add_hit(hits, t, o, spot);
			} else if (v == RESOLUTION_REGION_DEFAULTS) {
				hits->excluded++;
				hits->excluded_provider = t->provider;
				hits->excluded_region =
					resolution_default_region(env,
								  t->provider);
			}
		}
		if (hits->n > before)
			hits->types++;
	}
	free(judged);
	return rc;
}

/* A role being resolved: its query, its hits, how many nodes it has (the
 * weight of its price in a total), for each region (by its index among the
 * catalog's regions; index nloc: the types without a region, which go with any)
 * its first hit and its best priced one, and what was chosen. */
struct resolution_roleq {
	const char *name;
	struct resolution_hits hits;
	const struct resolution_hit **any, **best;
	const struct resolution_hit *chosen;
	size_t nloc;
	double weight;
	struct resolver_query q;
};

/* Whether hit a is better than b: a lower known price, then fewer vCPUs,
 * then name. */
static bool resolution_better(const struct resolution_hit *a,
			      const struct resolution_hit *b)
{
	int vc = assumption_field_find("node_vcpus_count");
	double x = resolution_hit_price(a), y = resolution_hit_price(b);

	if (x != y)
		return x < y;
	if (a->t->number[vc] != b->t->number[vc] && !isnan(a->t->number[vc]) &&
	    !isnan(b->t->number[vc]))
		return a->t->number[vc] < b->t->number[vc];
	return strcmp(a->t->name, b->t->name) < 0;
}

static int resolution_index(struct resolution_roleq *r, size_t nloc)
{
	r->nloc = nloc;
	r->any = calloc(nloc + 1, sizeof(*r->any));
	r->best = calloc(nloc + 1, sizeof(*r->best));
	if (!r->any || !r->best)
		return -ENOMEM;
	for (size_t i = 0; i < r->hits.n; i++) {
		const struct resolution_hit *h = &r->hits.v[i];
		size_t k = h->o && h->o->region_index >= 0
				   ? (size_t)h->o->region_index
				   : nloc;

		if (k > nloc)
			k = nloc;
		if (!r->any[k])
			r->any[k] = h;
		if (!isnan(resolution_hit_price(h)) &&
		    (!r->best[k] || resolution_better(h, r->best[k])))
			r->best[k] = h;
	}
	return 0;
}

/* The regions every role can be placed in (a type without regions fits
 * any), as locale ids into keys; nloc stands for "no region" when every
 * role has a type without one. Returns how many, or -ENOMEM. */
static long resolution_common_regions(const struct resolution_roleq *roles,
				      size_t nroles, size_t **keys)
{
	size_t nloc = roles[0].nloc, n = 0;
	size_t *k = malloc((nloc + 1) * sizeof(*k));

	if (!k)
		return -ENOMEM;
	for (size_t l = 0; l <= nloc; l++) {
		bool some = false, all = true;

		for (size_t r = 0; r < nroles; r++) {
			some = some || roles[r].any[l];
			all = all && (roles[r].any[l] || roles[r].any[nloc]);
		}
		if (some && all)
			k[n++] = l;
	}
	*keys = k;
	return (long)n;
}

/* A region's name, from the hits of the roles. */
static const char *resolution_key_name(const struct resolution_roleq *roles,
				       size_t nroles, size_t key)
{
	for (size_t r = 0; r < nroles; r++)
		if (key < roles[r].nloc && roles[r].any[key])
			return roles[r].any[key]->o->region;
	return "-";
}

static int resolution_cmp_str(const void *pa, const void *pb)
{
	return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* "N instance types satisfy the contract (a, b, c)" of one role. */
static void resolution_too_many(const struct resolution_roleq *r, char *why,
				size_t whylen)
{
	size_t o = (size_t)snprintf(why, whylen,
				    "%zu instance types satisfy the contract (",
				    r->hits.types);
	const struct resolver_instance *last = NULL;
	size_t k = 0;

	for (size_t i = 0; i < r->hits.n && o < whylen; i++) {
		if (r->hits.v[i].t == last)
			continue;
		last = r->hits.v[i].t;
		o += (size_t)snprintf(why + o, whylen - o, "%s%s",
				      k++ ? ", " : "", last->name);
	}
	if (o < whylen)
		snprintf(why + o, whylen - o,
			 "); add assumptions, or write cheapest to "
			 "config/resolve_policy");
}

/* Why the roles have no region in common, or why there are several. */
static void resolution_region_why(const struct resolution_roleq *roles,
				  size_t nroles, const size_t *keys, size_t n,
				  char *why, size_t whylen)
{
	const char **names;
	size_t o;

	if (n == 0) {
		snprintf(why, whylen,
			 "the %s and %s roles have no region in common; "
			 "write one to cluster_locale that offers both",
			 roles[0].name, nroles > 1 ? roles[1].name : "");
		return;
	}
	names = malloc(n * sizeof(*names));
	if (!names) {
		snprintf(why, whylen, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = resolution_key_name(roles, nroles, keys[i]);
	qsort(names, n, sizeof(*names), resolution_cmp_str);
	if (nroles == 1)
		o = (size_t)snprintf(why, whylen,
				     "%s %s is offered in %zu regions (",
				     roles[0].hits.v[0].t->provider,
				     roles[0].hits.v[0].t->name, n);
	else
		o = (size_t)snprintf(why, whylen,
				     "the roles' types (%s %s, %s %s) are "
				     "offered together in %zu regions (",
				     roles[0].hits.v[0].t->provider,
				     roles[0].hits.v[0].t->name,
				     roles[1].hits.v[0].t->provider,
				     roles[1].hits.v[0].t->name, n);
	for (size_t i = 0; i < n && o < whylen; i++)
		o += (size_t)snprintf(why + o, whylen - o, "%s%s",
				      i ? ", " : "", names[i]);
	if (o < whylen)
		snprintf(why + o, whylen - o,
			 "); write one of them to cluster_locale, or cheapest "
			 "to config/resolve_policy");
	free(names);
}

/* resolve_policy unique: one type per role, and one region for all. */
static int resolution_unique(struct resolution_roleq *roles, size_t nroles,
			     char *why, size_t whylen)
{
	size_t *keys = NULL;
	long n;

	for (size_t r = 0; r < nroles; r++)
		if (roles[r].hits.types > 1) {
			char sub[3072];

			/* Listed cheapest first. */
			qsort(roles[r].hits.v, roles[r].hits.n,
			      sizeof(*roles[r].hits.v), resolution_cmp_hits);
			resolution_too_many(&roles[r], sub, sizeof(sub));
			if (nroles > 1)
				snprintf(why, whylen, "%s role: %s",
					 roles[r].name, sub);
			else
				snprintf(why, whylen, "%s", sub);
			return -EINVAL;
		}
	n = resolution_common_regions(roles, nroles, &keys);
	if (n < 0) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	if (n != 1) {
		resolution_region_why(roles, nroles, keys, (size_t)n, why,
				      whylen);
		free(keys);
		return -EINVAL;
	}
	for (size_t r = 0; r < nroles; r++)
		roles[r].chosen = roles[r].any[keys[0]]
					  ? roles[r].any[keys[0]]
					  : roles[r].any[roles[r].nloc];
	free(keys);
	return 0;
}

/* Whether the picks of a region (named `here`) beat the roles' chosen ones
 * (of region `there`) at an equal total price. */
static bool resolution_tie_better(const struct resolution_roleq *roles,
				  size_t nroles,
				  const struct resolution_hit *const *pick,
				  const char *here, const char *there)
{
	for (size_t r = 0; r < nroles; r++) {
		if (!pick[r])
			return false;
		if (!roles[r].chosen)
			return true;
		if (resolution_better(pick[r], roles[r].chosen))
			return true;
		if (resolution_better(roles[r].chosen, pick[r]))
			return false;
	}
	return strcmp(here, there) < 0;
}

/* resolve_policy cheapest: the region, and in it each role's type, of the
 * lowest total price per hour (a role's price times its nodes). An offer
 * without a known price is never chosen. */
static int resolution_cheapest(struct resolution_roleq *roles, size_t nroles,
			       char *why, size_t whylen)
{
	size_t *keys = NULL, unpriced = 0, chosen_key = 0;
	bool spot = false;
	double best = INFINITY;
	long n;
	const char *provider = NULL;

	if (nroles > 2) { /* a cluster has one role or two */
		snprintf(why, whylen, "too many roles");
		return -EINVAL;
	}
	n = resolution_common_regions(roles, nroles, &keys);

	if (n < 0) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (long k = 0; k < n; k++) {
		const struct resolution_hit *pick[2] = {NULL, NULL};
		double total = 0;

		for (size_t r = 0; r < nroles && total < INFINITY; r++) {
			const struct resolution_hit *a = roles[r].best[keys[k]];
			const struct resolution_hit *b =
				roles[r].best[roles[r].nloc];

			if (!a || (b && resolution_better(b, a)))
				a = b;
			pick[r] = a;
			total = a ? total + roles[r].weight *
							resolution_hit_price(a)
				  : INFINITY;
		}
		/* Equal totals: fewer vCPUs, then the name (role by role),
		 * then the region's name, so that the answer never depends
		 * on the catalog's internal order. */
		if (total < best ||
		    (total == best && total < INFINITY &&
		     resolution_tie_better(
			     roles, nroles, pick,
			     resolution_key_name(roles, nroles, keys[k]),
			     resolution_key_name(roles, nroles, chosen_key)))) {
			best = total;
			chosen_key = keys[k];
			for (size_t r = 0; r < nroles; r++)
				roles[r].chosen = pick[r];
		}
	}
	free(keys);
	if (best < INFINITY)
		return 0;
	if (n == 0) {
		resolution_region_why(roles, nroles, NULL, 0, why, whylen);
		return -EINVAL;
	}
	for (size_t r = 0; r < nroles; r++) {
		spot |= roles[r].hits.n && roles[r].hits.v[0].spot;
		for (size_t i = 0; i < roles[r].hits.n; i++)
			if (isnan(resolution_hit_price(&roles[r].hits.v[i]))) {
				unpriced++;
				if (!provider)
					provider =
						roles[r].hits.v[i].t->provider;
			}
	}
	snprintf(why, whylen,
		 "%zu offers satisfy the contract, but none has a known "
		 "%sprice (the catalog prices %s only where its sources did); "
		 "touch "
		 "catalog/%s/refresh to fetch today's prices from %s's API, "
		 "or write a priced region to cluster_locale",
		 unpriced, spot ? "spot " : "", provider ? provider : "them",
		 provider ? provider : "PROVIDER",
		 provider ? provider : "the provider");
	return -EINVAL;
}

/* Why a role has no hit: the assumption that emptied the set, or the
 * configured region that left out every offer. */
static void resolution_none(const struct resolution_env *env,
			    const struct catalog *cat,
			    const struct resolution_roleq *r, char *why,
			    size_t whylen)
{
	size_t n = catalog_count(cat);
	const struct resolver_instance **all;

	if (r->hits.excluded) {
		snprintf(why, whylen,
			 "%zu offers satisfy the contract, but none in %s, "
			 "the region configured for %s; write the region to "
			 "use to cluster_locale (a region, or EC2Region or "
			 "GCPRegion for all of a provider's)",
			 r->hits.excluded, r->hits.excluded_region,
			 r->hits.excluded_provider);
		return;
	}
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all) {
		snprintf(why, whylen, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		all[i] = catalog_at(cat, i);
	resolver_explain_none(env->types, &r->q, all, n, why, whylen);
	free(all);
}

static double resolution_node_count(resolution_value_fn value, void *ctx)
{
	const char *v =
		value(ctx, contract_field_find(CONTRACT_DIR_TOP, "node_count"));
	double n = *v ? strtod(v, NULL) : 1;

	return n >= 1 ? n : 1;
}

/* Whether "PROVIDER<TAB>TYPE<TAB>REGION" is a line of `except`. */
static bool resolution_excepted(const char *except,
				const struct resolution_hit *h)
{
	char key[256];
	size_t n;

	if (!except || !h->o)
		return false;
	n = (size_t)snprintf(key, sizeof(key), "%s\t%s\t%s", h->t->provider,
			     h->t->name, h->o->region);
	for (const char *p = except; (p = strstr(p, key)); p += n)
		if ((p == except || p[-1] == '\n') &&
		    (p[n] == '\n' || p[n] == '\0'))
			return true;
	return false;
}

/* Leave the offers of `except` out of a role's hits. */
static void resolution_except(struct resolution_hits *hits, const char *except)
{
	size_t k = 0;

	if (!except)
		return;
	for (size_t i = 0; i < hits->n; i++)
		if (!resolution_excepted(except, &hits->v[i]))
			hits->v[k++] = hits->v[i];
	hits->n = k;
}

int resolution_run(struct resolution_env *env, resolution_value_fn value,
		   void *ctx, char **text, char *why, size_t whylen)
{
	return resolution_run_except(env, value, ctx, NULL, text, why, whylen);
}

int resolution_run_except(struct resolution_env *env, resolution_value_fn value,
			  void *ctx, const char *except, char **text, char *why,
			  size_t whylen)
{
	const char *type = value(
		ctx, contract_field_find(CONTRACT_DIR_TOP, "cluster_type"));
	const char *policy = resolution_policy(env, value, ctx);
	static const struct {
		const char *name;
		enum contract_dir dir;
	} one[] = {{"node", CONTRACT_DIR_TOP}},
	  two[] = {{"manager", CONTRACT_DIR_MANAGER},
		   {"worker", CONTRACT_DIR_WORKER}};
	bool mw = strcmp(type, "ManagerWorkers") == 0;
	size_t nroles = mw ? 2 : 1, o = 0;
	struct resolution_roleq roles[2];
	char out[2048], price[32], sub[4096];
	struct catalog *cat;
	int rc = 0;

	memset(roles, 0, sizeof(roles));
	pthread_rwlock_rdlock(&env->lock);
	cat = env->catalog;
	for (size_t r = 0; r < nroles && rc == 0; r++) {
		roles[r].name = mw ? two[r].name : one[r].name;
		roles[r].weight =
			mw && r == 1 ? resolution_node_count(value, ctx) : 1;
		rc = resolution_query(env, value, ctx,
				      mw ? two[r].dir : one[r].dir, &roles[r].q,
				      sub, sizeof(sub));
		if (!rc && resolution_collect(
				   env, cat, &roles[r].q,
				   resolution_spot(value, ctx, roles[r].name),
				   &roles[r].hits))
			rc = -ENOMEM;
		if (!rc)
			resolution_except(&roles[r].hits, except);
		if (!rc &&
		    resolution_index(&roles[r], catalog_region_count(cat)))
			rc = -ENOMEM;
		if (!rc && roles[r].hits.n == 0) {
			resolution_none(env, cat, &roles[r], sub, sizeof(sub));
			rc = -EINVAL;
		}
		if (rc) {
			if (rc == -ENOMEM)
				snprintf(sub, sizeof(sub), "out of memory");
			if (mw)
				snprintf(why, whylen, "%s role: %s",
					 roles[r].name, sub);
			else
				snprintf(why, whylen, "%s", sub);
		}
	}
	if (!rc)
		rc = strcmp(policy, "cheapest") == 0
			     ? resolution_cheapest(roles, nroles, why, whylen)
			     : resolution_unique(roles, nroles, why, whylen);
	for (size_t r = 0; r < nroles && rc == 0; r++) {
		const struct resolution_hit *h = roles[r].chosen;

		if (!h) { /* never: each policy chooses for every role */
			snprintf(why, whylen, "%s role: nothing was chosen",
				 roles[r].name);
			rc = -EINVAL;
			break;
		}
		resolution_price_text(resolution_hit_price(h), price,
				      sizeof(price));
		o += (size_t)snprintf(out + o, sizeof(out) - o,
				      "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				      roles[r].name, h->t->provider, h->t->name,
				      price, h->o ? h->o->region : "-",
				      h->o && *h->o->zones ? h->o->zones : "-",
				      h->spot ? "spot" : "on-demand");
	}
	pthread_rwlock_unlock(&env->lock);
	for (size_t r = 0; r < nroles; r++) {
		free(roles[r].hits.v);
		free(roles[r].any);
		free(roles[r].best);
	}
	if (rc)
		return rc;
	*text = strdup(out);
	if (!*text) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int resolution_cmp_candidates(const void *pa, const void *pb)
{
	const struct resolution_hit *a = pa, *b = pb;
	double x = resolution_hit_price(a), y = resolution_hit_price(b);
	int c;

	x = isnan(x) ? INFINITY : x;
	y = isnan(y) ? INFINITY : y;
	if (x != y)
		return x < y ? -1 : 1;
	c = strcmp(a->t->name, b->t->name);
	if (c == 0)
		c = strcmp(a->t->provider, b->t->provider);
	if (c == 0)
		c = strcmp(a->o ? a->o->region : "", b->o ? b->o->region : "");
	return c;
}

/* Append n bytes to a growing buffer; -1 out of memory. */
static int resolution_append(char **out, size_t *len, size_t *cap,
			     const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t bigger = *cap * 2 + n;
		char *grown = realloc(*out, bigger);

		if (!grown)
			return -1;
		*out = grown;
		*cap = bigger;
	}
	memcpy(*out + *len, s, n);
	*len += n;
	(*out)[*len] = '\0';
	return 0;
}

/* Append one candidate line to out (grown as needed); -1 out of memory. */
static int resolution_candidate_line(const struct resolution_env *env,
				     const struct resolution_hit *h, char **out,
				     size_t *len, size_t *cap)
{
	const struct resolver_instance *t = h->t;
	int vc = assumption_field_find("node_vcpus_count");
	int mem = assumption_field_find("node_memory_size");
	int acc = assumption_field_find("accelerator_count");
	int accm = assumption_field_find("accelerator_memory");
	int model = assumption_field_find("accelerator");
	int arch = assumption_field_find("node_architecture");
	char line[1024], cpus[32], m[32], am[32], p[32], sp[32], accs[160];
	char ar[32];
	int n;

	resolver_feature_text(env->types, (size_t)vc, t, cpus, sizeof(cpus));
	resolver_feature_text(env->types, (size_t)mem, t, m, sizeof(m));
	resolver_feature_text(env->types, (size_t)accm, t, am, sizeof(am));
	resolver_feature_text(env->types, (size_t)arch, t, ar, sizeof(ar));
	/* Both prices, whatever the market (which orders the lines). */
	resolution_price_text(h->o ? h->o->price : h->t->price, p, sizeof(p));
	resolution_price_text(h->o ? h->o->spot : NAN, sp, sizeof(sp));
	if (isnan(t->number[acc]) || t->number[acc] == 0)
		snprintf(accs, sizeof(accs), "-");
	else
		snprintf(accs, sizeof(accs), "%g x %s", t->number[acc],
			 t->type[model] >= 0
				 ? hierarchy_name(env->types, t->type[model])
				 : "unknown");
	n = snprintf(line, sizeof(line),
		     "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		     t->provider, t->name, h->o ? h->o->region : "-",
		     *ar ? ar : "-", *cpus ? cpus : "-", *m ? m : "-", accs,
		     *am ? am : "-", p, sp,
		     h->o && *h->o->zones ? h->o->zones : "-");
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	return resolution_append(out, len, cap, line, (size_t)n);
}

char *resolution_candidates(struct resolution_env *env,
			    resolution_value_fn value, void *ctx)
{
	static const char header[] =
		"provider\tinstance_type\tregion\tarchitecture\tvcpus\tmemory\t"
		"accelerators\taccelerator_memory\tprice_per_hour\t"
		"spot_per_hour\tzones\n";
	size_t cap = 4096, len = sizeof(header) - 1;
	struct resolution_hits hits;
	struct resolver_query q;
	char *out = malloc(cap);
	char why[512];

	if (!out)
		return NULL;
	memcpy(out, header, len + 1);
	pthread_rwlock_rdlock(&env->lock);
	if (resolution_query(env, value, ctx, CONTRACT_DIR_TOP, &q, why,
			     sizeof(why))) {
		pthread_rwlock_unlock(&env->lock);
		return out;
	}
	if (resolution_collect(env, env->catalog, &q,
			       resolution_spot(value, ctx, "node"), &hits)) {
		free(out);
		out = NULL;
	}
	if (out && hits.n)
		qsort(hits.v, hits.n, sizeof(*hits.v),
		      resolution_cmp_candidates);
	for (size_t i = 0; out && i < hits.n; i++) {
		if (resolution_candidate_line(env, &hits.v[i], &out, &len,
					      &cap)) {
			free(out);
			out = NULL;
		}
	}
	pthread_rwlock_unlock(&env->lock);
	free(hits.v);
	return out;
}

size_t resolution_providers(const struct resolution_env *env, const char **out,
			    size_t max)
{
	struct resolution_env *w = (struct resolution_env *)env;
	size_t n;

	pthread_rwlock_rdlock(&w->lock);
	n = catalog_providers(env->catalog, out, max);
	pthread_rwlock_unlock(&w->lock);
	return n;
}

const char *resolution_provider_type(const struct resolution_env *env,
				     const char *provider, size_t i)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const struct resolver_instance *t;

	pthread_rwlock_rdlock(&w->lock);
	t = catalog_provider_type(env->catalog, provider, i);
	pthread_rwlock_unlock(&w->lock);
	return t ? t->name : NULL;
}

int resolution_type_exists(const struct resolution_env *env,
			   const char *provider, const char *type)
{
	struct resolution_env *w = (struct resolution_env *)env;
	int found;

	pthread_rwlock_rdlock(&w->lock);
	found = catalog_find(env->catalog, provider, type) != NULL;
	pthread_rwlock_unlock(&w->lock);
	return found;
}

const char *resolution_provider_region(const struct resolution_env *env,
				       const char *provider, size_t i)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const char *r;

	pthread_rwlock_rdlock(&w->lock);
	r = catalog_provider_region(env->catalog, provider, i);
	pthread_rwlock_unlock(&w->lock);
	return r;
}

int resolution_region_types(const struct resolution_env *env,
			    const char *provider, const char *region,
			    char **names, size_t *len)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const struct resolver_instance *t;
	size_t cap = 4096, n = 0;
	char *out = malloc(cap);
	bool known = false;
	int rc = 0;

	if (!out)
		return -ENOMEM;
	*out = '\0';
	pthread_rwlock_rdlock(&w->lock);
	for (size_t i = 0;
	     !known && catalog_provider_region(env->catalog, provider, i); i++)
		known = strcmp(catalog_provider_region(env->catalog, provider,
						       i),
			       region) == 0;
	for (size_t i = 0;
	     known && rc == 0 &&
	     (t = catalog_provider_type(env->catalog, provider, i));
	     i++)
		if (catalog_offer_in(t, region) &&
		    (resolution_append(&out, &n, &cap, t->name,
				       strlen(t->name)) ||
		     resolution_append(&out, &n, &cap, "\n", 1)))
			rc = -ENOMEM;
	pthread_rwlock_unlock(&w->lock);
	if (!known || rc) {
		free(out);
		return rc ? rc : -ENOENT;
	}
	*names = out;
	*len = n;
	return 0;
}

bool resolution_offered(const struct resolution_env *env, const char *provider,
			const char *region, const char *type)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const struct resolver_instance *t;
	const char *r;
	bool found = false;

	pthread_rwlock_rdlock(&w->lock);
	if (type) {
		t = catalog_find(env->catalog, provider, type);
		found = t && catalog_offer_in(t, region);
	} else {
		for (size_t i = 0;
		     !found &&
		     (r = catalog_provider_region(env->catalog, provider, i));
		     i++)
			found = strcmp(r, region) == 0;
	}
	pthread_rwlock_unlock(&w->lock);
	return found;
}

int resolution_offer_price(const struct resolution_env *env,
			   const char *provider, const char *type,
			   const char *region, double *price, double *spot)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const struct resolver_instance *t;
	const struct resolver_offer *o = NULL;

	pthread_rwlock_rdlock(&w->lock);
	t = catalog_find(env->catalog, provider, type);
	if (t)
		o = catalog_offer_in(t, region);
	if (o) {
		*price = o->price;
		*spot = o->spot;
	}
	pthread_rwlock_unlock(&w->lock);
	return o ? 0 : -ENOENT;
}

const char *resolution_feature_name(size_t i)
{
	static const char *const extra[] = {RESOLUTION_PRICE_FILE,
					    RESOLUTION_ARCH_FILE,
					    RESOLUTION_REGIONS_FILE, NULL};

	if (i < assumption_field_count)
		return assumption_fields[i].name;
	return extra[i - assumption_field_count < 3 ? i - assumption_field_count
						    : 3];
}

static int resolution_cmp_region(const void *pa, const void *pb)
{
	const struct resolver_offer *a = *(const void *const *)pa;
	const struct resolver_offer *b = *(const void *const *)pb;

	return strcmp(a->region, b->region);
}

/* The regions file: one line per region (name, on-demand and spot price
 * per hour, zones; "-" when unknown), by name. */
static int resolution_regions_text(const struct resolver_instance *t,
				   char **out, size_t *len, size_t *cap)
{
	const struct resolver_offer **v =
		malloc((t->noffers ? t->noffers : 1) * sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->noffers; i++)
		v[i] = &t->offers[i];
	qsort(v, t->noffers, sizeof(*v), resolution_cmp_region);
	for (size_t i = 0; i < t->noffers && rc == 0; i++) {
		char line[1024], p[32], s[32];
		int n;

		if (isnan(v[i]->price))
			snprintf(p, sizeof(p), "-");
		else
			resolution_price_text(v[i]->price, p, sizeof(p));
		if (isnan(v[i]->spot))
			snprintf(s, sizeof(s), "-");
		else
			resolution_price_text(v[i]->spot, s, sizeof(s));
		n = snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\n",
			     v[i]->region, p, s,
			     *v[i]->zones ? v[i]->zones : "-");
		if (n >= (int)sizeof(line))
			n = (int)sizeof(line) - 1;
		if (resolution_append(out, len, cap, line, (size_t)n))
			rc = -ENOMEM;
	}
	free(v);
	return rc;
}

int resolution_feature(const struct resolution_env *env, const char *provider,
		       const char *type, const char *feature, char **buf,
		       size_t *len)
{
	struct resolution_env *w = (struct resolution_env *)env;
	const struct resolver_instance *t;
	int f = assumption_field_find(feature);
	int lf = assumption_field_find("cluster_locale");
	size_t n = 0, cap = 256;
	char text[160];
	int rc = 0;

	*buf = malloc(cap);
	if (!*buf)
		return -ENOMEM;
	**buf = '\0';
	pthread_rwlock_rdlock(&w->lock);
	t = catalog_find(env->catalog, provider, type);
	if (!t) {
		rc = -ENOENT;
	} else if (strcmp(feature, RESOLUTION_REGIONS_FILE) == 0) {
		rc = resolution_regions_text(t, buf, &n, &cap);
	} else if (f == lf && t->noffers) {
		/* Every region's type, one per line. */
		for (size_t i = 0; i < t->noffers && rc == 0; i++) {
			const char *name =
				hierarchy_name(env->types, t->offers[i].locale);

			if (resolution_append(buf, &n, &cap, name,
					      strlen(name)) ||
			    resolution_append(buf, &n, &cap, "\n", 1))
				rc = -ENOMEM;
		}
	} else {
		if (f >= 0)
			resolver_feature_text(env->types, (size_t)f, t, text,
					      sizeof(text));
		else if (strcmp(feature, RESOLUTION_ARCH_FILE) == 0)
			resolver_feature_text(env->types,
					      (size_t)assumption_field_find(
						      "node_architecture"),
					      t, text, sizeof(text));
		else if (strcmp(feature, RESOLUTION_PRICE_FILE) != 0)
			rc = -ENOENT;
		else if (isnan(t->price))
			text[0] = '\0';
		else
			resolution_price_text(t->price, text, sizeof(text));
		if (rc == 0 && *text &&
		    (resolution_append(buf, &n, &cap, text, strlen(text)) ||
		     resolution_append(buf, &n, &cap, "\n", 1)))
			rc = -ENOMEM;
	}
	pthread_rwlock_unlock(&w->lock);
	if (rc) {
		free(*buf);
		*buf = NULL;
		return rc;
	}
	*len = n;
	return 0;
}
