/* The files of clusters/HANDLE/ and of its nodes/N/, as one table of rows
 * {name, where, kind, show, mtime, store} (like contract.c's schema for
 * contracts): what each shows, when it last changed, what writing to it
 * does. Outputs of commands are files under the state directory. */
#include "lifecycle/cluster_cost.h"
#include "lifecycle/cluster_hostfile.h"
#include "lifecycle/cluster_jobs.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/cluster_resize.h"
#include "lifecycle/cluster_wait.h"
#include "lifecycle/model_priv.h"
#include "lifecycle/resolution.h"
#include "lifecycle/store.h"
#include "providers/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How a file is written: not at all, a request (state, restart), or a
 * command run inside the write (exec, mpiexec). */
enum cluster_kind {
	CLUSTER_READ_ONLY,
	CLUSTER_REQUEST,
	CLUSTER_TRIGGER, /* a request that touch fires too (restart) */
	CLUSTER_COMMAND,
};

/* The time a file's content last changed: one of the cluster's or node's
 * times; a time still 0 (nothing happened yet) reads as the creation. */
enum cluster_when {
	WHEN_CREATED,
	WHEN_STATE,
	WHEN_ERROR,
	WHEN_LOG,
	WHEN_EXEC,
	WHEN_MPI,
	WHEN_RESTART,
	WHEN_NODE_SINCE,
	WHEN_NODE_EXEC,
};

struct cluster_attr {
	const char *name;
	enum cluster_kind kind;
	enum cluster_when mtime;
	/* The content, rendered from memory (NULL for command output, kept
	 * in the file `output` names under the cluster's directory: "%s" is
	 * the node's name). */
	void (*show)(struct model *m, struct cluster *c, struct cluster_node *n,
		     struct cluster_text *t);
	const char *output;
	/* A request written (CLUSTER_REQUEST, CLUSTER_TRIGGER). */
	int (*store)(struct model *m, struct cluster *c, const char *text,
		     size_t len);
	/* A command written (CLUSTER_COMMAND). */
	int (*run)(struct model *m, const char *handle, const char *node,
		   const char *command, size_t len, int (*cancelled)(void *),
		   void *cancel_ctx, int *out_fd);
	/* What it shows may hold what commands printed (outputs, the log,
	 * errors quoting them): for the mounting user only, as the files
	 * beneath are. */
	bool owner_only;
};

/* --- what the files show --- */

static void cluster_show_state(struct model *m, struct cluster *c,
			       struct cluster_node *n, struct cluster_text *t)
{
	(void)m;
	(void)n;
	size_t down = 0;

	for (size_t i = 0; i < c->nnodes; i++)
		down += strcmp(c->nodes[i].state, "preempted") == 0;
	if (c->state == CLUSTER_RESIZING) {
		/* The nodes that run now of the size it goes to: 4/8 as a
		 * grow from 4 to 8 starts, 8/4 as a shrink does. */
		size_t up = 0, to = (size_t)c->node_count;

		for (size_t i = 0; i < c->nnodes; i++) {
			up += strcmp(c->nodes[i].state, "running") == 0;
			to += c->nodes[i].pn.rank < 0;
		}
		cluster_printf(t, "resizing %zu/%zu\n", up, to);
	} else if (cluster_state_moving(c->state))
		cluster_printf(t, "%s %d/%zu\n", cluster_state_names[c->state],
			       c->done, c->nnodes);
	else if (down && c->state == CLUSTER_RUNNING)
		/* Running, short of the nodes the cloud took back (the
		 * watch relaunches them when config/recover says so). */
		cluster_printf(t, "running (degraded: %zu node%s preempted)\n",
			       down, down == 1 ? "" : "s");
	else
		cluster_printf(t, "%s\n", cluster_state_names[c->state]);
}

static void cluster_show_info(struct model *m, struct cluster *c,
			      struct cluster_node *node, struct cluster_text *t)
{
	struct cluster_cost cc;
	char when[32];

