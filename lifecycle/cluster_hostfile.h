/* A cluster's Open MPI hostfile, rendered and written. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_HOSTFILE_H
#define CCLFS_LIFECYCLE_CLUSTER_HOSTFILE_H

#include "lifecycle/cluster_priv.h"

/* The compute nodes' hostfile: one line per address, with the slots of
 * every node there (model locked). */
void cluster_hostfile(const struct cluster *c, struct cluster_text *t);
/* Write it into dir/hostfile, whole; seq names the temporary file. */
int cluster_write_hostfile(struct model *m, struct cluster *c, const char *dir,
			   unsigned seq);

#endif
