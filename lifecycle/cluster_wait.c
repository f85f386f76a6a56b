/* clusters/H/wait: a state name written to it blocks the write until the
 * cluster is in that state, and fails as soon as the state can no longer
 * come without a new request (EIO), on Ctrl-C (EINTR) or after the
 * contract's config/wait_timeout (ETIMEDOUT). */
#include "lifecycle/cluster_wait.h"

#include "lifecycle/cluster_limits.h"
#include "lifecycle/cluster_priv.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often a waiter looks at its caller's interruption (a Ctrl-C reaches
 * no condition variable). */
#define CLUSTER_WAIT_TICK_NS 100000000LL

static bool cluster_wait_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* The state a written name asks for: 0 with *want, or -EINVAL with the
 * sentence recorded. */
static int cluster_wait_parse(struct model *m, struct cluster *c,
			      const char *text, size_t len,
			      enum cluster_state *want)
{
	char name[32], why[512], q[48];
	size_t n;
	int s;

	while (len && cluster_wait_blank(*text))
		text++, len--;
	while (len && cluster_wait_blank(text[len - 1]))
		len--;
	if (len < sizeof(name)) {
		memcpy(name, text, len);
		name[len] = '\0';
		s = cluster_state_parse(name);
		if (s >= 0) {
			*want = (enum cluster_state)s;
			return 0;
		}
	}
	n = len > 40 ? 40 : len;
	memcpy(q, text, n);
	q[n] = '\0';
	q[strcspn(q, "\n")] = '\0';
	snprintf(why, sizeof(why), "\"%s\" is not a state; write one of", q);
	for (s = 0; s < CLUSTER_STATES; s++)
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s %s",
			 s == 0			   ? ""
			 : s == CLUSTER_STATES - 1 ? " or"
						   : ",",
			 cluster_state_names[s]);
	return cluster_fail(m, c, "wait", -EINVAL, why);
}

/* config/wait_timeout in nanoseconds; 0: none. */
static int64_t cluster_wait_timeout(struct model *m, const struct cluster *c)
{
	const char *v = m->contract_config ? m->contract_config(m, c->contract,
								"wait_timeout")
					   : NULL;
	double s = v && *v ? strtod(v, NULL) : 0;

	return s > 0 && isfinite(s) ? (int64_t)(s * 1e9) : 0;
}

int cluster_wait(struct model *m, const char *handle, const char *node,
		 const char *text, size_t len, int (*cancelled)(void *),
		 void *cancel_ctx, int *out_fd)
{
	enum cluster_state want = CLUSTER_RUNNING;
	int64_t deadline = 0, timeout = 0;
	struct cluster *c;
	int rc;

	(void)node;
	if (out_fd)
		*out_fd = -1;
	pthread_mutex_lock(&m->lock);
	c = cluster_find(m, handle);
	rc = c ? cluster_wait_parse(m, c, text, len, &want) : -ENOENT;
	if (rc == 0) {
		timeout = cluster_wait_timeout(m, c);
		deadline = timeout ? model_now() + timeout : 0;
	}
	while (rc == 0) {
		char why[256];
		struct timespec ts;
		int64_t now, next;

		c = cluster_find(m, handle);
		if (!c) {
			rc = -ENOENT; /* removed while waited for */
			break;
		}
		if (c->state == want)
			break;
		if (!cluster_state_can_reach(c->state, want,
					     cluster_limits_auto_ops(m, c))) {
			snprintf(why, sizeof(why),
				 "the cluster is %s, from where it cannot "
				 "become %s without a new request",
				 cluster_state_names[c->state],
				 cluster_state_names[want]);
			rc = cluster_fail(m, c, "wait", -EIO, why);
			break;
		}
		now = model_now();
		if (deadline && now >= deadline) {
			snprintf(why, sizeof(why),
				 "the cluster did not become %s within %.15g "
				 "seconds (config/wait_timeout); it is %s",
				 cluster_state_names[want],
				 (double)timeout / 1e9,
				 cluster_state_names[c->state]);
			rc = cluster_fail(m, c, "wait", -ETIMEDOUT, why);
			break;
		}
		if (cancelled && cancelled(cancel_ctx)) {
			rc = -EINTR;
			break;
		}
		next = now + CLUSTER_WAIT_TICK_NS;
		if (deadline && deadline < next)
			next = deadline;
		model_timespec(next, &ts);
		pthread_cond_timedwait(&m->changed_cond, &m->lock, &ts);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}
