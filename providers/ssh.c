/* The SSH transport (libssh2): one persistent session per node, served by a
 * thread of its own that carries out every request (commands, SFTP,
 * tunnels to nodes behind this one) step by step on the non-blocking
 * session; connecting, host keys, authentication, keepalives, reconnects. */
#include "providers/ssh_cipher.h"
#include "providers/ssh_priv.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SSH_TUNNEL_BUF 65536

/* A channel of this session that carries another node's session: bytes
 * are pumped between it and one end of a socket pair. */
struct ssh_tunnel {
	struct ssh_tunnel *next;
	LIBSSH2_CHANNEL *ch;
	int fd;
	char to_fd[SSH_TUNNEL_BUF], to_ch[SSH_TUNNEL_BUF];
	size_t to_fd_len, to_fd_off, to_ch_len, to_ch_off;
	bool ch_eof, fd_eof, closing;
};

/* A stopped command's channel: sshd closes it once the command is gone,
 * which the waiter does not wait for. Closed and freed in the
 * background. */
struct ssh_zombie {
	struct ssh_zombie *next;
	LIBSSH2_CHANNEL *ch;
	bool closed;
};

struct ssh_conn {
	struct ssh_params p;
	struct ssh_conn *via;
	void (*changed)(void *ctx);
	void *ctx;
	char name[300]; /* user@host:port, for messages */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int wake; /* eventfd */
	bool stop;
	struct ssh_req *pending; /* submitted, not taken by the thread */
	/* Below: the thread's own, but for the status fields (lock). */
	struct ssh_req *active;
	/* The one opening a channel (ssh_conn_open_begin). */
	struct ssh_req *opener;
	LIBSSH2_SESSION *s;
	LIBSSH2_SFTP *sftp;
	struct ssh_sftp_state *sftp_state;
	int sock;
	/* tcp: sock is the host's TCP connection (not a tunnel's pair);
	 * corked: a send since the last ssh_push held bytes back; hold:
	 * small packets are held back too (ssh_conn_hold). */
	bool up, tried, idle_data, broken, tcp, corked, hold;
	char why[SSH_ERR_MAX];
	char hostkey[SSH_HOSTKEY_MAX]; /* "TYPE BASE64" once verified */
	int64_t since_ns;
	unsigned gen;
	int64_t keepalive_ns;
	/* The watch for a host that stopped answering (ssh_silent): when
	 * bytes last came, since when a request waits, when the next probe
	 * may go, when the one under way was sent (0: not yet), and the
	 * probe (its request only names its turn to open a channel). */
	int64_t rx_ns, busy_ns, probe_ns, probe_sent_ns;
	bool probing;
	struct ssh_req probe;
	struct ssh_tunnel *tunnels;
	struct ssh_zombie *zombies;
	/* A second session to the same host for big transfers (see
	 * ssh_conn_bulk), made on first use (lock). */
	struct ssh_conn *bulk;
};

/* Hand a channel nobody wants any more to the background close (freed
 * with the session if out of memory). */
static void ssh_zombie_add(struct ssh_conn *c, LIBSSH2_CHANNEL *ch)
{
	struct ssh_zombie *z = calloc(1, sizeof(*z));

	if (!z)
		return;
	z->ch = ch;
	z->next = c->zombies;
	c->zombies = z;
}

static pthread_once_t ssh_once = PTHREAD_ONCE_INIT;
static int ssh_init_rc;
/* cclfs's own known-hosts file is rewritten whole: one writer at a time. */
static pthread_mutex_t ssh_hosts_lock = PTHREAD_MUTEX_INITIALIZER;

static void ssh_global_init(void)
{
	ssh_cipher_setup();
	ssh_init_rc = libssh2_init(0);
}

int64_t ssh_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ssh_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ssh_quote(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	if (outlen < 3)
		return -1;
	out[o++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			if (o + 5 >= outlen)
				return -1;
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			if (o + 2 >= outlen)
				return -1;
			out[o++] = *s;
		}
	}
	out[o++] = '\'';
	out[o] = '\0';
	return 0;
}

const char *ssh_conn_name(const struct ssh_conn *c)
{
	return c->name;
}

void ssh_conn_drop_channel(struct ssh_conn *c, LIBSSH2_CHANNEL *ch)
{
	ssh_zombie_add(c, ch);
}

void ssh_conn_hold(struct ssh_conn *c, bool on)
{
	c->hold = on;
}

LIBSSH2_SESSION *ssh_conn_session(struct ssh_conn *c)
{
	return c->s;
}

/* libssh2 1.10 continues whatever open is under way when asked for a new
 * one: two requests opening at once would each be handed the other's
 * channel (a tunnel to another host for a command, say). */
bool ssh_conn_open_begin(struct ssh_conn *c, struct ssh_req *r)
{
	if (c->opener && c->opener != r)
		return false;
	c->opener = r;
	return true;
}

void ssh_conn_open_end(struct ssh_conn *c, const struct ssh_req *r)
{
	if (c->opener == r)
		c->opener = NULL;
}

unsigned ssh_conn_generation(struct ssh_conn *c)
{
	unsigned g;

	pthread_mutex_lock(&c->lock);
	g = c->gen;
	pthread_mutex_unlock(&c->lock);
	return g;
}

/* Errors that end the session (rather than one channel). */
static bool ssh_fatal(int lerr)
{
	switch (lerr) {
	case LIBSSH2_ERROR_SOCKET_NONE:
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
	case LIBSSH2_ERROR_INVALID_MAC:
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_PROTO:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_DECRYPT:
		return true;
	default:
		return false;
	}
}

int ssh_conn_fail(struct ssh_conn *c, struct ssh_req *r, const char *what)
{
	char *msg = NULL;
	int lerr = libssh2_session_last_error(c->s, &msg, NULL, 0);

	if (lerr == LIBSSH2_ERROR_EAGAIN)
		return -EAGAIN;
	snprintf(r->err, sizeof(r->err), "%s on %s: %s", what, c->name,
		 msg && *msg ? msg : "unknown error");
	if (ssh_fatal(lerr)) {
		c->broken = true;
		return -ECONNRESET;
	}
	return -EIO;
}

LIBSSH2_CHANNEL *ssh_conn_open_session(struct ssh_conn *c, struct ssh_req *r,
				       int *rc)
{
	LIBSSH2_CHANNEL *ch;

	*rc = -EAGAIN;
	if (!ssh_conn_open_begin(c, r))
		return NULL;
	ch = libssh2_channel_open_session(c->s);
	if (!ch) {
		*rc = ssh_conn_fail(c, r, "opening a channel");
		if (*rc != -EAGAIN)
			ssh_conn_open_end(c, r);
		return NULL;
	}
	ssh_conn_open_end(c, r);
	r->progress = true;
	*rc = 0;
	return ch;
}

/* --- connecting --- */

static int ssh_tcp_connect(struct ssh_conn *c, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	char port[16];
	int rc, fd = -1, saved = ECONNREFUSED;
	unsigned user_timeout_ms = (unsigned)c->p.keepalive_s * 3000U;

	snprintf(port, sizeof(port), "%d", c->p.port);
	rc = getaddrinfo(c->p.host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", c->p.host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		struct pollfd pfd;
		int one = 1, soerr = 0;
		socklen_t sl = sizeof(soerr);

		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno != EINPROGRESS) {
			saved = errno;
			close(fd);
			fd = -1;
			continue;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		rc = poll(&pfd, 1, c->p.connect_timeout_ms);
		if (rc == 0) {
			saved = ETIMEDOUT;
		} else if (rc > 0 &&
			   getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ==
				   0 &&
			   soerr == 0) {
			break;
		} else {
			saved = soerr ? soerr : errno;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "cannot connect to %s port %d: %s",
			 c->p.host, c->p.port, strerror(saved));
		return -saved;
	}
	/* A host gone from the network (powered off, cut off) acks nothing,
	 * not even the keepalives: after three intervals of that the kernel
	 * drops the connection, as OpenSSH's ServerAliveCountMax does,
	 * instead of waiting for TCP's retries (minutes). Set once
	 * connected: the connect has its own timeout. */
	if (c->p.keepalive_s > 0)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
			   sizeof(user_timeout_ms));
	return fd;
}

