/* What a cluster's contract lets the daemon do to it on its own: its
 * budget (config/budget, budget_action) and its idle limit
 * (config/idle_minutes, idle_action). All with the model locked. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_LIMITS_H
#define CCLFS_LIFECYCLE_CLUSTER_LIMITS_H

#include "lifecycle/cluster_state.h"

#include <stddef.h>
#include <stdint.h>

struct model;
struct cluster;

/* CLUSTER_AUTO() of the requests a budget or an idle limit may make of
 * the running cluster (0 when it has neither). */
unsigned cluster_limits_auto_ops(struct model *m, const struct cluster *c);

/* A running cluster whose cost so far reached config/budget: 1 with the
 * request its budget_action makes and the sentence that says why; else 0. */
int cluster_limits_spent(struct model *m, const struct cluster *c, int64_t now,
			 enum cluster_op *op, char *why, size_t len);
/* A running cluster with no command under way, and no exec, mpiexec or
 * files/ use through the mount for config/idle_minutes: 1 with the
 * request its idle_action makes and why (the caller then asks the nodes
 * whether a process cclfs started still runs); else 0. */
int cluster_limits_idle(struct model *m, const struct cluster *c, int64_t now,
			enum cluster_op *op, char *why, size_t len);
/* Before a resume: -EBUSY with why when the budget is spent, else 0. */
int cluster_limits_resume(struct model *m, const struct cluster *c, char *why,
			  size_t len);

#endif
