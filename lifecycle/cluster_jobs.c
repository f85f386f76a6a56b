/* The jobs of clusters: deploy, interrupt, resume and terminate carried
 * out through the providers' batch operations, each cluster's on a queue
 * of its own (jobs.c), cancelled when a terminate preempts them or the
 * filesystem is unmounted; the requests written to `state` and `restart`;
 * and at mount, what the providers say of the nodes the store records. */
#include "lifecycle/cluster_jobs.h"

#include "lifecycle/cluster_cost.h"
#include "lifecycle/cluster_hostfile.h"
#include "lifecycle/cluster_limits.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/cluster_resize.h"
#include "lifecycle/cluster_resolution.h"
#include "lifecycle/jobs.h"
#include "lifecycle/store.h"
#include "providers/cancel.h"
#include "providers/provider.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nodes created per step of a deploy on a provider that creates them one
 * by one: the state file shows the progress between steps, and a crash
 * loses at most one step's bookkeeping. */
#define CLUSTER_DEPLOY_STEP 16

/* The node states a finished action leaves. */
static const char *const cluster_node_after[PROVIDER_ACTIONS] = {
	[PROVIDER_CREATE] = "running",
	[PROVIDER_STOP] = "stopped",
	[PROVIDER_START] = "running",
	[PROVIDER_TERMINATE] = "terminated",
};

/* One provider's share of a cluster's nodes, copied out of the model so
 * the provider works without its lock. */
struct cluster_batch {
	struct provider *p;
	char provider[16]; /* its name, also when it is not set up */
	struct provider_batch b;
	size_t *idx; /* b.nodes[k] is c->nodes[idx[k]] */
	struct cancel *cancel;
};

static void cluster_batch_free(struct cluster_batch *cb)
{
	free(cb->b.nodes);
	free(cb->b.results);
	free(cb->idx);
	memset(cb, 0, sizeof(*cb));
}

/* Providers a job has asked already (each is asked once per job). */
struct cluster_asked {
	struct provider *p[MODEL_PROVIDERS_MAX + 1];
	size_t n;
};

static bool cluster_was_asked(const struct cluster_asked *a,
			      const struct provider *p)
{
	for (size_t i = 0; a && i < a->n; i++)
		if (a->p[i] == p)
			return true;
	return false;
}

/* The nodes of c that `want` accepts, of one provider not asked yet (that
 * of the first such node), at most max (model locked); the provider is
 * then marked asked. 0, or -1 when out of memory. */
static int cluster_batch_take(struct model *m, struct cluster *c,
			      bool (*want)(const struct cluster_node *),
			      size_t max, struct cluster_asked *asked,
			      struct cluster_batch *cb)
{
	size_t n = 0;

	cb->b.nodes = calloc(c->nnodes ? c->nnodes : 1, sizeof(*cb->b.nodes));
	cb->b.results =
		calloc(c->nnodes ? c->nnodes : 1, sizeof(*cb->b.results));
	cb->idx = calloc(c->nnodes ? c->nnodes : 1, sizeof(*cb->idx));
	if (!cb->b.nodes || !cb->b.results || !cb->idx)
		return -1;
	for (size_t i = 0; i < c->nnodes && n < max; i++) {
		struct provider *p;

		if (!want(&c->nodes[i]))
			continue;
		p = cluster_provider(m, &c->nodes[i]);
		if ((n && p != cb->p) || cluster_was_asked(asked, p))
			continue;
		if (n == 0) {
			cb->p = p;
			snprintf(cb->provider, sizeof(cb->provider), "%s",
				 c->nodes[i].provider);
		}
		cb->idx[n] = i;
		cb->b.nodes[n++] = c->nodes[i].pn;
	}
	cb->b.n = n;
	cb->b.cancel = cb->cancel;
	if (n && asked && asked->n < MODEL_PROVIDERS_MAX + 1)
		asked->p[asked->n++] = cb->p;
	return 0;
}

static bool cluster_node_creating(const struct cluster_node *n)
{
	return strcmp(n->state, "creating") == 0;
}

static bool cluster_node_live(const struct cluster_node *n)
{
	return strcmp(n->state, "terminated") != 0;
}

static bool cluster_node_made(const struct cluster_node *n)
{
	return cluster_node_live(n) && *n->pn.instance_id;
}

static bool cluster_node_preempted(const struct cluster_node *n)
{
	return strcmp(n->state, "preempted") == 0;
}

/* Nodes commands and state changes reach: made, and not taken back by
 * the cloud (only a relaunch or a terminate touches a preempted node). */
static bool cluster_node_up(const struct cluster_node *n)
{
	return cluster_node_made(n) && !cluster_node_preempted(n);
}

/* What a provider says of a cluster while it works goes to the cluster's
 * log. */
struct cluster_say {
	struct model *m;
	const char *handle;
};

static void cluster_batch_say(void *ctx, const char *sentence)
{
	struct cluster_say *cs = ctx;
	struct cluster *c;

	pthread_mutex_lock(&cs->m->lock);
	c = cluster_find(cs->m, cs->handle);
	if (c)
		cluster_log(cs->m, c, "%s", sentence);
	pthread_mutex_unlock(&cs->m->lock);
}

/* Call the provider without the model's lock; find c again after (NULL:
 * it is gone). */
static struct cluster *cluster_batch_run(struct model *m, const char *handle,
					 struct cluster_batch *cb,
					 enum provider_action a, int *rc)
{
	struct cluster_say cs = {m, handle};

	cb->b.say = cluster_batch_say;
	cb->b.say_ctx = &cs;
	pthread_mutex_unlock(&m->lock);
	if (!cb->p) {
		snprintf(cb->b.err, sizeof(cb->b.err),
			 "the %s provider is not set up (cclfs.conf does not "
			 "configure it)",
			 cb->provider);
		*rc = -ENOENT;
	} else {
		*rc = provider_act(cb->p, a, &cb->b);
	}
	pthread_mutex_lock(&m->lock);
	cb->b.say = NULL;
	cb->b.say_ctx = NULL;
	return cluster_find(m, handle);
}

