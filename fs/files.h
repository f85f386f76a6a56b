/* nodes/N/files/: what the tree adds to the node's own file operations:
 * the identity of the process that asks, and waiting for a lock. */
#ifndef CCLFS_FS_FILES_H
#define CCLFS_FS_FILES_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct model;
struct model_files;

/* The node's files as the process of the current request sees them; NULL
 * and *err = -errno when there is no such node. */
struct model_files *fs_files_get(struct model *m, const char *handle,
				 const char *node, int *err);
/* A POSIX record lock for owner (F_GETLK, F_SETLK, F_SETLKW) and flock
 * (LOCK_SH, LOCK_EX, LOCK_UN, with or without LOCK_NB): a wait ends when
 * the lock is granted or the request is interrupted (-EINTR). Without
 * wait, a lock held elsewhere is -EDEADLK at once (one thread serves the
 * mount: the holder's unlock through it would never come). */
int fs_files_lock(struct model_files *f, uint64_t fh, uint64_t owner, int cmd,
		  struct flock *fl, bool wait);
int fs_files_flock(struct model_files *f, uint64_t fh, int op, bool wait);

/*
 * Names libfuse gives a file that is removed while open (".fuse_hidden"
 * followed by 16 hex digits, in the same directory): libfuse renames the file
 * to one, keeps calling by that name until the last close, then unlinks
 * it. Nothing of the kind is left on the node: fs_files_hide opens the
 * file (f and rel: its node and path below files/) and removes it for
 * real, and the hidden name then stands for the open file; f may be NULL
 * for a file of the tree, which is only forgotten, as is a file that the
 * node's login may neither read nor write (its opens keep their handles).
 */
int fs_files_is_hidden_name(const char *path);
int fs_files_hide(struct model_files *f, const char *rel, const char *hidden);
/* The file a hidden name stands for: its attributes (-ENOENT for none). */
int fs_files_hidden_stat(const char *hidden, struct stat *st);
/* The last close: 0 when hidden was one (the name is forgotten), else
 * -ENOENT. */
int fs_files_hidden_unlink(const char *hidden);

#endif
