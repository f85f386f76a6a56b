/* The fake provider of the lifecycle's unit tests: machines as records in
 * memory, batch ops whose outcome a test sets per action, and the counts a
 * test checks. Waits go through cancel_sleep_ms, as a real provider's. */
#include "fake_provider.h"

#include "providers/cancel.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More than any test makes: a full table is a failure of the create. */
#define FAKE_NODES_MAX 256
/* How often a blocked call looks for its release; a fired token wakes it
 * at once whatever this is. */
#define FAKE_POLL_MS 10

struct fake_rule {
	enum fake_mode mode;
	long ms;
	char handle[65]; /* "" for every cluster */
};

struct fake_record {
	char handle[65];
	int rank;
	enum provider_state state;
};

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

/* Everything the knobs set and the calls count, under fake_lock. */
static struct {
	struct fake_rule rules[PROVIDER_ACTIONS];
	/* Bumped by fake_release: a blocked call that saw another value
	 * when it began goes on. */
	unsigned releases[PROVIDER_ACTIONS];
	int calls[PROVIDER_ACTIONS], cancelled[PROVIDER_ACTIONS],
		blocked[PROVIDER_ACTIONS];
	unsigned caps;
	bool make_first;
	int recreated, duplicates, attached;
	struct fake_seen last[PROVIDER_ACTIONS];
	struct fake_record nodes[FAKE_NODES_MAX];
	size_t n, made;
} fake = {.caps = PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE,
	  .make_first = true};

static const char *const fake_action_names[PROVIDER_ACTIONS] = {
	[PROVIDER_CREATE] = "create",	  [PROVIDER_STOP] = "stop",
	[PROVIDER_START] = "start",	  [PROVIDER_TERMINATE] = "terminate",
	[PROVIDER_SIGNAL] = "signal",	  [PROVIDER_PREPARE] = "prepare",
	[PROVIDER_DESCRIBE] = "describe",
};

/* Each open instance has its own ops: the caps are fake.caps at open. */
struct fake_provider {
	struct provider base;
	struct provider_ops ops;
};

void fake_reset(void)
{
	pthread_mutex_lock(&fake_lock);
	memset(fake.rules, 0, sizeof(fake.rules));
	memset(fake.calls, 0, sizeof(fake.calls));
	memset(fake.cancelled, 0, sizeof(fake.cancelled));
	memset(fake.last, 0, sizeof(fake.last));
	fake.caps = PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE;
	fake.make_first = true;
	fake.recreated = fake.duplicates = fake.attached = 0;
	fake.n = fake.made = 0;
	/* Calls still blocked (none, between tests) are let go. */
	for (int a = 0; a < PROVIDER_ACTIONS; a++)
		fake.releases[a]++;
	pthread_mutex_unlock(&fake_lock);
}

void fake_set_caps(unsigned caps)
{
	pthread_mutex_lock(&fake_lock);
	fake.caps = caps;
	pthread_mutex_unlock(&fake_lock);
}

void fake_set(enum provider_action a, enum fake_mode mode, long ms,
	      const char *handle)
{
	pthread_mutex_lock(&fake_lock);
	fake.rules[a].mode = mode;
	fake.rules[a].ms = ms;
	snprintf(fake.rules[a].handle, sizeof(fake.rules[a].handle), "%s",
		 handle ? handle : "");
	pthread_mutex_unlock(&fake_lock);
}

void fake_set_make_first(bool first)
{
	pthread_mutex_lock(&fake_lock);
	fake.make_first = first;
	pthread_mutex_unlock(&fake_lock);
}

void fake_release(enum provider_action a)
{
	pthread_mutex_lock(&fake_lock);
	fake.rules[a].mode = FAKE_OK;
	fake.releases[a]++;
	pthread_mutex_unlock(&fake_lock);
}

/* A count, read under the lock (the jobs' threads write them). */
static int fake_count(const int *v)
{
	int n;

	pthread_mutex_lock(&fake_lock);
	n = *v;
	pthread_mutex_unlock(&fake_lock);
	return n;
}

