/* The hosts provider: machines you already have, reached over SSH. A deploy
 * takes free hosts of the resolved type (never one another live cluster
 * holds); commands run in their own session (setsid) marked with the node,
 * so interrupt, resume, restart and terminate find them on the host. */
#include "providers/hosts.h"

#include "providers/ssh.h"
#include "providers/ssh_sftp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOSTS_KEY_MAX 96

/* A node of a cluster on one of the hosts, with its connection. */
struct hosts_node {
	struct hosts_node *next;
	struct hosts_provider *hp;
	char handle[65];
	int rank;
	struct ssh_conn *conn;
	struct hosts_node *manager; /* the node this one is reached through */
	int refs;
	bool gone;
};

struct hosts_provider {
	struct provider base;
	pthread_mutex_t lock;
	struct hosts_host *hosts;
	char (*held)[HOSTS_KEY_MAX]; /* per host: "HANDLE/RANK" or "" */
	size_t n;
	struct hosts_settings s;
	struct hosts_node *nodes;
	atomic_uint seq;
};

/* An open file of files/: the node stays while it is open. */
struct hosts_file {
	struct hosts_node *nd;
	struct ssh_file *f;
};

static void hosts_key(const char *handle, int rank, char *out)
{
	snprintf(out, HOSTS_KEY_MAX, "%s/%d", handle, rank);
}

static struct hosts_provider *hosts_of(struct provider *p)
{
	return (struct hosts_provider *)p;
}

/* The host a node holds (lock held); -1 when none. */
static long hosts_held_by(const struct hosts_provider *hp, const char *handle,
			  int rank)
{
	char key[HOSTS_KEY_MAX];

	hosts_key(handle, rank, key);
	for (size_t i = 0; i < hp->n; i++)
		if (strcmp(hp->held[i], key) == 0)
			return (long)i;
	return -1;
}

static long hosts_by_name(const struct hosts_provider *hp, const char *name)
{
	for (size_t i = 0; i < hp->n; i++)
		if (strcmp(hp->hosts[i].name, name) == 0)
			return (long)i;
	return -1;
}

static void hosts_changed(void *ctx)
{
	struct hosts_node *nd = ctx;
	struct provider *p = &nd->hp->base;

	if (p->notify)
		p->notify(p->notify_ctx, nd->handle, nd->rank);
}

static void hosts_default_user(char *out, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "root");
}

/* The node's connection parameters, from the node (the contract's
 * config), the host's entry, then [hosts]. */
static void hosts_params(const struct hosts_provider *hp, size_t host,
			 const struct provider_node *pn, struct ssh_params *sp)
{
	const struct hosts_host *h = &hp->hosts[host];

	memset(sp, 0, sizeof(*sp));
	snprintf(sp->host, sizeof(sp->host), "%s", h->address);
	sp->port = h->port > 0 ? h->port : 22;
	if (*pn->user)
		snprintf(sp->user, sizeof(sp->user), "%s", pn->user);
	else if (*h->user)
		snprintf(sp->user, sizeof(sp->user), "%s", h->user);
	else if (*hp->s.user)
		snprintf(sp->user, sizeof(sp->user), "%s", hp->s.user);
	else
		hosts_default_user(sp->user, sizeof(sp->user));
	if (*pn->keyfile)
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", pn->keyfile);
	else if (*h->keyfile)
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", h->keyfile);
	else
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", hp->s.keyfile);
	snprintf(sp->known_hosts, sizeof(sp->known_hosts), "%s",
		 hp->s.known_hosts);
	snprintf(sp->own_hosts, sizeof(sp->own_hosts), "%s", hp->s.own_hosts);
	sp->record_new = hp->s.record_new != 0;
	sp->connect_timeout_ms = hp->s.connect_timeout_ms;
	sp->keepalive_s = hp->s.keepalive_s;
}

static struct hosts_node *hosts_find(struct hosts_provider *hp,
				     const char *handle, int rank)
{
	for (struct hosts_node *nd = hp->nodes; nd; nd = nd->next)
		if (!nd->gone && nd->rank == rank &&
		    strcmp(nd->handle, handle) == 0)
			return nd;
	return NULL;
}

