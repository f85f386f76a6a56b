/* What the cloud providers (ec2, gcp) share beyond remote.c: the nodes each
 * knows (instance, address and region, for reaching a node's peers), the
 * jittered backoff of their polls, waiting until every new node answers over
 * SSH, the nodes' working directories and a cluster's generated key. */
#ifndef CCLFS_PROVIDERS_CLOUD_H
#define CCLFS_PROVIDERS_CLOUD_H

#include "providers/provider.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cancel;
struct remote;

struct cloud_known {
	char handle[65];
	int rank;
	char id[PROVIDER_ID_MAX + 1];
	char address[PROVIDER_ID_MAX + 1]; /* the one cclfs connects to */
	char region[64];		   /* "" the configured one */
};

/* The nodes a provider knows; lock guards v. */
struct cloud_nodes {
	pthread_mutex_t lock;
	struct cloud_known *v;
	size_t n, cap;
};

void cloud_nodes_init(struct cloud_nodes *k);
void cloud_nodes_free(struct cloud_nodes *k);
/* Record (or update) pn's instance and address, and its cluster's region
 * (its region= option). */
void cloud_know(struct cloud_nodes *k, const struct provider_node *pn);
/* Where node `rank` of pn's cluster is (pn itself when rank is its own):
 * 0 with its address and id, or -ENOENT with err. */
int cloud_node_at(struct cloud_nodes *k, const struct provider_node *pn,
		  int rank, char *address, char *id, size_t len, char *err,
		  size_t errlen);

int64_t cloud_now_ms(void);
/* Between half and all of ms: the polls of many clusters spread out. */
long cloud_jitter(long ms);
/* Sleep ms, or return -ECANCELED (with err) as soon as cancel fires. */
int cloud_sleep_ms(struct cancel *cancel, long ms, char *err, size_t errlen);

/* How long to wait for booting nodes, and how often to look. */
struct cloud_poll {
	int boot_ms, first_ms, max_ms;
};

/* Connect to every node and make its working directory, again and again
 * with backoff until boot_ms is over: a cloud says running before sshd
 * answers. 0, or -errno with err. */
int cloud_reach_all(struct remote *r, struct provider_node *nodes, size_t n,
		    const struct cloud_poll *poll, struct cancel *cancel,
		    char *err, size_t errlen);
/* Each node's working directory: .cclfs/HANDLE/RANK (or manager). */
void cloud_workdirs(struct provider_node *nodes, size_t n);
/* Remove a generated key pair (PATH and PATH.pub). */
void cloud_key_remove(const char *path);

#endif
