/* Clusters inside the model, the part every other cluster file uses:
 * finding one, its nodes and providers, recording it in the store, its
 * state, log and error, and the one way a job fails a cluster. */
#include "lifecycle/cluster_priv.h"

#include "lifecycle/model_priv.h"
#include "lifecycle/store.h"
#include "lifecycle/text.h"
#include "providers/provider.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void cluster_time_text(int64_t ns, char *buf, size_t len)
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

int cluster_insert(struct model *m, struct cluster *c)
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

void cluster_free(struct cluster *c)
{
	if (!c)
		return;
	free(c->resolution);
	free(c->error);
	free(c->nodes);
	free(c);
}

/* A node bills from its launch (creating) while it runs: not stopped,
 * preempted, terminated or failed. */
static bool cluster_node_bills(const char *state)
{
	/* removing: until a shrink has ended it. */
	static const char *const billed[] = {"creating", "running", "removing"};

	for (size_t i = 0; i < sizeof(billed) / sizeof(*billed); i++)
		if (strcmp(state, billed[i]) == 0)
			return true;
	return false;
}

bool cluster_node_billing(const struct cluster_node *n)
{
	return cluster_node_bills(n->state);
}

void cluster_node_set_state(struct cluster_node *n, const char *state,
			    int64_t now)
{
	if (cluster_node_bills(n->state) && now > n->since_ns)
		n->billed_ns += now - n->since_ns;
	if (state != n->state) /* the same state: billed on from now */
		snprintf(n->state, sizeof(n->state), "%s", state);
	n->since_ns = now;
}

int64_t cluster_node_billed_ns(const struct cluster_node *n, int64_t now)
{
	return n->billed_ns + (cluster_node_bills(n->state) && now > n->since_ns
				       ? now - n->since_ns
				       : 0);
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

/* "nodes/N/files/": the trailing slash stands for all below. */
void cluster_notify_files(struct model *m, const struct cluster *c,
			  const char *node)
{
	char path[64];

	for (size_t i = 0; i < c->nnodes; i++) {
		if (node && strcmp(node, c->nodes[i].name) != 0)
			continue;
		snprintf(path, sizeof(path), "nodes/%s/files/",
			 c->nodes[i].name);
		cluster_notify(m, c, path);
	}
}

void cluster_log(struct model *m, struct cluster *c, const char *fmt, ...)
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
		.billed_ns = n->billed_ns,
	};

	return store_node_put(m->store, &sn, err, errlen);
}

int cluster_store_all(struct model *m, const struct cluster *c, char *err,
		      size_t errlen)
{
	int rc = store_begin(m->store, err, errlen);

	if (!rc)
		rc = cluster_store(m, c, err, errlen);
	for (size_t i = 0; !rc && i < c->nnodes; i++)
		rc = cluster_store_node(m, &c->nodes[i], err, errlen);
	if (!rc)
		rc = store_commit(m->store, err, errlen);
	if (rc)
		store_rollback(m->store);
	return rc;
}

/* Record why an operation on relpath of cluster c failed. */
int cluster_fail(struct model *m, struct cluster *c, const char *relpath,
		 int rc, const char *why)
{
	char raw[MODEL_ERR_MAX], msg[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	char *copy;

	snprintf(raw, sizeof(raw), "clusters/%s%s%s: %s", c->handle,
		 *relpath ? "/" : "", relpath, why);
	text_escape(raw, msg, sizeof(msg));
	copy = strdup(msg);
	if (copy) {
		free(c->error);
		c->error = copy;
		c->error_ns = model_now();
		/* Shown even when it cannot be stored: on a full disk the
		 * error file is where the user learns why (the store keeps
		 * the one before, until the next write that succeeds). */
		if (cluster_store(m, c, err, sizeof(err)) && m->verbose)
			fprintf(stderr, "cclfs: %s: %s\n", c->handle, err);
		cluster_notify(m, c, "error");
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
int cluster_set_state_note(struct model *m, struct cluster *c,
			   enum cluster_state s, const char *note, char *err,
			   size_t errlen)
{
	enum cluster_state old = c->state;
	int64_t old_ns = c->state_ns;
	char subject[96], line[64];
	int rc;

	snprintf(subject, sizeof(subject), "clusters/%s", c->handle);
	snprintf(line, sizeof(line), "state: %s", cluster_state_names[s]);
	c->state = s;
	c->state_ns = model_now();
	if (s == CLUSTER_RUNNING)
		c->active_ns = c->state_ns; /* idle from now on */
	c->done = 0;
	/* The state and its log lines in one transaction: a crash never
	 * leaves one without the other. */
	rc = store_begin(m->store, err, errlen);
	if (!rc)
		rc = cluster_store(m, c, err, errlen);
	if (!rc)
		rc = store_log(m->store, subject, c->state_ns, line, err,
			       errlen);
	if (!rc && note)
		rc = store_log(m->store, subject, c->state_ns, note, err,
			       errlen);
	if (!rc)
		rc = store_commit(m->store, err, errlen);
	if (rc) {
		/* The store's errno (ENOSPC, EROFS...), EIO for anything
		 * else: the write that asked for the state gets it. */
		store_rollback(m->store);
		c->state = old;
		c->state_ns = old_ns;
		return rc < 0 ? rc : -EIO;
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

int cluster_set_state(struct model *m, struct cluster *c, enum cluster_state s,
		      char *err, size_t errlen)
{
	return cluster_set_state_note(m, c, s, NULL, err, errlen);
}
struct provider *cluster_provider(struct model *m, const struct cluster_node *n)
{
	for (size_t i = 0; i < m->nproviders; i++)
		if (strcmp(m->providers[i]->entry->name, n->provider) == 0)
			return m->providers[i];
	return NULL;
}

void cluster_job_failed(struct model *m, struct cluster *c, const char *what,
			const char *why)
{
	char msg[MODEL_ERR_MAX + 64], err[MODEL_ERR_MAX];

	snprintf(msg, sizeof(msg), "%s failed: %s", what, why);
	if (cluster_set_state(m, c, CLUSTER_FAILED, err, sizeof(err))) {
		/* The store refused even that: the cluster shows failed
		 * until the next mount, which re-runs the job. */
		c->state = CLUSTER_FAILED;
		cluster_notify(m, c, "state");
		cluster_log(m, c, "the failure could not be stored: %s", err);
	}
	cluster_fail(m, c, "", -EIO, msg);
}

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

bool cluster_is_mpi(const struct cluster *c)
{
	return strcmp(c->cluster_type, "PeerWorkersMPI") == 0 ||
	       strcmp(c->cluster_type, "ManagerWorkers") == 0;
}
