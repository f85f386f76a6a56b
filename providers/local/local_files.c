/* The files of a local node: its working directory, read and written with
 * plain system calls on the node's workdir (what clusters/H/nodes/N/files/
 * shows for the local provider). */
#include "providers/provider.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* WORKDIR/path, refusing an empty workdir and ".." components. */
static int local_files_path(const struct provider_node *node, const char *path,
			    char *out, size_t outlen)
{
	int n;

	if (node->workdir[0] != '/')
		return -ENOENT;
	for (const char *p = path; (p = strstr(p, "..")); p += 2)
		if ((p == path || p[-1] == '/') &&
		    (p[2] == '\0' || p[2] == '/'))
			return -EACCES;
	while (*path == '/')
		path++;
	n = snprintf(out, outlen, "%s%s%s", node->workdir, *path ? "/" : "",
		     path);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

#define LOCAL_FILES_PATH(var, node, path)                                      \
	char var[PATH_MAX];                                                    \
	do {                                                                   \
		int rc_ = local_files_path(node, path, var, sizeof(var));      \
		if (rc_)                                                       \
			return rc_;                                            \
	} while (0)

static int local_files_getattr(struct provider *p,
			       const struct provider_node *node,
			       const char *path, struct stat *st)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return lstat(full, st) ? -errno : 0;
}

static int local_files_readdir(
	struct provider *p, const struct provider_node *node, const char *path,
	int (*fn)(void *ctx, const char *name, const struct stat *st),
	void *ctx)
{
	(void)p;
	struct dirent *e;
	DIR *d;

	LOCAL_FILES_PATH(full, node, path);
	d = opendir(full);
	if (!d)
		return -errno;
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
	int fd;

	LOCAL_FILES_PATH(full, node, path);
	fd = open(full, flags | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
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

static int local_files_truncate(struct provider *p,
				const struct provider_node *node,
				const char *path, off_t size)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return truncate(full, size) ? -errno : 0;
}

static int local_files_mkdir(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return mkdir(full, mode) ? -errno : 0;
}

static int local_files_unlink(struct provider *p,
			      const struct provider_node *node,
			      const char *path)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return unlink(full) ? -errno : 0;
}

static int local_files_rmdir(struct provider *p,
			     const struct provider_node *node, const char *path)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	if (!*path || strcmp(path, "/") == 0)
		return -EBUSY; /* the working directory itself stays */
	return rmdir(full) ? -errno : 0;
}

static int local_files_rename(struct provider *p,
			      const struct provider_node *node,
			      const char *from, const char *to,
			      unsigned int flags)
{
	(void)p;
	LOCAL_FILES_PATH(a, node, from);
	LOCAL_FILES_PATH(b, node, to);
	return renameat2(AT_FDCWD, a, AT_FDCWD, b, flags) ? -errno : 0;
}

static int local_files_chmod(struct provider *p,
			     const struct provider_node *node, const char *path,
			     mode_t mode)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return chmod(full, mode) ? -errno : 0;
}

static int local_files_utimens(struct provider *p,
			       const struct provider_node *node,
			       const char *path, const struct timespec tv[2])
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return utimensat(AT_FDCWD, full, tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int local_files_symlink(struct provider *p,
			       const struct provider_node *node,
			       const char *target, const char *path)
{
	(void)p;
	LOCAL_FILES_PATH(full, node, path);
	return symlink(target, full) ? -errno : 0;
}

static int local_files_readlink(struct provider *p,
				const struct provider_node *node,
				const char *path, char *buf, size_t size)
{
	(void)p;
	ssize_t n;

	LOCAL_FILES_PATH(full, node, path);
	if (size == 0)
		return -EINVAL;
	n = readlink(full, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
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
