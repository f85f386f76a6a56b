/* The SSH transport (libssh2): one persistent session per node, served by a
 * thread of its own, reused by every command (a channel each) and by SFTP;
 * host-key checks, authentication, keepalives, reconnects, and sessions
 * carried through another node's session (direct-tcpip). */
#ifndef CCLFS_PROVIDERS_SSH_H
#define CCLFS_PROVIDERS_SSH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SSH_ERR_MAX 1024

struct ssh_conn;

struct ssh_params {
	char host[256]; /* address or name, as seen from `via` if any */
	int port;
	char user[64];
	char keyfile[PATH_MAX];	    /* "": ssh-agent, then ~/.ssh/id_* */
	char known_hosts[PATH_MAX]; /* another known-hosts file, or "" */
	char own_hosts[PATH_MAX];   /* cclfs's own known-hosts file */
	bool record_new;	    /* record an unknown host key there */
	/* The name the host key is known under ("": host, or [host]:port);
	 * a cloud instance's id keeps its key across address changes. */
	char key_alias[128];
	int connect_timeout_ms;
	int keepalive_s;
};

/* A connection (not connected yet: the first request connects). `via`, if
 * not NULL, carries it; it must outlive this one. `changed` is called
 * (from the connection's thread, with no lock held) when the connection
 * comes up or goes down. NULL when out of memory or no thread. */
struct ssh_conn *ssh_conn_new(const struct ssh_params *p, struct ssh_conn *via,
			      void (*changed)(void *ctx), void *ctx);
/* Close the session and stop the thread. */
void ssh_conn_free(struct ssh_conn *c);
/* Tell the thread to close the session and end, without waiting for it:
 * many connections told first end side by side, and ssh_conn_free of each
 * then finds its thread ended or ending. Every request fails. */
void ssh_conn_stop(struct ssh_conn *c);

/* The host key the connection verified, as a known_hosts key ("TYPE
 * BASE64"); 0, or -1 when it never connected (or buf is short). */
#define SSH_HOSTKEY_MAX 2048
int ssh_conn_hostkey(struct ssh_conn *c, char *buf, size_t len);

/* "reachable", "not connected yet", or "unreachable: WHY", and since when
 * (0 when never tried). Never waits on the network. */
void ssh_conn_status(struct ssh_conn *c, char *buf, size_t len,
		     int64_t *since_ns);

/* One command: output is written to out_fd and err_fd (-1: the first
 * bytes of stderr are kept in errtext, the rest dropped). */
struct ssh_exec {
	const char *command;
	int out_fd, err_fd;
	int timeout_ms;	 /* <= 0: none */
	int exit_status; /* out: exit code, or 128 + signal number */
	char errtext[256];
	/* private */
	void *req;
};

/* Start a command (connecting first if needed). Returns 0 or -errno. */
int ssh_exec_start(struct ssh_conn *c, struct ssh_exec *x, char *err,
		   size_t errlen);
/* Wait for it, polling `cancelled` (may be NULL) every 20 ms; non-zero
 * stops the command's channel and returns -EINTR. Returns 0 when the
 * command ran (whatever its exit status), or -errno with err filled. */
int ssh_exec_wait(struct ssh_conn *c, struct ssh_exec *x,
		  int (*cancelled)(void *), void *ctx, char *err,
		  size_t errlen);
int ssh_exec(struct ssh_conn *c, struct ssh_exec *x, int (*cancelled)(void *),
	     void *ctx, char *err, size_t errlen);

/* Record a host key published out of band (a cloud's guest attributes)
 * under `name` in the known-hosts file `file`, unless the name is there
 * already: TYPE ("ssh-ed25519") and the key's base64. 0, or -errno with
 * err. */
int ssh_hosts_pin(const char *file, const char *name, const char *type,
		  const char *b64, char *err, size_t errlen);

/* Quote s for a POSIX shell ('...'); returns 0, or -1 when out is short. */
int ssh_quote(const char *s, char *out, size_t outlen);

#endif
