/* The provider interface: what every provider (local, hosts, ec2, gcp)
 * does to the machines of a cluster: create nodes, stop and start them,
 * kill what runs on them, terminate them, describe them, run a command. */
#ifndef CCLFS_PROVIDERS_PROVIDER_H
#define CCLFS_PROVIDERS_PROVIDER_H

#include <fcntl.h> /* struct flock */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

enum provider_state {
	PROVIDER_NODE_RUNNING,
	PROVIDER_NODE_STOPPED, /* interrupted: processes paused */
	PROVIDER_NODE_GONE,    /* terminated, or never created */
	/* Taken back by the cloud (a reclaimed spot instance): gone, and
	 * worth relaunching. */
	PROVIDER_NODE_PREEMPTED,
};

/* The batch operations: each acts on the nodes of one cluster at once
 * (one API call for all where the provider has one) and gives a result
 * per node. */
enum provider_action {
	PROVIDER_CREATE,    /* fill instance_id, address, workdir; a node
			       whose instance_id is set was created before
			       (a deploy resumed after a crash) and is made
			       sure to exist */
	PROVIDER_STOP,	    /* pause every process cclfs started there */
	PROVIDER_START,	    /* continue them (addresses may change) */
	PROVIDER_TERMINATE, /* kill everything and remove the nodes, also
			       what a crash left unrecorded (idempotent); and
			       whatever the provider made for the cluster */
	PROVIDER_SIGNAL,    /* send `sig` to what cclfs started; nodes stay */
	PROVIDER_PREPARE,   /* after deploy and resume: the hostfile (and
			       for MPI the cluster's key and host keys) on
			       every node */
	PROVIDER_DESCRIBE,  /* each node's state as the provider sees it */
	PROVIDER_ACTIONS,
};

/* What the provider can do or needs, beyond what every provider does
 * (create, terminate, signal, describe, run). */
enum provider_caps {
	PROVIDER_CAN_STOP = 1 << 0,	   /* stop and start */
	PROVIDER_NEEDS_PREPARE = 1 << 1,   /* commands span nodes over SSH */
	PROVIDER_CREATES_WHOLE = 1 << 2,   /* create every node in one call */
	PROVIDER_HAS_FILES = 1 << 3,	   /* nodes/N/files/ */
	PROVIDER_HAS_CONNECTIONS = 1 << 4, /* reach: connection: in status */
	PROVIDER_FINDS_STRAYS = 1 << 5,	   /* strays: resources of no cluster */
	PROVIDER_SPOT_NO_STOP = 1 << 6,	   /* spot nodes cannot be stopped */
	PROVIDER_CAN_RESIZE = 1 << 7,	   /* create and terminate ranks of a
					      running cluster (batch resize) */
};

#define PROVIDER_MSG_MAX 512
#define PROVIDER_ERR_MAX 1024

struct provider_result {
	int rc;			   /* 0, or -errno for this node */
	enum provider_state state; /* PROVIDER_DESCRIBE */
	/* PROVIDER_SIGNAL with sig 0 (a probe that sends nothing): whether
	 * a process cclfs started still runs on the node. */
	int busy;
	char msg[PROVIDER_MSG_MAX]; /* why it failed, or a note */
};

struct cancel;

/*
 * A catalog refresh (provider_ops.catalog_refresh): one instance type as the
 * provider's API describes it today. Type-valued features carry the
 * platform-type hierarchy's names where the provider knows the mapping
 * (accelerator "NVIDIA_H100", processor "AWSGraviton3", storage_type
 * "StorageType_EC2_NVMeSSD"), else the API's own word, which the catalog
 * places under the manufacturer's parent (or the generic one) and reports;
 * NULL or "" = unknown. Quantities: NAN = unknown; bytes are binary (GiB =
 * 2^30), network in bits/s.
 */
struct provider_catalog_type {
	const char *name;	  /* "p5.48xlarge" */
	const char *architecture; /* "x86_64" | "arm64" */
	double vcpus, memory_bytes;
	double accelerator_count;	 /* whole devices (1 for a partition) */
	double accelerator_memory_bytes; /* per device (or partition) */
	const char *accelerator; /* "NVIDIA_H100", or the API's "GB300" */
	const char *accelerator_manufacturer; /* "NVIDIA", "AWS", "AMD", ... */
	const char *accelerator_type;	      /* "GPU", "NPU", "FPGA", "XPU" */
	const char *accelerator_architecture; /* "Hopper", "NeuronCore_v2" */
	const char *processor_manufacturer;   /* "Intel", "AMD", "AWS" */
	const char *processor;		      /* "AWSGraviton3" */
	const char *storage_type; /* "StorageType_EC2_EBSOnly" ... */
	double storage_bytes;
	double network_bits_per_s;
	bool network_up_to; /* network_bits_per_s is an "up to" ceiling */
};

