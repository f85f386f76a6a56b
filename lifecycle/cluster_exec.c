/* exec of clusters: a command on one node or on every node at once (a
 * thread each, polling for interruption), its environment, the outputs kept
 * per node and for the cluster, and the results recorded in the store. */
#include "lifecycle/cluster_hostfile.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_uint cluster_exec_seq;

/* What the node threads of one cluster-wide exec share: how many have
 * finished, and whether the caller was interrupted. */
struct cluster_exec_all {
	pthread_mutex_t lock;
	pthread_cond_t done;
	size_t finished;
	atomic_int stop;
};

struct cluster_exec_one {
	struct cluster_exec_all *all; /* NULL when run on the caller's thread */
	struct provider *p;
	struct provider_node pn;
	char name[16];
	char out[PATH_MAX + 96], errp[PATH_MAX + 96];
	struct cluster_env env;
	const char *command;
	int (*cancelled)(void *);
	void *cancel_ctx;
	int rc;
	int status;
	char err[MODEL_ERR_MAX];
	pthread_t thread;
	bool joinable;
};

/* The node threads' cancellation: fuse_interrupted() only means something
 * on the thread of the request, which polls it and sets stop. */
static int cluster_exec_stopped(void *ctx)
{
	return atomic_load(&((struct cluster_exec_all *)ctx)->stop);
}

static void *cluster_exec_thread(void *arg)
{
	struct cluster_exec_one *x = arg;
	struct provider_run run = {
		.command = x->command,
		.stdout_path = x->out,
		.stderr_path = x->errp,
		.env = x->env.envp,
		.cancelled = x->cancelled,
		.cancel_ctx = x->cancel_ctx,
		.exit_status = -1,
	};

	if (x->all) {
		run.cancelled = cluster_exec_stopped;
		run.cancel_ctx = x->all;
	}
	x->rc = x->p ? x->p->ops->run(x->p, &x->pn, &run, x->err,
				      sizeof(x->err))
		     : -ENOSYS;
	x->status = run.exit_status;
	if (x->all) {
		pthread_mutex_lock(&x->all->lock);
		x->all->finished++;
		pthread_cond_signal(&x->all->done);
		pthread_mutex_unlock(&x->all->lock);
	}
	return NULL;
}

/* Run every node's command at once; wait, polling for interruption. */
static void cluster_exec_all_nodes(struct cluster_exec_one *xs, size_t n,
				   int (*cancelled)(void *), void *cancel_ctx)
{
	struct cluster_exec_all all = {.finished = 0};

	pthread_mutex_init(&all.lock, NULL);
	pthread_cond_init(&all.done, NULL);
	atomic_init(&all.stop, 0);
	for (size_t i = 0; i < n; i++) {
		xs[i].all = &all;
		xs[i].joinable =
			pthread_create(&xs[i].thread, NULL, cluster_exec_thread,
				       &xs[i]) == 0;
		if (!xs[i].joinable)
			cluster_exec_thread(&xs[i]);
	}
	pthread_mutex_lock(&all.lock);
	while (all.finished < n) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 20L * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&all.done, &all.lock, &until);
		if (cancelled && cancelled(cancel_ctx))
			atomic_store(&all.stop, 1);
	}
	pthread_mutex_unlock(&all.lock);
	for (size_t i = 0; i < n; i++)
		if (xs[i].joinable)
			pthread_join(xs[i].thread, NULL);
	pthread_cond_destroy(&all.done);
	pthread_mutex_destroy(&all.lock);
}

/*
 * A node's output files keep their inodes from exec to exec: the file an
 * exec replaces becomes the spare the next exec writes into (truncated),
 * instead of being deleted while a new one is made. On ext4, making a file
 * where many were just deleted costs far more than the command (measured:
 * most of the daemon's time in a 64-node exec).
 */
static void cluster_spare_path(const char *dir, const char *node,
			       const char *what, char *buf, size_t len)
{
	snprintf(buf, len, "%s/.%s.spare.%s", dir, node, what);
}

/* Take the spare as this exec's output file (none: one is made). */
static void cluster_spare_take(const char *dir, const char *node,
			       const char *what, const char *tmp)
{
	char spare[PATH_MAX + 96];

	cluster_spare_path(dir, node, what, spare, sizeof(spare));
	rename(spare, tmp);
}

/* Put the output in place; what it replaces becomes the spare, unless a
 * reader was given it (mode 0400). */
static void cluster_spare_put(const char *dir, const char *node,
			      const char *what, const char *tmp,
			      const char *final)
{
	char spare[PATH_MAX + 96];
	struct stat st;

	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) != 0) {
		rename(tmp, final);
		return;
	}
	cluster_spare_path(dir, node, what, spare, sizeof(spare));
	if (stat(tmp, &st) == 0 && (st.st_mode & 0200))
		rename(tmp, spare);
	else
		unlink(tmp);
}

/* --- the command's environment --- */

