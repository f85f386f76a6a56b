/* The model: every contract and its values, held in memory under one lock
 * and written through to the state store before any change is visible.
 * It is the only interface the filesystem layer uses. */
#ifndef CCLFS_LIFECYCLE_MODEL_H
#define CCLFS_LIFECYCLE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lifecycle/config.h"

struct model;
struct provider_entry;

struct model_options {
	const char *statedir; /* existing, 0700 */
	const struct config *config;
	int verbose; /* also print log lines on stderr */
	/* Called (possibly under the model's lock, never blocking) with the
	 * mount-relative path of a file the model changed on its own, such as
	 * "contracts/c1/error". */
	void (*changed)(void *ctx, const char *path);
	void *changed_ctx;
	/* The providers (NULL-terminated), NULL for the registry's: tests
	 * give a fake one. */
	const struct provider_entry *const *providers;
	/* The state store is checked at open (SQLite's quick_check) and a
	 * damaged one refused; after a good check a last-good copy is taken
	 * (STATEDIR/state.db.last-good). `checked`: an earlier model_open of
	 * this mount did that already (skip it). */
	int checked;
	/* -o recover: a damaged store is moved aside (kept) and the last-good
	 * copy mounted; a missing or empty one beside what an earlier store
	 * left is replaced by that copy too (or started empty); and whatever
	 * clusters the state directory holds that the store does not know are
	 * reported. Without it, those cases are refused. */
	int recover;
	/* Lines for the user, as they are found (what a recovery did, what a
	 * refusal found); also in the log. */
	void (*report)(void *ctx, const char *line);
	void *report_ctx;
};

struct model_attr {
	size_t size;
	int64_t mtime_ns;
};

struct model *model_open(const struct model_options *opt, char *err,
			 size_t errlen);
void model_close(struct model *m);
/* Set or replace the change callback (after the filesystem is created). */
void model_set_changed(struct model *m, void (*changed)(void *, const char *),
		       void *ctx);

/* contracts/: its own attributes, and its entries in name order. fn returns
 * non-zero to stop. */
int model_contracts_stat(struct model *m, struct model_attr *attr);
int model_contracts_list(struct model *m,
			 int (*fn)(void *ctx, const char *name,
				   const struct model_attr *attr),
			 void *ctx);

/* All of these return 0 or -errno. On refusal the contract's error file
 * holds one sentence naming the file and the value, and the log has it. */
int model_contract_create(struct model *m, const char *name);
int model_contract_remove(struct model *m, const char *name);
int model_contract_stat(struct model *m, const char *name,
			struct model_attr *attr);

/* Files of a contract, by index in the contract schema. */
int model_file_stat(struct model *m, const char *contract, int field,
		    struct model_attr *attr);
/* A snapshot of the file's content now, malloc'd (free it). */
int model_file_read(struct model *m, const char *contract, int field,
		    char **buf, size_t *len);
/* Validate and commit a whole value (or fire a trigger with text). */
int model_file_write(struct model *m, const char *contract, int field,
		     const char *text, size_t len);
/* The stored value of a value file (normal form, no newline), malloc'd:
 * what a descriptor restores if a later write on it is refused. */
int model_file_value(struct model *m, const char *contract, int field,
		     char **value);
/* Put back a value taken with model_file_value, keeping the error file as
 * it is (it explains the refusal that caused the restore). */
int model_file_restore(struct model *m, const char *contract, int field,
		       const char *value);
/* touch: fire a trigger; accepted and ignored on a value file. */
int model_file_touch(struct model *m, const char *contract, int field);
/* rm: reset a value file to its default (no-op for the others). */
int model_file_reset(struct model *m, const char *contract, int field);
/* Refuse an operation on a contract file: record why, return -errnum. */
int model_file_refuse(struct model *m, const char *contract, int field,
		      int errnum, const char *reason);
/* Refuse an operation on `relpath` inside a contract (a file that is not
 * part of the schema, say): record why in its error, return -errnum. */
int model_contract_refuse(struct model *m, const char *contract,
			  const char *relpath, int errnum, const char *reason);
/* rmdir of a contract's folder: reset every value in it (so rm -r works). */
int model_dir_reset(struct model *m, const char *contract, int dir);

/* Start the background jobs (after the daemon went to the background) and
 * finish what a crash interrupted: deploys, interrupts, resumes and
 * terminations that were recorded but not completed. */
int model_start(struct model *m, char *err, size_t errlen);

/* --- clusters/ --- */

int model_clusters_stat(struct model *m, struct model_attr *attr);
/* clusters/ (contract NULL) or contracts/CONTRACT/clusters/: the handles. */
int model_clusters_list(struct model *m, const char *contract,
			int (*fn)(void *ctx, const char *handle,
				  const struct model_attr *attr),
			void *ctx);
int model_cluster_stat(struct model *m, const char *handle,
		       struct model_attr *attr);