int fake_calls(enum provider_action a)
{
	return fake_count(&fake.calls[a]);
}

int fake_cancelled(enum provider_action a)
{
	return fake_count(&fake.cancelled[a]);
}

int fake_blocked(enum provider_action a)
{
	return fake_count(&fake.blocked[a]);
}

struct fake_seen fake_last(enum provider_action a)
{
	struct fake_seen seen;

	pthread_mutex_lock(&fake_lock);
	seen = fake.last[a];
	pthread_mutex_unlock(&fake_lock);
	return seen;
}

int fake_recreated(void)
{
	return fake_count(&fake.recreated);
}

int fake_duplicates(void)
{
	return fake_count(&fake.duplicates);
}

int fake_attached(void)
{
	return fake_count(&fake.attached);
}

size_t fake_made(void)
{
	size_t n;

	pthread_mutex_lock(&fake_lock);
	n = fake.made;
	pthread_mutex_unlock(&fake_lock);
	return n;
}

/* The record of a node (fake_lock held); NULL when none. */
static struct fake_record *fake_find(const char *handle, int rank)
{
	for (size_t i = 0; i < fake.n; i++)
		if (fake.nodes[i].rank == rank &&
		    strcmp(fake.nodes[i].handle, handle) == 0)
			return &fake.nodes[i];
	return NULL;
}

size_t fake_live(const char *handle)
{
	size_t n = 0;

	pthread_mutex_lock(&fake_lock);
	for (size_t i = 0; i < fake.n; i++)
		if (fake.nodes[i].state != PROVIDER_NODE_GONE &&
		    (!handle || strcmp(fake.nodes[i].handle, handle) == 0))
			n++;
	pthread_mutex_unlock(&fake_lock);
	return n;
}

enum provider_state fake_node(const char *handle, int rank)
{
	const struct fake_record *r;
	enum provider_state s;

	pthread_mutex_lock(&fake_lock);
	r = fake_find(handle, rank);
	s = r ? r->state : PROVIDER_NODE_GONE;
	pthread_mutex_unlock(&fake_lock);
	return s;
}

void fake_forget(const char *handle, int rank)
{
	struct fake_record *r;

	pthread_mutex_lock(&fake_lock);
	r = fake_find(handle, rank);
	if (r)
		r->state = PROVIDER_NODE_GONE;
	pthread_mutex_unlock(&fake_lock);
}

/* --- the batch ops --- */

/* Fail every node of b with rc, and the call with the same words. */
static int fake_fail_all(struct provider_batch *b, int rc, const char *why)
{
	for (size_t i = 0; i < b->n; i++) {
		b->results[i].rc = rc;
		snprintf(b->results[i].msg, sizeof(b->results[i].msg), "%s",
			 why);
	}
	snprintf(b->err, sizeof(b->err), "%s", why);
	return rc;
}

/* Make (or make sure of) the machines of b's nodes and fill them in. */
static int fake_make(struct provider_batch *b)
{
	int rc = 0;

	pthread_mutex_lock(&fake_lock);
	for (size_t i = 0; i < b->n; i++) {
		struct provider_node *pn = &b->nodes[i];
		struct fake_record *r = fake_find(pn->handle, pn->rank);

		if (*pn->instance_id)
			fake.recreated++;
		else if (r && r->state != PROVIDER_NODE_GONE)
			fake.duplicates++;
		if (!r && fake.n == FAKE_NODES_MAX) {
			b->results[i].rc = rc = -ENOSPC;
			snprintf(b->results[i].msg, sizeof(b->results[i].msg),
				 "the fake provider is full");
			snprintf(b->err, sizeof(b->err), "%s",
				 b->results[i].msg);
			continue;
		}
		if (!r) {
			r = &fake.nodes[fake.n++];
			snprintf(r->handle, sizeof(r->handle), "%s",
				 pn->handle);
			r->rank = pn->rank;
			fake.made++;
		}
		r->state = PROVIDER_NODE_RUNNING;
		snprintf(pn->instance_id, sizeof(pn->instance_id),
			 "fake-%.64s-%d", pn->handle, pn->rank);
		snprintf(pn->address, sizeof(pn->address), "%.64s-%d.fake",
			 pn->handle, pn->rank);
		snprintf(pn->workdir, sizeof(pn->workdir), "/fake/%s/%d",
			 pn->handle, pn->rank);
	}
	pthread_mutex_unlock(&fake_lock);
	return rc;
}

