/* Unit tests of the lifecycle engine (lifecycle/cluster_*.c) on the fake
 * provider: every transition through the model's files, a failure at each
 * provider call, a terminate preempting each wait, independent clusters,
 * and what a new mount does with what the store recorded. */
#include "check.h"
#include "fake_provider.h"
#include "lifecycle/cluster.h"
#include "lifecycle/model.h"
#include "lifecycle/model_priv.h"
#include "providers/provider.h"

#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ONE_ROLE  "node\tfake\tfake1\t0.5\n"
#define TWO_ROLES "manager\tfake\tfake1\t0.5\nworker\tfake\tfake2\t0.25\n"

static const struct provider_entry *const fake_providers[] = {&fake_entry,
							      NULL};
static char base[] = "/tmp/cclfs-lifecycle-XXXXXX";
static struct config empty_config;

/* A model on base/NAME (made if new) with the fake as its one provider,
 * its jobs started as the daemon starts them. */
static struct model *open_model(const char *name)
{
	char dir[PATH_MAX], err[1024] = "";
	struct model_options o = {
		.statedir = dir,
		.config = &empty_config,
		.providers = fake_providers,
	};
	struct model *m;

	snprintf(dir, sizeof(dir), "%s/%s", base, name);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		perror(dir);
		return NULL;
	}
	m = model_open(&o, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "model_open %s: %s\n", dir, err);
		return NULL;
	}
	if (model_start(m, err, sizeof(err))) {
		fprintf(stderr, "model_start %s: %s\n", dir, err);
		model_close(m);
		return NULL;
	}
	return m;
}

/* Why the last deploy was refused. */
static char last_why[1024];

/* Deploy a cluster named handle as contract c1 would (model locked, as
 * the filesystem calls it). */
static int deploy(struct model *m, const char *handle, const char *type,
		  const char *resolution, int nodes)
{
	struct cluster_request req = {
		.contract = "c1",
		.name = handle,
		.cluster_type = type,
		.resolution = resolution,
		.node_count = nodes,
		.process_count = 1,
	};
	int rc;

	last_why[0] = '\0';
	pthread_mutex_lock(&m->lock);
	rc = cluster_deploy(m, &req, last_why, sizeof(last_why));
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* A file of a cluster (node NULL) or of a node, as a reader sees it. */
static void readf(struct model *m, const char *handle, const char *node,
		  const char *file, char *out, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	int fd = -1;

	out[0] = '\0';
	if (model_cluster_file_open(m, handle, node, file, &buf, &n, &fd))
		return;
	if (buf)
		snprintf(out, len, "%.*s", (int)n, buf);
	free(buf);
	if (fd >= 0)
		close(fd);
}

/* The first word of `state` ("deploying 0/2\n" is deploying). */
static bool state_is(struct model *m, const char *handle, const char *want)
{
	char buf[256];
	size_t n;

	readf(m, handle, NULL, "state", buf, sizeof(buf));
	n = strcspn(buf, " \n");
	return n == strlen(want) && strncmp(buf, want, n) == 0;
}

/* Wait (bounded) for the cluster to read `want`; say what it read if it
 * never did. */
static bool wait_state(struct model *m, const char *handle, const char *want)
{
	struct timespec t0;
	char buf[256], err[1024];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!state_is(m, handle, want))
		if (check_ms_since(&t0) < CHECK_WAIT_MS) {
			check_nap();
		} else {
			readf(m, handle, NULL, "state", buf, sizeof(buf));
			readf(m, handle, NULL, "error", err, sizeof(err));
			fprintf(stderr,
				"  %s: waited for %s, state reads \"%.*s\", "
				"error \"%.*s\"\n",
				handle, want, (int)strcspn(buf, "\n"), buf,
				(int)strcspn(err, "\n"), err);
			return false;
		}
	return true;
}

