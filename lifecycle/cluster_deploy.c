/* Clusters as records: loading them from the store at mount, deploying a
 * new one from a contract's resolution (recorded before anything is
 * created), the clusters/ listing, and removing a terminated one. */
#include "lifecycle/cluster.h"

#include "lifecycle/cluster_jobs.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/cluster_resolution.h"
#include "lifecycle/model_priv.h"
#include "lifecycle/store.h"
#include "providers/provider.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static int cluster_load_one(void *ctx, const struct store_cluster *sc)
{
	struct model *m = ctx;
	struct cluster *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	snprintf(c->handle, sizeof(c->handle), "%s", sc->handle);
	snprintf(c->contract, sizeof(c->contract), "%s", sc->contract);
	snprintf(c->cluster_type, sizeof(c->cluster_type), "%s",
		 sc->cluster_type);
	c->resolution = strdup(sc->resolution);
	c->error = strdup(sc->error);
	c->state = cluster_state_parse(sc->state) < 0
			   ? CLUSTER_FAILED
			   : (enum cluster_state)cluster_state_parse(sc->state);
	c->node_count = sc->node_count;
	c->process_count = sc->process_count;
	c->created_ns = sc->created_ns;
	c->state_ns = sc->state_ns;
	c->error_ns = sc->error_ns;
	c->price = sc->price;
	c->log_ns = sc->state_ns;
	snprintf(c->ssh_user, sizeof(c->ssh_user), "%s", sc->ssh_user);
	snprintf(c->ssh_keyfile, sizeof(c->ssh_keyfile), "%s", sc->ssh_keyfile);
	snprintf(c->token, sizeof(c->token), "%s", sc->token);
	snprintf(c->options, sizeof(c->options), "%s", sc->options);
	c->mpi_exit_status = sc->mpi_exit_status;
	c->mpi_ns = sc->mpi_ns;
	/* Idle since the newest stored activity (cluster_load_node adds
	 * the nodes' commands): a limit passed while unmounted acts now. */
	c->active_ns = sc->state_ns > sc->mpi_ns ? sc->state_ns : sc->mpi_ns;
	if (!c->resolution || !c->error || cluster_insert(m, c)) {
		cluster_free(c);
		return -1;
	}
	return 0;
}

/* What the provider needs to reach a node, from its cluster. */
static void cluster_node_login(const struct cluster *c, struct cluster_node *n)
{
	snprintf(n->pn.instance_type, sizeof(n->pn.instance_type), "%s",
		 n->instance_type);
	snprintf(n->pn.user, sizeof(n->pn.user), "%s", c->ssh_user);
	snprintf(n->pn.keyfile, sizeof(n->pn.keyfile), "%s", c->ssh_keyfile);
	n->pn.tunneled = strcmp(c->cluster_type, "ManagerWorkers") == 0 &&
			 n->pn.rank >= 0;
	snprintf(n->pn.token, sizeof(n->pn.token), "%s", c->token);
	snprintf(n->pn.options, sizeof(n->pn.options), "%s", c->options);
}

static int cluster_load_node(void *ctx, const struct store_node *sn)
{
	struct model *m = ctx;
	struct cluster *c = cluster_find(m, sn->handle);
	struct cluster_node *v, *n;

	if (!c)
		return -1;
	v = realloc(c->nodes, (c->nnodes + 1) * sizeof(*v));
	if (!v)
		return -1;
	c->nodes = v;
	n = &c->nodes[c->nnodes++];
	memset(n, 0, sizeof(*n));
	snprintf(n->pn.handle, sizeof(n->pn.handle), "%s", sn->handle);
	n->pn.rank = sn->rank;
	snprintf(n->pn.instance_id, sizeof(n->pn.instance_id), "%s",
		 sn->instance_id);
	snprintf(n->pn.address, sizeof(n->pn.address), "%s", sn->address);
	snprintf(n->pn.workdir, sizeof(n->pn.workdir), "%s", sn->workdir);
	if (sn->rank < 0)
		snprintf(n->name, sizeof(n->name), "manager");
	else
		snprintf(n->name, sizeof(n->name), "%d", sn->rank);
	snprintf(n->provider, sizeof(n->provider), "%s", sn->provider);
	snprintf(n->instance_type, sizeof(n->instance_type), "%s",
		 sn->instance_type);
	cluster_node_login(c, n);
	snprintf(n->state, sizeof(n->state), "%s", sn->state);
	n->since_ns = sn->since_ns;
	n->billed_ns = sn->billed_ns;
	n->exit_status = sn->exit_status;
	n->exec_ns = sn->exec_ns;
	if (n->exec_ns > c->active_ns)
		c->active_ns = n->exec_ns;
	return 0;
}

