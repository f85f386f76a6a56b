/* The state store: every persistent byte of cclfs lives in one SQLite
 * database under the state directory. This file owns its schema, its
 * migrations and every statement that reads or writes it. */
#ifndef CCLFS_LIFECYCLE_STORE_H
#define CCLFS_LIFECYCLE_STORE_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* Open (creating if needed) the database at path, mode 0600. Returns NULL
 * and fills err on failure. */
struct store *store_open(const char *path, char *err, size_t errlen);
void store_close(struct store *st);

/* Callbacks of store_load: one call per contract, then one per stored
 * value of that contract. A non-zero return stops the load. */
struct store_loader {
	void *ctx;
	int (*contract)(void *ctx, const char *name, int64_t created_ns,
			const char *error, int64_t error_ns);
	int (*value)(void *ctx, const char *contract, const char *file,
		     const char *value, int64_t changed_ns);
};
int store_load(struct store *st, const struct store_loader *loader, char *err,
	       size_t errlen);

/* Each returns 0, or -1 with err filled. Every call is one transaction,
 * durable when it returns. */
int store_contract_add(struct store *st, const char *name, int64_t created_ns,
		       char *err, size_t errlen);
int store_contract_remove(struct store *st, const char *name, char *err,
			  size_t errlen);
int store_value_put(struct store *st, const char *contract, const char *file,
		    const char *value, int64_t changed_ns, char *err,
		    size_t errlen);
int store_contract_error(struct store *st, const char *contract,
			 const char *error, int64_t changed_ns, char *err,
			 size_t errlen);
/* Append one line to the log of `subject` (e.g. "contracts/c1"). */
int store_log(struct store *st, const char *subject, int64_t at_ns,
	      const char *line, char *err, size_t errlen);

/* A cluster and its nodes, as stored (strings are not copied). */
struct store_cluster {
	const char *handle;
	const char *contract;
	const char *cluster_type;
	const char *resolution; /* the contract's resolution at deploy */
	const char *state;
	const char *error;
	int node_count;
	int process_count;
	int64_t created_ns;
	int64_t state_ns;
	int64_t error_ns;
	double price; /* USD per hour for the whole cluster; NAN unknown */
	const char *ssh_user;	 /* config/user at deploy ("" default) */
	const char *ssh_keyfile; /* config/keyfile or sshflags -i */
	const char *token;	 /* random, fixed at deploy */
	const char *options;	 /* provider options, NAME=VALUE lines */
	int mpi_exit_status;	 /* of the last mpiexec; -1: none yet */
	int64_t mpi_ns;		 /* when it ended */
};

struct store_node {
	const char *handle;
	int rank; /* -1: the manager */
	const char *provider;
	const char *instance_type;
	const char *instance_id;
	const char *address;
	const char *workdir;
	const char *state;
	int64_t since_ns;
	int exit_status; /* of the last exec; -1: none yet */
	int64_t exec_ns; /* when it ended */
};

int store_cluster_put(struct store *st, const struct store_cluster *c,
		      char *err, size_t errlen);
int store_cluster_remove(struct store *st, const char *handle, char *err,
			 size_t errlen);
int store_node_put(struct store *st, const struct store_node *n, char *err,
		   size_t errlen);

/* Every cluster, then its nodes in rank order (manager first). */
struct store_cluster_loader {
	void *ctx;
	int (*cluster)(void *ctx, const struct store_cluster *c);
	int (*node)(void *ctx, const struct store_node *n);
};
int store_load_clusters(struct store *st,
			const struct store_cluster_loader *loader, char *err,
			size_t errlen);

/* The log lines of `subject`, oldest first; fn returns non-zero to stop. */
int store_log_lines(struct store *st, const char *subject,
		    int (*fn)(void *ctx, int64_t at_ns, const char *line),
		    void *ctx, char *err, size_t errlen);

/* Several calls as one transaction (nesting is not supported). */
int store_begin(struct store *st, char *err, size_t errlen);
int store_commit(struct store *st, char *err, size_t errlen);
void store_rollback(struct store *st);

#endif
