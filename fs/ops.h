/* The filesystem operations: every FUSE callback of the tree, mapping
 * paths to the model and enforcing how each kind of file behaves. */
#ifndef CCLFS_FS_OPS_H
#define CCLFS_FS_OPS_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

struct model;
struct fuse_operations;

struct fsctx {
	struct model *model;
	struct inval *inval;
	struct watch *watch; /* pollers of the tree's files */
	uid_t uid;
	gid_t gid;
	struct timespec mounted;
	const char *mountpoint; /* absolute */
	bool singlethread;	/* -s: a handler must not wait for another */
	bool splice_write;	/* libfuse splices replies (fs_init) */
};

extern const struct fuse_operations fsops;

#endif
