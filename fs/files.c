/* nodes/N/files/: what the tree adds to the node's own file operations:
 * the identity of the process that asks (so that a node on this machine
 * acts with its rights), and waiting for a lock without holding a thread
 * of the node's provider, interruptible like a local wait. */
#define FUSE_USE_VERSION 314
#include "fs/files.h"

#include "lifecycle/model.h"

#include <errno.h>
#include <fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

/* The hidden names in use (few: files removed while open). */
struct fs_hidden {
	struct fs_hidden *next;
	struct model_files *f; /* NULL: a file of the tree */
	uint64_t fh;
	char path[];
};

static struct {
	pthread_mutex_t mu;
	struct fs_hidden *list;
} fs_hidden = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* The groups of the process of this thread's request; more than fit:
 * unknown (the provider then keeps its own rights). */
static int fs_files_groups(gid_t *list, int size)
{
	int n = fuse_getgroups(size, list);

	return n >= 0 && n <= size ? n : -1;
}

struct model_files *fs_files_get(struct model *m, const char *handle,
				 const char *node, int *err)
{
	const struct fuse_context *ctx = fuse_get_context();
	struct model_caller who = {
		.uid = ctx->uid,
		.gid = ctx->gid,
		.groups = fs_files_groups,
	};

	return model_files_get(m, handle, node, &who, err);
}

/* Retry `call` (-EAGAIN or -EWOULDBLOCK while held elsewhere) until it is
 * granted or the request is interrupted; waits grow from 1 ms to 50 ms,
 * so a lock released is taken soon without spinning. */
#define FS_FILES_WAIT(call)                                                    \
	({                                                                     \
		long ns_ = 1000000;                                            \
		int rc_;                                                       \
		while ((rc_ = (call)) == -EAGAIN || rc_ == -EWOULDBLOCK) {     \
			struct timespec ts_ = {0, ns_};                        \
			if (fuse_interrupted()) {                              \
				rc_ = -EINTR;                                  \
				break;                                         \
			}                                                      \
			nanosleep(&ts_, NULL);                                 \
			if (ns_ < 50000000)                                    \
				ns_ *= 2;                                      \
		}                                                              \
		rc_;                                                           \
	})

/* A lock held elsewhere when the caller may not wait: EDEADLK, what
 * fcntl(2) answers for a wait that could never end. */
static int fs_files_nowait(int rc)
{
	return rc == -EAGAIN || rc == -EWOULDBLOCK ? -EDEADLK : rc;
}

int fs_files_lock(struct model_files *f, uint64_t fh, uint64_t owner, int cmd,
		  struct flock *fl, bool wait)
{
	if (cmd != F_SETLKW)
		return model_files_lock(f, fh, owner, cmd, fl);
	if (!wait)
		return fs_files_nowait(
			model_files_lock(f, fh, owner, F_SETLK, fl));
	return FS_FILES_WAIT(model_files_lock(f, fh, owner, F_SETLK, fl));
}

int fs_files_flock(struct model_files *f, uint64_t fh, int op, bool wait)
{
	if (op & LOCK_NB)
		return model_files_flock(f, fh, op & ~LOCK_NB);
	if (!wait)
		return fs_files_nowait(model_files_flock(f, fh, op));
	return FS_FILES_WAIT(model_files_flock(f, fh, op));
}

/* Exactly libfuse's ".fuse_hidden%08x%08x": a user's own rename to a
 * name merely starting so stays a rename, never a removal. */
int fs_files_is_hidden_name(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;

	if (!base || strncmp(base + 1, ".fuse_hidden", 12) != 0)
		return 0;
	base += 13;
	return strlen(base) == 16 && strspn(base, "0123456789abcdef") == 16;
}

int fs_files_hide(struct model_files *f, const char *rel, const char *hidden)
{
	size_t n = strlen(hidden);
	struct fs_hidden *h = malloc(sizeof(*h) + n + 1);
	uint64_t fh = 0;
	int rc;

	if (!h)
		return -ENOMEM;
	if (f) {
		/* A descriptor that needs no right to the contents (O_PATH);
		 * a provider that has none opens it for reading. */
		rc = model_files_open(f, rel, O_PATH | O_NOFOLLOW, 0, &fh);
		if (rc)
			rc = model_files_open(
				f, rel, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0,
				&fh);
		if (rc == -EACCES) /* a file its node's login cannot read */
			rc = model_files_open(
				f, rel, O_WRONLY | O_NONBLOCK | O_NOFOLLOW, 0,
				&fh);
		if (rc == -EACCES) {
			/* Nor write: removing it is its directory's business,
			 * as on a disk. The descriptors open on it go on with
			 * their own handles; only a stat by the name libfuse
			 * hid it under fails. */
			rc = model_files_unlink(f, rel);
			if (rc == 0) {
				model_files_put(f);
				f = NULL;
			}
		} else if (rc == 0) {
			rc = model_files_unlink(f, rel);
			if (rc)
				model_files_close(f, fh);
		}
		if (rc) {
			free(h);
			return rc;
		}
	}
	h->f = f;
	h->fh = fh;
	memcpy(h->path, hidden, n + 1);
	pthread_mutex_lock(&fs_hidden.mu);
	h->next = fs_hidden.list;
	fs_hidden.list = h;
	pthread_mutex_unlock(&fs_hidden.mu);
	return 0;
}

int fs_files_hidden_stat(const char *hidden, struct stat *st)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&fs_hidden.mu);
	for (const struct fs_hidden *h = fs_hidden.list; h; h = h->next) {
		if (strcmp(h->path, hidden) == 0) {
			/* Under the lock: the last close cannot take it. */
			if (h->f)
				rc = model_files_fgetattr(h->f, h->fh, st);
			break;
		}
	}
	pthread_mutex_unlock(&fs_hidden.mu);
	return rc;
}

int fs_files_hidden_unlink(const char *hidden)
{
	struct fs_hidden **p, *h = NULL;

	pthread_mutex_lock(&fs_hidden.mu);
	for (p = &fs_hidden.list; *p; p = &(*p)->next) {
		if (strcmp((*p)->path, hidden) == 0) {
			h = *p;
			*p = h->next;
			break;
		}
	}
	pthread_mutex_unlock(&fs_hidden.mu);
	if (!h)
		return -ENOENT;
	if (h->f) {
		model_files_close(h->f, h->fh);
		model_files_put(h->f);
	}
	free(h);
	return 0;
}
