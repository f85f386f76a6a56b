/* files/ of SSH nodes (hosts, ec2): each file operation of a node's
 * working directory as an SFTP request on the node's connection, with the
 * login's owner shown as the mounting user's, what another user makes
 * given to them (when the login may), and record and flock locks kept
 * here, between the processes that go through the mount. */
#include "providers/remote.h"

#include "providers/remote_ahead.h"
#include "providers/remote_attrs.h"
#include "providers/ssh_sftp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* One file's locks, while a handle that locked it is open: a memfd, whose
 * open file descriptions the kernel's own lock logic judges. */
struct remote_lock_owner {
	struct remote_lock_owner *next;
	uint64_t owner;
	int fd; /* this owner's POSIX locks, as OFD locks */
	const struct remote_file *by; /* the handle it first locked through */
};

struct remote_locks {
	struct remote_locks *next;
	struct remote_node *nd;
	char *path;
	int memfd;
	int users; /* handles that locked through it */
	struct remote_lock_owner *owners;
};

/* An open file of files/: the node stays while it is open. */
struct remote_file {
	struct remote_node *nd;
	struct ssh_file *f;
	char *path;		    /* as opened: the key of its locks */
	char *rel;		    /* in files/: the key of remote_linked */
	struct remote_locks *locks; /* once it locked */
	int flock_fd;		    /* its flock, on an OFD of locks->memfd */
	atomic_bool dirty;	    /* written since its last flush */
};

static pthread_mutex_t remote_locks_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct remote_locks *remote_locks_all;

/* Regular files that showed more than one link: their count is asked of
 * the listing of their directory (SFTP version 3's stat has none). */
#define REMOTE_LINKED_MAX 1024
static pthread_mutex_t remote_linked_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct remote_linked {
	const struct remote_node *nd;
	char *path;
} remote_linked[REMOTE_LINKED_MAX];

static int remote_linked_find(const struct remote_node *nd, const char *path)
{
	for (int i = 0; i < REMOTE_LINKED_MAX; i++)
		if (remote_linked[i].path && remote_linked[i].nd == nd &&
		    strcmp(remote_linked[i].path, path) == 0)
			return i;
	return -1;
}

static bool remote_linked_has(const struct remote_node *nd, const char *path)
{
	bool has;

	pthread_mutex_lock(&remote_linked_mutex);
	has = remote_linked_find(nd, path) >= 0;
	pthread_mutex_unlock(&remote_linked_mutex);
	return has;
}

static void remote_linked_set(const struct remote_node *nd, const char *path,
			      bool linked)
{
	int i;

	pthread_mutex_lock(&remote_linked_mutex);
	i = remote_linked_find(nd, path);
	if (!linked && i >= 0) {
		free(remote_linked[i].path);
		remote_linked[i].path = NULL;
	} else if (linked && i < 0) {
		static unsigned next;

		i = (int)(next++ % REMOTE_LINKED_MAX);
		free(remote_linked[i].path);
		remote_linked[i].path = strdup(path);
		remote_linked[i].nd = nd;
	}
	pthread_mutex_unlock(&remote_linked_mutex);
}

/* The server's path of a path of files/: ENAMETOOLONG for a name longer
 * than NAME_MAX (which OpenSSH would answer with a bare "bad message"). */