/*
 * Record what the provider did to the nodes of cb (addresses, ids, node
 * states) in one transaction, whatever the cluster's state is now: what
 * was done to a node is a fact. Only nodes the action succeeded on (or,
 * for create, that got an id) change. Returns the nodes the action is
 * done on, or -1 with err when the store refused (memory then stays as
 * it was).
 */
static int cluster_batch_record(struct model *m, struct cluster *c,
				struct cluster_batch *cb,
				enum provider_action a, int rc, char *err,
				size_t errlen)
{
	struct cluster_node *saved =
		calloc(cb->b.n ? cb->b.n : 1, sizeof(*saved));
	int count = 0, src;

	if (!saved) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	src = store_begin(m->store, err, errlen);
	for (size_t k = 0; k < cb->b.n; k++)
		saved[k] = c->nodes[cb->idx[k]];
	for (size_t k = 0; k < cb->b.n && src == 0; k++) {
		struct cluster_node *nd = &c->nodes[cb->idx[k]];
		const struct provider_node *pn = &cb->b.nodes[k];
		/* What was done to each node is recorded, also when the
		 * action failed on others. A node a create made but did not
		 * finish (the create failed or was cancelled) keeps its id,
		 * for the terminate or the next try to find it, and stays
		 * creating. */
		bool done = cb->b.results[k].rc == 0 &&
			    (rc == 0 || a != PROVIDER_CREATE);
		bool made = a == PROVIDER_CREATE && *pn->instance_id;

		if (*cb->b.results[k].msg && cb->b.results[k].rc == 0)
			cluster_log(m, c, "node %s: %s", nd->name,
				    cb->b.results[k].msg);
		if (!done && !made)
			continue;
		snprintf(nd->pn.instance_id, sizeof(nd->pn.instance_id), "%s",
			 pn->instance_id);
		snprintf(nd->pn.address, sizeof(nd->pn.address), "%s",
			 pn->address);
		snprintf(nd->pn.workdir, sizeof(nd->pn.workdir), "%s",
			 pn->workdir);
		/* Stop and start leave a node never created as it is. */
		if (done && (*nd->pn.instance_id || a == PROVIDER_TERMINATE ||
			     a == PROVIDER_CREATE)) {
			cluster_node_set_state(nd, cluster_node_after[a],
					       model_now());
			count++;
		} else {
			cluster_node_set_state(nd, nd->state, model_now());
		}
		src = cluster_store_node(m, nd, err, errlen);
	}
	if (src == 0)
		src = store_commit(m->store, err, errlen);
	if (src) {
		store_rollback(m->store);
		for (size_t k = 0; k < cb->b.n; k++)
			c->nodes[cb->idx[k]] = saved[k];
		count = -1;
	} else {
		for (size_t k = 0; k < cb->b.n; k++) {
			char path[64];

			snprintf(path, sizeof(path), "nodes/%s/status",
				 c->nodes[cb->idx[k]].name);
			cluster_notify(m, c, path);
		}
	}
	free(saved);
	return count;
}

/* Prepare the cluster's nodes for commands that span them (model locked;
 * unlocks around the provider, find the cluster again after). */
static int cluster_prepare(struct model *m, struct cluster *c,
			   struct cancel *cancel, char *err, size_t errlen)
{
	struct cluster_batch cb = {.cancel = cancel};
	struct cluster_text t = {0};
	char handle[CONTRACT_NAME_MAX + 1];
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_batch_take(m, c, cluster_node_up, c->nnodes, NULL, &cb)) {
		cluster_batch_free(&cb);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	cluster_hostfile(c, &t);
	cb.b.hostfile = t.buf ? t.buf : "";
	cb.b.mpi = cluster_is_mpi(c);
	if (cb.b.n == 0) {
		rc = 0;
	} else {
		cluster_batch_run(m, handle, &cb, PROVIDER_PREPARE, &rc);
		if (rc)
			snprintf(err, errlen, "%s", cb.b.err);
	}
	free(t.buf);
	cluster_batch_free(&cb);
	return rc;
}

/*
 * One step of a job that acts on nodes: the wanted nodes of one provider
 * (at most max) through action a, what was done recorded, the progress
 * counted, and a failure failing the cluster. Model locked; unlocks around
 * the provider. 1: a step was made, go on; 0: no node is left to act on;
 * -1: the job ends (failed, cancelled, or the cluster moved on).
 */
static int cluster_job_step(struct model *m, const char *handle,
			    enum cluster_state during, enum provider_action a,
			    bool (*want)(const struct cluster_node *),
			    size_t max, struct cluster_asked *asked,
			    struct cancel *cancel)
{
	/* "deploy failed: ...", "interrupting failed: ..." */
	const char *what = during == CLUSTER_DEPLOYING
				   ? "deploy"
				   : cluster_state_names[during];
	struct cluster_batch cb = {.cancel = cancel};
	char err[MODEL_ERR_MAX];
	struct cluster *c = cluster_find(m, handle);
	int rc, done;

	if (!c || c->state != during)
		return -1; /* terminated meanwhile */
	if (cluster_batch_take(m, c, want, max, asked, &cb)) {
		cluster_batch_free(&cb);
		cluster_job_failed(m, c, what, "out of memory");
		return -1;
	}
	if (cb.b.n == 0) {
		cluster_batch_free(&cb);
		return 0;
	}
	/* A shrink's terminate: only these ranks go. */
	cb.b.resize = during == CLUSTER_RESIZING;
	c = cluster_batch_run(m, handle, &cb, a, &rc);
	if (!c) {
		cluster_batch_free(&cb);
		return -1;
	}
	/* Recorded also when the action failed part way or was cancelled:
	 * a node a create made must be found by the terminate. */
	done = cluster_batch_record(m, c, &cb, a, rc, err, sizeof(err));
	if (done < 0 && rc == 0) {
		rc = -EIO;
		snprintf(cb.b.err, sizeof(cb.b.err), "the state store: %.900s",
			 err);
	}
	if (done > 0 && c->state == during) {
		c->done += done; /* a terminate's count is its own */
		cluster_notify(m, c, "state");
	}
	/* No capacity where the provider looked (and nothing of it left):
	 * the next candidate of a cheapest contract, if any. */
	if (rc == -ENOSPC && a == PROVIDER_CREATE && c->state == during &&
	    cluster_failover(m, c, cb.b.err) == 0) {
		cluster_batch_free(&cb);
		return 1;
	}
	if (rc && rc != -ECANCELED && c->state == during)
		cluster_job_failed(m, c, what, cb.b.err);
	cluster_batch_free(&cb);
	return rc ? -1 : 1;
}

