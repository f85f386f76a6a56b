/* Unit tests of the job runner (lifecycle/jobs): a key's jobs in order,
 * different keys never waiting for each other, cancellation of a key's
 * running and queued jobs, and a stop that waits for every thread. */
#include "check.h"
#include "lifecycle/jobs.h"
#include "providers/cancel.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Ops a job understands: below OP_BLOCK, record and return; OP_BLOCK,
 * record, then wait until released or cancelled. */
#define OP_BLOCK 100

struct log {
	pthread_mutex_t lock;
	char keys[64][8];
	int ops[64];
	bool cancelled[64];
	int n;
	int blocking; /* jobs waiting now */
	bool release;
};

static struct log lg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void job(void *ctx, const char *key, int op, struct cancel *cancel)
{
	struct log *l = ctx;
	bool was_cancelled = false;
	int i;

	if (op == OP_BLOCK) {
		pthread_mutex_lock(&l->lock);
		l->blocking++;
		pthread_mutex_unlock(&l->lock);
		for (;;) {
			bool go;

			pthread_mutex_lock(&l->lock);
			go = l->release;
			pthread_mutex_unlock(&l->lock);
			if (go)
				break;
			if (cancel_sleep_ms(cancel, 10)) {
				was_cancelled = true;
				break;
			}
		}
		pthread_mutex_lock(&l->lock);
		l->blocking--;
		pthread_mutex_unlock(&l->lock);
	}
	pthread_mutex_lock(&l->lock);
	i = l->n < 64 ? l->n++ : 63;
	snprintf(l->keys[i], sizeof(l->keys[i]), "%s", key);
	l->ops[i] = op;
	l->cancelled[i] = was_cancelled;
	pthread_mutex_unlock(&l->lock);
}

static void log_reset(void)
{
	pthread_mutex_lock(&lg.lock);
	lg.n = 0;
	lg.release = false;
	pthread_mutex_unlock(&lg.lock);
}

static int log_count(void)
{
	int n;

	pthread_mutex_lock(&lg.lock);
	n = lg.n;
	pthread_mutex_unlock(&lg.lock);
	return n;
}

static int log_blocking(void)
{
	int n;

	pthread_mutex_lock(&lg.lock);
	n = lg.blocking;
	pthread_mutex_unlock(&lg.lock);
	return n;
}

static void release(void)
{
	pthread_mutex_lock(&lg.lock);
	lg.release = true;
	pthread_mutex_unlock(&lg.lock);
}

/* The ops of key in the order they ran. */
static int ops_of(const char *key, int *out, int max)
{
	int n = 0;

	pthread_mutex_lock(&lg.lock);
	for (int i = 0; i < lg.n && n < max; i++)
		if (strcmp(lg.keys[i], key) == 0)
			out[n++] = lg.ops[i];
	pthread_mutex_unlock(&lg.lock);
	return n;
}

static void check_order(void)
{
	struct jobs *j = jobs_new(job, &lg);
	int ops[16], n;

	log_reset();
	for (int op = 1; op <= 5; op++)
		CHECK(jobs_submit(j, "a", op) == 0);
	CHECK_SOON(log_count() == 5);
	n = ops_of("a", ops, 16);
	CHECK(n == 5);
	for (int i = 0; i < n; i++)
		CHECK(ops[i] == i + 1);
	/* Its thread is gone once its queue is empty. */
	CHECK_SOON(jobs_busy(j) == 0);
	jobs_free(j);
}

/* Key a's job waits; key b's jobs run meanwhile, and a's queued job runs
 * after a's first. */
static void check_independent(void)
{
	struct jobs *j = jobs_new(job, &lg);
	int ops[16];

	log_reset();
	CHECK(jobs_submit(j, "a", OP_BLOCK) == 0);
	CHECK(jobs_submit(j, "a", 1) == 0);
	CHECK_SOON(log_blocking() == 1);
	CHECK(jobs_submit(j, "b", 2) == 0);
	CHECK(jobs_submit(j, "b", 3) == 0);
	CHECK_SOON(ops_of("b", ops, 16) == 2);
	CHECK(ops_of("a", ops, 16) == 0);
	/* b's thread ends once its queue is empty; a's waits on. */
	CHECK_SOON(jobs_busy(j) == 1);
	CHECK(ops_of("a", ops, 16) == 0);
	release();
	CHECK_SOON(ops_of("a", ops, 16) == 2);
	CHECK(ops_of("a", ops, 16) == 2 && ops[0] == OP_BLOCK && ops[1] == 1);
	CHECK_SOON(jobs_busy(j) == 0);
	jobs_free(j);
}

