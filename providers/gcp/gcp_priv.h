/* What the files of the gcp provider share: the provider, a job's client
 * context, a cluster's names, its instance list, and the calls on a
 * cluster's resources that the deploy (gcp_deploy.c) and the other
 * operations (gcp.c) both make (gcp_cluster.c). */
#ifndef CCLFS_PROVIDERS_GCP_PRIV_H
#define CCLFS_PROVIDERS_GCP_PRIV_H

#include "providers/cloud.h"
#include "providers/gcp/gcp_api.h"
#include "providers/gcp/gcp_auth.h"
#include "providers/gcp/gcp_conf.h"
#include "providers/gcp/gcp_names.h"
#include "providers/provider.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define GCP_ERR_MAX 1024
#define GCP_SCOPES                                                             \
	GCP_SCOPE_COMPUTE                                                      \
	" https://www.googleapis.com/auth/cloud-billing.readonly"
#define GCP_ZONES_MAX 16

struct gcp_provider {
	struct provider base;
	struct gcp_settings s;
	pthread_mutex_t lock;
	/* The credentials and the client, made at first use (finding the
	 * credentials may ask the metadata server). */
	struct gcp_auth *auth;
	struct gcp_api *api;
	struct cloud_nodes known;
};

/* A job's calls: the client and the job's cancellation token. */
struct gcp_ctx {
	struct gcp_api *api;
	struct cancel *cancel;
	const char *project;
	struct cloud_poll poll; /* how long and how often to poll */
};

/* A cluster's names and settings, from its handle, token and options. */
struct gcp_names {
	char handle[65];
	char token[40];
	char prefix[GCP_NAME_MAX]; /* instances, firewall rules, tag, policy */
	char label[GCP_LABEL_MAX]; /* the handle as a label value */
	char keypath[PATH_MAX];
	bool key_own; /* the key is cclfs's, made at deploy */
	char imageid[512], network[256], subnet[256], ssh_cidr[64];
	char region[64], zone[64], cluster_type[32];
	char gpu[128];	/* config/gpu: TYPE[:COUNT] attached to N1 types */
	int failover;	/* zones tried at most (0: every zone) */
	bool spot[2];	/* per role (manager, worker) */
	bool placement; /* an MPI cluster: nodes close together */
};

static inline struct gcp_provider *gcp_of(struct provider *p)
{
	return (struct gcp_provider *)p;
}

struct gcp_instance {
	char zone[64];
	char name[GCP_NAME_MAX];
	char status[32];
	char address[64]; /* natIP */
	char internal[64];
	char role[16];
	int rank;
};

struct gcp_list {
	struct gcp_instance *v;
	size_t n, cap;
	const char *prefix;
};

bool gcp_has_gpu(const char *type);

bool gcp_is_arm(const char *type);

void gcp_names_fill(const struct gcp_provider *gp,
		    const struct provider_node *pn, struct gcp_names *nm);

/* The job's context: the client (made at first use) and its token. */
int gcp_ctx_get(struct gcp_provider *gp, struct provider_batch *b,
		struct gcp_ctx *c);

/* Whether the credentials give a token, before anything is asked of
 * Compute Engine: a refusal then reads as what it is. */
int gcp_ctx_check(struct gcp_provider *gp, struct gcp_ctx *c, char *err,
		  size_t errlen);

/* One call: 0, or its -errno with err. */
int gcp_one(struct gcp_ctx *c, struct gcp_call *call, char *err, size_t errlen);

/* Wait for the operations the n calls answered with (calls that failed
 * with one of `ok`'s errnos, e.g. -ENOENT for a delete, are done). 0, or the
 * first failure with err. */
int gcp_wait_calls(struct gcp_ctx *c, struct gcp_call *calls, size_t n, int ok,
		   char *err, size_t errlen);

void gcp_copy_string(const cJSON *o, const char *key, char *out, size_t len);

/* Every instance labelled with the cluster's token, in every zone. */
int gcp_instances(struct gcp_ctx *c, const struct gcp_names *nm,
		  struct gcp_list *l, char *err, size_t errlen);

const struct gcp_instance *gcp_find(const struct gcp_list *l, const char *id);

/* Give each node the instance of its rank and role (in `zone`, or any when
 * NULL); 0 when every node has one. */
size_t gcp_assign(const struct gcp_list *l, const char *zone,
		  struct provider_node *nodes, size_t n);

/* Wait until every node's instance is in `want` (RUNNING with an address,
 * TERMINATED, or gone), listing the cluster's instances with backoff. */
int gcp_wait(struct gcp_provider *gp, struct gcp_ctx *c,
	     const struct gcp_names *nm, struct provider_node *nodes, size_t n,
	     const char *want, char *err, size_t errlen);

/* Delete every instance of the list (in `zone` only, when not NULL) at
 * once and wait until they are gone. */
int gcp_delete_instances(struct gcp_ctx *c, const struct gcp_names *nm,
			 const struct gcp_list *l, const char *zone, char *err,
			 size_t errlen);

void gcp_network_path(const struct gcp_ctx *c, const struct gcp_names *nm,
		      char *out, size_t len);

/* Make the two firewall rules (made before a crash: already there). */
int gcp_firewalls(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		  size_t errlen);

int gcp_placement(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		  size_t errlen);

/* Everything the cluster has: its instances (by label, in every zone),
 * then its rules and policy. */
int gcp_destroy(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		size_t errlen);

/* The login user: config/user, else [gcp] user. */
const char *gcp_user(const struct gcp_provider *gp,
		     const struct provider_node *pn);

/* The SSH sessions of nodes that are stopped or deleted, closed by a
 * thread of their own while the calls go. Closing one ends its thread: for
 * 64 nodes, woken and waited for one after the other, 0.4 to 0.8 s before
 * the first stop was sent on a machine where the daemon got a small share
 * of the CPU (about 50 ms of CPU in all); alongside, it overlaps with the
 * calls' round trips, and all are told to close before any is waited for
 * (remote_forget_all). gcp_forget_end waits until all are closed (before
 * the nodes are reached again, or the batch is returned). Without a thread
 * gcp_forget_begin closes them itself. */
struct gcp_forget {
	struct remote *r;
	const struct provider_node *nodes;
	size_t n;
	pthread_t thread;
	bool started;
};

void gcp_forget_begin(struct gcp_forget *f, struct remote *r,
		      const struct provider_node *nodes, size_t n);
void gcp_forget_end(struct gcp_forget *f);

int gcp_reach_all(struct gcp_provider *gp, struct provider_node *nodes,
		  size_t n, struct cancel *cancel, char *err, size_t errlen);

/* The create op (gcp_deploy.c): a deploy, or the relaunch of preempted
 * nodes. */
int gcp_create(struct provider *p, struct provider_batch *b);

#endif