/* The end of a job that made nodes (a deploy, a resize): every node
 * prepared (hostfile, SSH and MPI keys). The cluster, still `during`,
 * when the job may go on to running; NULL when it is gone, moved on,
 * cancelled, or failed here ("WHAT failed: preparing the nodes: ..."). */
static struct cluster *cluster_job_ready(struct model *m, const char *handle,
					 enum cluster_state during,
					 const char *what,
					 struct cancel *cancel)
{
	char err[MODEL_ERR_MAX], why[MODEL_ERR_MAX + 32];
	struct cluster *c = cluster_find(m, handle);
	int rc;

	if (!c || c->state != during)
		return NULL;
	rc = cluster_prepare(m, c, cancel, err, sizeof(err));
	c = cluster_find(m, handle);
	if (!c || c->state != during || rc == -ECANCELED)
		return NULL;
	if (rc) {
		snprintf(why, sizeof(why), "preparing the nodes: %s", err);
		cluster_job_failed(m, c, what, why);
		return NULL;
	}
	return c;
}

/* Create the nodes not created yet, a step at a time; then prepare them. */
static void cluster_job_deploy(struct model *m, struct cluster *c,
			       struct cancel *cancel)
{
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	for (;;) {
		size_t max = CLUSTER_DEPLOY_STEP;

		c = cluster_find(m, handle);
		if (!c)
			return;
		/* A provider that creates a cluster's nodes together gets
		 * them all in one step. */
		for (size_t i = 0; i < c->nnodes; i++)
			if (cluster_node_creating(&c->nodes[i]) &&
			    provider_can(cluster_provider(m, &c->nodes[i]),
					 PROVIDER_CREATES_WHOLE))
				max = c->nnodes;
		rc = cluster_job_step(m, handle, CLUSTER_DEPLOYING,
				      PROVIDER_CREATE, cluster_node_creating,
				      max, NULL, cancel);
		if (rc < 0)
			return;
		if (rc == 0)
			break;
	}
	c = cluster_job_ready(m, handle, CLUSTER_DEPLOYING, "deploy", cancel);
	if (c) {
		char note[64];

		snprintf(note, sizeof(note), "deployed %zu nodes", c->nnodes);
		if (cluster_set_state_note(m, c, CLUSTER_RUNNING, note, err,
					   sizeof(err)))
			cluster_job_failed(m, c, "deploy", err);
	}
}

static bool cluster_node_removing(const struct cluster_node *n)
{
	return strcmp(n->state, "removing") == 0;
}

/* The ranks past node_count are marked removing (stored), terminated and
 * forgotten. 0, or -1 when the job ends (failed or cancelled). */
static int cluster_resize_shrink(struct model *m, const char *handle,
				 struct cancel *cancel)
{
	char err[MODEL_ERR_MAX];
	struct cluster *c = cluster_find(m, handle);
	int rc;

	for (size_t i = 0; c && i < c->nnodes; i++) {
		struct cluster_node *n = &c->nodes[i];

		if (n->pn.rank < c->node_count || !cluster_node_live(n) ||
		    cluster_node_removing(n))
			continue;
		/* Never made (a grow cut short): nothing to terminate. */
		cluster_node_set_state(
			n, *n->pn.instance_id ? "removing" : "terminated",
			model_now());
		if (cluster_store_node(m, n, err, sizeof(err))) {
			cluster_job_failed(m, c, "resizing", err);
			return -1;
		}
	}
	while ((rc = cluster_job_step(m, handle, CLUSTER_RESIZING,
				      PROVIDER_TERMINATE, cluster_node_removing,
				      SIZE_MAX, NULL, cancel)) > 0)
		;
	if (rc < 0)
		return -1;
	c = cluster_find(m, handle);
	for (size_t i = c ? c->nnodes : 0; i-- > 0;)
		if (c->nodes[i].pn.rank >= c->node_count &&
		    cluster_resize_drop_node(m, c, i, err, sizeof(err))) {
			cluster_job_failed(m, c, "resizing", err);
			return -1;
		}
	return c ? 0 : -1;
}

/* A grow that could not create every new rank: the cluster goes back to
 * the ranks that run from 0 up, the others removed, and says why. */
static int cluster_resize_back(struct model *m, const char *handle,
			       const char *why, struct cancel *cancel)
{
	struct cluster *c = cluster_find(m, handle);
	int k = 0, wanted;

	if (!c)
		return -1;
	wanted = c->node_count;
	while (k < c->node_count) {
		bool up = false;

		for (size_t i = 0; i < c->nnodes; i++)
			up |= c->nodes[i].pn.rank == k &&
			      strcmp(c->nodes[i].state, "running") == 0;
		if (!up)
			break;
		k++;
	}
	c->node_count = k > 0 ? k : 1;
	{
		char msg[MODEL_ERR_MAX + 128], err[MODEL_ERR_MAX];

		snprintf(msg, sizeof(msg),
			 "resizing to %d failed: %.700s; the cluster has %d",
			 wanted, why, c->node_count);
		cluster_fail(m, c, "node_count", 0, msg);
		if (cluster_store(m, c, err, sizeof(err)))
			cluster_log(m, c, "the state store: %s", err);
	}
	return cluster_resize_shrink(m, handle, cancel);
}

