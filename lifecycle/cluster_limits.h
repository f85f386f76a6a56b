/* What a cluster's contract lets the daemon do to it on its own: its
 * budget (config/budget, budget_action) and its idle limit
 * (config/idle_minutes, idle_action). All with the model locked. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_LIMITS_H
#define CCLFS_LIFECYCLE_CLUSTER_LIMITS_H

#include "lifecycle/cluster_state.h"

struct model;
struct cluster;

/* CLUSTER_AUTO() of the requests a budget or an idle limit may make of
 * the running cluster (0 when it has neither). */
unsigned cluster_limits_auto_ops(struct model *m, const struct cluster *c);

#endif
