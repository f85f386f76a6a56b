/* Clusters inside the model, shared by the files of lifecycle/ that make
 * them up (cluster.c: states, jobs, the tree; cluster_exec.c: exec;
 * cluster_files.c: nodes' files/). Not for fs/. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_PRIV_H
#define CCLFS_LIFECYCLE_CLUSTER_PRIV_H

#include "lifecycle/contract.h"
#include "lifecycle/model_priv.h"
#include "providers/provider.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

enum cluster_state {
	CLUSTER_DEPLOYING,
	CLUSTER_RUNNING,
	CLUSTER_INTERRUPTING,
	CLUSTER_INTERRUPTED,
	CLUSTER_RESUMING,
	CLUSTER_TERMINATING,
	CLUSTER_TERMINATED,
	CLUSTER_FAILED,
	CLUSTER_STATES,
};

extern const char *const cluster_state_names[CLUSTER_STATES];

struct cluster_node {
	int64_t since_ns;
	int64_t exec_ns;
	struct provider_node pn;
	char name[16]; /* "0", "1", ..., "manager" */
	char provider[16];
	char instance_type[64];
	char state[16];	 /* creating running stopped terminated failed */
	int exit_status; /* of the last exec; -1: none */
};

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
};

/* A file's content being rendered. */
struct cluster_text {
	char *buf;
	size_t len, cap;
};

/* With the model locked. */
struct cluster *cluster_find(struct model *m, const char *handle);
struct cluster_node *cluster_node_find(struct cluster *c, const char *name);
/* Tell the kernel that clusters/HANDLE/relpath changed. */
void cluster_notify(struct model *m, const struct cluster *c,
		    const char *relpath);
/* Where the outputs of a cluster's commands are kept ("" if too long). */
void cluster_dir(const struct model *m, const struct cluster *c, char *buf,
		 size_t len);
int cluster_mkdirs(const char *path);
int cluster_store_node(struct model *m, const struct cluster_node *n, char *err,
		       size_t errlen);
/* Record why an operation on relpath failed; returns rc. */
int cluster_fail(struct model *m, struct cluster *c, const char *relpath,
		 int rc, const char *why);
void cluster_clear_error(struct model *m, struct cluster *c);
struct provider *cluster_provider(struct model *m,
				  const struct cluster_node *n);
/* Record the cluster in the store. */
int cluster_store(struct model *m, const struct cluster *c, char *err,
		  size_t errlen);
/* The compute nodes' Open MPI hostfile: one line per address, with the
 * slots of every node there. */
void cluster_hostfile(const struct cluster *c, struct cluster_text *t);
void cluster_printf(struct cluster_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Write the hostfile commands on the daemon's machine read
 * (CCLFS_HOSTFILE) into dir, whole; seq names the temporary file. */
int cluster_write_hostfile(struct model *m, struct cluster *c, const char *dir,
			   unsigned seq);
/* PeerWorkersMPI and ManagerWorkers: the cluster types with MPI. */
bool cluster_is_mpi(const struct cluster *c);
/* Prepare the cluster's nodes for commands that span them, through its
 * provider's prepare op (after a deploy and a resume). Unlocks the model
 * around the provider: find the cluster again after. 0, or -errno. */
int cluster_prepare(struct model *m, struct cluster *c, char *err,
		    size_t errlen);
/* Render a file that is not command output into t. */
int cluster_render(struct model *m, struct cluster *c, struct cluster_node *n,
		   const char *file, struct cluster_text *t);

#endif
