/* The README at the root of the mount: what the tree is and how to start. */
#ifndef CCLFS_FS_README_H
#define CCLFS_FS_README_H

#include <stddef.h>

extern const char fsreadme_text[];
extern const size_t fsreadme_size;

#endif