/* One (type, region) offer. price/spot are USD per hour of the region's
 * Linux on-demand (shared tenancy) and latest spot price; NAN = not known
 * (a price the refresh could not obtain keeps the one the catalog had). */
struct provider_catalog_offer {
	const char *type;   /* a name handed to sink->type before */
	const char *region; /* "eu-west-1" */
	double price, spot;
	const char *zones; /* space-separated zone names, "" = unknown */
};

struct provider_catalog_sink {
	void *ctx;
	/* 0 to go on, -errno to stop the refresh (it then fails). */
	int (*type)(void *ctx, const struct provider_catalog_type *t);
	int (*offer)(void *ctx, const struct provider_catalog_offer *o);
	/* Regions done of the regions to do, as the refresh goes (may be
	 * called from any of the refresh's threads, never at once). */
	void (*progress)(void *ctx, size_t done, size_t total);
	/* One plain sentence for the refresh's summary: a correction of a
	 * known API mistake, part of the data that could not be obtained
	 * ("on-demand prices: pricing.GetProducts: AccessDenied: ...; the
	 * catalog's prices are kept"). */
	void (*note)(void *ctx, const char *sentence);
};

struct provider_batch {
	struct provider_node *nodes; /* of one cluster; updated in place */
	size_t n;
	struct provider_result *results; /* n of them, zeroed by the caller */
	/* Checked by every wait of the call (polls, retries, SSH, backoff):
	 * once fired the call returns -ECANCELED within 250 ms, leaving
	 * what it made for a terminate to find. May be NULL. */
	struct cancel *cancel;
	const char *hostfile; /* PROVIDER_PREPARE */
	int mpi;	      /* PROVIDER_PREPARE: an MPI cluster */
	int sig;	      /* PROVIDER_SIGNAL */
	/* PROVIDER_CREATE: the nodes' instances were taken back by the
	 * cloud (preempted); launch new ones for their ranks, leaving the
	 * rest of the cluster as it is. Their instance_id names the one
	 * each replaces (until the new one is made). */
	int relaunch;
	/* A resize of a running cluster. PROVIDER_CREATE: the nodes are
	 * ranks added to it, launched together (one call per role where the
	 * provider has one) with what the cluster already has (key pair,
	 * groups, rules); PROVIDER_TERMINATE: only these nodes go, what the
	 * cluster shares stays. */
	int resize;
	/* PROVIDER_CREATE with resize: a word naming this grow, fixed for
	 * its nodes and recorded before the call ([0-9a-z], at most 16
	 * bytes), so that a retry or the next mount's resize job names the
	 * same launch and a later grow to the same ranks another one: cloud
	 * providers derive their idempotency token from it. */
	char launch[24];
	char err[PROVIDER_ERR_MAX]; /* why the call failed as a whole */
	/* Set by the lifecycle (or NULL): one sentence for the cluster's
	 * log while the call goes on (a failover's attempts). Called from
	 * the provider's thread, no lock held. */
	void (*say)(void *ctx, const char *sentence);
	void *say_ctx;
};

/* One command on one node. */
struct provider_run {
	const char *command;	 /* run with /bin/sh -c in the workdir */
	const char *stdout_path; /* created or truncated, mode 0600 */
	const char *stderr_path;
	/* The command's environment beyond what the provider gives every
	 * command: NAME=VALUE, NULL-terminated, the last of a name winning.
	 * A local command gets nothing else of the daemon's environment but
	 * PATH, HOME, USER, LOGNAME, LANG, LC_*, TZ and Open MPI's
	 * OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM); an SSH node's command gets its
	 * login's environment and nothing of the daemon's. CCLFS_HOSTFILE
	 * names the daemon's copy; a provider with a prepare op gives the
	 * path of the copy on the node instead. */
	const char *const *env;
	/* A word naming this command, unique across restarts of the daemon
	 * ([A-Za-z0-9._-], at most 100 bytes), or NULL: what the command
	 * starts is marked with it, for end_lost. */
	const char *tag;
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
	/* May be NULL. At each close of a descriptor of fh: the writes that
	 * were answered before they reached the node (write-behind) are
	 * there now; 0, or the error of one of them. */
	int (*flush)(struct provider *p, uint64_t fh);
	/* May be NULL. A descriptor of this machine for the open file fh,
	 * which reads and writes through it may use instead (no copy through
	 * the daemon's memory), or -1. */
	int (*fd)(struct provider *p, uint64_t fh);
	/* May be NULL (then fgetattr's link count tells). Whether the open
	 * file has other names (hard links): 1, 0, or -errno. */
	int (*shared)(struct provider *p, uint64_t fh);
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
	/* A second name `to` for the file `from` (a hard link). */
	int (*link)(struct provider *p, const struct provider_node *node,
		    const char *from, const char *to);
	/* A FIFO or UNIX socket (S_IFIFO, S_IFSOCK in mode); device nodes
	 * may be refused with -EPERM. */
	int (*mknod)(struct provider *p, const struct provider_node *node,
		     const char *path, mode_t mode, dev_t dev);
	/* (uid_t)-1 / (gid_t)-1: that one unchanged. */
	int (*chown)(struct provider *p, const struct provider_node *node,
		     const char *path, uid_t uid, gid_t gid);
	/* The file system that holds path. */
	int (*statfs)(struct provider *p, const struct provider_node *node,
		      const char *path, struct statvfs *st);
	/* A POSIX record lock of the open file fh on behalf of `owner` (the
	 * process, as the kernel names it): cmd F_GETLK (fl filled with the
	 * conflicting lock, or l_type F_UNLCK) or F_SETLK (F_UNLCK releases).
	 * Never waits: a lock held by someone else is -EAGAIN (the caller
	 * retries for F_SETLKW). */
	int (*lock)(struct provider *p, uint64_t fh, uint64_t owner, int cmd,
		    struct flock *fl);
	/* flock(2) on the open file fh: LOCK_SH, LOCK_EX or LOCK_UN, as if
	 * with LOCK_NB (-EWOULDBLOCK when held; the caller retries). */
	int (*flock)(struct provider *p, uint64_t fh, int op);
};

