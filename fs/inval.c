/* Kernel cache invalidation for changes the daemon makes on its own: paths
 * are queued from any thread and a background thread sends them with
 * fuse_invalidate_path, never from inside the handler of the same file. */
#define FUSE_USE_VERSION 314
#include "fs/inval.h"

#include <fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct inval {
	struct fuse *fuse;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, or stop */
	pthread_cond_t done; /* a batch was sent */
	bool stop;
	char **queue;
	size_t count, cap;
	uint64_t queued, sent; /* paths ever queued and ever sent */
};

static __thread const char *inval_serving;

static void *inval_main(void *arg)
{
	struct inval *inv = arg;

	pthread_mutex_lock(&inv->lock);
	for (;;) {
		char **batch;
		size_t n;

		while (!inv->stop && inv->count == 0)
			pthread_cond_wait(&inv->cond, &inv->lock);
		if (inv->stop)
			break;
		batch = inv->queue;
		n = inv->count;
		inv->queue = NULL;
		inv->count = inv->cap = 0;
		pthread_mutex_unlock(&inv->lock);
		for (size_t i = 0; i < n; i++) {
			/* -ENOENT for a path the kernel never looked up:
			 * nothing to drop. */
			fuse_invalidate_path(inv->fuse, batch[i]);
			free(batch[i]);
		}
		free(batch);
		pthread_mutex_lock(&inv->lock);
		inv->sent += n;
		pthread_cond_broadcast(&inv->done);
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
	pthread_cond_init(&inv->done, NULL);
	if (pthread_create(&inv->thread, NULL, inval_main, inv)) {
		pthread_mutex_destroy(&inv->lock);
		pthread_cond_destroy(&inv->cond);
		pthread_cond_destroy(&inv->done);
		free(inv);
		return NULL;
	}
	return inv;
}

void inval_serve(const char *path)
{
	inval_serving = path;
}

void inval_push(void *arg, const char *path)
{
	struct inval *inv = arg;
	size_t n = strlen(path);
	char *full;

	if (!inv)
		return;
	if (inval_serving && strcmp(inval_serving + 1, path) == 0)
		return;
	full = malloc(n + 2);
	if (!full)
		return; /* the attributes expire by themselves */
	full[0] = '/';
	memcpy(full + 1, path, n + 1);
	pthread_mutex_lock(&inv->lock);
	for (size_t i = 0; i < inv->count; i++) {
		if (strcmp(inv->queue[i], full) == 0) {
			free(full);
			goto out;
		}
	}
	if (inv->count == inv->cap) {
		size_t cap = inv->cap ? inv->cap * 2 : 16;
		char **q = realloc(inv->queue, cap * sizeof(*q));

		if (!q) {
			free(full);
			goto out;
		}
		inv->queue = q;
		inv->cap = cap;
	}
	inv->queue[inv->count++] = full;
	inv->queued++;
	pthread_cond_signal(&inv->cond);
out:
	pthread_mutex_unlock(&inv->lock);
}

void inval_flush(struct inval *inv)
{
	uint64_t target;

	if (!inv)
		return;
	pthread_mutex_lock(&inv->lock);
	target = inv->queued;
	while (!inv->stop && inv->sent < target)
		pthread_cond_wait(&inv->done, &inv->lock);
	pthread_mutex_unlock(&inv->lock);
}

void inval_stop(struct inval *inv)
{
	if (!inv)
		return;
	pthread_mutex_lock(&inv->lock);
	inv->stop = true;
	pthread_cond_broadcast(&inv->cond);
	pthread_cond_broadcast(&inv->done);
	pthread_mutex_unlock(&inv->lock);
	pthread_join(inv->thread, NULL);
	for (size_t i = 0; i < inv->count; i++)
		free(inv->queue[i]);
	free(inv->queue);
	pthread_mutex_destroy(&inv->lock);
	pthread_cond_destroy(&inv->cond);
	pthread_cond_destroy(&inv->done);
	free(inv);
}
