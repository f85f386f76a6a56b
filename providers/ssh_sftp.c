/* Files over SFTP on a node's persistent SSH session: each call is a
 * request that the connection's thread carries out step by step, so file
 * operations and commands share one session without blocking one another. */
#include "providers/ssh_sftp.h"

#include "providers/sftp_wire.h"
#include "providers/ssh_bigwrite.h"
#include "providers/ssh_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

struct ssh_file;

enum sftp_op {
	SFTP_STAT,
	SFTP_LIST,
	SFTP_OPEN,
	SFTP_READ,
	SFTP_WRITE,
	SFTP_WRITE_BEHIND,
	SFTP_FSYNC,
	SFTP_FSTAT,
	SFTP_FSETSTAT,
	SFTP_CLOSE,
	SFTP_SETSTAT,
	SFTP_MKDIR,
	SFTP_UNLINK,
	SFTP_RMDIR,
	SFTP_RENAME,
	SFTP_READLINK,
	SFTP_SYMLINK,
	SFTP_STATVFS,
	SFTP_FSTATVFS,
	SFTP_EXT,
	SFTP_BIG_OPEN,
	SFTP_BIG_FSTAT,
	SFTP_BIG_END,
};

/* libssh2 keeps one state per kind of SFTP call for the whole SFTP
 * session: two calls of a kind in flight at once would take each other's
 * answers. A request holds its kind's slot from its first call to its
 * end; the others of that kind wait their turn. */
enum sftp_slot {
	SLOT_NONE = -1,
	SLOT_STAT,
	SLOT_OPEN,
	SLOT_READDIR,
	SLOT_READ,
	SLOT_WRITE,
	SLOT_FSYNC,
	SLOT_FSTAT,
	SLOT_MKDIR,
	SLOT_UNLINK,
	SLOT_RMDIR,
	SLOT_RENAME,
	SLOT_SYMLINK,
	SLOT_STATVFS,
	SLOT_FSTATVFS,
	SLOT_EXT,
	SLOTS
};

/* The extensions libssh2 1.10 cannot send (hardlink@openssh.com,
 * posix-rename@openssh.com) go on a second SFTP channel of the session
 * (sftp_wire.c), one SSH_FXP_EXTENDED at a time, each answered by an
 * SSH_FXP_STATUS. */
enum {
	EXT_OPEN,
	EXT_READY,
	EXT_BROKEN,
};

struct ssh_sftp_state {
	struct ssh_req *slot[SLOTS];
	struct sftp_wire w;
	int ext;
	bool has_hardlink, has_posix_rename, has_lsetstat;
	uint32_t id;
};

struct sftp_entry {
	char name[256];
	LIBSSH2_SFTP_ATTRIBUTES a;
	unsigned long nlink; /* from the listing's long form; 0: unknown */
};

struct sftp_req {
	struct ssh_req r;
	enum sftp_op op;
	const char *path, *path2;
	unsigned long flags;
	long mode;
	LIBSSH2_SFTP_ATTRIBUTES attrs;
	struct ssh_file *f;
	LIBSSH2_SFTP_HANDLE *h;
	char *buf;
	const char *cbuf;
	size_t size, done;
	off_t off;
	struct sftp_entry *ents;
	size_t nents, cap;
	int sub;
	unsigned long status; /* the server's answer, when it gave one */
	LIBSSH2_SFTP_STATVFS vfs;
	const char *ext; /* SFTP_EXT: the extension's name */
	unsigned held;	 /* the slots it holds (bits) */
	/* lsetstat@openssh.com: an LSTAT sent right behind it, and its
	 * answer (the file as the change left it, for the getattr that
	 * follows each change) */
	bool want_after, got_after;
	LIBSSH2_SFTP_ATTRIBUTES after;
	/* SFTP_READ of a stripe: the handle seeks after it, so libssh2's
	 * read-ahead must not pass its end */
	bool bounded;
	/* SFTP_READ: seek even where the handle stands, which drops what
	 * libssh2 read ahead (a command may have changed those bytes) */
	bool reseek;
};

/* Write-behind: a write is answered once its bytes are in the handle's
 * buffer, and a request of the connection's thread (the writer) hands
 * them to libssh2, which keeps many SFTP writes in flight, until a call
 * that needs them on the node drains it (flush, fsync, fstat, read, close,
 * a write elsewhere in the file, an extension sent on the other channel).
 * A write the node refuses is reported by every later write, flush, fsync
 * and close of the handle. Under sftp_wb_mu. */
#define SFTP_WB_MAX ((size_t)8 << 20) /* then a write waits for acks */
static pthread_mutex_t sftp_wb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sftp_wb_cv = PTHREAD_COND_INITIALIZER;
static struct ssh_file *sftp_wb_files; /* with bytes not yet acked */
static uint64_t sftp_wb_ids;	       /* the last w_id given */

/* Commands ended on the nodes so far (ssh_sftp_files_changed). */
static _Atomic uint64_t sftp_commands;

/* Reads that the kernel's parallel read-ahead sends out of order would
 * each seek, which drops libssh2's read-ahead: the bytes skipped over by
 * a read ahead of an earlier one are kept for it instead. */
#define SFTP_SKIP_MAX ((size_t)8 << 20)
/* A read of at least SFTP_CHUNK_MIN in sequence (the kernel's read-ahead
 * of a big file) asks SFTP_CHUNK: fewer requests through the connection's
 * thread, and more of libssh2's read-ahead in flight. */
#define SFTP_CHUNK_MIN ((size_t)128 << 10)
#define SFTP_CHUNK     ((size_t)1 << 20)

/* Big transfers: libssh2 ciphers 16 bytes at a time on the connection's
 * thread, which then holds a copy to about half of what sshd and the link
 * carry. A file read or written in sequence for SFTP_TWIN_AFTER bytes
 * opens a second handle (the twin) on the host's bulk session, and the
 * two move alternate stripes of SFTP_STRIPE bytes: each stripe a handle's
 * own run, the two sessions' threads ciphering side by side. A file
 * opened read-write or to append keeps one handle (its order of reads and
 * writes is the session's). */
#define SFTP_TWIN_AFTER ((uint64_t)8 << 20)
#define SFTP_STRIPE	((size_t)4 << 20)
/* Reads the kernel's read-ahead sends out of order stay in the run. */
#define SFTP_RUN_GAP ((off_t)1 << 20)
/* The smallest read of a stripe's tail (libssh2 asks 4 times a read's
 * size ahead: a tail read of a quarter of what is left asks no more). */
#define SFTP_TAIL_MIN ((size_t)32 << 10)

/* Stripes read ahead: two for each handle, so that each has the next one
 * asked while the reader takes the one it has. */
#define SFTP_STRIPES 4

enum { TW_NONE, TW_OPENING, TW_ON, TW_OFF };
/* A handle's big writes (see SFTP_BIG_AFTER). */
enum { BIG_NONE, BIG_OPENING, BIG_ON, BIG_OFF };
enum { STRIPE_EMPTY, STRIPE_BUSY, STRIPE_FULL };

/* A stripe being read by one of the handles, or read: bytes [off, off +
 * len) of the file, of [off, end) asked (len short of it: the end of
 * the file). */
struct sftp_stripe {
	struct sftp_req q;
	char *buf;
	off_t off, end;
	size_t len;
	int state;
};

struct ssh_file {
	struct ssh_conn *c;
	LIBSSH2_SFTP_HANDLE *h;
	unsigned gen;
	/* One request at a time on a handle: its offset is libssh2's. */
	pthread_mutex_t lock;
	/* Write-behind: bytes [w_off, w_off + w_len) of the file at w_buf +
	 * w_head, not yet acked; w_in and w_acked count bytes ever buffered
	 * and acked (or dropped by an error). */
	struct ssh_file *w_next;
	bool w_listed, w_busy, w_stop;
	/* the writer is in libssh2 with the bytes; a caller waits to move
	 * them */
	bool w_sending, w_want;
	char *w_buf;
	size_t w_head, w_len, w_cap;
	off_t w_off;
	uint64_t w_in, w_acked;
	uint64_t w_id; /* given when listed: a settle's file is this one */
	int w_err;
	struct sftp_req w_req;
	/* Bytes [s_off, s_off + s_len) skipped by a read ahead of its turn;
	 * where the handle's reads stand (-1: unknown). */
	char *s_buf;
	size_t s_len, s_cap;
	off_t s_off, r_at;
	/* A file made by the open: its attributes, asked in the same flight
	 * as the open, for the fstat that follows a create (once, soon). */
	bool o_have;
	int64_t o_ns;
	struct stat o_st;
	/* The commands ended when what is kept of the file's bytes (s_buf,
	 * the stripes, libssh2's read-ahead) was read; reseek: the next
	 * read drops libssh2's. */
	uint64_t x_seen;
	bool reseek, a_busy;
	/* The size of a regular file as the open saw it, until the handle
	 * writes or sets a size, or a command ends (-1: unknown): a read that
	 * ends there short of what it asked is at the end of the file, with no
	 * request more to learn it (libssh2 cannot tell a short reply from a
	 * partial answer). */
	off_t o_size;
	/* The twin (see SFTP_TWIN_AFTER): the path it opens and its flags
	 * (0: none for this file), its open in flight, the run of calls in
	 * sequence so far; stripe i is read by handle i % 2 (0: this one). A
	 * twin's bulk_of is the session of the file it serves. */
	char *path;
	unsigned long tw_flags;
	int tw_state, big_state;
	struct ssh_file *tw;
	struct ssh_conn *bulk_of;
	struct sftp_twin_open *tw_open;
	off_t run_end;
	uint64_t run_len;
	struct sftp_stripe st[SFTP_STRIPES];
	/* ssh_sftp_ahead_start: the read of the file's first bytes in flight
	 * (a_busy) before anyone else has the file. */
	struct sftp_req a_req;
	/* The big writes (see SFTP_BIG_AFTER): their state (big_state, by
	 * tw_state), channel and handle, and their open while in flight. */
	struct ssh_bigwrite *big;
	struct sftp_req big_req;
};

/* The twin's open, apart from its file: a file closed while it is under
 * way leaves it to the bulk session's thread (sftp_twin_orphan), which
 * closes the handle it brings. t is that handle, of session t.c as of
 * generation t.gen. */
struct sftp_twin_open {
	struct sftp_req q;
	struct ssh_file t;
	char path[];
};

/* How long the attributes asked with a change stay the answer to the
 * getattr that follows it: the kernel asks at once. */
#define SFTP_AFTER_NS 100000000LL

void ssh_sftp_state_free(struct ssh_sftp_state *st)
{
	free(st); /* the channel went with the session */
}

static struct ssh_sftp_state *sftp_state(struct ssh_conn *c)
{
	struct ssh_sftp_state **st = ssh_conn_sftp_state(c);

	if (!*st)
		*st = calloc(1, sizeof(**st));
	return *st;
}

/* Take the slot of a kind of call: false while another request has it. */
static bool sftp_take(struct ssh_conn *c, struct sftp_req *q, enum sftp_slot k)
{
	struct ssh_sftp_state *st = sftp_state(c);

	if (k == SLOT_NONE || (q->held & (1U << k)))
		return true;
	if (!st || st->slot[k])
		return false;
	st->slot[k] = &q->r;
	q->held |= 1U << k;
	return true;
}

static void sftp_release(struct ssh_conn *c, struct sftp_req *q)
{
	struct ssh_sftp_state *st = *ssh_conn_sftp_state(c);

	for (int k = 0; st && k < SLOTS; k++)
		if ((q->held & (1U << k)) && st->slot[k] == &q->r)
			st->slot[k] = NULL;
	q->held = 0;
}