/* The contract a cluster was deployed from; -ENOENT when the cluster or
 * the contract is gone. */
int model_cluster_contract(struct model *m, const char *handle, char *out,
			   size_t outlen);
/* rmdir clusters/HANDLE: only a terminated cluster (-EBUSY otherwise). */
int model_cluster_remove(struct model *m, const char *handle);

/* Files of clusters/HANDLE/ (i = 0, 1, ... until NULL) and of each node
 * folder, and whether a user may write them. */
const char *model_cluster_file_name(size_t i);
const char *model_node_file_name(size_t i);
int model_cluster_file_writable(const char *file);
int model_node_file_writable(const char *file);
/* The permission bits of a cluster's file (node NULL) or a node's: 0644
 * or 0444, without group and other bits for what commands printed. */
unsigned model_cluster_file_mode(const char *node, const char *file);
/* Whether writing the file runs a command inside the write (exec,
 * mpiexec: model_cluster_command); node NULL for the cluster's files. */
int model_cluster_file_is_command(const char *node, const char *file);

/* A file of a cluster (node NULL) or of one of its nodes ("0", "1", ...,
 * "manager"): attributes, and a snapshot of its content. A snapshot is
 * either in memory (*buf, *len) or, for command output that may be large,
 * an open file (*fd >= 0, *buf NULL) to read with pread and close. */
int model_cluster_file_stat(struct model *m, const char *handle,
			    const char *node, const char *file,
			    struct model_attr *attr);
int model_cluster_file_open(struct model *m, const char *handle,
			    const char *node, const char *file, char **buf,
			    size_t *len, int *fd);
/* Write to `state` or `restart` (touch fires restart too). */
int model_cluster_file_write(struct model *m, const char *handle,
			     const char *file, const char *text, size_t len);
/* The mount's costs file: one line per cluster (handle, provider, type,
 * region, nodes billed now, their price per hour, node-hours billed, cost
 * so far) and a total. 0 with *buf (free it), or -ENOMEM. */
int model_costs_render(struct model *m, char **buf, size_t *len);
/* Its size and time: now while a node is billed (the cost grows), else
 * when the last node stopped. */
int model_costs_stat(struct model *m, struct model_attr *attr);
int model_cluster_file_touch(struct model *m, const char *handle,
			     const char *file);

/* Refuse an operation on `relpath` of a cluster ("nodes/0/exec"): record
 * why in its error file and log, return -errnum. */
int model_cluster_refuse(struct model *m, const char *handle,
			 const char *relpath, int errnum, const char *reason);

/* The node folders of a cluster, in rank order ("manager" first). */
int model_cluster_nodes(struct model *m, const char *handle,
			int (*fn)(void *ctx, const char *node), void *ctx);
int model_node_stat(struct model *m, const char *handle, const char *node,
		    struct model_attr *attr);

/*
 * Run a command through exec on one node (node != NULL) or on every node
 * (node NULL: output lines prefixed "RANK: "), and wait for it. cancelled
 * is polled (Ctrl-C). On return *out_fd (when not NULL) is an open file
 * with this command's standard output for the caller to read and close.
 * Returns 0; -EIO when the command exited non-zero (anywhere); -EINTR
 * when cancelled; -EBUSY when the cluster is not running; with the reason
 * in the cluster's error file.
 */
int model_exec(struct model *m, const char *handle, const char *node,
	       const char *command, size_t len, int (*cancelled)(void *),
	       void *cancel_ctx, int *out_fd);

/* Run what was written to a command file (node NULL for the cluster's):
 * model_exec or model_mpiexec, by the file. */
int model_cluster_command(struct model *m, const char *handle, const char *node,
			  const char *file, const char *command, size_t len,
			  int (*cancelled)(void *), void *cancel_ctx,
			  int *out_fd);

/*
 * mpiexec: run Open MPI's mpirun with the cluster's hostfile and every
 * slot (node_process_count x node_count ranks) on the launch node (the
 * manager, else node 0), config/directory and config/mpiflags applied;
 * `command` is the program and its arguments, one line. Waits; *out_fd as
 * for model_exec. Returns 0; -EBUSY for a cluster without MPI or not
 * running; -EINVAL for an empty or multi-line command; -EIO when the job
 * failed; -EINTR when cancelled; with the reason in the error file.
 */
int model_mpiexec(struct model *m, const char *handle, const char *command,
		  size_t len, int (*cancelled)(void *), void *cancel_ctx,
		  int *out_fd);

/*
 * nodes/NODE/files/: the node's working directory through its provider.
 * model_files_get looks the node up (NULL and *err = -errno when there is
 * none); the calls then run without the model's lock. Paths are relative
 * to the working directory. All return 0 (or a count) or -errno.
 */
struct model_files;
struct stat;
struct statvfs;
struct flock;
/* Who makes the calls (the process of the request): a provider whose
 * files are on this machine acts with these rights. groups: as in
 * struct provider_caller (asked from the thread of the call). */