	cluster_cost_at(c, model_now(), &cc);
	(void)m;
	(void)node;
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
	{
		/* The region the deploy went to (see cluster_deploy). */
		const char *r = strstr(c->options, "region=");

		if (r && (r == c->options || r[-1] == '\n'))
			cluster_printf(t, "region: %.*s\n",
				       (int)strcspn(r + 7, "\n"), r + 7);
		/* config/market as deployed (price_per_hour is its price). */
		r = strstr(c->options, "market=");
		if (r && (r == c->options || r[-1] == '\n'))
			cluster_printf(t, "market: %.*s\n",
				       (int)strcspn(r + 7, "\n"), r + 7);
		else
			cluster_printf(t, "market: on-demand\n");
	}
	cluster_printf(t, "node_count: %d\nnode_process_count: %d\n",
		       c->node_count, c->process_count);
	cluster_printf(t, "created: %s\n", when);
	/* Billed: each node from its launch while it runs, at its role's
	 * price (cluster_cost.c). */
	if (isnan(c->price))
		cluster_printf(t, "price_per_hour: unknown\n");
	else
		cluster_printf(t, "price_per_hour: %.15g\n", c->price);
	cluster_printf(t, "hours_billed: %.4f\n", cc.hours);
	if (isnan(cc.cost))
		cluster_printf(t, "cost_so_far: unknown\n");
	else
		cluster_printf(t, "cost_so_far: %.2f\n", cc.cost);
}

static int cluster_render_log_line(void *ctx, int64_t at_ns, const char *line)
{
	char when[32];

	cluster_time_text(at_ns, when, sizeof(when));
	cluster_printf(ctx, "%s %s\n", when, line);
	return 0;
}

static void cluster_show_log(struct model *m, struct cluster *c,
			     struct cluster_node *n, struct cluster_text *t)
{
	char subject[96], err[256];

	(void)n;
	snprintf(subject, sizeof(subject), "clusters/%s", c->handle);
	store_log_lines(m->store, subject, cluster_render_log_line, t, err,
			sizeof(err));
}

static void cluster_show_error(struct model *m, struct cluster *c,
			       struct cluster_node *n, struct cluster_text *t)
{
	(void)m;
	(void)n;
	if (*c->error)
		cluster_printf(t, "%s\n", c->error);
}

static void cluster_show_hostfile(struct model *m, struct cluster *c,
				  struct cluster_node *n,
				  struct cluster_text *t)
{
	(void)m;
	(void)n;
	cluster_hostfile(c, t);
}

/* An exit status as exit_status shows it: nothing before the first
 * command, "lost" for one a restart of cclfs cut off. */
static void cluster_show_status_code(int status, struct cluster_text *t)
{
	if (status == CLUSTER_EXIT_LOST)
		cluster_printf(t, "lost\n");
	else if (status >= 0)
		cluster_printf(t, "%d\n", status);
}

static void cluster_show_mpi_status(struct model *m, struct cluster *c,
				    struct cluster_node *n,
				    struct cluster_text *t)
{
	(void)m;
	(void)n;
	cluster_show_status_code(c->mpi_exit_status, t);
}

static void cluster_show_nothing(struct model *m, struct cluster *c,
				 struct cluster_node *n, struct cluster_text *t)
{
	(void)m;
	(void)c;
	(void)n;
	(void)t;
}

/* How the provider reaches the node (SSH nodes): "connection: ...". */
static void cluster_show_reach(const struct model *m,
			       const struct cluster_node *n,
			       struct cluster_text *t)
{
	struct provider *p = cluster_provider((struct model *)m, n);
	char reach[1024];

	if (!provider_can(p, PROVIDER_HAS_CONNECTIONS) || !*n->pn.instance_id ||
	    strcmp(n->state, "terminated") == 0)
		return;
	if (p->ops->reach(p, &n->pn, reach, sizeof(reach)))
		snprintf(reach, sizeof(reach), "not connected yet");
	cluster_printf(t, "connection: %s\n", reach);
}

static void cluster_show_status(struct model *m, struct cluster *c,
				struct cluster_node *n, struct cluster_text *t)
{
	char when[32];