static int sftp_errno(unsigned long code)
{
	switch (code) {
	case LIBSSH2_FX_OK:
		return 0;
	case LIBSSH2_FX_EOF:
		return -ENODATA;
	case LIBSSH2_FX_NO_SUCH_FILE:
	case LIBSSH2_FX_NO_SUCH_PATH:
		return -ENOENT;
	case LIBSSH2_FX_PERMISSION_DENIED:
	case LIBSSH2_FX_WRITE_PROTECT:
		return -EACCES;
	case LIBSSH2_FX_FILE_ALREADY_EXISTS:
		return -EEXIST;
	case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
	case LIBSSH2_FX_QUOTA_EXCEEDED:
		return -ENOSPC;
	case LIBSSH2_FX_DIR_NOT_EMPTY:
		return -ENOTEMPTY;
	case LIBSSH2_FX_NOT_A_DIRECTORY:
		return -ENOTDIR;
	case LIBSSH2_FX_INVALID_FILENAME:
	case LIBSSH2_FX_BAD_MESSAGE: /* OpenSSH: EINVAL, ENAMETOOLONG */
		return -EINVAL;
	case LIBSSH2_FX_LINK_LOOP:
		return -ELOOP;
	case LIBSSH2_FX_OP_UNSUPPORTED:
		return -EOPNOTSUPP;
	case LIBSSH2_FX_NO_CONNECTION:
	case LIBSSH2_FX_CONNECTION_LOST:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* -EAGAIN, the SFTP status as -errno, or the session's error. lerr is what
 * the call returned (the session's last error may be an older one's), or 0
 * for a call that returned NULL (then the session's is this one's). */
static int sftp_fail(struct ssh_conn *c, struct sftp_req *q, LIBSSH2_SFTP *sftp,
		     const char *what, long lerr)
{
	if (lerr == 0)
		lerr = libssh2_session_last_errno(ssh_conn_session(c));

	if (lerr == LIBSSH2_ERROR_EAGAIN)
		return -EAGAIN;
	if (lerr == LIBSSH2_ERROR_SFTP_PROTOCOL) {
		int rc;

		q->status = libssh2_sftp_last_error(sftp);
		rc = sftp_errno(q->status);

		snprintf(q->r.err, sizeof(q->r.err), "%s %s on %s: %s", what,
			 q->path ? q->path : "a file", ssh_conn_name(c),
			 strerror(-rc));
		return rc;
	}
	return ssh_conn_fail(c, &q->r, what);
}

/* f's writes failed with rc (sftp_wb_mu held): the bytes not acked are
 * lost, but a twin's, which its file's own handle sends again (see
 * sftp_twin_end). */
static void sftp_wb_fail(struct ssh_file *f, int rc)
{
	f->w_err = rc;
	if (!f->bulk_of) {
		f->w_acked = f->w_in;
		f->w_len = 0;
	}
}

static void sftp_lost(struct ssh_req *r)
{
	struct sftp_req *q = (struct sftp_req *)r;

	q->h = NULL; /* freed with the session */
	q->held = 0; /* so were the slots */
	q->sub = 0;  /* one that sent nothing may start again */
	if (q->op == SFTP_LIST) {
		q->nents = 0;
		q->r.rc = 0;
	}
	if (q->op == SFTP_WRITE_BEHIND) {
		pthread_mutex_lock(&sftp_wb_mu);
		sftp_wb_fail(q->f, -EIO);
		pthread_cond_broadcast(&sftp_wb_cv);
		pthread_mutex_unlock(&sftp_wb_mu);
	}
}

/* The link count in OpenSSH's `ls -l` form of an entry ("-rw-r--r--  2
 * user group ..."): SFTP version 3's attributes have none. */
static unsigned long sftp_longname_nlink(const char *l)
{
	const char *p = strchr(l, ' ');
	char *end;
	unsigned long n;

	if (!p)
		return 0;
	n = strtoul(p, &end, 10);
	return end != p && *end == ' ' ? n : 0;
}

static int sftp_list_step(struct ssh_conn *c, struct sftp_req *q,
			  LIBSSH2_SFTP *sftp)
{
	if (q->sub == 0) {
		q->h = libssh2_sftp_open_ex(sftp, q->path,
					    (unsigned)strlen(q->path), 0, 0,
					    LIBSSH2_SFTP_OPENDIR);
		if (!q->h)
			return sftp_fail(c, q, sftp, "listing", 0);
		q->sub = 1;
		q->r.progress = true;
	}
	while (q->sub == 1) {
		struct sftp_entry e;
		char longname[512];
		int n = libssh2_sftp_readdir_ex(q->h, e.name, sizeof(e.name),
						longname, sizeof(longname),
						&e.a);

		if (n == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (n < 0) {
			q->r.rc = sftp_fail(c, q, sftp, "listing", n);
			q->sub = 2;
			break;
		}
		q->r.progress = true;
		if (n == 0) {
			q->sub = 2;
			break;
		}
		if (q->nents == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 32;
			struct sftp_entry *ne =
				realloc(q->ents, cap * sizeof(*ne));

			if (!ne) {
				q->r.rc = -ENOMEM;
				q->sub = 2;
				break;
			}
			q->ents = ne;
			q->cap = cap;
		}
		e.nlink = sftp_longname_nlink(longname);
		q->ents[q->nents++] = e;
	}
	if (libssh2_sftp_close_handle(q->h) == LIBSSH2_ERROR_EAGAIN)
		return -EAGAIN;
	q->h = NULL;
	return q->r.rc == -ECONNRESET ? -ECONNRESET : q->r.rc;
}

/* libssh2 1.10 asks four times the buffer it is given ahead, in requests
 * of at most 30,000 bytes: a small read (a small file's first page or
 * two) given 7,500 bytes at a time is one request, where 8 KiB at once
 * were two, the second past the end of the file. */
#define SFTP_SMALL_READ ((size_t)32 << 10)
#define SFTP_ONE_READ	((size_t)7500)

/* Read or write q->size bytes at q->off (a short read at the end). */
static int sftp_transfer(struct ssh_conn *c, struct sftp_req *q,
			 LIBSSH2_SFTP *sftp)
{
	bool rd = q->op == SFTP_READ;

	/* A seek drops libssh2's read-ahead: only when needed. */
	if (q->sub == 0) {
		if (q->reseek ||
		    libssh2_sftp_tell64(q->f->h) != (libssh2_uint64_t)q->off)
			libssh2_sftp_seek64(q->f->h, (libssh2_uint64_t)q->off);
		q->sub = 1;
	}
	while (q->done < q->size) {
		size_t step = q->size - q->done;
		ssize_t n;

		if (rd && q->size <= SFTP_SMALL_READ && step > SFTP_ONE_READ)
			step = SFTP_ONE_READ;
		if (rd && q->bounded && step / 4 > SFTP_TAIL_MIN)
			step /= 4;
		else if (rd && q->bounded && step > SFTP_TAIL_MIN)
			step = SFTP_TAIL_MIN;
		n = rd ? libssh2_sftp_read(q->f->h, q->buf + q->done, step)
		       : libssh2_sftp_write(q->f->h, q->cbuf + q->done, step);

		if (n == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (n < 0)
			return sftp_fail(c, q, sftp, rd ? "reading" : "writing",
					 (long)n);
		q->r.progress = true;
		if (n == 0 && rd)
			break;
		q->done += (size_t)n;
		/* short of what was asked, right at the size the open saw:
		 * the end (a full answer there may have more behind it) */
		if (rd && (size_t)n < step &&
		    q->off + (off_t)q->done == q->f->o_size)
			break;
	}
	return 0;
}

static void sftp_wb_wait(void);

/* Hand the bytes not acked yet to libssh2, or to the big writes: how
 * many more are acked, -EAGAIN, or -errno. */
static ssize_t sftp_wb_send(struct ssh_conn *c, struct sftp_req *q,
			    LIBSSH2_SFTP *sftp, const char *from, size_t len)
{
	struct ssh_file *f = q->f;
	ssize_t n;

	if (f->big_state == BIG_ON) {
		n = ssh_bigwrite_send(c, &q->r, f->big, from, len, f->w_off,
				      &q->status);
		if (n == -EPERM && q->status) {
			n = sftp_errno(q->status);
			snprintf(q->r.err, sizeof(q->r.err),
				 "writing a file on %s: %s", ssh_conn_name(c),
				 strerror((int)-n));
		}
		return n;
	}
	n = libssh2_sftp_write(f->h, from, len);
	if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
		return -EAGAIN;
	return n < 0 ? sftp_fail(c, q, sftp, "writing", (long)n) : n;
}

/* The writer of q->f (see SFTP_WB_MAX): hands libssh2 the buffered bytes
 * again and again (it sends what it has not sent yet and answers how many
 * more were acked), until a drain asks it to stop with nothing left. */
static int sftp_write_behind(struct ssh_conn *c, struct sftp_req *q,
			     LIBSSH2_SFTP *sftp)
{
	struct ssh_file *f = q->f;
	int rc = -EAGAIN;
	bool idle;

	pthread_mutex_lock(&sftp_wb_mu);
	if (q->sub == 0 && f->w_len) {
		if (libssh2_sftp_tell64(f->h) != (libssh2_uint64_t)f->w_off)
			libssh2_sftp_seek64(f->h, (libssh2_uint64_t)f->w_off);
		q->sub = 1;
	}
	while (f->w_len) {
		const char *from;
		size_t len;
		ssize_t n;

		/* libssh2 ciphers and sends without the lock, so that the
		 * other sessions' writers, and callers buffering more bytes
		 * behind these, go on meanwhile; a caller that must move
		 * these bytes (sftp_wb_put) waits until the call returns. */
		while (f->w_want)
			sftp_wb_wait();
		if (!f->w_len)
			break;
		from = f->w_buf + f->w_head;
		len = f->w_len;
		f->w_sending = true;
		pthread_mutex_unlock(&sftp_wb_mu);
		n = sftp_wb_send(c, q, sftp, from, len);
		pthread_mutex_lock(&sftp_wb_mu);
		f->w_sending = false;
		if (f->w_want)
			pthread_cond_broadcast(&sftp_wb_cv);
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			rc = (int)n;
			sftp_wb_fail(f, rc);
			break;
		}
		q->r.progress = true;
		f->w_head += (size_t)n;
		f->w_len -= (size_t)n;
		f->w_off += (off_t)n;
		f->w_acked += (uint64_t)n;
	}
	if (f->w_len == 0) {
		f->w_head = 0;
		q->sub = 0; /* the next bytes may start elsewhere */
		if (f->w_stop && rc == -EAGAIN)
			rc = 0;
	}
	if (q->r.progress || rc != -EAGAIN)
		pthread_cond_broadcast(&sftp_wb_cv);
	idle = f->w_len == 0;
	q->r.quiet = rc == -EAGAIN && idle;
	pthread_mutex_unlock(&sftp_wb_mu);
	/* Idle, it lets other files' writes have libssh2's one write. */
	if (rc == -EAGAIN && idle)
		sftp_release(c, q);
	return rc;
}

/* Append an SSH string to the extension channel's outgoing packet. */
static bool ext_put_str(struct ssh_sftp_state *st, const char *str)
{
	return sftp_wire_put_str(&st->w, str, strlen(str));
}

/* Owners and times as SSH_FXP_ATTRS (all lsetstat@openssh.com takes for
 * a link). */
static bool ext_put_attrs(struct ssh_sftp_state *st,
			  const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	unsigned long f = a->flags & (LIBSSH2_SFTP_ATTR_UIDGID |
				      LIBSSH2_SFTP_ATTR_ACMODTIME);
	unsigned char *p = st->w.out + st->w.out_len;

	if (st->w.out_len + 20 > sizeof(st->w.out))
		return false;
	sftp_wire_put32(p, (uint32_t)f);
	p += 4;
	if (f & LIBSSH2_SFTP_ATTR_UIDGID) {
		sftp_wire_put32(p, (uint32_t)a->uid);
		sftp_wire_put32(p + 4, (uint32_t)a->gid);
		p += 8;
	}
	if (f & LIBSSH2_SFTP_ATTR_ACMODTIME) {
		sftp_wire_put32(p, (uint32_t)a->atime);
		sftp_wire_put32(p + 4, (uint32_t)a->mtime);
		p += 8;
	}
	st->w.out_len = (size_t)(p - st->w.out);
	return true;
}

static int ext_broken(struct ssh_sftp_state *st, struct sftp_req *q,
		      const char *why)
{
	st->ext = EXT_BROKEN;
	snprintf(q->r.err, sizeof(q->r.err), "SFTP extensions: %s", why);
	return -EIO;
}

/* The extension channel up to the server's SSH_FXP_VERSION, and the
 * extensions it announced: 0 when ready. */
static int ext_start(struct ssh_conn *c, struct sftp_req *q,
		     struct ssh_sftp_state *st)
{
	int rc;

	if (st->ext == EXT_READY && !st->w.broken)
		return 0;
	if (st->ext != EXT_OPEN || st->w.broken)
		return -EOPNOTSUPP;
	rc = sftp_wire_open(c, &q->r, &st->w);
	if (rc)
		return rc;
	st->has_hardlink = sftp_wire_has_ext(&st->w, "hardlink@openssh.com");
	st->has_posix_rename =
		sftp_wire_has_ext(&st->w, "posix-rename@openssh.com");
	st->has_lsetstat = sftp_wire_has_ext(&st->w, "lsetstat@openssh.com");
	st->ext = EXT_READY;
	return 0;
}

/* The two u32 at p + *off (n bytes in all) into x and y, *off past them;
 * false when cut short. */
static bool ext_get_two(const unsigned char *p, size_t n, size_t *off,
			unsigned long *x, unsigned long *y)
{
	if (n < *off + 8)
		return false;
	*x = sftp_wire_get32(p + *off);
	*y = sftp_wire_get32(p + *off + 4);
	*off += 8;
	return true;
}

/* SSH_FXP_ATTRS at p (n bytes) into a; false when cut short. */
static bool ext_get_attrs(const unsigned char *p, size_t n,
			  LIBSSH2_SFTP_ATTRIBUTES *a)
{
	unsigned long hi, lo;
	size_t off = 4;

	memset(a, 0, sizeof(*a));
	if (n < 4)
		return false;
	a->flags = sftp_wire_get32(p);
	if (a->flags & LIBSSH2_SFTP_ATTR_SIZE) {
		if (!ext_get_two(p, n, &off, &hi, &lo))
			return false;
		a->filesize = ((libssh2_uint64_t)hi << 32) | lo;
	}
	if ((a->flags & LIBSSH2_SFTP_ATTR_UIDGID) &&
	    !ext_get_two(p, n, &off, &a->uid, &a->gid))
		return false;
	if (a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) {
		if (n < off + 4)
			return false;
		a->permissions = sftp_wire_get32(p + off);
		off += 4;
	}
	return !(a->flags & LIBSSH2_SFTP_ATTR_ACMODTIME) ||
	       ext_get_two(p, n, &off, &a->atime, &a->mtime);
}

/* An SSH_FXP_LSTAT of path after the packet in st->w.out. */
static bool ext_put_lstat(struct ssh_sftp_state *st, const char *path)
{
	size_t at = st->w.out_len;

	if (at + 9 > sizeof(st->w.out))
		return false;
	st->w.out_len += 9;
	st->w.out[at + 4] = 7; /* SSH_FXP_LSTAT */
	sftp_wire_put32(st->w.out + at + 5, ++st->id);
	if (!ext_put_str(st, path))
		return false;
	sftp_wire_put32(st->w.out + at, (uint32_t)(st->w.out_len - at - 4));
	return true;
}

/* One SSH_FXP_EXTENDED q->ext with q->path and q->path2, or an
 * SSH_FXP_SYMLINK at q->path to q->path2, and its status. */
static int sftp_ext_step(struct ssh_conn *c, struct sftp_req *q)
{
	struct ssh_sftp_state *st = sftp_state(c);
	int rc;

	if (!st)
		return -ENOMEM;
	rc = ext_start(c, q, st);
	if (rc)
		return rc;
	if (q->sub == 0) {
		bool sym = q->op == SFTP_SYMLINK, ok;
		bool lset = !sym && strcmp(q->ext, "lsetstat@openssh.com") == 0;

		if (!sym && (lset ? !st->has_lsetstat
			     : strcmp(q->ext, "hardlink@openssh.com") == 0
				     ? !st->has_hardlink
				     : !st->has_posix_rename))
			return -EOPNOTSUPP;
		st->w.out_len = 9;
		st->w.out_off = 0;
		st->w.out[4] = sym ? 20 : 200; /* SSH_FXP_SYMLINK, _EXTENDED */
		sftp_wire_put32(st->w.out + 5, ++st->id);
		/* OpenSSH takes a link's target first, the reverse of the
		 * draft. */
		ok = sym ? sftp_wire_put_str(&st->w, q->path2,
					     strlen(q->path2)) &&
				     sftp_wire_put_str(&st->w, q->path,
						       strlen(q->path))
		     : lset ? sftp_wire_put_str(&st->w, q->ext,
						strlen(q->ext)) &&
				      sftp_wire_put_str(&st->w, q->path,
							strlen(q->path)) &&
				      ext_put_attrs(st, &q->attrs)
			    : sftp_wire_put_str(&st->w, q->ext,
						strlen(q->ext)) &&
				      sftp_wire_put_str(&st->w, q->path,
							strlen(q->path)) &&
				      sftp_wire_put_str(&st->w, q->path2,
							strlen(q->path2));
		if (!ok)
			return -ENAMETOOLONG;
		sftp_wire_put32(st->w.out, (uint32_t)st->w.out_len - 4);
		q->want_after = q->want_after && lset;
		if (q->want_after && !ext_put_lstat(st, q->path))
			return -ENAMETOOLONG;
		q->sub = 1;
	}
	if (q->sub == 1) {
		rc = sftp_wire_flush(c, &q->r, &st->w);
		if (rc)
			return rc;
		st->w.in_len = 0;
		q->sub = 2;
	}
	if (q->sub == 2) {
		rc = sftp_wire_read(c, &q->r, &st->w);
		if (rc)
			return rc;
		if (st->w.in_len < 17 || st->w.in[4] != 101 ||
		    sftp_wire_get32(st->w.in + 5) !=
			    st->id - (q->want_after ? 1 : 0))
			return ext_broken(st, q, "an answer out of place");
		q->status = sftp_wire_get32(st->w.in + 9);
		st->w.in_len = 0;
		q->sub = 3;
	}
	if (q->want_after) { /* the LSTAT's answer: ATTRS or STATUS */
		rc = sftp_wire_read(c, &q->r, &st->w);
		if (rc)
			return rc;
		if (st->w.in_len < 9 ||
		    sftp_wire_get32(st->w.in + 5) != st->id ||
		    (st->w.in[4] != 105 && st->w.in[4] != 101))
			return ext_broken(st, q, "an answer out of place");
		q->got_after = st->w.in[4] == 105 &&
			       ext_get_attrs(st->w.in + 9, st->w.in_len - 9,
					     &q->after);
	}
	rc = sftp_errno(q->status);
	if (rc)
		snprintf(q->r.err, sizeof(q->r.err), "%s %s on %s: %s",
			 q->ext ? q->ext : "symlink", q->path, ssh_conn_name(c),
			 strerror(-rc));
	return rc;
}

static enum sftp_slot sftp_slot_of(enum sftp_op op)
{
	switch (op) {
	case SFTP_STAT:
	case SFTP_SETSTAT:
		return SLOT_STAT;
	case SFTP_OPEN:
		return SLOT_OPEN;
	case SFTP_READ:
		return SLOT_READ;
	case SFTP_WRITE:
	case SFTP_WRITE_BEHIND:
		return SLOT_WRITE;
	case SFTP_FSYNC:
		return SLOT_FSYNC;
	case SFTP_FSTAT:
	case SFTP_FSETSTAT:
		return SLOT_FSTAT;
	case SFTP_MKDIR:
		return SLOT_MKDIR;
	case SFTP_UNLINK:
		return SLOT_UNLINK;
	case SFTP_RMDIR:
		return SLOT_RMDIR;
	case SFTP_RENAME:
		return SLOT_RENAME;
	case SFTP_READLINK:
		return SLOT_SYMLINK;
	case SFTP_STATVFS:
		return SLOT_STATVFS;
	case SFTP_FSTATVFS:
		return SLOT_FSTATVFS;
	case SFTP_SYMLINK:
	case SFTP_EXT:
		return SLOT_EXT;
	default:
		return SLOT_NONE;
	}
}

/* The requests on an open file's handle (q->f). */
#define SFTP_ON_FILE                                                           \
	(1U << SFTP_READ | 1U << SFTP_WRITE | 1U << SFTP_WRITE_BEHIND |        \
	 1U << SFTP_FSYNC | 1U << SFTP_FSTAT | 1U << SFTP_FSETSTAT |           \
	 1U << SFTP_CLOSE | 1U << SFTP_FSTATVFS | 1U << SFTP_BIG_OPEN |        \
	 1U << SFTP_BIG_FSTAT | 1U << SFTP_BIG_END)

static bool sftp_on_file(enum sftp_op op)
{
	return (SFTP_ON_FILE >> op) & 1U;
}

static int sftp_do(struct ssh_conn *c, struct sftp_req *q, LIBSSH2_SFTP *sftp)
{
	const char *p = q->path;
	unsigned plen = p ? (unsigned)strlen(p) : 0;
	int rc;

	switch (q->op) {
	case SFTP_STAT:
		rc = libssh2_sftp_stat_ex(sftp, p, plen, LIBSSH2_SFTP_LSTAT,
					  &q->attrs);
		return rc ? sftp_fail(c, q, sftp, "stat of", rc) : 0;
	case SFTP_LIST:
		return sftp_list_step(c, q, sftp);
	case SFTP_OPEN:
		q->h = libssh2_sftp_open_ex(sftp, p, plen, q->flags, q->mode,
					    LIBSSH2_SFTP_OPENFILE);
		return q->h ? 0 : sftp_fail(c, q, sftp, "opening", 0);
	case SFTP_READ:
	case SFTP_WRITE:
		return sftp_transfer(c, q, sftp);
	case SFTP_WRITE_BEHIND:
		return sftp_write_behind(c, q, sftp);
	case SFTP_FSYNC:
		rc = libssh2_sftp_fsync(q->f->h);
		return rc ? sftp_fail(c, q, sftp, "syncing", rc) : 0;
	case SFTP_FSTAT:
	case SFTP_FSETSTAT:
		rc = libssh2_sftp_fstat_ex(q->f->h, &q->attrs,
					   q->op == SFTP_FSETSTAT);
		return rc ? sftp_fail(c, q, sftp, "attributes of", rc) : 0;
	case SFTP_CLOSE:
		rc = libssh2_sftp_close_handle(q->f->h);
		return rc ? sftp_fail(c, q, sftp, "closing", rc) : 0;
	case SFTP_SETSTAT:
		rc = libssh2_sftp_stat_ex(sftp, p, plen, LIBSSH2_SFTP_SETSTAT,
					  &q->attrs);
		return rc ? sftp_fail(c, q, sftp, "changing", rc) : 0;
	case SFTP_MKDIR:
		rc = libssh2_sftp_mkdir_ex(sftp, p, plen, q->mode);
		return rc ? sftp_fail(c, q, sftp, "making directory", rc) : 0;
	case SFTP_UNLINK:
		rc = libssh2_sftp_unlink_ex(sftp, p, plen);
		return rc ? sftp_fail(c, q, sftp, "removing", rc) : 0;
	case SFTP_RMDIR:
		rc = libssh2_sftp_rmdir_ex(sftp, p, plen);
		return rc ? sftp_fail(c, q, sftp, "removing directory", rc) : 0;
	case SFTP_RENAME:
		rc = libssh2_sftp_rename_ex(sftp, p, plen, q->path2,
					    (unsigned)strlen(q->path2),
					    (long)q->flags);
		return rc ? sftp_fail(c, q, sftp, "renaming", rc) : 0;
	case SFTP_READLINK:
		rc = libssh2_sftp_symlink_ex(sftp, p, plen, q->buf,
					     (unsigned)q->size,
					     LIBSSH2_SFTP_READLINK);
		if (rc < 0)
			return sftp_fail(c, q, sftp, "reading link", rc);
		q->done = (size_t)rc;
		return 0;
	case SFTP_SYMLINK: /* libssh2 1.10 misreads its answer */
	case SFTP_EXT:
		return sftp_ext_step(c, q);
	case SFTP_STATVFS:
		rc = libssh2_sftp_statvfs(sftp, p, plen, &q->vfs);
		return rc ? sftp_fail(c, q, sftp, "file system of", rc) : 0;
	case SFTP_FSTATVFS:
		rc = libssh2_sftp_fstatvfs(q->f->h, &q->vfs);
		return rc ? sftp_fail(c, q, sftp, "file system of", rc) : 0;
	case SFTP_BIG_OPEN:
		return ssh_bigwrite_open(c, &q->r, q->f->big, &q->status);
	case SFTP_BIG_FSTAT: {
		const unsigned char *a;
		size_t n;

		rc = ssh_bigwrite_fstat(c, &q->r, q->f->big, &a, &n,
					&q->status);
		if (rc == 0 && !ext_get_attrs(a, n, &q->attrs))
			rc = -EIO;
		return rc;
	}
	case SFTP_BIG_END:
		ssh_bigwrite_free(c, q->f->big);
		q->f->big = NULL;
		return 0;
	default:
		return -EINVAL;
	}
}

static int sftp_step(struct ssh_conn *c, struct ssh_req *r)
{
	struct sftp_req *q = (struct sftp_req *)r;
	int rc = 0;
	LIBSSH2_SFTP *sftp = ssh_conn_sftp(c, r, &rc);

	if (!sftp)
		return rc;
	/* Given up by its waiter before it sent anything (a twin's open when
	 * its file closes): nothing to undo. */
	if (atomic_load(&r->cancel) && q->held == 0) {
		snprintf(r->err, sizeof(r->err), "cancelled");
		return -EINTR;
	}
	if (sftp_on_file(q->op)) {
		if (!q->f || !q->f->h)
			return -EBADF;
	} else if (!q->path) {
		return -EINVAL;
	}
	if (q->f && q->f->gen != ssh_conn_generation(c)) {
		snprintf(r->err, sizeof(r->err),
			 "the connection to %s was lost since the file was "
			 "opened; open it again",
			 ssh_conn_name(c));
		return -EIO;
	}
	if (!sftp_state(c))
		return -ENOMEM;
	/* The big writes are not libssh2's: no slot. */
	if (q->op == SFTP_LIST ? !sftp_take(c, q, SLOT_OPEN) ||
					 !sftp_take(c, q, SLOT_READDIR)
	    : q->op == SFTP_WRITE_BEHIND && q->f->big_state == BIG_ON
		    ? false
		    : !sftp_take(c, q, sftp_slot_of(q->op)))
		return -EAGAIN;
	rc = sftp_do(c, q, sftp);
	if (rc != -EAGAIN)
		sftp_release(c, q);
	return rc;
}

static void sftp_wb_settle(const struct ssh_conn *c, bool own);

/* Queue q (sftp_end waits for it): requests started one after the other
 * are in flight together when they are of different kinds, and the
 * server answers them in order. */
static int sftp_start(struct ssh_conn *c, struct sftp_req *q)
{
	q->r.step = sftp_step;
	q->r.lost = sftp_lost;
	/* Idempotent requests may be sent again on a new session. */
	q->r.retry_ok = q->op == SFTP_STAT || q->op == SFTP_LIST ||
			q->op == SFTP_READLINK || q->op == SFTP_STATVFS;
	q->r.deadline_ns = 0;
	return ssh_submit(c, &q->r);
}

static int sftp_end(struct ssh_conn *c, struct sftp_req *q, int rc)
{
	if (rc == 0)
		rc = ssh_wait(c, &q->r, NULL, NULL);
	if (rc == -ECONNRESET || rc == -ESHUTDOWN)
		rc = -EIO;
	return rc;
}

static int sftp_run(struct ssh_conn *c, struct sftp_req *q)
{
	int rc;

	/* The other channel's requests are not ordered after this one's
	 * writes: the writes in flight land first (a time set after them).
	 * Nor are the bulk session's: they land before any call by path. */
	if (q->op == SFTP_EXT || q->op == SFTP_SYMLINK)
		sftp_wb_settle(c, true);
	else if (!sftp_on_file(q->op))
		sftp_wb_settle(c, false);

	rc = sftp_start(c, q);
	return sftp_end(c, q, rc);
}

static int sftp_explain_file(struct ssh_file *f, bool grows, int rc);

/* Whether f's writer ended without being drained (an error, or the
 * connection gone: then nothing acks its bytes any more); sftp_wb_mu
 * held. */
static bool sftp_wb_dead(const struct ssh_file *f)
{
	return f->w_busy && ssh_req_done(f->c, &f->w_req.r);
}

/* Wait for the writers' news (sftp_wb_mu held); a writer ended by the
 * connection's end tells nothing, hence the bound. */
static void sftp_wb_wait(void)
{
	ssh_cond_wait_briefly(&sftp_wb_cv, &sftp_wb_mu);
}

/* Stop the writer of f once every byte buffered is acked (f->lock held):
 * 0, or the error of a write the node refused. */
static int sftp_wb_drain_one(struct ssh_file *f)
{
	int rc = 0;

	if (f->w_busy) {
		pthread_mutex_lock(&sftp_wb_mu);
		f->w_stop = true;
		pthread_mutex_unlock(&sftp_wb_mu);
		ssh_wake(f->c); /* an idle writer waits for the socket */
		rc = ssh_wait(f->c, &f->w_req.r, NULL, NULL);
	}
	if (f->w_busy && rc == -EIO && f->w_req.status == LIBSSH2_FX_FAILURE) {
		f->w_req.status = 0; /* explained once */
		rc = sftp_explain_file(f, true, rc);
		pthread_mutex_lock(&sftp_wb_mu);
		f->w_err = rc;
		pthread_mutex_unlock(&sftp_wb_mu);
	}
	pthread_mutex_lock(&sftp_wb_mu);
	if (f->w_busy && rc && !f->w_err)
		f->w_err = rc == -ECONNRESET || rc == -ESHUTDOWN ? -EIO : rc;
	if (f->w_err)
		sftp_wb_fail(f, f->w_err);
	f->w_busy = false;
	if (f->w_listed) {
		struct ssh_file **pp = &sftp_wb_files;

		while (*pp != f)
			pp = &(*pp)->w_next;
		*pp = f->w_next;
		f->w_listed = false;
	}
	rc = f->w_err;
	pthread_mutex_unlock(&sftp_wb_mu);
	return rc;
}

static int sftp_twin_end(struct ssh_file *f);

/* sftp_wb_drain_one of f and of its twin (which ends when its writes
 * failed, f sending what it had not got acked): the first error. */
static int sftp_wb_drain(struct ssh_file *f)
{
	int trc = f->tw && sftp_wb_drain_one(f->tw) != 0 ? sftp_twin_end(f) : 0,
	    rc = sftp_wb_drain_one(f); /* always: f leaves the list */

	return trc ? trc : rc;
}

/* Whether a settle on c (with own: c's files too) waits for f's writes. */
static bool sftp_wb_settles(const struct ssh_file *f, const struct ssh_conn *c,
			    bool own)
{
	return f->bulk_of == c || (own && f->c == c);
}

/* What one settle waits for: file f, while it is listed under the same
 * id, to have w_in bytes acked (its w_in when the settle began). */
struct sftp_wb_target {
	const struct ssh_file *f;
	uint64_t id, in;
};

#define SFTP_WB_TARGETS 64

/* Whether t is still to be waited for (sftp_wb_mu held). */
static bool sftp_wb_unsettled(const struct sftp_wb_target *t)
{
	const struct ssh_file *f = sftp_wb_files;

	while (f && (f != t->f || f->w_id != t->id))
		f = f->w_next;
	return f && f->w_busy && f->w_acked < t->in && !sftp_wb_dead(f);
}

/* Wait until every byte buffered so far by the twins of c's files, and
 * with own by c's files too, is acked (a writer keeps going until its
 * bytes are). Only the bytes buffered before the call: a copy that goes on
 * writing does not keep a rename or a listing waiting until it pauses.
 * Past SFTP_WB_TARGETS files, until the files have nothing unacked. */
static void sftp_wb_settle(const struct ssh_conn *c, bool own)
{
	struct sftp_wb_target t[SFTP_WB_TARGETS];
	const struct ssh_file *f;
	size_t n = 0, i;
	bool many = false;

	pthread_mutex_lock(&sftp_wb_mu);
	for (f = sftp_wb_files; f; f = f->w_next) {
		if (!sftp_wb_settles(f, c, own) || f->w_acked >= f->w_in)
			continue;
		if (n == SFTP_WB_TARGETS) {
			many = true;
			break;
		}
		t[n++] = (struct sftp_wb_target){f, f->w_id, f->w_in};
	}
	for (;;) {
		for (i = 0; i < n && !sftp_wb_unsettled(&t[i]); i++)
			;
		f = NULL;
		if (i == n && many)
			for (f = sftp_wb_files;
			     f && (!sftp_wb_settles(f, c, own) || !f->w_busy ||
				   f->w_acked >= f->w_in || sftp_wb_dead(f));
			     f = f->w_next)
				;
		if (i == n && !f)
			break;
		sftp_wb_wait();
	}
	pthread_mutex_unlock(&sftp_wb_mu);
}

/* A request on an open file (kernel read-ahead reads in parallel), after
 * the file's own writes. */
static int sftp_run_file(struct sftp_req *q)
{
	int rc;

	pthread_mutex_lock(&q->f->lock);
	if (q->op == SFTP_FSETSTAT) {
		q->f->s_len = 0; /* a new size or mode: read again */
		if (q->attrs.flags & LIBSSH2_SFTP_ATTR_SIZE)
			q->f->o_size = -1;
	}
	q->f->o_have = false;
	rc = sftp_wb_drain(q->f);
	if (rc == 0)
		rc = sftp_run(q->f->c, q);
	pthread_mutex_unlock(&q->f->lock);
	return rc;
}

static void sftp_to_stat(const LIBSSH2_SFTP_ATTRIBUTES *a, unsigned long nlink,
			 struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = (a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS)
			      ? (mode_t)a->permissions
			      : S_IFREG | 0644;
	st->st_nlink = nlink ? (nlink_t)nlink : S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_size = (off_t)a->filesize;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->filesize + 511) / 512);
	if (a->flags & LIBSSH2_SFTP_ATTR_UIDGID) {
		st->st_uid = (uid_t)a->uid;
		st->st_gid = (gid_t)a->gid;
	} else {
		st->st_uid = (uid_t)-1;
		st->st_gid = (gid_t)-1;
	}
	st->st_atim.tv_sec = (time_t)a->atime;
	st->st_mtim.tv_sec = (time_t)a->mtime;
	st->st_ctim.tv_sec = (time_t)a->mtime;
}

/* The server said only "failure" (SFTP version 3 has no other word for
 * most errors of the file system). */
static bool sftp_failure(const struct sftp_req *q, int rc)
{
	return rc == -EIO && q->status == LIBSSH2_FX_FAILURE;
}

int ssh_sftp_stat(struct ssh_conn *c, const char *path, struct stat *st)
{
	struct sftp_req q = {.op = SFTP_STAT, .path = path};
	int rc = sftp_run(c, &q);

	if (rc == 0)
		sftp_to_stat(&q.attrs, 0, st);
	return rc;
}

static void sftp_to_statvfs(const LIBSSH2_SFTP_STATVFS *v, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = (unsigned long)v->f_bsize;
	st->f_frsize = (unsigned long)v->f_frsize;
	st->f_blocks = (fsblkcnt_t)v->f_blocks;
	st->f_bfree = (fsblkcnt_t)v->f_bfree;
	st->f_bavail = (fsblkcnt_t)v->f_bavail;
	st->f_files = (fsfilcnt_t)v->f_files;
	st->f_ffree = (fsfilcnt_t)v->f_ffree;
	st->f_favail = (fsfilcnt_t)v->f_favail;
	st->f_fsid = (unsigned long)v->f_fsid;
	st->f_flag = ((v->f_flag & LIBSSH2_SFTP_ST_RDONLY) ? ST_RDONLY : 0) |
		     ((v->f_flag & LIBSSH2_SFTP_ST_NOSUID) ? ST_NOSUID : 0);
	st->f_namemax = (unsigned long)v->f_namemax;
}

int ssh_sftp_statvfs(struct ssh_conn *c, const char *path, struct statvfs *st)
{
	struct sftp_req q = {.op = SFTP_STATVFS, .path = path};
	int rc = sftp_run(c, &q);

	if (rc == 0)
		sftp_to_statvfs(&q.vfs, st);
	return rc;
}

/* What "failure" hid, as the file system tells: read-only (-EROFS), full
 * (-ENOSPC, when the call makes or grows something), or rc. path, or its
 * directory when it does not exist. */
static int sftp_explain(struct ssh_conn *c, const char *path, bool grows,
			int rc)
{
	struct statvfs v;
	char dir[4096];
	const char *slash = strrchr(path, '/');

	if (ssh_sftp_statvfs(c, path, &v) != 0) {
		if (!slash || (size_t)(slash - path) >= sizeof(dir))
			return rc;
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		if (ssh_sftp_statvfs(c, slash == path ? "/" : dir, &v) != 0)
			return rc;
	}
	if (v.f_flag & ST_RDONLY)
		return -EROFS;
	if (grows && (v.f_bavail == 0 || v.f_favail == 0))
		return -ENOSPC;
	return rc;
}

static int sftp_explain_file(struct ssh_file *f, bool grows, int rc)
{
	struct sftp_req q = {.op = SFTP_FSTATVFS, .f = f};
	struct statvfs v;

	/* f->lock held: after the file's writes */
	if (sftp_run(f->c, &q) != 0)
		return rc;
	sftp_to_statvfs(&q.vfs, &v);
	if (v.f_flag & ST_RDONLY)
		return -EROFS;
	if (grows && (v.f_bavail == 0 || v.f_favail == 0))
		return -ENOSPC;
	return rc;
}

int ssh_sftp_readdir(struct ssh_conn *c, const char *path,
		     int (*fn)(void *ctx, const char *name,
			       const struct stat *st),
		     void *ctx)
{
	struct sftp_req q = {.op = SFTP_LIST, .path = path};
	int rc = sftp_run(c, &q);

	for (size_t i = 0; rc == 0 && i < q.nents; i++) {
		struct stat st;

		sftp_to_stat(&q.ents[i].a, q.ents[i].nlink, &st);
		if (fn(ctx, q.ents[i].name, &st))
			break;
	}
	free(q.ents);
	return rc;
}

/* Bits of a new file's mode that the server's own umask (022 as a rule)
 * would take away: then the mode is set again after the call. */
#define SFTP_UMASKED 022

int ssh_sftp_open(struct ssh_conn *c, const char *path, int flags, mode_t mode,
		  struct ssh_file **out, struct stat *after)
{
	struct sftp_req q = {.op = SFTP_OPEN, .path = path, .mode = mode},
			s = {.op = SFTP_STAT, .path = path};
	int acc = flags & O_ACCMODE, rc, src;
	struct stat st;

	q.flags = (acc == O_RDONLY || acc == O_RDWR ? LIBSSH2_FXF_READ : 0) |
		  (acc == O_WRONLY || acc == O_RDWR ? LIBSSH2_FXF_WRITE : 0) |
		  ((flags & O_CREAT) ? LIBSSH2_FXF_CREAT : 0) |
		  ((flags & O_TRUNC) ? LIBSSH2_FXF_TRUNC : 0) |
		  ((flags & O_EXCL) ? LIBSSH2_FXF_EXCL : 0) |
		  ((flags & O_APPEND) ? LIBSSH2_FXF_APPEND : 0);
	if (after)
		after->st_mode = 0;
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->gen = ssh_conn_generation(c);
	(*out)->x_seen = atomic_load(&sftp_commands);
	/* The attributes in the same flight, after the open: the kernel
	 * asks those of a file it made next, and tar, cp -p and others
	 * fstat a file they have read (the kernel's atime went stale). */
	rc = sftp_start(c, &q);
	src = rc ? rc : sftp_start(c, &s);
	rc = sftp_end(c, &q, rc);
	src = sftp_end(c, &s, src);
	if (src == 0)
		sftp_to_stat(&s.attrs, 0, &st);
	(*out)->o_size = src == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
	if (rc == 0 && src == 0) {
		if (after)
			*after = st;
		if (flags & O_CREAT) {
			(*out)->o_st = st;
			(*out)->o_ns = ssh_now_ns();
			(*out)->o_have = true;
		}
	}
	if (sftp_failure(&q, rc)) {
		/* What the look in the flight saw explains a bare failure. */
		if (src != 0)
			rc = sftp_explain(c, path, true, rc);
		else if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
			rc = -EEXIST;
		else if (S_ISDIR(st.st_mode))
			rc = -EISDIR;
		else
			rc = sftp_explain(c, path, false, rc);
	}
	if (rc) {
		free(*out);
		*out = NULL;
		return rc;
	}
	(*out)->c = c;
	(*out)->h = q.h;
	(*out)->r_at = -1;
	pthread_mutex_init(&(*out)->lock, NULL);
	/* A file copied in or out may have a twin; one read and written
	 * through the same handle, or appended to, not. */
	if ((acc == O_RDONLY || (acc == O_WRONLY && !(flags & O_APPEND))) &&
	    ((*out)->path = strdup(path)) != NULL)
		(*out)->tw_flags =
			acc == O_RDONLY ? LIBSSH2_FXF_READ : LIBSSH2_FXF_WRITE;
	if ((flags & O_CREAT) && (mode & SFTP_UMASKED)) {
		/* The caller's umask is applied already; not the server's
		 * again. */
		struct sftp_req m = {.op = SFTP_FSETSTAT, .f = *out};

		m.attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
		m.attrs.permissions = mode & 07777;
		bool had = (*out)->o_have;

		if (sftp_run_file(&m) != 0) {
			if (after)
				after->st_mode = 0; /* the mode is not known */
		} else {
			if (had) {
				(*out)->o_have = true; /* run_file dropped it */
				(*out)->o_st.st_mode =
					((*out)->o_st.st_mode & S_IFMT) |
					(mode & 07777);
			}
			if (after && after->st_mode)
				after->st_mode = (after->st_mode & S_IFMT) |
						 (mode & 07777);
		}
	}
	/* The session the handle belongs to (a reconnect may have happened
	 * between the look and the open: then the first use fails). */
	return 0;
}

/* f->s_buf grown to hold size bytes (f->lock held): 0 or -ENOMEM. */
static int sftp_keep_room(struct ssh_file *f, size_t size)
{
	char *nb;

	if (size <= f->s_cap)
		return 0;
	nb = realloc(f->s_buf, size);
	if (!nb)
		return -ENOMEM;
	f->s_buf = nb;
	f->s_cap = size;
	return 0;
}

/* Read size bytes at off into f->s_buf (grown to hold them), which then
 * keeps [off, off + what came); 0 or -errno. */
static int sftp_read_keep(struct ssh_file *f, off_t off, size_t size)
{
	struct sftp_req k = {
		.op = SFTP_READ, .f = f, .off = off, .reseek = f->reseek};
	int rc;

	if (sftp_keep_room(f, size))
		return -ENOMEM;
	k.buf = f->s_buf;
	k.size = size;
	f->s_len = 0;
	f->r_at = -1;
	f->reseek = false;
	rc = sftp_run(f->c, &k);
	if (rc)
		return rc;
	f->s_off = off;
	f->s_len = k.done;
	f->r_at = off + (off_t)k.done;
	return 0;
}

/* Read at off with f->lock held. A read ahead of the handle's offset
 * (within SFTP_SKIP_MAX) keeps the bytes it skips for the earlier one; a
 * big read in sequence asks SFTP_CHUNK at once (libssh2 then keeps four
 * times that in flight) and keeps what the next reads will want. */
static int sftp_read_locked(struct ssh_file *f, char *buf, size_t size,
			    off_t off)
{
	size_t got = 0;
	int rc;

	for (;;) {
		struct sftp_req q = {.op = SFTP_READ, .f = f};
		off_t at = f->r_at;

		if (f->s_len && off >= f->s_off &&
		    off < f->s_off + (off_t)f->s_len) {
			size_t n = (size_t)(f->s_off + (off_t)f->s_len - off);

			if (n > size - got)
				n = size - got;
			memcpy(buf + got, f->s_buf + (off - f->s_off), n);
			got += n;
			off += (off_t)n;
			/* at the size the open saw: the end, as a short answer
			 * there is (a read from there asks the node again) */
			if (got == size || off == f->o_size)
				return (int)got;
			continue;
		}
		if (at >= 0 && off > at &&
		    (size_t)(off - at) <= SFTP_SKIP_MAX) {
			rc = sftp_read_keep(f, at, (size_t)(off - at));
			if (rc)
				return rc;
			if (f->r_at != off)
				return (int)got; /* the end of the file */
		} else if (size - got >= SFTP_CHUNK_MIN &&
			   (at < 0 || off == at)) {
			rc = sftp_read_keep(f, off, SFTP_CHUNK);
			if (rc)
				return rc;
			if (f->s_len == 0)
				return (int)got;
			continue;
		}
		q.buf = buf + got;
		q.size = size - got;
		q.off = off;
		q.reseek = f->reseek;
		f->reseek = false;
		f->r_at = -1;
		rc = sftp_run(f->c, &q);
		if (rc)
			return rc;
		f->r_at = off + (off_t)q.done;
		return (int)(got + q.done);
	}
}

/* Put size bytes at off in f's buffer (f->lock held), the writer given
 * them; 0, or -errno. */
static int sftp_wb_put(struct ssh_file *f, const char *buf, size_t size,
		       off_t off)
{
	pthread_mutex_lock(&sftp_wb_mu);
	if (f->w_head + f->w_len + size > f->w_cap) {
		size_t cap = f->w_cap ? f->w_cap : 65536;
		char *nb;

		/* The bytes move: not while the writer hands them over. */
		f->w_want = true;
		while (f->w_sending)
			sftp_wb_wait();
		f->w_want = false;
		pthread_cond_broadcast(&sftp_wb_cv);

		if (f->w_head) { /* the acked bytes go */
			memmove(f->w_buf, f->w_buf + f->w_head, f->w_len);
			f->w_head = 0;
		}
		while (cap < f->w_len + size)
			cap *= 2;
		nb = cap > f->w_cap ? realloc(f->w_buf, cap) : f->w_buf;
		if (!nb) {
			pthread_mutex_unlock(&sftp_wb_mu);
			return -ENOMEM;
		}
		f->w_buf = nb;
		f->w_cap = cap > f->w_cap ? cap : f->w_cap;
	}
	if (f->w_len == 0)
		f->w_off = off;
	memcpy(f->w_buf + f->w_head + f->w_len, buf, size);
	f->w_len += size;
	f->w_in += size;
	if (!f->w_listed) {
		f->w_next = sftp_wb_files;
		sftp_wb_files = f;
		f->w_listed = true;
		f->w_id = ++sftp_wb_ids;
	}
	if (!f->w_busy) {
		/* Made new before w_busy is set, under the lock settle holds:
		 * settle takes a writer that ended for dead. */
		f->w_req = (struct sftp_req){.op = SFTP_WRITE_BEHIND, .f = f};
		f->w_req.r.step = sftp_step;
		f->w_req.r.lost = sftp_lost;
		f->w_busy = true; /* before it is submitted: see settle */
		f->w_stop = false;
		pthread_mutex_unlock(&sftp_wb_mu);
		if (ssh_submit(f->c, &f->w_req.r) == 0)
			return 0;
		pthread_mutex_lock(&sftp_wb_mu);
		f->w_busy = false;
		sftp_wb_fail(f, -EIO);
		pthread_mutex_unlock(&sftp_wb_mu);
		return -EIO;
	}
	/* Too much in flight: wait for acks, not for all of them. */
	while (f->w_len > SFTP_WB_MAX && !f->w_err && !sftp_wb_dead(f))
		sftp_wb_wait();
	pthread_mutex_unlock(&sftp_wb_mu);
	ssh_wake(f->c);
	return 0;
}

/* Whether two handles' attributes, asked side by side with nothing of
 * theirs in flight, name the same regular file (SFTP version 3 tells no
 * inode; a file put in its place since the first open would also have
 * to match size, time, mode and owner to the second). */
static bool sftp_attrs_same(const LIBSSH2_SFTP_ATTRIBUTES *a,
			    const LIBSSH2_SFTP_ATTRIBUTES *b)
{
	const unsigned long want =
		LIBSSH2_SFTP_ATTR_SIZE | LIBSSH2_SFTP_ATTR_UIDGID |
		LIBSSH2_SFTP_ATTR_PERMISSIONS | LIBSSH2_SFTP_ATTR_ACMODTIME;

	return (a->flags & want) == want && a->flags == b->flags &&
	       a->filesize == b->filesize && a->uid == b->uid &&
	       a->gid == b->gid && a->permissions == b->permissions &&
	       a->mtime == b->mtime && LIBSSH2_SFTP_S_ISREG(a->permissions);
}

/* --- big writes on a channel of their own (ssh_bigwrite.c) --- */

/* Past this many bytes written through a handle of a file opened to
 * write only (not to append), or through a twin, the handle's writes go
 * by a second handle of its own on a channel of its own, in requests as
 * big as the server takes (256 KiB from OpenSSH): libssh2 1.10 sends
 * 30,000 bytes a request, each answered, and copies each into a request
 * of its own before copying it again into its packets. */
#define SFTP_BIG_AFTER ((uint64_t)4 << 20)

/* The big writes' open, queued on h's session (the file's lock held). */
static void sftp_big_start(struct ssh_file *h)
{
	h->big_state = BIG_OFF;
	h->big = ssh_bigwrite_new(h->c, h->path);
	if (!h->big)
		return;
	h->big_req = (struct sftp_req){.op = SFTP_BIG_OPEN, .f = h};
	if (sftp_start(h->c, &h->big_req) != 0) {
		ssh_bigwrite_free(NULL, h->big);
		h->big = NULL;
		return;
	}
	h->big_state = BIG_OPENING;
}

/* End h's big writes, its writer drained (the file's lock held): the
 * channel is closed in the background, which closes the handle. */
static void sftp_big_end(struct ssh_file *h)
{
	if (h->big_state == BIG_OPENING)
		(void)sftp_end(h->c, &h->big_req, 0);
	if (h->big) {
		struct sftp_req q = {.op = SFTP_BIG_END, .f = h};

		(void)sftp_end(h->c, &q, sftp_start(h->c, &q));
		/* not done on the session (it dropped): memory only */
		ssh_bigwrite_free(NULL, h->big);
		h->big = NULL;
	}
	h->big_state = BIG_OFF;
}

/* Once the big writes' open has ended (the file's lock held): h's
 * writes go by it when it opened h's file, after h's writes so far have
 * landed (so that the two show the same size). */
static void sftp_big_ready(struct ssh_file *h)
{
	struct sftp_req a = {.op = SFTP_FSTAT, .f = h},
			b = {.op = SFTP_BIG_FSTAT, .f = h};
	int ra, rb;

	if (h->big_state != BIG_OPENING || !ssh_req_done(h->c, &h->big_req.r))
		return;
	h->big_state = BIG_OFF;
	if (sftp_end(h->c, &h->big_req, 0) != 0 || sftp_wb_drain_one(h) != 0) {
		sftp_big_end(h);
		return;
	}
	ra = sftp_start(h->c, &a);
	rb = ra ? ra : sftp_start(h->c, &b);
	ra = sftp_end(h->c, &a, ra);
	rb = sftp_end(h->c, &b, rb);
	if (ra || rb || !sftp_attrs_same(&a.attrs, &b.attrs)) {
		sftp_big_end(h);
		return;
	}
	h->big_state = BIG_ON;
}

/* A write through h (the file's lock held): the big writes begun once
 * it has written enough, and taken up once open. */
static void sftp_big_note(struct ssh_file *h)
{
	if (h->big_state == BIG_NONE && h->path &&
	    (h->bulk_of || h->tw_flags == LIBSSH2_FXF_WRITE) &&
	    h->w_in >= SFTP_BIG_AFTER)
		sftp_big_start(h);
	sftp_big_ready(h);
}

/* Buffer size bytes at off for handle h's writer (f->lock held). */
static int sftp_write_one(struct ssh_file *h, const char *buf, size_t size,
			  off_t off)
{
	int rc;

	sftp_big_note(h);
	pthread_mutex_lock(&sftp_wb_mu);
	rc = h->w_err;
	/* elsewhere than where the last write ended, or the writer ended
	 * (it would take no more bytes, and the error is its): those first */
	if (rc == 0 && h->w_busy &&
	    (off != h->w_off + (off_t)h->w_len || sftp_wb_dead(h))) {
		pthread_mutex_unlock(&sftp_wb_mu);
		rc = sftp_wb_drain_one(h);
		pthread_mutex_lock(&sftp_wb_mu);
	}
	pthread_mutex_unlock(&sftp_wb_mu);
	return rc ? rc : sftp_wb_put(h, buf, size, off);
}

/* --- the twin (see SFTP_TWIN_AFTER) --- */

static void sftp_twin_orphan(struct ssh_conn *c, struct ssh_req *r);

/* Queue the close of handle h of session o->t.c, not waited for (o is
 * freed once it has ended): not on a session made since o->t.gen (the
 * handle went with the one that dropped; asking would connect again). */
static void sftp_twin_close(struct sftp_twin_open *o, LIBSSH2_SFTP_HANDLE *h)
{
	if (h && o->t.gen == ssh_conn_generation(o->t.c)) {
		o->t.h = h;
		o->q = (struct sftp_req){.op = SFTP_CLOSE, .f = &o->t};
		if (sftp_start(o->t.c, &o->q) == 0 &&
		    ssh_orphan(o->t.c, &o->q.r, sftp_twin_orphan, false))
			return;
	}
	free(o);
}

/* The twin's open or close, ended with nobody waiting for it (on the
 * bulk session's thread, or a closing file's): an open's handle closed
 * in turn. */
static void sftp_twin_orphan(struct ssh_conn *c, struct ssh_req *r)
{
	struct sftp_twin_open *o = (struct sftp_twin_open *)(void *)r;

	(void)c;
	if (o->q.op == SFTP_OPEN && r->rc == 0)
		sftp_twin_close(o, o->q.h);
	else
		free(o);
}

/* Forget a handle of the bulk session, its close queued. */
static void sftp_twin_free(struct ssh_file *tw)
{
	struct sftp_twin_open *o = calloc(1, sizeof(*o));

	if (o) { /* else the handle goes with the session */
		o->t.c = tw->c;
		o->t.gen = tw->gen;
		sftp_twin_close(o, tw->h);
	}
	for (int i = 0; i < SFTP_STRIPES; i++)
		free(tw->st[i].buf);
	pthread_mutex_destroy(&tw->lock);
	free(tw->w_buf);
	free(tw->s_buf);
	free(tw->path);
	free(tw);
}

/* Whether f and tw name the same file: their attributes, asked side by
 * side with nothing of f's in flight (SFTP version 3 tells no inode; a
 * file put in f's place since its open would also have to match size,
 * time, mode and owner to the second). The twin learns the size, as an
 * open does. */
static bool sftp_twin_same(struct ssh_file *f, struct ssh_file *tw)
{
	struct sftp_req a = {.op = SFTP_FSTAT, .f = f},
			b = {.op = SFTP_FSTAT, .f = tw};
	int ra = sftp_start(f->c, &a), rb = sftp_start(tw->c, &b);

	ra = sftp_end(f->c, &a, ra);
	rb = sftp_end(tw->c, &b, rb);
	if (ra || rb || !sftp_attrs_same(&a.attrs, &b.attrs))
		return false;
	tw->o_size = (off_t)b.attrs.filesize;
	return true;
}

/* The twin's open, queued on the bulk session (f->lock held): it goes on
 * while f's calls do. */
static void sftp_twin_start(struct ssh_file *f)
{
	struct ssh_conn *b = ssh_conn_bulk(f->c);
	size_t len = strlen(f->path) + 1;
	struct sftp_twin_open *o = b ? calloc(1, sizeof(*o) + len) : NULL;

	f->tw_state = TW_OFF;
	if (!o)
		return;
	memcpy(o->path, f->path, len);
	o->q = (struct sftp_req){
		.op = SFTP_OPEN, .path = o->path, .flags = f->tw_flags};
	o->t.c = b;
	/* Read before the open: a handle of a session lost meanwhile is
	 * refused, never used on the next session. */
	o->t.gen = ssh_conn_generation(b);
	if (sftp_start(b, &o->q) != 0) {
		free(o);
		return;
	}
	f->tw_open = o;
	f->tw_state = TW_OPENING;
}

/* Once the twin's open has ended (f->lock held): the twin in use when it
 * names f's file. */
static void sftp_twin_ready(struct ssh_file *f)
{
	struct sftp_twin_open *o = f->tw_open;
	struct ssh_file *tw;

	if (f->tw_state != TW_OPENING || !ssh_req_done(o->t.c, &o->q.r))
		return;
	f->tw_state = TW_OFF;
	f->tw_open = NULL;
	tw = sftp_end(o->t.c, &o->q, 0) == 0 ? calloc(1, sizeof(*tw)) : NULL;
	if (!tw) {
		sftp_twin_orphan(o->t.c, &o->q.r); /* a handle closed */
		return;
	}
	tw->c = o->t.c;
	tw->h = o->q.h;
	tw->gen = o->t.gen;
	free(o);
	tw->r_at = -1;
	tw->o_size = -1;
	tw->bulk_of = f->c;
	tw->path = strdup(f->path); /* for its big writes; none without */
	pthread_mutex_init(&tw->lock, NULL);
	/* f's writes land first, so that the two show the same size. */
	if (sftp_wb_drain_one(f) != 0 || !sftp_twin_same(f, tw)) {
		sftp_twin_free(tw);
		return;
	}
	f->tw = tw;
	f->tw_state = TW_ON;
}

/* A call of f moves size bytes at off (f->lock held): whether it goes on
 * from where the last ones ended (within SFTP_RUN_GAP, as the kernel's
 * read-ahead sends them). A run long enough opens the twin. */
static bool sftp_twin_note(struct ssh_file *f, off_t off, size_t size)
{
	off_t end = off + (off_t)size;
	bool in_run = f->run_len && off >= f->run_end - SFTP_RUN_GAP &&
		      off <= f->run_end + SFTP_RUN_GAP;

	f->run_len = in_run ? f->run_len + size : size;
	if (!in_run || end > f->run_end)
		f->run_end = end;
	if (f->tw_state == TW_NONE && f->tw_flags &&
	    f->run_len >= SFTP_TWIN_AFTER)
		sftp_twin_start(f);
	sftp_twin_ready(f);
	return in_run;
}

/* Wait for stripe i's read, if it is under way: 0 or -errno. */
static int sftp_stripe_wait(struct sftp_stripe *s)
{
	int rc;

	if (s->state != STRIPE_BUSY)
		return 0;
	rc = sftp_end(s->q.f->c, &s->q, 0);
	s->len = rc ? 0 : s->q.done;
	s->state = rc ? STRIPE_EMPTY : STRIPE_FULL;
	return rc;
}

/* Start reading [off, end) of f into stripe i, by handle i % 2. */
static int sftp_stripe_start(struct ssh_file *f, int i, off_t off, off_t end)
{
	struct sftp_stripe *s = &f->st[i];
	struct ssh_file *h = i & 1 ? f->tw : f;
	int rc;

	/* what it reads is dropped: another stripe is wanted */
	(void)sftp_stripe_wait(s);
	if (!s->buf && !(s->buf = malloc(SFTP_STRIPE)))
		return -ENOMEM;
	s->q = (struct sftp_req){.op = SFTP_READ,
				 .f = h,
				 .off = off,
				 .buf = s->buf,
				 .size = (size_t)(end - off),
				 .bounded = true,
				 .reseek = h->reseek};
	h->reseek = false;
	s->off = off;
	s->end = end;
	s->len = 0;
	if (h == f)
		f->r_at = -1; /* the handle's reads stand elsewhere */
	rc = sftp_start(h->c, &s->q);
	s->state = rc ? STRIPE_EMPTY : STRIPE_BUSY;
	return rc;
}

/* Stop using the twin (f->lock held): its open given up, its reads and
 * writes ended, its handle closed. The bytes it had not got acked (its
 * session lost, or a write refused) go by f's own handle: 0, or the
 * error of f's writes. */
static int sftp_twin_end(struct ssh_file *f)
{
	struct ssh_file *tw = f->tw;
	int rc = 0;

	/* An open under way is not waited for (its session may still be
	 * being made, or its host stopped answering): one not sent yet
	 * stops, one sent closes its handle when it comes. */
	if (f->tw_state == TW_OPENING) {
		struct sftp_twin_open *o = f->tw_open;

		f->tw_open = NULL;
		if (!ssh_orphan(o->t.c, &o->q.r, sftp_twin_orphan, true))
			sftp_twin_orphan(o->t.c, &o->q.r);
	}
	for (int i = 0; i < SFTP_STRIPES; i++) {
		(void)sftp_stripe_wait(&f->st[i]);
		f->st[i].state = STRIPE_EMPTY;
		free(f->st[i].buf);
		f->st[i].buf = NULL;
	}
	f->tw = NULL;
	f->tw_state = TW_OFF;
	if (tw) {
		if (sftp_wb_drain_one(tw) != 0 && tw->w_len)
			rc = sftp_write_one(f, tw->w_buf + tw->w_head,
					    tw->w_len, tw->w_off);
		sftp_big_end(tw);
		sftp_twin_free(tw);
	}
	return rc;
}

/* Read at off from the stripes (f->lock held, the twin on, the read in
 * the run): the stripe at off read by its handle if it is not yet, the
 * next three asked meanwhile (the last once the reads out of order are
 * past the one it replaces). 0 with all size bytes in *got, or with
 * fewer: -EAGAIN where the stripes cannot tell (behind them, or past a
 * stripe that came short: the end of the file then, or the file grew
 * since), the plain way to go on from there; or -errno. */
static int sftp_read_striped(struct ssh_file *f, char *buf, size_t size,
			     off_t off, size_t *got)
{
	const off_t S = (off_t)SFTP_STRIPE;
	int rc;

	*got = 0;
	while (*got < size) {
		off_t at = off + (off_t)*got, k = at / S, end = (k + 1) * S;
		struct sftp_stripe *s = &f->st[k % SFTP_STRIPES];
		size_t n;

		if (s->state != STRIPE_EMPTY &&
		    (s->end > end || (s->end == end && s->off > at)))
			return -EAGAIN; /* behind them */
		if (s->state == STRIPE_EMPTY || s->end != end) {
			rc = sftp_stripe_start(f, (int)(k % SFTP_STRIPES), at,
					       end);
			if (rc)
				return rc;
		}
		rc = sftp_stripe_wait(s);
		if (rc)
			return rc;
		for (off_t j = 1;
		     s->len == (size_t)(end - s->off) && j < SFTP_STRIPES;
		     j++) {
			struct sftp_stripe *t = &f->st[(k + j) % SFTP_STRIPES];
			off_t from = end + (j - 1) * S;

			if ((t->state != STRIPE_EMPTY && t->end == from + S) ||
			    (f->o_size >= 0 && from >= f->o_size) ||
			    (j == SFTP_STRIPES - 1 &&
			     t->state != STRIPE_EMPTY &&
			     at - s->off < SFTP_RUN_GAP))
				continue;
			(void)sftp_stripe_start(f,
						(int)((k + j) % SFTP_STRIPES),
						from, from + S);
		}
		if (at >= s->off + (off_t)s->len) {
			/* short: asked again when read again */
			s->state = STRIPE_EMPTY;
			return -EAGAIN;
		}
		n = (size_t)(s->off + (off_t)s->len - at);
		if (n > size - *got)
			n = size - *got;
		memcpy(buf + *got, s->buf + (at - s->off), n);
		*got += n;
	}
	return 0;
}

void ssh_sftp_files_changed(void)
{
	atomic_fetch_add(&sftp_commands, 1);
}

/* A command ended since f's kept bytes were read (f->lock held): they
 * are read again, as the kernel's caches are, and the size the open saw
 * says no more where the file ends. */
static void sftp_read_fresh(struct ssh_file *f)
{
	uint64_t now = atomic_load(&sftp_commands);

	if (f->x_seen == now)
		return;
	f->x_seen = now;
	f->s_len = 0;
	f->r_at = -1;
	f->o_size = -1;
	f->reseek = true;
	for (int i = 0; i < SFTP_STRIPES; i++) {
		(void)sftp_stripe_wait(&f->st[i]);
		f->st[i].state = STRIPE_EMPTY;
	}
	if (f->tw) {
		f->tw->o_size = -1;
		f->tw->reseek = true;
	}
}

int ssh_sftp_read(struct ssh_file *f, char *buf, size_t size, off_t off)
{
	size_t got = 0;
	int rc;

	pthread_mutex_lock(&f->lock);
	sftp_read_fresh(f);
	rc = sftp_wb_drain(f);
	if (rc == 0 && sftp_twin_note(f, off, size) && f->tw) {
		rc = sftp_read_striped(f, buf, size, off, &got);
		/* the twin's session or handle failed: without it */
		if (rc < 0 && rc != -EAGAIN)
			(void)sftp_twin_end(f);
		rc = 0;
	}
	/* The rest the plain way: a read that comes back short is the end
	 * of the file to the kernel. */
	if (rc == 0 && got < size) {
		rc = sftp_read_locked(f, buf + got, size - got,
				      off + (off_t)got);
		if (rc >= 0)
			rc += (int)got;
	} else if (rc == 0) {
		rc = (int)got;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int ssh_sftp_ahead_start(struct ssh_file *f, size_t size)
{
	struct sftp_req *q = &f->a_req;
	int rc;

	pthread_mutex_lock(&f->lock);
	if (sftp_keep_room(f, size)) {
		pthread_mutex_unlock(&f->lock);
		return -ENOMEM;
	}
	memset(q, 0, sizeof(*q));
	q->op = SFTP_READ;
	q->f = f;
	q->buf = f->s_buf;
	q->size = size;
	f->s_len = 0;
	f->r_at = -1;
	rc = sftp_start(f->c, q);
	f->a_busy = rc == 0;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int ssh_sftp_ahead_end(struct ssh_file *f)
{
	int rc;

	pthread_mutex_lock(&f->lock);
	if (!f->a_busy) {
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	f->a_busy = false;
	rc = sftp_end(f->c, &f->a_req, 0);
	if (rc == 0) {
		f->s_off = 0;
		f->s_len = f->a_req.done;
		f->r_at = (off_t)f->a_req.done;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

struct ssh_conn *ssh_sftp_second(struct ssh_conn *c)
{
	return ssh_conn_bulk(c);
}

bool ssh_sftp_current(const struct ssh_file *f)
{
	return f->gen == ssh_conn_generation(f->c);
}

int ssh_sftp_write(struct ssh_file *f, const char *buf, size_t size, off_t off)
{
	size_t done = 0;
	int rc;

	pthread_mutex_lock(&f->lock);
	f->s_len = 0; /* the bytes kept for reads may change */
	f->r_at = -1;
	f->o_have = false;
	f->o_size = -1;
	(void)sftp_twin_note(f, off, size);
	pthread_mutex_lock(&sftp_wb_mu);
	rc = f->w_err;
	pthread_mutex_unlock(&sftp_wb_mu);
	/* With the twin, each stripe goes by its handle: the bytes of one
	 * place in the file always by the same one, in order. A twin whose
	 * writes failed ends, f sending its bytes, then this piece. */
	while (rc == 0 && done < size) {
		off_t at = off + (off_t)done, k = at / (off_t)SFTP_STRIPE;
		size_t n = size - done;
		struct ssh_file *h = f->tw && (k & 1) ? f->tw : f;

		if (f->tw && (size_t)((k + 1) * (off_t)SFTP_STRIPE - at) < n)
			n = (size_t)((k + 1) * (off_t)SFTP_STRIPE - at);
		rc = sftp_write_one(h, buf + done, n, at);
		if (rc && h != f)
			rc = sftp_twin_end(f);
		else
			done += n;
	}
	pthread_mutex_unlock(&f->lock);
	return rc ? rc : (int)size;
}

int ssh_sftp_flush(struct ssh_file *f)
{
	int rc;

	pthread_mutex_lock(&f->lock);
	rc = sftp_wb_drain(f);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int ssh_sftp_fsync(struct ssh_file *f)
{
	struct sftp_req q = {.op = SFTP_FSYNC, .f = f};
	int rc = sftp_run_file(&q);

	return rc == -EOPNOTSUPP ? 0 : rc;
}

int ssh_sftp_fstat(struct ssh_file *f, struct stat *st)
{
	struct sftp_req q = {.op = SFTP_FSTAT, .f = f};
	int rc;

	/* Right after a create, nothing written: asked with the open. */
	pthread_mutex_lock(&f->lock);
	if (f->o_have && f->w_in == 0 &&
	    ssh_now_ns() - f->o_ns < SFTP_AFTER_NS) {
		f->o_have = false;
		*st = f->o_st;
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	pthread_mutex_unlock(&f->lock);
	rc = sftp_run_file(&q);

	if (rc == 0)
		sftp_to_stat(&q.attrs, 0, st);
	return rc;
}

int ssh_sftp_fstatvfs(struct ssh_file *f, struct statvfs *st)
{
	struct sftp_req q = {.op = SFTP_FSTATVFS, .f = f};
	int rc = sftp_run_file(&q);

	if (rc == 0)
		sftp_to_statvfs(&q.vfs, st);
	return rc;
}

/* A size refused with only "failure": too big for the file system when it
 * grows the file (sparse growth needs no space), else what the file system
 * tells. */
static int sftp_size_failed(int rc, off_t size, off_t was, int why)
{
	if (why != rc)
		return why;
	return size > was ? -EFBIG : rc;
}

int ssh_sftp_fsetsize(struct ssh_file *f, off_t size)
{
	struct sftp_req q = {.op = SFTP_FSETSTAT, .f = f};
	struct stat st;
	int rc;

	q.attrs.flags = LIBSSH2_SFTP_ATTR_SIZE;
	q.attrs.filesize = (libssh2_uint64_t)size;
	rc = sftp_run_file(&q);
	if (sftp_failure(&q, rc) && ssh_sftp_fstat(f, &st) == 0) {
		int why;

		pthread_mutex_lock(&f->lock);
		why = sftp_explain_file(f, false, rc);
		pthread_mutex_unlock(&f->lock);
		rc = sftp_size_failed(rc, size, st.st_size, why);
	}
	return rc;
}

int ssh_sftp_close(struct ssh_file *f)
{
	struct sftp_req q = {.op = SFTP_CLOSE, .f = f};
	int rc, wrc, trc;

	(void)ssh_sftp_ahead_end(f);
	pthread_mutex_lock(&f->lock);
	wrc = sftp_wb_drain(f);
	trc = sftp_twin_end(f);
	sftp_big_end(f);
	rc = sftp_run(f->c, &q);
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_destroy(&f->lock);
	for (int i = 0; i < SFTP_STRIPES; i++)
		free(f->st[i].buf);
	free(f->w_buf);
	free(f->s_buf);
	free(f->path);
	free(f);
	return wrc ? wrc : trc ? trc : rc;
}

/* SETSTAT; "permission denied" is `denied` (EPERM for what only the
 * owner may do). */
static int sftp_setstat(struct ssh_conn *c, const char *path,
			const LIBSSH2_SFTP_ATTRIBUTES *a, int denied,
			struct stat *after)
{
	struct sftp_req q = {.op = SFTP_SETSTAT, .path = path};
	struct stat st;
	int rc;

	q.attrs = *a;
	if (after)
		after->st_mode = 0; /* unknown */
	if (!(a->flags &
	      (LIBSSH2_SFTP_ATTR_SIZE | LIBSSH2_SFTP_ATTR_PERMISSIONS))) {
		/* Owners and times of a symbolic link are its own (SETSTAT
		 * would follow it). */
		q.op = SFTP_EXT;
		q.ext = "lsetstat@openssh.com";
		q.want_after = after != NULL;
		rc = sftp_run(c, &q);
		if (rc == 0 && after && q.got_after)
			sftp_to_stat(&q.after, 0, after);
		if (rc != -EOPNOTSUPP || q.status == LIBSSH2_FX_OP_UNSUPPORTED)
			goto out;
		rc = ssh_sftp_stat(c, path, &st);
		if (rc || S_ISLNK(st.st_mode))
			return rc ? rc : -EOPNOTSUPP;
		q = (struct sftp_req){.op = SFTP_SETSTAT, .path = path};
		q.attrs = *a;
	}
	rc = sftp_run(c, &q);
out:
	if (rc == -EACCES && q.status == LIBSSH2_FX_PERMISSION_DENIED)
		rc = denied;
	if (sftp_failure(&q, rc))
		rc = sftp_explain(c, path, false, rc);
	return rc;
}

int ssh_sftp_setsize(struct ssh_conn *c, const char *path, off_t size)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_SIZE};
	struct stat st;
	int rc;

	a.filesize = (libssh2_uint64_t)size;
	rc = sftp_setstat(c, path, &a, -EACCES, NULL);
	if (rc == -EIO && ssh_sftp_stat(c, path, &st) == 0 &&
	    S_ISREG(st.st_mode))
		rc = sftp_size_failed(rc, size, st.st_size, rc);
	return rc;
}

int ssh_sftp_mkdir(struct ssh_conn *c, const char *path, mode_t mode)
{
	struct sftp_req q = {.op = SFTP_MKDIR, .path = path, .mode = mode};
	struct stat st;
	int rc = sftp_run(c, &q);

	/* OpenSSH answers "failure" for an existing name. */
	if (sftp_failure(&q, rc))
		rc = ssh_sftp_stat(c, path, &st) == 0
			     ? -EEXIST
			     : sftp_explain(c, path, true, rc);
	else if (rc == 0 && (mode & SFTP_UMASKED))
		(void)ssh_sftp_chmod(c, path, mode); /* as in ssh_sftp_open */
	return rc;
}

int ssh_sftp_unlink(struct ssh_conn *c, const char *path)
{
	struct sftp_req q = {.op = SFTP_UNLINK, .path = path};
	struct stat st;
	int rc = sftp_run(c, &q);

	if (sftp_failure(&q, rc))
		rc = ssh_sftp_stat(c, path, &st) == 0 && S_ISDIR(st.st_mode)
			     ? -EISDIR
			     : sftp_explain(c, path, false, rc);
	return rc;
}

int ssh_sftp_rmdir(struct ssh_conn *c, const char *path)
{
	struct sftp_req q = {.op = SFTP_RMDIR, .path = path};
	struct stat st;
	int rc = sftp_run(c, &q);

	/* OpenSSH answers "failure" for a directory that is not empty. */
	if (sftp_failure(&q, rc)) {
		rc = sftp_explain(c, path, false, rc);
		if (rc == -EIO && ssh_sftp_stat(c, path, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			rc = -ENOTEMPTY;
	}
	return rc;
}

/* An extension of OpenSSH's with two paths (0, -EOPNOTSUPP when the
 * server has not announced it, or -errno). */
static int sftp_ext(struct ssh_conn *c, const char *name, const char *path,
		    const char *path2, struct sftp_req *q)
{
	*q = (struct sftp_req){
		.op = SFTP_EXT, .ext = name, .path = path, .path2 = path2};
	return sftp_run(c, q);
}

/* A rename refused with "failure": what the two names tell. */
static int sftp_rename_failed(struct ssh_conn *c, const char *from,
			      const char *to, int rc)
{
	struct stat sf, st;

	if (ssh_sftp_stat(c, from, &sf) == 0 &&
	    ssh_sftp_stat(c, to, &st) == 0) {
		if (S_ISDIR(st.st_mode) && !S_ISDIR(sf.st_mode))
			return -EISDIR;
		if (!S_ISDIR(st.st_mode) && S_ISDIR(sf.st_mode))
			return -ENOTDIR;
		if (S_ISDIR(st.st_mode))
			return -ENOTEMPTY;
	}
	return sftp_explain(c, to, true, rc);
}

int ssh_sftp_rename(struct ssh_conn *c, const char *from, const char *to,
		    unsigned int flags)
{
	struct sftp_req q = {.op = SFTP_RENAME, .path = from, .path2 = to};
	struct stat st;
	int rc;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;
	if (!(flags & RENAME_NOREPLACE)) {
		/* rename(2) on the server: atomic over an existing name. */
		rc = sftp_ext(c, "posix-rename@openssh.com", from, to, &q);
		if (rc != -EOPNOTSUPP)
			return sftp_failure(&q, rc)
				       ? sftp_rename_failed(c, from, to, rc)
				       : rc;
		/* Without the extension, SFTP version 3 renames onto
		 * nothing only: the target goes first, unless rename(2)
		 * would refuse (the kernel checks the types it knows, which
		 * a command on the node may have changed since). */
		if (ssh_sftp_stat(c, to, &st) == 0) {
			struct stat sf;

			rc = ssh_sftp_stat(c, from, &sf);
			if (rc)
				return rc;
			if (S_ISDIR(st.st_mode) != S_ISDIR(sf.st_mode))
				return S_ISDIR(st.st_mode) ? -EISDIR : -ENOTDIR;
			rc = S_ISDIR(st.st_mode) ? ssh_sftp_rmdir(c, to)
						 : ssh_sftp_unlink(c, to);
			if (rc)
				return rc;
		}
	} else if (ssh_sftp_stat(c, to, &st) == 0) {
		return -EEXIST;
	}
	/* OpenSSH's own rename refuses an existing target (a link and an
	 * unlink for files). */
	q = (struct sftp_req){.op = SFTP_RENAME, .path = from, .path2 = to};
	q.flags = LIBSSH2_SFTP_RENAME_ATOMIC | LIBSSH2_SFTP_RENAME_NATIVE;
	rc = sftp_run(c, &q);
	if (sftp_failure(&q, rc))
		rc = (flags & RENAME_NOREPLACE) &&
				     ssh_sftp_stat(c, to, &st) == 0
			     ? -EEXIST
			     : sftp_rename_failed(c, from, to, rc);
	return rc;
}

int ssh_sftp_link(struct ssh_conn *c, const char *from, const char *to)
{
	struct sftp_req q;
	struct stat st;
	int rc = sftp_ext(c, "hardlink@openssh.com", from, to, &q);

	if (rc == -EOPNOTSUPP)
		return -EPERM; /* link(2): no hard links on this file system */
	if (rc == -EACCES && q.status == LIBSSH2_FX_PERMISSION_DENIED &&
	    ssh_sftp_stat(c, from, &st) == 0 && S_ISDIR(st.st_mode))
		return -EPERM;
	if (sftp_failure(&q, rc))
		rc = ssh_sftp_stat(c, to, &st) == 0
			     ? -EEXIST
			     : sftp_explain(c, to, true, rc);
	return rc;
}

int ssh_sftp_symlink(struct ssh_conn *c, const char *target, const char *path)
{
	struct sftp_req q = {.op = SFTP_SYMLINK, .path = path, .path2 = target};
	struct stat st;
	int rc;

	if (strlen(target) >= 4096)
		return -ENAMETOOLONG;
	rc = sftp_run(c, &q);
	if (sftp_failure(&q, rc))
		rc = ssh_sftp_stat(c, path, &st) == 0
			     ? -EEXIST
			     : sftp_explain(c, path, true, rc);
	return rc;
}

int ssh_sftp_chmod(struct ssh_conn *c, const char *path, mode_t mode)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS};

	a.permissions = mode & 07777;
	return sftp_setstat(c, path, &a, -EPERM, NULL);
}

int ssh_sftp_chown(struct ssh_conn *c, const char *path, unsigned long uid,
		   unsigned long gid, struct stat *after)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_UIDGID};
	struct stat st;

	/* SFTP sets both: the one unchanged is the file's own. */
	if (uid == (unsigned long)-1 || gid == (unsigned long)-1) {
		int rc = ssh_sftp_stat(c, path, &st);

		if (rc)
			return rc;
		if (uid == (unsigned long)-1)
			uid = st.st_uid;
		if (gid == (unsigned long)-1)
			gid = st.st_gid;
	}
	a.uid = uid;
	a.gid = gid;
	return sftp_setstat(c, path, &a, -EPERM, after);
}

/* A time as SFTP version 3 carries it: whole seconds from 1970 in 32
 * bits. */
static int sftp_time(const struct timespec *t, time_t now, time_t was,
		     unsigned long *out)
{
	time_t s = t->tv_nsec == UTIME_NOW    ? now
		   : t->tv_nsec == UTIME_OMIT ? was
					      : t->tv_sec;

	if (s < 0 || (unsigned long long)s > 0xffffffffULL)
		return -EOVERFLOW;
	*out = (unsigned long)s;
	return 0;
}

int ssh_sftp_utimens(struct ssh_conn *c, const char *path,
		     const struct timespec tv[2], struct stat *after)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_ACMODTIME};
	struct stat st = {0};
	bool own = tv[0].tv_nsec != UTIME_NOW || tv[1].tv_nsec != UTIME_NOW;
	int rc;

	if (tv[0].tv_nsec == UTIME_OMIT || tv[1].tv_nsec == UTIME_OMIT) {
		rc = ssh_sftp_stat(c, path, &st);
		if (rc)
			return rc;
		if (tv[0].tv_nsec == UTIME_OMIT && tv[1].tv_nsec == UTIME_OMIT)
			return 0;
	}
	rc = sftp_time(&tv[0], time(NULL), st.st_atime, &a.atime);
	if (!rc)
		rc = sftp_time(&tv[1], time(NULL), st.st_mtime, &a.mtime);
	/* Explicit times are the owner's to set; "now" anyone's who may
	 * write. */
	if (after)
		after->st_mode = 0;
	return rc ? rc
		  : sftp_setstat(c, path, &a, own ? -EPERM : -EACCES, after);
}

int ssh_sftp_readlink(struct ssh_conn *c, const char *path, char *buf,
		      size_t size)
{
	struct sftp_req q = {.op = SFTP_READLINK,
			     .path = path,
			     .buf = buf,
			     .size = size ? size - 1 : 0};
	int rc;

	if (size == 0)
		return -EINVAL;
	rc = sftp_run(c, &q);
	if (rc)
		return rc;
	buf[q.done < size ? q.done : size - 1] = '\0';
	return 0;
}
