/* A provider in memory for the lifecycle's unit tests: its batch ops
 * succeed, fail, block or go slowly on demand, and it keeps what it made,
 * so a test can drive every transition and check that nothing is left. */
#ifndef CCLFS_TESTS_FAKE_PROVIDER_H
#define CCLFS_TESTS_FAKE_PROVIDER_H

#include "providers/provider.h"

#include <stdbool.h>
#include <stddef.h>

/* The registry entry "fake" (platform type Localhost): what a test hands
 * to model_open in model_options.providers. */
extern const struct provider_entry fake_entry;

/* What an action does when called. */
enum fake_mode {
	FAKE_OK,
	FAKE_FAIL,  /* -EIO, with a message naming the action */
	FAKE_BLOCK, /* wait for fake_release or the batch's token */
	FAKE_SLOW,  /* wait ms through the batch's token, then succeed */
};

/* Everything back to FAKE_OK, no counts, nothing made; caps
 * PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE, create makes first. */
void fake_reset(void);
/* The caps of instances opened from now on. */
void fake_set_caps(unsigned caps);
/* What action a does from now on: for every cluster (handle NULL) or for
 * one, the others' calls succeeding; ms is FAKE_SLOW's wait. */
void fake_set(enum provider_action a, enum fake_mode mode, long ms,
	      const char *handle);
/* Whether create fills in the nodes before it waits or fails (a cloud
 * launches, then waits for the machines to boot) or only once it is
 * done. */
void fake_set_make_first(bool first);
/* Let every call of a blocked now go on (and succeed); a is then FAKE_OK. */
void fake_release(enum provider_action a);

/* Calls of a so far; how many ended -ECANCELED; how many wait now. */
int fake_calls(enum provider_action a);
int fake_cancelled(enum provider_action a);
int fake_blocked(enum provider_action a);
/* Nodes handed to create with an instance_id already (a resumed deploy);
 * nodes created while a live one of the same handle and rank existed (a
 * duplicate machine); attach calls. */
int fake_recreated(void);
int fake_duplicates(void);
int fake_attached(void);
/* Nodes made (ever); nodes not terminated now, of one cluster or (handle
 * NULL) of all. */
size_t fake_made(void);
size_t fake_live(const char *handle);
/* The last call of an action: how many nodes it had, its resize flag and
 * launch word (provider_batch). */
struct fake_seen {
	size_t n;
	int resize;
	char launch[24];
};
struct fake_seen fake_last(enum provider_action a);
/* The state of one node as the fake has it (PROVIDER_NODE_GONE: none). */
enum provider_state fake_node(const char *handle, int rank);
/* Lose a node behind the lifecycle's back (a machine gone at mount). */
void fake_forget(const char *handle, int rank);

#endif