/* The node's connection, made on first use (lock held). A worker of a
 * ManagerWorkers cluster is reached through its manager. */
static struct hosts_node *hosts_get_locked(struct hosts_provider *hp,
					   const struct provider_node *pn,
					   int rank, char *err, size_t errlen)
{
	struct hosts_node *nd = hosts_find(hp, pn->handle, rank);
	struct hosts_node *mgr = NULL;
	struct ssh_params sp;
	long host;

	if (nd) {
		nd->refs++;
		return nd;
	}
	host = hosts_held_by(hp, pn->handle, rank);
	if (host < 0) {
		snprintf(err, errlen, "node %d of cluster %s holds no host",
			 rank, pn->handle);
		return NULL;
	}
	if (pn->tunneled && rank >= 0) {
		mgr = hosts_get_locked(hp, pn, -1, err, errlen);
		if (!mgr)
			return NULL;
	}
	nd = calloc(1, sizeof(*nd));
	if (!nd) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	nd->hp = hp;
	snprintf(nd->handle, sizeof(nd->handle), "%s", pn->handle);
	nd->rank = rank;
	nd->manager = mgr;
	hosts_params(hp, (size_t)host, pn, &sp);
	nd->conn = ssh_conn_new(&sp, mgr ? mgr->conn : NULL, hosts_changed, nd);
	if (!nd->conn) {
		snprintf(err, errlen, "cannot start a connection to %s",
			 sp.host);
		free(nd);
		goto fail;
	}
	nd->refs = 1;
	nd->next = hp->nodes;
	hp->nodes = nd;
	return nd;
fail:
	if (mgr)
		mgr->refs--;
	return NULL;
}

static struct hosts_node *hosts_get(struct hosts_provider *hp,
				    const struct provider_node *pn, char *err,
				    size_t errlen)
{
	struct hosts_node *nd;

	pthread_mutex_lock(&hp->lock);
	nd = hosts_get_locked(hp, pn, pn->rank, err, errlen);
	pthread_mutex_unlock(&hp->lock);
	return nd;
}

/* Drop a reference; the last one of a node that is gone frees it (and
 * then its manager's). */
static void hosts_put(struct hosts_node *nd)
{
	struct hosts_provider *hp;

	while (nd) {
		struct hosts_node *mgr = NULL, **pp;
		bool free_it;

		hp = nd->hp;
		pthread_mutex_lock(&hp->lock);
		free_it = --nd->refs == 0 && nd->gone;
		if (free_it) {
			for (pp = &hp->nodes; *pp; pp = &(*pp)->next)
				if (*pp == nd) {
					*pp = nd->next;
					break;
				}
			mgr = nd->manager;
		}
		pthread_mutex_unlock(&hp->lock);
		if (!free_it)
			return;
		ssh_conn_free(nd->conn);
		free(nd);
		nd = mgr;
	}
}

/* --- commands on a host --- */

/* The marker that finds a node's processes, or one command's. */
static void hosts_marker(const struct provider_node *pn, unsigned seq,
			 char *out, size_t len)
{
	if (seq)
		snprintf(out, len, "CCLFS_EXEC=%s/%d/%u", pn->handle, pn->rank,
			 seq);
	else
		snprintf(out, len, "CCLFS_INSTANCE=%s/%d", pn->handle,
			 pn->rank);
}

/* A script that sends sig to every process whose environment holds the
 * marker; with KILL, repeated until none is left. */
static int hosts_signal_script(const char *marker, const char *sig, char *out,
			       size_t len)
{
	char q[256];

	if (ssh_quote(marker, q, sizeof(q)))
		return -1;
	snprintf(out, len,
		 "m=%s; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 "
		 "18 19 20; do p=$(grep -lzxF \"$m\" /proc/[0-9]*/environ "
		 "2>/dev/null | cut -d/ -f3); [ -n \"$p\" ] || exit 0; "
		 "kill -%s $p 2>/dev/null; [ %s = KILL ] || exit 0; "
		 "sleep 0.05; done; exit 1",
		 q, sig, sig);
	return 0;
}

