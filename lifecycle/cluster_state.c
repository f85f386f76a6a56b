/* A cluster's state machine as tables: the requests a user writes to
 * `state`, from every state, and the states a job runs in and ends in. */
#include "lifecycle/cluster_state.h"

#include <errno.h>
#include <string.h>

const char *const cluster_state_names[CLUSTER_STATES] = {
	"deploying", "running",	    "interrupting", "interrupted", "resuming",
	"resizing",  "terminating", "terminated",   "failed"};

/* Requests from each state: the state to move to (a job carries it out),
 * STAY (there or going there already: nothing to do) or BUSY. */
#define STAY	 (-1)
#define BUSY	 (-2)
#define REQUESTS 3 /* stop, start, terminate: cluster_op - 1 */

static const int cluster_requests[CLUSTER_STATES][REQUESTS] = {
	[CLUSTER_DEPLOYING] = {BUSY, BUSY, CLUSTER_TERMINATING},
	[CLUSTER_RUNNING] = {CLUSTER_INTERRUPTING, STAY, CLUSTER_TERMINATING},
	[CLUSTER_INTERRUPTING] = {STAY, BUSY, CLUSTER_TERMINATING},
	[CLUSTER_INTERRUPTED] = {STAY, CLUSTER_RESUMING, CLUSTER_TERMINATING},
	[CLUSTER_RESUMING] = {BUSY, STAY, CLUSTER_TERMINATING},
	[CLUSTER_RESIZING] = {BUSY, BUSY, CLUSTER_TERMINATING},
	[CLUSTER_TERMINATING] = {BUSY, BUSY, STAY},
	[CLUSTER_TERMINATED] = {BUSY, BUSY, STAY},
	/* A failed cluster can always be terminated: whatever the provider
	 * still holds for it is cleaned up, then it can be removed. */
	[CLUSTER_FAILED] = {BUSY, BUSY, CLUSTER_TERMINATING},
};

/* Per job: the state it runs in, and where it ends when it succeeds. A
 * failed job ends in failed. */
static const struct {
	enum cluster_state during, done;
} cluster_jobs[CLUSTER_OPS] = {
	[CLUSTER_OP_DEPLOY] = {CLUSTER_DEPLOYING, CLUSTER_RUNNING},
	[CLUSTER_OP_STOP] = {CLUSTER_INTERRUPTING, CLUSTER_INTERRUPTED},
	[CLUSTER_OP_START] = {CLUSTER_RESUMING, CLUSTER_RUNNING},
	[CLUSTER_OP_TERMINATE] = {CLUSTER_TERMINATING, CLUSTER_TERMINATED},
	/* Reconciling changes no state (it runs in running or interrupted
	 * and leaves the cluster there): no job ends through this row. */
	[CLUSTER_OP_RECONCILE] = {CLUSTER_RUNNING, CLUSTER_RUNNING},
	[CLUSTER_OP_WATCH] = {CLUSTER_RUNNING, CLUSTER_RUNNING},
	/* A resize that fails goes back to running at the size it had
	 * (cluster_jobs.c), never to failed. */
	[CLUSTER_OP_RESIZE] = {CLUSTER_RESIZING, CLUSTER_RUNNING},
};

static const struct {
	const char *word;
	enum cluster_op op;
} cluster_words[] = {
	{"interrupted", CLUSTER_OP_STOP},
	{"interrupt", CLUSTER_OP_STOP},
	{"resumed", CLUSTER_OP_START},
	{"resume", CLUSTER_OP_START},
	{"terminated", CLUSTER_OP_TERMINATE},
	{"terminate", CLUSTER_OP_TERMINATE},
};

int cluster_state_parse(const char *name)
{
	for (int s = 0; s < CLUSTER_STATES; s++)
		if (strcmp(name, cluster_state_names[s]) == 0)
			return s;
	return -1;
}

static int cluster_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int cluster_state_request(const char *text, size_t len, enum cluster_op *op)
{
	while (len && cluster_blank(*text))
		text++, len--;
	while (len && cluster_blank(text[len - 1]))
		len--;
	for (size_t i = 0; i < sizeof(cluster_words) / sizeof(*cluster_words);
	     i++)
		if (strlen(cluster_words[i].word) == len &&
		    strncmp(cluster_words[i].word, text, len) == 0) {
			*op = cluster_words[i].op;
			return 0;
		}
	return -EINVAL;
}

int cluster_state_next(enum cluster_state from, enum cluster_op op,
		       enum cluster_state *to, bool *job)
{
	int r;

	if (op < CLUSTER_OP_STOP || op > CLUSTER_OP_TERMINATE ||
	    from >= CLUSTER_STATES)
		return -EINVAL;
	r = cluster_requests[from][op - CLUSTER_OP_STOP];
	if (r == BUSY)
		return -EBUSY;
	*to = r == STAY ? from : (enum cluster_state)r;
	*job = r != STAY;
	return 0;
}

enum cluster_state cluster_state_after(enum cluster_op op, bool ok)
{
	return ok ? cluster_jobs[op].done : CLUSTER_FAILED;
}

enum cluster_state cluster_state_during(enum cluster_op op)
{
	return cluster_jobs[op].during;
}

bool cluster_state_moving(enum cluster_state s)
{
	return s == CLUSTER_DEPLOYING || s == CLUSTER_INTERRUPTING ||
	       s == CLUSTER_RESUMING || s == CLUSTER_RESIZING ||
	       s == CLUSTER_TERMINATING;
}

bool cluster_state_can_reach(enum cluster_state from, enum cluster_state want,
			     unsigned auto_ops)
{
	bool seen[CLUSTER_STATES] = {false};
	enum cluster_state todo[CLUSTER_STATES];
	size_t n = 0;

	if (from >= CLUSTER_STATES || want >= CLUSTER_STATES)
		return false;
	todo[n++] = from;
	seen[from] = true;
	while (n) {
		enum cluster_state s = todo[--n];
		enum cluster_state next[3];
		size_t k = 0;

		if (s == want)
			return true;
		if (cluster_state_moving(s)) {
			/* A job under way ends where its table row says, or
			 * in failed. */
			for (int op = 0; op < CLUSTER_OPS; op++)
				if (op != CLUSTER_OP_RECONCILE &&
				    op != CLUSTER_OP_WATCH &&
				    cluster_jobs[op].during == s) {
					next[k++] = cluster_jobs[op].done;
					break;
				}
			next[k++] = CLUSTER_FAILED;
		} else if (s == CLUSTER_RUNNING) {
			if (auto_ops & CLUSTER_AUTO(CLUSTER_OP_STOP))
				next[k++] = CLUSTER_INTERRUPTING;
			if (auto_ops & CLUSTER_AUTO(CLUSTER_OP_TERMINATE))
				next[k++] = CLUSTER_TERMINATING;
		}
		for (size_t i = 0; i < k; i++)
			if (!seen[next[i]]) {
				seen[next[i]] = true;
				todo[n++] = next[i];
			}
	}
	return false;
}
