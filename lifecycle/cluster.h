/* Clusters as the rest of the model sees them: loaded and their providers
 * opened at mount (cluster_deploy.c), deployed from a contract, and whether
 * a contract still has a live one. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_H
#define CCLFS_LIFECYCLE_CLUSTER_H

#include <stddef.h>

struct model;

struct cluster_request {
	const char *contract;
	const char *name; /* "" for 15 random letters */
	const char *cluster_type;
	const char *resolution; /* the contract's resolution text */
	int node_count;
	int process_count;
	const char *user;    /* config/user ("" or NULL: the default) */
	const char *keyfile; /* config/keyfile, or sshflags -i FILE */
	const char *options; /* provider options: NAME=VALUE lines */
};

/* Load the clusters of the state store and open the providers; starts no
 * thread (the daemon may still fork). */
int cluster_open(struct model *m, char *err, size_t errlen);
void cluster_close(struct model *m);

/* With the model locked: record a new cluster and queue its creation.
 * Returns 0, or -errno with one sentence in why. */
int cluster_deploy(struct model *m, const struct cluster_request *req,
		   char *why, size_t whylen);
/* With the model locked: non-zero (and why) when a cluster that is not
 * terminated uses contract. */
int cluster_contract_busy(struct model *m, const char *contract, char *why,
			  size_t whylen);

#endif