/* Run one of cclfs's own commands (`what` names it in errors). */
static int hosts_simple(struct hosts_node *nd, const char *what,
			const char *command, char *err, size_t errlen)
{
	struct ssh_exec x = {.command = command,
			     .out_fd = -1,
			     .err_fd = -1,
			     .timeout_ms = 60000};
	int rc = ssh_exec(nd->conn, &x, NULL, NULL, err, errlen);

	if (rc == 0 && x.exit_status != 0) {
		x.errtext[strcspn(x.errtext, "\n")] = '\0';
		snprintf(err, errlen,
			 "%s on node %d of %s exited with status %d%s%s", what,
			 nd->rank, nd->handle, x.exit_status,
			 *x.errtext ? ": " : "", x.errtext);
		rc = -EIO;
	}
	return rc;
}

static int hosts_signal(struct provider *p, const struct provider_node *node,
			const char *sig, unsigned seq, char *err, size_t errlen)
{
	struct hosts_provider *hp = hosts_of(p);
	struct hosts_node *nd = hosts_get(hp, node, err, errlen);
	char marker[160], script[768], what[32];
	int rc;

	if (!nd)
		return -EIO;
	hosts_marker(node, seq, marker, sizeof(marker));
	if (hosts_signal_script(marker, sig, script, sizeof(script))) {
		hosts_put(nd);
		snprintf(err, errlen, "the cluster handle is too long");
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "sending SIG%s", sig);
	rc = hosts_simple(nd, what, script, err, errlen);
	hosts_put(nd);
	return rc;
}

static int hosts_stop(struct provider *p, const struct provider_node *node,
		      char *err, size_t errlen)
{
	return hosts_signal(p, node, "STOP", 0, err, errlen);
}

static int hosts_start(struct provider *p, const struct provider_node *node,
		       char *err, size_t errlen)
{
	return hosts_signal(p, node, "CONT", 0, err, errlen);
}

static int hosts_kill(struct provider *p, const struct provider_node *node,
		      char *err, size_t errlen)
{
	return hosts_signal(p, node, "KILL", 0, err, errlen);
}

/* Take a free host of the node's type (lock held). */
static int hosts_take(struct hosts_provider *hp, struct provider_node *pn,
		      char *err, size_t errlen)
{
	char key[HOSTS_KEY_MAX], name[16];
	size_t total = 0;
	long h = -1;

	hosts_key(pn->handle, pn->rank, key);
	if (*pn->instance_id) {
		h = hosts_by_name(hp, pn->instance_id);
		if (h < 0) {
			snprintf(err, errlen,
				 "host %s is no longer in cclfs.conf",
				 pn->instance_id);
			return -ENOENT;
		}
		if (*hp->held[h] && strcmp(hp->held[h], key) != 0) {
			snprintf(err, errlen, "host %s is held by %s",
				 pn->instance_id, hp->held[h]);
			return -EBUSY;
		}
	} else {
		for (size_t i = 0; i < hp->n; i++) {
			if (strcmp(hp->hosts[i].type, pn->instance_type) != 0)
				continue;
			total++;
			if (!*hp->held[i] && h < 0)
				h = (long)i;
		}
		if (h < 0) {
			snprintf(err, errlen,
				 "no free host of type %s: all %zu hosts of "
				 "that type in cclfs.conf are held by other "
				 "clusters",
				 pn->instance_type, total);
			return -EBUSY;
		}
	}
	snprintf(hp->held[h], HOSTS_KEY_MAX, "%s", key);
	snprintf(pn->instance_id, sizeof(pn->instance_id), "%s",
		 hp->hosts[h].name);
	snprintf(pn->address, sizeof(pn->address), "%.*s",
		 (int)sizeof(pn->address) - 1, hp->hosts[h].address);
	if (pn->rank < 0)
		snprintf(name, sizeof(name), "manager");
	else
		snprintf(name, sizeof(name), "%d", pn->rank);
	snprintf(pn->workdir, sizeof(pn->workdir), ".cclfs/%s/%s", pn->handle,
		 name);
	return 0;
}

