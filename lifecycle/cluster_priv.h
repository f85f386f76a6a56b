/* Clusters inside the model, shared by the files of lifecycle/ that make
 * them up (cluster.c: the core; cluster_jobs.c: the jobs; cluster_deploy.c:
 * deploy and remove; cluster_attrs.c: the files; cluster_hostfile.c,
 * cluster_exec.c, cluster_mpi.c, cluster_files.c). Not for fs/. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_PRIV_H
#define CCLFS_LIFECYCLE_CLUSTER_PRIV_H

#include "lifecycle/cluster_state.h"
#include "lifecycle/contract.h"
#include "lifecycle/model_priv.h"
#include "providers/provider.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

struct cluster_node {
	int64_t since_ns;
	int64_t billed_ns; /* billable time before since_ns (cluster_cost.c) */
	int64_t exec_ns;
	struct provider_node pn;
	char name[16]; /* "0", "1", ..., "manager" */
	char provider[16];
	char instance_type[64];
	char state[16];	 /* creating running stopped terminated failed */
	int exit_status; /* of the last exec; -1: none; CLUSTER_EXIT_LOST */
};

/* The exit status of a command the daemon was cut off from by a crash or a
 * kill (recorded at the next mount, cluster_exec_recover): reads "lost". */
#define CLUSTER_EXIT_LOST (-2)

struct cluster {
	char handle[CONTRACT_NAME_MAX + 1];
	char contract[CONTRACT_NAME_MAX + 1];
	char cluster_type[32];
	char *resolution;
	enum cluster_state state;
	int node_count, process_count;
	int64_t created_ns, state_ns;
	double price;
	char *error;
	int64_t error_ns;
	struct cluster_node *nodes; /* the manager first */
	size_t nnodes;
	int done;	 /* nodes through the current transition */
	int64_t exec_ns; /* last exec on the whole cluster */
	int64_t log_ns;	 /* last line of its log */
	int64_t restart_ns;
	char ssh_user[64];	    /* config/user at deploy, "" default */
	char ssh_keyfile[PATH_MAX]; /* config/keyfile or sshflags -i */
	char token[40];		    /* random, fixed at deploy */
	char options[1024];	    /* provider options from config/ */
	int mpi_exit_status;	    /* of the last mpiexec; -1: none */
	int64_t mpi_ns;		    /* when it ended */
	int commands;		    /* exec and mpiexec running now */
	bool watch_queued;	    /* a watch job is queued (not stored) */
	/* Not stored: the last exec, mpiexec or files/ use through the
	 * mount, or move to running (at load: the newest of the stored
	 * times), for config/idle_minutes; the last time a limit was acted
	 * on, so that a refusal is not retried every second. */
	int64_t active_ns;
	int64_t limits_ns;
};

/* The environment of a command on a node: the contract's
 * config/environment as it is when the command starts, then CCLFS_CLUSTER,
 * CCLFS_NODE, CCLFS_NODE_COUNT and CCLFS_HOSTFILE. */
struct cluster_env {
	char *config;	   /* config/environment's lines, NUL-separated */
	const char **envp; /* NULL-terminated: provider_run.env */
	char cclfs[4][PATH_MAX + 64];
};

/* A command under way, as its record in the cluster's directory says
 * (DIR/.KIND.SEQ.running, made before it starts, removed once its results
 * are stored), for the next mount to find if the daemon is cut off. */
struct cluster_running {
	const char *kind; /* "exec" or "mpi" */
	unsigned seq;
	int64_t start_ns;
	char tag[128]; /* provider_run.tag */
};

/* A file's content being rendered. */
struct cluster_text {
	char *buf;
	size_t len, cap;
};

/* Move node n to state (a node's: creating running stopped preempted
 * terminated failed) at `now`, its billable time counted on. */
void cluster_node_set_state(struct cluster_node *n, const char *state,
			    int64_t now);
/* Its billable time up to now; whether it is billed now. */
int64_t cluster_node_billed_ns(const struct cluster_node *n, int64_t now);
bool cluster_node_billing(const struct cluster_node *n);