static int request(struct model *m, const char *handle, const char *word)
{
	return model_cluster_file_write(m, handle, "state", word, strlen(word));
}

static bool error_has(struct model *m, const char *handle, const char *what)
{
	char err[2048];

	readf(m, handle, NULL, "error", err, sizeof(err));
	if (strstr(err, what))
		return true;
	fprintf(stderr, "  %s: error \"%s\" lacks \"%s\"\n", handle, err, what);
	return false;
}

static bool error_empty(struct model *m, const char *handle)
{
	char err[2048];

	readf(m, handle, NULL, "error", err, sizeof(err));
	if (!*err)
		return true;
	fprintf(stderr, "  %s: error \"%s\"\n", handle, err);
	return false;
}

static bool file_has(struct model *m, const char *handle, const char *node,
		     const char *file, const char *what)
{
	char buf[8192];

	readf(m, handle, node, file, buf, sizeof(buf));
	if (strstr(buf, what))
		return true;
	fprintf(stderr, "  %s/%s/%s: \"%s\" lacks \"%s\"\n", handle,
		node ? node : "", file, buf, what);
	return false;
}

/* Terminate from wherever the cluster is, wait for it, check that the fake
 * holds nothing of it, and remove it. */
static void finish(struct model *m, const char *handle)
{
	CHECK(request(m, handle, "terminated\n") == 0);
	CHECK(wait_state(m, handle, "terminated"));
	CHECK(fake_live(handle) == 0);
	CHECK(model_cluster_remove(m, handle) == 0);
	CHECK(model_cluster_remove(m, handle) == -ENOENT);
}

/* deploy -> running -> interrupted -> running -> terminated, with the
 * requests that change nothing and those refused on the way. */