static int hosts_create(struct provider *p, struct provider_node *nodes,
			size_t n, char *err, size_t errlen)
{
	struct hosts_provider *hp = hosts_of(p);
	struct hosts_node **nds = calloc(n ? n : 1, sizeof(*nds));
	struct ssh_exec *xs = calloc(n ? n : 1, sizeof(*xs));
	char(*cmds)[PROVIDER_PATH_MAX + 32] = calloc(n ? n : 1, sizeof(*cmds));
	int rc = 0;

	if (!nds || !xs || !cmds) {
		free(nds);
		free(xs);
		free(cmds);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&hp->lock);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = hosts_take(hp, &nodes[i], err, errlen);
	pthread_mutex_unlock(&hp->lock);
	/* Connect to every host at once and make the working directory. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		char q[PROVIDER_PATH_MAX + 8];

		nds[i] = hosts_get(hp, &nodes[i], err, errlen);
		if (!nds[i] || ssh_quote(nodes[i].workdir, q, sizeof(q)) != 0) {
			rc = -EIO;
			break;
		}
		snprintf(cmds[i], sizeof(cmds[i]), "mkdir -p %s", q);
		xs[i].command = cmds[i];
		xs[i].out_fd = xs[i].err_fd = -1;
		xs[i].timeout_ms = 60000;
		if (ssh_exec_start(nds[i]->conn, &xs[i], err, errlen)) {
			hosts_put(nds[i]);
			nds[i] = NULL;
			rc = -EIO;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char e[SSH_ERR_MAX];
		int r;

		if (!nds[i])
			continue;
		r = ssh_exec_wait(nds[i]->conn, &xs[i], NULL, NULL, e,
				  sizeof(e));
		if (r == 0 && xs[i].exit_status != 0) {
			xs[i].errtext[strcspn(xs[i].errtext, "\n")] = '\0';
			snprintf(e, sizeof(e),
				 "cannot make the working directory %s on "
				 "host %s: %s",
				 nodes[i].workdir, nodes[i].instance_id,
				 xs[i].errtext);
			r = -EIO;
		}
		if (r && rc == 0) {
			rc = r;
			snprintf(err, errlen, "host %s: %s",
				 nodes[i].instance_id, e);
		}
		hosts_put(nds[i]);
	}
	free(nds);
	free(xs);
	free(cmds);
	return rc;
}

static int hosts_terminate(struct provider *p, const struct provider_node *node,
			   char *err, size_t errlen)
{
	struct hosts_provider *hp = hosts_of(p);
	struct hosts_node *nd;
	char q[PROVIDER_PATH_MAX + 8], cmd[2 * PROVIDER_PATH_MAX + 64];
	long h;
	int rc;

	pthread_mutex_lock(&hp->lock);
	h = hosts_held_by(hp, node->handle, node->rank);
	pthread_mutex_unlock(&hp->lock);
	if (h < 0)
		return 0; /* never took a host, or freed already */
	rc = hosts_kill(p, node, err, errlen);
	nd = rc ? NULL : hosts_get(hp, node, err, errlen);
	if (nd && *node->workdir &&
	    ssh_quote(node->workdir, q, sizeof(q)) == 0) {
		snprintf(
			cmd, sizeof(cmd),
			"rm -rf %s; rmdir .cclfs/%s .cclfs 2>/dev/null; exit 0",
			q, node->handle);
		rc = hosts_simple(nd, "removing the working directory", cmd,
				  err, errlen);
	}
	if (rc) {
		/* The host is freed all the same: what cclfs started there
		 * cannot run on if the host is unreachable; the log tells
		 * what was left undone. */
		char why[SSH_ERR_MAX];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen,
			 "host %s was freed without cleaning up its working "
			 "directory %s: %s",
			 node->instance_id, node->workdir, why);
	}
	pthread_mutex_lock(&hp->lock);
	hp->held[h][0] = '\0';
	if (nd)
		nd->gone = true;
	pthread_mutex_unlock(&hp->lock);
	if (nd)
		hosts_put(nd);
	return 0;
}

static int hosts_describe(struct provider *p, const struct provider_node *node,
			  enum provider_state *state, char *err, size_t errlen)
{
	struct hosts_provider *hp = hosts_of(p);

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&hp->lock);
	*state = hosts_held_by(hp, node->handle, node->rank) >= 0
			 ? PROVIDER_NODE_RUNNING
			 : PROVIDER_NODE_GONE;
	pthread_mutex_unlock(&hp->lock);
	return 0;
}

