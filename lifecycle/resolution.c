/* Resolution of a contract: gathers the contract's assumptions per role
 * (role files override contract-level ones), runs the resolver over the
 * catalog, applies the resolve policy, and renders resolution/candidates. */
#include "lifecycle/resolution.h"

#include "catalog/catalog.h"
#include "lifecycle/contract.h"
#include "providers/local.h"
#include "resolver/match.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct resolution_env {
	const struct config *config;
	struct catalog *catalog;
};

struct resolution_env *resolution_env_open(const struct config *cfg, char *err,
					   size_t errlen)
{
	struct resolution_env *env = calloc(1, sizeof(*env));
	struct local_features lf;

	if (!env) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	env->config = cfg;
	env->catalog = catalog_open(err, errlen);
	if (!env->catalog)
		goto fail;
	local_detect(&lf);
	if (catalog_add_local(env->catalog, lf.vcpus, lf.memory_bytes)) {
		snprintf(err, errlen, "catalog: out of memory");
		goto fail;
	}
	return env;
fail:
	resolution_env_close(env);
	return NULL;
}

void resolution_env_close(struct resolution_env *env)
{
	if (!env)
		return;
	catalog_close(env->catalog);
	free(env);
}

/* The assumptions of a role: the role's own file when it is not empty,
 * else the contract-level file. role is CONTRACT_DIR_TOP for one role. */
static int resolution_assumptions(resolution_value_fn value, void *ctx,
				  enum contract_dir role, struct assumption *a,
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
		/* Stored values were validated when written. */
		if (assumption_parse(assumption_fields[f].kind, v, strlen(v),
				     &a[f], err, sizeof(err))) {
			snprintf(why, whylen, "%s: %s", name, err);
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

static int resolution_cheaper(const struct resolver_instance *a,
			      const struct resolver_instance *b)
{
	int vc = assumption_field_find("node_vcpus_count");
	double pa = isnan(a->price) ? INFINITY : a->price;
	double pb = isnan(b->price) ? INFINITY : b->price;

	if (pa != pb)
		return pa < pb;
	if (a->number[vc] != b->number[vc])
		return a->number[vc] < b->number[vc];
	return strcmp(a->name, b->name) < 0;
}

static void resolution_price_text(double price, char *buf, size_t len)
{
	if (isnan(price))
		snprintf(buf, len, "unknown");
	else
		snprintf(buf, len, "%.6g", price);
}

/* Choose the type of one role; 0 and *chosen, or -errno and why. */
static int resolution_role(struct resolution_env *env, const char *policy,
			   const struct assumption *a,
			   const struct resolver_instance **chosen, char *why,
			   size_t whylen)
{
	size_t n = catalog_count(env->catalog), hits = 0, o;
	const struct resolver_instance **all =
		malloc((n ? n : 1) * sizeof(*all));
	const struct resolver_instance *best = NULL;

	if (!all) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct resolver_instance *t = catalog_at(env->catalog, i);

		all[i] = t;
		if (resolver_match(a, t)) {
			hits++;
			if (!best || resolution_cheaper(t, best))
				best = t;
		}
	}
	if (hits == 0) {
		resolver_explain_none(a, all, n, why, whylen);
		free(all);
		return -EINVAL;
	}
	if (hits > 1 && strcmp(policy, "cheapest") != 0) {
		o = (size_t)snprintf(why, whylen,
				     "%zu instance types satisfy the contract "
				     "(",
				     hits);
		for (size_t i = 0, k = 0; i < n && o < whylen; i++) {
			if (!resolver_match(a, all[i]))
				continue;
			o += (size_t)snprintf(why + o, whylen - o, "%s%s",
					      k++ ? ", " : "", all[i]->name);
		}
		if (o < whylen)
			snprintf(why + o, whylen - o,
				 "); add assumptions, or write cheapest to "
				 "config/resolve_policy");
		free(all);
		return -EINVAL;
	}
	*chosen = best;
	free(all);
	return 0;
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
	char out[1024], price[32], sub[768];
	size_t o = 0;

	for (size_t r = 0; r < roles; r++) {
		const char *name = mw ? two[r].name : one[r].name;
		struct assumption a[RESOLVER_FIELDS];
		const struct resolver_instance *t = NULL;
		int rc;

		rc = resolution_assumptions(value, ctx,
					    mw ? two[r].dir : one[r].dir, a,
					    why, whylen);
		if (!rc)
			rc = resolution_role(env, policy, a, &t, sub,
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

char *resolution_candidates(struct resolution_env *env,
			    resolution_value_fn value, void *ctx)
{
	static const char header[] =
		"provider\tinstance_type\tvcpus\tmemory\taccelerators\t"
		"accelerator_memory\tprice_per_hour\n";
	struct assumption a[RESOLVER_FIELDS];
	char why[256];
	size_t cap = 4096, len = sizeof(header) - 1;
	char *out = malloc(cap);
	int vc = assumption_field_find("node_vcpus_count");
	int mem = assumption_field_find("node_memory_size");
	int acc = assumption_field_find("accelerator_count");
	int accm = assumption_field_find("accelerator_memory");
	int model = assumption_field_find("accelerator");

	if (!out)
		return NULL;
	memcpy(out, header, len + 1);
	if (resolution_assumptions(value, ctx, CONTRACT_DIR_TOP, a, why,
				   sizeof(why)))
		return out;
	for (size_t i = 0; i < catalog_count(env->catalog); i++) {
		const struct resolver_instance *t = catalog_at(env->catalog, i);
		char line[512], cpus[32], m[32], am[32], p[32], accs[128];
		int n;

		if (!resolver_match(a, t))
			continue;
		resolver_feature_text((size_t)vc, t, cpus, sizeof(cpus));
		resolver_feature_text((size_t)mem, t, m, sizeof(m));
		resolver_feature_text((size_t)accm, t, am, sizeof(am));
		resolution_price_text(t->price, p, sizeof(p));
		if (isnan(t->number[acc]) || t->number[acc] == 0)
			snprintf(accs, sizeof(accs), "-");
		else
			snprintf(accs, sizeof(accs), "%g x %s", t->number[acc],
				 t->type[model] ? t->type[model] : "unknown");
		n = snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			     t->provider, t->name, cpus, m, accs,
			     isnan(t->number[accm]) ? "-" : am, p);
		if (len + (size_t)n + 1 > cap) {
			char *bigger = realloc(out, cap * 2 + (size_t)n);

			if (!bigger) {
				free(out);
				return NULL;
			}
			out = bigger;
			cap = cap * 2 + (size_t)n;
		}
		memcpy(out + len, line, (size_t)n + 1);
		len += (size_t)n;
	}
	return out;
}
