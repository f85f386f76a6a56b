/* Unit tests of a cluster's state machine (lifecycle/cluster_state): every
 * request from every state against a table written out here, the words
 * written to `state`, and where each job runs and ends. */
#include "check.h"
#include "lifecycle/cluster_state.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* What a request does from a state: refused (EBUSY), nothing to do (the
 * cluster is there or going there), or a move carried out by a job. */
enum outcome { REFUSED, STAYS, MOVES };

struct cell {
	enum outcome outcome;
	enum cluster_state to; /* MOVES */
};

#define R                                                                      \
	{                                                                      \
		REFUSED, 0                                                     \
	}
#define S                                                                      \
	{                                                                      \
		STAYS, 0                                                       \
	}
#define M(s)                                                                   \
	{                                                                      \
		MOVES, s                                                       \
	}

/* Columns: interrupted, resumed, terminated. A terminate is taken from
 * every state that is not already terminating or terminated, failed
 * included (whatever the provider still holds is cleaned up); interrupt
 * and resume only from a settled state, or as the same request again. */
static const struct cell expected[CLUSTER_STATES][3] = {
	[CLUSTER_DEPLOYING] = {R, R, M(CLUSTER_TERMINATING)},
	[CLUSTER_RUNNING] = {M(CLUSTER_INTERRUPTING), S,
			     M(CLUSTER_TERMINATING)},
	[CLUSTER_INTERRUPTING] = {S, R, M(CLUSTER_TERMINATING)},
	[CLUSTER_INTERRUPTED] = {S, M(CLUSTER_RESUMING),
				 M(CLUSTER_TERMINATING)},
	[CLUSTER_RESUMING] = {R, S, M(CLUSTER_TERMINATING)},
	[CLUSTER_RESIZING] = {R, R, M(CLUSTER_TERMINATING)},
	[CLUSTER_TERMINATING] = {R, R, S},
	[CLUSTER_TERMINATED] = {R, R, S},
	[CLUSTER_FAILED] = {R, R, M(CLUSTER_TERMINATING)},
};

static const enum cluster_op requests[3] = {CLUSTER_OP_STOP, CLUSTER_OP_START,
					    CLUSTER_OP_TERMINATE};

static void check_table(void)
{
	for (int s = 0; s < CLUSTER_STATES; s++)
		for (int r = 0; r < 3; r++) {
			const struct cell *want = &expected[s][r];
			/* Poisoned: a refusal must not be read as a move. */
			enum cluster_state to = CLUSTER_STATES;
			bool job = true;
			int rc = cluster_state_next((enum cluster_state)s,
						    requests[r], &to, &job);
			bool ok;

			if (want->outcome == REFUSED)
				ok = rc == -EBUSY;
			else if (want->outcome == STAYS)
				ok = rc == 0 && to == (enum cluster_state)s &&
				     !job;
			else
				ok = rc == 0 && to == want->to && job;
			CHECK(ok);
			if (!ok)
				fprintf(stderr,
					"  from %s, request %d: rc %d, to %d, "
					"job %d\n",
					cluster_state_names[s],
					(int)requests[r], rc, (int)to,
					(int)job);
			/* A move goes to the state its job runs in. */
			if (want->outcome == MOVES)
				CHECK(to == cluster_state_during(requests[r]));
		}
}

/* Deploy and reconcile are jobs, never requests; a state out of range is
 * not one. */
static void check_not_requests(void)
{
	enum cluster_state to;
	bool job;

	for (int s = 0; s < CLUSTER_STATES; s++) {
		CHECK(cluster_state_next((enum cluster_state)s,
					 CLUSTER_OP_DEPLOY, &to,
					 &job) == -EINVAL);
		CHECK(cluster_state_next((enum cluster_state)s,
					 CLUSTER_OP_RECONCILE, &to,
					 &job) == -EINVAL);
	}
	CHECK(cluster_state_next(CLUSTER_STATES, CLUSTER_OP_TERMINATE, &to,
				 &job) == -EINVAL);
}

static void check_word(const char *text, size_t len, int want_rc,
		       enum cluster_op want_op)
{
	enum cluster_op op = CLUSTER_OPS;
	int rc = cluster_state_request(text, len, &op);

