/* The provider interface: what every provider (local, hosts, ec2, gcp)
 * does to the machines of a cluster: create nodes, stop and start them,
 * kill what runs on them, terminate them, describe them, run a command. */
#ifndef CCLFS_PROVIDERS_PROVIDER_H
#define CCLFS_PROVIDERS_PROVIDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#define PROVIDER_ID_MAX	  127
#define PROVIDER_PATH_MAX 4095

struct provider;

/* One node as the provider knows it. The lifecycle keeps these in its
 * store; the provider fills instance_id, address and workdir at create. */
struct provider_node {
	char handle[65];		       /* cluster handle */
	int rank;			       /* 0..N-1; -1: the manager */
	char instance_id[PROVIDER_ID_MAX + 1]; /* "" until created */
	char address[PROVIDER_ID_MAX + 1];
	char workdir[PROVIDER_PATH_MAX + 1];
	/* Given by the lifecycle: the type to create, how to log in (""
	 * for the provider's default), and whether the node is reached
	 * through its cluster's manager (workers of ManagerWorkers). */
	char instance_type[64];
	char user[64];
	char keyfile[PROVIDER_PATH_MAX + 1];
	int tunneled;
	/* The cluster's token, random and fixed at deploy: cloud providers
	 * derive idempotency tokens and resource names from it. */
	char token[40];
	/* Provider options from the contract's config/ at deploy, one
	 * NAME=VALUE per line (imageid, subnet_id...). */
	char options[1024];
};

/* What a provider does to many nodes at once (its `act` op). */
enum provider_act {
	PROVIDER_ACT_STOP,
	PROVIDER_ACT_START,
	PROVIDER_ACT_TERMINATE,
};

enum provider_state {
	PROVIDER_NODE_RUNNING,
	PROVIDER_NODE_STOPPED, /* interrupted: processes paused */
	PROVIDER_NODE_GONE,    /* terminated, or never created */
};

/* One command on one node. */
struct provider_run {
	const char *command;	 /* run with /bin/sh -c in the workdir */
	const char *stdout_path; /* created or truncated, mode 0600 */
	const char *stderr_path;
	/* Extra NAME=VALUE, NULL-terminated. CCLFS_HOSTFILE names the
	 * daemon's copy; a provider with a prepare op gives the path of the
	 * copy on the node instead. */
	const char *const *env;
	/* Polled while the command runs; non-zero: kill it and return
	 * -EINTR. May be NULL. */
	int (*cancelled)(void *ctx);
	void *cancel_ctx;
	int exit_status; /* out: exit code, or 128 + signal number */
};

/*
 * A node's working directory as files (clusters/H/nodes/N/files/). Paths
 * are relative to it ("" is the directory itself, "a/b" below it); every
 * call returns 0 (or a count) or -errno. An open file is a provider handle
 * in *fh. `p` is the provider whose ops these are.
 */
struct provider_file_ops {
	int (*getattr)(struct provider *p, const struct provider_node *node,
		       const char *path, struct stat *st);
	int (*readdir)(struct provider *p, const struct provider_node *node,
		       const char *path,
		       int (*fn)(void *ctx, const char *name,
				 const struct stat *st),
		       void *ctx);
	int (*open)(struct provider *p, const struct provider_node *node,
		    const char *path, int flags, mode_t mode, uint64_t *fh);
	int (*read)(struct provider *p, uint64_t fh, char *buf, size_t size,
		    off_t off);
	int (*write)(struct provider *p, uint64_t fh, const char *buf,
		     size_t size, off_t off);
	int (*fsync)(struct provider *p, uint64_t fh);
	int (*fgetattr)(struct provider *p, uint64_t fh, struct stat *st);
	int (*ftruncate)(struct provider *p, uint64_t fh, off_t size);
	int (*close)(struct provider *p, uint64_t fh);
	int (*truncate)(struct provider *p, const struct provider_node *node,
			const char *path, off_t size);
	int (*mkdir)(struct provider *p, const struct provider_node *node,
		     const char *path, mode_t mode);
	int (*unlink)(struct provider *p, const struct provider_node *node,
		      const char *path);
	int (*rmdir)(struct provider *p, const struct provider_node *node,
		     const char *path);
	int (*rename)(struct provider *p, const struct provider_node *node,
		      const char *from, const char *to, unsigned int flags);
	int (*chmod)(struct provider *p, const struct provider_node *node,
		     const char *path, mode_t mode);
	int (*utimens)(struct provider *p, const struct provider_node *node,
		       const char *path, const struct timespec tv[2]);
	int (*symlink)(struct provider *p, const struct provider_node *node,
		       const char *target, const char *path);
	int (*readlink)(struct provider *p, const struct provider_node *node,
			const char *path, char *buf, size_t size);
};