/* The remote command: in the working directory, with the markers and the
 * environment exported, in a session of its own. */
static int hosts_command(const struct provider_node *pn,
			 const struct provider_run *run, unsigned seq,
			 char **out)
{
	char marker[160], exec_marker[160], q[PROVIDER_PATH_MAX + 8];
	size_t cap = strlen(run->command) * 4 + 8192, o = 0;
	char *s = malloc(cap), *cq = malloc(strlen(run->command) * 4 + 8);

	if (!s || !cq || ssh_quote(pn->workdir, q, sizeof(q)) ||
	    ssh_quote(run->command, cq, strlen(run->command) * 4 + 8)) {
		free(s);
		free(cq);
		return -ENOMEM;
	}
	hosts_marker(pn, 0, marker, sizeof(marker));
	hosts_marker(pn, seq, exec_marker, sizeof(exec_marker));
	o += (size_t)snprintf(s + o, cap - o, "cd %s || exit 127; export %s %s",
			      q, marker, exec_marker);
	for (size_t i = 0; run->env && run->env[i] && o < cap; i++) {
		const char *eq = strchr(run->env[i], '=');
		char v[PROVIDER_PATH_MAX + 8];

		if (!eq || ssh_quote(eq + 1, v, sizeof(v)))
			continue;
		o += (size_t)snprintf(s + o, cap - o, " %.*s=%s",
				      (int)(eq - run->env[i]), run->env[i], v);
	}
	if (o < cap)
		snprintf(s + o, cap - o, "; setsid sh -c %s; exit $?", cq);
	free(cq);
	*out = s;
	return 0;
}

static int hosts_open_output(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

static int hosts_run(struct provider *p, const struct provider_node *node,
		     struct provider_run *run, char *err, size_t errlen)
{
	struct hosts_provider *hp = hosts_of(p);
	unsigned seq = atomic_fetch_add(&hp->seq, 1) + 1;
	struct ssh_exec x = {.timeout_ms = hp->s.command_timeout_ms};
	struct hosts_node *nd;
	char *cmd = NULL;
	int rc;

	run->exit_status = -1;
	if (hosts_command(node, run, seq, &cmd)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	x.command = cmd;
	x.out_fd = run->stdout_path ? hosts_open_output(run->stdout_path) : -1;
	x.err_fd = run->stderr_path ? hosts_open_output(run->stderr_path) : -1;
	nd = hosts_get(hp, node, err, errlen);
	if (!nd) {
		rc = -EIO;
	} else {
		rc = ssh_exec(nd->conn, &x, run->cancelled, run->cancel_ctx,
			      err, errlen);
		if (rc == -EINTR || rc == -ETIMEDOUT) {
			/* Its channel is closed; what it started goes too. */
			char e[SSH_ERR_MAX];

			hosts_signal(p, node, "KILL", seq, e, sizeof(e));
		}
		hosts_put(nd);
	}
	if (x.out_fd >= 0)
		close(x.out_fd);
	if (x.err_fd >= 0)
		close(x.err_fd);
	free(cmd);
	if (rc == 0)
		run->exit_status = x.exit_status;
	return rc;
}

static void hosts_attach(struct provider *p, const struct provider_node *node)
{
	struct hosts_provider *hp = hosts_of(p);
	long h;

	pthread_mutex_lock(&hp->lock);
	h = hosts_by_name(hp, node->instance_id);
	if (h >= 0 && !*hp->held[h])
		hosts_key(node->handle, node->rank, hp->held[h]);
	pthread_mutex_unlock(&hp->lock);
}

static int hosts_reach(struct provider *p, const struct provider_node *node,
		       char *buf, size_t len)
{
	struct hosts_provider *hp = hosts_of(p);
	struct hosts_node *nd;
	int rc = -1;

	pthread_mutex_lock(&hp->lock);
	nd = hosts_find(hp, node->handle, node->rank);
	if (nd) {
		ssh_conn_status(nd->conn, buf, len, NULL);
		rc = 0;
	}
	pthread_mutex_unlock(&hp->lock);
	return rc;
}

static void hosts_close(struct provider *p)
{
	struct hosts_provider *hp = hosts_of(p);

	/* Workers first: their sessions run through their managers'. */
	for (int pass = 0; pass < 2; pass++) {
		struct hosts_node **pp = &hp->nodes;

		while (*pp) {
			struct hosts_node *nd = *pp;

			if ((pass == 0) != (nd->manager != NULL)) {
				pp = &nd->next;
				continue;
			}
			*pp = nd->next;
			ssh_conn_free(nd->conn);
			free(nd);
		}
	}
	pthread_mutex_destroy(&hp->lock);
	free(hp->hosts);
	free(hp->held);
	free(hp);
}

/* --- files/ over SFTP --- */

static int hosts_path(const struct provider_node *node, const char *path,
		      char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s%s", node->workdir, *path ? "/" : "",
			 path);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Run an SFTP call on the node's connection with its path. */
#define HOSTS_FILE_CALL(p, node, path, call)                                   \
	do {                                                                   \
		struct hosts_node *nd_;                                        \
		char full_[PROVIDER_PATH_MAX + 1], e_[SSH_ERR_MAX];            \
		int rc_ = hosts_path(node, path, full_, sizeof(full_));        \
		if (rc_)                                                       \
			return rc_;                                            \
		nd_ = hosts_get(hosts_of(p), node, e_, sizeof(e_));            \
		if (!nd_)                                                      \
			return -EIO;                                           \
		rc_ = call;                                                    \
		hosts_put(nd_);                                                \
		return rc_;                                                    \
	} while (0)

static int hosts_files_getattr(struct provider *p,
			       const struct provider_node *node,
			       const char *path, struct stat *st)
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_stat(nd_->conn, full_, st));
}

