/* Nodes reached over SSH, shared by the hosts and ec2 providers: one
 * connection per node (a ManagerWorkers worker's through its manager's),
 * commands in a session of their own marked with the node, so that signals
 * find what they started, and the working directory over SFTP. */
#include "providers/remote.h"

#include "providers/cancel.h"
#include "providers/remote_ahead.h"
#include "providers/remote_attrs.h"
#include "providers/ssh_sftp.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A node of a cluster, with its connection. */
struct remote_node {
	struct remote_node *next;
	struct remote *r;
	char handle[65];
	int rank;
	struct ssh_conn *conn;
	struct remote_node *manager; /* the node this one is reached through */
	int refs;
	bool gone;
	/* files/: the login's uid and gid on the node, once known (lock). */
	bool ids_known;
	unsigned long uid, gid;
};

struct remote {
	struct provider *owner;
	remote_params_fn params;
	void *ctx;
	int command_timeout_ms;
	pthread_mutex_t lock;
	struct remote_node *nodes;
	atomic_uint seq;
};

static void remote_changed(void *ctx)
{
	struct remote_node *nd = ctx;
	struct provider *p = nd->r->owner;

	if (p->notify)
		p->notify(p->notify_ctx, nd->handle, nd->rank);
}

static struct remote_node *remote_find(struct remote *r, const char *handle,
				       int rank)
{
	for (struct remote_node *nd = r->nodes; nd; nd = nd->next)
		if (!nd->gone && nd->rank == rank &&
		    strcmp(nd->handle, handle) == 0)
			return nd;
	return NULL;
}

/* The node's connection, made on first use (lock held). A worker of a
 * ManagerWorkers cluster is reached through its manager. */
static struct remote_node *remote_get_locked(struct remote *r,
					     const struct provider_node *pn,
					     int rank, char *err, size_t errlen)
{
	struct remote_node *nd = remote_find(r, pn->handle, rank);
	struct remote_node *mgr = NULL;
	struct ssh_params sp;

	if (nd) {
		nd->refs++;
		return nd;
	}
	memset(&sp, 0, sizeof(sp));
	if (r->params(r->ctx, pn, rank, &sp, err, errlen))
		return NULL;
	if (pn->tunneled && rank >= 0) {
		mgr = remote_get_locked(r, pn, -1, err, errlen);
		if (!mgr)
			return NULL;
	}
	nd = calloc(1, sizeof(*nd));
	if (!nd) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	nd->r = r;
	snprintf(nd->handle, sizeof(nd->handle), "%s", pn->handle);
	nd->rank = rank;
	nd->manager = mgr;
	nd->conn =
		ssh_conn_new(&sp, mgr ? mgr->conn : NULL, remote_changed, nd);
	if (!nd->conn) {
		snprintf(err, errlen, "cannot start a connection to %s",
			 sp.host);
		free(nd);
		goto fail;
	}
	nd->refs = 1;
	nd->next = r->nodes;
	r->nodes = nd;
	return nd;
fail:
	if (mgr)
		mgr->refs--;
	return NULL;
}

struct remote_node *remote_get(struct remote *r, const struct provider_node *pn,
			       char *err, size_t errlen)
{
	struct remote_node *nd;

	pthread_mutex_lock(&r->lock);
	nd = remote_get_locked(r, pn, pn->rank, err, errlen);
	pthread_mutex_unlock(&r->lock);
	return nd;
}

/* Drop a reference; the last one of a node that is gone frees it (and
 * then its manager's). */
