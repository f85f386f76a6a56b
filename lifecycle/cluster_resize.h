/* clusters/H/node_count: a running cluster grown or shrunk. With the model
 * locked. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_RESIZE_H
#define CCLFS_LIFECYCLE_CLUSTER_RESIZE_H

#include <stddef.h>

struct model;
struct cluster;

/* A size written to node_count (workers for ManagerWorkers): validated as
 * the contract's node_count is, refused with EBUSY unless the cluster is
 * running and with EOPNOTSUPP on a provider that launches a cluster only
 * whole; else the new size and the state resizing are stored and the
 * resize job queued. 0, or -errno with the sentence in its error file. */
int cluster_resize_request(struct model *m, struct cluster *c, const char *text,
			   size_t len);

/* For the resize job (after a crash too): node records for every rank
 * below node_count that has none (creating, stored); 0, or -errno with
 * err. */
int cluster_resize_add_nodes(struct model *m, struct cluster *c, char *err,
			     size_t errlen);
/* Forget node i (terminated by a shrink): out of memory and the store. */
int cluster_resize_drop_node(struct model *m, struct cluster *c, size_t i,
			     char *err, size_t errlen);

#endif