static int hosts_files_readdir(
	struct provider *p, const struct provider_node *node, const char *path,
	int (*fn)(void *ctx, const char *name, const struct stat *st),
	void *ctx)
{
	HOSTS_FILE_CALL(p, node, path,
			ssh_sftp_readdir(nd_->conn, full_, fn, ctx));
}

static int hosts_files_open(struct provider *p,
			    const struct provider_node *node, const char *path,
			    int flags, mode_t mode, uint64_t *fh)
{
	struct hosts_file *hf = calloc(1, sizeof(*hf));
	char full[PROVIDER_PATH_MAX + 1], e[SSH_ERR_MAX];
	int rc;

	if (!hf)
		return -ENOMEM;
	rc = hosts_path(node, path, full, sizeof(full));
	hf->nd = rc ? NULL : hosts_get(hosts_of(p), node, e, sizeof(e));
	if (!rc && !hf->nd)
		rc = -EIO;
	if (!rc)
		rc = ssh_sftp_open(hf->nd->conn, full, flags, mode, &hf->f);
	if (rc) {
		if (hf->nd)
			hosts_put(hf->nd);
		free(hf);
		return rc;
	}
	*fh = (uint64_t)(uintptr_t)hf;
	return 0;
}

static struct hosts_file *hosts_fh(uint64_t fh)
{
	return (struct hosts_file *)(uintptr_t)fh;
}

static int hosts_files_read(struct provider *p, uint64_t fh, char *buf,
			    size_t size, off_t off)
{
	(void)p;
	return ssh_sftp_read(hosts_fh(fh)->f, buf, size, off);
}

static int hosts_files_write(struct provider *p, uint64_t fh, const char *buf,
			     size_t size, off_t off)
{
	(void)p;
	return ssh_sftp_write(hosts_fh(fh)->f, buf, size, off);
}

static int hosts_files_fsync(struct provider *p, uint64_t fh)
{
	(void)p;
	return ssh_sftp_fsync(hosts_fh(fh)->f);
}

static int hosts_files_fgetattr(struct provider *p, uint64_t fh,
				struct stat *st)
{
	(void)p;
	return ssh_sftp_fstat(hosts_fh(fh)->f, st);
}

static int hosts_files_ftruncate(struct provider *p, uint64_t fh, off_t size)
{
	(void)p;
	return ssh_sftp_fsetsize(hosts_fh(fh)->f, size);
}

static int hosts_files_close(struct provider *p, uint64_t fh)
{
	struct hosts_file *hf = hosts_fh(fh);
	int rc = ssh_sftp_close(hf->f);

	(void)p;
	hosts_put(hf->nd);
	free(hf);
	return rc;
}

