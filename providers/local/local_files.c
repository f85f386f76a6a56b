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
 * reader's own rights. Paths are limited to PATH_MAX below the node, not
 * with the workdir in front. */
#include "providers/provider.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h> /* renameat2 */
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What openat2() accepts of the flags an open through the mount carries
 * (the kernel adds bits of its own, such as the one for execve, that
 * openat2() would refuse with EINVAL). */
#define LOCAL_FILES_OPEN_FLAGS                                                 \
	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_NONBLOCK |      \
	 O_SYNC | O_DSYNC | O_DIRECT | O_DIRECTORY | O_NOFOLLOW | O_NOATIME |  \
	 O_NOCTTY)

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

/* path below dirfd opened with flags, resolved beneath dirfd: a descriptor
 * or -errno. A resolution that would leave dirfd (a symlink leading out,
 * an absolute symlink) is -EACCES. */
static int local_files_beneath(int dirfd, const char *path, int flags,
			       mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode & 07777 : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};

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

/* Open path below the node's directory (the directory itself for ""). */
static int local_files_open_path(const struct provider_node *node,
				 const char *path, int flags, mode_t mode)
{
	int rc = local_files_rel(&path), wd, fd;

	if (rc)
		return rc;
	wd = local_files_workdir(node);
	if (wd < 0)
		return wd;
	fd = local_files_beneath(wd, *path ? path : ".", flags, mode);
	close(wd);
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
	char buf[PATH_MAX];
};

static int local_name_get(const struct provider_node *node, const char *path,
			  struct local_name *n)
{
	size_t len;
	char *slash;
	int rc;

	n->wd = n->dir = -1;
	rc = local_files_rel(&path);
	if (rc)
		return rc;
	len = strlen(path);
	while (len && path[len - 1] == '/')
		len--;
	if (len == 0) {
		if (node->workdir[0] != '/')
			return -ENOENT;
		n->dir = AT_FDCWD;
		n->name = node->workdir;
		return 0;
	}
	if (len >= sizeof(n->buf))
		return -ENAMETOOLONG;
	memcpy(n->buf, path, len);
	n->buf[len] = '\0';
	n->wd = local_files_workdir(node);
	if (n->wd < 0)
		return n->wd;
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

static int local_files_close(struct provider *p, uint64_t fh)
{
	(void)p;
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

static int local_files_rename(struct provider *p,
			      const struct provider_node *node,
			      const char *from, const char *to,
			      unsigned int flags)
{
	(void)p;
	struct local_name a, b;
	int rc;

	if (local_files_is_root(from) || local_files_is_root(to))
		return -EBUSY; /* the working directory itself stays */
	rc = local_name_get(node, from, &a);
	b.wd = b.dir = -1;
	if (rc == 0)
		rc = local_name_get(node, to, &b);
	if (rc == 0 && renameat2(a.dir, a.name, b.dir, b.name, flags))
		rc = -errno;
	local_name_put(&b);
	local_name_put(&a);
	return rc;
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

const struct provider_file_ops local_file_ops = {
	.getattr = local_files_getattr,
	.readdir = local_files_readdir,
	.open = local_files_open,
	.read = local_files_read,
	.write = local_files_write,
	.fsync = local_files_fsync,
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
};
