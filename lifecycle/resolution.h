/* Resolution of a contract: gathers the contract's assumptions per role
 * (role files override contract-level ones), runs the resolver over the
 * catalog, applies the resolve policy, and renders resolution/candidates. */
#ifndef CCLFS_LIFECYCLE_RESOLUTION_H
#define CCLFS_LIFECYCLE_RESOLUTION_H

#include "lifecycle/config.h"

#include <stddef.h>

struct resolution_env;

/* The current value of contract schema field `field` (never NULL). */
typedef const char *(*resolution_value_fn)(void *ctx, int field);

struct resolution_env *resolution_env_open(const struct config *cfg, char *err,
					   size_t errlen);
void resolution_env_close(struct resolution_env *env);

/*
 * Resolve: on success *text is the malloc'd content of `resolution`, one
 * line per role: "ROLE<TAB>PROVIDER<TAB>TYPE<TAB>PRICE/HOUR". On failure
 * returns -errno and one sentence in why.
 */
int resolution_run(struct resolution_env *env, resolution_value_fn value,
		   void *ctx, char **text, char *why, size_t whylen);

/* The content of `candidates`, malloc'd (NULL when out of memory). */
char *resolution_candidates(struct resolution_env *env,
			    resolution_value_fn value, void *ctx);

#endif