static int remote_path(const struct provider_node *node, const char *path,
		       char *out, size_t len)
{
	int n;

	for (const char *p = path; *p;) {
		size_t k = strcspn(p, "/");

		if (k > NAME_MAX)
			return -ENAMETOOLONG;
		p += k;
		p += *p == '/';
	}
	n = snprintf(out, len, "%s%s%s", node->workdir, *path ? "/" : "", path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Run an SFTP call on the node's connection with its path. */
#define REMOTE_FILE_CALL(p, node, path, call)                                  \
	do {                                                                   \
		struct remote_node *nd_;                                       \
		char full_[PROVIDER_PATH_MAX + 1], e_[SSH_ERR_MAX];            \
		int rc_ = remote_path(node, path, full_, sizeof(full_));       \
		if (rc_)                                                       \
			return rc_;                                            \
		nd_ = remote_get((p)->remote, node, e_, sizeof(e_));           \
		if (!nd_)                                                      \
			return -EIO;                                           \
		rc_ = call;                                                    \
		remote_put(nd_);                                               \
		return rc_;                                                    \
	} while (0)

/* REMOTE_FILE_CALL of a call that changes the node's files: whatever it
 * did, what was kept of them before is void once it ends. */
#define REMOTE_FILE_CHANGE(p, node, path, call)                                \
	REMOTE_FILE_CALL(p, node, path, remote_changed_rc(call))

static int remote_changed_rc(int rc)
{
	remote_attrs_changed();
	return rc;
}

/* The login's uid and gid on the node: the owner of its working
 * directory (which the login made). */
static void remote_login_ids(struct remote_node *nd,
			     const struct provider_node *node,
			     unsigned long *uid, unsigned long *gid)
{
	struct stat st;

	if (remote_ids(nd, uid, gid))
		return;
	if (ssh_sftp_stat(remote_conn(nd), node->workdir, &st) == 0 &&
	    st.st_uid != (uid_t)-1) {
		remote_set_ids(nd, st.st_uid, st.st_gid);
		*uid = st.st_uid;
		*gid = st.st_gid;
		return;
	}
	*uid = (unsigned long)-1;
	*gid = (unsigned long)-1;
}

static void remote_map_ids(struct stat *st, unsigned long uid,
			   unsigned long gid)
{
	if (st->st_uid == (uid_t)-1 || st->st_uid == (uid_t)uid)
		st->st_uid = getuid();
	if (st->st_gid == (gid_t)-1 || st->st_gid == (gid_t)gid)
		st->st_gid = getgid();
}

/* Owners as the mount shows them: the login's are the mounting user's
 * (as sshfs -o idmap=user), any other is the node's number. */
static void remote_ids_in(struct remote_node *nd,
			  const struct provider_node *node, struct stat *st)
{
	unsigned long uid, gid;

	remote_login_ids(nd, node, &uid, &gid);
	remote_map_ids(st, uid, gid);
}

/* Whether what the caller makes must be given to them, and to whom
 * (*uid, *gid as the node numbers them): a caller other than the mounting
 * user (allow_other), on a node whose login is root, which alone may give
 * a file away. Another login makes the file its own, as a local node's
 * daemon that is not root does. */
static bool remote_maker(struct remote_node *nd,
			 const struct provider_node *node, unsigned long *uid,
			 unsigned long *gid)
{
	const struct provider_caller *who = provider_caller_now;
	unsigned long luid, lgid;

	if (!who || who->uid == (uid_t)-1 ||
	    (who->uid == getuid() && who->gid == getgid()))
		return false;
	remote_login_ids(nd, node, &luid, &lgid);
	if (luid != 0)
		return false;
	*uid = who->uid == getuid() ? luid : who->uid;
	*gid = who->gid == getgid() ? lgid : who->gid;
	return true;
}

/* Give full, just made by the login, to its maker, as the node's kernel
 * would have made it: the maker's user, and its group unless the
 * directory is set-group-ID (then the directory's, which the file has
 * already). */
static int remote_give(struct remote_node *nd, const char *full,
		       unsigned long uid, unsigned long gid)
{
	char dir[PROVIDER_PATH_MAX + 1];
	const char *slash = strrchr(full, '/');
	struct stat st;

	if (slash && slash > full) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - full), full);
		if (ssh_sftp_stat(remote_conn(nd), dir, &st) == 0 &&
		    (st.st_mode & S_ISGID))
			gid = st.st_gid;
	}
	return ssh_sftp_chown(remote_conn(nd), full, uid, gid, NULL);
}

/* What a call that made full leaves: rc, or when the made file cannot be
 * given to its maker, the file removed (by `undo`) and the reason. */
static int remote_made(struct remote_node *nd, const struct provider_node *node,
		       const char *full, int rc,
		       int (*undo)(struct ssh_conn *, const char *))
{
	unsigned long uid, gid;

	if (rc || !remote_maker(nd, node, &uid, &gid))
		return rc;
	rc = remote_give(nd, full, uid, gid);
	if (rc)
		undo(remote_conn(nd), full);
	return rc;
}

