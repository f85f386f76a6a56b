/* What clusters cost: each node's billable time (from its launch while it
 * runs: cluster_node_billed_ns) at its role's price of the market it was
 * bought on, from the cluster's resolution. With the model locked. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_COST_H
#define CCLFS_LIFECYCLE_CLUSTER_COST_H

#include <stdint.h>

struct cluster;
struct cluster_node;

struct cluster_cost {
	double price_now; /* USD per hour of the nodes billed now */
	double hours;	  /* node-hours billed so far */
	double cost;	  /* USD so far; NAN when a price is unknown */
	int billed_now;	  /* nodes billed now */
	int nodes;	  /* nodes not terminated */
};

/* The price per hour of node n (its role's), NAN when unknown. */
double cluster_node_price(const struct cluster *c,
			  const struct cluster_node *n);
/* The price per hour of all of c's nodes (NAN when one is unknown): what
 * info's price_per_hour says after a resize. */
double cluster_cost_price(const struct cluster *c);
/* What c has cost up to `now`. */
void cluster_cost_at(const struct cluster *c, int64_t now,
		     struct cluster_cost *out);

#endif