void remote_put(struct remote_node *nd)
{
	while (nd) {
		struct remote *r = nd->r;
		struct remote_node *mgr = NULL, **pp;
		bool free_it;

		pthread_mutex_lock(&r->lock);
		free_it = --nd->refs == 0 && nd->gone;
		if (free_it) {
			for (pp = &r->nodes; *pp; pp = &(*pp)->next)
				if (*pp == nd) {
					*pp = nd->next;
					break;
				}
			mgr = nd->manager;
		}
		pthread_mutex_unlock(&r->lock);
		if (!free_it)
			return;
		/* What was opened ahead there fails at once, not at a
		 * timeout of a host that went away. */
		ssh_conn_stop(nd->conn);
		remote_ahead_forget(nd->conn);
		ssh_conn_free(nd->conn);
		remote_attrs_forget(nd);
		free(nd);
		nd = mgr;
	}
}

void remote_forget(struct remote *r, const char *handle, int rank)
{
	struct remote_node *nd;

	pthread_mutex_lock(&r->lock);
	nd = remote_find(r, handle, rank);
	if (nd) {
		nd->gone = true;
		nd->refs++;
	}
	pthread_mutex_unlock(&r->lock);
	if (nd)
		remote_put(nd);
}

void remote_forget_all(struct remote *r, const struct provider_node *nodes,
		       size_t n)
{
	struct remote_node **v = calloc(n ? n : 1, sizeof(*v));
	size_t k = 0;

	if (!v) {
		for (size_t i = 0; i < n; i++)
			remote_forget(r, nodes[i].handle, nodes[i].rank);
		return;
	}
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < n; i++) {
		struct remote_node *nd =
			remote_find(r, nodes[i].handle, nodes[i].rank);

		if (!nd)
			continue;
		nd->gone = true;
		/* No one else holds it, and being gone no one can take it:
		 * its thread may end now, beside the others. A node in use
		 * (a command, a worker's tunnel) closes when let go. */
		if (nd->refs == 0)
			ssh_conn_stop(nd->conn);
		nd->refs++;
		v[k++] = nd;
	}
	pthread_mutex_unlock(&r->lock);
	for (size_t i = 0; i < k; i++)
		remote_put(v[i]);
	free(v);
}

/* --- commands on a node --- */