struct remote_count {
	const char *name;
	nlink_t nlink;
};

static int remote_count_fn(void *ctx, const char *name, const struct stat *st)
{
	struct remote_count *k = ctx;

	if (strcmp(name, k->name) != 0)
		return 0;
	k->nlink = st->st_nlink;
	return 1;
}

/* The link count of a file known to have had more than one, from its
 * directory's listing. */
static void remote_nlink(struct remote_node *nd, const char *rel,
			 const char *full, struct stat *st)
{
	char dir[PROVIDER_PATH_MAX + 1];
	const char *slash = strrchr(full, '/');
	struct remote_count k = {.nlink = 0};

	if (!S_ISREG(st->st_mode) || !slash || !remote_linked_has(nd, rel))
		return;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - full), full);
	k.name = slash + 1;
	if (ssh_sftp_readdir(remote_conn(nd), dir, remote_count_fn, &k) == 0 &&
	    k.nlink) {
		st->st_nlink = k.nlink;
		if (k.nlink <= 1)
			remote_linked_set(nd, rel, false);
	}
}

static int remote_stat(struct remote_node *nd, const struct provider_node *node,
		       const char *rel, const char *full, struct stat *st)
{
	int rc = remote_attrs_get(nd, rel, st)
			 ? 0
			 : ssh_sftp_stat(remote_conn(nd), full, st);

	if (rc)
		return rc;
	remote_ids_in(nd, node, st);
	remote_nlink(nd, rel, full, st);
	return 0;
}

static int remote_files_getattr(struct provider *p,
				const struct provider_node *node,
				const char *path, struct stat *st)
{
	REMOTE_FILE_CALL(p, node, path,
			 remote_stat(nd_, node, path, full_, st));
}

struct remote_list {
	struct remote_node *nd;
	const struct provider_node *node;
	const char *dir;
	int (*fn)(void *ctx, const char *name, const struct stat *st);
	void *ctx;
	/* the files worth reading ahead (remote_ahead.h) */
	char **ahead;
	size_t n_ahead, cap_ahead;
};

/* Note name among l's files to read ahead. */
static void remote_list_ahead(struct remote_list *l, const char *name)
{
	if (l->n_ahead == l->cap_ahead) {
		size_t cap = l->cap_ahead ? 2 * l->cap_ahead : 64;
		char **nv;

		if (cap > REMOTE_AHEAD_LIST)
			return;
		nv = realloc(l->ahead, cap * sizeof(*nv));
		if (!nv)
			return;
		l->ahead = nv;
		l->cap_ahead = cap;
	}
	if ((l->ahead[l->n_ahead] = strdup(name)) != NULL)
		l->n_ahead++;
}

static int remote_list_fn(void *ctx, const char *name, const struct stat *st)
{
	struct remote_list *l = ctx;
	struct stat s = *st;

	/* The caller lists "." and ".." itself, as the local provider
	 * does. */
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	remote_ids_in(l->nd, l->node, &s);
	if (S_ISREG(s.st_mode)) {
		char rel[PROVIDER_PATH_MAX + 1];
		bool many = s.st_nlink > 1;

		snprintf(rel, sizeof(rel), "%s%s%s", l->dir, *l->dir ? "/" : "",
			 name);
		if (many || remote_linked_has(l->nd, rel))
			remote_linked_set(l->nd, rel, many);
		if (s.st_size > 0 && s.st_size <= REMOTE_AHEAD_SIZE)
			remote_list_ahead(l, name);
	}
	return l->fn(l->ctx, name, &s);
}

/* The listing of full, and its files worth reading ahead noted. */
static int remote_list(struct remote_list *l, const char *full)
{
	int rc = ssh_sftp_readdir(remote_conn(l->nd), full, remote_list_fn, l);

	if (rc == 0)
		remote_ahead_listed(remote_conn(l->nd), full,
				    (const char *const *)l->ahead, l->n_ahead);
	for (size_t i = 0; i < l->n_ahead; i++)
		free(l->ahead[i]);
	free(l->ahead);
	return rc;
}

