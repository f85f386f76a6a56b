/* Files over SFTP on a node's persistent SSH session: each call is a
 * request that the connection's thread carries out step by step, so file
 * operations and commands share one session without blocking one another. */
#include "providers/ssh_sftp.h"

#include "providers/ssh_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

struct ssh_file {
	struct ssh_conn *c;
	LIBSSH2_SFTP_HANDLE *h;
	unsigned gen;
	/* One request at a time on a handle: its offset is libssh2's. */
	pthread_mutex_t lock;
};

enum sftp_op {
	SFTP_STAT,
	SFTP_LIST,
	SFTP_OPEN,
	SFTP_READ,
	SFTP_WRITE,
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
};

struct sftp_entry {
	char name[256];
	LIBSSH2_SFTP_ATTRIBUTES a;
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
};

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
		return -EINVAL;
	case LIBSSH2_FX_OP_UNSUPPORTED:
		return -EOPNOTSUPP;
	case LIBSSH2_FX_NO_CONNECTION:
	case LIBSSH2_FX_CONNECTION_LOST:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* -EAGAIN, the SFTP status as -errno, or the session's error. */
static int sftp_fail(struct ssh_conn *c, struct sftp_req *q, LIBSSH2_SFTP *sftp,
		     const char *what)
{
	int lerr = libssh2_session_last_errno(ssh_conn_session(c));

	if (lerr == LIBSSH2_ERROR_EAGAIN)
		return -EAGAIN;
	if (lerr == LIBSSH2_ERROR_SFTP_PROTOCOL) {
		int rc = sftp_errno(libssh2_sftp_last_error(sftp));

		snprintf(q->r.err, sizeof(q->r.err), "%s %s on %s: %s", what,
			 q->path ? q->path : "a file", ssh_conn_name(c),
			 strerror(-rc));
		return rc;
	}
	return ssh_conn_fail(c, &q->r, what);
}

static void sftp_lost(struct ssh_req *r)
{
	struct sftp_req *q = (struct sftp_req *)r;

	q->h = NULL; /* freed with the session */
}