struct model_caller {
	uid_t uid;
	gid_t gid;
	int (*groups)(gid_t *list, int size);
};
struct model_files *model_files_get(struct model *m, const char *handle,
				    const char *node,
				    const struct model_caller *who, int *err);
void model_files_put(struct model_files *f);
int model_files_getattr(struct model_files *f, const char *path,
			struct stat *st);
int model_files_readdir(struct model_files *f, const char *path,
			int (*fn)(void *ctx, const char *name,
				  const struct stat *st),
			void *ctx);
int model_files_open(struct model_files *f, const char *path, int flags,
		     unsigned int mode, uint64_t *fh);
int model_files_read(struct model_files *f, uint64_t fh, char *buf, size_t size,
		     int64_t off);
int model_files_write(struct model_files *f, uint64_t fh, const char *buf,
		      size_t size, int64_t off);
int model_files_fsync(struct model_files *f, uint64_t fh);
/* At each close of a descriptor: the error of a write that was answered
 * before it reached the node, or 0. */
int model_files_flush(struct model_files *f, uint64_t fh);
/* Whether the open file has other names: 1, 0, or -errno. */
int model_files_shared(struct model_files *f, uint64_t fh);
/* A descriptor of this machine that reads and writes the open file, or
 * -1 (then model_files_read and model_files_write do). */
int model_files_fd(struct model_files *f, uint64_t fh);
int model_files_fgetattr(struct model_files *f, uint64_t fh, struct stat *st);
int model_files_ftruncate(struct model_files *f, uint64_t fh, int64_t size);
int model_files_close(struct model_files *f, uint64_t fh);
int model_files_truncate(struct model_files *f, const char *path, int64_t size);
int model_files_mkdir(struct model_files *f, const char *path,
		      unsigned int mode);
int model_files_unlink(struct model_files *f, const char *path);
int model_files_rmdir(struct model_files *f, const char *path);
int model_files_rename(struct model_files *f, const char *from, const char *to,
		       unsigned int flags);
int model_files_chmod(struct model_files *f, const char *path,
		      unsigned int mode);
int model_files_utimens(struct model_files *f, const char *path,
			const struct timespec tv[2]);
int model_files_symlink(struct model_files *f, const char *target,
			const char *path);
int model_files_readlink(struct model_files *f, const char *path, char *buf,
			 size_t size);
int model_files_link(struct model_files *f, const char *from, const char *to);
int model_files_mknod(struct model_files *f, const char *path,
		      unsigned int mode, uint64_t dev);
int model_files_chown(struct model_files *f, const char *path, uid_t uid,
		      gid_t gid);
int model_files_statfs(struct model_files *f, const char *path,
		       struct statvfs *st);
/* Never wait: a lock held elsewhere is -EAGAIN (POSIX) or -EWOULDBLOCK
 * (flock); the caller retries to wait. */
int model_files_lock(struct model_files *f, uint64_t fh, uint64_t owner,
		     int cmd, struct flock *fl);
int model_files_flock(struct model_files *f, uint64_t fh, int op);

/* catalog/: read-only but for PROVIDER/refresh; it changes only when a
 * refresh (or `default`) replaces it whole. The providers, a provider's
 * types (i = 0, 1, ... until NULL), whether a type exists, the names of a
 * type's files (i = 0, 1, ... until NULL), and the content of one
 * (malloc'd; -ENOENT when there is none). */
size_t model_catalog_providers(struct model *m, const char **out, size_t max);
const char *model_catalog_type(struct model *m, const char *provider, size_t i);
int model_catalog_type_exists(struct model *m, const char *provider,
			      const char *type);
const char *model_catalog_feature_name(size_t i);
int model_catalog_feature(struct model *m, const char *provider,
			  const char *type, const char *feature, char **buf,
			  size_t *len);
/* When the catalog last changed (its files' mtime). */
int64_t model_catalog_ns(struct model *m);
/* catalog/regions/PROVIDER/: a provider's regions (i = 0, 1, ... until
 * NULL), and the types a region offers, one name per line (malloc'd;
 * -ENOENT when there is no such region). */
const char *model_catalog_region(struct model *m, const char *provider,
				 size_t i);
int model_catalog_region_types(struct model *m, const char *provider,
			       const char *region, char **names, size_t *len);
/* Whether the provider has the region and, when type is not NULL, offers
 * that type there. */
bool model_catalog_offered(struct model *m, const char *provider,
			   const char *region, const char *type);
/* catalog/PROVIDER/refresh: whether it exists, its content (malloc'd) and
 * mtime, and a write or touch of it (see refresh_request). */
bool model_catalog_refresh_exists(struct model *m, const char *provider);
int model_catalog_refresh_read(struct model *m, const char *provider,
			       char **buf, size_t *len, int64_t *mtime_ns);
int model_catalog_refresh_write(struct model *m, const char *provider,
				const char *data, size_t len);

#endif