/* A tunnel's open, through the session of the node in front (`via`). On
 * the heap: a connect that gives up leaves it to that session's thread
 * (ssh_tunnel_orphan), as libssh2 1.10 cannot abandon an open under way. */
struct ssh_tunnel_req {
	struct ssh_req r;
	char host[256];
	int port;
	int fd; /* out: the other end */
	/* When the open began (holding the turn); 0 while waiting for it. */
	_Atomic int64_t begun_ns;
	/* When it was asked for, and until when it waits for the turn behind
	 * an open given up on (r.deadline_ns wakes the thread then, once). */
	int64_t submitted_ns, turn_until_ns;
};

static int ssh_tunnel_step(struct ssh_conn *c, struct ssh_req *r)
{
	struct ssh_tunnel_req *t = (struct ssh_tunnel_req *)r;
	struct ssh_tunnel *tn;
	LIBSSH2_CHANNEL *ch;
	int sv[2];

	if (atomic_load(&r->cancel) && (!c->opener || c->opener != r)) {
		snprintf(r->err, sizeof(r->err), "interrupted");
		return -EINTR; /* nothing sent yet */
	}
	/* Behind an open given up on (its worker's SYNs unanswered, most
	 * likely this one's), waiting for the turn could take minutes. An
	 * open given up on later wakes the thread (ssh_orphan). */
	if (c->opener && c->opener != r && ssh_now_ns() >= t->turn_until_ns) {
		r->deadline_ns = 0; /* no more wake-ups: it would spin */
		if (c->opener->step == ssh_tunnel_step &&
		    atomic_load(&c->opener->cancel)) {
			snprintf(r->err, sizeof(r->err),
				 "%s did not reach %s port %d within %d ms: "
				 "an earlier tunnel's open is still "
				 "unanswered",
				 c->name, t->host, t->port,
				 (int)((t->turn_until_ns - t->submitted_ns) /
				       1000000));
			return -ETIMEDOUT;
		}
	}
	if (!ssh_conn_open_begin(c, r))
		return -EAGAIN;
	r->deadline_ns = 0; /* the waiter keeps the open's own time */
	if (!atomic_load(&t->begun_ns))
		atomic_store(&t->begun_ns, ssh_now_ns());
	ch = libssh2_channel_direct_tcpip_ex(c->s, t->host, t->port,
					     "127.0.0.1", 22);
	if (!ch) {
		int rc = ssh_conn_fail(c, r, "opening a channel");

		if (rc != -EAGAIN) {
			ssh_conn_open_end(c, r);
			snprintf(r->err, sizeof(r->err),
				 "%s cannot reach %s port %d", c->name, t->host,
				 t->port);
			if (rc == -EIO)
				rc = -EHOSTUNREACH;
		}
		return rc;
	}
	ssh_conn_open_end(c, r);
	r->progress = true;
	if (atomic_load(&r->cancel)) { /* nobody waits for it any more */
		ssh_zombie_add(c, ch);
		snprintf(r->err, sizeof(r->err), "interrupted");
		return -EINTR;
	}
	tn = calloc(1, sizeof(*tn));
	if (!tn ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv)) {
		free(tn);
		ssh_zombie_add(c, ch);
		snprintf(r->err, sizeof(r->err), "out of resources");
		return -ENOMEM;
	}
	tn->ch = ch;
	tn->fd = sv[0];
	tn->next = c->tunnels;
	c->tunnels = tn;
	t->fd = sv[1];
	return 0;
}

/* The manager's session is gone: an open run again on the next one has
 * its whole time again. */
static void ssh_tunnel_lost(struct ssh_req *r)
{
	atomic_store(&((struct ssh_tunnel_req *)r)->begun_ns, 0);
}

/* A tunnel's open that ended after its connect gave up: its channel, if
 * it came just then, closes as its end of the socket pair does. */
static void ssh_tunnel_orphan(struct ssh_conn *c, struct ssh_req *r)
{
	struct ssh_tunnel_req *t = (struct ssh_tunnel_req *)r;

	(void)c;
	if (r->rc == 0 && t->fd >= 0)
		close(t->fd);
	free(t);
}

/* Wait for a tunnel's open. sshd answers it once it reached the worker,
 * which Linux gives up after about 127 s of SYNs: the connect gives up
 * connect_timeout_ms after the open began (or at once when c closes),
 * leaving the open to finish on via's thread. The time spent waiting for
 * the turn to open is not counted, the open ahead may be a worker's that
 * is merely slow, unless that open was given up (ssh_tunnel_step). 0 with
 * t's fd, or -errno; t is freed either way. */
static int ssh_tunnel_wait(struct ssh_conn *c, struct ssh_tunnel_req *t,
			   char *err, size_t errlen, int *fd)
{
	struct ssh_conn *via = c->via;
	int64_t limit = (int64_t)c->p.connect_timeout_ms * 1000000;
	int rc;

	for (;;) {
		int64_t begun = atomic_load(&t->begun_ns);
		bool stop, done, late;

		pthread_mutex_lock(&c->lock);
		stop = c->stop;
		pthread_mutex_unlock(&c->lock);
		late = begun && ssh_now_ns() - begun >= limit;
		pthread_mutex_lock(&via->lock);
		if (!t->r.done && !stop && !late)
			ssh_cond_wait_briefly(&via->cv, &via->lock);
		done = t->r.done;
		pthread_mutex_unlock(&via->lock);
		if (done)
			break;
		if ((stop || late) &&
		    ssh_orphan(via, &t->r, ssh_tunnel_orphan, true)) {
			if (stop) {
				snprintf(err, errlen,
					 "the connection is closing");
				return -ESHUTDOWN;
			}
			snprintf(err, errlen,
				 "%s did not reach %s port %d within %d ms",
				 via->name, c->p.host, c->p.port,
				 c->p.connect_timeout_ms);
			return -ETIMEDOUT;
		}
	}
	rc = t->r.rc;
	if (rc)
		snprintf(err, errlen, "%s", t->r.err);
	else
		*fd = t->fd;
	free(t);
	return rc == -ECONNRESET ? -EHOSTUNREACH : rc;
}

/* Move what can move between a tunnel's channel and its socket. */
static void ssh_tunnel_pump(struct ssh_tunnel *t, bool *progress)
{
	ssize_t n;

	if (t->closing)
		return;
	if (t->to_fd_len == t->to_fd_off && !t->ch_eof) {
		n = libssh2_channel_read(t->ch, t->to_fd, sizeof(t->to_fd));
		if (n > 0) {
			t->to_fd_len = (size_t)n;
			t->to_fd_off = 0;
			*progress = true;
		} else if (n == 0 || (n != LIBSSH2_ERROR_EAGAIN)) {
			if (n < 0 || libssh2_channel_eof(t->ch)) {
				t->ch_eof = true;
				shutdown(t->fd, SHUT_WR);
				*progress = true;
			}
		}
	}
	while (t->to_fd_off < t->to_fd_len) {
		n = write(t->fd, t->to_fd + t->to_fd_off,
			  t->to_fd_len - t->to_fd_off);
		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				t->fd_eof = t->ch_eof = true;
				t->to_fd_off = t->to_fd_len;
			}
			break;
		}
		t->to_fd_off += (size_t)n;
		*progress = true;
	}
	if (t->to_ch_len == t->to_ch_off && !t->fd_eof) {
		n = read(t->fd, t->to_ch, sizeof(t->to_ch));
		if (n > 0) {
			t->to_ch_len = (size_t)n;
			t->to_ch_off = 0;
			*progress = true;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			t->fd_eof = true;
			libssh2_channel_send_eof(t->ch);
			*progress = true;
		}
	}
	while (t->to_ch_off < t->to_ch_len) {
		n = libssh2_channel_write(t->ch, t->to_ch + t->to_ch_off,
					  t->to_ch_len - t->to_ch_off);
		if (n <= 0) {
			if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
				t->fd_eof = t->ch_eof = true;
				t->to_ch_off = t->to_ch_len;
			}
			break;
		}
		t->to_ch_off += (size_t)n;
		*progress = true;
	}
	if (t->fd_eof && t->ch_eof && t->to_fd_off == t->to_fd_len &&
	    t->to_ch_off == t->to_ch_len)
		t->closing = true;
}