static int sftp_list_step(struct ssh_conn *c, struct sftp_req *q,
			  LIBSSH2_SFTP *sftp)
{
	if (q->sub == 0) {
		q->h = libssh2_sftp_open_ex(sftp, q->path,
					    (unsigned)strlen(q->path), 0, 0,
					    LIBSSH2_SFTP_OPENDIR);
		if (!q->h)
			return sftp_fail(c, q, sftp, "listing");
		q->sub = 1;
		q->r.progress = true;
	}
	while (q->sub == 1) {
		struct sftp_entry e;
		int n = libssh2_sftp_readdir_ex(q->h, e.name, sizeof(e.name),
						NULL, 0, &e.a);

		if (n == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (n < 0) {
			q->r.rc = sftp_fail(c, q, sftp, "listing");
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
		q->ents[q->nents++] = e;
	}
	if (libssh2_sftp_close_handle(q->h) == LIBSSH2_ERROR_EAGAIN)
		return -EAGAIN;
	q->h = NULL;
	return q->r.rc == -ECONNRESET ? -ECONNRESET : q->r.rc;
}

/* Read or write q->size bytes at q->off (a short read at the end). */
static int sftp_transfer(struct ssh_conn *c, struct sftp_req *q,
			 LIBSSH2_SFTP *sftp)
{
	bool rd = q->op == SFTP_READ;

	/* A seek drops libssh2's read-ahead: only when needed. */
	if (q->sub == 0) {
		if (libssh2_sftp_tell64(q->f->h) != (libssh2_uint64_t)q->off)
			libssh2_sftp_seek64(q->f->h, (libssh2_uint64_t)q->off);
		q->sub = 1;
	}
	while (q->done < q->size) {
		ssize_t n = rd ? libssh2_sftp_read(q->f->h, q->buf + q->done,
						   q->size - q->done)
			       : libssh2_sftp_write(q->f->h, q->cbuf + q->done,
						    q->size - q->done);

		if (n == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (n < 0)
			return sftp_fail(c, q, sftp,
					 rd ? "reading" : "writing");
		q->r.progress = true;
		if (n == 0 && rd)
			break;
		q->done += (size_t)n;
	}
	return 0;
}

static int sftp_step(struct ssh_conn *c, struct ssh_req *r)
{
	struct sftp_req *q = (struct sftp_req *)r;
	int rc = 0;
	LIBSSH2_SFTP *sftp = ssh_conn_sftp(c, r, &rc);
	const char *p = q->path;
	unsigned plen = p ? (unsigned)strlen(p) : 0;
	if (!sftp)
		return rc;
	if (q->op == SFTP_READ || q->op == SFTP_WRITE || q->op == SFTP_FSYNC ||
	    q->op == SFTP_FSTAT || q->op == SFTP_FSETSTAT ||
	    q->op == SFTP_CLOSE) {
		if (!q->f || !q->f->h)
			return -EBADF;
	} else if (!p) {
		return -EINVAL;
	}
	if (q->f && q->f->gen != ssh_conn_generation(c)) {
		snprintf(r->err, sizeof(r->err),
			 "the connection to %s was lost since the file was "
			 "opened; open it again",
			 ssh_conn_name(c));
		return -EIO;
	}
	switch (q->op) {
	case SFTP_STAT:
		rc = libssh2_sftp_stat_ex(sftp, p, plen, LIBSSH2_SFTP_LSTAT,
					  &q->attrs);
		return rc ? sftp_fail(c, q, sftp, "stat of") : 0;
	case SFTP_LIST:
		return sftp_list_step(c, q, sftp);
	case SFTP_OPEN:
		q->h = libssh2_sftp_open_ex(sftp, p, plen, q->flags, q->mode,
					    LIBSSH2_SFTP_OPENFILE);
		return q->h ? 0 : sftp_fail(c, q, sftp, "opening");
	case SFTP_READ:
	case SFTP_WRITE:
		return sftp_transfer(c, q, sftp);
	case SFTP_FSYNC:
		rc = libssh2_sftp_fsync(q->f->h);
		return rc ? sftp_fail(c, q, sftp, "syncing") : 0;
	case SFTP_FSTAT:
	case SFTP_FSETSTAT:
		rc = libssh2_sftp_fstat_ex(q->f->h, &q->attrs,
					   q->op == SFTP_FSETSTAT);
		return rc ? sftp_fail(c, q, sftp, "attributes of") : 0;
	case SFTP_CLOSE:
		rc = libssh2_sftp_close_handle(q->f->h);
		return rc ? sftp_fail(c, q, sftp, "closing") : 0;
	case SFTP_SETSTAT:
		rc = libssh2_sftp_stat_ex(sftp, p, plen, LIBSSH2_SFTP_SETSTAT,
					  &q->attrs);
		return rc ? sftp_fail(c, q, sftp, "changing") : 0;
	case SFTP_MKDIR:
		rc = libssh2_sftp_mkdir_ex(sftp, p, plen, q->mode);
		return rc ? sftp_fail(c, q, sftp, "making directory") : 0;
	case SFTP_UNLINK:
		rc = libssh2_sftp_unlink_ex(sftp, p, plen);
		return rc ? sftp_fail(c, q, sftp, "removing") : 0;
	case SFTP_RMDIR:
		rc = libssh2_sftp_rmdir_ex(sftp, p, plen);
		return rc ? sftp_fail(c, q, sftp, "removing directory") : 0;
	case SFTP_RENAME:
		rc = libssh2_sftp_rename_ex(sftp, p, plen, q->path2,
					    (unsigned)strlen(q->path2),
					    (long)q->flags);
		return rc ? sftp_fail(c, q, sftp, "renaming") : 0;
	case SFTP_READLINK:
		rc = libssh2_sftp_symlink_ex(sftp, p, plen, q->buf,
					     (unsigned)q->size,
					     LIBSSH2_SFTP_READLINK);
		if (rc < 0)
			return sftp_fail(c, q, sftp, "reading link");
		q->done = (size_t)rc;
		return 0;
	default:
		return -EINVAL;
	}
}

static int sftp_run(struct ssh_conn *c, struct sftp_req *q)
{
	int rc;

	q->r.step = sftp_step;
	q->r.lost = sftp_lost;
	/* Idempotent requests may be sent again on a new session. */
	q->r.retry_ok = q->op == SFTP_STAT || q->op == SFTP_LIST ||
			q->op == SFTP_READLINK;
	q->r.deadline_ns = 0;
	rc = ssh_submit(c, &q->r);
	if (rc == 0)
		rc = ssh_wait(c, &q->r, NULL, NULL);
	if (rc == -ECONNRESET || rc == -ESHUTDOWN)
		rc = -EIO;
	return rc;
}

/* A request on an open file (kernel read-ahead reads in parallel). */
static int sftp_run_file(struct sftp_req *q)
{
	int rc;

	pthread_mutex_lock(&q->f->lock);
	rc = sftp_run(q->f->c, q);
	pthread_mutex_unlock(&q->f->lock);
	return rc;
}

static void sftp_to_stat(const LIBSSH2_SFTP_ATTRIBUTES *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = (a->flags & LIBSSH2_SFTP_ATTR_PERMISSIONS)
			      ? (mode_t)a->permissions
			      : S_IFREG | 0644;
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_size = (off_t)a->filesize;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->filesize + 511) / 512);
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_atim.tv_sec = (time_t)a->atime;
	st->st_mtim.tv_sec = (time_t)a->mtime;
	st->st_ctim.tv_sec = (time_t)a->mtime;
}

int ssh_sftp_stat(struct ssh_conn *c, const char *path, struct stat *st)
{
	struct sftp_req q = {.op = SFTP_STAT, .path = path};
	int rc = sftp_run(c, &q);

	if (rc == 0)
		sftp_to_stat(&q.attrs, st);
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

		sftp_to_stat(&q.ents[i].a, &st);
		if (fn(ctx, q.ents[i].name, &st))
			break;
	}
	free(q.ents);
	return rc;
}