int cluster_open(struct model *m, char *err, size_t errlen)
{
	struct store_cluster_loader loader = {m, cluster_load_one,
					      cluster_load_node};

	m->clusters_ns = model_now();
	if (store_load_clusters(m->store, &loader, err, errlen))
		return -1;
	if (cluster_jobs_open(m, err, errlen))
		return -1;
	/* With the providers open: what a crash cut off is recorded, and
	 * what it left behind removed, before any request. */
	for (size_t i = 0; i < m->nclusters; i++)
		cluster_exec_recover(m, m->clusters[i]);
	return 0;
}

void cluster_close(struct model *m)
{
	cluster_jobs_close(m);
	for (size_t i = 0; i < m->nclusters; i++)
		cluster_free(m->clusters[i]);
	free(m->clusters);
	m->clusters = NULL;
	m->nclusters = 0;
}

/* Whether a provider of that name is set up to deploy on. */
static bool cluster_deployable(const struct model *m, const char *name)
{
	for (size_t i = 0; i < m->nproviders; i++)
		if (strcmp(m->providers[i]->entry->name, name) == 0)
			return true;
	return false;
}

/* "the local, hosts and ec2 providers": every provider of the registry. */
static void cluster_provider_names(const struct model *m, char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "the "), n = 0;

	while (m->registry[n])
		n++;
	for (size_t i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s",
				      m->registry[i]->name,
				      i + 2 < n	  ? ", "
				      : i + 1 < n ? " and "
						  : "");
	if (o < len)
		snprintf(out + o, len - o, " provider%s", n > 1 ? "s" : "");
}

int cluster_contract_busy(struct model *m, const char *contract, char *why,
			  size_t whylen)
{
	for (size_t i = 0; i < m->nclusters; i++) {
		const struct cluster *c = m->clusters[i];

		if (strcmp(c->contract, contract) == 0 &&
		    c->state != CLUSTER_TERMINATED) {
			snprintf(why, whylen,
				 "cluster %s of this contract is %s; "
				 "terminate it first (echo terminated > "
				 "clusters/%s/state)",
				 c->handle, cluster_state_names[c->state],
				 c->handle);
			return 1;
		}
	}
	return 0;
}