/* Free the tunnels that are done (or all, when the session is gone). */
static void ssh_tunnels_reap(struct ssh_conn *c, bool all)
{
	struct ssh_tunnel **pp = &c->tunnels;

	while (*pp) {
		struct ssh_tunnel *t = *pp;

		if (!all && !t->closing) {
			pp = &t->next;
			continue;
		}
		if (!all &&
		    libssh2_channel_free(t->ch) == LIBSSH2_ERROR_EAGAIN) {
			pp = &t->next;
			continue;
		}
		close(t->fd);
		*pp = t->next;
		free(t);
	}
}

/* The key-type bits of a host key for the knownhost API. */
static int ssh_key_bits(int type)
{
	switch (type) {
	case LIBSSH2_HOSTKEY_TYPE_RSA:
		return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
	case LIBSSH2_HOSTKEY_TYPE_DSS:
		return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
		return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
	case LIBSSH2_HOSTKEY_TYPE_ED25519:
		return LIBSSH2_KNOWNHOST_KEY_ED25519;
	default:
		return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
	}
}

/* Look the key up in one file: MATCH, MISMATCH or NOTFOUND (also when the
 * file does not exist). */
static int ssh_known_in(LIBSSH2_SESSION *s, const char *file, const char *host,
			int port, const char *key, size_t len, int bits)
{
	LIBSSH2_KNOWNHOSTS *kh;
	int rc = LIBSSH2_KNOWNHOST_CHECK_NOTFOUND;

	if (!file || !*file || access(file, R_OK) != 0)
		return rc;
	kh = libssh2_knownhost_init(s);
	if (!kh)
		return rc;
	/* A line libssh2 cannot read (a key type it lacks) stops the read
	 * there; the entries read before it are still checked. */
	libssh2_knownhost_readfile(kh, file, LIBSSH2_KNOWNHOST_FILE_OPENSSH);
	rc = libssh2_knownhost_checkp(kh, host, port, key, len,
				      LIBSSH2_KNOWNHOST_TYPE_PLAIN |
					      LIBSSH2_KNOWNHOST_KEYENC_RAW |
					      bits,
				      NULL);
	libssh2_knownhost_free(kh);
	return rc;
}

/* known_hosts key types and libssh2's bits for them. */
static const struct {
	const char *name;
	int bits;
} ssh_key_types[] = {
	{"ssh-ed25519", LIBSSH2_KNOWNHOST_KEY_ED25519},
	{"ecdsa-sha2-nistp256", LIBSSH2_KNOWNHOST_KEY_ECDSA_256},
	{"ecdsa-sha2-nistp384", LIBSSH2_KNOWNHOST_KEY_ECDSA_384},
	{"ecdsa-sha2-nistp521", LIBSSH2_KNOWNHOST_KEY_ECDSA_521},
	{"ssh-rsa", LIBSSH2_KNOWNHOST_KEY_SSHRSA},
};

int ssh_hosts_pin(const char *file, const char *name, const char *type,
		  const char *b64, char *err, size_t errlen)
{
	LIBSSH2_SESSION *s;
	LIBSSH2_KNOWNHOSTS *kh = NULL;
	struct libssh2_knownhost *e = NULL;
	int bits = -1, rc = 0;
	bool known = false;

	for (size_t i = 0; i < sizeof(ssh_key_types) / sizeof(ssh_key_types[0]);
	     i++)
		if (strcmp(type, ssh_key_types[i].name) == 0)
			bits = ssh_key_types[i].bits;
	if (bits < 0) {
		snprintf(err, errlen, "host key type %.60s is not supported",
			 type);
		return -EINVAL;
	}
	pthread_once(&ssh_once, ssh_global_init);
	pthread_mutex_lock(&ssh_hosts_lock);
	s = libssh2_session_init();
	if (s)
		kh = libssh2_knownhost_init(s);
	if (!kh) {
		rc = -ENOMEM;
	} else {
		if (access(file, R_OK) == 0)
			libssh2_knownhost_readfile(
				kh, file, LIBSSH2_KNOWNHOST_FILE_OPENSSH);
		/* A name already known keeps its keys: the connection's
		 * check then tells a changed key. */
		while (!known && libssh2_knownhost_get(kh, &e, e) == 0)
			known = e->name && strcmp(e->name, name) == 0;
		if (!known &&
		    (libssh2_knownhost_addc(
			     kh, name, NULL, b64, strlen(b64), NULL, 0,
			     LIBSSH2_KNOWNHOST_TYPE_PLAIN |
				     LIBSSH2_KNOWNHOST_KEYENC_BASE64 | bits,
			     NULL) ||
		     libssh2_knownhost_writefile(
			     kh, file, LIBSSH2_KNOWNHOST_FILE_OPENSSH)))
			rc = -EIO;
		libssh2_knownhost_free(kh);
	}
	if (s)
		libssh2_session_free(s);
	pthread_mutex_unlock(&ssh_hosts_lock);
	if (rc)
		snprintf(err, errlen,
			 "cannot record the host key of %.120s in %.300s", name,
			 file);
	return rc;
}

static int ssh_record_key(struct ssh_conn *c, const char *key, size_t len,
			  int bits, char *err, size_t errlen)
{
	LIBSSH2_KNOWNHOSTS *kh;
	char name[300];
	int rc = 0;

	if (*c->p.key_alias)
		snprintf(name, sizeof(name), "%s", c->p.key_alias);
	else if (c->p.port == 22)
		snprintf(name, sizeof(name), "%s", c->p.host);
	else
		snprintf(name, sizeof(name), "[%s]:%d", c->p.host, c->p.port);
	pthread_mutex_lock(&ssh_hosts_lock);
	kh = libssh2_knownhost_init(c->s);
	if (!kh) {
		rc = -ENOMEM;
	} else {
		if (access(c->p.own_hosts, R_OK) == 0)
			libssh2_knownhost_readfile(
				kh, c->p.own_hosts,
				LIBSSH2_KNOWNHOST_FILE_OPENSSH);
		if (libssh2_knownhost_addc(
			    kh, name, NULL, key, len, NULL, 0,
			    LIBSSH2_KNOWNHOST_TYPE_PLAIN |
				    LIBSSH2_KNOWNHOST_KEYENC_RAW | bits,
			    NULL) ||
		    libssh2_knownhost_writefile(kh, c->p.own_hosts,
						LIBSSH2_KNOWNHOST_FILE_OPENSSH))
			rc = -EIO;
		libssh2_knownhost_free(kh);
	}
	pthread_mutex_unlock(&ssh_hosts_lock);
	if (rc)
		snprintf(err, errlen,
			 "cannot record the host key of %s in %.300s", c->name,
			 c->p.own_hosts);
	return rc;
}

static void ssh_fingerprint(LIBSSH2_SESSION *s, char *out, size_t outlen)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *h = (const unsigned char *)libssh2_hostkey_hash(
		s, LIBSSH2_HOSTKEY_HASH_SHA256);
	size_t o;

	o = (size_t)snprintf(out, outlen, "SHA256:");
	if (!h || o >= outlen)
		return;
	/* 32 bytes, unpadded, as ssh-keygen -l prints it. */
	for (size_t i = 0; i < 32 && o + 5 < outlen; i += 3) {
		unsigned v = (unsigned)h[i] << 16;
		size_t k = 32 - i;

		if (k > 1)
			v |= (unsigned)h[i + 1] << 8;
		if (k > 2)
			v |= h[i + 2];
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		if (k > 1)
			out[o++] = b64[(v >> 6) & 63];
		if (k > 2)
			out[o++] = b64[v & 63];
	}
	out[o] = '\0';
}