/* Who makes the files/ call this thread is in (set around each call by
 * the lifecycle, NULL otherwise): a provider whose files are on this
 * machine acts with these rights where it can, so that what another user
 * does through the mount (allow_other) is what the disk would let them
 * do, and the caller's umask (already applied by the kernel) is applied
 * once. */
struct provider_caller {
	uid_t uid;
	gid_t gid;
	/* May be NULL. The caller's supplementary groups into list (at most
	 * size): their count, or -1 when unknown. Asked only by a provider
	 * that takes the caller's rights: reading them costs a look in
	 * /proc, which most calls need not pay. */
	int (*groups)(gid_t *list, int size);
};
extern _Thread_local const struct provider_caller *provider_caller_now;

/* The local provider's: the working directory itself. */
extern const struct provider_file_ops local_file_ops;

struct provider_ops {
	unsigned caps; /* enum provider_caps */
	/* With PROVIDER_HAS_FILES. */
	const struct provider_file_ops *files;
	/* One per action: 0 when every node succeeded, else -errno with
	 * b->err (and each failed node's result). An action outside the
	 * provider's caps is never called (provider_act answers it). */
	int (*act[PROVIDER_ACTIONS])(struct provider *p,
				     struct provider_batch *b);
	/* Run a command and wait for it. Returns 0 when it ran (whatever its
	 * exit status), -EINTR when cancelled, or -errno when it could not
	 * be run. */
	int (*run)(struct provider *p, const struct provider_node *node,
		   struct provider_run *run, char *err, size_t errlen);
	/* May be NULL (nothing to do). The daemon was cut off (killed,
	 * crashed) while the command of run->tag ran on the node: end what
	 * it started, so that it writes no more to its output files. Called
	 * at mount before any thread starts: it must not wait on a network.
	 * 0, or -errno with err. */
	int (*end_lost)(struct provider *p, const struct provider_node *node,
			const char *tag, char *err, size_t errlen);
	/* The node is the provider's since a past deploy (called at mount
	 * for every node not terminated). */
	void (*attach)(struct provider *p, const struct provider_node *node);
	/* With PROVIDER_HAS_CONNECTIONS: how the provider reaches the node
	 * now ("reachable", "unreachable: why"), from memory; 0, or -1 when
	 * it has nothing to say yet. */
	int (*reach)(struct provider *p, const struct provider_node *node,
		     char *buf, size_t len);
	/* With PROVIDER_FINDS_STRAYS: report (one sentence each) what the
	 * provider holds, tagged by cclfs, for no cluster that `known`
	 * recognises by handle and token. 0, or -errno with err. */
	int (*strays)(struct provider *p,
		      int (*known)(void *ctx, const char *handle,
				   const char *token),
		      void (*report)(void *ctx, const char *sentence),
		      void *ctx, struct cancel *cancel, char *err,
		      size_t errlen);
	/* May be NULL (the provider has no catalog of its own to refresh).
	 * Ask the provider's API, with the user's credentials, what it
	 * offers today, everywhere the account can use, and hand every type
	 * and then every offer to sink (see provider_catalog_sink). Runs in
	 * a background job: every wait checks cancel (-ECANCELED within
	 * 250 ms). 0, or -errno with err (one sentence) when the refresh
	 * failed as a whole (the catalog then stays as it was). */
	int (*catalog_refresh)(struct provider *p,
			       const struct provider_catalog_sink *sink,
			       struct cancel *cancel, char *err, size_t errlen);
	void (*close)(struct provider *p);
};