	(void)c;
	cluster_time_text(n->since_ns, when, sizeof(when));
	cluster_printf(t,
		       "state: %s\naddress: %s\ninstance_id: %s\nsince: %s\n",
		       n->state, n->pn.address, n->pn.instance_id, when);
	cluster_show_reach(m, n, t);
}

static void cluster_show_exit_status(struct model *m, struct cluster *c,
				     struct cluster_node *n,
				     struct cluster_text *t)
{
	(void)m;
	(void)c;
	cluster_show_status_code(n->exit_status, t);
}

static void cluster_show_node_info(struct model *m, struct cluster *c,
				   struct cluster_node *n,
				   struct cluster_text *t)
{
	(void)c;
	cluster_printf(t, "provider: %s\ninstance_type: %s\n", n->provider,
		       n->instance_type);
	for (size_t i = 0; resolution_feature_name(i); i++) {
		const char *f = resolution_feature_name(i);
		char *v = NULL;
		size_t len = 0;

		if (resolution_feature(m->resolution, n->provider,
				       n->instance_type, f, &v, &len) == 0 &&
		    len)
			cluster_printf(t, "%s: %s", f, v);
		free(v);
	}
}

/* --- when they changed --- */

static int64_t cluster_mtime(const struct cluster *c,
			     const struct cluster_node *n,
			     enum cluster_when when)
{
	const int64_t t[] = {
		[WHEN_CREATED] = c->created_ns,
		[WHEN_STATE] = c->state_ns,
		[WHEN_ERROR] = c->error_ns,
		[WHEN_LOG] = c->log_ns,
		[WHEN_EXEC] = c->exec_ns,
		[WHEN_MPI] = c->mpi_ns,
		[WHEN_RESTART] = c->restart_ns,
		[WHEN_NODE_SINCE] = n ? n->since_ns : 0,
		[WHEN_NODE_EXEC] = n ? n->exec_ns : 0,
	};

	return t[when] ? t[when] : c->created_ns;
}

/* --- what writing does --- */

static int cluster_store_state(struct model *m, struct cluster *c,
			       const char *text, size_t len)
{
	enum cluster_op op;

	if (cluster_state_request(text, len, &op)) {
		char why[256], q[48];
		size_t n = len > 40 ? 40 : len;

		memcpy(q, text, n);
		q[n] = '\0';
		q[strcspn(q, "\n")] = '\0';
		snprintf(why, sizeof(why),
			 "\"%s\" is not a state to ask for; write "
			 "interrupted, resumed or terminated",
			 q);
		return cluster_fail(m, c, "state", -EINVAL, why);
	}
	return cluster_request_state(m, c, op);
}

static void cluster_show_node_count(struct model *m, struct cluster *c,
				    struct cluster_node *n,
				    struct cluster_text *t)
{
	(void)m;
	(void)n;
	cluster_printf(t, "%d\n", c->node_count);
}

static int cluster_store_restart(struct model *m, struct cluster *c,
				 const char *text, size_t len)
{
	(void)text;
	(void)len;
	return cluster_restart(m, c);
}

static int cluster_run_mpiexec(struct model *m, const char *handle,
			       const char *node, const char *command,
			       size_t len, int (*cancelled)(void *),
			       void *cancel_ctx, int *out_fd)
{
	(void)node;
	return model_mpiexec(m, handle, command, len, cancelled, cancel_ctx,
			     out_fd);
}

/* --- the tables --- */

