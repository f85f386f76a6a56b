/* Files over SFTP on a node's persistent SSH session: each call is a
 * request that the connection's thread carries out, so file operations
 * and commands share one session without blocking one another. */
#ifndef CCLFS_PROVIDERS_SSH_SFTP_H
#define CCLFS_PROVIDERS_SSH_SFTP_H

#include "providers/ssh.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

struct ssh_file;

/* Every call returns 0 (or a byte count) or -errno: the server's status
 * codes, and where SFTP version 3 says only "failure", what a look after
 * the call tells (EEXIST, ENOTEMPTY, EISDIR, EROFS, ENOSPC, EFBIG). Paths
 * are the server's: relative ones start at the login directory. Owners are
 * the server's numbers ((uid_t)-1 when it sent none); times are whole
 * seconds; a link count is known from a listing only (stat says 1). */
int ssh_sftp_stat(struct ssh_conn *c, const char *path, struct stat *st);
int ssh_sftp_readdir(struct ssh_conn *c, const char *path,
		     int (*fn)(void *ctx, const char *name,
			       const struct stat *st),
		     void *ctx);
/* after: when not NULL, the file's attributes just after the open, asked
 * in the same flight (st_mode 0 when unknown). */
int ssh_sftp_open(struct ssh_conn *c, const char *path, int flags, mode_t mode,
		  struct ssh_file **out, struct stat *after);
int ssh_sftp_read(struct ssh_file *f, char *buf, size_t size, off_t off);
/* Read the first size bytes of a file just opened, kept for the reads to
 * come: started here, in flight meanwhile, and waited for by
 * ssh_sftp_ahead_end, which must come before any other call on f but
 * ssh_sftp_close (returns 0, or the read's error: then nothing is kept). */
int ssh_sftp_ahead_start(struct ssh_file *f, size_t size);
int ssh_sftp_ahead_end(struct ssh_file *f);
/* The host's second session, made on first use (NULL when c goes through
 * another node's session or is stopping): files opened there are read
 * beside c's own requests. Freed with c. */
struct ssh_conn *ssh_sftp_second(struct ssh_conn *c);
/* Whether f's handle belongs to its connection's session as it is now. */
bool ssh_sftp_current(const struct ssh_file *f);
/* A command ended on a node (it may have changed any node's files, as
 * mpiexec does): what open files read ahead is read again. */
void ssh_sftp_files_changed(void);
/* Answered once the bytes are buffered (write-behind): a write the node
 * refuses is the error of every later write, flush, fsync and close. */
int ssh_sftp_write(struct ssh_file *f, const char *buf, size_t size, off_t off);
/* Every write made so far on the node: 0, or the error of one. */
int ssh_sftp_flush(struct ssh_file *f);
int ssh_sftp_fsync(struct ssh_file *f);
int ssh_sftp_fstat(struct ssh_file *f, struct stat *st);
int ssh_sftp_fstatvfs(struct ssh_file *f, struct statvfs *st);
/* statvfs@openssh.com. */
int ssh_sftp_statvfs(struct ssh_conn *c, const char *path, struct statvfs *st);
int ssh_sftp_fsetsize(struct ssh_file *f, off_t size);
int ssh_sftp_close(struct ssh_file *f);
int ssh_sftp_setsize(struct ssh_conn *c, const char *path, off_t size);
int ssh_sftp_mkdir(struct ssh_conn *c, const char *path, mode_t mode);
int ssh_sftp_unlink(struct ssh_conn *c, const char *path);
int ssh_sftp_rmdir(struct ssh_conn *c, const char *path);
/* RENAME_NOREPLACE is honoured; otherwise an existing target is replaced,
 * atomically with posix-rename@openssh.com. */
int ssh_sftp_rename(struct ssh_conn *c, const char *from, const char *to,
		    unsigned int flags);
/* hardlink@openssh.com (-EPERM without it). */
int ssh_sftp_link(struct ssh_conn *c, const char *from, const char *to);
/* A symbolic link at path with the given target. */
int ssh_sftp_symlink(struct ssh_conn *c, const char *target, const char *path);
/* after: when not NULL, the attributes the change left, asked in the
 * same flight (st_mode 0 when unknown), for the getattr that follows. */
/* (unsigned long)-1: that one unchanged. */
int ssh_sftp_chown(struct ssh_conn *c, const char *path, unsigned long uid,
		   unsigned long gid, struct stat *after);
int ssh_sftp_chmod(struct ssh_conn *c, const char *path, mode_t mode);
/* -EOVERFLOW for a time before 1970 or from 2106 (2^32 s) on; parts of a
 * second are dropped. */
int ssh_sftp_utimens(struct ssh_conn *c, const char *path,
		     const struct timespec tv[2], struct stat *after);
int ssh_sftp_readlink(struct ssh_conn *c, const char *path, char *buf,
		      size_t size);

#endif
