/* Kernel cache invalidation for changes the daemon makes on its own: paths
 * are queued from any thread (handlers included) and a background thread
 * sends them with fuse_invalidate_path, never from inside a handler. */
#define FUSE_USE_VERSION 314
#include "fs/inval.h"

#include <fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define INVAL_QUEUE 256
#define INVAL_PATH  256

struct inval {
	struct fuse *fuse;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	size_t count;
	char queue[INVAL_QUEUE][INVAL_PATH];
};

static void *inval_main(void *arg)
{
	struct inval *inv = arg;
	char path[INVAL_PATH];

	pthread_mutex_lock(&inv->lock);
	for (;;) {
		while (!inv->stop && inv->count == 0)
			pthread_cond_wait(&inv->cond, &inv->lock);
		if (inv->stop)
			break;
		memcpy(path, inv->queue[--inv->count], sizeof(path));
		pthread_mutex_unlock(&inv->lock);
		/* -ENOENT for a path the kernel never looked up: nothing to
		 * drop, which is fine. */
		fuse_invalidate_path(inv->fuse, path);
		pthread_mutex_lock(&inv->lock);
	}
	pthread_mutex_unlock(&inv->lock);
	return NULL;
}

struct inval *inval_start(struct fuse *f)
{
	struct inval *inv = calloc(1, sizeof(*inv));

	if (!inv)
		return NULL;
	inv->fuse = f;
	pthread_mutex_init(&inv->lock, NULL);
	pthread_cond_init(&inv->cond, NULL);
	if (pthread_create(&inv->thread, NULL, inval_main, inv)) {
		pthread_mutex_destroy(&inv->lock);
		pthread_cond_destroy(&inv->cond);
		free(inv);
		return NULL;
	}
	return inv;
}

void inval_push(void *arg, const char *path)
{
	struct inval *inv = arg;
	char full[INVAL_PATH];

	if (!inv)
		return;
	full[0] = '/';
	strncpy(full + 1, path, sizeof(full) - 2);
	full[sizeof(full) - 1] = '\0';
	pthread_mutex_lock(&inv->lock);
	for (size_t i = 0; i < inv->count; i++)
		if (strcmp(inv->queue[i], full) == 0)
			goto out;
	/* A full queue drops the path: its attributes expire within the
	 * attribute timeout anyway. */
	if (inv->count < INVAL_QUEUE) {
		memcpy(inv->queue[inv->count++], full, sizeof(full));
		pthread_cond_signal(&inv->cond);
	}
out:
	pthread_mutex_unlock(&inv->lock);
}

void inval_stop(struct inval *inv)
{
	if (!inv)
		return;
	pthread_mutex_lock(&inv->lock);
	inv->stop = true;
	pthread_cond_signal(&inv->cond);
	pthread_mutex_unlock(&inv->lock);
	pthread_join(inv->thread, NULL);
	pthread_mutex_destroy(&inv->lock);
	pthread_cond_destroy(&inv->cond);
	free(inv);
}
