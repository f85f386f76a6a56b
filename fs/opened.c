/* What the kernel holds open: a list of the handles given out, so that
 * those the kernel never released (its RELEASE requests still queued when
 * the mount ends are dropped) are freed at unmount rather than leaked. */
#include "fs/opened.h"

#include <pthread.h>
#include <stddef.h>

/* One mount per daemon: one list. */
static pthread_mutex_t opened_lock = PTHREAD_MUTEX_INITIALIZER;
static struct opened *opened_first;

void opened_add(struct opened *o, void (*release)(struct opened *o))
{
	o->release = release;
	pthread_mutex_lock(&opened_lock);
	o->prev = NULL;
	o->next = opened_first;
	if (opened_first)
		opened_first->prev = o;
	opened_first = o;
	o->linked = true;
	pthread_mutex_unlock(&opened_lock);
}

/* Called with the lock held. */
static void opened_unlink(struct opened *o)
{
	if (o->prev)
		o->prev->next = o->next;
	else
		opened_first = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = o->next = NULL;
	o->linked = false;
}

void opened_remove(struct opened *o)
{
	pthread_mutex_lock(&opened_lock);
	if (o->linked)
		opened_unlink(o);
	pthread_mutex_unlock(&opened_lock);
}

void opened_release_all(void)
{
	for (;;) {
		struct opened *o;

		pthread_mutex_lock(&opened_lock);
		o = opened_first;
		if (o)
			opened_unlink(o);
		pthread_mutex_unlock(&opened_lock);
		if (!o)
			return;
		/* Unlocked: release takes itself off, a no-op now. */
		o->release(o);
	}
}