static int ssh_verify_host_key(struct ssh_conn *c, char *err, size_t errlen)
{
	char home_hosts[PATH_MAX], fp[64];
	const char *home = getenv("HOME");
	const char *files[3];
	size_t len = 0;
	int type = 0, bits, found = 0, keyport = c->p.port;
	const char *key = libssh2_session_hostkey(c->s, &len, &type);
	const char *keyname = c->p.host;

	if (!key) {
		snprintf(err, errlen, "%s sent no host key", c->name);
		return -EIO;
	}
	bits = ssh_key_bits(type);
	if (*c->p.key_alias) {
		keyname = c->p.key_alias;
		keyport = 22;
	}
	snprintf(home_hosts, sizeof(home_hosts), "%s/.ssh/known_hosts",
		 home ? home : "");
	files[0] = home ? home_hosts : NULL;
	files[1] = c->p.known_hosts;
	files[2] = c->p.own_hosts;
	ssh_fingerprint(c->s, fp, sizeof(fp));
	for (size_t i = 0; i < 3; i++) {
		int rc = ssh_known_in(c->s, files[i], keyname, keyport, key,
				      len, bits);

		if (rc == LIBSSH2_KNOWNHOST_CHECK_MATCH)
			return 0;
		if (rc == LIBSSH2_KNOWNHOST_CHECK_MISMATCH && !found)
			found = (int)i + 1;
	}
	if (found) {
		snprintf(err, errlen,
			 "the host key of %.100s port %d (%s) is not the one "
			 "recorded in %s: refusing to connect; if the machine "
			 "was really replaced, remove its old key from that "
			 "file",
			 c->p.host, c->p.port, fp, files[found - 1]);
		return -EIO;
	}
	if (c->p.record_new)
		return ssh_record_key(c, key, len, bits, err, errlen);
	snprintf(err, errlen,
		 "the host key of %.100s port %d (%s) is unknown: it is in "
		 "neither %.150s%s%.150s nor %.150s; check it and add it "
		 "(ssh-keyscan -p %d %.100s >> ~/.ssh/known_hosts)",
		 c->p.host, c->p.port, fp, home_hosts,
		 *c->p.known_hosts ? ", " : "", c->p.known_hosts,
		 c->p.own_hosts, c->p.port, c->p.host);
	return -EIO;
}

/* Keep the verified host key as a known_hosts key ("TYPE BASE64"): its
 * type is the first string of the key blob. */
static void ssh_keep_host_key(struct ssh_conn *c)
{
	char line[SSH_HOSTKEY_MAX];
	size_t len = 0, n;
	int type = 0;
	const unsigned char *key =
		(const unsigned char *)libssh2_session_hostkey(c->s, &len,
							       &type);

	line[0] = '\0';
	if (key && len > 4) {
		n = (size_t)key[0] << 24 | (size_t)key[1] << 16 |
		    (size_t)key[2] << 8 | key[3];
		if (n > 0 && n < 64 && 4 + n < len) {
			memcpy(line, key + 4, n);
			line[n] = ' ';
			if (sshkey_base64(key, len, line + n + 1,
					  sizeof(line) - n - 1))
				line[0] = '\0';
		}
	}
	pthread_mutex_lock(&c->lock);
	snprintf(c->hostkey, sizeof(c->hostkey), "%s", line);
	pthread_mutex_unlock(&c->lock);
}

static int ssh_check_host_key(struct ssh_conn *c, char *err, size_t errlen)
{
	int rc = ssh_verify_host_key(c, err, errlen);

	if (rc == 0)
		ssh_keep_host_key(c);
	return rc;
}

static int ssh_auth(struct ssh_conn *c, char *err, size_t errlen)
{
	static const char *const defaults[] = {"id_ed25519", "id_ecdsa",
					       "id_rsa"};
	const char *sock = getenv("SSH_AUTH_SOCK");
	const char *home = getenv("HOME");
	char tried[SSH_ERR_MAX] = "";
	char *msg = NULL;
	size_t ulen = strlen(c->p.user);

	if (sock && *sock) {
		LIBSSH2_AGENT *agent = libssh2_agent_init(c->s);
		int nkeys = 0;

		if (agent && libssh2_agent_connect(agent) == 0 &&
		    libssh2_agent_list_identities(agent) == 0) {
			struct libssh2_agent_publickey *id = NULL, *prev = NULL;

			while (libssh2_agent_get_identity(agent, &id, prev) ==
			       0) {
				nkeys++;
				if (libssh2_agent_userauth(agent, c->p.user,
							   id) == 0) {
					libssh2_agent_disconnect(agent);
					libssh2_agent_free(agent);
					return 0;
				}
				prev = id;
			}
		}
		snprintf(tried, sizeof(tried), "the %d keys of ssh-agent",
			 nkeys);
		if (agent) {
			libssh2_agent_disconnect(agent);
			libssh2_agent_free(agent);
		}
	}
	if (*c->p.keyfile) {
		if (libssh2_userauth_publickey_fromfile_ex(
			    c->s, c->p.user, (unsigned)ulen, NULL, c->p.keyfile,
			    NULL) == 0)
			return 0;
		libssh2_session_last_error(c->s, &msg, NULL, 0);
		snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried),
			 "%skey file %.200s (%.100s)",
			 *tried ? " and the " : "the ", c->p.keyfile,
			 msg ? msg : "refused");
	} else if (home) {
		for (size_t i = 0; i < 3; i++) {
			char path[PATH_MAX];

			snprintf(path, sizeof(path), "%s/.ssh/%s", home,
				 defaults[i]);
			if (access(path, R_OK) != 0)
				continue;
			if (libssh2_userauth_publickey_fromfile_ex(
				    c->s, c->p.user, (unsigned)ulen, NULL, path,
				    NULL) == 0)
				return 0;
			snprintf(tried + strlen(tried),
				 sizeof(tried) - strlen(tried), "%s%.100s",
				 *tried ? ", " : "", path);
		}
	}
	snprintf(err, errlen,
		 "%s refused the login as %s (tried %s); set config/user, or "
		 "a key with config/keyfile or config/sshflags -i FILE",
		 c->name, c->p.user,
		 *tried ? tried : "no key: no ssh-agent and no ~/.ssh/id_*");
	return -EACCES;
}

/* Ask for the algorithms of a kind in the order of want, then (with rest)
 * every other one this libssh2 has. Only what this libssh2 supports is
 * named (1.10 corrupts the list when it has to drop a name). */
static void ssh_prefer(LIBSSH2_SESSION *s, int method, const char *const *want,
		       size_t nwant, bool rest)
{
	const char **have = NULL;
	char pref[1024] = "";
	size_t o = 0;
	int n = libssh2_session_supported_algs(s, method, &have);

	for (size_t i = 0; i < nwant + (rest ? (size_t)(n > 0 ? n : 0) : 0);
	     i++) {
		const char *name = i < nwant ? want[i] : have[i - nwant];
		bool ok = false;

		for (int k = 0; k < n && !ok; k++)
			ok = strcmp(have[k], name) == 0;
		for (size_t j = 0; ok && i >= nwant && j < nwant; j++)
			ok = strcmp(want[j], name) != 0; /* named already */
		if (ok && o + strlen(name) + 2 < sizeof(pref))
			o += (size_t)snprintf(pref + o, sizeof(pref) - o,
					      "%s%s", o ? "," : "", name);
	}
	if (n > 0)
		libssh2_free(s, (void *)have);
	if (*pref)
		libssh2_session_method_pref(s, method, pref);
}

/* Host keys in the order known_hosts files usually hold them; of the
 * ciphers, AES-128 first: libssh2 1.10 encrypts one 16-byte block per
 * call, so the cipher's own cost shows (AES-128 has 10 rounds, AES-256
 * 14), and files/ moves its bytes through this session. */
static void ssh_prefer_algs(LIBSSH2_SESSION *s)
{
	static const char *const hostkeys[] = {"ssh-ed25519",
					       "ecdsa-sha2-nistp256",
					       "ecdsa-sha2-nistp384",
					       "ecdsa-sha2-nistp521",
					       "rsa-sha2-512",
					       "rsa-sha2-256",
					       "ssh-rsa"};
	static const char *const ciphers[] = {"aes128-ctr", "aes192-ctr",
					      "aes256-ctr"};

	ssh_prefer(s, LIBSSH2_METHOD_HOSTKEY, hostkeys,
		   sizeof(hostkeys) / sizeof(hostkeys[0]), false);
	ssh_prefer(s, LIBSSH2_METHOD_CRYPT_CS, ciphers,
		   sizeof(ciphers) / sizeof(ciphers[0]), true);
	ssh_prefer(s, LIBSSH2_METHOD_CRYPT_SC, ciphers,
		   sizeof(ciphers) / sizeof(ciphers[0]), true);
}

/* libssh2's reads of the session's socket, as its own but for noting
 * when bytes last came from the host (ssh_silent). */
