/* clusters/H/node_count: a running cluster grown or shrunk. The request
 * stores the new size and the state resizing before anything is asked of
 * a provider; the resize job (cluster_jobs.c) then adds the node records
 * of the new ranks, creates them, terminates and forgets the ranks past
 * the size, and sets up the hostfile, SSH and MPI keys on every node. */
#include "lifecycle/cluster_resize.h"

#include "lifecycle/cluster_priv.h"
#include "lifecycle/jobs.h"
#include "lifecycle/store.h"
#include "providers/provider.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ranks of c: workers (rank >= 0) in rank order after the manager. */
static size_t cluster_resize_workers(const struct cluster *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->nnodes; i++)
		n += c->nodes[i].pn.rank >= 0;
	return n;
}

int cluster_resize_request(struct model *m, struct cluster *c, const char *text,
			   size_t len)
{
	const struct contract_field *f = contract_field_at(
		(size_t)contract_field_find(CONTRACT_DIR_TOP, "node_count"));
	char value[32], why[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	const struct cluster_node *last =
		c->nnodes ? &c->nodes[c->nnodes - 1] : NULL;
	struct provider *p = last ? cluster_provider(m, last) : NULL;
	int rc, from = c->node_count, to;

	rc = contract_normalise(f, text, len, value, sizeof(value), why,
				sizeof(why));
	if (rc == 0 && !*value) {
		snprintf(why, sizeof(why),
			 "write the number of nodes the cluster should have");
		rc = -EINVAL;
	}
	if (rc)
		return cluster_fail(m, c, "node_count", rc, why);
	to = atoi(value);
	if (c->state != CLUSTER_RUNNING) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; it can be resized only when "
			 "running",
			 cluster_state_names[c->state]);
		return cluster_fail(m, c, "node_count", -EBUSY, why);
	}
	if (to == from) {
		cluster_clear_error(m, c);
		return 0;
	}
	if (!last || !provider_can(p, PROVIDER_CAN_RESIZE)) {
		snprintf(why, sizeof(why),
			 "the %s provider cannot resize a cluster in this "
			 "version of cclfs; deploy a new one of %d nodes",
			 last ? last->provider : "(none)", to);
		return cluster_fail(m, c, "node_count", -EOPNOTSUPP, why);
	}
	c->node_count = to;
	snprintf(why, sizeof(why), "resize: from %d to %d %s", from, to,
		 strcmp(c->cluster_type, "ManagerWorkers") == 0 ? "workers"
								: "nodes");
	rc = cluster_set_state_note(m, c, CLUSTER_RESIZING, why, err,
				    sizeof(err));
	if (rc) {
		c->node_count = from;
		return cluster_fail(m, c, "node_count", rc, err);
	}
	cluster_clear_error(m, c);
	cluster_notify(m, c, "node_count");
	cluster_notify(m, c, "info");
	if (m->jobs && jobs_submit(m->jobs, c->handle, (int)CLUSTER_OP_RESIZE))
		cluster_log(m, c,
			    "the resize job could not be started; it runs at "
			    "the next mount");
	return 0;
}

int cluster_resize_add_nodes(struct model *m, struct cluster *c, char *err,
			     size_t errlen)
{
	size_t have = cluster_resize_workers(c), want = (size_t)c->node_count;
	size_t last = c->nnodes;
	struct cluster_node *v;
	int64_t now = model_now();

	if (have >= want)
		return 0;
	/* The new ranks are of the cluster's resolved type and provider,
	 * as its last worker is. */
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].pn.rank >= 0)
			last = i;
	if (last == c->nnodes) {
		snprintf(err, errlen, "the cluster has no worker to copy");
		return -EINVAL;
	}
	v = realloc(c->nodes, (c->nnodes + want - have) * sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->nodes = v;
	for (size_t r = have; r < want; r++) {
		struct cluster_node *n = &v[c->nnodes];
		int rc;

		*n = v[last];
		n->pn.rank = (int)r;
		n->pn.instance_id[0] = n->pn.address[0] = '\0';
		n->pn.workdir[0] = '\0';
		snprintf(n->name, sizeof(n->name), "%zu", r);
		n->state[0] = '\0';
		n->billed_ns = 0;
		n->exit_status = -1;
		n->exec_ns = 0;
		cluster_node_set_state(n, "creating", now);
		/* Recorded before the provider is asked: a crash leaves the
		 * rank for the next mount's resize job to create. */
		rc = cluster_store_node(m, n, err, errlen);
		if (rc)
			return rc;
		last = c->nnodes++;
	}
	cluster_notify(m, c, "nodes");
	return 0;
}

int cluster_resize_drop_node(struct model *m, struct cluster *c, size_t i,
			     char *err, size_t errlen)
{
	int rc = store_node_remove(m->store, c->handle, c->nodes[i].pn.rank,
				   err, errlen);

	if (rc)
		return rc;
	memmove(&c->nodes[i], &c->nodes[i + 1],
		(c->nnodes - i - 1) * sizeof(*c->nodes));
	c->nnodes--;
	cluster_notify(m, c, "nodes");
	return 0;
}
