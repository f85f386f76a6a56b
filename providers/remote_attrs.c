/* Attributes learned in the flight of a files/ call of an SSH node, kept
 * for the getattrs the kernel sends right after it: a few slots, each
 * valid for REMOTE_ATTRS_NS and while the change count stays the same. */
#include "providers/remote_attrs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Enough for the kernel's few request threads at once. */
#define REMOTE_ATTRS_MAX 32

struct remote_attrs_entry {
	const void *node;
	char *path;
	int64_t ns;
	uint64_t epoch;
	struct stat st;
};

static pthread_mutex_t remote_attrs_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct remote_attrs_entry remote_attrs_all[REMOTE_ATTRS_MAX];
static unsigned remote_attrs_next;
static _Atomic uint64_t remote_attrs_count;

static int64_t remote_attrs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t remote_attrs_epoch(void)
{
	return atomic_load(&remote_attrs_count);
}

void remote_attrs_changed(void)
{
	atomic_fetch_add(&remote_attrs_count, 1);
}

/* Drop path's entry, or all of node's with path NULL (mutex held). */
static void remote_attrs_drop_locked(const void *node, const char *path)
{
	for (int i = 0; i < REMOTE_ATTRS_MAX; i++) {
		struct remote_attrs_entry *a = &remote_attrs_all[i];

		if (!a->path || a->node != node ||
		    (path && strcmp(a->path, path) != 0))
			continue;
		free(a->path);
		a->path = NULL;
	}
}

static void remote_attrs_keep(const void *node, const char *path,
			      const struct stat *st, uint64_t epoch)
{
	struct remote_attrs_entry *a;
	char *copy = strdup(path);

	pthread_mutex_lock(&remote_attrs_mutex);
	remote_attrs_drop_locked(node, path);
	if (copy) {
		a = &remote_attrs_all[remote_attrs_next++ % REMOTE_ATTRS_MAX];
		free(a->path);
		a->node = node;
		a->path = copy;
		a->ns = remote_attrs_now();
		a->epoch = epoch;
		a->st = *st;
	}
	pthread_mutex_unlock(&remote_attrs_mutex);
}

void remote_attrs_put(const void *node, const char *path, const struct stat *st,
		      uint64_t before)
{
	if (st->st_mode == 0 || before != remote_attrs_epoch())
		return;
	remote_attrs_keep(node, path, st, before);
}

void remote_attrs_put_changed(const void *node, const char *path,
			      const struct stat *st, uint64_t before)
{
	uint64_t want = before;

	/* Counted as one step from `before`: any other change that ended
	 * meanwhile makes the exchange fail, and st may predate it. */
	if (!atomic_compare_exchange_strong(&remote_attrs_count, &want,
					    before + 1)) {
		remote_attrs_changed();
		return;
	}
	if (st->st_mode != 0)
		remote_attrs_keep(node, path, st, before + 1);
}

bool remote_attrs_get(const void *node, const char *path, struct stat *st)
{
	bool got = false;
	uint64_t epoch = remote_attrs_epoch();
	int64_t now = remote_attrs_now();

	pthread_mutex_lock(&remote_attrs_mutex);
	for (int i = 0; i < REMOTE_ATTRS_MAX && !got; i++) {
		const struct remote_attrs_entry *a = &remote_attrs_all[i];

		if (a->path && a->node == node && a->epoch == epoch &&
		    now - a->ns < REMOTE_ATTRS_NS &&
		    strcmp(a->path, path) == 0) {
			*st = a->st;
			got = true;
		}
	}
	pthread_mutex_unlock(&remote_attrs_mutex);
	return got;
}

void remote_attrs_forget(const void *node)
{
	pthread_mutex_lock(&remote_attrs_mutex);
	remote_attrs_drop_locked(node, NULL);
	pthread_mutex_unlock(&remote_attrs_mutex);
}
