/* The job runner: background work keyed by what it is for (a cluster's
 * handle). Jobs of one key run one after another; jobs of different keys
 * never wait for each other. Each running job has a cancellation token. */
#ifndef CCLFS_LIFECYCLE_JOBS_H
#define CCLFS_LIFECYCLE_JOBS_H

#include <stddef.h>

struct cancel;
struct jobs;

/* A job: runs with the runner's lock free; `cancel` fires when the job
 * is cancelled (jobs_cancel, jobs_stop). */
typedef void (*job_fn)(void *ctx, const char *key, int op,
		       struct cancel *cancel);

/* A runner whose jobs call fn(ctx, key, op, cancel). */
struct jobs *jobs_new(job_fn fn, void *ctx);
/* Queue job `op` of `key`: it starts when key's earlier jobs have ended.
 * 0, or -ENOMEM / -ESHUTDOWN (stopped). Threads: one per key with work,
 * gone when its queue is empty (a job that waits holds no CPU). */
int jobs_submit(struct jobs *j, const char *key, int op);
/* Fire the token of key's running job and drop its queued ones. */
void jobs_cancel(struct jobs *j, const char *key);
/* Cancel every job and wait until every thread has ended; no job starts
 * after. */
void jobs_stop(struct jobs *j);
void jobs_free(struct jobs *j);
/* Keys with a job running or queued now (for tests and benchmarks). */
size_t jobs_busy(struct jobs *j);

#endif
