/* exec of clusters: a command on one node or on every node at once (a
 * thread each, polling for interruption), its environment, the outputs kept
 * per node and for the cluster, and the results recorded in the store; a
 * record of each command under way, and at mount the commands a crash of
 * the daemon cut off, recorded as lost. */
#include "lifecycle/cluster_hostfile.h"
#include "lifecycle/cluster_priv.h"
#include "lifecycle/store.h"

#include <dirent.h>
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
	const char *tag;
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
		.tag = x->tag,
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

		model_timespec(model_now() + 20L * 1000000, &until);
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

int cluster_output_make(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Take the spare as this exec's output file, emptied (none: one is made).
 * A spare that still has another name (a put cut short by a crash) is not
 * taken: emptying it would empty that file too. */
static int cluster_spare_take(const char *dir, const char *node,
			      const char *what, const char *tmp)
{
	char spare[PATH_MAX + 96];
	struct stat st;

	cluster_spare_path(dir, node, what, spare, sizeof(spare));
	if (rename(spare, tmp) == 0 && stat(tmp, &st) == 0 && st.st_nlink > 1)
		unlink(tmp);
	return cluster_output_make(tmp);
}

/* Put the output in place; what it replaces becomes the spare, unless a
 * reader was given it (mode 0400). The old file is linked as the spare
 * before the new one is renamed over it: readers never miss the file, and
 * a crash between the two leaves the new output under its temporary name,
 * which the next mount puts in place (cluster_exec_recover). */
static void cluster_spare_put(const char *dir, const char *node,
			      const char *what, const char *tmp,
			      const char *final)
{
	char spare[PATH_MAX + 96];
	struct stat st;

	cluster_spare_path(dir, node, what, spare, sizeof(spare));
	if (stat(final, &st) == 0 && (st.st_mode & 0200))
		link(final, spare); /* EEXIST: the old output just goes */
	if (rename(tmp, final) != 0)
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

/* --- the record of a command under way --- */

void cluster_running_start(struct cluster_running *r, const struct cluster *c,
			   const char *kind, unsigned seq)
{
	r->kind = kind;
	r->seq = seq;
	r->start_ns = model_now();
	/* Unique across restarts: the handle, the start and the sequence. */
	snprintf(r->tag, sizeof(r->tag), "%s.%c%lld.%u", c->handle, kind[0],
		 (long long)r->start_ns, seq);
}

static void cluster_running_path(const char *dir, const char *kind,
				 unsigned seq, char *buf, size_t len)
{
	snprintf(buf, len, "%s/.%s.%u.running", dir, kind, seq);
}

int cluster_running_write(const struct cluster_running *r, const char *dir,
			  const char *relpath, const char *nodes,
			  const char *quote)
{
	char path[PATH_MAX + 64];
	FILE *f;
	int rc = 0;

	cluster_running_path(dir, r->kind, r->seq, path, sizeof(path));
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "%lld\n%s\n%s\n%s\n%s\n", (long long)r->start_ns, r->tag,
		relpath, nodes, quote);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	if (rc)
		unlink(path);
	return rc;
}

void cluster_running_end(const struct cluster_running *r, const char *dir)
{
	char path[PATH_MAX + 64];

	cluster_running_path(dir, r->kind, r->seq, path, sizeof(path));
	unlink(path);
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

/* Where an exec's node outputs and the caller's output go. */
static void cluster_exec_collect(const char *tmp, const char *final,
				 const char *const *names,
				 const char *const *paths, size_t n,
				 int *out_fd)
{
	FILE *f = fopen(tmp, "we");

	if (!f)
		return;
	for (size_t i = 0; i < n; i++)
		cluster_prefix_lines(paths[i], names[i], f);
	fclose(f);
	if (out_fd)
		*out_fd = open(tmp, O_RDONLY | O_CLOEXEC);
	if (rename(tmp, final) != 0)
		unlink(tmp);
}

/* A command that no shell can run as written: one sentence, or NULL. */
static const char *cluster_command_invalid(const char *command, size_t len,
					   char *why, size_t whylen)
{
	const char *nul = memchr(command, '\0', len);

	if (!nul)
		return NULL;
	snprintf(why, whylen,
		 "the command contains a NUL byte (byte %zu of %zu), which no "
		 "shell command can hold; nothing was run",
		 (size_t)(nul - command) + 1, len);
	return why;
}

/* The cluster's nodes an exec runs on, and their setup (model locked). */
static int cluster_exec_setup(struct model *m, struct cluster *c,
			      const char *node, const char *dir, unsigned seq,
			      const char *cmd, const struct cluster_running *r,
			      struct cluster_exec_one *xs, size_t *n,
			      char *names, size_t nameslen)
{
	size_t o = 0;

	for (size_t i = 0; i < c->nnodes; i++) {
		struct cluster_node *nd = &c->nodes[i];
		struct cluster_exec_one *x = &xs[*n];

		if (node && strcmp(nd->name, node) != 0)
			continue;
		x->p = cluster_provider(m, nd);
		x->pn = nd->pn;
		snprintf(x->name, sizeof(x->name), "%s", nd->name);
		snprintf(x->out, sizeof(x->out), "%s/.%s.%u.stdout", dir,
			 nd->name, seq);
		snprintf(x->errp, sizeof(x->errp), "%s/.%s.%u.stderr", dir,
			 nd->name, seq);
		if (cluster_env_make(m, c, nd, dir, &x->env))
			return -ENOMEM;
		x->command = cmd;
		x->tag = r->tag;
		(*n)++;
		o += (size_t)snprintf(names + o,
				      nameslen > o ? nameslen - o : 0, "%s%s",
				      o ? " " : "", nd->name);
	}
	return o < nameslen ? 0 : -ENOMEM;
}

/* Before the command starts: each node's output files made from the
 * spares, then the record that it runs. 0, or -errno with why. */
static int cluster_exec_prepare(struct cluster_exec_one *xs, size_t n,
				const char *dir,
				const struct cluster_running *r,
				const char *relpath, const char *names,
				const char *q, char *why, size_t whylen)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		rc = cluster_spare_take(dir, xs[i].name, "stdout", xs[i].out);
		if (!rc)
			rc = cluster_spare_take(dir, xs[i].name, "stderr",
						xs[i].errp);
	}
	if (!rc)
		rc = cluster_running_write(r, dir, relpath, names, q);
	if (rc) {
		for (size_t i = 0; i < n; i++) {
			unlink(xs[i].out);
			unlink(xs[i].errp);
		}
		snprintf(why, whylen,
			 "the command's output files could not be made in "
			 "%.1000s: %s; nothing was run",
			 dir, strerrordesc_np(-rc));
	}
	return rc;
}