	CHECK(rc == want_rc);
	if (want_rc == 0)
		CHECK(op == want_op);
	if (rc != want_rc || (want_rc == 0 && op != want_op))
		fprintf(stderr, "  \"%.*s\": rc %d, op %d\n", (int)len, text,
			rc, (int)op);
}

#define WORD(text, op) check_word(text, strlen(text), 0, op)
#define BAD(text)      check_word(text, strlen(text), -EINVAL, CLUSTER_OPS)

static void check_words(void)
{
	/* The states and the verbs alike. */
	WORD("interrupted", CLUSTER_OP_STOP);
	WORD("interrupt", CLUSTER_OP_STOP);
	WORD("resumed", CLUSTER_OP_START);
	WORD("resume", CLUSTER_OP_START);
	WORD("terminated", CLUSTER_OP_TERMINATE);
	WORD("terminate", CLUSTER_OP_TERMINATE);
	/* Surrounding blanks and the newline of echo are ignored. */
	WORD("terminated\n", CLUSTER_OP_TERMINATE);
	WORD("  resumed \r\n", CLUSTER_OP_START);
	WORD("\tinterrupt\t", CLUSTER_OP_STOP);
	WORD("\n\nterminate\n\n", CLUSTER_OP_TERMINATE);
	/* The length given is the text: nothing after it is read. */
	check_word("resumedXYZ", 7, 0, CLUSTER_OP_START);
	check_word("terminate", 8, -EINVAL, CLUSTER_OPS);
	/* Blanks only, or nothing. */
	BAD("");
	BAD(" ");
	BAD("\n");
	BAD(" \t\r\n");
	/* States that are not requests, and near misses. */
	BAD("running");
	BAD("deploying");
	BAD("failed");
	BAD("interrupting");
	BAD("resuming");
	BAD("terminating");
	BAD("stop");
	BAD("start");
	BAD("term");
	BAD("terminatedd");
	BAD("xterminated");
	BAD("terminated terminated");
	BAD("interrupted\nresumed");
	BAD("re sumed");
	/* A NUL is not a blank. */
	check_word("resume\0", 7, -EINVAL, CLUSTER_OPS);
	check_word("\0resume", 7, -EINVAL, CLUSTER_OPS);
}

static void check_jobs(void)
{
	static const struct {
		enum cluster_op op;
		enum cluster_state during, done;
	} jobs[] = {
		{CLUSTER_OP_DEPLOY, CLUSTER_DEPLOYING, CLUSTER_RUNNING},
		{CLUSTER_OP_STOP, CLUSTER_INTERRUPTING, CLUSTER_INTERRUPTED},
		{CLUSTER_OP_START, CLUSTER_RESUMING, CLUSTER_RUNNING},
		{CLUSTER_OP_TERMINATE, CLUSTER_TERMINATING, CLUSTER_TERMINATED},
		{CLUSTER_OP_RESIZE, CLUSTER_RESIZING, CLUSTER_RUNNING},
	};

	for (size_t i = 0; i < sizeof(jobs) / sizeof(*jobs); i++) {
		CHECK(cluster_state_during(jobs[i].op) == jobs[i].during);
		CHECK(cluster_state_after(jobs[i].op, true) == jobs[i].done);
		CHECK(cluster_state_after(jobs[i].op, false) == CLUSTER_FAILED);
		/* A job runs in a moving state and ends in a settled one. */
		CHECK(cluster_state_moving(jobs[i].during));
		CHECK(!cluster_state_moving(jobs[i].done));
	}
}

static void check_moving(void)
{
	static const bool moving[CLUSTER_STATES] = {
		[CLUSTER_DEPLOYING] = true,    [CLUSTER_RUNNING] = false,
		[CLUSTER_INTERRUPTING] = true, [CLUSTER_INTERRUPTED] = false,
		[CLUSTER_RESUMING] = true,     [CLUSTER_RESIZING] = true,
		[CLUSTER_TERMINATING] = true,  [CLUSTER_TERMINATED] = false,
		[CLUSTER_FAILED] = false,
	};

	for (int s = 0; s < CLUSTER_STATES; s++)
		CHECK(cluster_state_moving((enum cluster_state)s) == moving[s]);
}

