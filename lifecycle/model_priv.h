/* The model's inside, shared by the files of lifecycle/ that make it up
 * (model_log.c: clock, log and change notices; model.c: contracts;
 * cluster*.c: clusters and their jobs). Not for fs/. */
#ifndef CCLFS_LIFECYCLE_MODEL_PRIV_H
#define CCLFS_LIFECYCLE_MODEL_PRIV_H

#include "lifecycle/model.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define MODEL_ERR_MAX 1024

struct model_contract;
struct cluster;
struct jobs;
struct refresh;
struct provider;
struct provider_entry;

/* Providers open at once, at most. */
#define MODEL_PROVIDERS_MAX 16

struct model {
	pthread_mutex_t lock;
	/* Broadcast at every change notice (model_notify_path): what a
	 * waiter on a cluster's state sleeps on, with the lock. */
	pthread_cond_t changed_cond;
	struct store *store;
	const struct config *config;
	struct resolution_env *resolution;
	int verbose;
	void (*changed)(void *ctx, const char *path);
	void *changed_ctx;
	struct model_contract **contracts; /* sorted by name */
	size_t count, cap;
	int64_t contracts_ns; /* last mkdir or rmdir in contracts/ */
	char statedir[PATH_MAX];
	/* clusters (cluster.c) */
	struct cluster **clusters; /* sorted by handle */
	size_t nclusters, capclusters;
	int64_t clusters_ns;
	/* The providers of the registry that are set up, in its order. */
	const struct provider_entry *const *registry;
	struct provider *providers[MODEL_PROVIDERS_MAX];
	size_t nproviders;
	struct jobs *jobs;	 /* one queue per cluster (by handle) */
	struct refresh *refresh; /* catalog refreshes (refresh.c) */
	/* A contract's config/KEY, else cclfs.conf's [defaults] KEY, else ""
	 * (model locked): set by model.c, so that clusters read their
	 * contract's configuration without depending on it. */
	const char *(*contract_config)(const struct model *m,
				       const char *contract, const char *key);
	/* The contract resolved again without the offers of `tried`
	 * ("PROVIDER<TAB>TYPE<TAB>REGION" lines), stored as its resolution
	 * (model locked): 0 with the text in *text (free it), or -errno and
	 * why. Set by model.c, for a cluster's failover. */
	int (*contract_next)(struct model *m, const char *contract,
			     const char *tried, char **text, char *why,
			     size_t whylen);
};

int64_t model_now(void);
/* A model_now() time as the timespec pthread_cond_timedwait takes (the
 * condition variables of lifecycle/ use the realtime clock). */
void model_timespec(int64_t ns, struct timespec *ts);
/* Tell the filesystem that a mount-relative path changed. */
void model_notify_path(struct model *m, const char *path);
/* Append a line to the log of `subject` ("contracts", "clusters/H"). */
__attribute__((format(printf, 3, 4))) void
model_log(struct model *m, const char *subject, const char *fmt, ...);

#endif