static int remote_files_readdir(
	struct provider *p, const struct provider_node *node, const char *path,
	int (*fn)(void *ctx, const char *name, const struct stat *st),
	void *ctx)
{
	struct remote_list l = {
		.node = node, .dir = path, .fn = fn, .ctx = ctx};

	REMOTE_FILE_CALL(p, node, path, (l.nd = nd_, remote_list(&l, full_)));
}

/* ssh_sftp_open, and a file it makes given to its maker: then the file
 * is made exclusively first, so that a file that was there already is
 * never given away. */
static int remote_open(struct remote_node *nd, const struct provider_node *node,
		       const char *full, int flags, mode_t mode,
		       struct ssh_file **f, struct stat *after)
{
	struct ssh_conn *c = remote_conn(nd);
	unsigned long uid, gid;
	int rc = -EEXIST;

	if (!(flags & O_CREAT) || !remote_maker(nd, node, &uid, &gid))
		return ssh_sftp_open(c, full, flags, mode, f, after);
	/* Made or found: a few rounds while the node makes and removes it
	 * in between. */
	for (int round = 0; round < 8; round++) {
		rc = ssh_sftp_open(c, full, flags | O_EXCL, mode, f, after);
		if (rc == 0) {
			rc = remote_give(nd, full, uid, gid);
			if (rc) {
				ssh_sftp_close(*f);
				ssh_sftp_unlink(c, full);
			}
			if (after)
				after->st_mode = 0; /* its owner changed */
			return rc;
		}
		if (rc != -EEXIST || (flags & O_EXCL))
			return rc;
		rc = ssh_sftp_open(c, full, flags & ~O_CREAT, mode, f, after);
		if (rc != -ENOENT)
			return rc;
	}
	return rc;
}

static int remote_files_open(struct provider *p,
			     const struct provider_node *node, const char *path,
			     int flags, mode_t mode, uint64_t *fh)
{
	struct remote_file *hf = calloc(1, sizeof(*hf));
	char full[PROVIDER_PATH_MAX + 1], e[SSH_ERR_MAX];
	bool changes = flags & (O_CREAT | O_TRUNC), ahead;
	uint64_t before = remote_attrs_epoch();
	struct stat after = {0};
	int rc;

	if (!hf)
		return -ENOMEM;
	hf->flock_fd = -1;
	rc = remote_path(node, path, full, sizeof(full));
	hf->path = rc ? NULL : strdup(full);
	hf->rel = rc ? NULL : strdup(path);
	if (!rc && (!hf->path || !hf->rel))
		rc = -ENOMEM;
	hf->nd = rc ? NULL : remote_get(p->remote, node, e, sizeof(e));
	if (!rc && !hf->nd)
		rc = -EIO;
	/* A file of a directory being copied out may be open already. */
	ahead = !rc &&
		(flags & (O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND)) ==
			O_RDONLY &&
		remote_ahead_take(remote_conn(hf->nd), full, &hf->f, &after,
				  &before);
	if (!rc && !ahead)
		rc = remote_open(hf->nd, node, full, flags, mode, &hf->f,
				 &after);
	if (changes)
		remote_attrs_put_changed(hf->nd, path, &after, before);
	else if (!rc)
		remote_attrs_put(hf->nd, path, &after, before);
	if (rc) {
		if (hf->nd)
			remote_put(hf->nd);
		free(hf->path);
		free(hf->rel);
		free(hf);
		return rc;
	}
	*fh = (uint64_t)(uintptr_t)hf;
	return 0;
}

static struct remote_file *remote_fh(uint64_t fh)
{
	return (struct remote_file *)(uintptr_t)fh;
}

/* The writes of hf are on the node (or failed): what was looked at while
 * they were on their way is void. Every call on an open file but a write
 * waits for its writes first. */
static int remote_drained(struct remote_file *hf, int rc)
{
	if (atomic_exchange(&hf->dirty, false))
		remote_attrs_changed();
	return rc;
}

static int remote_files_read(struct provider *p, uint64_t fh, char *buf,
			     size_t size, off_t off)
{
	(void)p;
	return remote_drained(remote_fh(fh),
			      ssh_sftp_read(remote_fh(fh)->f, buf, size, off));
}