/* Move b's nodes to state s; a node the fake does not have fails. */
static int fake_move(struct provider_batch *b, enum provider_state s)
{
	int rc = 0;

	pthread_mutex_lock(&fake_lock);
	for (size_t i = 0; i < b->n; i++) {
		struct fake_record *r =
			fake_find(b->nodes[i].handle, b->nodes[i].rank);

		if (s == PROVIDER_NODE_GONE) {
			/* Terminating what is not there is done already. */
			if (r)
				r->state = s;
			continue;
		}
		if (!r || r->state == PROVIDER_NODE_GONE) {
			b->results[i].rc = rc = -ENOENT;
			snprintf(b->results[i].msg, sizeof(b->results[i].msg),
				 "the fake provider has no node %s/%d",
				 b->nodes[i].handle, b->nodes[i].rank);
			snprintf(b->err, sizeof(b->err), "%s",
				 b->results[i].msg);
			continue;
		}
		r->state = s;
	}
	pthread_mutex_unlock(&fake_lock);
	return rc;
}

static void fake_describe(struct provider_batch *b)
{
	pthread_mutex_lock(&fake_lock);
	for (size_t i = 0; i < b->n; i++) {
		const struct fake_record *r =
			fake_find(b->nodes[i].handle, b->nodes[i].rank);

		b->results[i].state = r ? r->state : PROVIDER_NODE_GONE;
	}
	pthread_mutex_unlock(&fake_lock);
}

/* What the rule of action a says for b: 0 to go on, or -errno. Counts the
 * call, and waits as a provider would: through b's token. */
static int fake_wait(enum provider_action a, struct provider_batch *b)
{
	const char *name = fake_action_names[a];
	struct fake_rule rule;
	unsigned release;
	char why[PROVIDER_MSG_MAX];
	int rc = 0;

	pthread_mutex_lock(&fake_lock);
	fake.calls[a]++;
	fake.last[a].n = b->n;
	fake.last[a].resize = b->resize;
	snprintf(fake.last[a].launch, sizeof(fake.last[a].launch), "%s",
		 b->launch);
	rule = fake.rules[a];
	release = fake.releases[a];
	if (*rule.handle &&
	    (b->n == 0 || strcmp(b->nodes[0].handle, rule.handle) != 0))
		rule.mode = FAKE_OK;
	if (rule.mode == FAKE_BLOCK)
		fake.blocked[a]++;
	pthread_mutex_unlock(&fake_lock);
	switch (rule.mode) {
	case FAKE_OK:
		break;
	case FAKE_FAIL:
		snprintf(why, sizeof(why), "fake %s failed: injected", name);
		return fake_fail_all(b, -EIO, why);
	case FAKE_SLOW:
		rc = cancel_sleep_ms(b->cancel, rule.ms);
		break;
	case FAKE_BLOCK:
		for (;;) {
			bool released;

			pthread_mutex_lock(&fake_lock);
			released = fake.releases[a] != release;
			pthread_mutex_unlock(&fake_lock);
			if (released)
				break;
			rc = cancel_sleep_ms(b->cancel, FAKE_POLL_MS);
			if (rc)
				break;
		}
		pthread_mutex_lock(&fake_lock);
		fake.blocked[a]--;
		pthread_mutex_unlock(&fake_lock);
		break;
	}
	if (rc == -ECANCELED) {
		pthread_mutex_lock(&fake_lock);
		fake.cancelled[a]++;
		pthread_mutex_unlock(&fake_lock);
		return fake_fail_all(b, -ECANCELED, "cancelled");
	}
	return rc;
}