/* The local provider's: the working directory itself. */
extern const struct provider_file_ops local_file_ops;

struct provider_ops {
	const char *name;
	const struct provider_file_ops *files;
	/* Create n nodes (filling instance_id, address, workdir). A node
	 * whose instance_id is already set was created before (a deploy
	 * resumed after a crash) and is made sure to exist. With
	 * create_all, every node of the cluster is created in one call. */
	int (*create)(struct provider *p, struct provider_node *nodes, size_t n,
		      char *err, size_t errlen);
	int create_all;
	/* Optional: stop, start or terminate n nodes of one cluster at once
	 * (one API call for all, not one per node), updating their address.
	 * A terminate also removes whatever the provider made for the
	 * cluster. Without it, the per-node ops below are used. */
	int (*act)(struct provider *p, enum provider_act act,
		   struct provider_node *nodes, size_t n, char *err,
		   size_t errlen);
	/* Optional: prepare a cluster's nodes for commands that span them,
	 * after its deploy and after each resume: the text of the cluster's
	 * hostfile where CCLFS_HOSTFILE names it on every node, and with
	 * mpi, what Open MPI's mpirun needs to start processes on the nodes
	 * from any of them (a key of the cluster's in their authorized keys,
	 * their host keys known). Without it, commands read the daemon's
	 * own files (the nodes are this machine). */
	int (*prepare)(struct provider *p, const struct provider_node *nodes,
		       size_t n, const char *hostfile, int mpi, char *err,
		       size_t errlen);
	/* Pause / continue every process cclfs started on the node. */
	int (*stop)(struct provider *p, const struct provider_node *node,
		    char *err, size_t errlen);
	int (*start)(struct provider *p, const struct provider_node *node,
		     char *err, size_t errlen);
	/* Kill every process cclfs started on the node; the node stays. */
	int (*kill)(struct provider *p, const struct provider_node *node,
		    char *err, size_t errlen);
	/* Kill everything and remove the node (idempotent). */
	int (*terminate)(struct provider *p, const struct provider_node *node,
			 char *err, size_t errlen);
	int (*describe)(struct provider *p, const struct provider_node *node,
			enum provider_state *state, char *err, size_t errlen);
	/* Run a command and wait for it. Returns 0 when it ran (whatever its
	 * exit status), -EINTR when cancelled, or -errno when it could not
	 * be run. */
	int (*run)(struct provider *p, const struct provider_node *node,
		   struct provider_run *run, char *err, size_t errlen);
	/* The node is the provider's since a past deploy (called at mount
	 * for every node not terminated). May be NULL. */
	void (*attach)(struct provider *p, const struct provider_node *node);
	/* How the provider reaches the node now ("reachable",
	 * "unreachable: why"), from memory; 0, or -1 when it has nothing to
	 * say. May be NULL. */
	int (*reach)(struct provider *p, const struct provider_node *node,
		     char *buf, size_t len);
	void (*close)(struct provider *p);
};

struct remote;

struct provider {
	const struct provider_ops *ops;
	/* The nodes of a provider that reaches them over SSH (hosts, ec2),
	 * for the files/ ops they share (remote_file_ops); else NULL. */
	struct remote *remote;
	/* Set by the lifecycle: called (from any thread, no lock held)
	 * when what reach() says of a node changed. */
	void (*notify)(void *ctx, const char *handle, int rank);
	void *notify_ctx;
};

/* The local provider, with nodes under `basedir` (created 0700). */
struct provider *local_provider_open(const char *basedir, char *err,
				     size_t errlen);

#endif
