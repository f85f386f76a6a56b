/* Clusters inside the model: deploying them from a contract, their state
 * machine (deploying, running, interrupting, interrupted, resuming,
 * terminating, terminated, failed), the background jobs that carry out
 * transitions, and the files that show them. */
#include "lifecycle/cluster.h"
#include "lifecycle/cluster_priv.h"

#include "lifecycle/contract.h"
#include "lifecycle/ec2conf.h"
#include "lifecycle/hostsconf.h"
#include "lifecycle/model_priv.h"
#include "lifecycle/resolution.h"
#include "lifecycle/store.h"
#include "providers/ec2.h"
#include "providers/hosts.h"
#include "providers/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Nodes created per step of a deploy: the state file shows the progress
 * between steps, and a crash loses at most one step's bookkeeping. */
#define CLUSTER_DEPLOY_STEP 16

const char *const cluster_state_names[CLUSTER_STATES] = {
	"deploying", "running",	    "interrupting", "interrupted",
	"resuming",  "terminating", "terminated",   "failed"};

enum cluster_op {
	CLUSTER_OP_DEPLOY,
	CLUSTER_OP_STOP,
	CLUSTER_OP_START,
	CLUSTER_OP_TERMINATE,
};

struct cluster_job {
	char handle[CONTRACT_NAME_MAX + 1];
	enum cluster_op op;
};

struct cluster_jobs {
	pthread_t thread;
	pthread_cond_t cond;
	bool started, stop;
	struct cluster_job *q;
	size_t n, cap;
};

/* Files of clusters/HANDLE/ and of nodes/NODE/, and which take writes. */
static const struct {
	const char *name;
	bool writable;
} cluster_files[] = {{"state", true},	    {"info", false},
		     {"exec", true},	    {"hostfile", false},
		     {"mpiexec", true},	    {"mpi_stdout", false},
		     {"mpi_stderr", false}, {"mpi_exit_status", false},
		     {"restart", true},	    {"log", false},
		     {"error", false}},
  node_files[] = {{"status", false}, {"exec", true},	     {"stdout", false},
		  {"stderr", false}, {"exit_status", false}, {"info", false}};

/* --- small helpers --- */