int model_exec(struct model *m, const char *handle, const char *node,
	       const char *command, size_t len, int (*cancelled)(void *),
	       void *cancel_ctx, int *out_fd)
{
	char dir[PATH_MAX], why[2 * MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	char relpath[64], q[96], *cmd, *names;
	struct cluster_exec_one *xs;
	struct cluster_running r;
	struct cluster *c;
	unsigned seq = atomic_fetch_add(&cluster_exec_seq, 1);
	size_t n = 0, failed = 0, nameslen, nxs;
	int rc = 0, interrupted = 0;

	if (out_fd)
		*out_fd = -1;
	snprintf(relpath, sizeof(relpath), "%s%s%sexec", node ? "nodes/" : "",
		 node ? node : "", node ? "/" : "");
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (!c || (node && !cluster_node_find(c, node))) {
		pthread_mutex_unlock(&m->lock);
		return -ENOENT;
	}
	if (cluster_command_invalid(command, len, why, sizeof(why))) {
		rc = cluster_fail(m, c, relpath, -EINVAL, why);
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	cluster_quote_command(command, len, q, sizeof(q));
	if (c->state != CLUSTER_RUNNING) {
		snprintf(why, sizeof(why),
			 "the cluster is %s; commands run only on a running "
			 "cluster",
			 cluster_state_names[c->state]);
		rc = cluster_fail(m, c, relpath, -EBUSY, why);
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	cmd = strndup(command, len);
	nameslen = c->nnodes * 17 + 1;
	names = malloc(nameslen);
	nxs = c->nnodes;
	xs = calloc(nxs, sizeof(*xs));
	cluster_dir(m, c, dir, sizeof(dir));
	cluster_running_start(&r, c, "exec", seq);
	if (!cmd || !names || !xs || !*dir || cluster_mkdirs(dir) ||
	    cluster_exec_setup(m, c, node, dir, seq, cmd, &r, xs, &n, names,
			       nameslen)) {
		rc = cluster_fail(m, c, relpath, -EIO,
				  "the command could not be prepared (out of "
				  "memory, or no room for its outputs in the "
				  "state directory); nothing was run");
		goto refused;
	}
	/* The hostfile commands see (CCLFS_HOSTFILE). */
	cluster_write_hostfile(m, c, dir, seq);
	rc = cluster_exec_prepare(xs, n, dir, &r, relpath, names, q, why,
				  sizeof(why));
	if (rc) {
		rc = cluster_fail(m, c, relpath, rc, why);
		goto refused;
	}
	/* Until its results are stored, the cluster is not removed. */
	c->commands++;
	c->active_ns = model_now();
	pthread_mutex_unlock(&m->lock);

	for (size_t i = 0; i < n; i++) {
		xs[i].cancelled = cancelled;
		xs[i].cancel_ctx = cancel_ctx;
	}
	if (n == 1)
		cluster_exec_thread(&xs[0]); /* on the request's own thread */
	else
		cluster_exec_all_nodes(xs, n, cancelled, cancel_ctx);

	/* The caller's own output, then the node's last output. */
	if (!node) {
		char all[PATH_MAX + 64], final[PATH_MAX + 64];
		const char **nm = calloc(n ? n : 1, sizeof(*nm));
		const char **paths = calloc(n ? n : 1, sizeof(*paths));

		snprintf(all, sizeof(all), "%s/.exec.%u.out", dir, seq);
		snprintf(final, sizeof(final), "%s/exec.out", dir);
		for (size_t i = 0; nm && paths && i < n; i++) {
			nm[i] = xs[i].name;
			paths[i] = xs[i].out;
		}
		if (nm && paths)
			cluster_exec_collect(all, final, nm, paths, n, out_fd);
		free(nm);
		free(paths);
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
			cluster_notify_files(m, c, nd->name);
		}
		if (xs[i].rc || xs[i].status != 0)
			failed++;
	}
	/* Stored: the record of the command goes (else the next mount
	 * finds it and says the results were lost). */
	if (store_commit(m->store, err, sizeof(err)))
		store_rollback(m->store);
	else
		cluster_running_end(&r, dir);
	if (c) {
		c->commands--;
		c->active_ns = model_now();
	}
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
	goto out;

refused:
	pthread_mutex_unlock(&m->lock);
out:
	for (size_t i = 0; xs && i < nxs; i++)
		cluster_env_free(&xs[i].env);
	free(xs);
	free(names);
	free(cmd);
	return rc;
}

/* --- at mount: commands cut off by a crash --- */

/* What a record of a command under way says (cluster_running_write). */
struct cluster_mark {
	char *text; /* the file, split into the fields below */
	int64_t start_ns;
	const char *tag, *relpath, *nodes, *quote;
};

static int cluster_mark_read(const char *path, struct cluster_mark *k)
{
	char *field[5], *s;
	size_t cap = 0;
	FILE *f = fopen(path, "re");
	ssize_t len;

	memset(k, 0, sizeof(*k));
	if (!f)
		return -1;
	len = getdelim(&k->text, &cap, '\0', f);
	fclose(f);
	if (len <= 0)
		return -1;
	s = k->text;
	for (int i = 0; i < 5; i++) {
		field[i] = s;
		s = s ? strchr(s, '\n') : NULL;
		if (s && i < 4)
			*s++ = '\0';
		else if (s)
			*s = '\0';
	}
	if (!field[4])
		return -1;
	k->start_ns = strtoll(field[0], NULL, 10);
	k->tag = field[1];
	k->relpath = field[2];
	k->nodes = field[3];
	k->quote = field[4];
	return 0;
}

/* End what the lost command started on node nd, where its provider can. */
static void cluster_end_lost(struct model *m, struct cluster *c,
			     const struct cluster_node *nd, const char *tag)
{
	struct provider *p = cluster_provider(m, nd);
	char err[PROVIDER_ERR_MAX];

	if (!p || !p->ops->end_lost || !*tag)
		return;
	if (p->ops->end_lost(p, &nd->pn, tag, err, sizeof(err)))
		cluster_log(m, c,
			    "the processes of the command cut off on node %s "
			    "could not all be ended: %s",
			    nd->name, err);
}

/* The output a command cut off was writing (tmp) put in place; whether
 * there was one. */
static bool cluster_output_recover(const char *tmp, const char *final)
{
	if (access(tmp, F_OK) != 0)
		return false;
	if (rename(tmp, final) != 0)
		unlink(tmp);
	return true;
}

static void cluster_notify_node(struct model *m, const struct cluster *c,
				const char *node)
{
	static const char *const files[] = {"stdout", "stderr", "exit_status",
					    "exec"};
	char path[128];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "nodes/%s/%s", node, files[i]);
		cluster_notify(m, c, path);
	}
}

