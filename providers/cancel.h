/* Cancellation tokens: how a job tells the provider calls it is making to
 * give up (a terminate preempting a deploy, an unmount). Every provider
 * wait sleeps through cancel_sleep_ms, which wakes at once when the token
 * fires, and every loop checks cancel_requested. */
#ifndef CCLFS_PROVIDERS_CANCEL_H
#define CCLFS_PROVIDERS_CANCEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct cancel {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_bool fired;
};

void cancel_init(struct cancel *c);
void cancel_destroy(struct cancel *c);
/* Fire the token: every sleeper wakes, every later check says so. */
void cancel_fire(struct cancel *c);
/* Whether c fired; a NULL token never does. */
bool cancel_requested(const struct cancel *c);
/* The same as a `cancelled` callback (ctx: the token, may be NULL). */
int cancel_check(void *ctx);
/* Sleep ms milliseconds, or less when c fires: 0, or -ECANCELED. */
int cancel_sleep_ms(struct cancel *c, long ms);

#endif