static int remote_files_write(struct provider *p, uint64_t fh, const char *buf,
			      size_t size, off_t off)
{
	struct remote_file *hf = remote_fh(fh);
	int rc = ssh_sftp_write(hf->f, buf, size, off);

	(void)p;
	atomic_store(&hf->dirty, true);
	remote_attrs_changed();
	return rc;
}

static int remote_files_fsync(struct provider *p, uint64_t fh)
{
	(void)p;
	return remote_drained(remote_fh(fh), ssh_sftp_fsync(remote_fh(fh)->f));
}

static int remote_files_flush(struct provider *p, uint64_t fh)
{
	(void)p;
	return remote_drained(remote_fh(fh), ssh_sftp_flush(remote_fh(fh)->f));
}

/* SFTP's fstat has no link count: the names known to share the file. */
static int remote_files_shared(struct provider *p, uint64_t fh)
{
	struct remote_file *hf = remote_fh(fh);

	(void)p;
	return remote_linked_has(hf->nd, hf->rel);
}

static int remote_files_fgetattr(struct provider *p, uint64_t fh,
				 struct stat *st)
{
	struct remote_file *hf = remote_fh(fh);
	unsigned long uid, gid;
	int rc = remote_drained(hf, ssh_sftp_fstat(hf->f, st));

	(void)p;
	if (rc)
		return rc;
	/* The ids were learned when the path was first looked at. */
	if (!remote_ids(hf->nd, &uid, &gid))
		uid = gid = (unsigned long)-1;
	remote_map_ids(st, uid, gid);
	return 0;
}

static int remote_files_ftruncate(struct provider *p, uint64_t fh, off_t size)
{
	(void)p;
	return remote_changed_rc(ssh_sftp_fsetsize(remote_fh(fh)->f, size));
}

/* Drop a handle's hold on its file's locks (the last one frees them:
 * closing the descriptions releases whatever they held). The owners that
 * first locked through it go with it: an OFD lock's owner is the open
 * file description, which is this handle, and the kernel asks no unlock
 * of it as the description closes; a process's POSIX locks end as it
 * closes any descriptor of the file (the unlock came with the flush). */
static void remote_locks_leave(struct remote_file *hf)
{
	struct remote_locks *lk = hf->locks, **pp;

	if (!lk)
		return;
	pthread_mutex_lock(&remote_locks_mutex);
	if (hf->flock_fd >= 0)
		close(hf->flock_fd);
	for (struct remote_lock_owner **op = &lk->owners; *op;) {
		struct remote_lock_owner *o = *op;

		if (o->by != hf) {
			op = &o->next;
			continue;
		}
		*op = o->next;
		close(o->fd);
		free(o);
	}
	if (--lk->users == 0) {
		for (pp = &remote_locks_all; *pp; pp = &(*pp)->next)
			if (*pp == lk) {
				*pp = lk->next;
				break;
			}
		while (lk->owners) {
			struct remote_lock_owner *o = lk->owners;

			lk->owners = o->next;
			close(o->fd);
			free(o);
		}
		close(lk->memfd);
		free(lk->path);
		free(lk);
	}
	pthread_mutex_unlock(&remote_locks_mutex);
	hf->locks = NULL;
	hf->flock_fd = -1;
}

static int remote_files_close(struct provider *p, uint64_t fh)
{
	struct remote_file *hf = remote_fh(fh);
	int rc = remote_drained(hf, ssh_sftp_close(hf->f));

	(void)p;
	remote_locks_leave(hf);
	remote_put(hf->nd);
	free(hf->path);
	free(hf->rel);
	free(hf);
	return rc;
}

/* The handle's file's locks, made on its first lock (mutex held). */
static struct remote_locks *remote_locks_join(struct remote_file *hf)
{
	struct remote_locks *lk;

