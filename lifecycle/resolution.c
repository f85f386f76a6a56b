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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file of a catalog type that is not an assumption file. */
#define RESOLUTION_PRICE_FILE "price_per_hour"

struct resolution_env {
	const struct config *config;
	struct catalog *catalog;
	const struct hierarchy *types;
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

	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		number[f] = NAN;
	number[assumption_field_find("node_vcpus_count")] = t->vcpus;
	number[assumption_field_find("node_memory_size")] = t->memory_bytes;
	number[assumption_field_find("accelerator_count")] = t->accelerators;
	type[assumption_field_find("node_provider")] = e->name;
	type[assumption_field_find("node_machinetype")] = t->name;
	if (*t->accelerator &&
	    hierarchy_find(env->types, acc, t->accelerator) >= 0)
		type[acc] = t->accelerator;
	else if (*t->accelerator && *t->origin) {
		snprintf(err, errlen,
			 "%s: \"%s\" is not a known accelerator type",
			 t->origin, t->accelerator);
		return -1;
	}
	return catalog_add(env->catalog, e->name, t->name, number, type, 0, err,
			   errlen);
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

struct resolution_env *
resolution_env_open(const struct config *cfg,
		    const struct provider_entry *const *reg, char *err,
		    size_t errlen)
{
	struct resolution_env *env = calloc(1, sizeof(*env));

	if (!env) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	env->config = cfg;
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

struct resolution_env *resolution_env_wrap(const struct config *cfg,
					   struct catalog *cat)
{
	struct resolution_env *env = calloc(1, sizeof(*env));

	if (!env) {
		catalog_close(cat);
		return NULL;
	}
	env->config = cfg;
	env->catalog = cat;
	env->types = catalog_hierarchy(cat);
	return env;
}

void resolution_env_close(struct resolution_env *env)
{
	if (!env)
		return;
	catalog_close(env->catalog);
	free(env);
}

int resolution_check_name(const struct resolution_env *env, int field,
			  const char *name, char *out, size_t outlen, char *why,
			  size_t whylen)
{
	const char *spelling =
		hierarchy_spelling(env->types, (size_t)field, name);
	const char *near[3];
	size_t n, o;

	if (spelling) {
		snprintf(out, outlen, "%s", spelling);
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
	return -EINVAL;
}

/* The query of a role: the role's own file when it is not empty, else the
 * contract-level file. role is CONTRACT_DIR_TOP for one role. */
static int resolution_query(const struct resolution_env *env,
			    resolution_value_fn value, void *ctx,
			    enum contract_dir role, struct resolver_query *q,
			    char *why, size_t whylen)
{
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
			resolution_check_name(env, (int)f, q->a[f].name, err,
					      sizeof(err), why, whylen);
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

/* Choose the type of one role; 0 and *chosen, or -errno and why. The
 * catalog is in order of price, then vCPUs, then name, so the first match
 * is the cheapest. */
static int resolution_role(struct resolution_env *env, const char *policy,
			   const struct resolver_query *q,
			   const struct resolver_instance **chosen, char *why,
			   size_t whylen)
{
	size_t n = catalog_count(env->catalog), hits = 0, o = 0;
	const struct resolver_instance *first = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct resolver_instance *t = catalog_at(env->catalog, i);

		if (!resolver_match(env->types, q, t))
			continue;
		if (!first)
			first = t;
		hits++;
	}
	if (hits == 1 || (hits > 1 && strcmp(policy, "cheapest") == 0)) {
		*chosen = first;
		return 0;
	}
	if (hits == 0) {
		const struct resolver_instance **all =
			malloc((n ? n : 1) * sizeof(*all));

		if (!all) {
			snprintf(why, whylen, "out of memory");
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++)
			all[i] = catalog_at(env->catalog, i);
		resolver_explain_none(env->types, q, all, n, why, whylen);
		free(all);
		return -EINVAL;
	}
	o = (size_t)snprintf(why, whylen,
			     "%zu instance types satisfy the contract (", hits);
	for (size_t i = 0, k = 0; i < n && o < whylen; i++) {
		const struct resolver_instance *t = catalog_at(env->catalog, i);

		if (resolver_match(env->types, q, t))
			o += (size_t)snprintf(why + o, whylen - o, "%s%s",
					      k++ ? ", " : "", t->name);
	}
	if (o < whylen)
		snprintf(why + o, whylen - o,
			 "); add assumptions, or write cheapest to "
			 "config/resolve_policy");
	return -EINVAL;
}

int resolution_run(struct resolution_env *env, resolution_value_fn value,
		   void *ctx, char **text, char *why, size_t whylen)
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
	size_t roles = mw ? 2 : 1;
	char out[1024], price[32], sub[4096];
	size_t o = 0;

	for (size_t r = 0; r < roles; r++) {
		const char *name = mw ? two[r].name : one[r].name;
		struct resolver_query q;
		const struct resolver_instance *t = NULL;
		int rc;

		rc = resolution_query(env, value, ctx,
				      mw ? two[r].dir : one[r].dir, &q, sub,
				      sizeof(sub));
		if (!rc)
			rc = resolution_role(env, policy, &q, &t, sub,
					     sizeof(sub));
		if (rc) {
			if (mw)
				snprintf(why, whylen, "%s role: %s", name, sub);
			else
				snprintf(why, whylen, "%s", sub);
			return rc;
		}
		resolution_price_text(t->price, price, sizeof(price));
		o += (size_t)snprintf(out + o, sizeof(out) - o,
				      "%s\t%s\t%s\t%s\n", name, t->provider,
				      t->name, price);
	}
	*text = strdup(out);
	if (!*text) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int resolution_cmp_candidates(const void *pa, const void *pb)
{
	const struct resolver_instance *a = *(const void *const *)pa;
	const struct resolver_instance *b = *(const void *const *)pb;
	double x = isnan(a->price) ? INFINITY : a->price;
	double y = isnan(b->price) ? INFINITY : b->price;
	int c;

	if (x != y)
		return x < y ? -1 : 1;
	c = strcmp(a->name, b->name);
	return c ? c : strcmp(a->provider, b->provider);
}

/* Append one candidate line to out (grown as needed); -1 out of memory. */
static int resolution_candidate_line(const struct resolution_env *env,
				     const struct resolver_instance *t,
				     char **out, size_t *len, size_t *cap)
{
	int vc = assumption_field_find("node_vcpus_count");
	int mem = assumption_field_find("node_memory_size");
	int acc = assumption_field_find("accelerator_count");
	int accm = assumption_field_find("accelerator_memory");
	int model = assumption_field_find("accelerator");
	char line[512], cpus[32], m[32], am[32], p[32], accs[160];
	int n;

	resolver_feature_text(env->types, (size_t)vc, t, cpus, sizeof(cpus));
	resolver_feature_text(env->types, (size_t)mem, t, m, sizeof(m));
	resolver_feature_text(env->types, (size_t)accm, t, am, sizeof(am));
	resolution_price_text(t->price, p, sizeof(p));
	if (isnan(t->number[acc]) || t->number[acc] == 0)
		snprintf(accs, sizeof(accs), "-");
	else
		snprintf(accs, sizeof(accs), "%g x %s", t->number[acc],
			 t->type[model] >= 0
				 ? hierarchy_name(env->types, t->type[model])
				 : "unknown");
	n = snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		     t->provider, t->name, *cpus ? cpus : "-", *m ? m : "-",
		     accs, *am ? am : "-", p);
	if (*len + (size_t)n + 1 > *cap) {
		size_t bigger = *cap * 2 + (size_t)n;
		char *grown = realloc(*out, bigger);

		if (!grown)
			return -1;
		*out = grown;
		*cap = bigger;
	}
	memcpy(*out + *len, line, (size_t)n + 1);
	*len += (size_t)n;
	return 0;
}

char *resolution_candidates(struct resolution_env *env,
			    resolution_value_fn value, void *ctx)
{
	static const char header[] =
		"provider\tinstance_type\tvcpus\tmemory\taccelerators\t"
		"accelerator_memory\tprice_per_hour\n";
	size_t n = catalog_count(env->catalog), hits = 0;
	size_t cap = 4096, len = sizeof(header) - 1;
	const struct resolver_instance **match;
	struct resolver_query q;
	char *out = malloc(cap);
	char why[512];

	if (!out)
		return NULL;
	memcpy(out, header, len + 1);
	if (resolution_query(env, value, ctx, CONTRACT_DIR_TOP, &q, why,
			     sizeof(why)))
		return out;
	match = malloc((n ? n : 1) * sizeof(*match));
	if (!match) {
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (resolver_match(env->types, &q, catalog_at(env->catalog, i)))
			match[hits++] = catalog_at(env->catalog, i);
	qsort(match, hits, sizeof(*match), resolution_cmp_candidates);
	for (size_t i = 0; i < hits; i++) {
		if (resolution_candidate_line(env, match[i], &out, &len,
					      &cap)) {
			free(out);
			out = NULL;
			break;
		}
	}
	free(match);
	return out;
}

size_t resolution_providers(const struct resolution_env *env, const char **out,
			    size_t max)
{
	return catalog_providers(env->catalog, out, max);
}

const char *resolution_provider_type(const struct resolution_env *env,
				     const char *provider, size_t i)
{
	const struct resolver_instance *t =
		catalog_provider_type(env->catalog, provider, i);

	return t ? t->name : NULL;
}

int resolution_type_exists(const struct resolution_env *env,
			   const char *provider, const char *type)
{
	return catalog_find(env->catalog, provider, type) != NULL;
}

const char *resolution_feature_name(size_t i)
{
	if (i < assumption_field_count)
		return assumption_fields[i].name;
	return i == assumption_field_count ? RESOLUTION_PRICE_FILE : NULL;
}

int resolution_feature(const struct resolution_env *env, const char *provider,
		       const char *type, const char *feature, char **buf,
		       size_t *len)
{
	const struct resolver_instance *t =
		catalog_find(env->catalog, provider, type);
	int f = assumption_field_find(feature);
	char text[160];
	size_t n;

	if (!t)
		return -ENOENT;
	if (f >= 0)
		resolver_feature_text(env->types, (size_t)f, t, text,
				      sizeof(text));
	else if (strcmp(feature, RESOLUTION_PRICE_FILE) != 0)
		return -ENOENT;
	else if (isnan(t->price))
		text[0] = '\0';
	else
		resolution_price_text(t->price, text, sizeof(text));
	n = strlen(text);
	*buf = malloc(n + 2);
	if (!*buf)
		return -ENOMEM;
	memcpy(*buf, text, n);
	if (n)
		(*buf)[n++] = '\n';
	(*buf)[n] = '\0';
	*len = n;
	return 0;
}
