/* FUSE passthrough for the files of local nodes (Linux 6.9 and later): the
 * kernel reads and writes such a file itself, as if the mount were the
 * node's directory, without a round trip through the daemon. */
#ifndef CCLFS_FS_PASSTHROUGH_H
#define CCLFS_FS_PASSTHROUGH_H

#include <stdbool.h>

struct fuse_session;
struct passthrough_file;

/* Take over the session's I/O with /dev/fuse: call after fuse_mount and
 * before the loop. With enable false (-o nopassthrough) the I/O stays
 * plain and passthrough is never asked for. 0 or -1 (libfuse refused). */
int passthrough_attach(struct fuse_session *se, bool enable);

/* fd is a node file this daemon opened for the open being answered by
 * the calling thread: register it as that open's backing file, so that
 * the reply tells the kernel to read and write it directly. NULL when
 * passthrough is off or the kernel refused fd (the open then goes on
 * through the daemon). Call last, once the open is sure to succeed. */
struct passthrough_file *passthrough_open(int fd);

/* The open file is released (or its open failed): NULL is ignored. */
void passthrough_close(struct passthrough_file *pf);

#endif