static int hosts_files_truncate(struct provider *p,
				const struct provider_node *node,
				const char *path, off_t size)
{
	HOSTS_FILE_CALL(p, node, path,
			ssh_sftp_setsize(nd_->conn, full_, size));
}

static int hosts_files_mkdir(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_mkdir(nd_->conn, full_, mode));
}

static int hosts_files_unlink(struct provider *p,
			      const struct provider_node *node,
			      const char *path)
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_unlink(nd_->conn, full_));
}

static int hosts_files_rmdir(struct provider *p,
			     const struct provider_node *node, const char *path)
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_rmdir(nd_->conn, full_));
}

static int hosts_files_rename(struct provider *p,
			      const struct provider_node *node,
			      const char *from, const char *to,
			      unsigned int flags)
{
	char to_full[PROVIDER_PATH_MAX + 1];

	if (hosts_path(node, to, to_full, sizeof(to_full)))
		return -ENAMETOOLONG;
	HOSTS_FILE_CALL(p, node, from,
			ssh_sftp_rename(nd_->conn, full_, to_full, flags));
}

static int hosts_files_chmod(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_chmod(nd_->conn, full_, mode));
}

static int hosts_files_utimens(struct provider *p,
			       const struct provider_node *node,
			       const char *path, const struct timespec tv[2])
{
	HOSTS_FILE_CALL(p, node, path, ssh_sftp_utimens(nd_->conn, full_, tv));
}

static int hosts_files_symlink(struct provider *p,
			       const struct provider_node *node,
			       const char *target, const char *path)
{
	(void)p;
	(void)node;
	(void)target;
	(void)path;
	return -EOPNOTSUPP;
}

static int hosts_files_readlink(struct provider *p,
				const struct provider_node *node,
				const char *path, char *buf, size_t size)
{
	HOSTS_FILE_CALL(p, node, path,
			ssh_sftp_readlink(nd_->conn, full_, buf, size));
}

static const struct provider_file_ops hosts_file_ops = {
	.getattr = hosts_files_getattr,
	.readdir = hosts_files_readdir,
	.open = hosts_files_open,
	.read = hosts_files_read,
	.write = hosts_files_write,
	.fsync = hosts_files_fsync,
	.fgetattr = hosts_files_fgetattr,
	.ftruncate = hosts_files_ftruncate,
	.close = hosts_files_close,
	.truncate = hosts_files_truncate,
	.mkdir = hosts_files_mkdir,
	.unlink = hosts_files_unlink,
	.rmdir = hosts_files_rmdir,
	.rename = hosts_files_rename,
	.chmod = hosts_files_chmod,
	.utimens = hosts_files_utimens,
	.symlink = hosts_files_symlink,
	.readlink = hosts_files_readlink,
};

static const struct provider_ops hosts_ops = {
	.name = "hosts",
	.files = &hosts_file_ops,
	.create = hosts_create,
	.stop = hosts_stop,
	.start = hosts_start,
	.kill = hosts_kill,
	.terminate = hosts_terminate,
	.describe = hosts_describe,
	.run = hosts_run,
	.attach = hosts_attach,
	.reach = hosts_reach,
	.close = hosts_close,
};

struct provider *hosts_provider_open(const struct hosts_host *hosts, size_t n,
				     const struct hosts_settings *s, char *err,
				     size_t errlen)
{
	struct hosts_provider *hp = calloc(1, sizeof(*hp));

	if (hp) {
		hp->hosts = calloc(n ? n : 1, sizeof(*hp->hosts));
		hp->held = calloc(n ? n : 1, sizeof(*hp->held));
	}
	if (!hp || !hp->hosts || !hp->held) {
		if (hp) {
			free(hp->hosts);
			free(hp->held);
		}
		free(hp);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (n)
		memcpy(hp->hosts, hosts, n * sizeof(*hosts));
	hp->n = n;
	hp->s = *s;
	hp->base.ops = &hosts_ops;
	pthread_mutex_init(&hp->lock, NULL);
	atomic_init(&hp->seq, 0);
	return &hp->base;
}