static LIBSSH2_RECV_FUNC(ssh_recv)
{
	struct ssh_conn *c = *abstract;
	ssize_t n = recv(socket, buffer, length, flags);

	if (n < 0)
		return -errno; /* libssh2 takes -EAGAIN for "again" */
	if (n > 0)
		c->rx_ns = ssh_now_ns();
	return n;
}

/* A big file's writes (and a command's big input) leave in SSH packets
 * of up to 32 KiB, one send each. Those sent with MSG_MORE go out in full
 * segments (64 KiB on loopback), so sshd wakes once for two: a fourth
 * fewer context switches in all for a big file copied in. What a segment
 * holds back is pushed after each round (ssh_push), and small packets
 * (requests, acks, window adjusts) go at once. */
#define SSH_MORE_MIN 16384

static LIBSSH2_SEND_FUNC(ssh_send)
{
	struct ssh_conn *c = *abstract;
	ssize_t n;

	if (c->tcp && (length >= SSH_MORE_MIN || c->hold)) {
		flags |= MSG_MORE;
		c->corked = true;
	}
	n = send(socket, buffer, length, flags);
	if (n < 0)
		return -errno; /* as ssh_recv */
	return n;
}

/* Send what MSG_MORE held back: setting TCP_NODELAY, though it is set,
 * pushes the pending segment (tcp(7)). */
static void ssh_push(struct ssh_conn *c)
{
	int one = 1;

	if (!c->corked)
		return;
	c->corked = false;
	(void)setsockopt(c->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connect (blocking, bounded by connect_timeout_ms at each step). */
static int ssh_connect(struct ssh_conn *c, char *err, size_t errlen)
{
	int fd, rc;

	c->tried = true;
	if (c->via) {
		struct ssh_tunnel_req *t = calloc(1, sizeof(*t));

		if (!t) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		snprintf(t->host, sizeof(t->host), "%s", c->p.host);
		t->port = c->p.port;
		t->fd = -1;
		t->r.step = ssh_tunnel_step;
		t->r.lost = ssh_tunnel_lost;
		t->r.retry_ok = true;
		t->submitted_ns = ssh_now_ns();
		t->turn_until_ns = t->submitted_ns +
				   (int64_t)c->p.connect_timeout_ms * 1000000;
		t->r.deadline_ns = t->turn_until_ns;
		rc = ssh_submit(c->via, &t->r);
		if (rc) {
			snprintf(err, errlen, "%s", t->r.err);
			free(t);
			return rc;
		}
		fd = -1;
		rc = ssh_tunnel_wait(c, t, err, errlen, &fd);
		if (rc)
			return rc;
	} else {
		fd = ssh_tcp_connect(c, err, errlen);
		if (fd < 0)
			return fd;
	}
	/* Under the lock: ssh_conn_free shuts the socket to end a handshake
	 * that would otherwise wait for its timeout. */
	pthread_mutex_lock(&c->lock);
	c->sock = fd;
	c->tcp = c->via == NULL;
	c->corked = false;
	rc = c->stop;
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		snprintf(err, errlen, "the connection is closing");
		return -ESHUTDOWN;
	}
	c->s = libssh2_session_init_ex(NULL, NULL, NULL, c);
	if (!c->s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	libssh2_session_callback_set(c->s, LIBSSH2_CALLBACK_RECV,
				     (void *)ssh_recv);
	libssh2_session_callback_set(c->s, LIBSSH2_CALLBACK_SEND,
				     (void *)ssh_send);
	libssh2_session_set_blocking(c->s, 1);
	libssh2_session_set_timeout(c->s, c->p.connect_timeout_ms);
	ssh_prefer_algs(c->s);
	if (libssh2_session_handshake(c->s, fd)) {
		char *msg = NULL;
		int lerr = libssh2_session_last_error(c->s, &msg, NULL, 0);

		snprintf(err, errlen, "SSH handshake with %s failed: %s",
			 c->name, msg ? msg : "?");
		return lerr == LIBSSH2_ERROR_TIMEOUT ? -ETIMEDOUT
						     : -ECONNREFUSED;
	}
	rc = ssh_check_host_key(c, err, errlen);
	if (rc == 0)
		rc = ssh_auth(c, err, errlen);
	if (rc)
		return rc;
	libssh2_session_set_timeout(c->s, 0);
	libssh2_session_set_blocking(c->s, 0);
	if (c->p.keepalive_s > 0)
		libssh2_keepalive_config(c->s, 0, (unsigned)c->p.keepalive_s);
	c->keepalive_ns = ssh_now_ns() + (int64_t)c->p.keepalive_s * 1000000000;
	return 0;
}

/* Drop the session (no I/O can succeed: the socket is shut first). */
static void ssh_drop(struct ssh_conn *c)
{
	c->probing = false;
	c->probe_sent_ns = 0;
	c->probe.err[0] = '\0';
	c->busy_ns = 0;
	if (c->sock >= 0)
		shutdown(c->sock, SHUT_RDWR);
	ssh_tunnels_reap(c, true);
	while (c->zombies) { /* their channels go with the session */
		struct ssh_zombie *z = c->zombies;

		c->zombies = z->next;
		free(z);
	}
	if (c->s) {
		libssh2_session_set_blocking(c->s, 1);
		if (c->sftp)
			libssh2_sftp_shutdown(c->sftp);
		libssh2_session_free(c->s);
	}
	c->sftp = NULL;
	c->opener = NULL;		    /* its open went with the session */
	ssh_sftp_state_free(c->sftp_state); /* its channel went too */
	c->sftp_state = NULL;
	c->s = NULL;
	if (c->sock >= 0) {
		int fd = c->sock;

		pthread_mutex_lock(&c->lock);
		c->sock = -1;
		pthread_mutex_unlock(&c->lock);
		close(fd);
	}
	c->broken = false;
	c->idle_data = false;
}

static void ssh_set_status(struct ssh_conn *c, bool up, const char *why)
{
	bool changed;

	pthread_mutex_lock(&c->lock);
	changed = c->up != up || strcmp(c->why, why) != 0;
	c->up = up;
	snprintf(c->why, sizeof(c->why), "%s", why);
	if (changed)
		c->since_ns = ssh_wall_ns();
	if (!up)
		c->gen++;
	pthread_mutex_unlock(&c->lock);
	if (changed && c->changed)
		c->changed(c->ctx);
}

/* --- requests --- */

int ssh_submit(struct ssh_conn *c, struct ssh_req *r)
{
	uint64_t one = 1;
	struct ssh_req **pp;

	pthread_mutex_lock(&c->lock);
	/* Under the lock: ssh_req_done may be asked meanwhile. */
	r->next = NULL;
	r->done = false;
	r->rc = 0;
	r->state = 0;
	r->orphan = NULL;
	atomic_store(&r->cancel, 0);
	if (c->stop) {
		pthread_mutex_unlock(&c->lock);
		snprintf(r->err, sizeof(r->err), "%s is closing", c->name);
		return -ESHUTDOWN;
	}
	for (pp = &c->pending; *pp; pp = &(*pp)->next)
		;
	*pp = r;
	pthread_mutex_unlock(&c->lock);
	if (write(c->wake, &one, sizeof(one)) < 0) {
		/* The counter is saturated: the thread is awake anyway. */
	}
	return 0;
}

void ssh_cond_wait_briefly(pthread_cond_t *cv, pthread_mutex_t *mu)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 20L * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cv, mu, &until);
}

bool ssh_req_done(struct ssh_conn *c, const struct ssh_req *r)
{
	bool done;

	pthread_mutex_lock(&c->lock);
	done = r->done;
	pthread_mutex_unlock(&c->lock);
	return done;
}

void ssh_wake(struct ssh_conn *c)
{
	uint64_t one = 1;

	if (write(c->wake, &one, sizeof(one)) < 0) {
		/* The counter is saturated: the thread is awake anyway. */
	}
}

