/* What clusters cost: each node's billable time at its role's price (the
 * resolution's line of its role, priced at the market it was deployed
 * on), summed per cluster for its info file and for the mount's costs
 * file. A node bills from its launch while it runs; interrupted, preempted
 * and terminated time is not billed. */
#include "lifecycle/cluster_cost.h"

#include "lifecycle/cluster_priv.h"
#include "lifecycle/cluster_resolution.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double cluster_node_price(const struct cluster *c, const struct cluster_node *n)
{
	char provider[16], type[64], region[64];
	double price = NAN;
	const char *role = n->pn.rank < 0 ? "manager" : "worker";

	if (cluster_resolution_role(c->resolution, role, provider, type, &price,
				    region) &&
	    cluster_resolution_role(c->resolution, "node", provider, type,
				    &price, region))
		return NAN;
	return price;
}

double cluster_cost_price(const struct cluster *c)
{
	double sum = 0;

	for (size_t i = 0; i < c->nnodes; i++)
		sum += cluster_node_price(c, &c->nodes[i]);
	return sum;
}

void cluster_cost_at(const struct cluster *c, int64_t now,
		     struct cluster_cost *out)
{
	*out = (struct cluster_cost){0};
	for (size_t i = 0; i < c->nnodes; i++) {
		const struct cluster_node *n = &c->nodes[i];
		double price = cluster_node_price(c, n);
		double hours = (double)cluster_node_billed_ns(n, now) / 3.6e12;

		out->nodes += strcmp(n->state, "terminated") != 0;
		out->hours += hours;
		out->cost += price * hours; /* NAN stays NAN */
		if (cluster_node_billing(n)) {
			out->price_now += price;
			out->billed_now++;
		}
	}
}

/* --- the mount's costs file --- */

/* One field of the resolution's first role line (1: provider, 2: type,
 * 4: region), "-" when there is none. */
static void cluster_cost_field(const struct cluster *c, int field, char *out,
			       size_t len)
{
	const char *p = c->resolution ? c->resolution : "";

	for (int f = 0; f < field && *p && *p != '\n'; f++)
		p += strcspn(p, "\t\n") + (p[strcspn(p, "\t\n")] == '\t');
	snprintf(out, len, "%.*s", (int)strcspn(p, "\t\n"), p);
	if (!*out)
		snprintf(out, len, "-");
}

static void cluster_cost_number(char *out, size_t len, double v, int digits)
{
	if (isnan(v))
		snprintf(out, len, "unknown");
	else
		snprintf(out, len, "%.*f", digits, v);
}

int model_costs_stat(struct model *m, struct model_attr *attr)
{
	char *buf = NULL;
	size_t len = 0;
	int64_t last = 0;
	bool billing = false;
	int rc = model_costs_render(m, &buf, &len);

	free(buf);
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nclusters; i++)
		for (size_t k = 0; k < m->clusters[i]->nnodes; k++) {
			const struct cluster_node *n =
				&m->clusters[i]->nodes[k];

			billing |= cluster_node_billing(n);
			if (n->since_ns > last)
				last = n->since_ns;
		}
	pthread_mutex_unlock(&m->lock);
	/* While a node is billed its cost grows: the file changes now. */
	attr->size = len;
	attr->mtime_ns = billing ? model_now() : last ? last : m->clusters_ns;
	return rc;
}

int model_costs_render(struct model *m, char **buf, size_t *len)
{
	struct cluster_text t = {0};
	int64_t now = model_now();
	double total = 0, total_now = 0;
	char price[32], hours[32], cost[32];

	pthread_mutex_lock(&m->lock);
	cluster_printf(&t, "handle\tprovider\tinstance_type\tregion\tnodes\t"
			   "price_per_hour\thours_billed\tcost_so_far\n");
	for (size_t i = 0; i < m->nclusters; i++) {
		const struct cluster *c = m->clusters[i];
		struct cluster_cost cc;
		char provider[16], type[64], region[64];

		cluster_cost_at(c, now, &cc);
		cluster_cost_field(c, 1, provider, sizeof(provider));
		cluster_cost_field(c, 2, type, sizeof(type));
		cluster_cost_field(c, 4, region, sizeof(region));
		cluster_cost_number(price, sizeof(price), cc.price_now, 6);
		cluster_cost_number(hours, sizeof(hours), cc.hours, 4);
		cluster_cost_number(cost, sizeof(cost), cc.cost, 4);
		cluster_printf(&t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
			       c->handle, provider, type, region, cc.nodes,
			       price, hours, cost);
		total += cc.cost;
		total_now += cc.price_now;
	}
	cluster_cost_number(price, sizeof(price), total_now, 6);
	cluster_cost_number(cost, sizeof(cost), total, 4);
	cluster_printf(&t, "total\t-\t-\t-\t-\t%s\t-\t%s\n", price, cost);
	pthread_mutex_unlock(&m->lock);
	*buf = t.buf ? t.buf : strdup("");
	*len = t.len;
	return *buf ? 0 : -ENOMEM;
}
