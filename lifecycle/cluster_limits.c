/* What a cluster's contract lets the daemon do to it on its own: its
 * budget (config/budget, budget_action) and its idle limit
 * (config/idle_minutes, idle_action), read from the contract as they are
 * now, so that raising a limit applies at once. */
#include "lifecycle/cluster_limits.h"

#include "lifecycle/cluster_cost.h"
#include "lifecycle/cluster_priv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* config/KEY of the cluster's contract ("" when unset). */
static const char *
cluster_limits_config(struct model *m, const struct cluster *c, const char *key)
{
	const char *v = m->contract_config
				? m->contract_config(m, c->contract, key)
				: NULL;

	return v ? v : "";
}

/* The request an action file asks for (interrupt unless it says
 * terminate). */
static enum cluster_op
cluster_limits_action(struct model *m, const struct cluster *c, const char *key)
{
	return strcmp(cluster_limits_config(m, c, key), "terminate") == 0
		       ? CLUSTER_OP_TERMINATE
		       : CLUSTER_OP_STOP;
}

unsigned cluster_limits_auto_ops(struct model *m, const struct cluster *c)
{
	unsigned ops = 0;

	if (*cluster_limits_config(m, c, "budget"))
		ops |= CLUSTER_AUTO(
			cluster_limits_action(m, c, "budget_action"));
	if (*cluster_limits_config(m, c, "idle_minutes"))
		ops |= CLUSTER_AUTO(cluster_limits_action(m, c, "idle_action"));
	return ops;
}

/* A minute of config/idle_minutes: 60 s, or CCLFS_TEST_MINUTE_MS
 * milliseconds, a scale for tests only (documented as such). */
static int64_t cluster_limits_minute_ns(void)
{
	const char *v = getenv("CCLFS_TEST_MINUTE_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;

	return ms > 0 ? (int64_t)ms * 1000000 : (int64_t)60 * 1000000000;
}

/* config/KEY as a positive number; 0 when unset. */
static double cluster_limits_number(struct model *m, const struct cluster *c,
				    const char *key)
{
	double v = strtod(cluster_limits_config(m, c, key), NULL);

	return v > 0 && isfinite(v) ? v : 0;
}

/* An amount of US dollars in a sentence: cents, or more places for what
 * is less than a cent (a test's tiny budget). */
static void cluster_limits_usd(double v, char *buf, size_t len)
{
	snprintf(buf, len, v != 0 && v < 0.01 ? "%.6f" : "%.2f", v);
}

static const char *cluster_limits_doing(enum cluster_op op)
{
	return op == CLUSTER_OP_TERMINATE ? "terminating" : "interrupting";
}

/* The budget and what the cluster has cost: 1 when it is spent. */
static int cluster_limits_over(struct model *m, const struct cluster *c,
			       int64_t now, double *budget, double *cost)
{
	struct cluster_cost cc;

	*budget = cluster_limits_number(m, c, "budget");
	if (*budget <= 0)
		return 0;
	cluster_cost_at(c, now, &cc);
	*cost = cc.cost;
	return !isnan(cc.cost) && cc.cost >= *budget;
}

int cluster_limits_spent(struct model *m, const struct cluster *c, int64_t now,
			 enum cluster_op *op, char *why, size_t len)
{
	double budget, cost;
	char spent[32];

	if (c->state != CLUSTER_RUNNING ||
	    !cluster_limits_over(m, c, now, &budget, &cost))
		return 0;
	*op = cluster_limits_action(m, c, "budget_action");
	cluster_limits_usd(cost, spent, sizeof(spent));
	snprintf(why, len,
		 "the cluster has cost %s USD, which reaches its budget of %s "
		 "USD (config/budget of contract %s); %s it",
		 spent, cluster_limits_config(m, c, "budget"), c->contract,
		 cluster_limits_doing(*op));
	return 1;
}

int cluster_limits_idle(struct model *m, const struct cluster *c, int64_t now,
			enum cluster_op *op, char *why, size_t len)
{
	double minutes = cluster_limits_number(m, c, "idle_minutes");

	if (c->state != CLUSTER_RUNNING || minutes <= 0 || c->commands ||
	    (double)(now - c->active_ns) <
		    minutes * (double)cluster_limits_minute_ns())
		return 0;
	*op = cluster_limits_action(m, c, "idle_action");
	snprintf(why, len,
		 "the cluster has been idle for %.15g minutes (config/"
		 "idle_minutes of contract %s): no exec, mpiexec or files/ "
		 "use through the mount and no process cclfs started on its "
		 "nodes; %s it",
		 minutes, c->contract, cluster_limits_doing(*op));
	return 1;
}

int cluster_limits_resume(struct model *m, const struct cluster *c, char *why,
			  size_t len)
{
	double budget, cost;
	char spent[32];

	if (!cluster_limits_over(m, c, model_now(), &budget, &cost))
		return 0;
	cluster_limits_usd(cost, spent, sizeof(spent));
	snprintf(why, len,
		 "the cluster has cost %s USD and its budget is %s USD; "
		 "raise config/budget of contract %s to resume it",
		 spent, cluster_limits_config(m, c, "budget"), c->contract);
	return -EBUSY;
}
