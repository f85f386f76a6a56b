/* The files of a local node: its working directory (what
 * clusters/H/nodes/N/files/ shows for the local provider).
 *
 * Every path is resolved beneath the node's directory, never from an
 * absolute path: the workdir is opened (O_PATH, its last component not
 * followed), and a path below it goes through openat2() with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, so a symlink in the middle of
 * the path that leads out of the node (a node command may put one there at
 * any time) is refused, with EACCES, instead of followed. A call on a name
 * (stat, unlink, rename, symlink, readlink, chmod, utimens...) resolves
 * the name's directory that way and acts on the last component with the
 * *at() call without following it: a symlink is shown as a symlink, and
 * the kernel of whoever reads through the mount follows it with the
 * reader's own rights. A path longer than the kernel takes at once is
 * resolved a piece at a time, each piece beneath the directory the last
 * one reached.
 *
 * Calls on names are made with the rights of the process that asks
 * (provider_caller_now) when the daemon runs as root, so that another
 * user (allow_other) can do what the disk would let them do and no more,
 * and what they make is theirs; and with no umask of the daemon's, since
 * the kernel applied the caller's already. Locks are taken on the node's
 * file itself (open file description locks, one description per lock
 * owner), so processes through the mount and on the node exclude each
 * other. */
#include "providers/provider.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h> /* renameat2 */
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What openat2() accepts of the flags an open through the mount carries
 * (the kernel adds bits of its own, such as the one for execve, that
 * openat2() would refuse with EINVAL). */
#define LOCAL_FILES_OPEN_FLAGS                                                 \
	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_NONBLOCK |      \
	 O_SYNC | O_DSYNC | O_DIRECT | O_DIRECTORY | O_NOFOLLOW | O_NOATIME |  \
	 O_NOCTTY | O_PATH)

/* The node's working directory as an O_PATH descriptor, or -errno. Its
 * last component is not followed: a node that replaced its own directory
 * by a symlink gets ENOTDIR, not the symlink's target. */
