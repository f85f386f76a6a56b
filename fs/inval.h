/* Kernel cache invalidation for changes the daemon makes on its own: paths
 * are queued from any thread and a background thread sends them with
 * fuse_invalidate_path, never from inside the handler of the same file. */
#ifndef CCLFS_FS_INVAL_H
#define CCLFS_FS_INVAL_H

#include <stdbool.h>

struct fuse;
struct inval;

/* mountpoint: where f is mounted (absolute), or NULL: names are then
 * never dropped, only attributes. */
struct inval *inval_start(struct fuse *f, const char *mountpoint);
void inval_stop(struct inval *inv);

/* Queue a mount-relative path ("contracts/c1/error"); one ending in "/"
 * stands for the known paths below it, with the names of those that are
 * not directories (never wait for those from a request on a name in that
 * directory: see inval_attrs_below). Never blocks on the kernel. inv may be
 * NULL (does nothing). A path equal to the one the calling thread's handler
 * serves (inval_serve) is left to the kernel, which refreshes the file a
 * request was made on by itself. */
void inval_push(void *inv, const char *path);

/* Remember a mount path under nodes/N/files/ that the kernel was given
 * attributes of: a later "clusters/H/nodes/N/files/" pushed (trailing
 * slash) drops them all. */
void inval_note(struct inval *inv, const char *path, bool dir);

/* The attributes (only) of "clusters/H/nodes/N/files/" and every known
 * path below it: what a request may wait for while the kernel holds the
 * lock of a directory there (dropping a name takes its directory's). */
void inval_attrs_below(struct inval *inv, const char *prefix);

/* Mark the calling thread as serving a request on mount path `path`
 * ("/contracts/c1/node_count"), or on nothing (NULL). */
void inval_serve(const char *path);

/* Wait until every path queued so far has been sent, so that the side
 * effects of a request are visible when it returns; a second at most
 * (the kernel may need a request served to take a drop). */
void inval_flush(struct inval *inv);

#endif
