/* Kernel cache invalidation for changes the daemon makes on its own: paths
 * are queued from any thread (handlers included) and a background thread
 * sends them with fuse_invalidate_path, never from inside a handler. */
#ifndef CCLFS_FS_INVAL_H
#define CCLFS_FS_INVAL_H

struct fuse;
struct inval;

struct inval *inval_start(struct fuse *f);
/* Queue a mount-relative path ("contracts/c1/error"). Never blocks on the
 * kernel. Callable with inv == NULL (does nothing). */
void inval_push(void *inv, const char *path);
void inval_stop(struct inval *inv);

#endif
