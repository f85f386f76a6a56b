/* A cluster's states and the one table of transitions: what a request
 * written to `state` does from each state, and where a job's end leads.
 * Pure: no model, no store. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_STATE_H
#define CCLFS_LIFECYCLE_CLUSTER_STATE_H

#include <stdbool.h>
#include <stddef.h>

enum cluster_state {
	CLUSTER_DEPLOYING,
	CLUSTER_RUNNING,
	CLUSTER_INTERRUPTING,
	CLUSTER_INTERRUPTED,
	CLUSTER_RESUMING,
	CLUSTER_RESIZING,
	CLUSTER_TERMINATING,
	CLUSTER_TERMINATED,
	CLUSTER_FAILED,
	CLUSTER_STATES,
};

/* What a job does: deploy, or carry out a request. */
enum cluster_op {
	CLUSTER_OP_DEPLOY,
	CLUSTER_OP_STOP,      /* interrupted */
	CLUSTER_OP_START,     /* resumed */
	CLUSTER_OP_TERMINATE, /* terminated */
	CLUSTER_OP_RECONCILE, /* at mount: what the provider says */
	CLUSTER_OP_WATCH,     /* running: preempted nodes seen, relaunched */
	CLUSTER_OP_RESIZE,    /* node_count written: ranks added or removed */
	CLUSTER_OPS,
};

extern const char *const cluster_state_names[CLUSTER_STATES];

/* The state a name reads as; -1 for none. */
int cluster_state_parse(const char *name);
/* The request a word written to `state` makes (interrupted/interrupt,
 * resumed/resume, terminated/terminate, surrounding blanks ignored):
 * 0 with *op, or -EINVAL. */
int cluster_state_request(const char *text, size_t len, enum cluster_op *op);
/* What request op does from state `from`: 0 with *to the state to move to
 * and *job whether a job must carry it out; 0 with *to == from and no job
 * when the cluster is there or going there already; -EBUSY when it cannot
 * be done from there. */
int cluster_state_next(enum cluster_state from, enum cluster_op op,
		       enum cluster_state *to, bool *job);
/* Where a job of op that started in `during` ends: ok or failed. */
enum cluster_state cluster_state_after(enum cluster_op op, bool ok);
/* The state a job of op runs in (deploying, interrupting...). */
enum cluster_state cluster_state_during(enum cluster_op op);
/* A state whose job is under way (shown with its progress, N/M). */
bool cluster_state_moving(enum cluster_state s);

/* What the daemon may do to a running cluster on its own (a budget spent,
 * an idle limit reached): a mask of 1 << CLUSTER_OP_STOP and
 * 1 << CLUSTER_OP_TERMINATE. */
#define CLUSTER_AUTO(op) (1u << (op))

/* Whether a cluster in `from` can come to `want` with no new request:
 * through the ends of the jobs under way, and from running through what
 * `auto_ops` lets the daemon do. A state reaches itself. */
bool cluster_state_can_reach(enum cluster_state from, enum cluster_state want,
			     unsigned auto_ops);

#endif
