/* What a cluster's contract lets the daemon do to it on its own: its
 * budget (config/budget, budget_action) and its idle limit
 * (config/idle_minutes, idle_action), read from the contract as they are
 * now, so that raising a limit applies at once. */
#include "lifecycle/cluster_limits.h"

#include "lifecycle/cluster_priv.h"

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
