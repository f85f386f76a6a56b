/* Kernel cache invalidation for changes the daemon makes on its own: paths
 * are queued from any thread and a background thread sends them with
 * fuse_invalidate_path, never from inside the handler of the same file.
 * Paths under nodes/N/files/ that the kernel was told of are remembered,
 * so that all of them can be dropped after a command ran on the node: the
 * attributes of each, and the name of each that is not a directory (the
 * node may have made it a file of another type; a directory's name stays,
 * since dropping it would cut the working directory of whoever is in
 * it from the tree). */
#define FUSE_USE_VERSION 314
#include "fs/inval.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct inval {
	struct fuse *fuse;
	char *mountpoint;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, or stop */
	pthread_cond_t done; /* a batch was sent */
	bool stop;
	char **queue;
	size_t count, cap;
	uint64_t queued, sent; /* paths ever queued and ever sent */
	/* Paths of files/ the kernel may hold (a set, chained; cleared
	 * whole when full: what it held then expires with its timeout). */
	struct inval_known **known;
	size_t nknown;
};

struct inval_known {
	struct inval_known *next;
	bool dir;
	char path[];
};

/* Queued paths starting with this byte drop the name too. */
#define INVAL_ENTRY '\001'

/* The node id of the last parent looked up in a batch: a command's
 * invalidations are mostly names of one directory. */
struct inval_parent {
	char path[PATH_MAX];
	fuse_ino_t ino; /* 0: the kernel holds none */
};

/* Drop the kernel's entry for the last name of path: its parent's node
 * id is what the kernel's file handle of it holds (nodeid, high word
 * first). Best effort: a parent the kernel does not hold has nothing. */
static void inval_entry(struct inval *inv, const char *path,
			struct inval_parent *last)
{
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];

	if (!slash || !inv->mountpoint ||
	    snprintf(parent, sizeof(parent), "%s%.*s", inv->mountpoint,
		     (int)(slash - path), path) >= (int)sizeof(parent))
		return;
	if (strcmp(parent, last->path) != 0) {
		struct file_handle *h = malloc(sizeof(*h) + 64);
		uint32_t w[2];
		int mount_id;

		if (!h)
			return;
		h->handle_bytes = 64;
		last->ino = 0;
		if (name_to_handle_at(AT_FDCWD, parent, h, &mount_id, 0) == 0 &&
		    h->handle_bytes >= sizeof(w)) {
			memcpy(w, h->f_handle, sizeof(w));
			last->ino = ((fuse_ino_t)w[0] << 32) | w[1];
		}
		free(h);
		memcpy(last->path, parent, strlen(parent) + 1);
	}
	if (last->ino)
		fuse_lowlevel_notify_inval_entry(fuse_get_session(inv->fuse),
						 last->ino, slash + 1,
						 strlen(slash + 1));
}

#define INVAL_KNOWN_BUCKETS 4096
#define INVAL_KNOWN_MAX	    65536

static __thread const char *inval_serving;