static int local_files_workdir(const struct provider_node *node)
{
	int fd;

	if (node->workdir[0] != '/')
		return -ENOENT;
	fd = open(node->workdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The rights of the thread while it acts for a caller, and what to put
 * back after. */
struct local_as {
	bool umasked, switched;
	mode_t umask;
	int ngroups;
	gid_t groups[256];
	gid_t callers[256];
};

/* Whether this thread has its own umask (and cwd): set once per thread. */
static _Thread_local int local_files_own_fs;

/* Act for the caller: 0, or -EACCES when that cannot be done (never act
 * as the daemon instead). A caller whose groups cannot be read (more than
 * fit in callers[], or asking from a PID namespace the daemon does not
 * see) gets its own user and group alone: less than it may have, never
 * more. */
static int local_files_enter(struct local_as *as)
{
	const struct provider_caller *who = provider_caller_now;
	int n;

	as->umasked = as->switched = false;
	/* The umask is the process's unless the thread unshares it: never
	 * clear the daemon's own, which guards its state files. */
	if (local_files_own_fs == 0)
		local_files_own_fs = unshare(CLONE_FS) == 0 ? 1 : -1;
	if (local_files_own_fs > 0) {
		as->umask = umask(0);
		as->umasked = true;
	}
	if (!who || who->uid == (uid_t)-1 || geteuid() != 0 ||
	    (who->uid == geteuid() && who->gid == getegid()))
		return 0;
	as->ngroups = getgroups(
		(int)(sizeof(as->groups) / sizeof(as->groups[0])), as->groups);
	n = who->groups
		    ? who->groups(as->callers, (int)(sizeof(as->callers) /
						     sizeof(as->callers[0])))
		    : -1;
	/* The raw call: glibc's setgroups would change every thread. */
	if (as->ngroups < 0 ||
	    syscall(SYS_setgroups, (size_t)(n < 0 ? 0 : n), as->callers))
		return -EACCES;
	setfsgid(who->gid);
	setfsuid(who->uid);
	as->switched = true;
	return 0;
}

static void local_files_leave(const struct local_as *as)
{
	if (as->switched) {
		setfsuid(geteuid());
		setfsgid(getegid());
		syscall(SYS_setgroups, (size_t)as->ngroups, as->groups);
	}
	if (as->umasked)
		umask(as->umask);
}

/* path below dirfd opened with flags, resolved beneath dirfd: a descriptor
 * or -errno. A resolution that would leave dirfd (a symlink leading out,
 * an absolute symlink) is -EACCES. A path the kernel would find too long
 * is opened a piece at a time. */
static int local_files_beneath(int dirfd, const char *path, int flags,
			       mode_t mode);

static int local_files_beneath_long(int dirfd, const char *path, int flags,
				    mode_t mode)
{
	char piece[PATH_MAX];
	size_t cut = PATH_MAX - 1;
	int fd, rc;

	while (cut > 0 && path[cut] != '/')
		cut--;
	if (cut == 0)
		return -ENAMETOOLONG; /* one name longer than a path */
	memcpy(piece, path, cut);
	piece[cut] = '\0';
	fd = local_files_beneath(dirfd, piece, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	while (path[cut] == '/')
		cut++;
	rc = local_files_beneath(fd, path + cut, flags, mode);
	close(fd);
	return rc;
}

static int local_files_beneath(int dirfd, const char *path, int flags,
			       mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode & 07777 : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};

	if (strlen(path) >= PATH_MAX)
		return local_files_beneath_long(dirfd, path, flags, mode);
	/* EAGAIN: a rename raced with the check of a ".." in a symlink. */
	for (int tries = 0; tries < 8; tries++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

		if (fd >= 0)
			return (int)fd;
		if (errno != EAGAIN)
			return errno == EXDEV ? -EACCES : -errno;
	}
	return -EAGAIN;
}

/* path without leading slashes; -EACCES for a ".." component. */
static int local_files_rel(const char **path)
{
	const char *s = *path;

	for (const char *p = s; (p = strstr(p, "..")); p += 2)
		if ((p == s || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return -EACCES;
	while (*s == '/')
		s++;
	*path = s;
	return 0;
}

/* Open path below the node's directory (the directory itself for ""),
 * as the caller. */
static int local_files_open_path(const struct provider_node *node,
				 const char *path, int flags, mode_t mode)
{
	int rc = local_files_rel(&path), wd, fd;
	struct local_as as;

	if (rc)
		return rc;
	wd = local_files_workdir(node); /* as the daemon: see local_name_get */
	if (wd < 0)
		return wd;
	fd = local_files_enter(&as);
	if (fd == 0)
		fd = local_files_beneath(wd, *path ? path : ".", flags, mode);
	close(wd);
	local_files_leave(&as);
	return fd;
}

/* Whether path names the node's directory itself. */
static int local_files_is_root(const char *path)
{
	return path[strspn(path, "/")] == '\0';
}

/* A name to act on: dir and name for an *at() call, dir resolved beneath
 * the node's directory. The node's directory itself ("") is its absolute
 * path from AT_FDCWD. */
struct local_name {
	int wd, dir; /* -1 when not open */
	const char *name;
	char *buf;
	struct local_as as;
};

static int local_name_get(const struct provider_node *node, const char *path,
			  struct local_name *n)
{
	size_t len;
	char *slash;
	int rc;

	n->wd = n->dir = -1;
	n->name = "";
	n->buf = NULL;
	n->as.umasked = n->as.switched = false;
	rc = local_files_rel(&path);
	if (rc)
		return rc;
	len = strlen(path);
	while (len && path[len - 1] == '/')
		len--;
	/* The node's directory and what leads to it are the daemon's to
	 * reach (the caller may not pass the state directory), and a call on
	 * the directory itself is made as the daemon: the kernel has checked
	 * the caller's rights to it (default_permissions) already. Below it,
	 * the caller's rights. */
	if (len == 0) {
		slash = strrchr(node->workdir, '/');
		if (node->workdir[0] != '/' || !slash[1])
			return -ENOENT;
		n->buf = strndup(node->workdir,
				 slash == node->workdir
					 ? 1
					 : (size_t)(slash - node->workdir));
		if (!n->buf)
			return -ENOMEM;
		n->dir = open(n->buf, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (n->dir < 0)
			return -errno;
		n->name = slash + 1;
		return 0;
	}
	n->buf = strndup(path, len);
	if (!n->buf)
		return -ENOMEM;
	n->wd = local_files_workdir(node);
	if (n->wd < 0)
		return n->wd;
	rc = local_files_enter(&n->as);
	if (rc)
		return rc;
	slash = strrchr(n->buf, '/');
	if (!slash) {
		n->dir = n->wd;
		n->name = n->buf;
		return 0;
	}
	*slash = '\0';
	n->name = slash + 1;
	n->dir = local_files_beneath(n->wd, n->buf, O_PATH | O_DIRECTORY, 0);
	return n->dir < 0 ? n->dir : 0;
}

static void local_name_put(struct local_name *n)
{
	if (n->dir >= 0 && n->dir != n->wd)
		close(n->dir);
	if (n->wd >= 0)
		close(n->wd);
	free(n->buf);
	local_files_leave(&n->as);
}

/* Run `call` (an expression using n, 0 or -1 with errno) on the name of
 * path: 0 or -errno. */
#define LOCAL_NAME(node, path, call)                                           \
	({                                                                     \
		struct local_name n;                                           \
		int rc_ = local_name_get(node, path, &n);                      \
		if (rc_ == 0)                                                  \
			rc_ = (call) ? -errno : 0;                             \
		local_name_put(&n);                                            \
		rc_;                                                           \
	})

static int local_files_getattr(struct provider *p,
			       const struct provider_node *node,
			       const char *path, struct stat *st)
{
	(void)p;
	return LOCAL_NAME(node, path,
			  fstatat(n.dir, n.name, st, AT_SYMLINK_NOFOLLOW));
}

static int local_files_readdir(
	struct provider *p, const struct provider_node *node, const char *path,
	int (*fn)(void *ctx, const char *name, const struct stat *st),
	void *ctx)
{
	(void)p;
	struct dirent *e;
	DIR *d;
	int fd = local_files_open_path(node, path, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (fn(ctx, e->d_name, &st))
			break;
	}
	closedir(d);
	return 0;
}

static int local_files_open(struct provider *p,
			    const struct provider_node *node, const char *path,
			    int flags, mode_t mode, uint64_t *fh)
{
	(void)p;
	int fd = local_files_open_path(node, path,
				       flags & LOCAL_FILES_OPEN_FLAGS, mode);

	if (fd < 0)
		return fd;
	*fh = (uint64_t)fd;
	return 0;
}

static int local_files_read(struct provider *p, uint64_t fh, char *buf,
			    size_t size, off_t off)
{
	(void)p;
	ssize_t n = pread((int)fh, buf, size, off);

	return n < 0 ? -errno : (int)n;
}

static int local_files_write(struct provider *p, uint64_t fh, const char *buf,
			     size_t size, off_t off)
{
	(void)p;
	ssize_t n = pwrite((int)fh, buf, size, off);

	return n < 0 ? -errno : (int)n;
}

/* The handle is the node file's own descriptor. */
static int local_files_fd(struct provider *p, uint64_t fh)
{
	(void)p;
	return (int)fh;
}

static int local_files_fsync(struct provider *p, uint64_t fh)
{
	(void)p;
	return fsync((int)fh) ? -errno : 0;
}

static int local_files_fgetattr(struct provider *p, uint64_t fh,
				struct stat *st)
{
	(void)p;
	return fstat((int)fh, st) ? -errno : 0;
}

static int local_files_ftruncate(struct provider *p, uint64_t fh, off_t size)
{
	(void)p;
	return ftruncate((int)fh, size) ? -errno : 0;
}

static void local_locks_drop(int fh);

static int local_files_close(struct provider *p, uint64_t fh)
{
	(void)p;
	local_locks_drop((int)fh);
	/* Its flock ends with the handle, not with the description: the
	 * description may live on as the kernel's backing file of other
	 * opens of the file (passthrough), and the kernel asks no unlock. */
	flock((int)fh, LOCK_UN | LOCK_NB);
	return close((int)fh) ? -errno : 0;
}

/* Through a descriptor of the file itself: O_NOFOLLOW, so a symlink put
 * in its place is ELOOP; O_NONBLOCK, so a FIFO never blocks the call. */
static int local_files_truncate(struct provider *p,
				const struct provider_node *node,
				const char *path, off_t size)
{
	(void)p;
	int fd = local_files_open_path(node, path,
				       O_WRONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	int rc;

	if (fd < 0)
		return fd;
	rc = ftruncate(fd, size) ? -errno : 0;
	close(fd);
	return rc;
}

static int local_files_mkdir(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	(void)p;
	return LOCAL_NAME(node, path, mkdirat(n.dir, n.name, mode));
}

static int local_files_unlink(struct provider *p,
			      const struct provider_node *node,
			      const char *path)
{
	(void)p;
	return LOCAL_NAME(node, path, unlinkat(n.dir, n.name, 0));
}

static int local_files_rmdir(struct provider *p,
			     const struct provider_node *node, const char *path)
{
	(void)p;
	if (local_files_is_root(path))
		return -EBUSY; /* the working directory itself stays */
	return LOCAL_NAME(node, path, unlinkat(n.dir, n.name, AT_REMOVEDIR));
}

/* call (renameat2 or a linkat alike) from one name to another, both
 * resolved beneath the node's directory: 0 or -errno. */
static int local_files_two(const struct provider_node *node, const char *from,
			   const char *to, unsigned int flags,
			   int (*call)(int, const char *, int, const char *,
				       unsigned int))
{
	struct local_name a, b;
	int rc = local_name_get(node, from, &a);

	if (rc == 0) {
		rc = local_name_get(node, to, &b);
		if (rc == 0 && call(a.dir, a.name, b.dir, b.name, flags))
			rc = -errno;
		local_name_put(&b);
	}
	local_name_put(&a);
	return rc;
}

/* linkat as renameat2's shape: never follows a symlink (a link to the
 * symlink itself, as ln does). */
static int local_files_linkat(int olddir, const char *old, int newdir,
			      const char *new, unsigned int flags)
{
	(void)flags;
	return linkat(olddir, old, newdir, new, 0);
}

static int local_files_link(struct provider *p,
			    const struct provider_node *node, const char *from,
			    const char *to)
{
	(void)p;
	return local_files_two(node, from, to, 0, local_files_linkat);
}

static int local_files_rename(struct provider *p,
			      const struct provider_node *node,
			      const char *from, const char *to,
			      unsigned int flags)
{
	(void)p;
	if (local_files_is_root(from) || local_files_is_root(to))
		return -EBUSY; /* the working directory itself stays */
	return local_files_two(node, from, to, flags, &renameat2);
}

/* A symlink has no mode of its own: EOPNOTSUPP (fchmodat's answer). */
static int local_files_chmod(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	(void)p;
	return LOCAL_NAME(
		node, path,
		fchmodat(n.dir, n.name, mode & 07777, AT_SYMLINK_NOFOLLOW));
}

static int local_files_utimens(struct provider *p,
			       const struct provider_node *node,
			       const char *path, const struct timespec tv[2])
{
	(void)p;
	return LOCAL_NAME(node, path,
			  utimensat(n.dir, n.name, tv, AT_SYMLINK_NOFOLLOW));
}

/* The target is stored as given: one leading out of the node is shown as
 * a symlink and never followed here. */
static int local_files_symlink(struct provider *p,
			       const struct provider_node *node,
			       const char *target, const char *path)
{
	(void)p;
	return LOCAL_NAME(node, path, symlinkat(target, n.dir, n.name));
}

static int local_files_readlink(struct provider *p,
				const struct provider_node *node,
				const char *path, char *buf, size_t size)
{
	(void)p;
	ssize_t len = -1;
	int rc;

	if (size == 0)
		return -EINVAL;
	rc = LOCAL_NAME(node, path,
			(len = readlinkat(n.dir, n.name, buf, size - 1)) < 0);
	if (rc == 0)
		buf[len] = '\0';
	return rc;
}

/* FIFOs, UNIX sockets (bind() through the mount makes one) and empty
 * regular files. Device nodes are refused as in an unprivileged
 * container: the daemon may be root, the caller is not meant to be. */
static int local_files_mknod(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode, dev_t dev)
{
	(void)p;
	if (!S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISREG(mode))
		return -EPERM;
	return LOCAL_NAME(node, path, mknodat(n.dir, n.name, mode, dev));
}

static int local_files_chown(struct provider *p,
			     const struct provider_node *node, const char *path,
			     uid_t uid, gid_t gid)
{
	(void)p;
	return LOCAL_NAME(
		node, path,
		fchownat(n.dir, n.name, uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int local_files_statfs(struct provider *p,
			      const struct provider_node *node,
			      const char *path, struct statvfs *st)
{
	(void)p;
	int fd = local_files_open_path(node, path, O_PATH, 0), rc;

	if (fd < 0)
		return fd;
	rc = fstatvfs(fd, st) ? -errno : 0;
	close(fd);
	return rc;
}

/*
 * POSIX record locks through the mount. Each lock owner (a process, or an
 * open file description for OFD locks, as the kernel names it) gets an
 * open file description of its own on the node's file, and its locks are
 * OFD locks there: owners then conflict with each other, and with POSIX,
 * OFD and flock users on the node, as the kernel decides. An owner's
 * description is closed (its locks gone) when it unlocks the whole file,
 * which the kernel asks at every close of a process's descriptor (POSIX
 * owners), and when the handle it was made through is closed (an OFD
 * owner is that open file itself).
 */
struct local_lock {
	struct local_lock *next;
	dev_t dev;
	ino_t ino;
	uint64_t owner;
	int fd;
	int via; /* the handle it was made through */
};

static struct {
	pthread_mutex_t mu;
	struct local_lock *list;
} local_locks = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* The owner's description of fh's file (made with fh's access mode when
 * make), or NULL; under local_locks.mu. */
static struct local_lock **local_lock_find(const struct stat *st,
					   uint64_t owner)
{
	struct local_lock **l = &local_locks.list;

	for (; *l; l = &(*l)->next)
		if ((*l)->dev == st->st_dev && (*l)->ino == st->st_ino &&
		    (*l)->owner == owner)
			return l;
	return l;
}

/* Another open file description of fh's file, with its access mode. */
static int local_lock_reopen(int fh)
{
	char self[64];
	int mode = fcntl(fh, F_GETFL), fd;

	if (mode < 0)
		return -errno;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fh);
	fd = open(self, (mode & O_ACCMODE) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

static int local_files_lock(struct provider *p, uint64_t fh, uint64_t owner,
			    int cmd, struct flock *fl)
{
	(void)p;
	struct local_lock **l, *e;
	struct flock ofd = *fl;
	struct stat st;
	bool fresh = false;
	int rc = 0, fd;

	if (fstat((int)fh, &st))
		return -errno;
	if (cmd != F_GETLK && cmd != F_SETLK)
		return -EINVAL;
	ofd.l_pid = 0; /* required of OFD locks */
	pthread_mutex_lock(&local_locks.mu);
	l = local_lock_find(&st, owner);
	e = *l;
	if (!e && fl->l_type == F_UNLCK) {
		pthread_mutex_unlock(&local_locks.mu);
		return 0; /* the owner holds nothing here */
	}
	if (!e) {
		fd = local_lock_reopen((int)fh);
		e = fd < 0 ? NULL : calloc(1, sizeof(*e));
		if (!e) {
			pthread_mutex_unlock(&local_locks.mu);
			if (fd >= 0)
				close(fd);
			return fd < 0 ? fd : -ENOMEM;
		}
		*e = (struct local_lock){NULL,	st.st_dev, st.st_ino,
					 owner, fd,	   (int)fh};
		*l = e;
		fresh = true;
	}
	if (cmd == F_GETLK) {
		if (fcntl(e->fd, F_OFD_GETLK, &ofd))
			rc = -errno;
		else
			*fl = ofd;
	} else if (fcntl(e->fd, F_OFD_SETLK, &ofd)) {
		rc = errno == EACCES ? -EAGAIN : -errno;
	}
	/* Nothing held (the whole file unlocked, or a description made for a
	 * test or a refused first lock): the description goes. */
	if ((cmd == F_SETLK && fl->l_type == F_UNLCK &&
	     fl->l_whence == SEEK_SET && fl->l_start == 0 && fl->l_len == 0) ||
	    (fresh && (cmd == F_GETLK || rc))) {
		*l = e->next;
		close(e->fd);
		free(e);
	}
	pthread_mutex_unlock(&local_locks.mu);
	return rc;
}

/* The descriptions made through handle fh, which is being closed. */
static void local_locks_drop(int fh)
{
	struct local_lock **l = &local_locks.list;

	pthread_mutex_lock(&local_locks.mu);
	while (*l) {
		struct local_lock *e = *l;

		if (e->via != fh) {
			l = &e->next;
			continue;
		}
		*l = e->next;
		close(e->fd);
		free(e);
	}
	pthread_mutex_unlock(&local_locks.mu);
}

/* flock(2) locks belong to an open file description: the handle's own. */
static int local_files_flock(struct provider *p, uint64_t fh, int op)
{
	(void)p;
	return flock((int)fh, op | LOCK_NB) ? -errno : 0;
}

const struct provider_file_ops local_file_ops = {
	.getattr = local_files_getattr,
	.readdir = local_files_readdir,
	.open = local_files_open,
	.read = local_files_read,
	.write = local_files_write,
	.fsync = local_files_fsync,
	.fd = local_files_fd,
	.fgetattr = local_files_fgetattr,
	.ftruncate = local_files_ftruncate,
	.close = local_files_close,
	.truncate = local_files_truncate,
	.mkdir = local_files_mkdir,
	.unlink = local_files_unlink,
	.rmdir = local_files_rmdir,
	.rename = local_files_rename,
	.chmod = local_files_chmod,
	.utimens = local_files_utimens,
	.symlink = local_files_symlink,
	.readlink = local_files_readlink,
	.link = local_files_link,
	.mknod = local_files_mknod,
	.chown = local_files_chown,
	.statfs = local_files_statfs,
	.lock = local_files_lock,
	.flock = local_files_flock,
};