int ssh_wait(struct ssh_conn *c, struct ssh_req *r, int (*cancelled)(void *),
	     void *ctx)
{
	pthread_mutex_lock(&c->lock);
	while (!r->done) {
		if (!cancelled) {
			pthread_cond_wait(&c->cv, &c->lock);
			continue;
		}
		ssh_cond_wait_briefly(&c->cv, &c->lock);
		if (!r->done && !atomic_load(&r->cancel) && cancelled(ctx)) {
			uint64_t one = 1;

			atomic_store(&r->cancel, 1);
			/* A connection still being made would finish its
			 * handshake (or time out) before the request could
			 * stop: end the attempt now; its requests fail. */
			if (!c->up && c->sock >= 0)
				shutdown(c->sock, SHUT_RDWR);
			if (write(c->wake, &one, sizeof(one)) < 0) {
				/* awake anyway */
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return r->rc;
}

bool ssh_orphan(struct ssh_conn *c, struct ssh_req *r,
		void (*fn)(struct ssh_conn *c, struct ssh_req *r), bool cancel)
{
	bool done;

	pthread_mutex_lock(&c->lock);
	done = r->done;
	if (!done) {
		r->orphan = fn;
		if (cancel)
			atomic_store(&r->cancel, 1);
	}
	pthread_mutex_unlock(&c->lock);
	if (!done)
		ssh_wake(c);
	return !done;
}

static void ssh_complete(struct ssh_conn *c, struct ssh_req *r, int rc)
{
	void (*orphan)(struct ssh_conn *, struct ssh_req *);

	pthread_mutex_lock(&c->lock);
	r->rc = rc;
	r->done = true;
	orphan = r->orphan;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	if (orphan)
		orphan(c, r); /* r may be gone now */
}

/* Remove r from the active list. */
static void ssh_unlink(struct ssh_conn *c, struct ssh_req *r)
{
	struct ssh_req **pp;

	for (pp = &c->active; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return;
		}
}

/* The session is gone: requests that sent nothing yet start again on the
 * next one; the others fail. */
static void ssh_lose(struct ssh_conn *c, const char *why)
{
	struct ssh_req *r = c->active, *keep = NULL, **tail = &keep;

	ssh_drop(c);
	ssh_set_status(c, false, why);
	while (r) {
		struct ssh_req *next = r->next;

		if (r->lost)
			r->lost(r);
		if (r->retry_ok && r->state == 0) {
			r->retry_ok = false; /* once */
			r->next = NULL;
			*tail = r;
			tail = &r->next;
		} else {
			snprintf(r->err, sizeof(r->err),
				 "the connection to %s was lost: %s", c->name,
				 why);
			ssh_complete(c, r, -ECONNRESET);
		}
		r = next;
	}
	c->active = keep;
}

LIBSSH2_SFTP *ssh_conn_sftp(struct ssh_conn *c, struct ssh_req *r, int *rc)
{
	if (c->sftp)
		return c->sftp;
	if (!ssh_conn_open_begin(c, r)) {
		*rc = -EAGAIN;
		return NULL;
	}
	c->sftp = libssh2_sftp_init(c->s);
	if (!c->sftp) {
		*rc = ssh_conn_fail(c, r, "starting SFTP");
		if (*rc != -EAGAIN)
			ssh_conn_open_end(c, r);
	} else {
		ssh_conn_open_end(c, r);
		r->progress = true;
	}
	return c->sftp;
}

struct ssh_sftp_state **ssh_conn_sftp_state(struct ssh_conn *c)
{
	return &c->sftp_state;
}

/* --- commands --- */

struct ssh_exec_req {
	struct ssh_req r;
	struct ssh_exec *x;
	LIBSSH2_CHANNEL *ch;
	int stop_rc; /* -EINTR / -ETIMEDOUT once stopped */
	size_t errtext_len;
};

enum {
	SSH_X_OPEN,
	SSH_X_EXEC,
	SSH_X_EOF,
	SSH_X_READ,
	SSH_X_CLOSE,
	SSH_X_WAIT,
	SSH_X_FREE,
};

static void ssh_exec_lost(struct ssh_req *r)
{
	((struct ssh_exec_req *)r)->ch = NULL; /* freed with the session */
}

static int ssh_write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read what a stream has; 1 when something came, 0 when nothing, or the
 * libssh2 error. */
static int ssh_exec_drain(struct ssh_exec_req *e, int stream)
{
	struct ssh_exec *x = e->x;
	char buf[32768];
	int got = 0;

	for (;;) {
		ssize_t n = libssh2_channel_read_ex(e->ch, stream, buf,
						    sizeof(buf));

		if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
			return got;
		if (n < 0)
			return (int)n;
		got = 1;
		if (stream == 0 && x->out_fd >= 0) {
			ssh_write_all(x->out_fd, buf, (size_t)n);
		} else if (stream == 1 && x->err_fd >= 0) {
			ssh_write_all(x->err_fd, buf, (size_t)n);
		} else if (stream == 1) {
			size_t room = sizeof(x->errtext) - 1 - e->errtext_len;
			size_t k = (size_t)n < room ? (size_t)n : room;

			memcpy(x->errtext + e->errtext_len, buf, k);
			e->errtext_len += k;
			x->errtext[e->errtext_len] = '\0';
		}
	}
}

static int ssh_signal_number(const char *name)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"FPE", SIGFPE},
		    {"HUP", SIGHUP},   {"ILL", SIGILL},	  {"INT", SIGINT},
		    {"KILL", SIGKILL}, {"PIPE", SIGPIPE}, {"QUIT", SIGQUIT},
		    {"SEGV", SIGSEGV}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
		    {"USR2", SIGUSR2}, {"BUS", SIGBUS}};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (name && strcmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return SIGTERM;
}

static int ssh_exec_step(struct ssh_conn *c, struct ssh_req *r)
{
	struct ssh_exec_req *e = (struct ssh_exec_req *)r;
	int rc;

	if (r->state >= SSH_X_EXEC && r->state <= SSH_X_READ && !e->stop_rc) {
		if (atomic_load(&r->cancel)) {
			e->stop_rc = -EINTR;
			snprintf(r->err, sizeof(r->err), "interrupted");
		} else if (r->deadline_ns && ssh_now_ns() > r->deadline_ns) {
			e->stop_rc = -ETIMEDOUT;
			snprintf(r->err, sizeof(r->err),
				 "the command did not finish within %d s on "
				 "%s",
				 (e->x->timeout_ms + 999) / 1000, c->name);
		}
		if (e->stop_rc) {
			struct ssh_zombie *z = calloc(1, sizeof(*z));

			r->progress = true;
			if (z && e->ch) {
				z->ch = e->ch;
				z->next = c->zombies;
				c->zombies = z;
				e->ch = NULL;
				return e->stop_rc;
			}
			free(z);
			r->state = SSH_X_CLOSE;
		}
	}
	switch (r->state) {
	case SSH_X_OPEN:
		e->ch = ssh_conn_open_session(c, r, &rc);
		if (!e->ch)
			return rc;
		r->state = SSH_X_EXEC;
		/* fall through */
	case SSH_X_EXEC:
		rc = libssh2_channel_exec(e->ch, e->x->command);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (rc) {
			rc = ssh_conn_fail(c, r, "starting a command");
			e->stop_rc = rc;
			r->state = SSH_X_FREE;
			return -EAGAIN;
		}
		r->progress = true;
		r->state = SSH_X_EOF;
		/* fall through */
	case SSH_X_EOF:
		rc = libssh2_channel_send_eof(e->ch);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		r->state = SSH_X_READ;
		/* fall through */
	case SSH_X_READ: {
		int a = ssh_exec_drain(e, 0);
		int b = ssh_exec_drain(e, 1);

		if (a < 0 || b < 0) {
			e->stop_rc = ssh_conn_fail(c, r, "reading output");
			if (e->stop_rc == -EAGAIN)
				e->stop_rc = -EIO;
			return e->stop_rc;
		}
		if (a || b)
			r->progress = true;
		if (!libssh2_channel_eof(e->ch))
			return -EAGAIN;
		r->state = SSH_X_CLOSE;
	}
		/* fall through */
	case SSH_X_CLOSE:
		rc = libssh2_channel_close(e->ch);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		r->state = SSH_X_WAIT;
		/* fall through */
	case SSH_X_WAIT:
		rc = libssh2_channel_wait_closed(e->ch);
		if (rc == LIBSSH2_ERROR_EAGAIN) {
			/* Output after our close is still drained. */
			if (ssh_exec_drain(e, 0) > 0 ||
			    ssh_exec_drain(e, 1) > 0)
				r->progress = true;
			return -EAGAIN;
		}
		if (!e->stop_rc) {
			char *sig = NULL;

			e->x->exit_status =
				libssh2_channel_get_exit_status(e->ch);
			if (libssh2_channel_get_exit_signal(e->ch, &sig, NULL,
							    NULL, NULL, NULL,
							    NULL) == 0 &&
			    sig) {
				e->x->exit_status =
					128 + ssh_signal_number(sig);
				libssh2_free(c->s, sig);
			}
		}
		r->state = SSH_X_FREE;
		/* fall through */
	case SSH_X_FREE:
		if (e->ch &&
		    libssh2_channel_free(e->ch) == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		e->ch = NULL;
		r->progress = true;
		return e->stop_rc;
	default:
		return -EINVAL;
	}
}

int ssh_exec_start(struct ssh_conn *c, struct ssh_exec *x, char *err,
		   size_t errlen)
{
	struct ssh_exec_req *e = calloc(1, sizeof(*e));
	int rc;

	if (!e) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	x->exit_status = -1;
	x->errtext[0] = '\0';
	e->x = x;
	e->r.step = ssh_exec_step;
	e->r.lost = ssh_exec_lost;
	e->r.retry_ok = true;
	if (x->timeout_ms > 0)
		e->r.deadline_ns =
			ssh_now_ns() + (int64_t)x->timeout_ms * 1000000;
	rc = ssh_submit(c, &e->r);
	if (rc) {
		snprintf(err, errlen, "%s", e->r.err);
		free(e);
		return rc;
	}
	x->req = e;
	return 0;
}

int ssh_exec_wait(struct ssh_conn *c, struct ssh_exec *x,
		  int (*cancelled)(void *), void *ctx, char *err, size_t errlen)
{
	struct ssh_exec_req *e = x->req;
	int rc;

	if (!e)
		return -EINVAL;
	rc = ssh_wait(c, &e->r, cancelled, ctx);
	if (rc)
		snprintf(err, errlen, "%s", e->r.err);
	free(e);
	x->req = NULL;
	return rc;
}

int ssh_exec(struct ssh_conn *c, struct ssh_exec *x, int (*cancelled)(void *),
	     void *ctx, char *err, size_t errlen)
{
	int rc = ssh_exec_start(c, x, err, errlen);

	return rc ? rc : ssh_exec_wait(c, x, cancelled, ctx, err, errlen);
}

/* --- the connection's thread --- */

static void ssh_take_pending(struct ssh_conn *c)
{
	struct ssh_req **tail = &c->active;
	uint64_t v;

	if (read(c->wake, &v, sizeof(v)) < 0) {
		/* nothing was signalled */
	}
	while (*tail)
		tail = &(*tail)->next;
	pthread_mutex_lock(&c->lock);
	*tail = c->pending;
	c->pending = NULL;
	pthread_mutex_unlock(&c->lock);
}

static void ssh_fail_all(struct ssh_conn *c, int rc, const char *why)
{
	while (c->active) {
		struct ssh_req *r = c->active;

		c->active = r->next;
		ssh_conn_open_end(c, r);
		snprintf(r->err, sizeof(r->err), "%s", why);
		ssh_complete(c, r, rc);
	}
}

/* Drop what stopped commands still send, and free their channels once
 * sshd closed them. */
static void ssh_zombies_reap(struct ssh_conn *c, bool *moved)
{
	struct ssh_zombie **pp = &c->zombies;
	char buf[16384];

	while (*pp) {
		struct ssh_zombie *z = *pp;

		while (libssh2_channel_read_ex(z->ch, 0, buf, sizeof(buf)) >
			       0 ||
		       libssh2_channel_read_ex(z->ch, 1, buf, sizeof(buf)) > 0)
			*moved = true;
		if (!z->closed &&
		    libssh2_channel_close(z->ch) == LIBSSH2_ERROR_EAGAIN) {
			pp = &z->next;
			continue;
		}
		z->closed = true;
		if (libssh2_channel_free(z->ch) == LIBSSH2_ERROR_EAGAIN) {
			pp = &z->next;
			continue;
		}
		*pp = z->next;
		free(z);
		*moved = true;
	}
}

/* The probe of ssh_silent: a channel opened and at once closed (as a
 * stopped command's), which only the host's sshd can answer; a refusal
 * (too many channels) is an answer too. Not begun while another open
 * holds the turn (sshd may rightly take long to answer a tunnel's), nor
 * while a packet is half sent (libssh2 1.10 would take the probe's for
 * sent with it). */
static void ssh_probe_step(struct ssh_conn *c, bool *moved)
{
	LIBSSH2_CHANNEL *ch;
	int lerr;

	if (!c->probing)
		return;
	if (!c->probe_sent_ns && ((c->opener && c->opener != &c->probe) ||
				  (libssh2_session_block_directions(c->s) &
				   LIBSSH2_SESSION_BLOCK_OUTBOUND)))
		return;
	if (!ssh_conn_open_begin(c, &c->probe))
		return;
	if (!c->probe_sent_ns)
		c->probe_sent_ns = ssh_now_ns();
	ch = libssh2_channel_open_session(c->s);
	lerr = ch ? 0 : libssh2_session_last_errno(c->s);
	if (lerr == LIBSSH2_ERROR_EAGAIN)
		return;
	ssh_conn_open_end(c, &c->probe);
	c->probing = false;
	c->probe_sent_ns = 0;
	*moved = true;
	if (!ch) {
		if (ssh_fatal(lerr)) {
			snprintf(c->probe.err, sizeof(c->probe.err),
				 "opening a channel failed (%d)", lerr);
			c->broken = true;
		}
		return;
	}
	ssh_zombie_add(c, ch);
}

/* How long sshd may take to answer a tunnel's open: it connects to the
 * worker first, and Linux gives up a connect after about 127 s. */
#define SSH_TUNNEL_OPEN_NS (150LL * 1000000000)

/* Whether the host stopped answering: while a request waits (leaving
 * out the quiet ones), a keepalive interval without a byte from the host
 * starts a probe, and two more without a byte since the probe went end
 * the session, as OpenSSH's ServerAliveCountMax counts (three without a
 * byte when the probe could not go). A host whose kernel still acks but
 * whose sshd is hung or stopped is seen so (one gone from the network, by
 * TCP_USER_TIMEOUT). While a tunnel's open holds the turn to open, the
 * silence allowed is longer by SSH_TUNNEL_OPEN_NS. libssh2 1.10 cannot ask
 * keepalives for an answer: it would keep every answer for the life of the
 * session. The probe is sent by ssh_round (wait 0: at once). */
static bool ssh_silent(struct ssh_conn *c, int64_t now, int64_t *wait_ns)
{
	int64_t iv = (int64_t)c->p.keepalive_s * 1000000000, since, next;
	const struct ssh_req *r = c->active;

	while (r && r->quiet)
		r = r->next;
	if (iv <= 0 || !r) {
		c->busy_ns = 0;
		return false;
	}
	if (!c->busy_ns)
		c->busy_ns = now;
	if (c->probe_sent_ns && c->rx_ns < c->probe_sent_ns) {
		if (now - c->probe_sent_ns >= 2 * iv)
			return true;
		next = c->probe_sent_ns + 2 * iv - now;
	} else {
		/* No probe could go: sshd answers a session channel's open
		 * and the SFTP start at once, but a tunnel's only once it
		 * connected to the worker (for about two minutes of SYNs if
		 * the worker is gone), so that is allowed for too. */
		int64_t limit = 3 * iv;

		if (c->opener && c->opener->step == ssh_tunnel_step)
			limit += SSH_TUNNEL_OPEN_NS;
		since = c->rx_ns > c->busy_ns ? c->rx_ns : c->busy_ns;
		if (now - since >= limit)
			return true;
		if (now - since >= iv && !c->probing && now >= c->probe_ns) {
			c->probing = true;
			c->probe_ns = now + iv;
			next = 0;
		} else if (c->probing) { /* the probe waits for its turn */
			next = since + limit - now < iv ? since + limit - now
							: iv;
		} else {
			next = since + iv - now > 0 ? since + iv - now : iv;
		}
	}
	if (next < *wait_ns)
		*wait_ns = next;
	return false;
}

/* Run every request and tunnel once; true when anything moved. */
static bool ssh_round(struct ssh_conn *c)
{
	bool moved = false;
	struct ssh_req *r = c->active;

	while (r && !c->broken) {
		struct ssh_req *next = r->next;
		int rc;

		r->progress = false;
		rc = r->step(c, r);
		if (r->progress)
			moved = true;
		if (rc != -EAGAIN && !(rc == -ECONNRESET && c->broken)) {
			ssh_conn_open_end(c, r);
			ssh_unlink(c, r);
			ssh_complete(c, r, rc);
			moved = true;
		} else if (rc == -ECONNRESET) {
			break;
		}
		r = next;
	}
	if (!c->broken)
		ssh_probe_step(c, &moved);
	ssh_zombies_reap(c, &moved);
	for (struct ssh_tunnel *t = c->tunnels; t && !c->broken; t = t->next)
		ssh_tunnel_pump(t, &moved);
	ssh_tunnels_reap(c, false);
	return moved;
}

static void *ssh_thread(void *arg)
{
	struct ssh_conn *c = arg;

	for (;;) {
		struct pollfd pfd[64];
		size_t n = 0;
		int64_t now, wait_ns = 30LL * 1000000000;
		char err[SSH_ERR_MAX];
		bool stop;

		pthread_mutex_lock(&c->lock);
		stop = c->stop;
		pthread_mutex_unlock(&c->lock);
		if (stop)
			break;
		ssh_take_pending(c);
		if (c->active && !c->s) {
			int rc = ssh_connect(c, err, sizeof(err));

			if (rc) {
				ssh_drop(c);
				ssh_set_status(c, false, err);
				ssh_fail_all(c, rc, err);
				continue;
			}
			ssh_set_status(c, true, "");
		}
		if (c->s) {
			/* Run until nothing moves, then wait for the socket. */
			for (int i = 0; i < 1000; i++) {
				bool moved = ssh_round(c);

				ssh_push(c);
				if (!moved || c->broken)
					break;
			}
			if (c->broken) {
				snprintf(err, sizeof(err), "%s",
					 c->probe.err[0] ? c->probe.err
					 : c->active && c->active->err[0]
						 ? c->active->err
						 : "connection reset");
				ssh_lose(c, err);
				continue;
			}
		}
		now = ssh_now_ns();
		if (c->s && ssh_silent(c, now, &wait_ns)) {
			int64_t since =
				c->rx_ns > c->busy_ns ? c->rx_ns : c->busy_ns;

			snprintf(err, sizeof(err),
				 "the host answered nothing for %lld s",
				 (long long)((now - since) / 1000000000));
			ssh_lose(c, err);
			continue;
		}
		if (c->s && c->p.keepalive_s > 0 && now >= c->keepalive_ns) {
			int next = c->p.keepalive_s;

			if (libssh2_keepalive_send(c->s, &next) != 0 &&
			    libssh2_session_last_errno(c->s) !=
				    LIBSSH2_ERROR_EAGAIN) {
				ssh_lose(c, "no answer to keepalives");
				continue;
			}
			c->keepalive_ns = now + (int64_t)(next > 0 ? next : 1) *
							1000000000;
		}
		pfd[n].fd = c->wake;
		pfd[n++].events = POLLIN;
		if (c->s) {
			int dir = libssh2_session_block_directions(c->s);
			bool idle = !c->active && !c->tunnels && !c->zombies;

			pfd[n].fd = c->sock;
			pfd[n].events = 0;
			if (!(idle && c->idle_data))
				pfd[n].events |= POLLIN;
			if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
				pfd[n].events |= POLLOUT;
			n++;
			if (c->p.keepalive_s > 0 &&
			    c->keepalive_ns - now < wait_ns)
				wait_ns = c->keepalive_ns - now;
		}
		for (struct ssh_tunnel *t = c->tunnels; t && n < 64;
		     t = t->next) {
			pfd[n].fd = t->fd;
			pfd[n].events = 0;
			if (!t->fd_eof && t->to_ch_off == t->to_ch_len)
				pfd[n].events |= POLLIN;
			if (t->to_fd_off < t->to_fd_len)
				pfd[n].events |= POLLOUT;
			n++;
		}
		for (struct ssh_req *r = c->active; r; r = r->next)
			if (r->deadline_ns && r->deadline_ns - now < wait_ns)
				wait_ns = r->deadline_ns - now;
		if (c->tunnels && n >= 64)
			wait_ns = 10000000; /* more tunnels than slots */
		if (wait_ns < 0)
			wait_ns = 0;
		if (poll(pfd, n, (int)(wait_ns / 1000000) + 1) > 0 && c->s &&
		    !c->active && !c->tunnels && !c->zombies &&
		    (pfd[1].revents & POLLIN)) {
			/* Idle, and the socket speaks: closed, or news. */
			char b;
			ssize_t k = recv(c->sock, &b, 1, MSG_PEEK);

			if (k == 0 || (k < 0 && errno != EAGAIN))
				ssh_lose(c, "the connection was closed");
			else
				c->idle_data = true;
		}
		if (c->s && (pfd[1].revents & (POLLERR | POLLHUP)) &&
		    !c->active && !c->tunnels && !c->zombies)
			ssh_lose(c, "the connection was closed");
	}
	ssh_drop(c);
	/* and those submitted since the last round: nobody waits forever */
	ssh_take_pending(c);
	ssh_fail_all(c, -ESHUTDOWN, "the connection is closing");
	return NULL;
}

struct ssh_conn *ssh_conn_new(const struct ssh_params *p, struct ssh_conn *via,
			      void (*changed)(void *ctx), void *ctx)
{
	struct ssh_conn *c;

	pthread_once(&ssh_once, ssh_global_init);
	if (ssh_init_rc)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->p = *p;
	c->via = via;
	c->changed = changed;
	c->ctx = ctx;
	c->sock = -1;
	snprintf(c->name, sizeof(c->name), "%.63s@%.200s port %d", p->user,
		 p->host, p->port);
	c->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	if (c->wake < 0 || pthread_create(&c->thread, NULL, ssh_thread, c)) {
		if (c->wake >= 0)
			close(c->wake);
		pthread_mutex_destroy(&c->lock);
		pthread_cond_destroy(&c->cv);
		free(c);
		return NULL;
	}
	return c;
}

struct ssh_conn *ssh_conn_bulk(struct ssh_conn *c)
{
	struct ssh_conn *b;

	/* Through another node's session, both would share that session's
	 * thread and cipher: nothing to gain. */
	if (c->via)
		return NULL;
	pthread_mutex_lock(&c->lock);
	if (!c->bulk && !c->stop)
		c->bulk = ssh_conn_new(&c->p, NULL, NULL, NULL);
	b = c->bulk;
	pthread_mutex_unlock(&c->lock);
	return b;
}

void ssh_conn_stop(struct ssh_conn *c)
{
	uint64_t one = 1;
	struct ssh_conn *bulk;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	bulk = c->bulk;
	c->stop = true;
	/* A connect or handshake in progress ends now, not at its timeout. */
	if (c->sock >= 0)
		shutdown(c->sock, SHUT_RDWR);
	pthread_mutex_unlock(&c->lock);
	if (write(c->wake, &one, sizeof(one)) < 0) {
		/* awake anyway */
	}
	ssh_conn_stop(bulk);
}

void ssh_conn_free(struct ssh_conn *c)
{
	if (!c)
		return;
	ssh_conn_stop(c);
	/* c->stop is set: no bulk session is made any more. */
	ssh_conn_free(c->bulk);
	pthread_join(c->thread, NULL);
	/* Requests queued after the thread's last look fail too. */
	ssh_take_pending(c);
	ssh_fail_all(c, -ESHUTDOWN, "the connection is closing");
	close(c->wake);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cv);
	free(c);
}

int ssh_conn_hostkey(struct ssh_conn *c, char *buf, size_t len)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = *c->hostkey && strlen(c->hostkey) < len ? 0 : -1;
	if (rc == 0)
		memcpy(buf, c->hostkey, strlen(c->hostkey) + 1);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void ssh_conn_status(struct ssh_conn *c, char *buf, size_t len,
		     int64_t *since_ns)
{
	pthread_mutex_lock(&c->lock);
	if (c->up)
		snprintf(buf, len, "reachable");
	else if (!c->since_ns)
		snprintf(buf, len, "not connected yet");
	else
		snprintf(buf, len, "unreachable: %s", c->why);
	if (since_ns)
		*since_ns = c->since_ns;
	pthread_mutex_unlock(&c->lock);
}
