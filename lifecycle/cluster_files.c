/* nodes/NODE/files/ of clusters: each call goes to the file operations of
 * the node's provider, with the node as it was when the file or directory
 * was looked up, and the caller's identity published for the provider
 * (provider_caller_now) for the length of the call. */
#include "lifecycle/cluster_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct model_files {
	const struct provider_file_ops *ops;
	struct provider *p;
	struct provider_node pn;
	struct provider_caller who;
};

/* Run `call` (an expression) as f's caller. */
#define FILES_AS(f, call)                                                      \
	({                                                                     \
		provider_caller_now = &(f)->who;                               \
		int rc_ = (call);                                              \
		provider_caller_now = NULL;                                    \
		rc_;                                                           \
	})

struct model_files *model_files_get(struct model *m, const char *handle,
				    const char *node,
				    const struct model_caller *who, int *err)
{
	struct model_files *f = NULL;
	struct cluster_node *n = NULL;
	struct provider *p = NULL;
	struct cluster *c;

	*err = -ENOENT;
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	if (c)
		n = cluster_node_find(c, node);
	if (n)
		p = cluster_provider(m, n);
	if (n && (!p || !p->ops->files)) {
		*err = -EOPNOTSUPP;
	} else if (n && *n->pn.instance_id) {
		/* A use of files/ is activity (config/idle_minutes). */
		c->active_ns = model_now();
		f = malloc(sizeof(*f));
		if (f) {
			f->ops = p->ops->files;
			f->p = p;
			f->pn = n->pn;
			f->who.uid = who ? who->uid : (uid_t)-1;
			f->who.gid = who ? who->gid : (gid_t)-1;
			f->who.groups = who ? who->groups : NULL;
		} else {
			*err = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return f;
}

void model_files_put(struct model_files *f)
{
	free(f);
}

int model_files_getattr(struct model_files *f, const char *path,
			struct stat *st)
{
	return FILES_AS(f, f->ops->getattr(f->p, &f->pn, path, st));
}

int model_files_readdir(struct model_files *f, const char *path,
			int (*fn)(void *ctx, const char *name,
				  const struct stat *st),
			void *ctx)
{
	return FILES_AS(f, f->ops->readdir(f->p, &f->pn, path, fn, ctx));
}

int model_files_open(struct model_files *f, const char *path, int flags,
		     unsigned int mode, uint64_t *fh)
{
	return FILES_AS(
		f, f->ops->open(f->p, &f->pn, path, flags, (mode_t)mode, fh));
}

int model_files_read(struct model_files *f, uint64_t fh, char *buf, size_t size,
		     int64_t off)
{
	return FILES_AS(f, f->ops->read(f->p, fh, buf, size, (off_t)off));
}

int model_files_write(struct model_files *f, uint64_t fh, const char *buf,
		      size_t size, int64_t off)
{
	return FILES_AS(f, f->ops->write(f->p, fh, buf, size, (off_t)off));
}

int model_files_fsync(struct model_files *f, uint64_t fh)
{
	return FILES_AS(f, f->ops->fsync(f->p, fh));
}

int model_files_flush(struct model_files *f, uint64_t fh)
{
	if (!f->ops->flush)
		return 0;
	return FILES_AS(f, f->ops->flush(f->p, fh));
}

int model_files_fd(struct model_files *f, uint64_t fh)
{
	return f->ops->fd ? f->ops->fd(f->p, fh) : -1;
}

int model_files_shared(struct model_files *f, uint64_t fh)
{
	struct stat st;
	int rc;

	if (f->ops->shared)
		return FILES_AS(f, f->ops->shared(f->p, fh));
	rc = FILES_AS(f, f->ops->fgetattr(f->p, fh, &st));
	return rc ? rc : st.st_nlink > 1;
}

int model_files_fgetattr(struct model_files *f, uint64_t fh, struct stat *st)
{
	return FILES_AS(f, f->ops->fgetattr(f->p, fh, st));
}

int model_files_ftruncate(struct model_files *f, uint64_t fh, int64_t size)
{
	return FILES_AS(f, f->ops->ftruncate(f->p, fh, (off_t)size));
}

int model_files_close(struct model_files *f, uint64_t fh)
{
	return FILES_AS(f, f->ops->close(f->p, fh));
}

int model_files_truncate(struct model_files *f, const char *path, int64_t size)
{
	return FILES_AS(f, f->ops->truncate(f->p, &f->pn, path, (off_t)size));
}

int model_files_mkdir(struct model_files *f, const char *path,
		      unsigned int mode)
{
	return FILES_AS(f, f->ops->mkdir(f->p, &f->pn, path, (mode_t)mode));
}

int model_files_unlink(struct model_files *f, const char *path)
{
	return FILES_AS(f, f->ops->unlink(f->p, &f->pn, path));
}

int model_files_rmdir(struct model_files *f, const char *path)
{
	return FILES_AS(f, f->ops->rmdir(f->p, &f->pn, path));
}

int model_files_rename(struct model_files *f, const char *from, const char *to,
		       unsigned int flags)
{
	return FILES_AS(f, f->ops->rename(f->p, &f->pn, from, to, flags));
}

int model_files_chmod(struct model_files *f, const char *path,
		      unsigned int mode)
{
	return FILES_AS(f, f->ops->chmod(f->p, &f->pn, path, (mode_t)mode));
}

int model_files_utimens(struct model_files *f, const char *path,
			const struct timespec tv[2])
{
	return FILES_AS(f, f->ops->utimens(f->p, &f->pn, path, tv));
}

int model_files_symlink(struct model_files *f, const char *target,
			const char *path)
{
	return FILES_AS(f, f->ops->symlink(f->p, &f->pn, target, path));
}

int model_files_readlink(struct model_files *f, const char *path, char *buf,
			 size_t size)
{
	return FILES_AS(f, f->ops->readlink(f->p, &f->pn, path, buf, size));
}

int model_files_link(struct model_files *f, const char *from, const char *to)
{
	if (!f->ops->link)
		return -EOPNOTSUPP;
	return FILES_AS(f, f->ops->link(f->p, &f->pn, from, to));
}

int model_files_mknod(struct model_files *f, const char *path,
		      unsigned int mode, uint64_t dev)
{
	if (!f->ops->mknod)
		return -EOPNOTSUPP;
	return FILES_AS(f,
			f->ops->mknod(f->p, &f->pn, path, (mode_t)mode, dev));
}

int model_files_chown(struct model_files *f, const char *path, uid_t uid,
		      gid_t gid)
{
	if (!f->ops->chown)
		return -EOPNOTSUPP;
	return FILES_AS(f, f->ops->chown(f->p, &f->pn, path, uid, gid));
}

int model_files_statfs(struct model_files *f, const char *path,
		       struct statvfs *st)
{
	if (!f->ops->statfs)
		return -ENOSYS;
	return FILES_AS(f, f->ops->statfs(f->p, &f->pn, path, st));
}

/* A provider without locks answers ENOLCK, never ENOSYS: that would make
 * the kernel stop asking for the whole mount. */
int model_files_lock(struct model_files *f, uint64_t fh, uint64_t owner,
		     int cmd, struct flock *fl)
{
	if (!f->ops->lock)
		return -ENOLCK;
	return FILES_AS(f, f->ops->lock(f->p, fh, owner, cmd, fl));
}

int model_files_flock(struct model_files *f, uint64_t fh, int op)
{
	if (!f->ops->flock)
		return -ENOLCK;
	return FILES_AS(f, f->ops->flock(f->p, fh, op));
}