static int fake_act(struct provider *p, struct provider_batch *b,
		    enum provider_action a)
{
	bool first;
	int rc;

	(void)p;
	pthread_mutex_lock(&fake_lock);
	first = fake.make_first;
	pthread_mutex_unlock(&fake_lock);
	/* A cloud's create launches, then waits for the machines: what a
	 * failed or cancelled wait leaves is for a terminate to find. */
	if (a == PROVIDER_CREATE && first) {
		rc = fake_make(b);
		if (rc)
			return rc;
	}
	rc = fake_wait(a, b);
	if (rc)
		return rc;
	switch (a) {
	case PROVIDER_CREATE:
		return first ? 0 : fake_make(b);
	case PROVIDER_STOP:
		return fake_move(b, PROVIDER_NODE_STOPPED);
	case PROVIDER_START:
		return fake_move(b, PROVIDER_NODE_RUNNING);
	case PROVIDER_TERMINATE:
		return fake_move(b, PROVIDER_NODE_GONE);
	case PROVIDER_DESCRIBE:
		fake_describe(b);
		return 0;
	case PROVIDER_PREPARE:
		/* The lifecycle gives the hostfile of the nodes it made. */
		if (!b->hostfile)
			return fake_fail_all(b, -EINVAL, "no hostfile given");
		return 0;
	default:
		return 0;
	}
}

#define FAKE_ACT(fn, action)                                                   \
	static int fn(struct provider *p, struct provider_batch *b)            \
	{                                                                      \
		return fake_act(p, b, action);                                 \
	}

FAKE_ACT(fake_act_create, PROVIDER_CREATE)
FAKE_ACT(fake_act_stop, PROVIDER_STOP)
FAKE_ACT(fake_act_start, PROVIDER_START)
FAKE_ACT(fake_act_terminate, PROVIDER_TERMINATE)
FAKE_ACT(fake_act_signal, PROVIDER_SIGNAL)
FAKE_ACT(fake_act_prepare, PROVIDER_PREPARE)
FAKE_ACT(fake_act_describe, PROVIDER_DESCRIBE)

/* The fake has no machines to run commands on. */
static int fake_run(struct provider *p, const struct provider_node *node,
		    struct provider_run *run, char *err, size_t errlen)
{
	(void)p;
	(void)node;
	(void)run;
	snprintf(err, errlen, "the fake provider runs no commands");
	return -EOPNOTSUPP;
}

static void fake_attach(struct provider *p, const struct provider_node *node)
{
	(void)p;
	(void)node;
	pthread_mutex_lock(&fake_lock);
	fake.attached++;
	pthread_mutex_unlock(&fake_lock);
}

static void fake_close(struct provider *p)
{
	free(p);
}

static const struct provider_ops fake_ops = {
	.act =
		{
			[PROVIDER_CREATE] = fake_act_create,
			[PROVIDER_STOP] = fake_act_stop,
			[PROVIDER_START] = fake_act_start,
			[PROVIDER_TERMINATE] = fake_act_terminate,
			[PROVIDER_SIGNAL] = fake_act_signal,
			[PROVIDER_PREPARE] = fake_act_prepare,
			[PROVIDER_DESCRIBE] = fake_act_describe,
		},
	.run = fake_run,
	.attach = fake_attach,
	.close = fake_close,
};

static struct provider *fake_open(const struct config *conf,
				  const char *statedir, char *err,
				  size_t errlen)
{
	struct fake_provider *fp = calloc(1, sizeof(*fp));

	(void)conf;
	(void)statedir;
	if (!fp) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	fp->ops = fake_ops;
	pthread_mutex_lock(&fake_lock);
	fp->ops.caps = fake.caps;
	pthread_mutex_unlock(&fake_lock);
	fp->base.ops = &fp->ops;
	fp->base.entry = &fake_entry;
	/* base is the first member: close frees the whole instance. */
	return &fp->base;
}

const struct provider_entry fake_entry = {
	.name = "fake",
	.platform_type = "Localhost",
	.open = fake_open,
};