/* The marker that finds a node's processes, or one command's. */
static void remote_marker(const struct provider_node *pn, unsigned seq,
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
static int remote_signal_script(const char *marker, const char *sig, char *out,
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
static int remote_simple(struct remote_node *nd, const char *what,
			 const char *command, struct cancel *cancel, char *err,
			 size_t errlen)
{
	struct ssh_exec x = {.command = command,
			     .out_fd = -1,
			     .err_fd = -1,
			     .timeout_ms = 60000};
	int rc = ssh_exec(nd->conn, &x, cancel_check, cancel, err, errlen);

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

static int remote_signal_seq(struct remote *r, const struct provider_node *node,
			     const char *sig, unsigned seq,
			     struct cancel *cancel, char *err, size_t errlen)
{
	struct remote_node *nd = remote_get(r, node, err, errlen);
	char marker[160], script[768], what[32];
	int rc;

	if (!nd)
		return -EIO;
	remote_marker(node, seq, marker, sizeof(marker));
	if (remote_signal_script(marker, sig, script, sizeof(script))) {
		remote_put(nd);
		snprintf(err, errlen, "the cluster handle is too long");
		return -EINVAL;
	}
	snprintf(what, sizeof(what), "sending SIG%s", sig);
	rc = remote_simple(nd, what, script, cancel, err, errlen);
	remote_put(nd);
	return rc;
}

int remote_signal(struct remote *r, const struct provider_node *node,
		  const char *sig, struct cancel *cancel, char *err,
		  size_t errlen)
{
	return remote_signal_seq(r, node, sig, 0, cancel, err, errlen);
}

/* Whether a process the node's marker marks runs there: 0 with *busy. */
static int remote_busy(struct remote *r, const struct provider_node *node,
		       struct cancel *cancel, int *busy, char *err,
		       size_t errlen)
{
	struct remote_node *nd = remote_get(r, node, err, errlen);
	char marker[160], q[256], script[512];
	struct ssh_exec x = {.out_fd = -1, .err_fd = -1, .timeout_ms = 60000};
	int rc;

	if (!nd)
		return -EIO;
	remote_marker(node, 0, marker, sizeof(marker));
	if (ssh_quote(marker, q, sizeof(q))) {
		remote_put(nd);
		snprintf(err, errlen, "the cluster handle is too long");
		return -EINVAL;
	}
	/* Exit 1 when one is found; the script itself carries no marker. */
	snprintf(script, sizeof(script),
		 "! grep -lqzxF %s /proc/[0-9]*/environ 2>/dev/null", q);
	x.command = script;
	rc = ssh_exec(nd->conn, &x, cancel_check, cancel, err, errlen);
	remote_put(nd);
	if (rc == 0 && x.exit_status > 1) {
		snprintf(err, errlen,
			 "looking for processes on node %d of %s exited with "
			 "status %d",
			 node->rank, node->handle, x.exit_status);
		rc = -EIO;
	}
	*busy = rc == 0 && x.exit_status == 1;
	return rc;
}

int remote_sig_one(struct remote *r, struct provider_batch *b, size_t i)
{
	struct provider_result *res = &b->results[i];

	if (!*b->nodes[i].instance_id)
		return 0; /* never created: nothing runs there */
	if (b->sig == 0)
		return remote_busy(r, &b->nodes[i], b->cancel, &res->busy,
				   res->msg, sizeof(res->msg));
	return remote_signal(r, &b->nodes[i], sigabbrev_np(b->sig), b->cancel,
			     res->msg, sizeof(res->msg));
}

/* Run cmds[i] on nodes[i], all at once (connecting first); `what` names
 * the step in errors. 0, or -errno with err naming the first node that
 * failed. */
static int remote_exec_all(struct remote *r, const struct provider_node *nodes,
			   size_t n, char *const *cmds, const char *what,
			   struct cancel *cancel, char *err, size_t errlen)
{
	struct remote_node **nds = calloc(n ? n : 1, sizeof(*nds));
	struct ssh_exec *xs = calloc(n ? n : 1, sizeof(*xs));
	int rc = 0;

	if (!nds || !xs) {
		free(nds);
		free(xs);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		nds[i] = remote_get(r, &nodes[i], err, errlen);
		if (!nds[i]) {
			rc = -EIO;
			break;
		}
		xs[i].command = cmds[i];
		xs[i].out_fd = xs[i].err_fd = -1;
		xs[i].timeout_ms = 60000;
		if (ssh_exec_start(nds[i]->conn, &xs[i], err, errlen)) {
			remote_put(nds[i]);
			nds[i] = NULL;
			rc = -EIO;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char e[SSH_ERR_MAX];
		int rr;

		if (!nds[i])
			continue;
		rr = ssh_exec_wait(nds[i]->conn, &xs[i], cancel_check, cancel,
				   e, sizeof(e));
		if (rr == 0 && xs[i].exit_status != 0) {
			xs[i].errtext[strcspn(xs[i].errtext, "\n")] = '\0';
			snprintf(e, sizeof(e), "%s failed: %s", what,
				 xs[i].errtext);
			rr = -EIO;
		}
		if (rr && rc == 0) {
			rc = rr;
			snprintf(err, errlen, "%s: %s", nodes[i].instance_id,
				 e);
		}
		remote_put(nds[i]);
	}
	free(nds);
	free(xs);
	return rc;
}

/* Connect to every node at once and make its working directory, 0700
 * until a node command opens it, as a local node's: through the mount,
 * another user's call in it runs with the login's rights. */
int remote_mkdirs(struct remote *r, const struct provider_node *nodes, size_t n,
		  struct cancel *cancel, char *err, size_t errlen)
{
	char **cmds = calloc(n ? n : 1, sizeof(*cmds));
	int rc = 0;

	if (!cmds) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char q[PROVIDER_PATH_MAX + 8];

		if (ssh_quote(nodes[i].workdir, q, sizeof(q)) != 0 ||
		    asprintf(&cmds[i], "mkdir -p -m 700 %s", q) < 0) {
			cmds[i] = NULL;
			snprintf(err, errlen,
				 "%s: the working directory is "
				 "too long",
				 nodes[i].instance_id);
			rc = -ENAMETOOLONG;
		}
	}
	if (rc == 0)
		rc = remote_exec_all(r, nodes, n, cmds,
				     "making the working directory", cancel,
				     err, errlen);
	for (size_t i = 0; i < n; i++)
		free(cmds[i]);
	free(cmds);
	return rc;
}

/* The files of a cluster on one of its nodes, from the login directory:
 * .cclfs/HANDLE/hostfile, and for MPI .cclfs/HANDLE/mpi/ with the
 * cluster's key (id_ed25519), the nodes' host keys (known_hosts) and the
 * `ssh` mpirun starts its daemons with (OMPI_MCA_plm_rsh_agent). */
#define REMOTE_EOF "CCLFS_END_OF_FILE"

static char *remote_prepare_script(const struct provider_node *pn,
				   const char *hostfile, const char *pem,
				   const char *pub, const char *known)
{
	char *s = NULL, *mpi = NULL;
	char marker[96], tag[32];
	int rc;

	snprintf(tag, sizeof(tag), "%d", pn->rank < 0 ? 0 : pn->rank + 1);
	snprintf(marker, sizeof(marker), " cclfs:%s:%.8s", pn->handle,
		 pn->token);
	if (pem) {
		rc = asprintf(
			&mpi,
			"m=$(cd \"$d/mpi\" && pwd -P) || exit 1\n"
			"cat > \"$m/.key.%s\" <<'" REMOTE_EOF "'\n%s" REMOTE_EOF
			"\n"
			"mv -f \"$m/.key.%s\" \"$m/id_ed25519\" || exit 1\n"
			"printf '%%s' '%s' > \"$m/.pub.%s\" && "
			"mv -f \"$m/.pub.%s\" \"$m/id_ed25519.pub\" || exit 1\n"
			"cat > \"$m/.known.%s\" <<'" REMOTE_EOF
			"'\n%s" REMOTE_EOF "\n"
			"mv -f \"$m/.known.%s\" \"$m/known_hosts\" || exit 1\n"
			"printf '#!/bin/sh\\nexec ssh -F /dev/null -o "
			"BatchMode=yes -o IdentitiesOnly=yes -o "
			"StrictHostKeyChecking=yes -o "
			"GlobalKnownHostsFile=/dev/null -o "
			"UserKnownHostsFile=\"%%s/known_hosts\" -i "
			"\"%%s/id_ed25519\" \"$@\"\\n' \"$m\" \"$m\" > "
			"\"$m/.ssh.%s\" && chmod 755 \"$m/.ssh.%s\" && "
			"mv -f \"$m/.ssh.%s\" \"$m/ssh\" || exit 1\n"
			"h=${HOME:-.}/.ssh; a=$h/authorized_keys\n"
			"mkdir -p \"$h\" && chmod 700 \"$h\" || exit 1\n"
			"{ grep -v -F '%s' \"$a\" 2>/dev/null; printf '%%s' "
			"'%s'; "
			"} > \"$a.cclfs.%s\" || exit 1\n"
			"cat \"$a.cclfs.%s\" > \"$a\" && chmod 600 \"$a\"; "
			"r=$?; rm -f \"$a.cclfs.%s\"; exit $r\n",
			tag, pem, tag, pub, tag, tag, tag, known, tag, tag, tag,
			tag, marker, pub, tag, tag, tag);
		if (rc < 0)
			return NULL;
	}
	rc = asprintf(&s,
		      "umask 077\n"
		      "d=.cclfs/%s\n"
		      "mkdir -p \"$d\"%s || exit 1\n"
		      "cat > \"$d/.hostfile.%s\" <<'" REMOTE_EOF
		      "'\n%s" REMOTE_EOF "\n"
		      "chmod 644 \"$d/.hostfile.%s\" && "
		      "mv -f \"$d/.hostfile.%s\" \"$d/hostfile\" || exit 1\n"
		      "%s",
		      pn->handle, pem ? " \"$d/mpi\"" : "", tag, hostfile, tag,
		      tag, mpi ? mpi : "exit 0\n");
	if (mpi) {
		explicit_bzero(mpi, strlen(mpi));
		free(mpi);
	}
	return rc < 0 ? NULL : s;
}

int remote_prepare(struct provider *p, struct provider_batch *b)
{
	struct remote *r = p->remote;
	const struct provider_node *nodes = b->nodes;
	const char *hostfile = b->hostfile;
	size_t n = b->n, errlen = sizeof(b->err);
	char *err = b->err;
	int mpi = b->mpi;
	char **cmds = calloc(n ? n : 1, sizeof(*cmds));
	char *known = NULL, *pem = NULL, pub[SSHKEY_PUBKEY_MAX + 128];
	size_t known_len = 0, pem_len = 0;
	int rc = 0;

	if (!cmds) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (mpi && n) {
		char comment[96];
		FILE *f = open_memstream(&known, &known_len);

		/* The host keys the connections verified, under the addresses
		 * the hostfile gives. */
		for (size_t i = 0; f && i < n && rc == 0; i++) {
			struct remote_node *nd =
				remote_get(r, &nodes[i], err, errlen);
			char key[SSH_HOSTKEY_MAX];

			if (!nd) {
				rc = -EIO;
				break;
			}
			if (ssh_conn_hostkey(nd->conn, key, sizeof(key)) == 0) {
				if (nodes[i].rank >= 0 && *nodes[i].address)
					fprintf(f, "%s %s\n", nodes[i].address,
						key);
			} else {
				snprintf(err, errlen,
					 "%s: its host key is not known yet "
					 "(never reached)",
					 nodes[i].instance_id);
				rc = -EIO;
			}
			remote_put(nd);
		}
		if (!f || fclose(f) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		}
		snprintf(comment, sizeof(comment), "cclfs:%s:%.8s",
			 nodes[0].handle, nodes[0].token);
		if (rc == 0)
			rc = sshkey_make(comment, &pem, &pem_len, pub,
					 sizeof(pub), err, errlen);
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		cmds[i] = remote_prepare_script(&nodes[i], hostfile, pem, pub,
						known ? known : "");
		if (!cmds[i]) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		}
	}
	if (rc == 0)
		rc = remote_exec_all(r, nodes, n, cmds,
				     mpi ? "installing the cluster's hostfile "
					   "and MPI key"
					 : "installing the cluster's hostfile",
				     b->cancel, err, errlen);
	for (size_t i = 0; i < n; i++)
		if (cmds[i]) {
			explicit_bzero(cmds[i], strlen(cmds[i]));
			free(cmds[i]);
		}
	free(cmds);
	if (pem) {
		explicit_bzero(pem, pem_len);
		free(pem);
	}
	free(known);
	return rc;
}

int remote_cleanup(struct remote *r, const struct provider_node *node,
		   struct cancel *cancel, char *err, size_t errlen)
{
	struct remote_node *nd;
	char q[PROVIDER_PATH_MAX + 8], cmd[2 * PROVIDER_PATH_MAX + 640];
	int rc = remote_signal(r, node, "KILL", cancel, err, errlen);

	if (rc || !*node->workdir)
		return rc;
	if (ssh_quote(node->workdir, q, sizeof(q))) {
		snprintf(err, errlen, "the working directory is too long");
		return -ENAMETOOLONG;
	}
	nd = remote_get(r, node, err, errlen);
	if (!nd)
		return -EIO;
	/* The cluster's key leaves the authorized keys (when it is there:
	 * the file is not rewritten otherwise). */
	snprintf(cmd, sizeof(cmd),
		 "rm -rf %s; a=${HOME:-.}/.ssh/authorized_keys; "
		 "if grep -q -F ' cclfs:%s:%.8s' \"$a\" 2>/dev/null; then "
		 "grep -v -F ' cclfs:%s:%.8s' \"$a\" > \"$a.cclfs.t\"; "
		 "cat \"$a.cclfs.t\" > \"$a\"; rm -f \"$a.cclfs.t\"; fi; "
		 "[ -n \"$(ls .cclfs/%s 2>/dev/null | grep -v -x -e mpi -e "
		 "hostfile)\" ] || rm -rf .cclfs/%s; rmdir .cclfs 2>/dev/null; "
		 "exit 0",
		 q, node->handle, node->token, node->handle, node->token,
		 node->handle, node->handle);
	rc = remote_simple(nd, "removing the working directory", cmd, cancel,
			   err, errlen);
	remote_put(nd);
	return rc;
}

/* Whether the NAME of a NAME=VALUE entry is a shell variable's. */
static bool remote_env_name_ok(const char *e, size_t n)
{
	if (n == 0 || (e[0] >= '0' && e[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(e[i] == '_' || (e[i] >= 'a' && e[i] <= 'z') ||
		      (e[i] >= 'A' && e[i] <= 'Z') ||
		      (e[i] >= '0' && e[i] <= '9')))
			return false;
	return true;
}

/* The remote command: in the working directory, with the markers and the
 * environment exported, in a session of its own. Nothing of the daemon's
 * environment goes: the command has its login's (PATH, HOME, USER...),
 * then what run->env gives. */
static int remote_command(const struct provider_node *pn,
			  const struct provider_run *run, unsigned seq,
			  char **out)
{
	char marker[160], exec_marker[160], q[PROVIDER_PATH_MAX + 8];
	size_t cap = strlen(run->command) * 4 + 8192, o = 0, vmax = 0;
	char *s, *cq, *v;

	for (size_t i = 0; run->env && run->env[i]; i++) {
		size_t n = strlen(run->env[i]);

		cap += n * 4 + 8;
		vmax = n > vmax ? n : vmax;
	}
	s = malloc(cap);
	cq = malloc(strlen(run->command) * 4 + 8);
	v = malloc(vmax * 4 + 8);
	if (!s || !cq || !v || ssh_quote(pn->workdir, q, sizeof(q)) ||
	    ssh_quote(run->command, cq, strlen(run->command) * 4 + 8)) {
		free(s);
		free(cq);
		free(v);
		return -ENOMEM;
	}
	remote_marker(pn, 0, marker, sizeof(marker));
	remote_marker(pn, seq, exec_marker, sizeof(exec_marker));
	/* The hostfile is the copy on the node (remote_prepare), and
	 * mpirun starts its daemons with the cluster's ssh when it has one. */
	o += (size_t)snprintf(s + o, cap - o,
			      "cd %s || exit 127; c=${PWD%%/*}; "
			      "[ -x \"$c/mpi/ssh\" ] && export "
			      "OMPI_MCA_plm_rsh_agent=\"$c/mpi/ssh\"; "
			      "export CCLFS_HOSTFILE=\"$c/hostfile\" %s %s",
			      q, marker, exec_marker);
	for (size_t i = 0; run->env && run->env[i] && o < cap; i++) {
		const char *eq = strchr(run->env[i], '=');

		if (!eq ||
		    !remote_env_name_ok(run->env[i],
					(size_t)(eq - run->env[i])) ||
		    ssh_quote(eq + 1, v, vmax * 4 + 8) ||
		    strncmp(run->env[i], "CCLFS_HOSTFILE=", 15) == 0 ||
		    strncmp(run->env[i], "CCLFS_INSTANCE=", 15) == 0 ||
		    strncmp(run->env[i], "CCLFS_EXEC=", 11) == 0)
			continue;
		o += (size_t)snprintf(s + o, cap - o, " %.*s=%s",
				      (int)(eq - run->env[i]), run->env[i], v);
	}
	if (o < cap)
		snprintf(s + o, cap - o, "; setsid sh -c %s; exit $?", cq);
	free(cq);
	free(v);
	*out = s;
	return 0;
}

static int remote_open_output(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

int remote_run(struct remote *r, const struct provider_node *node,
	       struct provider_run *run, char *err, size_t errlen)
{
	unsigned seq = atomic_fetch_add(&r->seq, 1) + 1;
	struct ssh_exec x = {.timeout_ms = r->command_timeout_ms};
	struct remote_node *nd;
	char *cmd = NULL;
	int rc;

	run->exit_status = -1;
	if (remote_command(node, run, seq, &cmd)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	x.command = cmd;
	x.out_fd = run->stdout_path ? remote_open_output(run->stdout_path) : -1;
	x.err_fd = run->stderr_path ? remote_open_output(run->stderr_path) : -1;
	nd = remote_get(r, node, err, errlen);
	if (!nd) {
		rc = -EIO;
	} else {
		rc = ssh_exec(nd->conn, &x, run->cancelled, run->cancel_ctx,
			      err, errlen);
		/* What it changed shows from now on (mpiexec's command
		 * changes other nodes' files too). */
		remote_attrs_changed();
		ssh_sftp_files_changed();
		if (rc == -EINTR || rc == -ETIMEDOUT) {
			/* Its channel is closed; what it started goes too. */
			char e[SSH_ERR_MAX];

			remote_signal_seq(r, node, "KILL", seq, NULL, e,
					  sizeof(e));
		}
		remote_put(nd);
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

int remote_reach(struct remote *r, const struct provider_node *node, char *buf,
		 size_t len)
{
	struct remote_node *nd;
	int rc = -1;

	pthread_mutex_lock(&r->lock);
	nd = remote_find(r, node->handle, node->rank);
	if (nd) {
		ssh_conn_status(nd->conn, buf, len, NULL);
		rc = 0;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

struct remote *remote_new(struct provider *owner, remote_params_fn params,
			  void *ctx, int command_timeout_ms)
{
	struct remote *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->owner = owner;
	r->params = params;
	r->ctx = ctx;
	r->command_timeout_ms = command_timeout_ms;
	pthread_mutex_init(&r->lock, NULL);
	atomic_init(&r->seq, 0);
	return r;
}

void remote_free(struct remote *r)
{
	if (!r)
		return;
	/* Workers first: their sessions run through their managers'. */
	for (int pass = 0; pass < 2; pass++) {
		struct remote_node **pp = &r->nodes;

		while (*pp) {
			struct remote_node *nd = *pp;

			if ((pass == 0) != (nd->manager != NULL)) {
				pp = &nd->next;
				continue;
			}
			*pp = nd->next;
			ssh_conn_stop(nd->conn);
			remote_ahead_forget(nd->conn);
			ssh_conn_free(nd->conn);
			free(nd);
		}
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

struct ssh_conn *remote_conn(const struct remote_node *nd)
{
	return nd->conn;
}

bool remote_ids(struct remote_node *nd, unsigned long *uid, unsigned long *gid)
{
	bool known;

	pthread_mutex_lock(&nd->r->lock);
	known = nd->ids_known;
	*uid = nd->uid;
	*gid = nd->gid;
	pthread_mutex_unlock(&nd->r->lock);
	return known;
}

void remote_set_ids(struct remote_node *nd, unsigned long uid,
		    unsigned long gid)
{
	pthread_mutex_lock(&nd->r->lock);
	nd->uid = uid;
	nd->gid = gid;
	nd->ids_known = true;
	pthread_mutex_unlock(&nd->r->lock);
}