static const struct cluster_attr cluster_attrs[] = {
	{"state", CLUSTER_REQUEST, WHEN_STATE, cluster_show_state, NULL,
	 cluster_store_state, NULL, false},
	{"info", CLUSTER_READ_ONLY, WHEN_CREATED, cluster_show_info, NULL, NULL,
	 NULL, false},
	/* The current size; a size written grows or shrinks the cluster. */
	{"node_count", CLUSTER_REQUEST, WHEN_STATE, cluster_show_node_count,
	 NULL, cluster_resize_request, NULL, false},
	{"exec", CLUSTER_COMMAND, WHEN_EXEC, NULL, "exec.out", NULL, model_exec,
	 true},
	{"hostfile", CLUSTER_READ_ONLY, WHEN_CREATED, cluster_show_hostfile,
	 NULL, NULL, NULL, false},
	{"mpiexec", CLUSTER_COMMAND, WHEN_MPI, NULL, "mpi.stdout", NULL,
	 cluster_run_mpiexec, true},
	{"mpi_stdout", CLUSTER_READ_ONLY, WHEN_MPI, NULL, "mpi.stdout", NULL,
	 NULL, true},
	{"mpi_stderr", CLUSTER_READ_ONLY, WHEN_MPI, NULL, "mpi.stderr", NULL,
	 NULL, true},
	{"mpi_exit_status", CLUSTER_READ_ONLY, WHEN_MPI,
	 cluster_show_mpi_status, NULL, NULL, NULL, false},
	{"restart", CLUSTER_TRIGGER, WHEN_RESTART, cluster_show_nothing, NULL,
	 cluster_store_restart, NULL, false},
	/* Written like a command (the write blocks), it shows nothing. */
	{"wait", CLUSTER_COMMAND, WHEN_CREATED, cluster_show_nothing, NULL,
	 NULL, cluster_wait, false},
	{"log", CLUSTER_READ_ONLY, WHEN_LOG, cluster_show_log, NULL, NULL, NULL,
	 true},
	{"error", CLUSTER_READ_ONLY, WHEN_ERROR, cluster_show_error, NULL, NULL,
	 NULL, true},
};

static const struct cluster_attr cluster_node_attrs[] = {
	{"status", CLUSTER_READ_ONLY, WHEN_NODE_SINCE, cluster_show_status,
	 NULL, NULL, NULL, false},
	{"exec", CLUSTER_COMMAND, WHEN_NODE_EXEC, NULL, "%s.stdout", NULL,
	 model_exec, true},
	{"stdout", CLUSTER_READ_ONLY, WHEN_NODE_EXEC, NULL, "%s.stdout", NULL,
	 NULL, true},
	{"stderr", CLUSTER_READ_ONLY, WHEN_NODE_EXEC, NULL, "%s.stderr", NULL,
	 NULL, true},
	{"exit_status", CLUSTER_READ_ONLY, WHEN_NODE_EXEC,
	 cluster_show_exit_status, NULL, NULL, NULL, false},
	{"info", CLUSTER_READ_ONLY, WHEN_CREATED, cluster_show_node_info, NULL,
	 NULL, NULL, false},
};

#define CLUSTER_ATTRS (sizeof(cluster_attrs) / sizeof(*cluster_attrs))
#define CLUSTER_NODE_ATTRS                                                     \
	(sizeof(cluster_node_attrs) / sizeof(*cluster_node_attrs))

static const struct cluster_attr *cluster_attr_find(bool node, const char *file)
{
	const struct cluster_attr *v =
		node ? cluster_node_attrs : cluster_attrs;
	size_t n = node ? CLUSTER_NODE_ATTRS : CLUSTER_ATTRS;

	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, file) == 0)
			return &v[i];
	return NULL;
}

const char *model_cluster_file_name(size_t i)
{
	return i < CLUSTER_ATTRS ? cluster_attrs[i].name : NULL;
}

const char *model_node_file_name(size_t i)
{
	return i < CLUSTER_NODE_ATTRS ? cluster_node_attrs[i].name : NULL;
}

int model_cluster_file_writable(const char *file)
{
	const struct cluster_attr *a = cluster_attr_find(false, file);

	return a && a->kind != CLUSTER_READ_ONLY;
}

int model_node_file_writable(const char *file)
{
	const struct cluster_attr *a = cluster_attr_find(true, file);

	return a && a->kind != CLUSTER_READ_ONLY;
}

unsigned model_cluster_file_mode(const char *node, const char *file)
{
	const struct cluster_attr *a = cluster_attr_find(node != NULL, file);
	unsigned mode;

	if (!a)
		return 0;
	mode = a->kind == CLUSTER_READ_ONLY ? 0444 : 0644;
	return a->owner_only ? mode & 0700 : mode;
}

