/* The SSH transport's inside, shared by ssh.c (sessions, commands,
 * tunnels) and ssh_sftp.c (file operations): requests that a connection's
 * thread carries out step by step on its non-blocking session. */
#ifndef CCLFS_PROVIDERS_SSH_PRIV_H
#define CCLFS_PROVIDERS_SSH_PRIV_H

#include "providers/ssh.h"

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <pthread.h>
#include <stdatomic.h>

struct ssh_req {
	struct ssh_req *next;
	/* Called on the connection's thread with the session up: 0 when
	 * done, -EAGAIN to be called again, or -errno (err filled). Sets
	 * progress when it moved anything. */
	int (*step)(struct ssh_conn *c, struct ssh_req *r);
	/* The session is gone: forget its libssh2 objects (no I/O). */
	void (*lost)(struct ssh_req *r);
	int state;
	bool retry_ok; /* nothing reached the node yet: may run again */
	bool progress;
	/* Waits for nothing from the host (an idle writer): the watch for a
	 * host that stopped answering leaves it out. */
	bool quiet;
	atomic_int cancel;   /* set by the waiter: stop, -EINTR */
	int64_t deadline_ns; /* 0: none */
	int rc;
	bool done;
	/* Set by ssh_orphan: called on the connection's thread once r has
	 * ended, which then belongs to it. */
	void (*orphan)(struct ssh_conn *c, struct ssh_req *r);
	char err[SSH_ERR_MAX];
};

/* On the connection's thread: the session, and its SFTP channel (NULL
 * with *rc = -EAGAIN while it opens, or another -errno). */
LIBSSH2_SESSION *ssh_conn_session(struct ssh_conn *c);
LIBSSH2_SFTP *ssh_conn_sftp(struct ssh_conn *c, struct ssh_req *r, int *rc);
/* On the connection's thread: libssh2 keeps the state of a channel being
 * opened in the session, so one request at a time may open one. begin is
 * false while another holds the turn (try again later); end gives it back
 * once libssh2 answered something other than EAGAIN. */
bool ssh_conn_open_begin(struct ssh_conn *c, struct ssh_req *r);
void ssh_conn_open_end(struct ssh_conn *c, const struct ssh_req *r);
/* A session channel opened in r's turn: NULL with *rc -EAGAIN (call
 * again) or another -errno (r->err). */
LIBSSH2_CHANNEL *ssh_conn_open_session(struct ssh_conn *c, struct ssh_req *r,
				       int *rc);
/* On the connection's thread: ssh_sftp.c's state of the session (which
 * request holds each of libssh2's one-at-a-time SFTP calls, its own SFTP
 * channel for the extensions libssh2 does not send), NULL until made;
 * ssh_sftp_state_free'd when the session drops. */
struct ssh_sftp_state;
struct ssh_sftp_state **ssh_conn_sftp_state(struct ssh_conn *c);
void ssh_sftp_state_free(struct ssh_sftp_state *st);
/* A second session to c's host, with c's parameters, for big transfers:
 * libssh2 ciphers a block at a time on one thread, so two sessions move
 * nearly twice the bytes. Made on first call, closed with c; it has no
 * say in c's status. NULL when c goes through another node's session or
 * no thread could be made. */
struct ssh_conn *ssh_conn_bulk(struct ssh_conn *c);
/* On the connection's thread: close and free a channel of the session
 * in the background, dropping what it still receives. */
void ssh_conn_drop_channel(struct ssh_conn *c, LIBSSH2_CHANNEL *ch);
/* On the connection's thread: while on, small packets wait with the big
 * ones for the round's push (a request's header sent ahead of its
 * bytes). */
void ssh_conn_hold(struct ssh_conn *c, bool on);
/* Which session a handle belongs to (bumped at every new session). */
unsigned ssh_conn_generation(struct ssh_conn *c);
/* The -errno of the session's last error, and its text in r->err. */
int ssh_conn_fail(struct ssh_conn *c, struct ssh_req *r, const char *what);
const char *ssh_conn_name(const struct ssh_conn *c);

/* Queue a request, and wait for it (polling `cancelled` every 20 ms). */
int ssh_submit(struct ssh_conn *c, struct ssh_req *r);
/* Whether r, submitted, has ended (for a request nobody waits for yet). */
bool ssh_req_done(struct ssh_conn *c, const struct ssh_req *r);
/* Step the requests again: one of them has news that is not the
 * socket's (a writer was given bytes, or asked to stop). */
void ssh_wake(struct ssh_conn *c);
int ssh_wait(struct ssh_conn *c, struct ssh_req *r, int (*cancelled)(void *),
	     void *ctx);
/* Nobody will wait for r: fn gets it once it has ended, on the
 * connection's thread; with cancel, r is cancelled too (one that sent
 * nothing yet stops). False when r has ended already (then the caller
 * still has it). */
bool ssh_orphan(struct ssh_conn *c, struct ssh_req *r,
		void (*fn)(struct ssh_conn *c, struct ssh_req *r), bool cancel);

int64_t ssh_now_ns(void);
/* pthread_cond_wait for at most 20 ms (mu held). */
void ssh_cond_wait_briefly(pthread_cond_t *cv, pthread_mutex_t *mu);

#endif
