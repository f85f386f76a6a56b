/* Poll waiters of the tree: open files whose reader polls for a change.
 * A waiter is kept by its open file until the path changes (the model's
 * notice), then woken with fuse_notify_poll, which only tells the kernel to
 * ask the file again: safe from any thread, even under the model's lock. */
#define FUSE_USE_VERSION 314
#include "fs/watch.h"

#include <fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct watch_entry {
	const void *owner;
	struct fuse_pollhandle *ph;
	char *path; /* mount-relative: no leading '/' */
};

struct watch {
	pthread_mutex_t lock;
	struct watch_entry *v;
	size_t n, cap;
};

struct watch *watch_new(void)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (w)
		pthread_mutex_init(&w->lock, NULL);
	return w;
}

/* Take entry i out (the last one takes its place), then wake its poller
 * when notify says so and let it go. */
static void watch_drop(struct watch *w, size_t i, int notify)
{
	struct watch_entry e = w->v[i];

	w->v[i] = w->v[--w->n];
	w->v[w->n] = (struct watch_entry){0};
	if (notify)
		fuse_notify_poll(e.ph);
	fuse_pollhandle_destroy(e.ph);
	free(e.path);
}

void watch_free(struct watch *w)
{
	if (!w)
		return;
	while (w->n)
		watch_drop(w, 0, 0);
	free(w->v);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void watch_forget(struct watch *w, const void *owner)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i].owner == owner) {
			watch_drop(w, i, 0);
			break;
		}
	pthread_mutex_unlock(&w->lock);
}

void watch_add(struct watch *w, const void *owner, const char *path,
	       struct fuse_pollhandle *ph)
{
	char *copy;

	if (!w || !ph)
		return;
	while (*path == '/')
		path++;
	copy = strdup(path);
	watch_forget(w, owner);
	pthread_mutex_lock(&w->lock);
	if (copy && w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		struct watch_entry *v = realloc(w->v, cap * sizeof(*v));

		if (v) {
			w->v = v;
			w->cap = cap;
		}
	}
	if (copy && w->n < w->cap) {
		w->v[w->n++] = (struct watch_entry){owner, ph, copy};
		ph = NULL;
		copy = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	/* Out of memory: the poller is woken at once rather than never. */
	if (ph) {
		fuse_notify_poll(ph);
		fuse_pollhandle_destroy(ph);
	}
	free(copy);
}

void watch_changed(struct watch *w, const char *relpath)
{
	size_t len = strlen(relpath);
	int below = len && relpath[len - 1] == '/';

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n;) {
		const char *p = w->v[i].path;

		if (below ? strncmp(p, relpath, len) == 0
			  : strcmp(p, relpath) == 0)
			watch_drop(w, i, 1);
		else
			i++;
	}
	pthread_mutex_unlock(&w->lock);
}