/* All with the model locked. */
struct cluster *cluster_find(struct model *m, const char *handle);
struct cluster_node *cluster_node_find(struct cluster *c, const char *name);
/* Insert into the sorted list (0, or -ENOMEM); free one. */
int cluster_insert(struct model *m, struct cluster *c);
void cluster_free(struct cluster *c);
/* Tell the kernel that clusters/HANDLE/relpath changed. */
void cluster_notify(struct model *m, const struct cluster *c,
		    const char *relpath);
/* What a command may have changed in files/ of node (every node when
 * NULL): the filesystem drops what it cached of everything below. */
void cluster_notify_files(struct model *m, const struct cluster *c,
			  const char *node);
/* A line in the cluster's log. */
__attribute__((format(printf, 3, 4))) void
cluster_log(struct model *m, struct cluster *c, const char *fmt, ...);
/* "2026-11-24T22:08:58Z". */
void cluster_time_text(int64_t ns, char *buf, size_t len);
/* Where the outputs of a cluster's commands are kept ("" if too long). */
void cluster_dir(const struct model *m, const struct cluster *c, char *buf,
		 size_t len);
int cluster_mkdirs(const char *path);
/* Record the cluster, or one node, in the store. */
int cluster_store(struct model *m, const struct cluster *c, char *err,
		  size_t errlen);
int cluster_store_node(struct model *m, const struct cluster_node *n, char *err,
		       size_t errlen);
/* The cluster and every node of it, in one transaction (rolled back on
 * failure). */
int cluster_store_all(struct model *m, const struct cluster *c, char *err,
		      size_t errlen);
/* Record why an operation on relpath failed; returns rc. */
int cluster_fail(struct model *m, struct cluster *c, const char *relpath,
		 int rc, const char *why);
void cluster_clear_error(struct model *m, struct cluster *c);
/* Move c to state s, stored with its log line (and note) in one
 * transaction; -EIO with err when the store refuses (nothing changes). */
int cluster_set_state_note(struct model *m, struct cluster *c,
			   enum cluster_state s, const char *note, char *err,
			   size_t errlen);
int cluster_set_state(struct model *m, struct cluster *c, enum cluster_state s,
		      char *err, size_t errlen);
/* The one way a job fails a cluster: state failed, and "WHAT failed:
 * WHY" in its error and log. */
void cluster_job_failed(struct model *m, struct cluster *c, const char *what,
			const char *why);
/* The open provider of a node (NULL: none by that name is set up). */
struct provider *cluster_provider(struct model *m,
				  const struct cluster_node *n);

/* The environment of a command on node n, whose outputs are kept in dir
 * (model locked). 0, or -ENOMEM. */
int cluster_env_make(struct model *m, const struct cluster *c,
		     const struct cluster_node *n, const char *dir,
		     struct cluster_env *e);
void cluster_env_free(struct cluster_env *e);
/* Start the record of a command under way: its tag, then the file (what
 * ran where: relpath, the names of its nodes, the command as quoted in
 * messages). 0, or -errno. */
void cluster_running_start(struct cluster_running *r, const struct cluster *c,
			   const char *kind, unsigned seq);
int cluster_running_write(const struct cluster_running *r, const char *dir,
			  const char *relpath, const char *nodes,
			  const char *quote);
void cluster_running_end(const struct cluster_running *r, const char *dir);
/* Make (or empty) an output file for a command to write: 0, or -errno. */
int cluster_output_make(const char *path);
/* At mount (cluster_open), before any request: the commands a crash or
 * kill of the daemon cut off are recorded as lost (their processes ended,
 * their outputs put in place, exit_status "lost", a sentence in log and
 * error), and what they left in the cluster's directory is removed. */
void cluster_exec_recover(struct model *m, struct cluster *c);
/* Remove the cluster's directory under the state directory, with every
 * file in it (rmdir of a terminated cluster). */
void cluster_exec_remove_dir(struct model *m, const struct cluster *c);

/* A file's content being rendered. */
void cluster_printf(struct cluster_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* PeerWorkersMPI and ManagerWorkers: the cluster types with MPI. */
bool cluster_is_mpi(const struct cluster *c);

#endif
