/* The state directory: where it is ($XDG_STATE_HOME/cclfs or -o statedir=),
 * its creation with mode 0700, the lock that keeps a second daemon from
 * using it at the same time, and what it holds besides the store: the
 * remains of clusters found without the store (node directories, command
 * outputs, key files, processes of local nodes), files moved aside, and
 * whether it can be written. */
#ifndef CCLFS_LIFECYCLE_STATEDIR_H
#define CCLFS_LIFECYCLE_STATEDIR_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Choose the state directory (explicit, else $XDG_STATE_HOME/cclfs, else
 * ~/.local/state/cclfs) into path, create it 0700 (parents as needed), and
 * take its lock. Returns the lock's descriptor (keep it open for the life
 * of the daemon), or -1 with err filled.
 */
int statedir_open(const char *explicit_dir, char *path, size_t pathlen,
		  char *err, size_t errlen);

/* Record the daemon's pid in the lock file (after it went to the
 * background). */
void statedir_set_pid(int lockfd);

/* 0 when the directory of `path` and `path` itself (when it exists) can
 * be written; else -EROFS (read-only file system), -EPERM (immutable:
 * chattr +i) or -EACCES, with a sentence in err saying what to do. */
int statedir_check_writable(const char *path, char *err, size_t errlen);

/* Move `path` aside as path.WHY-YYYYMMDD-HHMMSS (its -wal with it, its
 * -shm removed), keeping it; the new name in out. 0 or -errno. */
int statedir_move_aside(const char *path, const char *why, char *out,
			size_t outlen, char *err, size_t errlen);

/* Copy the file src to dest, mode 0600: into dest.tmp, synced, renamed.
 * 0 or -errno with err filled. */
int statedir_copy_file(const char *src, const char *dest, char *err,
		       size_t errlen);

/* A process that carries a local node's CCLFS_INSTANCE entry. */
struct statedir_proc {
	pid_t pid;
	char comm[20];
	char instance[48]; /* the value of CCLFS_INSTANCE */
};

#define STATEDIR_PROCS_MAX 8

/* What the state directory holds of one cluster, found without the
 * store. */
struct statedir_remains {
	char handle[72];
	int node_dirs; /* STATEDIR/nodes/HANDLE/X: local node directories */
	int outputs;   /* files in STATEDIR/clusters/HANDLE/ (outputs) */
	int keys;      /* STATEDIR/keys/HANDLE-TOKEN[.pub]: SSH key files */
	/* The machines its hostfile (clusters/HANDLE/hostfile) names, but
	 * this one: "a, b, c" ("" none). */
	char hosts[256];
	size_t nprocs; /* processes of its local nodes still running */
	struct statedir_proc procs[STATEDIR_PROCS_MAX]; /* the first ones */
};

/*
 * Every cluster with remains under `dir`, in handle order: fn is called
 * once per cluster and returns non-zero to stop (that value is returned).
 * Processes are found by the CCLFS_INSTANCE entry that the local provider
 * gives every process of a node, tied to this state directory by their
 * working directory (under nodes/HANDLE/) or their CCLFS_HOSTFILE (under
 * clusters/HANDLE/). Returns 0, or -errno when dir cannot be read.
 */
int statedir_remains(const char *dir,
		     int (*fn)(void *ctx, const struct statedir_remains *r),
		     void *ctx);

#endif