int ssh_sftp_open(struct ssh_conn *c, const char *path, int flags, mode_t mode,
		  struct ssh_file **out)
{
	struct sftp_req q = {.op = SFTP_OPEN, .path = path, .mode = mode};
	int acc = flags & O_ACCMODE, rc;

	q.flags = (acc == O_RDONLY || acc == O_RDWR ? LIBSSH2_FXF_READ : 0) |
		  (acc == O_WRONLY || acc == O_RDWR ? LIBSSH2_FXF_WRITE : 0) |
		  ((flags & O_CREAT) ? LIBSSH2_FXF_CREAT : 0) |
		  ((flags & O_TRUNC) ? LIBSSH2_FXF_TRUNC : 0) |
		  ((flags & O_EXCL) ? LIBSSH2_FXF_EXCL : 0) |
		  ((flags & O_APPEND) ? LIBSSH2_FXF_APPEND : 0);
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->gen = ssh_conn_generation(c);
	rc = sftp_run(c, &q);
	if (rc) {
		free(*out);
		*out = NULL;
		return rc;
	}
	(*out)->c = c;
	(*out)->h = q.h;
	pthread_mutex_init(&(*out)->lock, NULL);
	/* The session the handle belongs to (a reconnect may have happened
	 * between the look and the open: then the first use fails). */
	return 0;
}

int ssh_sftp_read(struct ssh_file *f, char *buf, size_t size, off_t off)
{
	struct sftp_req q = {
		.op = SFTP_READ, .f = f, .buf = buf, .size = size, .off = off};
	int rc = sftp_run_file(&q);

	return rc ? rc : (int)q.done;
}

int ssh_sftp_write(struct ssh_file *f, const char *buf, size_t size, off_t off)
{
	struct sftp_req q = {.op = SFTP_WRITE,
			     .f = f,
			     .cbuf = buf,
			     .size = size,
			     .off = off};
	int rc = sftp_run_file(&q);

	return rc ? rc : (int)q.done;
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
	int rc = sftp_run_file(&q);

	if (rc == 0)
		sftp_to_stat(&q.attrs, st);
	return rc;
}