static void cluster_time_text(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

struct cluster *cluster_find(struct model *m, const char *handle)
{
	size_t lo = 0, hi = m->nclusters;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->clusters[mid]->handle, handle);

		if (c == 0)
			return m->clusters[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int cluster_insert(struct model *m, struct cluster *c)
{
	size_t i = 0;

	if (m->nclusters == m->capclusters) {
		size_t cap = m->capclusters ? m->capclusters * 2 : 16;
		struct cluster **v = realloc(m->clusters, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->clusters = v;
		m->capclusters = cap;
	}
	while (i < m->nclusters &&
	       strcmp(m->clusters[i]->handle, c->handle) < 0)
		i++;
	memmove(m->clusters + i + 1, m->clusters + i,
		(m->nclusters - i) * sizeof(*m->clusters));
	m->clusters[i] = c;
	m->nclusters++;
	return 0;
}

static void cluster_free(struct cluster *c)
{
	if (!c)
		return;
	free(c->resolution);
	free(c->error);
	free(c->nodes);
	free(c);
}

struct cluster_node *cluster_node_find(struct cluster *c, const char *name)
{
	for (size_t i = 0; i < c->nnodes; i++)
		if (strcmp(c->nodes[i].name, name) == 0)
			return &c->nodes[i];
	return NULL;
}

void cluster_notify(struct model *m, const struct cluster *c, const char *file)
{
	char path[256];

	snprintf(path, sizeof(path), "clusters/%s/%s", c->handle, file);
	model_notify_path(m, path);
}

__attribute__((format(printf, 3, 4))) static void
cluster_log(struct model *m, struct cluster *c, const char *fmt, ...)
{
	char subject[96], line[MODEL_ERR_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(subject, sizeof(subject), "clusters/%s", c->handle);
	model_log(m, subject, "%s", line);
	c->log_ns = model_now();
	cluster_notify(m, c, "log");
}

/* Where the outputs of a cluster's commands are kept. */
void cluster_dir(const struct model *m, const struct cluster *c, char *buf,
		 size_t len)
{
	int n = snprintf(buf, len, "%s/clusters/%s", m->statedir, c->handle);

	if (n < 0 || (size_t)n >= len)
		buf[0] = '\0'; /* too long: nothing is written anywhere */
}

int cluster_mkdirs(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* --- persistence --- */

int cluster_store(struct model *m, const struct cluster *c, char *err,
		  size_t errlen)
{
	struct store_cluster sc = {
		.handle = c->handle,
		.contract = c->contract,
		.cluster_type = c->cluster_type,
		.resolution = c->resolution,
		.state = cluster_state_names[c->state],
		.error = c->error,
		.node_count = c->node_count,
		.process_count = c->process_count,
		.created_ns = c->created_ns,
		.state_ns = c->state_ns,
		.error_ns = c->error_ns,
		.price = c->price,
		.ssh_user = c->ssh_user,
		.ssh_keyfile = c->ssh_keyfile,
		.token = c->token,
		.options = c->options,
		.mpi_exit_status = c->mpi_exit_status,
		.mpi_ns = c->mpi_ns,
	};

	return store_cluster_put(m->store, &sc, err, errlen);
}

int cluster_store_node(struct model *m, const struct cluster_node *n, char *err,
		       size_t errlen)
{
	struct store_node sn = {
		.handle = n->pn.handle,
		.rank = n->pn.rank,
		.provider = n->provider,
		.instance_type = n->instance_type,
		.instance_id = n->pn.instance_id,
		.address = n->pn.address,
		.workdir = n->pn.workdir,
		.state = n->state,
		.since_ns = n->since_ns,
		.exit_status = n->exit_status,
		.exec_ns = n->exec_ns,
	};

	return store_node_put(m->store, &sn, err, errlen);
}

/* Record why an operation on relpath of cluster c failed. */
int cluster_fail(struct model *m, struct cluster *c, const char *relpath,
		 int rc, const char *why)
{
	char msg[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	char *copy, *old = c->error;
	int64_t old_ns = c->error_ns;

	snprintf(msg, sizeof(msg), "clusters/%s%s%s: %s", c->handle,
		 *relpath ? "/" : "", relpath, why);
	copy = strdup(msg);
	if (copy) {
		c->error = copy;
		c->error_ns = model_now();
		if (cluster_store(m, c, err, sizeof(err))) {
			c->error = old;
			c->error_ns = old_ns;
			free(copy);
		} else {
			free(old);
			cluster_notify(m, c, "error");
		}
	}
	cluster_log(m, c, "%s", msg);
	return rc;
}

void cluster_clear_error(struct model *m, struct cluster *c)
{
	char err[MODEL_ERR_MAX];

	if (!*c->error)
		return;
	c->error[0] = '\0';
	c->error_ns = model_now();
	if (cluster_store(m, c, err, sizeof(err)) == 0)
		cluster_notify(m, c, "error");
}

/* Move c to state s (and store it). */
static int cluster_set_state_note(struct model *m, struct cluster *c,
				  enum cluster_state s, const char *note,
				  char *err, size_t errlen)
{
	enum cluster_state old = c->state;
	int64_t old_ns = c->state_ns;
	char subject[96], line[64];

	snprintf(subject, sizeof(subject), "clusters/%s", c->handle);
	snprintf(line, sizeof(line), "state: %s", cluster_state_names[s]);
	c->state = s;
	c->state_ns = model_now();
	c->done = 0;
	/* The state and its log lines in one transaction: a crash never
	 * leaves one without the other. */
	if (store_begin(m->store, err, errlen) ||
	    cluster_store(m, c, err, errlen) ||
	    store_log(m->store, subject, c->state_ns, line, err, errlen) ||
	    (note &&
	     store_log(m->store, subject, c->state_ns, note, err, errlen)) ||
	    store_commit(m->store, err, errlen)) {
		store_rollback(m->store);
		c->state = old;
		c->state_ns = old_ns;
		return -EIO;
	}
	if (m->verbose) {
		fprintf(stderr, "cclfs: %s: %s\n", subject, line);
		if (note)
			fprintf(stderr, "cclfs: %s: %s\n", subject, note);
	}
	c->log_ns = c->state_ns;
	cluster_notify(m, c, "state");
	cluster_notify(m, c, "log");
	return 0;
}

static int cluster_set_state(struct model *m, struct cluster *c,
			     enum cluster_state s, char *err, size_t errlen)
{
	return cluster_set_state_note(m, c, s, NULL, err, errlen);
}
/* --- jobs --- */

static void cluster_queue(struct model *m, const char *handle,
			  enum cluster_op op)
{
	struct cluster_jobs *j = m->jobs;
	struct cluster_job *q;

	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 16;

		q = realloc(j->q, cap * sizeof(*q));
		if (!q)
			return; /* done again at the next mount */
		j->q = q;
		j->cap = cap;
	}
	q = &j->q[j->n++];
	snprintf(q->handle, sizeof(q->handle), "%s", handle);
	q->op = op;
	pthread_cond_signal(&j->cond);
}

struct provider *cluster_provider(struct model *m, const struct cluster_node *n)
{
	if (strcmp(n->provider, "local") == 0)
		return m->local;
	if (strcmp(n->provider, "hosts") == 0)
		return m->hosts;
	if (strcmp(n->provider, "ec2") == 0)
		return m->ec2;
	return NULL;
}

/* Create the nodes not created yet, a step at a time. Called and returns
 * with the model locked; unlocks around the provider. */
static void cluster_job_deploy(struct model *m, struct cluster *c)
{
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	struct provider_node *step = NULL;
	struct cluster_node *saved = NULL;
	size_t *idx = NULL, cap = 0;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	for (;;) {
		struct provider *p = NULL;
		size_t n = 0, max = CLUSTER_DEPLOY_STEP;
		int rc;

		c = cluster_find(m, handle);
		if (!c || c->state != CLUSTER_DEPLOYING)
			goto out; /* terminated meanwhile */
		if (cap < c->nnodes) {
			free(step);
			free(saved);
			free(idx);
			cap = c->nnodes;
			step = calloc(cap, sizeof(*step));
			saved = calloc(cap, sizeof(*saved));
			idx = calloc(cap, sizeof(*idx));
			if (!step || !saved || !idx) {
				cluster_fail(m, c, "", -ENOMEM,
					     "deploy failed: out of memory");
				goto out;
			}
		}
		/* A provider that creates a cluster's nodes together gets
		 * them all in one step. */
		for (size_t i = 0; i < c->nnodes && n < max; i++) {
			if (strcmp(c->nodes[i].state, "creating") != 0)
				continue;
			if (p && cluster_provider(m, &c->nodes[i]) != p)
				break;
			p = cluster_provider(m, &c->nodes[i]);
			if (p && p->ops->create_all)
				max = c->nnodes;
			idx[n] = i;
			step[n++] = c->nodes[i].pn;
		}
		if (n == 0)
			break;
		pthread_mutex_unlock(&m->lock);
		rc = p ? p->ops->create(p, step, n, err, sizeof(err)) : -ENOSYS;
		if (!p)
			snprintf(err, sizeof(err), "no provider for this node");
		pthread_mutex_lock(&m->lock);
		c = cluster_find(m, handle);
		if (!c)
			goto out;
		/* Record every node the provider made, also when it failed
		 * part way: a later terminate must find them. Memory changes
		 * only once the store has them. */
		{
			char serr[MODEL_ERR_MAX];
			size_t made = 0;
			int src = store_begin(m->store, serr, sizeof(serr));

			for (size_t k = 0; k < n; k++)
				saved[k] = c->nodes[idx[k]];
			for (size_t k = 0; k < n && src == 0; k++) {
				struct cluster_node *nd = &c->nodes[idx[k]];

				if (!*step[k].instance_id)
					continue;
				nd->pn = step[k];
				snprintf(nd->state, sizeof(nd->state),
					 "running");
				nd->since_ns = model_now();
				src = cluster_store_node(m, nd, serr,
							 sizeof(serr));
				made++;
			}
			if (src == 0)
				src = store_commit(m->store, serr,
						   sizeof(serr));
			if (src) {
				store_rollback(m->store);
				for (size_t k = 0; k < n; k++)
					c->nodes[idx[k]] = saved[k];
				if (!rc) {
					rc = -EIO;
					snprintf(err, sizeof(err), "%s", serr);
				}
			} else if (c->state == CLUSTER_DEPLOYING) {
				/* A terminate's count is its own. */
				c->done += (int)made;
				cluster_notify(m, c, "state");
			}
		}
		if (rc) {
			char why[MODEL_ERR_MAX + 32];

			snprintf(why, sizeof(why), "deploy failed: %s", err);
			if (c->state == CLUSTER_DEPLOYING)
				cluster_set_state(m, c, CLUSTER_FAILED, err,
						  sizeof(err));
			cluster_fail(m, c, "", -EIO, why);
			goto out;
		}
	}
	if (c->state == CLUSTER_DEPLOYING) {
		char note[64];
		int rc = cluster_prepare(m, c, err, sizeof(err));

		c = cluster_find(m, handle);
		if (!c || c->state != CLUSTER_DEPLOYING)
			goto out;
		if (rc) {
			char why[MODEL_ERR_MAX + 64];

			snprintf(why, sizeof(why),
				 "deploy failed: preparing the nodes: %s", err);
			cluster_set_state(m, c, CLUSTER_FAILED, err,
					  sizeof(err));
			cluster_fail(m, c, "", -EIO, why);
			goto out;
		}
		snprintf(note, sizeof(note), "deployed %zu nodes", c->nnodes);
		cluster_set_state_note(m, c, CLUSTER_RUNNING, note, err,
				       sizeof(err));
	}
out:
	free(step);
	free(saved);
	free(idx);
}

/* A provider that acts on many nodes at once (ec2: one API call for all)
 * gets every node of the cluster it has from `first` on. Called and
 * returns with the model locked; 0 when the job goes on, -1 when it
 * ended (failed, or the cluster changed meanwhile). */
static int cluster_job_act(struct model *m, struct cluster *c,
			   struct provider *p, enum cluster_op op, size_t first)
{
	static const enum provider_act acts[] = {
		[CLUSTER_OP_STOP] = PROVIDER_ACT_STOP,
		[CLUSTER_OP_START] = PROVIDER_ACT_START,
		[CLUSTER_OP_TERMINATE] = PROVIDER_ACT_TERMINATE,
	};
	static const char *const after[] = {
		[CLUSTER_OP_STOP] = "stopped",
		[CLUSTER_OP_START] = "running",
		[CLUSTER_OP_TERMINATE] = "terminated",
	};
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX] = "";
	enum cluster_state during = c->state;
	struct provider_node *v = calloc(c->nnodes, sizeof(*v));
	size_t *idx = calloc(c->nnodes, sizeof(*idx));
	size_t n = 0;
	int rc;

	snprintf(handle, sizeof(handle), "%s", c->handle);
	if (!v || !idx) {
		free(v);
		free(idx);
		cluster_fail(m, c, "", -ENOMEM, "out of memory");
		return -1;
	}
	for (size_t i = first; i < c->nnodes; i++) {
		if (cluster_provider(m, &c->nodes[i]) != p ||
		    strcmp(c->nodes[i].state, "terminated") == 0)
			continue;
		idx[n] = i;
		v[n++] = c->nodes[i].pn;
	}
	pthread_mutex_unlock(&m->lock);
	rc = p->ops->act(p, acts[op], v, n, err, sizeof(err));
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c || c->state != during) {
		free(v);
		free(idx);
		return -1;
	}
	if (rc) {
		char why[MODEL_ERR_MAX + 64];

		snprintf(why, sizeof(why), "%s failed: %s",
			 cluster_state_names[during], err);
		cluster_set_state(m, c, CLUSTER_FAILED, err, sizeof(err));
		cluster_fail(m, c, "", -EIO, why);
		free(v);
		free(idx);
		return -1;
	}
	for (size_t k = 0; k < n; k++) {
		struct cluster_node *nd = &c->nodes[idx[k]];

		/* A resumed instance may have a new address. */
		snprintf(nd->pn.address, sizeof(nd->pn.address), "%s",
			 v[k].address);
		if (*nd->pn.instance_id || op == CLUSTER_OP_TERMINATE)
			snprintf(nd->state, sizeof(nd->state), "%s", after[op]);
		nd->since_ns = model_now();
		cluster_store_node(m, nd, err, sizeof(err));
		cluster_notify(m, c, "nodes");
		c->done++;
	}
	cluster_notify(m, c, "state");
	free(v);
	free(idx);
	return 0;
}

/* Stop, start or terminate every node; then the final state. */
static void cluster_job_nodes(struct model *m, struct cluster *c,
			      enum cluster_op op)
{
	static const struct {
		enum cluster_state during, after;
		const char *node_state;
	} how[] = {
		[CLUSTER_OP_STOP] = {CLUSTER_INTERRUPTING, CLUSTER_INTERRUPTED,
				     "stopped"},
		[CLUSTER_OP_START] = {CLUSTER_RESUMING, CLUSTER_RUNNING,
				      "running"},
		[CLUSTER_OP_TERMINATE] = {CLUSTER_TERMINATING,
					  CLUSTER_TERMINATED, "terminated"},
	};
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];

	snprintf(handle, sizeof(handle), "%s", c->handle);
	for (size_t i = 0;; i++) {
		struct provider_node pn;
		struct provider *p;
		int rc = 0;

		c = cluster_find(m, handle);
		if (!c || c->state != how[op].during)
			return;
		if (i >= c->nnodes)
			break;
		if (strcmp(c->nodes[i].state, "terminated") == 0)
			continue; /* gone already */
		if (!*c->nodes[i].pn.instance_id &&
		    op != CLUSTER_OP_TERMINATE) {
			/* Never created (a deploy cut short): nothing runs
			 * there to stop or continue. */
			c->done++;
			cluster_notify(m, c, "state");
			continue;
		}
		/* A terminate asks the provider even for a node without an id:
		 * a crash or a failed create may have made it unrecorded. */
		pn = c->nodes[i].pn;
		p = cluster_provider(m, &c->nodes[i]);
		if (p && p->ops->act) {
			if (cluster_job_act(m, c, p, op, i))
				return;
			i = c->nnodes - 1; /* it did them all */
			continue;
		}
		pthread_mutex_unlock(&m->lock);
		err[0] = '\0';
		if (!p)
			rc = -ENOSYS;
		else if (op == CLUSTER_OP_STOP)
			rc = p->ops->stop(p, &pn, err, sizeof(err));
		else if (op == CLUSTER_OP_START)
			rc = p->ops->start(p, &pn, err, sizeof(err));
		else
			rc = p->ops->terminate(p, &pn, err, sizeof(err));
		pthread_mutex_lock(&m->lock);
		c = cluster_find(m, handle);
		if (!c)
			return;
		if (rc) {
			char why[MODEL_ERR_MAX + 64];

			snprintf(why, sizeof(why), "%s failed: %s",
				 cluster_state_names[how[op].during], err);
			cluster_set_state(m, c, CLUSTER_FAILED, err,
					  sizeof(err));
			cluster_fail(m, c, "", -EIO, why);
			return;
		}
		/* Done, with something worth knowing (e.g. a terminated node
		 * whose host could not be reached to clean up). */
		if (err[0])
			cluster_log(m, c, "node %s: %s", c->nodes[i].name, err);
		/* What was done to the node is a fact whatever the state is
		 * now; the count belongs to this transition only. */
		snprintf(c->nodes[i].state, sizeof(c->nodes[i].state), "%s",
			 how[op].node_state);
		c->nodes[i].since_ns = model_now();
		cluster_store_node(m, &c->nodes[i], err, sizeof(err));
		if (c->state != how[op].during)
			return;
		c->done++;
		cluster_notify(m, c, "state");
	}
	/* Resumed nodes may have new addresses: their hostfile and known
	 * hosts follow. A failure leaves the cluster running, said in its
	 * error file and log. */
	if (op == CLUSTER_OP_START && cluster_prepare(m, c, err, sizeof(err))) {
		char why[MODEL_ERR_MAX + 64];

		c = cluster_find(m, handle);
		if (!c || c->state != how[op].during)
			return;
		snprintf(why, sizeof(why), "preparing the resumed nodes: %s",
			 err);
		cluster_fail(m, c, "", -EIO, why);
	}
	c = cluster_find(m, handle);
	if (!c || c->state != how[op].during)
		return;
	cluster_set_state(m, c, how[op].after, err, sizeof(err));
}

static void cluster_check_ec2(struct model *m);

static void *cluster_jobs_main(void *arg)
{
	struct model *m = arg;
	struct cluster_jobs *j = m->jobs;

	pthread_mutex_lock(&m->lock);
	cluster_check_ec2(m);
	while (!j->stop) {
		struct cluster_job job;
		struct cluster *c;

		if (j->n == 0) {
			pthread_cond_wait(&j->cond, &m->lock);
			continue;
		}
		job = j->q[0];
		memmove(j->q, j->q + 1, (j->n - 1) * sizeof(*j->q));
		j->n--;
		c = cluster_find(m, job.handle);
		if (!c)
			continue;
		if (job.op == CLUSTER_OP_DEPLOY)
			cluster_job_deploy(m, c);
		else
			cluster_job_nodes(m, c, job.op);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* --- loading, deploying --- */

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
	c->state = CLUSTER_FAILED;
	for (int s = 0; s < CLUSTER_STATES; s++)
		if (strcmp(sc->state, cluster_state_names[s]) == 0)
			c->state = (enum cluster_state)s;
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
	n->exit_status = sn->exit_status;
	n->exec_ns = sn->exec_ns;
	return 0;
}

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

/* Hand provider p the nodes it has from the clusters of the store, and
 * have it tell when how it reaches them changes. */
static void cluster_attach_all(struct model *m, const char *name,
			       struct provider *p)
{
	p->notify = cluster_reach_changed;
	p->notify_ctx = m;
	for (size_t i = 0; i < m->nclusters; i++) {
		const struct cluster *c = m->clusters[i];

		for (size_t k = 0; k < c->nnodes; k++) {
			const struct cluster_node *nd = &c->nodes[k];

			if (strcmp(nd->provider, name) == 0 &&
			    *nd->pn.instance_id &&
			    strcmp(nd->state, "terminated") != 0)
				p->ops->attach(p, &nd->pn);
		}
	}
}

/* The hosts provider, when cclfs.conf lists hosts; it learns which hosts
 * the clusters of the store hold. */
static int cluster_open_hosts(struct model *m, char *err, size_t errlen)
{
	struct hosts_host *hosts;
	struct hosts_settings s;
	size_t n;

	if (hostsconf_read(m->config, m->statedir, &hosts, &n, &s, err, errlen))
		return -1;
	if (n == 0) {
		free(hosts);
		return 0;
	}
	m->hosts = hosts_provider_open(hosts, n, &s, err, errlen);
	free(hosts);
	if (!m->hosts)
		return -1;
	cluster_attach_all(m, "hosts", m->hosts);
	return 0;
}

/* The ec2 provider: always there (it needs credentials only when it
 * acts); it learns the instances of the clusters of the store. */
static int cluster_open_ec2(struct model *m, char *err, size_t errlen)
{
	struct ec2_settings s;

	if (ec2conf_read(m->config, m->statedir, &s, err, errlen))
		return -1;
	if (mkdir(s.keydir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", s.keydir,
			 strerror(errno));
		return -1;
	}
	m->ec2 = ec2_provider_open(&s, err, errlen);
	if (!m->ec2)
		return -1;
	cluster_attach_all(m, "ec2", m->ec2);
	return 0;
}

/* At mount: instances tagged by cclfs that belong to no cluster of this
 * state directory are reported, never touched (another machine's cclfs,
 * or a cluster removed from the tree while its instances lived). Only when
 * cclfs.conf has an [ec2] section or a cluster uses ec2. Called and returns
 * with the model locked. */
static void cluster_check_ec2(struct model *m)
{
	struct ec2_tagged *t = NULL;
	char err[MODEL_ERR_MAX];
	bool wanted = false;
	size_t n = 0;
	int rc;

	for (size_t i = 0; m->config && i < m->config->count; i++)
		wanted |= strcmp(m->config->entries[i].section, "ec2") == 0;
	for (size_t i = 0; i < m->nclusters && !wanted; i++)
		for (size_t k = 0; k < m->clusters[i]->nnodes; k++)
			wanted |= strcmp(m->clusters[i]->nodes[k].provider,
					 "ec2") == 0;
	if (!wanted || !m->ec2)
		return;
	pthread_mutex_unlock(&m->lock);
	rc = ec2_tagged_instances(m->ec2, &t, &n, err, sizeof(err));
	pthread_mutex_lock(&m->lock);
	if (rc) {
		model_log(m, "ec2",
			  "cannot list the instances cclfs tagged: %s", err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cluster *c = cluster_find(m, t[i].cluster);

		if (c && strcmp(c->token, t[i].token) == 0)
			continue;
		/* The daemon's stderr has it too (-f); the state store's
		 * log keeps it. */
		model_log(m, "ec2",
			  "instance %s (%s) is tagged cclfs:cluster=%s (token "
			  "%s) but belongs to no cluster of this state "
			  "directory; it was left alone",
			  t[i].id, t[i].state, t[i].cluster, t[i].token);
		if (!m->verbose)
			fprintf(stderr,
				"cclfs: ec2: instance %s (%s) is tagged "
				"cclfs:cluster=%s (token %s) but belongs to no "
				"cluster of this state directory; it was left "
				"alone\n",
				t[i].id, t[i].state, t[i].cluster, t[i].token);
	}
	free(t);
}

int cluster_open(struct model *m, char *err, size_t errlen)
{
	struct store_cluster_loader loader = {m, cluster_load_one,
					      cluster_load_node};
	char dir[PATH_MAX + 16];

	m->jobs = calloc(1, sizeof(*m->jobs));
	if (!m->jobs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_cond_init(&m->jobs->cond, NULL);
	m->clusters_ns = model_now();
	if (store_load_clusters(m->store, &loader, err, errlen))
		return -1;
	snprintf(dir, sizeof(dir), "%s/nodes", m->statedir);
	m->local = local_provider_open(dir, err, errlen);
	if (!m->local)
		return -1;
	if (cluster_open_hosts(m, err, errlen))
		return -1;
	return cluster_open_ec2(m, err, errlen);
}

int model_start(struct model *m, char *err, size_t errlen)
{
	struct cluster_jobs *j = m->jobs;

	pthread_mutex_lock(&m->lock);
	/* What a crash left half done is finished now. */
	for (size_t i = 0; i < m->nclusters; i++) {
		struct cluster *c = m->clusters[i];

		if (c->state == CLUSTER_DEPLOYING)
			cluster_queue(m, c->handle, CLUSTER_OP_DEPLOY);
		else if (c->state == CLUSTER_INTERRUPTING)
			cluster_queue(m, c->handle, CLUSTER_OP_STOP);
		else if (c->state == CLUSTER_RESUMING)
			cluster_queue(m, c->handle, CLUSTER_OP_START);
		else if (c->state == CLUSTER_TERMINATING)
			cluster_queue(m, c->handle, CLUSTER_OP_TERMINATE);
	}
	if (pthread_create(&j->thread, NULL, cluster_jobs_main, m)) {
		pthread_mutex_unlock(&m->lock);
		snprintf(err, errlen, "cannot start the background jobs");
		return -1;
	}
	j->started = true;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

void cluster_close(struct model *m)
{
	struct cluster_jobs *j = m->jobs;

	if (j) {
		pthread_mutex_lock(&m->lock);
		j->stop = true;
		pthread_cond_broadcast(&j->cond);
		pthread_mutex_unlock(&m->lock);
		if (j->started)
			pthread_join(j->thread, NULL);
		pthread_cond_destroy(&j->cond);
		free(j->q);
		free(j);
		m->jobs = NULL;
	}
	for (size_t i = 0; i < m->nclusters; i++)
		cluster_free(m->clusters[i]);
	free(m->clusters);
	m->clusters = NULL;
	m->nclusters = 0;
	if (m->local)
		m->local->ops->close(m->local);
	m->local = NULL;
	if (m->hosts)
		m->hosts->ops->close(m->hosts);
	m->hosts = NULL;
	if (m->ec2)
		m->ec2->ops->close(m->ec2);
	m->ec2 = NULL;
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

/* A role's line of a resolution: "ROLE\tPROVIDER\tTYPE\tPRICE". */
static int cluster_role(const char *resolution, const char *role,
			char provider[16], char type[64], double *price)
{
	const char *line = resolution;
	size_t n = strlen(role);

	for (; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		char p[16], t[64], pr[32];

		if (strncmp(line, role, n) != 0 || line[n] != '\t')
			continue;
		if (sscanf(line + n + 1, "%15[^\t]\t%63[^\t]\t%31[^\n]", p, t,
			   pr) != 3)
			return -1;
		memcpy(provider, p, sizeof(p));
		memcpy(type, t, sizeof(t));
		*price = strcmp(pr, "unknown") == 0 ? NAN : strtod(pr, NULL);
		return 0;
	}
	return -1;
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
	char provider[2][16], type[2][64], err[MODEL_ERR_MAX];
	double price[2] = {0, 0};
	struct cluster *c;
	int64_t now = model_now();
	size_t roles = mw ? 2 : 1;

	for (size_t r = 0; r < roles; r++) {
		const char *role = mw ? (r ? "worker" : "manager") : "node";

		if (cluster_role(req->resolution, role, provider[r], type[r],
				 &price[r])) {
			snprintf(why, whylen,
				 "the resolution has no line for the %s role; "
				 "resolve again",
				 role);
			return -EINVAL;
		}
		if (strcmp(provider[r], "local") != 0 &&
		    strcmp(provider[r], "hosts") != 0 &&
		    strcmp(provider[r], "ec2") != 0) {
			snprintf(why, whylen,
				 "the contract resolved to %s %s, but this "
				 "version of cclfs deploys only on the local, "
				 "hosts and ec2 providers; write one of them "
				 "to node_provider",
				 provider[r], type[r]);
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
	snprintf(c->options, sizeof(c->options), "%s",
		 req->options ? req->options : "");
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
		snprintf(n->state, sizeof(n->state), "creating");
		n->since_ns = now;
		n->exit_status = -1;
		c->price += price[r];
	}
	/* The intent is durable before anything is created. */
	if (store_begin(m->store, err, sizeof(err)) ||
	    cluster_store(m, c, err, sizeof(err))) {
		store_rollback(m->store);
		cluster_free(c);
		snprintf(why, whylen, "%s", err);
		return -EIO;
	}
	for (size_t i = 0; i < c->nnodes; i++) {
		if (cluster_store_node(m, &c->nodes[i], err, sizeof(err))) {
			store_rollback(m->store);
			cluster_free(c);
			snprintf(why, whylen, "%s", err);
			return -EIO;
		}
	}
	if (store_commit(m->store, err, sizeof(err)) || cluster_insert(m, c)) {
		store_rollback(m->store);
		cluster_free(c);
		snprintf(why, whylen, "could not record the cluster: %s", err);
		return -EIO;
	}
	m->clusters_ns = now;
	{
		char line[128];

		snprintf(line, sizeof(line), "contracts/%s, %zu nodes",
			 c->contract, c->nnodes);
		cluster_log(m, c, "deploy requested from %s", line);
	}
	cluster_queue(m, c->handle, CLUSTER_OP_DEPLOY);
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

static void cluster_remove_outputs(struct model *m, const struct cluster *c)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];

	cluster_dir(m, c, dir, sizeof(dir));
	for (size_t i = 0; i < c->nnodes; i++) {
		snprintf(path, sizeof(path), "%s/%s.stdout", dir,
			 c->nodes[i].name);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s.stderr", dir,
			 c->nodes[i].name);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/exec.out", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/hostfile", dir);
	unlink(path);
	rmdir(dir);
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
	} else if (store_cluster_remove(m->store, handle, err, sizeof(err))) {
		rc = cluster_fail(m, c, "", -EIO, err);
	} else {
		size_t i = 0;

		while (m->clusters[i] != c)
			i++;
		memmove(m->clusters + i, m->clusters + i + 1,
			(m->nclusters - i - 1) * sizeof(*m->clusters));
		m->nclusters--;
		m->clusters_ns = model_now();
		model_log(m, "clusters", "removed clusters/%s", handle);
		cluster_remove_outputs(m, c);
		cluster_free(c);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

const char *model_cluster_file_name(size_t i)
{
	return i < sizeof(cluster_files) / sizeof(*cluster_files)
		       ? cluster_files[i].name
		       : NULL;
}

const char *model_node_file_name(size_t i)
{
	return i < sizeof(node_files) / sizeof(*node_files) ? node_files[i].name
							    : NULL;
}

int model_cluster_file_writable(const char *file)
{
	for (size_t i = 0; i < sizeof(cluster_files) / sizeof(*cluster_files);
	     i++)
		if (strcmp(cluster_files[i].name, file) == 0)
			return cluster_files[i].writable;
	return 0;
}

int model_node_file_writable(const char *file)
{
	for (size_t i = 0; i < sizeof(node_files) / sizeof(*node_files); i++)
		if (strcmp(node_files[i].name, file) == 0)
			return node_files[i].writable;
	return 0;
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

/* --- rendering the files --- */

void cluster_printf(struct cluster_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = t->cap - t->len;

		va_start(ap, fmt);
		n = vsnprintf(t->buf ? t->buf + t->len : NULL,
			      t->buf ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (t->buf && (size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		{
			size_t cap = (t->cap + (size_t)n + 1) * 2;
			char *b = realloc(t->buf, cap);

			if (!b)
				return;
			t->buf = b;
			t->cap = cap;
		}
	}
}

static void cluster_render_state(const struct cluster *c,
				 struct cluster_text *t)
{
	bool moving = c->state == CLUSTER_DEPLOYING ||
		      c->state == CLUSTER_INTERRUPTING ||
		      c->state == CLUSTER_RESUMING ||
		      c->state == CLUSTER_TERMINATING;

	if (moving)
		cluster_printf(t, "%s %d/%zu\n", cluster_state_names[c->state],
			       c->done, c->nnodes);
	else
		cluster_printf(t, "%s\n", cluster_state_names[c->state]);
}

static void cluster_render_info(const struct cluster *c, int64_t now,
				struct cluster_text *t)
{
	char when[32];
	int64_t end = c->state == CLUSTER_TERMINATED ? c->state_ns : now;
	double hours = (double)(end - c->created_ns) / 3.6e12;

	cluster_time_text(c->created_ns, when, sizeof(when));
	cluster_printf(t, "handle: %s\ncontract: %s\ncluster_type: %s\n",
		       c->handle, c->contract, c->cluster_type);
	for (size_t i = 0; i < c->nnodes; i++) {
		const struct cluster_node *n = &c->nodes[i];

		/* One line per role: the manager, then the first node. */
		if (i == 0 || (i == 1 && c->nodes[0].pn.rank < 0))
			cluster_printf(t, "%s: %s %s\n",
				       n->pn.rank < 0		 ? "manager"
				       : c->nodes[0].pn.rank < 0 ? "workers"
								 : "nodes",
				       n->provider, n->instance_type);
	}
	cluster_printf(t, "node_count: %d\nnode_process_count: %d\n",
		       c->node_count, c->process_count);
	cluster_printf(t, "created: %s\n", when);
	if (isnan(c->price))
		cluster_printf(t, "price_per_hour: unknown\n"
				  "cost_so_far: unknown\n");
	else
		cluster_printf(t, "price_per_hour: %.15g\ncost_so_far: %.2f\n",
			       c->price, c->price * hours);
}

static int cluster_render_log_line(void *ctx, int64_t at_ns, const char *line)
{
	char when[32];

	cluster_time_text(at_ns, when, sizeof(when));
	cluster_printf(ctx, "%s %s\n", when, line);
	return 0;
}

/* How the provider reaches the node (SSH nodes): "connection: ...". */
static void cluster_render_reach(const struct model *m,
				 const struct cluster_node *n,
				 struct cluster_text *t)
{
	struct provider *p = NULL;
	char reach[1024];

	if (strcmp(n->provider, "hosts") == 0)
		p = m->hosts;
	if (!p || !p->ops->reach || !*n->pn.instance_id ||
	    strcmp(n->state, "terminated") == 0)
		return;
	if (p->ops->reach(p, &n->pn, reach, sizeof(reach)))
		snprintf(reach, sizeof(reach), "not connected yet");
	cluster_printf(t, "connection: %s\n", reach);
}

static void cluster_render_node(const struct model *m,
				const struct cluster_node *n, const char *file,
				struct cluster_text *t)
{
	char when[32];

	if (strcmp(file, "status") == 0) {
		cluster_time_text(n->since_ns, when, sizeof(when));
		cluster_printf(t,
			       "state: %s\naddress: %s\ninstance_id: %s\n"
			       "since: %s\n",
			       n->state, n->pn.address, n->pn.instance_id,
			       when);
		cluster_render_reach(m, n, t);
	} else if (strcmp(file, "exit_status") == 0) {
		if (n->exit_status >= 0)
			cluster_printf(t, "%d\n", n->exit_status);
	} else if (strcmp(file, "info") == 0) {
		cluster_printf(t, "provider: %s\ninstance_type: %s\n",
			       n->provider, n->instance_type);
		for (size_t i = 0; resolution_feature_name(i); i++) {
			const char *f = resolution_feature_name(i);
			char *v = NULL;
			size_t len = 0;

			if (resolution_feature(m->resolution, n->provider,
					       n->instance_type, f, &v,
					       &len) == 0 &&
			    len)
				cluster_printf(t, "%s: %s", f, v);
			free(v);
		}
	}
}

/* The file that holds a node's last output, or the cluster's. */
static void cluster_output_path(const struct model *m, const struct cluster *c,
				const char *node, const char *file, char *buf,
				size_t len)
{
	char dir[PATH_MAX];

	cluster_dir(m, c, dir, sizeof(dir));
	if (node)
		snprintf(buf, len, "%s/%s.%s", dir, node,
			 strcmp(file, "exec") == 0 ? "stdout" : file);
	else if (strcmp(file, "mpiexec") == 0 ||
		 strcmp(file, "mpi_stdout") == 0)
		snprintf(buf, len, "%s/mpi.stdout", dir);
	else if (strcmp(file, "mpi_stderr") == 0)
		snprintf(buf, len, "%s/mpi.stderr", dir);
	else
		snprintf(buf, len, "%s/exec.out", dir);
}

static bool cluster_is_output(const char *node, const char *file)
{
	return strcmp(file, "exec") == 0 ||
	       (!node && (strcmp(file, "mpiexec") == 0 ||
			  strcmp(file, "mpi_stdout") == 0 ||
			  strcmp(file, "mpi_stderr") == 0)) ||
	       (node &&
		(strcmp(file, "stdout") == 0 || strcmp(file, "stderr") == 0));
}

static int64_t cluster_file_mtime(const struct cluster *c,
				  const struct cluster_node *n,
				  const char *file)
{
	if (n)
		return strcmp(file, "status") == 0 ? n->since_ns
		       : strcmp(file, "info") == 0 ? c->created_ns
		       : n->exec_ns		   ? n->exec_ns
						   : c->created_ns;
	if (strcmp(file, "state") == 0)
		return c->state_ns;
	if (strcmp(file, "error") == 0)
		return c->error_ns;
	if (strcmp(file, "log") == 0)
		return c->log_ns;
	if (strcmp(file, "exec") == 0)
		return c->exec_ns ? c->exec_ns : c->created_ns;
	if (strncmp(file, "mpi", 3) == 0)
		return c->mpi_ns ? c->mpi_ns : c->created_ns;
	if (strcmp(file, "restart") == 0)
		return c->restart_ns ? c->restart_ns : c->created_ns;
	return c->created_ns;
}

/* One address of the hostfile: where it first appears, its slots. */
struct cluster_host {
	const char *address;
	size_t first;
	int slots;
};

static int cluster_host_by_address(const void *a, const void *b)
{
	const struct cluster_host *x = a, *y = b;
	int c = strcmp(x->address, y->address);

	return c ? c : (x->first > y->first) - (x->first < y->first);
}

static int cluster_host_by_first(const void *a, const void *b)
{
	const struct cluster_host *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

void cluster_hostfile(const struct cluster *c, struct cluster_text *t)
{
	/* Open MPI refuses a host named twice: nodes that share an address
	 * (every local node is this machine) are one line with all their
	 * slots, where the address first appears. */
	struct cluster_host *h = calloc(c->nnodes ? c->nnodes : 1, sizeof(*h));
	size_t n = 0, m = 0;

	if (!h)
		return;
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].pn.rank >= 0)
			h[n++] = (struct cluster_host){
				.address = *c->nodes[i].pn.address
						   ? c->nodes[i].pn.address
						   : "localhost",
				.first = i,
				.slots = c->process_count,
			};
	qsort(h, n, sizeof(*h), cluster_host_by_address);
	for (size_t i = 0; i < n; i++) {
		if (m && strcmp(h[m - 1].address, h[i].address) == 0)
			h[m - 1].slots += h[i].slots;
		else
			h[m++] = h[i];
	}
	qsort(h, m, sizeof(*h), cluster_host_by_first);
	for (size_t i = 0; i < m; i++)
		cluster_printf(t, "%s slots=%d\n", h[i].address, h[i].slots);
	free(h);
}

/* Render a file that is not command output (model locked). */
int cluster_render(struct model *m, struct cluster *c, struct cluster_node *n,
		   const char *file, struct cluster_text *t)
{
	if (n) {
		cluster_render_node(m, n, file, t);
	} else if (strcmp(file, "state") == 0) {
		cluster_render_state(c, t);
	} else if (strcmp(file, "info") == 0) {
		cluster_render_info(c, model_now(), t);
	} else if (strcmp(file, "error") == 0) {
		if (*c->error)
			cluster_printf(t, "%s\n", c->error);
	} else if (strcmp(file, "log") == 0) {
		char subject[96], err[256];

		snprintf(subject, sizeof(subject), "clusters/%s", c->handle);
		store_log_lines(m->store, subject, cluster_render_log_line, t,
				err, sizeof(err));
	} else if (strcmp(file, "hostfile") == 0) {
		cluster_hostfile(c, t);
	} else if (strcmp(file, "mpi_exit_status") == 0) {
		if (c->mpi_exit_status >= 0)
			cluster_printf(t, "%d\n", c->mpi_exit_status);
	} else if (strcmp(file, "restart") != 0) {
		return -ENOENT;
	}
	return 0;
}

/* Find the cluster, the node and check the file exists (model locked). */
static int cluster_lookup(struct model *m, const char *handle, const char *node,
			  const char *file, struct cluster **c,
			  struct cluster_node **n)
{
	bool known = false;

	*c = cluster_find(m, handle);
	*n = NULL;
	if (!*c)
		return -ENOENT;
	if (node) {
		*n = cluster_node_find(*c, node);
		if (!*n)
			return -ENOENT;
		for (size_t i = 0; model_node_file_name(i); i++)
			known |= strcmp(model_node_file_name(i), file) == 0;
	} else {
		for (size_t i = 0; model_cluster_file_name(i); i++)
			known |= strcmp(model_cluster_file_name(i), file) == 0;
	}
	return known ? 0 : -ENOENT;
}

int model_cluster_file_stat(struct model *m, const char *handle,
			    const char *node, const char *file,
			    struct model_attr *attr)
{
	struct cluster_text t = {0};
	struct cluster_node *n;
	struct cluster *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = cluster_lookup(m, handle, node, file, &c, &n);
	if (rc == 0) {
		attr->mtime_ns = cluster_file_mtime(c, n, file);
		if (cluster_is_output(node, file)) {
			char path[PATH_MAX + 96];
			struct stat st;

			cluster_output_path(m, c, node, file, path,
					    sizeof(path));
			attr->size =
				stat(path, &st) == 0 ? (size_t)st.st_size : 0;
		} else {
			rc = cluster_render(m, c, n, file, &t);
			attr->size = t.len;
		}
	}
	pthread_mutex_unlock(&m->lock);
	free(t.buf);
	return rc;
}

int model_cluster_file_open(struct model *m, const char *handle,
			    const char *node, const char *file, char **buf,
			    size_t *len, int *fd)
{
	struct cluster_text t = {0};
	struct cluster_node *n;
	struct cluster *c;
	int rc;

	*buf = NULL;
	*len = 0;
	*fd = -1;
	pthread_mutex_lock(&m->lock);
	rc = cluster_lookup(m, handle, node, file, &c, &n);
	if (rc == 0 && cluster_is_output(node, file)) {
		char path[PATH_MAX + 96];

		cluster_output_path(m, c, node, file, path, sizeof(path));
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0 && errno != ENOENT)
			rc = -errno;
	} else if (rc == 0) {
		rc = cluster_render(m, c, n, file, &t);
		if (rc == 0) {
			*buf = t.buf ? t.buf : strdup("");
			*len = t.len;
			t.buf = NULL;
			if (!*buf)
				rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&m->lock);
	free(t.buf);
	return rc;
}

/* --- state changes and restart --- */

/* The state a word asks for: interrupted/interrupt etc. */
static int cluster_verb(const char *text, size_t len, enum cluster_op *op)
{
	static const struct {
		const char *word;
		enum cluster_op op;
	} verbs[] = {{"interrupted", CLUSTER_OP_STOP},
		     {"interrupt", CLUSTER_OP_STOP},
		     {"resumed", CLUSTER_OP_START},
		     {"resume", CLUSTER_OP_START},
		     {"terminated", CLUSTER_OP_TERMINATE},
		     {"terminate", CLUSTER_OP_TERMINATE}};

	while (len && (*text == ' ' || *text == '\t' || *text == '\n'))
		text++, len--;
	while (len && (text[len - 1] == ' ' || text[len - 1] == '\t' ||
		       text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(*verbs); i++)
		if (strlen(verbs[i].word) == len &&
		    strncmp(verbs[i].word, text, len) == 0) {
			*op = verbs[i].op;
			return 0;
		}
	return -EINVAL;
}

static int cluster_request_state(struct model *m, struct cluster *c,
				 enum cluster_op op)
{
	static const enum cluster_state during[] = {
		[CLUSTER_OP_STOP] = CLUSTER_INTERRUPTING,
		[CLUSTER_OP_START] = CLUSTER_RESUMING,
		[CLUSTER_OP_TERMINATE] = CLUSTER_TERMINATING,
	};
	static const enum cluster_state done[] = {
		[CLUSTER_OP_STOP] = CLUSTER_INTERRUPTED,
		[CLUSTER_OP_START] = CLUSTER_RUNNING,
		[CLUSTER_OP_TERMINATE] = CLUSTER_TERMINATED,
	};
	char why[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	bool allowed;

	/* Asking for where it is, or is going, already: nothing to do. */
	if (c->state == during[op] || c->state == done[op]) {
		cluster_clear_error(m, c);
		return 0;
	}
	switch (op) {
	case CLUSTER_OP_STOP:
		allowed = c->state == CLUSTER_RUNNING;
		break;
	case CLUSTER_OP_START:
		allowed = c->state == CLUSTER_INTERRUPTED;
		break;
	default:
		allowed = true; /* any state can be terminated */
		break;
	}
	if (!allowed) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; it cannot be %s from there",
			 cluster_state_names[c->state],
			 op == CLUSTER_OP_STOP ? "interrupted" : "resumed");
		return cluster_fail(m, c, "state", -EBUSY, why);
	}
	if (cluster_set_state(m, c, during[op], err, sizeof(err)))
		return cluster_fail(m, c, "state", -EIO, err);
	cluster_clear_error(m, c);
	cluster_queue(m, c->handle, op);
	return 0;
}

/* Kill every process cclfs started on the nodes (model locked; unlocks
 * around the provider). */
static int cluster_restart(struct model *m, struct cluster *c)
{
	char handle[CONTRACT_NAME_MAX + 1], err[MODEL_ERR_MAX];
	struct provider_node *pns;
	struct provider **ps;
	size_t n = c->nnodes;
	int rc = 0;

	if (c->state != CLUSTER_RUNNING && c->state != CLUSTER_INTERRUPTED) {
		snprintf(err, sizeof(err),
			 "the cluster is %s; restart needs it running or "
			 "interrupted",
			 cluster_state_names[c->state]);
		return cluster_fail(m, c, "restart", -EBUSY, err);
	}
	pns = calloc(n ? n : 1, sizeof(*pns));
	ps = calloc(n ? n : 1, sizeof(*ps));
	if (!pns || !ps) {
		free(pns);
		free(ps);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		pns[i] = c->nodes[i].pn;
		ps[i] = cluster_provider(m, &c->nodes[i]);
	}
	snprintf(handle, sizeof(handle), "%s", c->handle);
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (ps[i] && *pns[i].instance_id)
			rc = ps[i]->ops->kill(ps[i], &pns[i], err, sizeof(err));
	pthread_mutex_lock(&m->lock);
	free(pns);
	free(ps);
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

int model_cluster_file_write(struct model *m, const char *handle,
			     const char *file, const char *text, size_t len)
{
	struct cluster *c;
	enum cluster_op op;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c) {
		rc = -ENOENT;
	} else if (strcmp(file, "restart") == 0) {
		rc = cluster_restart(m, c);
	} else if (strcmp(file, "state") != 0) {
		rc = cluster_fail(m, c, file, -EACCES,
				  "this file is read-only; cclfs writes it");
	} else if (cluster_verb(text, len, &op)) {
		char why[256], q[48];
		size_t n = len > 40 ? 40 : len;

		memcpy(q, text, n);
		q[n] = '\0';
		q[strcspn(q, "\n")] = '\0';
		snprintf(why, sizeof(why),
			 "\"%s\" is not a state to ask for; write "
			 "interrupted, resumed or terminated",
			 q);
		rc = cluster_fail(m, c, "state", -EINVAL, why);
	} else {
		rc = cluster_request_state(m, c, op);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_file_touch(struct model *m, const char *handle,
			     const char *file)
{
	struct cluster *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c)
		rc = -ENOENT;
	else if (strcmp(file, "restart") == 0)
		rc = cluster_restart(m, c);
	pthread_mutex_unlock(&m->lock);
	return rc;
}
