/* The jobs of clusters (deploy, interrupt, resume, terminate, and the
 * checks at mount), the providers they use, and the requests that start
 * them. All with the model locked, unless said otherwise. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_JOBS_H
#define CCLFS_LIFECYCLE_CLUSTER_JOBS_H

#include "lifecycle/cluster_state.h"

#include <stddef.h>

struct model;
struct cluster;

/* Open the providers cclfs.conf sets up and the job runner; its threads
 * start with the first job (model_start queues them, after the daemon
 * went to the background). 0, or -1 with err. Not locked. */
int cluster_jobs_open(struct model *m, char *err, size_t errlen);
/* Cancel and wait for every job, close the providers. Not locked. */
void cluster_jobs_close(struct model *m);
/* Queue a job of the cluster. */
void cluster_jobs_queue(struct model *m, const char *handle,
			enum cluster_op op);
/* A request written to `state`: 0, or -errno with the reason recorded. A
 * terminate cancels the cluster's running job first. */
int cluster_request_state(struct model *m, struct cluster *c,
			  enum cluster_op op);
/* `restart`: kill every process cclfs started on the nodes (unlocks
 * around the providers). */
int cluster_restart(struct model *m, struct cluster *c);

#endif