/* node_count written (or a resize cut off by a crash): the ranks past it
 * removed, the ranks up to it created, then every node set up again
 * (hostfile, SSH and MPI keys), and the cluster running at its new size.
 * A rank that cannot be created takes the cluster back to the ranks that
 * run, never to failed. */
static void cluster_job_resize(struct model *m, struct cluster *c,
			       struct cancel *cancel)
{
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX], note[64];
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (c->state != CLUSTER_RESIZING ||
	    cluster_resize_shrink(m, handle, cancel))
		return;
	c = cluster_find(m, handle);
	if (!c)
		return;
	if (cluster_resize_add_nodes(m, c, err, sizeof(err))) {
		cluster_job_failed(m, c, "resizing", err);
		return;
	}
	for (;;) {
		struct cluster_batch cb = {.cancel = cancel};
		size_t max = CLUSTER_DEPLOY_STEP;

		c = cluster_find(m, handle);
		if (!c || c->state != CLUSTER_RESIZING)
			return;
		/* A provider that launches a role whole gets every new rank
		 * in one call. */
		for (size_t i = 0; i < c->nnodes; i++)
			if (cluster_node_creating(&c->nodes[i]) &&
			    provider_can(cluster_provider(m, &c->nodes[i]),
					 PROVIDER_CREATES_WHOLE))
				max = SIZE_MAX;
		if (cluster_batch_take(m, c, cluster_node_creating, max, NULL,
				       &cb) ||
		    cb.b.n == 0) {
			cluster_batch_free(&cb);
			break;
		}
		/* The grow is named after when its ranks were recorded
		 * (cluster_resize_add_nodes): the same after a crash, another
		 * for a later grow. */
		cb.b.resize = 1;
		snprintf(cb.b.launch, sizeof(cb.b.launch), "%" PRIx64,
			 (uint64_t)c->nodes[cb.idx[0]].since_ns);
		c = cluster_batch_run(m, handle, &cb, PROVIDER_CREATE, &rc);
		if (c)
			cluster_batch_record(m, c, &cb, PROVIDER_CREATE, rc,
					     err, sizeof(err));
		if (c && rc && rc != -ECANCELED) {
			snprintf(err, sizeof(err), "%s", cb.b.err);
			cluster_batch_free(&cb);
			if (cluster_resize_back(m, handle, err, cancel))
				return;
			break;
		}
		cluster_batch_free(&cb);
		if (!c || rc)
			return;
		cluster_notify(m, c, "state");
	}
	c = cluster_job_ready(m, handle, CLUSTER_RESIZING, "resizing", cancel);
	if (!c)
		return;
	c->price = cluster_cost_price(c); /* stored with the state below */
	snprintf(note, sizeof(note), "resized: %d %s", c->node_count,
		 strcmp(c->cluster_type, "ManagerWorkers") == 0 ? "workers"
								: "nodes");
	if (cluster_set_state_note(m, c, CLUSTER_RUNNING, note, err,
				   sizeof(err)))
		cluster_job_failed(m, c, "resizing", err);
	cluster_notify(m, c, "hostfile");
	cluster_notify(m, c, "info");
	cluster_notify(m, c, "node_count");
	cluster_notify(m, c, "nodes");
}

/* Stop, start or terminate every node, provider by provider (one batch
 * call each); then, after a start, prepare the nodes again; then the
 * state the job ends in. */
static void cluster_job_nodes(struct model *m, struct cluster *c,
			      enum cluster_op op, struct cancel *cancel)
{
	static const enum provider_action acts[CLUSTER_OPS] = {
		[CLUSTER_OP_STOP] = PROVIDER_STOP,
		[CLUSTER_OP_START] = PROVIDER_START,
		[CLUSTER_OP_TERMINATE] = PROVIDER_TERMINATE,
	};
	enum cluster_state during = cluster_state_during(op);
	enum provider_action a = acts[op];
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	/* A terminate asks the provider even for a node without an id: a
	 * crash or a cancelled create may have made it unrecorded. */
	bool (*want)(const struct cluster_node *) = op == CLUSTER_OP_TERMINATE
							    ? cluster_node_live
							    : cluster_node_up;
	/* Each provider once: nodes it did not do stay wanted. */
	struct cluster_asked asked = {.n = 0};
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	for (;;) {
		rc = cluster_job_step(m, handle, during, a, want, SIZE_MAX,
				      &asked, cancel);
		if (rc < 0)
			return;
		if (rc == 0)
			break;
	}
	c = cluster_find(m, handle);
	if (!c || c->state != during)
		return;
	/* Resumed nodes may have new addresses: their hostfile and known
	 * hosts follow. A failure leaves the cluster running, said in its
	 * error file and log. */
	if (op == CLUSTER_OP_START) {
		rc = cluster_prepare(m, c, cancel, err, sizeof(err));
		c = cluster_find(m, handle);
		if (!c || c->state != during || rc == -ECANCELED)
			return;
		if (rc) {
			char why[MODEL_ERR_MAX + 64];

			snprintf(why, sizeof(why),
				 "preparing the resumed nodes: %s", err);
			cluster_fail(m, c, "", -EIO, why);
		}
	}
	if (cluster_set_state(m, c, cluster_state_after(op, true), err,
			      sizeof(err)))
		cluster_job_failed(m, c, cluster_state_names[during], err);
}

/* --- nodes the cloud takes back (spot) --- */

/* The value of NAME=VALUE in the cluster's provider options, or "". */
static void cluster_option(const struct cluster *c, const char *name, char *out,
			   size_t len)
{
	size_t nl = strlen(name);

	out[0] = '\0';
	for (const char *p = c->options; p && *p;) {
		size_t l = strcspn(p, "\n");

		if (l > nl && strncmp(p, name, nl) == 0 && p[nl] == '=')
			snprintf(out, len, "%.*s", (int)(l - nl - 1),
				 p + nl + 1);
		p = p[l] ? p + l + 1 : NULL;
	}
}