int ssh_sftp_fsetsize(struct ssh_file *f, off_t size)
{
	struct sftp_req q = {.op = SFTP_FSETSTAT, .f = f};

	q.attrs.flags = LIBSSH2_SFTP_ATTR_SIZE;
	q.attrs.filesize = (libssh2_uint64_t)size;
	return sftp_run_file(&q);
}

int ssh_sftp_close(struct ssh_file *f)
{
	struct sftp_req q = {.op = SFTP_CLOSE, .f = f};
	int rc = sftp_run_file(&q);

	pthread_mutex_destroy(&f->lock);
	free(f);
	return rc;
}

static int sftp_setstat(struct ssh_conn *c, const char *path,
			const LIBSSH2_SFTP_ATTRIBUTES *a)
{
	struct sftp_req q = {.op = SFTP_SETSTAT, .path = path};

	q.attrs = *a;
	return sftp_run(c, &q);
}

int ssh_sftp_setsize(struct ssh_conn *c, const char *path, off_t size)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_SIZE};

	a.filesize = (libssh2_uint64_t)size;
	return sftp_setstat(c, path, &a);
}

int ssh_sftp_mkdir(struct ssh_conn *c, const char *path, mode_t mode)
{
	struct sftp_req q = {.op = SFTP_MKDIR, .path = path, .mode = mode};
	struct stat st;
	int rc = sftp_run(c, &q);

	/* OpenSSH answers "failure" for an existing name. */
	if (rc == -EIO && ssh_sftp_stat(c, path, &st) == 0)
		rc = -EEXIST;
	return rc;
}

int ssh_sftp_unlink(struct ssh_conn *c, const char *path)
{
	struct sftp_req q = {.op = SFTP_UNLINK, .path = path};

	return sftp_run(c, &q);
}

int ssh_sftp_rmdir(struct ssh_conn *c, const char *path)
{
	struct sftp_req q = {.op = SFTP_RMDIR, .path = path};
	struct stat st;
	int rc = sftp_run(c, &q);

	/* OpenSSH answers "failure" for a directory that is not empty. */
	if (rc == -EIO && ssh_sftp_stat(c, path, &st) == 0 &&
	    S_ISDIR(st.st_mode))
		rc = -ENOTEMPTY;
	return rc;
}

int ssh_sftp_rename(struct ssh_conn *c, const char *from, const char *to,
		    unsigned int flags)
{
	struct sftp_req q = {.op = SFTP_RENAME, .path = from, .path2 = to};
	struct stat st;
	int rc;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return -EINVAL;
	if (ssh_sftp_stat(c, to, &st) == 0) {
		if (flags & RENAME_NOREPLACE)
			return -EEXIST;
		/* SFTP version 3 renames onto nothing only. */
		rc = S_ISDIR(st.st_mode) ? ssh_sftp_rmdir(c, to)
					 : ssh_sftp_unlink(c, to);
		if (rc)
			return rc;
	}
	q.flags = LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
		  LIBSSH2_SFTP_RENAME_NATIVE;
	return sftp_run(c, &q);
}

int ssh_sftp_chmod(struct ssh_conn *c, const char *path, mode_t mode)
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS};

	a.permissions = mode & 07777;
	return sftp_setstat(c, path, &a);
}

int ssh_sftp_utimens(struct ssh_conn *c, const char *path,
		     const struct timespec tv[2])
{
	LIBSSH2_SFTP_ATTRIBUTES a = {.flags = LIBSSH2_SFTP_ATTR_ACMODTIME};
	time_t now = time(NULL);
	struct stat st;

	if (tv[0].tv_nsec == UTIME_OMIT || tv[1].tv_nsec == UTIME_OMIT) {
		int rc = ssh_sftp_stat(c, path, &st);

		if (rc)
			return rc;
	}
	a.atime = (unsigned long)(tv[0].tv_nsec == UTIME_NOW	? now
				  : tv[0].tv_nsec == UTIME_OMIT ? st.st_atime
								: tv[0].tv_sec);
	a.mtime = (unsigned long)(tv[1].tv_nsec == UTIME_NOW	? now
				  : tv[1].tv_nsec == UTIME_OMIT ? st.st_mtime
								: tv[1].tv_sec);
	return sftp_setstat(c, path, &a);
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