static void cluster_new_handle(struct model *m, char *out)
{
	static const char letters[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

	do {
		unsigned char r[15];

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			for (size_t i = 0; i < sizeof(r); i++)
				r[i] = (unsigned char)rand();
		for (size_t i = 0; i < sizeof(r); i++)
			out[i] = letters[r[i] % (sizeof(letters) - 1)];
		out[15] = '\0';
	} while (cluster_find(m, out));
}

/* 32 random hex digits: a cluster's token, unique across deploys even
 * when a handle is used again. */
static void cluster_new_token(char *out, size_t len)
{
	unsigned char r[16] = {0};
	size_t o = 0;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(r, &ts, sizeof(ts) < sizeof(r) ? sizeof(ts) : sizeof(r));
	}
	for (size_t i = 0; i < sizeof(r) && o + 2 < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%02x", r[i]);
}

int cluster_deploy(struct model *m, const struct cluster_request *req,
		   char *why, size_t whylen)
{
	bool mw = strcmp(req->cluster_type, "ManagerWorkers") == 0;
	char provider[2][16], type[2][64], region[2][64], err[MODEL_ERR_MAX];
	double price[2] = {0, 0};
	struct cluster *c;
	int64_t now = model_now();
	size_t roles = mw ? 2 : 1;
	int rc;

	for (size_t r = 0; r < roles; r++) {
		const char *role = mw ? (r ? "worker" : "manager") : "node";

		if (cluster_resolution_role(req->resolution, role, provider[r],
					    type[r], &price[r], region[r])) {
			snprintf(why, whylen,
				 "the resolution has no line for the %s role; "
				 "resolve again",
				 role);
			return -EINVAL;
		}
		if (!cluster_deployable(m, provider[r])) {
			const struct provider_entry *e = NULL;
			char names[256];

			for (size_t i = 0; m->registry[i] && !e; i++)
				if (strcmp(m->registry[i]->name, provider[r]) ==
				    0)
					e = m->registry[i];
			cluster_provider_names(m, names, sizeof(names));
			if (e)
				snprintf(why, whylen,
					 "the contract resolved to %s %s, but "
					 "the %s provider is not set up: "
					 "cclfs.conf has no [%s] for it",
					 provider[r], type[r], e->name,
					 e->section ? e->section : e->name);
			else
				snprintf(why, whylen,
					 "the contract resolved to %s %s, but "
					 "this version of cclfs deploys only "
					 "on %s; write one of them to "
					 "node_provider",
					 provider[r], type[r], names);
			return -EOPNOTSUPP;
		}
	}
	if (*req->name && cluster_find(m, req->name)) {
		snprintf(why, whylen, "a cluster named %s exists already",
			 req->name);
		return -EEXIST;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	c->mpi_exit_status = -1;
	if (*req->name)
		snprintf(c->handle, sizeof(c->handle), "%s", req->name);
	else
		cluster_new_handle(m, c->handle);
	snprintf(c->contract, sizeof(c->contract), "%s", req->contract);
	snprintf(c->cluster_type, sizeof(c->cluster_type), "%s",
		 req->cluster_type);
	c->resolution = strdup(req->resolution);
	c->error = strdup("");
	c->state = CLUSTER_DEPLOYING;
	c->node_count = req->node_count;
	c->process_count = req->process_count;
	snprintf(c->ssh_user, sizeof(c->ssh_user), "%s",
		 req->user ? req->user : "");
	snprintf(c->ssh_keyfile, sizeof(c->ssh_keyfile), "%s",
		 req->keyfile ? req->keyfile : "");
	/* The resolved region goes to the provider with the config/ options:
	 * the deploy and every later call of the cluster are made there. */
	{
		const char *where = *region[0] ? region[0]
				    : mw       ? region[1]
					       : "";

		snprintf(c->options, sizeof(c->options), "%s%s%s%s",
			 req->options ? req->options : "",
			 *where ? "region=" : "", where, *where ? "\n" : "");
	}
	cluster_new_token(c->token, sizeof(c->token));
	c->created_ns = c->state_ns = c->error_ns = c->log_ns = now;
	c->nnodes = (size_t)req->node_count + (mw ? 1 : 0);
	c->nodes = calloc(c->nnodes, sizeof(*c->nodes));
	if (!c->resolution || !c->error || !c->nodes) {
		cluster_free(c);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	c->price = 0;
	for (size_t i = 0; i < c->nnodes; i++) {
		struct cluster_node *n = &c->nodes[i];
		size_t r = mw && i > 0 ? 1 : 0;

		snprintf(n->pn.handle, sizeof(n->pn.handle), "%s", c->handle);
		n->pn.rank = mw ? (int)i - 1 : (int)i;
		if (n->pn.rank < 0)
			snprintf(n->name, sizeof(n->name), "manager");
		else
			snprintf(n->name, sizeof(n->name), "%d", n->pn.rank);
		snprintf(n->provider, sizeof(n->provider), "%s", provider[r]);
		snprintf(n->instance_type, sizeof(n->instance_type), "%s",
			 type[r]);
		cluster_node_login(c, n);
		cluster_node_set_state(n, "creating", now);
		n->exit_status = -1;
		c->price += price[r];
	}
	/* The intent is durable before anything is created; a store that
	 * cannot keep it gives its errno (ENOSPC, EROFS) to the deploy. */
	rc = cluster_store_all(m, c, err, sizeof(err));
	if (!rc && cluster_insert(m, c)) {
		snprintf(err, sizeof(err), "out of memory");
		rc = -ENOMEM;
	}
	if (rc) {
		cluster_free(c);
		snprintf(why, whylen, "could not record the cluster: %s", err);
		return rc < 0 ? rc : -EIO;
	}
	m->clusters_ns = now;
	{
		char line[128];

		snprintf(line, sizeof(line), "contracts/%s, %zu nodes",
			 c->contract, c->nnodes);
		cluster_log(m, c, "deploy requested from %s", line);
	}
	cluster_jobs_queue(m, c->handle, CLUSTER_OP_DEPLOY);
	return 0;
}

/* --- clusters/ in the tree --- */

int model_clusters_stat(struct model *m, struct model_attr *attr)
{
	pthread_mutex_lock(&m->lock);
	attr->size = 0;
	attr->mtime_ns = m->clusters_ns;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int model_clusters_list(struct model *m, const char *contract,
			int (*fn)(void *ctx, const char *handle,
				  const struct model_attr *attr),
			void *ctx)
{
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->nclusters; i++) {
		const struct cluster *c = m->clusters[i];
		struct model_attr a = {0, c->created_ns};

		if (contract && strcmp(c->contract, contract) != 0)
			continue;
		if (fn(ctx, c->handle, &a))
			break;
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int model_cluster_stat(struct model *m, const char *handle,
		       struct model_attr *attr)
{
	struct cluster *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (c) {
		attr->size = 0;
		attr->mtime_ns = c->created_ns;
	} else {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_contract(struct model *m, const char *handle, char *out,
			   size_t outlen)
{
	struct model_attr a;
	struct cluster *c;
	char name[CONTRACT_NAME_MAX + 1] = "";

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (c)
		snprintf(name, sizeof(name), "%s", c->contract);
	pthread_mutex_unlock(&m->lock);
	if (!*name || model_contract_stat(m, name, &a))
		return -ENOENT;
	snprintf(out, outlen, "%s", name);
	return 0;
}

int model_cluster_remove(struct model *m, const char *handle)
{
	char err[MODEL_ERR_MAX];
	struct cluster *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c) {
		rc = -ENOENT;
	} else if (c->state != CLUSTER_TERMINATED) {
		snprintf(err, sizeof(err),
			 "the cluster is %s; only a terminated cluster can "
			 "be removed (echo terminated > clusters/%s/state)",
			 cluster_state_names[c->state], c->handle);
		rc = cluster_fail(m, c, "", -EBUSY, err);
	} else if (c->commands) {
		rc = cluster_fail(m, c, "", -EBUSY,
				  "a command written to exec or mpiexec before "
				  "the terminate has not ended yet; remove the "
				  "cluster once it has");
	} else if ((rc = store_cluster_remove(m->store, handle, err,
					      sizeof(err)))) {
		rc = cluster_fail(m, c, "", rc < 0 ? rc : -EIO, err);
	} else {
		size_t i = 0;

		while (m->clusters[i] != c)
			i++;
		memmove(m->clusters + i, m->clusters + i + 1,
			(m->nclusters - i - 1) * sizeof(*m->clusters));
		m->nclusters--;
		m->clusters_ns = model_now();
		model_log(m, "clusters", "removed clusters/%s", handle);
		cluster_exec_remove_dir(m, c);
		cluster_free(c);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_refuse(struct model *m, const char *handle,
			 const char *relpath, int errnum, const char *reason)
{
	struct cluster *c;
	int rc = -errnum;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (c)
		cluster_fail(m, c, relpath, rc, reason);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_nodes(struct model *m, const char *handle,
			int (*fn)(void *ctx, const char *node), void *ctx)
{
	struct cluster *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c)
		rc = -ENOENT;
	for (size_t i = 0; c && i < c->nnodes; i++)
		if (fn(ctx, c->nodes[i].name))
			break;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_node_stat(struct model *m, const char *handle, const char *node,
		    struct model_attr *attr)
{
	struct cluster *c;
	int rc = -ENOENT;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (c && cluster_node_find(c, node)) {
		attr->size = 0;
		attr->mtime_ns = c->created_ns;
		rc = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}