int model_cluster_file_is_command(const char *node, const char *file)
{
	const struct cluster_attr *a = cluster_attr_find(node != NULL, file);

	return a && a->kind == CLUSTER_COMMAND;
}

/* The file that holds an output (model locked). */
static void cluster_output_path(const struct model *m, const struct cluster *c,
				const struct cluster_attr *a,
				const struct cluster_node *n, char *buf,
				size_t len)
{
	char dir[PATH_MAX];
	/* "%s" in a row's output name stands for the node. */
	const char *pct = strstr(a->output, "%s");

	cluster_dir(m, c, dir, sizeof(dir));
	if (pct && n)
		snprintf(buf, len, "%s/%.*s%s%s", dir, (int)(pct - a->output),
			 a->output, n->name, pct + 2);
	else
		snprintf(buf, len, "%s/%s", dir, a->output);
}

/* Find the cluster, the node and the file's row (model locked). */
static int cluster_lookup(struct model *m, const char *handle, const char *node,
			  const char *file, struct cluster **c,
			  struct cluster_node **n,
			  const struct cluster_attr **a)
{
	*c = cluster_find(m, handle);
	*n = NULL;
	*a = cluster_attr_find(node != NULL, file);
	if (!*c || !*a)
		return -ENOENT;
	if (node) {
		*n = cluster_node_find(*c, node);
		if (!*n)
			return -ENOENT;
	}
	return 0;
}

int model_cluster_file_stat(struct model *m, const char *handle,
			    const char *node, const char *file,
			    struct model_attr *attr)
{
	struct cluster_text t = {0};
	const struct cluster_attr *a;
	struct cluster_node *n;
	struct cluster *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = cluster_lookup(m, handle, node, file, &c, &n, &a);
	if (rc == 0) {
		attr->mtime_ns = cluster_mtime(c, n, a->mtime);
		if (a->output) {
			char path[PATH_MAX + 96];
			struct stat st;

			cluster_output_path(m, c, a, n, path, sizeof(path));
			attr->size =
				stat(path, &st) == 0 ? (size_t)st.st_size : 0;
		} else {
			a->show(m, c, n, &t);
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
	const struct cluster_attr *a;
	struct cluster_node *n;
	struct cluster *c;
	int rc;

	*buf = NULL;
	*len = 0;
	*fd = -1;
	pthread_mutex_lock(&m->lock);
	rc = cluster_lookup(m, handle, node, file, &c, &n, &a);
	if (rc == 0 && a->output) {
		char path[PATH_MAX + 96];

		cluster_output_path(m, c, a, n, path, sizeof(path));
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0 && errno != ENOENT)
			rc = -errno;
	} else if (rc == 0) {
		a->show(m, c, n, &t);
		*buf = t.buf ? t.buf : strdup("");
		*len = t.len;
		t.buf = NULL;
		if (!*buf)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&m->lock);
	free(t.buf);
	return rc;
}

int model_cluster_file_write(struct model *m, const char *handle,
			     const char *file, const char *text, size_t len)
{
	const struct cluster_attr *a = cluster_attr_find(false, file);
	struct cluster *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c)
		rc = -ENOENT;
	else if (!a || !a->store)
		rc = cluster_fail(m, c, file, -EACCES,
				  "this file is read-only; cclfs writes it");
	else
		rc = a->store(m, c, text, len);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_file_touch(struct model *m, const char *handle,
			     const char *file)
{
	const struct cluster_attr *a = cluster_attr_find(false, file);
	struct cluster *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c)
		rc = -ENOENT;
	else if (a && a->kind == CLUSTER_TRIGGER)
		rc = a->store(m, c, "", 0);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_cluster_command(struct model *m, const char *handle, const char *node,
			  const char *file, const char *command, size_t len,
			  int (*cancelled)(void *), void *cancel_ctx,
			  int *out_fd)
{
	const struct cluster_attr *a = cluster_attr_find(node != NULL, file);

	if (out_fd)
		*out_fd = -1;
	if (!a || !a->run)
		return -EACCES;
	return a->run(m, handle, node, command, len, cancelled, cancel_ctx,
		      out_fd);
}