	if (hf->locks)
		return hf->locks;
	for (lk = remote_locks_all; lk; lk = lk->next)
		if (lk->nd == hf->nd && strcmp(lk->path, hf->path) == 0)
			break;
	if (!lk) {
		lk = calloc(1, sizeof(*lk));
		if (!lk)
			return NULL;
		lk->path = strdup(hf->path);
		lk->memfd = memfd_create("cclfs-locks", MFD_CLOEXEC);
		if (!lk->path || lk->memfd < 0) {
			if (lk->memfd >= 0)
				close(lk->memfd);
			free(lk->path);
			free(lk);
			return NULL;
		}
		lk->nd = hf->nd;
		lk->next = remote_locks_all;
		remote_locks_all = lk;
	}
	lk->users++;
	hf->locks = lk;
	return lk;
}

/* A new open file description of the memfd. */
static int remote_locks_ofd(const struct remote_locks *lk)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", lk->memfd);
	return open(proc, O_RDWR | O_CLOEXEC);
}

/* SFTP has no locks: POSIX locks of the processes that go through the
 * mount, each owner's on an open file description of its own, so that
 * owners conflict as POSIX says (processes on the node are not seen). */
static int remote_files_lock(struct provider *p, uint64_t fh, uint64_t owner,
			     int cmd, struct flock *fl)
{
	struct remote_file *hf = remote_fh(fh);
	struct remote_lock_owner *o = NULL, **pp;
	struct remote_locks *lk;
	struct flock l = *fl;
	int rc = 0;

	(void)p;
	if (cmd != F_GETLK && cmd != F_SETLK && cmd != F_SETLKW)
		return -EINVAL;
	pthread_mutex_lock(&remote_locks_mutex);
	lk = remote_locks_join(hf);
	if (!lk) {
		pthread_mutex_unlock(&remote_locks_mutex);
		return -ENOLCK;
	}
	for (pp = &lk->owners; *pp; pp = &(*pp)->next)
		if ((*pp)->owner == owner) {
			o = *pp;
			break;
		}
	if (!o && (cmd == F_GETLK || fl->l_type == F_UNLCK)) {
		/* Holds nothing: F_GETLK asks as a newcomer would. */
		int fd = cmd == F_GETLK ? remote_locks_ofd(lk) : -1;

		if (fd >= 0) {
			l.l_pid = 0;
			if (fcntl(fd, F_OFD_GETLK, &l) < 0)
				rc = -errno;
			close(fd);
		} else if (cmd == F_GETLK) {
			rc = -ENOLCK;
		}
		goto out;
	}
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o || (o->fd = remote_locks_ofd(lk)) < 0) {
			free(o);
			rc = -ENOLCK;
			goto out;
		}
		o->owner = owner;
		o->by = hf;
		o->next = lk->owners;
		lk->owners = o;
	}
	l.l_pid = 0;
	if (fcntl(o->fd, cmd == F_GETLK ? F_OFD_GETLK : F_OFD_SETLK, &l) < 0)
		rc = errno == EACCES ? -EAGAIN : -errno;
	else if (cmd != F_GETLK && l.l_type == F_UNLCK && l.l_start == 0 &&
		 l.l_len == 0 && l.l_whence == SEEK_SET) {
		/* All of the owner's locks are gone: so is its description. */
		for (pp = &lk->owners; *pp != o; pp = &(*pp)->next)
			;
		*pp = o->next;
		close(o->fd);
		free(o);
	}
out:
	pthread_mutex_unlock(&remote_locks_mutex);
	if (!rc && cmd == F_GETLK) {
		fl->l_type = l.l_type;
		fl->l_whence = l.l_whence;
		fl->l_start = l.l_start;
		fl->l_len = l.l_len;
		fl->l_pid = l.l_pid > 0 ? l.l_pid : 0;
	}
	return rc;
}

/* flock(2) between the handles of the mount: each handle's on an open
 * file description of its own. */
static int remote_files_flock(struct provider *p, uint64_t fh, int op)
{
	struct remote_file *hf = remote_fh(fh);
	struct remote_locks *lk;
	int rc = 0;

	(void)p;
	pthread_mutex_lock(&remote_locks_mutex);
	lk = remote_locks_join(hf);
	if (lk && hf->flock_fd < 0)
		hf->flock_fd = remote_locks_ofd(lk);
	if (!lk || hf->flock_fd < 0)
		rc = -ENOLCK;
	else if (flock(hf->flock_fd, (op & ~LOCK_NB) | LOCK_NB) < 0)
		rc = -errno;
	pthread_mutex_unlock(&remote_locks_mutex);
	return rc;
}