/* Whether some of the cluster's nodes are bought on the spot market. */
static bool cluster_has_spot(const struct cluster *c)
{
	char market[128];

	cluster_option(c, "market", market, sizeof(market));
	return strstr(market, "spot") != NULL;
}

/* config/recover: relaunch preempted nodes (the default with spot). */
static bool cluster_recovers(const struct cluster *c)
{
	char v[16];

	cluster_option(c, "recover", v, sizeof(v));
	return strcmp(v, "false") != 0;
}

/* Mark nd preempted (its instance is gone: the cloud took it back),
 * stored and said. */
static void cluster_node_preempt(struct model *m, struct cluster *c,
				 struct cluster_node *nd)
{
	char err[MODEL_ERR_MAX], path[64];

	cluster_node_set_state(nd, "preempted", model_now());
	if (cluster_store_node(m, nd, err, sizeof(err)))
		cluster_log(m, c, "the state store: %s", err);
	cluster_log(m, c,
		    "node %s (%s) was preempted: %s took its spot instance "
		    "back%s",
		    nd->name, nd->pn.instance_id, nd->provider,
		    cluster_recovers(c) ? "; it is relaunched"
					: " (config/recover is false: it "
					  "stays down)");
	snprintf(path, sizeof(path), "nodes/%s/status", nd->name);
	cluster_notify(m, c, path);
	cluster_notify(m, c, "state");
}

/* Relaunch the preempted nodes with their ranks (new instances), then set
 * up the hostfile, SSH and MPI keys on every node again. A failure is
 * logged; the next watch tries again. */
static void cluster_recover(struct model *m, struct cluster *c,
			    struct cancel *cancel)
{
	struct cluster_batch cb = {.cancel = cancel};
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_batch_take(m, c, cluster_node_preempted, c->nnodes, NULL,
			       &cb) ||
	    cb.b.n == 0) {
		cluster_batch_free(&cb);
		return;
	}
	cb.b.relaunch = 1;
	c = cluster_batch_run(m, handle, &cb, PROVIDER_CREATE, &rc);
	if (!c || rc == -ECANCELED) {
		cluster_batch_free(&cb);
		return;
	}
	if (cluster_batch_record(m, c, &cb, PROVIDER_CREATE, rc, err,
				 sizeof(err)) < 0)
		cluster_log(m, c, "the state store: %s", err);
	for (size_t k = 0; k < cb.b.n; k++) {
		const struct cluster_node *nd = &c->nodes[cb.idx[k]];

		if (rc == 0)
			cluster_log(m, c, "node %s relaunched as %s at %s",
				    nd->name, nd->pn.instance_id,
				    nd->pn.address);
	}
	if (rc)
		cluster_log(m, c, "relaunching the preempted nodes failed: %s",
			    cb.b.err);
	cluster_notify(m, c, "state");
	cluster_batch_free(&cb);
	if (rc)
		return;
	rc = cluster_prepare(m, c, cancel, err, sizeof(err));
	c = cluster_find(m, handle);
	if (c && rc && rc != -ECANCELED)
		cluster_log(m, c,
			    "setting up the relaunched nodes (hostfile, SSH "
			    "and MPI keys) failed: %s",
			    err);
	else if (c && rc == 0)
		cluster_log(m, c,
			    "the hostfile, SSH and MPI keys are set up again "
			    "on every node");
}

/* A limit of the cluster's contract reached: the request its action
 * makes, and why in its error and log. */
static void cluster_limits_apply(struct model *m, struct cluster *c,
				 enum cluster_op op, const char *why)
{
	c->limits_ns = model_now();
	if (cluster_request_state(m, c, op) == 0)
		cluster_fail(m, c, "", 0, why);
	else
		cluster_log(m, c, "%s, but the request was refused (see error)",
			    why);
}

/* A running cluster idle for config/idle_minutes: its nodes are asked
 * whether a process cclfs started still runs there (signal 0); none, and
 * still idle, its idle_action is taken. A process that runs counts as
 * activity. */
static void cluster_watch_idle(struct model *m, struct cluster *c,
			       struct cancel *cancel)
{
	struct cluster_batch cb = {.cancel = cancel};
	char handle[CONTRACT_NAME_MAX + 1], why[MODEL_ERR_MAX];
	enum cluster_op op;
	bool busy = false;
	int rc = 0;

	if (!cluster_limits_idle(m, c, model_now(), &op, why, sizeof(why)))
		return;
	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_batch_take(m, c, cluster_node_up, c->nnodes, NULL, &cb)) {
		cluster_batch_free(&cb);
		return;
	}
	cb.b.sig = 0;
	if (cb.b.n)
		c = cluster_batch_run(m, handle, &cb, PROVIDER_SIGNAL, &rc);
	for (size_t k = 0; c && rc == 0 && k < cb.b.n; k++)
		busy |= cb.b.results[k].busy != 0;
	if (c && rc && rc != -ECANCELED)
		cluster_log(m, c,
			    "the idle limit is reached, but the nodes could "
			    "not be asked for processes cclfs started: %s",
			    cb.b.err);
	cluster_batch_free(&cb);
	if (!c || rc)
		return;
	if (busy)
		c->active_ns = model_now();
	else if (cluster_limits_idle(m, c, model_now(), &op, why, sizeof(why)))
		cluster_limits_apply(m, c, op, why);
}

/* One look at a running cluster with spot nodes: what its provider says
 * of each, preempted nodes marked, and relaunched when config/recover
 * says so. */
static void cluster_watch_spot(struct model *m, struct cluster *c,
			       struct cancel *cancel)
{
	struct cluster_batch cb = {.cancel = cancel};
	char handle[CONTRACT_NAME_MAX + 1];
	bool down = false;
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_batch_take(m, c, cluster_node_up, c->nnodes, NULL, &cb)) {
		cluster_batch_free(&cb);
		return;
	}
	if (cb.b.n) {
		c = cluster_batch_run(m, handle, &cb, PROVIDER_DESCRIBE, &rc);
		for (size_t k = 0; c && rc == 0 && k < cb.b.n; k++) {
			struct cluster_node *nd = &c->nodes[cb.idx[k]];

			if (cb.b.results[k].state == PROVIDER_NODE_PREEMPTED &&
			    cluster_node_up(nd))
				cluster_node_preempt(m, c, nd);
		}
	}
	cluster_batch_free(&cb);
	if (!c || c->state != CLUSTER_RUNNING || !cluster_recovers(c))
		return;
	for (size_t i = 0; i < c->nnodes; i++)
		down |= cluster_node_preempted(&c->nodes[i]);
	if (down)
		cluster_recover(m, c, cancel);
}