/* An exec cut off: on each of its nodes whose result was not stored, the
 * output it wrote put in place and the status lost. */
static void cluster_recover_exec(struct model *m, struct cluster *c,
				 const char *dir, unsigned seq,
				 const struct cluster_mark *k)
{
	char lost[512] = "", why[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	char tmp[PATH_MAX + 96], final[PATH_MAX + 96];
	size_t nlost = 0, nnodes = 0, o = 0;
	bool all = strcmp(k->relpath, "exec") == 0;
	int64_t now = model_now();

	for (const char *s = k->nodes; *s;) {
		size_t len = strcspn(s, " ");
		char name[16];
		struct cluster_node *nd;
		bool moved;

		snprintf(name, sizeof(name), "%.*s", (int)len, s);
		s += len + (s[len] == ' ');
		nd = cluster_node_find(c, name);
		if (!nd)
			continue;
		nnodes++;
		cluster_end_lost(m, c, nd, k->tag);
		snprintf(tmp, sizeof(tmp), "%s/.%s.%u.stdout", dir, name, seq);
		snprintf(final, sizeof(final), "%s/%s.stdout", dir, name);
		moved = cluster_output_recover(tmp, final);
		snprintf(tmp, sizeof(tmp), "%s/.%s.%u.stderr", dir, name, seq);
		snprintf(final, sizeof(final), "%s/%s.stderr", dir, name);
		moved = cluster_output_recover(tmp, final) || moved;
		/* Outputs in place and the result stored: it was only the
		 * record that was left. */
		if (!moved && nd->exec_ns >= k->start_ns)
			continue;
		nd->exit_status = CLUSTER_EXIT_LOST;
		nd->exec_ns = now;
		if (cluster_store_node(m, nd, err, sizeof(err)))
			cluster_log(m, c, "could not store the lost result: %s",
				    err);
		cluster_notify_node(m, c, nd->name);
		nlost++;
		if (o < sizeof(lost))
			o += (size_t)snprintf(lost + o, sizeof(lost) - o,
					      "%s%s", o ? ", " : "", name);
	}
	if (!nlost)
		return;
	if (all) {
		const char **nm = calloc(nnodes ? nnodes : 1, sizeof(*nm));
		char(*paths)[PATH_MAX + 96] =
			calloc(nnodes ? nnodes : 1, sizeof(*paths));
		const char **pp = calloc(nnodes ? nnodes : 1, sizeof(*pp));
		size_t i = 0;

		/* The caller's output: every node's (an exec of the cluster
		 * runs on all), as a finished exec would have made it. */
		for (size_t j = 0; nm && paths && pp && j < c->nnodes; j++) {
			if (i == nnodes)
				break;
			nm[i] = c->nodes[j].name;
			snprintf(paths[i], sizeof(paths[i]), "%s/%s.stdout",
				 dir, c->nodes[j].name);
			pp[i] = paths[i];
			i++;
		}
		snprintf(tmp, sizeof(tmp), "%s/.exec.%u.out", dir, seq);
		snprintf(final, sizeof(final), "%s/exec.out", dir);
		if (nm && paths && pp)
			cluster_exec_collect(tmp, final, nm, pp, i, NULL);
		free(nm);
		free(paths);
		free(pp);
		c->exec_ns = now;
		cluster_notify(m, c, "exec");
		snprintf(why, sizeof(why),
			 "%s was cut off by a restart of cclfs on %zu of %zu "
			 "nodes (%s): their exit_status reads lost, and their "
			 "stdout and stderr hold what it wrote before",
			 k->quote, nlost, nnodes, lost);
	} else {
		snprintf(why, sizeof(why),
			 "%s was cut off by a restart of cclfs: exit_status "
			 "reads lost, and stdout and stderr hold what it wrote "
			 "before",
			 k->quote);
	}
	cluster_fail(m, c, k->relpath, -EIO, why);
}

/* An mpiexec cut off: its output put in place, mpi_exit_status lost. */
static void cluster_recover_mpi(struct model *m, struct cluster *c,
				const char *dir, unsigned seq,
				const struct cluster_mark *k)
{
	char tmp[PATH_MAX + 64], final[PATH_MAX + 64], why[MODEL_ERR_MAX];
	struct cluster_node *nd = cluster_node_find(c, k->nodes);
	bool moved;

	if (nd)
		cluster_end_lost(m, c, nd, k->tag);
	snprintf(tmp, sizeof(tmp), "%s/.mpi.%u.stdout", dir, seq);
	snprintf(final, sizeof(final), "%s/mpi.stdout", dir);
	moved = cluster_output_recover(tmp, final);
	snprintf(tmp, sizeof(tmp), "%s/.mpi.%u.stderr", dir, seq);
	snprintf(final, sizeof(final), "%s/mpi.stderr", dir);
	moved = cluster_output_recover(tmp, final) || moved;
	if (!moved && c->mpi_ns >= k->start_ns)
		return;
	c->mpi_exit_status = CLUSTER_EXIT_LOST;
	c->mpi_ns = model_now();
	cluster_notify(m, c, "mpiexec");
	cluster_notify(m, c, "mpi_stdout");
	cluster_notify(m, c, "mpi_stderr");
	cluster_notify(m, c, "mpi_exit_status");
	snprintf(why, sizeof(why),
		 "%s was cut off by a restart of cclfs: mpi_exit_status reads "
		 "lost, and mpi_stdout and mpi_stderr hold what it wrote "
		 "before",
		 k->quote);
	/* Stored with the error. */
	cluster_fail(m, c, "mpiexec", -EIO, why);
}

/* ".KIND.SEQ.running": the record of a command under way. */
static bool cluster_mark_name(const char *name, char *kind, size_t kindlen,
			      unsigned *seq)
{
	const char *dot = strchr(name + 1, '.');
	char *end;
	unsigned long v;

	if (name[0] != '.' || !dot || dot == name + 1 ||
	    (size_t)(dot - name) > kindlen)
		return false;
	v = strtoul(dot + 1, &end, 10);
	if (end == dot + 1 || strcmp(end, ".running") != 0 || v > UINT_MAX)
		return false;
	snprintf(kind, kindlen, "%.*s", (int)(dot - name - 1), name + 1);
	*seq = (unsigned)v;
	return true;
}

/* What a command cut short leaves in the directory: ".A.DIGITS" or
 * ".A.DIGITS.B" (temporary outputs and hostfiles, records). */
static bool cluster_leftover(const char *name)
{
	const char *dot = name[0] == '.' ? strchr(name + 1, '.') : NULL;
	size_t n;

	if (!dot || dot == name + 1)
		return false;
	n = strspn(dot + 1, "0123456789");
	return n && (dot[1 + n] == '\0' || dot[1 + n] == '.');
}

void cluster_exec_recover(struct model *m, struct cluster *c)
{
	char dir[PATH_MAX], path[PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	pthread_mutex_lock(&m->lock);
	cluster_dir(m, c, dir, sizeof(dir));
	d = *dir ? opendir(dir) : NULL;
	/* The records first: they say which temporary files to keep. */
	while (d && (e = readdir(d))) {
		struct cluster_mark k;
		char kind[8];
		unsigned seq;

		if (!cluster_mark_name(e->d_name, kind, sizeof(kind), &seq))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (cluster_mark_read(path, &k) == 0) {
			if (strcmp(kind, "exec") == 0)
				cluster_recover_exec(m, c, dir, seq, &k);
			else if (strcmp(kind, "mpi") == 0)
				cluster_recover_mpi(m, c, dir, seq, &k);
		}
		free(k.text);
	}
	if (d)
		rewinddir(d);
	while (d && (e = readdir(d))) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (cluster_leftover(e->d_name) ||
		    (strstr(e->d_name, ".spare.") && stat(path, &st) == 0 &&
		     st.st_nlink > 1))
			unlink(path);
	}
	if (d)
		closedir(d);
	pthread_mutex_unlock(&m->lock);
}

void cluster_exec_remove_dir(struct model *m, const struct cluster *c)
{
	char dir[PATH_MAX], path[PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	cluster_dir(m, c, dir, sizeof(dir));
	d = *dir ? opendir(dir) : NULL;
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	if (*dir)
		rmdir(dir);
}