static void *inval_main(void *arg)
{
	struct inval *inv = arg;
	struct inval_parent last;

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
		last.path[0] = '\0';
		last.ino = 0;
		inv->queue = NULL;
		inv->count = inv->cap = 0;
		pthread_mutex_unlock(&inv->lock);
		for (size_t i = 0; i < n; i++) {
			const char *path = batch[i];

			if (*path == INVAL_ENTRY)
				inval_entry(inv, ++path, &last);
			/* -ENOENT for a path the kernel never looked up:
			 * nothing to drop. */
			fuse_invalidate_path(inv->fuse, path);
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

struct inval *inval_start(struct fuse *f, const char *mountpoint)
{
	struct inval *inv = calloc(1, sizeof(*inv));
	pthread_condattr_t mono;

	if (!inv)
		return NULL;
	inv->fuse = f;
	inv->mountpoint = mountpoint ? strdup(mountpoint) : NULL;
	pthread_condattr_init(&mono);
	pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
	pthread_mutex_init(&inv->lock, NULL);
	pthread_cond_init(&inv->cond, NULL);
	pthread_cond_init(&inv->done, &mono); /* inval_flush's bound */
	pthread_condattr_destroy(&mono);
	if (pthread_create(&inv->thread, NULL, inval_main, inv)) {
		pthread_mutex_destroy(&inv->lock);
		pthread_cond_destroy(&inv->cond);
		pthread_cond_destroy(&inv->done);
		free(inv->mountpoint);
		free(inv);
		return NULL;
	}
	return inv;
}

static size_t inval_hash(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % INVAL_KNOWN_BUCKETS;
}

static void inval_known_clear(struct inval *inv)
{
	for (size_t i = 0; inv->known && i < INVAL_KNOWN_BUCKETS; i++) {
		while (inv->known[i]) {
			struct inval_known *k = inv->known[i];

			inv->known[i] = k->next;
			free(k);
		}
	}
	inv->nknown = 0;
}

void inval_note(struct inval *inv, const char *path, bool dir)
{
	struct inval_known *k;
	size_t h, n = strlen(path);

	if (!inv)
		return;
	h = inval_hash(path);
	pthread_mutex_lock(&inv->lock);
	if (!inv->known)
		inv->known = calloc(INVAL_KNOWN_BUCKETS, sizeof(*inv->known));
	for (k = inv->known ? inv->known[h] : NULL; k; k = k->next)
		if (strcmp(k->path, path) == 0)
			break;
	if (k) {
		k->dir = dir;
	} else if (inv->known) {
		if (inv->nknown >= INVAL_KNOWN_MAX)
			inval_known_clear(inv);
		k = malloc(sizeof(*k) + n + 1);
		if (k) {
			k->dir = dir;
			memcpy(k->path, path, n + 1);
			k->next = inv->known[h];
			inv->known[h] = k;
			inv->nknown++;
		}
	}
	pthread_mutex_unlock(&inv->lock);
}

/* Append full (taken) to the queue; under inv->lock. */
static void inval_queue(struct inval *inv, char *full)
{
	if (inv->count == inv->cap) {
		size_t cap = inv->cap ? inv->cap * 2 : 16;
		char **q = realloc(inv->queue, cap * sizeof(*q));

		if (!q) {
			free(full);
			return;
		}
		inv->queue = q;
		inv->cap = cap;
	}
	inv->queue[inv->count++] = full;
	inv->queued++;
	pthread_cond_signal(&inv->cond);
}

/* "/clusters/H/nodes/N/files/": the directory and every known path below
 * it, with the names of those that are not directories when names; under
 * inv->lock. */
static void inval_queue_below(struct inval *inv, const char *prefix, bool names)
{
	size_t n = strlen(prefix);
	char *dir = strndup(prefix, n - 1);

	if (dir)
		inval_queue(inv, dir);
	for (size_t i = 0; inv->known && i < INVAL_KNOWN_BUCKETS; i++) {
		struct inval_known **pk = &inv->known[i];

		while (*pk) {
			struct inval_known *k = *pk;
			size_t len = strlen(k->path);
			char *p;

			if (strncmp(k->path, prefix, n) != 0) {
				pk = &k->next;
				continue;
			}
			p = malloc(len + 2);
			if (!p) {
				pk = &k->next;
				continue;
			}
			p[0] = INVAL_ENTRY;
			memcpy(p + 1, k->path, len + 1);
			inval_queue(inv, k->dir || !names
						 ? memmove(p, p + 1, len + 1)
						 : p);
			/* Dropped, name and all (a directory's name is
			 * never): the kernel asks again (getattr, lookup or
			 * a listing), which notes it again. A name kept
			 * stays known, for the next command's drop. */
			if (!names && !k->dir) {
				pk = &k->next;
				continue;
			}
			*pk = k->next;
			free(k);
			inv->nknown--;
		}
	}
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
	if (n && path[n - 1] == '/') {
		inval_queue_below(inv, full, true);
		free(full);
		goto out;
	}
	for (size_t i = 0; i < inv->count; i++) {
		if (strcmp(inv->queue[i], full) == 0) {
			free(full);
			goto out;
		}
	}
	inval_queue(inv, full);
out:
	pthread_mutex_unlock(&inv->lock);
}

void inval_attrs_below(struct inval *inv, const char *prefix)
{
	char *full;

	if (!inv || !*prefix || prefix[strlen(prefix) - 1] != '/' ||
	    asprintf(&full, "/%s", prefix) < 0)
		return;
	pthread_mutex_lock(&inv->lock);
	inval_queue_below(inv, full, false);
	pthread_mutex_unlock(&inv->lock);
	free(full);
}

/* How long a request waits for the drops: they take milliseconds, unless
 * the kernel needs a request served for them (a lookup, a page's
 * write-back, a directory lock the waiting request's caller holds) that
 * no free thread can serve. Then the request goes on after this, the
 * drops a moment later. */
#define INVAL_FLUSH_MAX_S 1

void inval_flush(struct inval *inv)
{
	uint64_t target;
	struct timespec until;

	if (!inv)
		return;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += INVAL_FLUSH_MAX_S;
	pthread_mutex_lock(&inv->lock);
	target = inv->queued;
	while (!inv->stop && inv->sent < target)
		if (pthread_cond_timedwait(&inv->done, &inv->lock, &until) ==
		    ETIMEDOUT)
			break;
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
	inval_known_clear(inv);
	free(inv->known);
	pthread_mutex_destroy(&inv->lock);
	pthread_cond_destroy(&inv->cond);
	pthread_cond_destroy(&inv->done);
	free(inv->mountpoint);
	free(inv);
}