/* The watch job of a running cluster: its spot nodes, then its idle
 * limit. */
static void cluster_job_watch(struct model *m, struct cluster *c,
			      struct cancel *cancel)
{
	char handle[CONTRACT_NAME_MAX + 1];

	c->watch_queued = false;
	if (c->state != CLUSTER_RUNNING)
		return;
	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_has_spot(c)) {
		cluster_watch_spot(m, c, cancel);
		c = cluster_find(m, handle);
	}
	if (c && c->state == CLUSTER_RUNNING && !cancel_requested(cancel))
		cluster_watch_idle(m, c, cancel);
}

/* How often the watch looks at budgets and idle limits at most (and so
 * after a change of state or of a limit): well within the minute the
 * limits promise. */
#define CLUSTER_LIMITS_TICK_MS 1000
/* A limit whose request was refused is tried again after this long. */
#define CLUSTER_LIMITS_RETRY_NS ((int64_t)60 * 1000000000)

/* Budgets and idle limits of the running clusters (model locked): a spent
 * budget is acted on at once; an idle cluster gets a watch job, which asks
 * its nodes for processes first. */
static void cluster_limits_watch(struct model *m)
{
	int64_t now = model_now();

	for (size_t i = 0; i < m->nclusters; i++) {
		struct cluster *c = m->clusters[i];
		char why[MODEL_ERR_MAX];
		enum cluster_op op;

		if (c->state != CLUSTER_RUNNING ||
		    (c->limits_ns &&
		     now - c->limits_ns < CLUSTER_LIMITS_RETRY_NS))
			continue;
		if (cluster_limits_spent(m, c, now, &op, why, sizeof(why)))
			cluster_limits_apply(m, c, op, why);
		else if (!c->watch_queued &&
			 cluster_limits_idle(m, c, now, &op, why, sizeof(why)))
			c->watch_queued =
				jobs_submit(m->jobs, c->handle,
					    (int)CLUSTER_OP_WATCH) == 0;
	}
}

/* The watch of the mount: at least every CLUSTER_LIMITS_TICK_MS the
 * budgets and idle limits, and every provider's watch interval a watch
 * job for each running cluster with spot nodes (one at a time per
 * cluster, in the cluster's own queue). Runs while mounted. Not locked. */
static void cluster_job_watcher(struct model *m, struct cancel *cancel)
{
	int64_t spot_due = 0;

	for (;;) {
		int ms = 0, tick;
		int64_t now;

		pthread_mutex_lock(&m->lock);
		for (size_t i = 0; i < m->nproviders; i++) {
			int w = m->providers[i]->watch_ms;

			if (w > 0 && (ms == 0 || w < ms))
				ms = w;
		}
		cluster_limits_watch(m);
		pthread_mutex_unlock(&m->lock);
		tick = ms > 0 && ms < CLUSTER_LIMITS_TICK_MS
			       ? ms
			       : CLUSTER_LIMITS_TICK_MS;
		if (cancel_sleep_ms(cancel, tick))
			return;
		now = model_now();
		if (ms == 0 || now < spot_due)
			continue;
		spot_due = now + (int64_t)ms * 1000000;
		pthread_mutex_lock(&m->lock);
		for (size_t i = 0; i < m->nclusters; i++) {
			struct cluster *c = m->clusters[i];
			const struct provider *p =
				c->nnodes ? cluster_provider(m, &c->nodes[0])
					  : NULL;

			if (c->state != CLUSTER_RUNNING || c->watch_queued ||
			    !p || p->watch_ms <= 0 || !cluster_has_spot(c))
				continue;
			c->watch_queued =
				jobs_submit(m->jobs, c->handle,
					    (int)CLUSTER_OP_WATCH) == 0;
		}
		pthread_mutex_unlock(&m->lock);
	}
}

/* At mount: what each provider says of the nodes the store has as
 * running or stopped. A node its provider no longer has is marked
 * terminated, and the log and error say so; nothing else changes. */
static void cluster_job_reconcile(struct model *m, struct cluster *c,
				  struct cancel *cancel)
{
	static const char *const said[] = {
		[PROVIDER_NODE_RUNNING] = "running",
		[PROVIDER_NODE_STOPPED] = "stopped",
		[PROVIDER_NODE_GONE] = "terminated",
		[PROVIDER_NODE_PREEMPTED] = "preempted",
	};
	struct cluster_batch cb = {.cancel = cancel};
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (cluster_batch_take(m, c, cluster_node_made, c->nnodes, NULL, &cb) ||
	    cb.b.n == 0) {
		cluster_batch_free(&cb);
		return;
	}
	c = cluster_batch_run(m, handle, &cb, PROVIDER_DESCRIBE, &rc);
	if (!c || rc) {
		if (c && rc != -ECANCELED)
			cluster_log(m, c,
				    "the provider could not say what it has "
				    "of the nodes: %s",
				    cb.b.err);
		cluster_batch_free(&cb);
		return;
	}
	for (size_t k = 0; k < cb.b.n; k++) {
		struct cluster_node *nd = &c->nodes[cb.idx[k]];
		enum provider_state ps = cb.b.results[k].state;
		char why[MODEL_ERR_MAX];

		/* A transition under way (a job of this mount) is not
		 * second-guessed; neither is a node that matches. */
		if (cluster_state_moving(c->state) ||
		    strcmp(nd->state, said[ps]) == 0 || !cluster_node_live(nd))
			continue;
		/* Taken back while cclfs was not mounted: shown, and the
		 * watch relaunches it. */
		if (ps == PROVIDER_NODE_PREEMPTED) {
			cluster_node_preempt(m, c, nd);
			continue;
		}
		if (ps != PROVIDER_NODE_GONE)
			continue;
		snprintf(why, sizeof(why),
			 "node %s (%s) is gone: its provider no longer has "
			 "it (the store had it %s)",
			 nd->name, nd->pn.instance_id, nd->state);
		cluster_node_set_state(nd, "terminated", model_now());
		if (cluster_store_node(m, nd, err, sizeof(err)))
			cluster_log(m, c, "the state store: %s", err);
		{
			char path[64];

			snprintf(path, sizeof(path), "nodes/%s/status",
				 nd->name);
			cluster_notify(m, c, path);
		}
		cluster_fail(m, c, "", 0, why);
	}
	cluster_batch_free(&cb);
}