static int remote_files_truncate(struct provider *p,
				 const struct provider_node *node,
				 const char *path, off_t size)
{
	REMOTE_FILE_CHANGE(p, node, path,
			   ssh_sftp_setsize(remote_conn(nd_), full_, size));
}

static int remote_files_mkdir(struct provider *p,
			      const struct provider_node *node,
			      const char *path, mode_t mode)
{
	REMOTE_FILE_CHANGE(
		p, node, path,
		remote_made(nd_, node, full_,
			    ssh_sftp_mkdir(remote_conn(nd_), full_, mode),
			    ssh_sftp_rmdir));
}

static int remote_files_unlink(struct provider *p,
			       const struct provider_node *node,
			       const char *path)
{
	REMOTE_FILE_CHANGE(p, node, path,
			   ssh_sftp_unlink(remote_conn(nd_), full_));
}

static int remote_files_rmdir(struct provider *p,
			      const struct provider_node *node,
			      const char *path)
{
	REMOTE_FILE_CHANGE(p, node, path,
			   ssh_sftp_rmdir(remote_conn(nd_), full_));
}

static int remote_files_rename(struct provider *p,
			       const struct provider_node *node,
			       const char *from, const char *to,
			       unsigned int flags)
{
	char to_full[PROVIDER_PATH_MAX + 1];
	int rc = remote_path(node, to, to_full, sizeof(to_full));

	if (rc)
		return rc;
	REMOTE_FILE_CHANGE(
		p, node, from,
		ssh_sftp_rename(remote_conn(nd_), full_, to_full, flags));
}

/* The attributes kept of the file, if any, with the new mode are what
 * the node now has: the getattr after a chmod needs no request. Not so
 * with set-id or sticky bits, which the node's kernel may drop silently
 * (setgid when the login is not in the file's group). */
static int remote_chmod(struct remote_node *nd, const char *rel,
			const char *full, mode_t mode)
{
	uint64_t before = remote_attrs_epoch();
	struct stat st = {0};
	bool had = remote_attrs_get(nd, rel, &st);
	int rc = ssh_sftp_chmod(remote_conn(nd), full, mode);

	if (rc == 0 && had && !(mode & 07000))
		st.st_mode = (st.st_mode & S_IFMT) | (mode & 0777);
	else
		st.st_mode = 0;
	remote_attrs_put_changed(nd, rel, &st, before);
	return rc;
}

static int remote_files_chmod(struct provider *p,
			      const struct provider_node *node,
			      const char *path, mode_t mode)
{
	REMOTE_FILE_CALL(p, node, path, remote_chmod(nd_, path, full_, mode));
}

/* Owners as the node knows them: the mounting user's are the login's. */
static int remote_chown(struct remote_node *nd,
			const struct provider_node *node, const char *rel,
			const char *full, uid_t uid, gid_t gid)
{
	unsigned long luid, lgid,
		u = uid == (uid_t)-1 ? (unsigned long)-1 : uid,
		g = gid == (gid_t)-1 ? (unsigned long)-1 : gid;

	uint64_t before = remote_attrs_epoch();
	struct stat after = {0};
	int rc;

	remote_login_ids(nd, node, &luid, &lgid);

	if (uid == getuid() && luid != (unsigned long)-1)
		u = luid;
	if (gid == getgid() && lgid != (unsigned long)-1)
		g = lgid;
	rc = ssh_sftp_chown(remote_conn(nd), full, u, g, &after);
	if (rc)
		after.st_mode = 0;
	remote_attrs_put_changed(nd, rel, &after, before);
	return rc;
}

static int remote_files_chown(struct provider *p,
			      const struct provider_node *node,
			      const char *path, uid_t uid, gid_t gid)
{
	REMOTE_FILE_CALL(p, node, path,
			 remote_chown(nd_, node, path, full_, uid, gid));
}

