/* A read's bytes handed to libfuse through a pipe of the thread's own. */
#ifndef CCLFS_FS_READPIPE_H
#define CCLFS_FS_READPIPE_H

#include <stddef.h>

/* The calling thread's buffer for a read of up to size bytes, page-aligned;
 * it stays the thread's, and unchanged, until the thread's next call.
 * NULL when no memory is left. */
char *readpipe_buf(size_t size);

/* Puts n bytes of the thread's buffer into the thread's pipe, by reference
 * (vmsplice), and returns the pipe's read end; -1 when they could not all
 * go, with the pipe left empty. */
int readpipe_fill(size_t n);

#endif