/* A provider's resources that belong to no cluster (keyed by provider). */
struct cluster_strays {
	struct model *m;
	const char *provider;
};

static int cluster_strays_known(void *ctx, const char *handle,
				const char *token)
{
	struct cluster_strays *s = ctx;
	const struct cluster *c;
	int known;

	pthread_mutex_lock(&s->m->lock);
	c = cluster_find(s->m, handle);
	known = c && strcmp(c->token, token) == 0;
	pthread_mutex_unlock(&s->m->lock);
	return known;
}

static void cluster_strays_report(void *ctx, const char *sentence)
{
	struct cluster_strays *s = ctx;

	pthread_mutex_lock(&s->m->lock);
	model_log(s->m, s->provider, "%s", sentence);
	pthread_mutex_unlock(&s->m->lock);
	/* The daemon's stderr has it too (-f); the store's log keeps it. */
	if (!s->m->verbose)
		fprintf(stderr, "cclfs: %s: %s\n", s->provider, sentence);
}

static void cluster_job_strays(struct model *m, struct provider *p,
			       struct cancel *cancel)
{
	struct cluster_strays s = {m, p->entry->name};
	char err[PROVIDER_ERR_MAX];

	if (p->ops->strays(p, cluster_strays_known, cluster_strays_report, &s,
			   cancel, err, sizeof(err)) &&
	    !cancel_requested(cancel)) {
		pthread_mutex_lock(&m->lock);
		model_log(m, p->entry->name,
			  "cannot list what cclfs tagged: %s", err);
		pthread_mutex_unlock(&m->lock);
	}
}

/* Jobs of clusters are keyed by handle; a provider's own by "/NAME", the
 * watch by "/" (no handle has a '/'). */
static void cluster_job(void *ctx, const char *key, int op,
			struct cancel *cancel)
{
	struct model *m = ctx;
	struct cluster *c;