static void check_lifecycle(void)
{
	struct model *m;
	int calls;

	fake_reset();
	m = open_model("life");
	CHECK(m);
	if (!m)
		return;
	CHECK(deploy(m, "life", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(deploy(m, "life", "PeerWorkers", ONE_ROLE, 2) == -EEXIST);
	CHECK(strstr(last_why, "a cluster named life exists already"));
	CHECK(wait_state(m, "life", "running"));
	CHECK(fake_live("life") == 2);
	CHECK(fake_node("life", 0) == PROVIDER_NODE_RUNNING);
	CHECK(fake_node("life", 1) == PROVIDER_NODE_RUNNING);
	CHECK(fake_calls(PROVIDER_PREPARE) == 1);
	CHECK(file_has(m, "life", NULL, "state", "running\n"));
	CHECK(file_has(m, "life", "0", "status", "state: running"));
	CHECK(file_has(m, "life", "1", "status", "instance_id: fake-life-1"));
	CHECK(file_has(m, "life", "1", "status", "address: life-1.fake"));
	CHECK(file_has(m, "life", NULL, "log", "state: running"));
	CHECK(error_empty(m, "life"));

	/* Running already: nothing to do. Refused: a word that is not a
	 * request, and removing a cluster that is not terminated. */
	calls = fake_calls(PROVIDER_START);
	CHECK(request(m, "life", "resumed") == 0);
	CHECK(fake_calls(PROVIDER_START) == calls);
	CHECK(request(m, "life", "running\n") == -EINVAL);
	CHECK(error_has(m, "life", "\"running\" is not a state to ask for"));
	CHECK(model_cluster_remove(m, "life") == -EBUSY);
	CHECK(error_has(m, "life", "only a terminated cluster"));
	CHECK(request(m, "nosuch", "terminated") == -ENOENT);

	CHECK(request(m, "life", "interrupted\n") == 0);
	CHECK(wait_state(m, "life", "interrupted"));
	/* The accepted request cleared the earlier refusal. */
	CHECK(error_empty(m, "life"));
	CHECK(fake_node("life", 0) == PROVIDER_NODE_STOPPED);
	CHECK(fake_node("life", 1) == PROVIDER_NODE_STOPPED);
	CHECK(file_has(m, "life", "1", "status", "state: stopped"));
	calls = fake_calls(PROVIDER_STOP);
	CHECK(request(m, "life", "interrupt") == 0);
	CHECK(fake_calls(PROVIDER_STOP) == calls);
	CHECK(state_is(m, "life", "interrupted"));

	CHECK(request(m, "life", "resume") == 0);
	CHECK(wait_state(m, "life", "running"));
	CHECK(fake_node("life", 0) == PROVIDER_NODE_RUNNING);
	CHECK(file_has(m, "life", "0", "status", "state: running"));
	/* Resumed nodes are prepared again (addresses may change). */
	CHECK(fake_calls(PROVIDER_PREPARE) == 2);

	CHECK(request(m, "life", "terminate") == 0);
	CHECK(wait_state(m, "life", "terminated"));
	CHECK(fake_live("life") == 0);
	CHECK(file_has(m, "life", "0", "status", "state: terminated"));
	/* Terminated is the end: only terminate again, which does nothing. */
	calls = fake_calls(PROVIDER_TERMINATE);
	CHECK(request(m, "life", "terminated") == 0);
	CHECK(request(m, "life", "resumed") == -EBUSY);
	CHECK(error_has(m, "life", "cannot be resumed from there"));
	CHECK(request(m, "life", "interrupted") == -EBUSY);
	CHECK(fake_calls(PROVIDER_TERMINATE) == calls);
	CHECK(model_cluster_remove(m, "life") == 0);
	CHECK(model_cluster_stat(m, "life", &(struct model_attr){0}) ==
	      -ENOENT);

	/* A manager and its workers: three machines, the manager rank -1. */
	CHECK(deploy(m, "mw", "ManagerWorkers", TWO_ROLES, 2) == 0);
	CHECK(wait_state(m, "mw", "running"));
	CHECK(fake_live("mw") == 3);
	CHECK(fake_node("mw", -1) == PROVIDER_NODE_RUNNING);
	CHECK(file_has(m, "mw", "manager", "status", "fake-mw--1"));
	CHECK(file_has(m, "mw", "1", "info", "instance_type: fake2"));
	finish(m, "mw");

	/* A resolution without the role's line, or naming a provider that
	 * is not there, is refused and records nothing. */
	CHECK(deploy(m, "norole", "ManagerWorkers", ONE_ROLE, 2) == -EINVAL);
	CHECK(strstr(last_why, "no line for the manager role"));
	CHECK(deploy(m, "noprov", "PeerWorkers", "node\tnone\tx\t1\n", 1) ==
	      -EOPNOTSUPP);
	CHECK(strstr(last_why, "deploys only on the fake provider"));
	CHECK(model_cluster_stat(m, "norole", &(struct model_attr){0}) ==
	      -ENOENT);
	CHECK(fake_made() == 5);
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

/* Providers that create nodes one step at a time, or all at once. */
static void check_many_nodes(void)
{
	struct model *m;

	fake_reset();
	m = open_model("many");
	CHECK(m);
	if (!m)
		return;
	CHECK(deploy(m, "steps", "PeerWorkers", ONE_ROLE, 40) == 0);
	CHECK(wait_state(m, "steps", "running"));
	CHECK(fake_live("steps") == 40);
	CHECK(file_has(m, "steps", "39", "status", "state: running"));
	finish(m, "steps");
	model_close(m);

	fake_reset();
	fake_set_caps(PROVIDER_CAN_STOP | PROVIDER_CREATES_WHOLE);
	m = open_model("many");
	CHECK(m);
	if (!m)
		return;
	CHECK(deploy(m, "whole", "PeerWorkers", ONE_ROLE, 40) == 0);
	CHECK(wait_state(m, "whole", "running"));
	CHECK(fake_live("whole") == 40);
	CHECK(fake_calls(PROVIDER_CREATE) == 1);
	/* Without PROVIDER_NEEDS_PREPARE, prepare is never called. */
	CHECK(fake_calls(PROVIDER_PREPARE) == 0);
	CHECK(request(m, "whole", "interrupted") == 0);
	CHECK(wait_state(m, "whole", "interrupted"));
	CHECK(request(m, "whole", "resumed") == 0);
	CHECK(wait_state(m, "whole", "running"));
	CHECK(fake_calls(PROVIDER_PREPARE) == 0);
	finish(m, "whole");
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

/* Bring a fresh cluster to `to` (running, or interrupted). */
static bool bring(struct model *m, const char *handle, const char *to)
{
	if (deploy(m, handle, "PeerWorkers", ONE_ROLE, 2) ||
	    !wait_state(m, handle, "running"))
		return false;
	if (strcmp(to, "interrupted") == 0)
		return request(m, handle, "interrupted") == 0 &&
		       wait_state(m, handle, "interrupted");
	return true;
}

/* A failure at each provider call: the cluster fails, with the call's
 * reason in its error file; then it can still be terminated (nothing is
 * left) and removed. */
static void check_failures(void)
{
	static const struct {
		const char *handle;
		enum provider_action a;
		const char *from; /* NULL: fails the deploy */
		const char *ask;
		const char *what; /* in the error */
	} cases[] = {
		{"f-create", PROVIDER_CREATE, NULL, NULL,
		 "deploy failed: fake create failed: injected"},
		{"f-prepare", PROVIDER_PREPARE, NULL, NULL,
		 "deploy failed: preparing the nodes: fake prepare failed"},
		{"f-stop", PROVIDER_STOP, "running", "interrupted",
		 "interrupting failed: fake stop failed: injected"},
		{"f-start", PROVIDER_START, "interrupted", "resumed",
		 "resuming failed: fake start failed: injected"},
		{"f-term", PROVIDER_TERMINATE, "running", "terminated",
		 "terminating failed: fake terminate failed: injected"},
	};
	struct model *m;

	fake_reset();
	m = open_model("fail");
	CHECK(m);
	if (!m)
		return;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *h = cases[i].handle;

		if (cases[i].from) {
			CHECK(bring(m, h, cases[i].from));
			fake_set(cases[i].a, FAKE_FAIL, 0, h);
			CHECK(request(m, h, cases[i].ask) == 0);
		} else {
			fake_set(cases[i].a, FAKE_FAIL, 0, h);
			CHECK(deploy(m, h, "PeerWorkers", ONE_ROLE, 2) == 0);
		}
		CHECK(wait_state(m, h, "failed"));
		CHECK(error_has(m, h, cases[i].what));
		CHECK(error_has(m, h, "clusters/"));
		CHECK(file_has(m, h, NULL, "log", cases[i].what));
		/* Failed: only terminate is taken; removal waits for it. */
		CHECK(request(m, h, "interrupted") == -EBUSY);
		CHECK(request(m, h, "resumed") == -EBUSY);
		CHECK(model_cluster_remove(m, h) == -EBUSY);
		fake_set(cases[i].a, FAKE_OK, 0, NULL);
		CHECK(request(m, h, "terminated") == 0);
		CHECK(wait_state(m, h, "terminated"));
		CHECK(error_empty(m, h));
		CHECK(fake_live(h) == 0);
		CHECK(model_cluster_remove(m, h) == 0);
	}

	/* Preparing resumed nodes fails: the cluster runs, and its error
	 * says why. */
	CHECK(bring(m, "f-reprep", "interrupted"));
	fake_set(PROVIDER_PREPARE, FAKE_FAIL, 0, "f-reprep");
	CHECK(request(m, "f-reprep", "resumed") == 0);
	CHECK(wait_state(m, "f-reprep", "running"));
	CHECK(error_has(m, "f-reprep", "preparing the resumed nodes"));
	fake_set(PROVIDER_PREPARE, FAKE_OK, 0, NULL);
	finish(m, "f-reprep");

	/* The failure of one cluster's call leaves another's alone. */
	fake_set(PROVIDER_CREATE, FAKE_FAIL, 0, "f-one");
	CHECK(deploy(m, "f-one", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(deploy(m, "f-other", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "f-one", "failed"));
	CHECK(wait_state(m, "f-other", "running"));
	CHECK(error_empty(m, "f-other"));
	fake_set(PROVIDER_CREATE, FAKE_OK, 0, NULL);
	finish(m, "f-one");
	finish(m, "f-other");

	/* A create that fails before it made anything. */
	fake_set_make_first(false);
	fake_set(PROVIDER_CREATE, FAKE_FAIL, 0, NULL);
	CHECK(deploy(m, "f-none", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "f-none", "failed"));
	CHECK(fake_live("f-none") == 0);
	fake_set(PROVIDER_CREATE, FAKE_OK, 0, NULL);
	finish(m, "f-none");
	CHECK(fake_live(NULL) == 0);
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

/* A terminate written while a call waits: the call returns -ECANCELED,
 * the terminate runs after it, and the fake holds nothing of the cluster
 * (also what the cancelled call made). */
static void check_preempt(void)
{
	static const struct {
		const char *handle;
		enum provider_action a;
		const char *from; /* NULL: during the deploy */
		const char *ask;
	} cases[] = {
		{"p-create", PROVIDER_CREATE, NULL, NULL},
		{"p-prepare", PROVIDER_PREPARE, NULL, NULL},
		{"p-stop", PROVIDER_STOP, "running", "interrupted"},
		{"p-start", PROVIDER_START, "interrupted", "resumed"},
		{"p-reprep", PROVIDER_PREPARE, "interrupted", "resumed"},
	};
	struct model *m;
	int calls;

	fake_reset();
	m = open_model("preempt");
	CHECK(m);
	if (!m)
		return;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const char *h = cases[i].handle;
		int cancelled = fake_cancelled(cases[i].a);

		if (cases[i].from) {
			CHECK(bring(m, h, cases[i].from));
			fake_set(cases[i].a, FAKE_BLOCK, 0, h);
			CHECK(request(m, h, cases[i].ask) == 0);
		} else {
			fake_set(cases[i].a, FAKE_BLOCK, 0, h);
			CHECK(deploy(m, h, "PeerWorkers", ONE_ROLE, 2) == 0);
		}
		CHECK_SOON(fake_blocked(cases[i].a) == 1);
		CHECK(!state_is(m, h, "failed"));
		/* The terminate is held too, so that its state is seen. */
		fake_set(PROVIDER_TERMINATE, FAKE_BLOCK, 0, h);
		CHECK(request(m, h, "terminated\n") == 0);
		CHECK(state_is(m, h, "terminating"));
		/* The waiting call gave up; the terminate came after it. */
		CHECK_SOON(fake_blocked(PROVIDER_TERMINATE) == 1);
		CHECK(fake_blocked(cases[i].a) == 0);
		CHECK(fake_cancelled(cases[i].a) == cancelled + 1);
		CHECK(state_is(m, h, "terminating"));
		fake_release(PROVIDER_TERMINATE);
		CHECK(wait_state(m, h, "terminated"));
		CHECK(fake_live(h) == 0);
		/* A cancelled call is not a failure. */
		CHECK(error_empty(m, h));
		CHECK(model_cluster_remove(m, h) == 0);
		fake_set(cases[i].a, FAKE_OK, 0, NULL);
	}

	/* A terminate that waits is let go, and ends the cluster. */
	CHECK(bring(m, "p-term", "running"));
	fake_set(PROVIDER_TERMINATE, FAKE_BLOCK, 0, "p-term");
	CHECK(request(m, "p-term", "terminated") == 0);
	CHECK_SOON(fake_blocked(PROVIDER_TERMINATE) == 1);
	/* Asking again while it waits changes nothing. */
	CHECK(request(m, "p-term", "terminated") == 0);
	CHECK(state_is(m, "p-term", "terminating"));
	CHECK(fake_blocked(PROVIDER_TERMINATE) == 1);
	fake_release(PROVIDER_TERMINATE);
	CHECK(wait_state(m, "p-term", "terminated"));
	CHECK(fake_cancelled(PROVIDER_TERMINATE) == 0);
	CHECK(fake_live("p-term") == 0);
	CHECK(model_cluster_remove(m, "p-term") == 0);

	/* Slow calls finish; a slow one is cancelled as a blocked one. */
	fake_set(PROVIDER_CREATE, FAKE_SLOW, 100, NULL);
	CHECK(deploy(m, "p-slow", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "p-slow", "running"));
	fake_set(PROVIDER_CREATE, FAKE_OK, 0, NULL);
	fake_set(PROVIDER_STOP, FAKE_SLOW, 3600L * 1000, "p-slow");
	calls = fake_calls(PROVIDER_STOP);
	CHECK(request(m, "p-slow", "interrupted") == 0);
	CHECK_SOON(fake_calls(PROVIDER_STOP) == calls + 1);
	CHECK(state_is(m, "p-slow", "interrupting"));
	finish(m, "p-slow");
	CHECK(fake_cancelled(PROVIDER_STOP) == 2);
	CHECK(fake_live(NULL) == 0);
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

/* One cluster's create waits forever; another is deployed, interrupted
 * and resumed meanwhile, reaching each state while the first still reads
 * deploying. */
static void check_independent(void)
{
	struct model *m;

	fake_reset();
	m = open_model("two");
	CHECK(m);
	if (!m)
		return;
	fake_set(PROVIDER_CREATE, FAKE_BLOCK, 0, "stuck");
	CHECK(deploy(m, "stuck", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK_SOON(fake_blocked(PROVIDER_CREATE) == 1);
	CHECK(file_has(m, "stuck", NULL, "state", "deploying 0/2\n"));

	CHECK(deploy(m, "free", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "free", "running"));
	CHECK(state_is(m, "stuck", "deploying"));
	CHECK(request(m, "free", "interrupted") == 0);
	CHECK(wait_state(m, "free", "interrupted"));
	CHECK(state_is(m, "stuck", "deploying"));
	CHECK(request(m, "free", "resumed") == 0);
	CHECK(wait_state(m, "free", "running"));
	CHECK(state_is(m, "stuck", "deploying"));
	CHECK(fake_blocked(PROVIDER_CREATE) == 1);

	/* A deploying cluster cannot be interrupted or resumed. */
	CHECK(request(m, "stuck", "interrupted") == -EBUSY);
	CHECK(error_has(m, "stuck", "is deploying"));
	CHECK(request(m, "stuck", "resumed") == -EBUSY);
	CHECK(state_is(m, "stuck", "deploying"));

	finish(m, "stuck");
	CHECK(fake_cancelled(PROVIDER_CREATE) == 1);
	CHECK(state_is(m, "free", "running"));
	finish(m, "free");
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

/* model_close while a call waits: it returns (the job is cancelled), the
 * store keeps the transition, and the next mount finishes it. */
static void check_restart(void)
{
	struct model *m;

	/* A create cancelled before it made anything: the next mount
	 * creates the nodes. */
	fake_reset();
	fake_set_make_first(false);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	fake_set(PROVIDER_CREATE, FAKE_BLOCK, 0, NULL);
	CHECK(deploy(m, "fresh", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK_SOON(fake_blocked(PROVIDER_CREATE) == 1);
	model_close(m);
	CHECK(fake_blocked(PROVIDER_CREATE) == 0);
	CHECK(fake_cancelled(PROVIDER_CREATE) == 1);
	CHECK(fake_made() == 0);
	fake_set(PROVIDER_CREATE, FAKE_OK, 0, NULL);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(wait_state(m, "fresh", "running"));
	CHECK(fake_calls(PROVIDER_CREATE) == 2);
	CHECK(fake_live("fresh") == 2);
	CHECK(fake_made() == 2);
	CHECK(error_empty(m, "fresh"));
	finish(m, "fresh");
	model_close(m);

	/* A create cancelled while it waited for what it launched: the
	 * store has the machines; the next mount hands them back to create
	 * (made sure to exist) and makes none twice. */
	fake_reset();
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	fake_set(PROVIDER_CREATE, FAKE_BLOCK, 0, NULL);
	CHECK(deploy(m, "launched", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK_SOON(fake_blocked(PROVIDER_CREATE) == 1);
	model_close(m);
	CHECK(fake_cancelled(PROVIDER_CREATE) == 1);
	CHECK(fake_live("launched") == 2);
	fake_set(PROVIDER_CREATE, FAKE_OK, 0, NULL);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(wait_state(m, "launched", "running"));
	CHECK(fake_calls(PROVIDER_CREATE) == 2);
	CHECK(fake_recreated() == 2);
	CHECK(fake_duplicates() == 0);
	CHECK(fake_made() == 2);
	CHECK(file_has(m, "launched", "0", "status",
		       "instance_id: fake-launched-0"));
	CHECK(file_has(m, "launched", "1", "status", "state: running"));
	CHECK(error_empty(m, "launched"));

	/* An interrupt, a resume, then a terminate, each cut short by the
	 * unmount and finished by the next mount. */
	fake_set(PROVIDER_STOP, FAKE_BLOCK, 0, NULL);
	CHECK(request(m, "launched", "interrupted") == 0);
	CHECK_SOON(fake_blocked(PROVIDER_STOP) == 1);
	model_close(m);
	CHECK(fake_cancelled(PROVIDER_STOP) == 1);
	fake_set(PROVIDER_STOP, FAKE_OK, 0, NULL);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(wait_state(m, "launched", "interrupted"));
	CHECK(fake_node("launched", 0) == PROVIDER_NODE_STOPPED);
	fake_set(PROVIDER_START, FAKE_BLOCK, 0, NULL);
	CHECK(request(m, "launched", "resumed") == 0);
	CHECK_SOON(fake_blocked(PROVIDER_START) == 1);
	model_close(m);
	CHECK(fake_cancelled(PROVIDER_START) == 1);
	fake_set(PROVIDER_START, FAKE_OK, 0, NULL);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(wait_state(m, "launched", "running"));
	CHECK(fake_node("launched", 1) == PROVIDER_NODE_RUNNING);
	fake_set(PROVIDER_TERMINATE, FAKE_BLOCK, 0, NULL);
	CHECK(request(m, "launched", "terminated") == 0);
	CHECK_SOON(fake_blocked(PROVIDER_TERMINATE) == 1);
	model_close(m);
	CHECK(fake_cancelled(PROVIDER_TERMINATE) == 1);
	CHECK(fake_live("launched") == 2);
	fake_set(PROVIDER_TERMINATE, FAKE_OK, 0, NULL);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(wait_state(m, "launched", "terminated"));
	CHECK(fake_live("launched") == 0);
	CHECK(model_cluster_remove(m, "launched") == 0);

	/* A running cluster at mount: the provider is asked what it has;
	 * a machine it lost is marked terminated, and the error says so. */
	CHECK(deploy(m, "lost", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "lost", "running"));
	model_close(m);
	fake_forget("lost", 1);
	m = open_model("restart");
	CHECK(m);
	if (!m)
		return;
	CHECK(fake_attached() > 0);
	CHECK_SOON(fake_calls(PROVIDER_DESCRIBE) > 0 &&
		   file_has(m, "lost", "1", "status", "state: terminated"));
	CHECK(file_has(m, "lost", "0", "status", "state: running"));
	CHECK(error_has(m, "lost", "node 1 (fake-lost-1) is gone"));
	CHECK(state_is(m, "lost", "running"));
	finish(m, "lost");
	CHECK(fake_live(NULL) == 0);
	CHECK(fake_duplicates() == 0);
	model_close(m);
}

static int resize(struct model *m, const char *handle, const char *count)
{
	return model_cluster_file_write(m, handle, "node_count", count,
					strlen(count));
}

/* A provider that launches a role whole (ec2, gcp) gets every rank of a
 * grow in one create, marked a resize and named by a launch word that is
 * the same for the whole grow and another for the next one; a shrink's
 * terminate has the removed ranks only, marked a resize; a provider that
 * cannot resize refuses with EOPNOTSUPP, changing nothing. */
static void check_resize(void)
{
	struct fake_seen grow, again;
	struct model *m;
	int creates, terms;

	fake_reset();
	fake_set_caps(PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE |
		      PROVIDER_CREATES_WHOLE | PROVIDER_CAN_RESIZE);
	m = open_model("resize");
	CHECK(m);
	if (!m)
		return;
	CHECK(deploy(m, "r", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "r", "running"));
	CHECK(fake_last(PROVIDER_CREATE).resize == 0);
	creates = fake_calls(PROVIDER_CREATE);
	CHECK(resize(m, "r", "40\n") == 0);
	CHECK(wait_state(m, "r", "running"));
	CHECK(fake_calls(PROVIDER_CREATE) == creates + 1);
	grow = fake_last(PROVIDER_CREATE);
	CHECK(grow.n == 38 && grow.resize == 1 && *grow.launch);
	CHECK(fake_live("r") == 40);
	terms = fake_calls(PROVIDER_TERMINATE);
	CHECK(resize(m, "r", "3\n") == 0);
	CHECK(wait_state(m, "r", "running"));
	CHECK(fake_calls(PROVIDER_TERMINATE) == terms + 1);
	CHECK(fake_last(PROVIDER_TERMINATE).n == 37);
	CHECK(fake_last(PROVIDER_TERMINATE).resize == 1);
	CHECK(fake_live("r") == 3);
	CHECK(fake_node("r", 2) == PROVIDER_NODE_RUNNING);
	CHECK(fake_node("r", 3) == PROVIDER_NODE_GONE);
	CHECK(resize(m, "r", "5\n") == 0);
	CHECK(wait_state(m, "r", "running"));
	again = fake_last(PROVIDER_CREATE);
	CHECK(again.n == 2 && again.resize == 1 && *again.launch &&
	      strcmp(again.launch, grow.launch) != 0);
	/* The terminate of the whole cluster is not a resize. */
	finish(m, "r");
	CHECK(fake_last(PROVIDER_TERMINATE).resize == 0);
	model_close(m);

	fake_reset();
	fake_set_caps(PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE |
		      PROVIDER_CREATES_WHOLE);
	m = open_model("noresize");
	CHECK(m);
	if (!m)
		return;
	CHECK(deploy(m, "n", "PeerWorkers", ONE_ROLE, 2) == 0);
	CHECK(wait_state(m, "n", "running"));
	creates = fake_calls(PROVIDER_CREATE);
	CHECK(resize(m, "n", "4\n") == -EOPNOTSUPP);
	CHECK(error_has(m, "n", "cannot resize"));
	CHECK(state_is(m, "n", "running"));
	CHECK(fake_calls(PROVIDER_CREATE) == creates);
	CHECK(fake_live("n") == 2);
	finish(m, "n");
	model_close(m);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(void)
{
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	check_lifecycle();
	check_many_nodes();
	check_failures();
	check_preempt();
	check_independent();
	check_restart();
	check_resize();
	nftw(base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return check_summary("lifecycle");
}
