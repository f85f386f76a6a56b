/* clusters/H/wait: block until the cluster is in the state written. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_WAIT_H
#define CCLFS_LIFECYCLE_CLUSTER_WAIT_H

#include <stddef.h>

struct model;

/* A state name written to clusters/HANDLE/wait (model not locked; node is
 * NULL): 0 once the cluster is in it; -EIO when it can no longer get there
 * without a new request, -ETIMEDOUT after config/wait_timeout (both with a
 * sentence in its error file), -EINVAL for a name that is not a state,
 * -EINTR when cancelled(cancel_ctx) says so (checked every 100 ms). *out_fd
 * is set to -1: a wait prints nothing. */
int cluster_wait(struct model *m, const char *handle, const char *node,
		 const char *text, size_t len, int (*cancelled)(void *),
		 void *cancel_ctx, int *out_fd);

#endif