	if (strcmp(key, "/") == 0) {
		cluster_job_watcher(m, cancel);
		return;
	}
	if (key[0] == '/') {
		for (size_t i = 0; i < m->nproviders; i++)
			if (strcmp(m->providers[i]->entry->name, key + 1) == 0)
				cluster_job_strays(m, m->providers[i], cancel);
		return;
	}
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, key);
	if (c) {
		switch ((enum cluster_op)op) {
		case CLUSTER_OP_DEPLOY:
			cluster_job_deploy(m, c, cancel);
			break;
		case CLUSTER_OP_RECONCILE:
			cluster_job_reconcile(m, c, cancel);
			break;
		case CLUSTER_OP_WATCH:
			cluster_job_watch(m, c, cancel);
			break;
		case CLUSTER_OP_RESIZE:
			cluster_job_resize(m, c, cancel);
			break;
		default:
			cluster_job_nodes(m, c, (enum cluster_op)op, cancel);
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void cluster_jobs_queue(struct model *m, const char *handle, enum cluster_op op)
{
	/* A job that cannot be queued is done again at the next mount:
	 * the state store has the transition. */
	if (m->jobs && jobs_submit(m->jobs, handle, (int)op)) {
		struct cluster *c = cluster_find(m, handle);

		if (c)
			cluster_log(
				m, c,
				"the %s job could not be started; it runs "
				"at the next mount",
				cluster_state_names[cluster_state_during(op)]);
	}
}

int cluster_request_state(struct model *m, struct cluster *c,
			  enum cluster_op op)
{
	static const char *const asked[CLUSTER_OPS] = {
		[CLUSTER_OP_STOP] = "interrupted",
		[CLUSTER_OP_START] = "resumed",
		[CLUSTER_OP_TERMINATE] = "terminated",
	};
	char why[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	enum cluster_state to;
	bool job;
	int rc;

	if (cluster_state_next(c->state, op, &to, &job)) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; it cannot be %s from there",
			 cluster_state_names[c->state], asked[op]);
		return cluster_fail(m, c, "state", -EBUSY, why);
	}
	if (!job) {
		cluster_clear_error(m, c);
		return 0;
	}
	/* A spent budget keeps the cluster down until it is raised. */
	if (op == CLUSTER_OP_START &&
	    cluster_limits_resume(m, c, why, sizeof(why)))
		return cluster_fail(m, c, "state", -EBUSY, why);
	/* One-time spot instances end when stopped: refused before the
	 * cluster changes. */
	if (op == CLUSTER_OP_STOP && cluster_has_spot(c) && c->nnodes &&
	    provider_can(cluster_provider(m, &c->nodes[0]),
			 PROVIDER_SPOT_NO_STOP)) {
		snprintf(why, sizeof(why),
			 "the cluster has spot nodes, which %s cannot stop; "
			 "terminate it, or deploy it on-demand "
			 "(config/market) to interrupt it",
			 c->nodes[0].provider);
		return cluster_fail(m, c, "state", -EBUSY, why);
	}
	rc = cluster_set_state(m, c, to, err, sizeof(err));
	if (rc)
		return cluster_fail(m, c, "state", rc, err);
	cluster_clear_error(m, c);
	/* A terminate preempts whatever the cluster's job is doing: it
	 * stops at its next wait, and the terminate finds what it made. */
	if (op == CLUSTER_OP_TERMINATE && m->jobs)
		jobs_cancel(m->jobs, c->handle);
	cluster_jobs_queue(m, c->handle, op);
	return 0;
}

int cluster_restart(struct model *m, struct cluster *c)
{
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	struct cluster_asked asked = {.n = 0};
	int rc = 0;

	if (c->state != CLUSTER_RUNNING && c->state != CLUSTER_INTERRUPTED) {
		snprintf(err, sizeof(err),
			 "the cluster is %s; restart needs it running or "
			 "interrupted",
			 cluster_state_names[c->state]);
		return cluster_fail(m, c, "restart", -EBUSY, err);
	}
	snprintf(handle, sizeof(handle), "%s", c->handle);
	/* Provider by provider, the nodes of each at once. */
	while (rc == 0 && (c = cluster_find(m, handle))) {
		struct cluster_batch cb = {0};

		if (cluster_batch_take(m, c, cluster_node_made, c->nnodes,
				       &asked, &cb)) {
			cluster_batch_free(&cb);
			return -ENOMEM;
		}
		if (cb.b.n == 0) {
			cluster_batch_free(&cb);
			break;
		}
		cb.b.sig = SIGKILL;
		cluster_batch_run(m, handle, &cb, PROVIDER_SIGNAL, &rc);
		if (rc)
			snprintf(err, sizeof(err), "%s", cb.b.err);
		cluster_batch_free(&cb);
	}
	c = cluster_find(m, handle);
	if (!c)
		return -ENOENT;
	if (rc)
		return cluster_fail(m, c, "restart", -EIO, err);
	c->restart_ns = model_now();
	cluster_clear_error(m, c);
	cluster_log(m, c, "restart: killed every process cclfs started");
	return 0;
}

/* --- the providers and the runner --- */

/* A provider says that how it reaches a node changed. */
static void cluster_reach_changed(void *ctx, const char *handle, int rank)
{
	char path[160];

	if (rank < 0)
		snprintf(path, sizeof(path), "clusters/%s/nodes/manager/status",
			 handle);
	else
		snprintf(path, sizeof(path), "clusters/%s/nodes/%d/status",
			 handle, rank);
	model_notify_path(ctx, path);
}

int cluster_jobs_open(struct model *m, char *err, size_t errlen)
{
	m->jobs = jobs_new(cluster_job, m);
	if (!m->jobs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t r = 0; m->registry[r]; r++) {
		struct provider *p;

		if (m->nproviders == MODEL_PROVIDERS_MAX)
			break;
		err[0] = '\0';
		p = m->registry[r]->open(m->config, m->statedir, err, errlen);
		if (!p && *err)
			return -1;
		if (!p)
			continue; /* not set up in cclfs.conf */
		p->notify = cluster_reach_changed;
		p->notify_ctx = m;
		m->providers[m->nproviders++] = p;
		/* It learns the nodes it has from the clusters of the
		 * store. */
		for (size_t i = 0; p->ops->attach && i < m->nclusters; i++)
			for (size_t k = 0; k < m->clusters[i]->nnodes; k++) {
				const struct cluster_node *nd =
					&m->clusters[i]->nodes[k];

				if (cluster_provider(m, nd) == p &&
				    cluster_node_made(nd))
					p->ops->attach(p, &nd->pn);
			}
	}
	return 0;
}

/* Whether cclfs.conf has the provider's section, or a cluster uses it. */
static bool cluster_provider_used(const struct model *m,
				  const struct provider *p)
{
	const char *sec = p->entry->section;

	for (size_t i = 0; sec && m->config && i < m->config->count; i++)
		if (strcmp(m->config->entries[i].section, sec) == 0)
			return true;
	for (size_t i = 0; i < m->nclusters; i++)
		for (size_t k = 0; k < m->clusters[i]->nnodes; k++)
			if (strcmp(m->clusters[i]->nodes[k].provider,
				   p->entry->name) == 0)
				return true;
	return false;
}

int model_start(struct model *m, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nproviders; i++) {
		char key[80];

		if (!provider_can(m->providers[i], PROVIDER_FINDS_STRAYS) ||
		    !cluster_provider_used(m, m->providers[i]))
			continue;
		snprintf(key, sizeof(key), "/%s", m->providers[i]->entry->name);
		jobs_submit(m->jobs, key, 0);
	}
	/* The watch of spot nodes, under a key no handle has. */
	jobs_submit(m->jobs, "/", 0);
	/* What a crash left half done is finished now; what the store has
	 * as settled is checked against the providers. */
	for (size_t i = 0; i < m->nclusters; i++) {
		struct cluster *c = m->clusters[i];
		static const enum cluster_op resume[CLUSTER_STATES] = {
			[CLUSTER_DEPLOYING] = CLUSTER_OP_DEPLOY,
			[CLUSTER_INTERRUPTING] = CLUSTER_OP_STOP,
			[CLUSTER_RESUMING] = CLUSTER_OP_START,
			[CLUSTER_RESIZING] = CLUSTER_OP_RESIZE,
			[CLUSTER_TERMINATING] = CLUSTER_OP_TERMINATE,
			[CLUSTER_RUNNING] = CLUSTER_OP_RECONCILE,
			[CLUSTER_INTERRUPTED] = CLUSTER_OP_RECONCILE,
			[CLUSTER_TERMINATED] = CLUSTER_OPS,
			[CLUSTER_FAILED] = CLUSTER_OPS,
		};

		if (resume[c->state] != CLUSTER_OPS)
			cluster_jobs_queue(m, c->handle, resume[c->state]);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void cluster_jobs_close(struct model *m)
{
	/* Every job stops at its next wait; the store has what they did,
	 * and the next mount goes on from there. */
	if (m->jobs)
		jobs_free(m->jobs);
	m->jobs = NULL;
	for (size_t i = 0; i < m->nproviders; i++)
		m->providers[i]->ops->close(m->providers[i]);
	m->nproviders = 0;
}