static int remote_utimens(struct remote_node *nd, const char *rel,
			  const char *full, const struct timespec tv[2])
{
	uint64_t before = remote_attrs_epoch();
	struct stat after = {0};
	int rc = ssh_sftp_utimens(remote_conn(nd), full, tv, &after);

	if (rc)
		after.st_mode = 0;
	remote_attrs_put_changed(nd, rel, &after, before);
	return rc;
}

static int remote_files_utimens(struct provider *p,
				const struct provider_node *node,
				const char *path, const struct timespec tv[2])
{
	REMOTE_FILE_CALL(p, node, path, remote_utimens(nd_, path, full_, tv));
}

static int remote_files_symlink(struct provider *p,
				const struct provider_node *node,
				const char *target, const char *path)
{
	REMOTE_FILE_CHANGE(
		p, node, path,
		remote_made(nd_, node, full_,
			    ssh_sftp_symlink(remote_conn(nd_), target, full_),
			    ssh_sftp_unlink));
}

static int remote_files_readlink(struct provider *p,
				 const struct provider_node *node,
				 const char *path, char *buf, size_t size)
{
	REMOTE_FILE_CALL(p, node, path,
			 ssh_sftp_readlink(remote_conn(nd_), full_, buf, size));
}

static int remote_link(struct remote_node *nd, const char *from,
		       const char *full_from, const char *to,
		       const char *full_to)
{
	int rc = ssh_sftp_link(remote_conn(nd), full_from, full_to);

	if (rc == 0) {
		remote_linked_set(nd, from, true);
		remote_linked_set(nd, to, true);
	}
	return rc;
}

static int remote_files_link(struct provider *p,
			     const struct provider_node *node, const char *from,
			     const char *to)
{
	char to_full[PROVIDER_PATH_MAX + 1];
	int rc = remote_path(node, to, to_full, sizeof(to_full));

	if (rc)
		return rc;
	REMOTE_FILE_CHANGE(p, node, from,
			   remote_link(nd_, from, full_, to, to_full));
}

/* A regular file is made as open(O_CREAT | O_EXCL) would; SFTP cannot
 * make fifos, sockets or devices: EPERM, as a file system without them
 * answers (and as sshfs does). */
static int remote_mknod(struct remote_node *nd, const char *full, mode_t mode)
{
	struct ssh_file *f;
	int rc;

	if (!S_ISREG(mode))
		return -EPERM;
	rc = ssh_sftp_open(remote_conn(nd), full, O_WRONLY | O_CREAT | O_EXCL,
			   mode & 07777, &f, NULL);
	return rc ? rc : ssh_sftp_close(f);
}

static int remote_files_mknod(struct provider *p,
			      const struct provider_node *node,
			      const char *path, mode_t mode, dev_t dev)
{
	(void)dev;
	REMOTE_FILE_CHANGE(p, node, path,
			   remote_made(nd_, node, full_,
				       remote_mknod(nd_, full_, mode),
				       ssh_sftp_unlink));
}

static int remote_files_statfs(struct provider *p,
			       const struct provider_node *node,
			       const char *path, struct statvfs *st)
{
	REMOTE_FILE_CALL(p, node, path,
			 ssh_sftp_statvfs(remote_conn(nd_), full_, st));
}

const struct provider_file_ops remote_file_ops = {
	.getattr = remote_files_getattr,
	.readdir = remote_files_readdir,
	.open = remote_files_open,
	.read = remote_files_read,
	.write = remote_files_write,
	.fsync = remote_files_fsync,
	.flush = remote_files_flush,
	.shared = remote_files_shared,
	.fgetattr = remote_files_fgetattr,
	.ftruncate = remote_files_ftruncate,
	.close = remote_files_close,
	.truncate = remote_files_truncate,
	.mkdir = remote_files_mkdir,
	.unlink = remote_files_unlink,
	.rmdir = remote_files_rmdir,
	.rename = remote_files_rename,
	.chmod = remote_files_chmod,
	.utimens = remote_files_utimens,
	.symlink = remote_files_symlink,
	.readlink = remote_files_readlink,
	.link = remote_files_link,
	.mknod = remote_files_mknod,
	.chown = remote_files_chown,
	.statfs = remote_files_statfs,
	.lock = remote_files_lock,
	.flock = remote_files_flock,
};