int cluster_env_make(struct model *m, const struct cluster *c,
		     const struct cluster_node *n, const char *dir,
		     struct cluster_env *e)
{
	const char *v = m->contract_config(m, c->contract, "environment");
	size_t lines = 1, k = 0;

	e->config = strdup(v);
	for (const char *s = v; *s; s++)
		lines += *s == '\n';
	e->envp = calloc(lines + 5, sizeof(*e->envp));
	if (!e->config || !e->envp) {
		cluster_env_free(e);
		return -ENOMEM;
	}
	for (char *line = e->config, *next; line; line = next) {
		char *eq;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		line += strspn(line, " \t");
		eq = strchr(line, '=');
		/* Checked when written; cclfs.conf's [defaults] may hold
		 * anything, and what is not NAME=VALUE is left out. */
		if (eq && contract_env_name_valid(line, (size_t)(eq - line)) &&
		    strncmp(line, "CCLFS_", 6) != 0)
			e->envp[k++] = line;
	}
	snprintf(e->cclfs[0], sizeof(e->cclfs[0]), "CCLFS_CLUSTER=%s",
		 c->handle);
	snprintf(e->cclfs[1], sizeof(e->cclfs[1]), "CCLFS_NODE=%s",
		 n->pn.rank < 0 ? "manager" : n->name);
	snprintf(e->cclfs[2], sizeof(e->cclfs[2]), "CCLFS_NODE_COUNT=%d",
		 c->node_count);
	snprintf(e->cclfs[3], sizeof(e->cclfs[3]), "CCLFS_HOSTFILE=%s/hostfile",
		 dir);
	for (int i = 0; i < 4; i++)
		e->envp[k++] = e->cclfs[i];
	e->envp[k] = NULL;
	return 0;
}

void cluster_env_free(struct cluster_env *e)
{
	free(e->config);
	free(e->envp);
	e->config = NULL;
	e->envp = NULL;
}

/* Copy the lines of file `from` into out, each prefixed "NAME: ". */
static void cluster_prefix_lines(const char *from, const char *name, FILE *out)
{
	FILE *in = fopen(from, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!in)
		return;
	while ((n = getline(&line, &cap, in)) > 0) {
		fprintf(out, "%s: ", name);
		fwrite(line, 1, (size_t)n, out);
		if (line[n - 1] != '\n')
			fputc('\n', out);
	}
	free(line);
	fclose(in);
}

static void cluster_quote_command(const char *cmd, size_t len, char *out,
				  size_t outlen)
{
	size_t n = len > 60 ? 60 : len;

	while (n && (cmd[n - 1] == '\n' || cmd[n - 1] == ' '))
		n--;
	snprintf(out, outlen, "\"%.*s%s\"", (int)n, cmd, len > 60 ? "..." : "");
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ';';
}

