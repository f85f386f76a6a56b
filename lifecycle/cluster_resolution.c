/* A cluster's resolution: its role lines, and its failover to the next
 * candidate of its contract (cheapest) when its provider found no capacity
 * in any zone of the region it resolved to. The offers tried are kept in
 * the cluster's options ("tried=PROVIDER\tTYPE\tREGION"), so a remount
 * goes on from where the deploy was. */
#include "lifecycle/cluster_resolution.h"

#include "lifecycle/cluster_priv.h"
#include "lifecycle/model_priv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cluster_resolution_role(const char *resolution, const char *role,
			    char provider[16], char type[64], double *price,
			    char region[64])
{
	const char *line = resolution;
	size_t n = strlen(role);

	for (; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		char p[16], t[64], pr[32], r[64] = "-";

		if (strncmp(line, role, n) != 0 || line[n] != '\t')
			continue;
		if (sscanf(line + n + 1,
			   "%15[^\t]\t%63[^\t]\t%31[^\t\n]\t%63[^\t\n]", p, t,
			   pr, r) < 3)
			return -1;
		memcpy(provider, p, sizeof(p));
		memcpy(type, t, sizeof(t));
		*price = strcmp(pr, "unknown") == 0 ? NAN : strtod(pr, NULL);
		snprintf(region, 64, "%s", strcmp(r, "-") == 0 ? "" : r);
		return 0;
	}
	return -1;
}

/* The roles of a cluster of this type, as its resolution names them. */
static size_t cluster_roles(const struct cluster *c, const char *names[2])
{
	if (strcmp(c->cluster_type, "ManagerWorkers") == 0) {
		names[0] = "manager";
		names[1] = "worker";
		return 2;
	}
	names[0] = "node";
	return 1;
}

/* The options without their region= line, and with `add` appended. */
static int cluster_options_set(struct cluster *c, const char *region,
			       const char *add)
{
	char out[sizeof(c->options)];
	size_t o = 0;

	for (const char *p = c->options; *p;) {
		size_t l = strcspn(p, "\n");

		if (strncmp(p, "region=", 7) != 0) {
			if (o + l + 2 > sizeof(out))
				return -1;
			memcpy(out + o, p, l);
			o += l;
			out[o++] = '\n';
		}
		p += l + (p[l] == '\n');
	}
	o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s%s%s",
			      *region ? "region=" : "", region,
			      *region ? "\n" : "", add);
	if (o >= sizeof(out))
		return -1;
	memcpy(c->options, out, o + 1);
	return 0;
}

int cluster_failover(struct model *m, struct cluster *c, const char *why)
{
	const char *roles[2];
	size_t nroles = cluster_roles(c, roles), tried_n = 0, o = 0;
	char provider[2][16], type[2][64], region[2][64], add[512] = "";
	char tried[2048] = "", err[MODEL_ERR_MAX], *text = NULL;
	double price[2];
	const char *policy =
		m->contract_next
			? m->contract_config(m, c->contract, "resolve_policy")
			: "";
	int rc;

	if (strcmp(policy, "cheapest") != 0)
		return -1;
	/* The offers tried before, and the one that failed now. */
	for (const char *p = c->options; *p;) {
		size_t l = strcspn(p, "\n");

		if (strncmp(p, "tried=", 6) == 0 && o + l < sizeof(tried)) {
			o += (size_t)snprintf(tried + o, sizeof(tried) - o,
					      "%.*s\n", (int)(l - 6), p + 6);
			tried_n++;
		}
		p += l + (p[l] == '\n');
	}
	if (tried_n / nroles >= CLUSTER_FAILOVER_CANDIDATES)
		return -1;
	for (size_t r = 0; r < nroles; r++) {
		size_t a = strlen(add);

		if (cluster_resolution_role(c->resolution, roles[r],
					    provider[r], type[r], &price[r],
					    region[r]))
			return -1;
		o += (size_t)snprintf(tried + o, sizeof(tried) - o,
				      "%s\t%s\t%s\n", provider[r], type[r],
				      region[r]);
		snprintf(add + a, sizeof(add) - a, "tried=%s\t%s\t%s\n",
			 provider[r], type[r], region[r]);
	}
	if (o >= sizeof(tried))
		return -1;
	rc = m->contract_next(m, c->contract, tried, &text, err, sizeof(err));
	if (rc) {
		cluster_log(m, c,
			    "no capacity for %s %s in %s, and no further "
			    "candidate: %s",
			    provider[nroles - 1], type[nroles - 1],
			    region[nroles - 1], err);
		return -1;
	}
	{
		char np[2][16], nt[2][64], nr[2][64];
		double npr[2];

		for (size_t r = 0; r < nroles; r++)
			if (cluster_resolution_role(text, roles[r], np[r],
						    nt[r], &npr[r], nr[r]) ||
			    strcmp(np[r], provider[r]) != 0) {
				cluster_log(m, c,
					    "no capacity for %s %s in %s; the "
					    "next candidate is not on %s, "
					    "which launched the cluster",
					    provider[r], type[r], region[r],
					    provider[r]);
				free(text);
				return -1;
			}
		cluster_log(m, c,
			    "no capacity for %s %s in %s (%.400s); moving to "
			    "the next candidate (%zu of %d): %s in %s at %g "
			    "USD/hour",
			    provider[nroles - 1], type[nroles - 1],
			    region[nroles - 1], why, tried_n / nroles + 1,
			    CLUSTER_FAILOVER_CANDIDATES, nt[nroles - 1],
			    nr[nroles - 1], npr[nroles - 1]);
		if (cluster_options_set(c, nr[0], add)) {
			cluster_log(m, c,
				    "the cluster's options are full; no "
				    "failover");
			free(text);
			return -1;
		}
		free(c->resolution);
		c->resolution = text;
		c->price = 0;
		for (size_t i = 0; i < c->nnodes; i++) {
			struct cluster_node *n = &c->nodes[i];
			size_t r = nroles == 2 && n->pn.rank >= 0 ? 1 : 0;

			snprintf(n->instance_type, sizeof(n->instance_type),
				 "%.63s", nt[r]);
			snprintf(n->pn.instance_type,
				 sizeof(n->pn.instance_type), "%.63s", nt[r]);
			snprintf(n->pn.options, sizeof(n->pn.options), "%s",
				 c->options);
			n->pn.instance_id[0] = n->pn.address[0] = '\0';
			n->pn.workdir[0] = '\0';
			cluster_node_set_state(n, "creating", model_now());
			c->price += npr[r];
		}
	}
	c->done = 0;
	if (cluster_store_all(m, c, err, sizeof(err)))
		cluster_log(m, c, "the state store: %s", err);
	cluster_notify(m, c, "info");
	cluster_notify(m, c, "state");
	return 0;
}
