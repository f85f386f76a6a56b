/* The job runner: a queue per key, served by a thread of its own while
 * it has work, so no key's job ever waits behind another key's; each
 * running job carries a cancellation token. */
#include "lifecycle/jobs.h"

#include "providers/cancel.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOBS_KEY_MAX 96

struct jobs_slot {
	char key[JOBS_KEY_MAX];
	int *ops; /* queued, oldest first */
	size_t n, cap;
	struct cancel *cancel; /* of the running job, or NULL */
	struct jobs_slot *next;
};

struct jobs {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	job_fn fn;
	void *ctx;
	struct jobs_slot *slots; /* keys with a thread */
	size_t threads;
	bool stopped;
};

struct jobs *jobs_new(job_fn fn, void *ctx)
{
	struct jobs *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->idle, NULL);
	j->fn = fn;
	j->ctx = ctx;
	return j;
}

static struct jobs_slot *jobs_find(struct jobs *j, const char *key)
{
	for (struct jobs_slot *s = j->slots; s; s = s->next)
		if (strcmp(s->key, key) == 0)
			return s;
	return NULL;
}

static void jobs_unlink(struct jobs *j, struct jobs_slot *s)
{
	for (struct jobs_slot **p = &j->slots; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	free(s->ops);
	free(s);
}

struct jobs_start {
	struct jobs *j;
	struct jobs_slot *s;
};

static void *jobs_thread(void *arg)
{
	struct jobs_start st = *(struct jobs_start *)arg;
	struct jobs *j = st.j;
	struct jobs_slot *s = st.s;

	free(arg);
	pthread_mutex_lock(&j->lock);
	while (s->n && !j->stopped) {
		struct cancel token;
		char key[JOBS_KEY_MAX];
		int op = s->ops[0];

		memmove(s->ops, s->ops + 1, (s->n - 1) * sizeof(*s->ops));
		s->n--;
		cancel_init(&token);
		s->cancel = &token;
		snprintf(key, sizeof(key), "%s", s->key);
		pthread_mutex_unlock(&j->lock);
		j->fn(j->ctx, key, op, &token);
		pthread_mutex_lock(&j->lock);
		s->cancel = NULL;
		cancel_destroy(&token);
	}
	jobs_unlink(j, s);
	j->threads--;
	pthread_cond_broadcast(&j->idle);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

int jobs_submit(struct jobs *j, const char *key, int op)
{
	struct jobs_slot *s;
	int rc = 0;

	pthread_mutex_lock(&j->lock);
	if (j->stopped) {
		rc = -ESHUTDOWN;
		goto out;
	}
	s = jobs_find(j, key);
	if (!s) {
		struct jobs_start *st = malloc(sizeof(*st));
		pthread_attr_t a;
		pthread_t t;

		s = calloc(1, sizeof(*s));
		if (!s || !st) {
			free(s);
			free(st);
			rc = -ENOMEM;
			goto out;
		}
		snprintf(s->key, sizeof(s->key), "%s", key);
		s->next = j->slots;
		j->slots = s;
		*st = (struct jobs_start){j, s};
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		/* Jobs wait on providers; they need little stack. */
		pthread_attr_setstacksize(&a, (size_t)256 * 1024);
		s->ops = malloc(sizeof(*s->ops));
		if (!s->ops || pthread_create(&t, &a, jobs_thread, st)) {
			pthread_attr_destroy(&a);
			free(st);
			jobs_unlink(j, s);
			rc = -ENOMEM;
			goto out;
		}
		pthread_attr_destroy(&a);
		s->cap = 1;
		j->threads++;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4;
		int *v = realloc(s->ops, cap * sizeof(*v));

		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		s->ops = v;
		s->cap = cap;
	}
	s->ops[s->n++] = op;
out:
	pthread_mutex_unlock(&j->lock);
	return rc;
}

void jobs_cancel(struct jobs *j, const char *key)
{
	struct jobs_slot *s;

	pthread_mutex_lock(&j->lock);
	s = jobs_find(j, key);
	if (s) {
		s->n = 0;
		if (s->cancel)
			cancel_fire(s->cancel);
	}
	pthread_mutex_unlock(&j->lock);
}

void jobs_stop(struct jobs *j)
{
	pthread_mutex_lock(&j->lock);
	j->stopped = true;
	for (struct jobs_slot *s = j->slots; s; s = s->next) {
		s->n = 0;
		if (s->cancel)
			cancel_fire(s->cancel);
	}
	while (j->threads)
		pthread_cond_wait(&j->idle, &j->lock);
	pthread_mutex_unlock(&j->lock);
}

void jobs_free(struct jobs *j)
{
	if (!j)
		return;
	jobs_stop(j);
	pthread_cond_destroy(&j->idle);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

size_t jobs_busy(struct jobs *j)
{
	size_t n = 0;

	pthread_mutex_lock(&j->lock);
	for (struct jobs_slot *s = j->slots; s; s = s->next)
		n++;
	pthread_mutex_unlock(&j->lock);
	return n;
}
