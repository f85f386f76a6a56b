/* Cancellation tokens: a flag a job's provider calls check, and a sleep
 * that the flag interrupts at once (a condition variable, not a poll). */
#include "providers/cancel.h"

#include <errno.h>
#include <stddef.h>
#include <time.h>

void cancel_init(struct cancel *c)
{
	pthread_condattr_t a;

	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &a);
	pthread_condattr_destroy(&a);
	atomic_init(&c->fired, false);
}

void cancel_destroy(struct cancel *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

void cancel_fire(struct cancel *c)
{
	pthread_mutex_lock(&c->lock);
	atomic_store(&c->fired, true);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

bool cancel_requested(const struct cancel *c)
{
	return c && atomic_load(&c->fired);
}

int cancel_check(void *ctx)
{
	return cancel_requested(ctx);
}

int cancel_sleep_ms(struct cancel *c, long ms)
{
	struct timespec until;

	if (ms < 0)
		ms = 0;
	if (!c) {
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (!atomic_load(&c->fired) &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&c->lock);
	return atomic_load(&c->fired) ? -ECANCELED : 0;
}