struct remote;

struct provider {
	const struct provider_ops *ops;
	const struct provider_entry *entry;
	/* The nodes of a provider that reaches them over SSH (hosts, ec2),
	 * for the files/ ops they share (remote_file_ops); else NULL. */
	struct remote *remote;
	/* Set by the lifecycle: called (from any thread, no lock held)
	 * when what reach() says of a node changed. */
	void (*notify)(void *ctx, const char *handle, int rank);
	void *notify_ctx;
	/* How often the lifecycle asks (PROVIDER_DESCRIBE) about the running
	 * clusters whose nodes the cloud may take back (spot market), in ms;
	 * 0: never (nothing is taken back). Set by the provider at open. */
	int watch_ms;
};

/* Carry out one batch action through p's ops: an action outside its
 * caps that needs nothing (prepare without PROVIDER_NEEDS_PREPARE) is 0,
 * one it cannot do (stop without PROVIDER_CAN_STOP) -EOPNOTSUPP. Clears
 * the results first. */
int provider_act(struct provider *p, enum provider_action a,
		 struct provider_batch *b);
/* Whether p has every capability of caps. */
int provider_can(const struct provider *p, unsigned caps);
/* For providers that act on one node at a time: call fn for each node of
 * the batch (stopping early once b->cancel fires), filling the results;
 * 0, or the first failure's -errno with b->err naming the node. */
int provider_each(struct provider *p, struct provider_batch *b,
		  int (*fn)(struct provider *p, struct provider_batch *b,
			    size_t i));

/* One NAME=VALUE line of a node's options (the first with a value), else
 * def. */
void provider_option(const char *options, const char *name, const char *def,
		     char *out, size_t len);
/* config/market: "spot" or "on-demand" for every role, or ROLE=MARKET words
 * (manager=on-demand worker=spot), as the lifecycle checked it: whether each
 * role (0 the manager, 1 the workers) is on the spot market. */
void provider_market(const char *v, bool spot[2]);

/* One instance type a provider offers beyond the compiled-in catalog
 * (this machine for local, the machines of cclfs.conf for hosts). */
struct provider_type {
	char name[64];
	double price; /* USD per hour (cclfs.conf's, for chargeback); 0 */
	double vcpus, memory_bytes, accelerators; /* NAN: unknown */
	char accelerator[64];			  /* a type name, or "" */
	char architecture[16]; /* "x86_64", "arm64" (or "aarch64"), or "" */
	/* Where it is defined, for errors ("FILE: [hosts.NAME]"); "" for a
	 * detected type, whose unknown accelerator is then left out. */
	char origin[PATH_MAX + 64];
};

struct config;

/*
 * The registry: one entry per provider, each defined at the end of its
 * provider's main file, listed in registry.c. The lifecycle knows
 * providers only through these.
 */
struct provider_entry {
	const char *name;	   /* node_provider, catalog/NAME, the store */
	const char *platform_type; /* its type in the hierarchy */
	const char *section;	   /* its cclfs.conf section, or NULL */
	/* [SECTION.NAME] sections are items of it (the hosts' machines);
	 * without, such a section is an error of cclfs.conf. */
	bool has_items;
	/* The contract's config/ files the provider reads at deploy (one
	 * word each), NULL-terminated; handed to it in node options. */
	const char *const *config_keys;
	/* Open it with cclfs.conf and the state directory: NULL with err
	 * on error, NULL with err "" when cclfs.conf does not set it up. */
	struct provider *(*open)(const struct config *conf,
				 const char *statedir, char *err,
				 size_t errlen);
	/* Its own instance types (malloc'd array), or NULL when it has
	 * only the compiled-in catalog's. 0, or -1 with err. */
	int (*types)(const struct config *conf, struct provider_type **out,
		     size_t *n, char *err, size_t errlen);
	/* May be NULL. The region the user configured for this provider as
	 * its own tools find it (ec2: AWS_REGION, AWS_DEFAULT_REGION, the
	 * profile's region, [ec2] region; gcp: [gcp] region), written to buf:
	 * 1; 0 when none is configured (resolution then considers every
	 * region). Never fails, never touches a network. */
	int (*default_region)(const struct config *conf, char *buf, size_t len);
};

/* Every provider, NULL-terminated, and one by name (NULL: none). */
extern const struct provider_entry *const provider_registry[];
const struct provider_entry *provider_entry_find(const char *name);

#endif