static void check_names(void)
{
	static const char *const names[CLUSTER_STATES] = {
		[CLUSTER_DEPLOYING] = "deploying",
		[CLUSTER_RUNNING] = "running",
		[CLUSTER_INTERRUPTING] = "interrupting",
		[CLUSTER_INTERRUPTED] = "interrupted",
		[CLUSTER_RESUMING] = "resuming",
		[CLUSTER_RESIZING] = "resizing",
		[CLUSTER_TERMINATING] = "terminating",
		[CLUSTER_TERMINATED] = "terminated",
		[CLUSTER_FAILED] = "failed",
	};

	for (int s = 0; s < CLUSTER_STATES; s++) {
		CHECK(strcmp(cluster_state_names[s], names[s]) == 0);
		CHECK(cluster_state_parse(names[s]) == s);
	}
	CHECK(cluster_state_parse("") == -1);
	CHECK(cluster_state_parse("Running") == -1);
	CHECK(cluster_state_parse("running ") == -1);
	CHECK(cluster_state_parse("interrupt") == -1);
}

/* What a wait can still see come without a new request: the expected
 * table, written out state by state. */
static void check_reach(void)
{
	static const char *const reach[CLUSTER_STATES] = {
		/* from: the states it reaches, as letters of the enum */
		[CLUSTER_DEPLOYING] = "D R F",
		[CLUSTER_RUNNING] = "R",
		[CLUSTER_INTERRUPTING] = "IG ID F",
		[CLUSTER_INTERRUPTED] = "ID",
		[CLUSTER_RESUMING] = "RS R F",
		[CLUSTER_RESIZING] = "RZ R F",
		[CLUSTER_TERMINATING] = "TG TD F",
		[CLUSTER_TERMINATED] = "TD",
		[CLUSTER_FAILED] = "F",
	};
	static const char *const letters[CLUSTER_STATES] = {
		"D", "R", "IG", "ID", "RS", "RZ", "TG", "TD", "F"};

	for (int from = 0; from < CLUSTER_STATES; from++)
		for (int want = 0; want < CLUSTER_STATES; want++) {
			char word[8];
			bool listed = false;

			for (const char *p = reach[from]; *p;) {
				size_t n = strcspn(p, " ");

				snprintf(word, sizeof(word), "%.*s", (int)n, p);
				listed |= strcmp(word, letters[want]) == 0;
				p += n + (p[n] == ' ');
			}
			if (cluster_state_can_reach((enum cluster_state)from,
						    (enum cluster_state)want,
						    0) != listed) {
				fprintf(stderr, "reach %s -> %s: want %d\n",
					cluster_state_names[from],
					cluster_state_names[want], listed);
				CHECK(0);
			}
		}
	/* A budget or idle limit that interrupts lets running reach
	 * interrupted (and deploying too, through running), never
	 * terminated; one that terminates, the reverse. */
	CHECK(cluster_state_can_reach(CLUSTER_RUNNING, CLUSTER_INTERRUPTED,
				      CLUSTER_AUTO(CLUSTER_OP_STOP)));
	CHECK(cluster_state_can_reach(CLUSTER_DEPLOYING, CLUSTER_INTERRUPTED,
				      CLUSTER_AUTO(CLUSTER_OP_STOP)));
	CHECK(!cluster_state_can_reach(CLUSTER_RUNNING, CLUSTER_TERMINATED,
				       CLUSTER_AUTO(CLUSTER_OP_STOP)));
	CHECK(cluster_state_can_reach(CLUSTER_RUNNING, CLUSTER_TERMINATED,
				      CLUSTER_AUTO(CLUSTER_OP_TERMINATE)));
	CHECK(!cluster_state_can_reach(CLUSTER_RUNNING, CLUSTER_INTERRUPTED,
				       CLUSTER_AUTO(CLUSTER_OP_TERMINATE)));
	/* Nothing leaves interrupted, terminated or failed by itself. */
	CHECK(!cluster_state_can_reach(CLUSTER_INTERRUPTED, CLUSTER_RUNNING,
				       ~0u));
	CHECK(!cluster_state_can_reach(CLUSTER_FAILED, CLUSTER_RUNNING, ~0u));
	CHECK(!cluster_state_can_reach(CLUSTER_STATES, CLUSTER_RUNNING, 0));
}

int main(void)
{
	check_table();
	check_not_requests();
	check_words();
	check_jobs();
	check_moving();
	check_names();
	check_reach();
	return check_summary("cluster_state");
}