int model_exec(struct model *m, const char *handle, const char *node,
	       const char *command, size_t len, int (*cancelled)(void *),
	       void *cancel_ctx, int *out_fd)
{
	char dir[PATH_MAX], why[2 * MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	char relpath[64], q[96], *cmd;
	struct cluster_exec_one *xs;
	struct cluster *c;
	unsigned seq = atomic_fetch_add(&cluster_exec_seq, 1);
	size_t n = 0, failed = 0;
	int rc = 0, interrupted = 0;

	if (out_fd)
		*out_fd = -1;
	cmd = strndup(command, len);
	if (!cmd)
		return -ENOMEM;
	snprintf(relpath, sizeof(relpath), "%s%s%sexec", node ? "nodes/" : "",
		 node ? node : "", node ? "/" : "");
	cluster_quote_command(command, len, q, sizeof(q));
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c || (node && !cluster_node_find(c, node))) {
		pthread_mutex_unlock(&m->lock);
		free(cmd);
		return -ENOENT;
	}
	if (c->state != CLUSTER_RUNNING) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; commands run only on a running "
			 "cluster",
			 cluster_state_names[c->state]);
		rc = cluster_fail(m, c, relpath, -EBUSY, why);
		pthread_mutex_unlock(&m->lock);
		free(cmd);
		return rc;
	}
	xs = calloc(c->nnodes, sizeof(*xs));
	cluster_dir(m, c, dir, sizeof(dir));
	if (!xs || !*dir || cluster_mkdirs(dir)) {
		pthread_mutex_unlock(&m->lock);
		free(xs);
		free(cmd);
		return -EIO;
	}
	for (size_t i = 0; i < c->nnodes; i++) {
		struct cluster_node *nd = &c->nodes[i];
		struct cluster_exec_one *x = &xs[n];

		if (node && strcmp(nd->name, node) != 0)
			continue;
		x->p = cluster_provider(m, nd);
		x->pn = nd->pn;
		snprintf(x->name, sizeof(x->name), "%s", nd->name);
		snprintf(x->out, sizeof(x->out), "%s/.%s.%u.stdout", dir,
			 nd->name, seq);
		snprintf(x->errp, sizeof(x->errp), "%s/.%s.%u.stderr", dir,
			 nd->name, seq);
		cluster_spare_take(dir, nd->name, "stdout", x->out);
		cluster_spare_take(dir, nd->name, "stderr", x->errp);
		if (cluster_env_make(m, c, nd, dir, &x->env)) {
			for (size_t k = 0; k < n; k++)
				cluster_env_free(&xs[k].env);
			pthread_mutex_unlock(&m->lock);
			free(xs);
			free(cmd);
			return -ENOMEM;
		}
		x->command = cmd;
		x->cancelled = cancelled;
		x->cancel_ctx = cancel_ctx;
		n++;
	}
	/* The hostfile commands see (CCLFS_HOSTFILE). */
	cluster_write_hostfile(m, c, dir, seq);
	pthread_mutex_unlock(&m->lock);

	if (n == 1)
		cluster_exec_thread(&xs[0]); /* on the request's own thread */
	else
		cluster_exec_all_nodes(xs, n, cancelled, cancel_ctx);

	/* The caller's own output, then the node's last output. */
	if (!node) {
		char all[PATH_MAX + 64], final[PATH_MAX + 64];
		FILE *f;

		snprintf(all, sizeof(all), "%s/.exec.%u.out", dir, seq);
		snprintf(final, sizeof(final), "%s/exec.out", dir);
		f = fopen(all, "we");
		if (f) {
			for (size_t i = 0; i < n; i++)
				cluster_prefix_lines(xs[i].out, xs[i].name, f);
			fclose(f);
			if (out_fd)
				*out_fd = open(all, O_RDONLY | O_CLOEXEC);
			rename(all, final);
		}
	} else if (out_fd) {
		*out_fd = open(xs[0].out, O_RDONLY | O_CLOEXEC);
		/* This output is the caller's to read: never recycled. */
		if (*out_fd >= 0)
			chmod(xs[0].out, 0400);
	}
	for (size_t i = 0; i < n; i++) {
		char final[PATH_MAX + 96];

		snprintf(final, sizeof(final), "%s/%s.stdout", dir, xs[i].name);
		cluster_spare_put(dir, xs[i].name, "stdout", xs[i].out, final);
		snprintf(final, sizeof(final), "%s/%s.stderr", dir, xs[i].name);
		cluster_spare_put(dir, xs[i].name, "stderr", xs[i].errp, final);
	}

	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	/* Every node's result in one transaction: one sync, not one each. */
	if (store_begin(m->store, err, sizeof(err)))
		err[0] = '\0';
	for (size_t i = 0; c && i < n; i++) {
		struct cluster_node *nd = cluster_node_find(c, xs[i].name);

		if (xs[i].rc == -EINTR)
			interrupted = 1;
		if (!nd)
			continue;
		nd->exit_status = xs[i].rc ? -1 : xs[i].status;
		nd->exec_ns = model_now();
		cluster_store_node(m, nd, err, sizeof(err));
		{
			char path[128];

			snprintf(path, sizeof(path), "nodes/%s/stdout",
				 nd->name);
			cluster_notify(m, c, path);
			snprintf(path, sizeof(path), "nodes/%s/stderr",
				 nd->name);
			cluster_notify(m, c, path);
			snprintf(path, sizeof(path), "nodes/%s/exit_status",
				 nd->name);
			cluster_notify(m, c, path);
			snprintf(path, sizeof(path), "nodes/%s/exec", nd->name);
			cluster_notify(m, c, path);
		}
		if (xs[i].rc || xs[i].status != 0)
			failed++;
	}
	if (store_commit(m->store, err, sizeof(err)))
		store_rollback(m->store);
	if (c && !node) {
		c->exec_ns = model_now();
		cluster_notify(m, c, "exec");
	}
	if (c && interrupted) {
		rc = cluster_fail(m, c, relpath, -EINTR,
				  "the command was interrupted");
	} else if (c && failed) {
		size_t o;

		if (node && xs[0].rc)
			snprintf(why, sizeof(why), "%s could not be run: %s", q,
				 xs[0].err);
		else if (node)
			snprintf(why, sizeof(why), "%s exited with status %d",
				 q, xs[0].status);
		else {
			o = (size_t)snprintf(
				why, sizeof(why),
				"%s failed on %zu of %zu nodes:", q, failed, n);
			for (size_t i = 0; i < n && o < sizeof(why); i++)
				if (xs[i].rc || xs[i].status)
					o += xs[i].rc ? (size_t)snprintf(
								why + o,
								sizeof(why) - o,
								" %s (%s)",
								xs[i].name,
								xs[i].err)
						      : (size_t)snprintf(
								why + o,
								sizeof(why) - o,
								" %s (status "
								"%d)",
								xs[i].name,
								xs[i].status);
		}
		/* A command stopped by its time limit says so; a node that
		 * failed or could not be reached is an I/O error. */
		rc = cluster_fail(m, c, relpath,
				  node && xs[0].rc == -ETIMEDOUT ? -ETIMEDOUT
								 : -EIO,
				  why);
	} else if (c) {
		cluster_clear_error(m, c);
	}
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++)
		cluster_env_free(&xs[i].env);
	free(xs);
	free(cmd);
	return rc;
}