/* jobs_cancel fires the running job's token and drops its queued ones;
 * other keys and later jobs of the key are untouched. */
static void check_cancel(void)
{
	struct jobs *j = jobs_new(job, &lg);
	int ops[16];

	log_reset();
	CHECK(jobs_submit(j, "a", OP_BLOCK) == 0);
	CHECK(jobs_submit(j, "a", 1) == 0);
	CHECK(jobs_submit(j, "a", 2) == 0);
	CHECK(jobs_submit(j, "b", OP_BLOCK) == 0);
	CHECK_SOON(log_blocking() == 2);
	jobs_cancel(j, "a");
	CHECK_SOON(ops_of("a", ops, 16) == 1);
	pthread_mutex_lock(&lg.lock);
	CHECK(lg.n == 1 && lg.ops[0] == OP_BLOCK && lg.cancelled[0]);
	pthread_mutex_unlock(&lg.lock);
	/* b still waits: its token did not fire. */
	CHECK(log_blocking() == 1);
	CHECK(ops_of("b", ops, 16) == 0);
	/* A's queue was dropped; a job queued after the cancel runs. */
	CHECK(jobs_submit(j, "a", 3) == 0);
	CHECK_SOON(ops_of("a", ops, 16) == 2);
	CHECK(ops_of("a", ops, 16) == 2 && ops[1] == 3);
	/* Cancelling a key with no job, or an unknown one, does nothing. */
	CHECK_SOON(jobs_busy(j) == 1);
	jobs_cancel(j, "a");
	jobs_cancel(j, "nobody");
	CHECK(log_blocking() == 1);
	release();
	CHECK_SOON(ops_of("b", ops, 16) == 1);
	pthread_mutex_lock(&lg.lock);
	for (int i = 0; i < lg.n; i++)
		if (strcmp(lg.keys[i], "b") == 0)
			CHECK(!lg.cancelled[i]);
	pthread_mutex_unlock(&lg.lock);
	jobs_free(j);
}

/* jobs_stop cancels every running job, drops the queued ones, returns
 * once every thread has ended, and refuses new jobs. */
static void check_stop(void)
{
	struct jobs *j = jobs_new(job, &lg);
	int ops[16];

	log_reset();
	for (int k = 0; k < 4; k++) {
		char key[8];

		snprintf(key, sizeof(key), "k%d", k);
		CHECK(jobs_submit(j, key, OP_BLOCK) == 0);
		CHECK(jobs_submit(j, key, 7) == 0);
	}
	CHECK_SOON(log_blocking() == 4);
	CHECK(jobs_busy(j) == 4);
	jobs_stop(j);
	/* Returned: every job has ended, cancelled; none queued ran. */
	CHECK(log_blocking() == 0);
	CHECK(jobs_busy(j) == 0);
	CHECK(log_count() == 4);
	pthread_mutex_lock(&lg.lock);
	for (int i = 0; i < lg.n; i++)
		CHECK(lg.ops[i] == OP_BLOCK && lg.cancelled[i]);
	pthread_mutex_unlock(&lg.lock);
	CHECK(jobs_submit(j, "k0", 1) == -ESHUTDOWN);
	CHECK(ops_of("k0", ops, 16) == 1);
	/* Stopping again, then freeing, is fine. */
	jobs_stop(j);
	jobs_free(j);
	jobs_free(NULL);
}

/* Many keys at once: each its own thread, all done, none lost. */
static void check_many(void)
{
	struct jobs *j = jobs_new(job, &lg);

	log_reset();
	for (int k = 0; k < 20; k++) {
		char key[8];

		snprintf(key, sizeof(key), "m%d", k);
		for (int op = 0; op < 3; op++)
			CHECK(jobs_submit(j, key, op) == 0);
	}
	CHECK_SOON(log_count() == 60);
	for (int k = 0; k < 20; k++) {
		char key[8];
		int ops[16], n;

		snprintf(key, sizeof(key), "m%d", k);
		n = ops_of(key, ops, 16);
		CHECK(n == 3 && ops[0] == 0 && ops[1] == 1 && ops[2] == 2);
	}
	CHECK_SOON(jobs_busy(j) == 0);
	jobs_free(j);
}

int main(void)
{
	check_order();
	check_independent();
	check_cancel();
	check_stop();
	check_many();
	return check_summary("jobs");
}
