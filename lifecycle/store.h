/* The state store: every persistent byte of cclfs lives in one SQLite
 * database under the state directory. This file owns its schema, its
 * migrations and every statement that reads or writes it, its check, and
 * its last-good copy.
 *
 * Every function that returns an int returns 0 on success, or a negative
 * errno with err filled with one sentence naming the file: -ENOSPC when
 * its disk is full, -EROFS when it cannot be written (a read-only file
 * system, an immutable file), -EBUSY when another process holds it locked,
 * -ENOMEM, and -EIO for an I/O error or a damaged database. */
#ifndef CCLFS_LIFECYCLE_STORE_H
#define CCLFS_LIFECYCLE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

struct sqlite3;

/* Open (creating if needed) the database at path, mode 0600. Returns NULL
 * and fills err on failure. */
struct store *store_open(const char *path, char *err, size_t errlen);
/* store_open after SQLite's quick_check of the file, run before anything
 * is written to it. On failure *rc is -EUCLEAN when the file is damaged
 * (the check found errors, or it is not a database), -EROFS when it can
 * only be read, else another -errno. Unless `create`, a missing file
 * (-ENOENT) or a database without tables (-ENODATA: an empty file, say) is
 * refused too, and nothing is written. */
struct store *store_open_checked(const char *path, bool create, int *rc,
				 char *err, size_t errlen);
/* Stops the copy keeper (waiting for a copy in progress), then closes. */
void store_close(struct store *st);

/* A provider's catalog as a refresh found it: its types as lines of a
 * types.csv whose header line is `header` (the first field of each line
 * is the type's name), its offers, and the refresh's summary. */
struct store_offer {
	const char *type, *region, *zones;
	double price, spot; /* NAN: unknown */
};
struct store_catalog {
	const char *provider, *header, *summary;
	const char *const *types;
	const struct store_offer *offers;
	size_t ntypes, noffers;
	int64_t at_ns;
};
/* Replace the provider's stored catalog (one transaction). */
int store_catalog_put(struct store *st, const struct store_catalog *c,
		      char *err, size_t errlen);
/* Forget it (the compiled-in rows serve again). */
int store_catalog_drop(struct store *st, const char *provider, char *err,
		       size_t errlen);
/* Each stored provider's catalog, as the text of a types.csv (header
 * line first) and an offers.csv, to fn; a non-zero return of fn stops
 * (a negative one is returned). */
struct store_catalog_text {
	const char *provider, *summary;
	char *types, *offers;
	size_t types_len, offers_len;
	int64_t at_ns;
};
int store_catalog_load(struct store *st,
		       int (*fn)(void *ctx,
				 const struct store_catalog_text *text),
		       void *ctx, char *err, size_t errlen);

/* The errno of SQLite's result code rc (extended or not) on db. */
int store_errno(struct sqlite3 *db, int rc);

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

/* Each returns 0, or -errno with err filled. Every call is one
 * transaction, durable when it returns. */
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
	/* Billable time (creating, running) before since_ns. */
	int64_t billed_ns;
};

int store_cluster_put(struct store *st, const struct store_cluster *c,
		      char *err, size_t errlen);
int store_cluster_remove(struct store *st, const char *handle, char *err,
			 size_t errlen);
int store_node_put(struct store *st, const struct store_node *n, char *err,
		   size_t errlen);
/* A node a shrink removed. */
int store_node_remove(struct store *st, const char *handle, int rank, char *err,
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

/* Whether a cluster of that handle is stored: 1, 0, or -errno. */
int store_cluster_known(struct store *st, const char *handle);

/* The log lines of `subject`, oldest first; fn returns non-zero to stop. */
int store_log_lines(struct store *st, const char *subject,
		    int (*fn)(void *ctx, int64_t at_ns, const char *line),
		    void *ctx, char *err, size_t errlen);

/* Several calls as one transaction (nesting is not supported). */
int store_begin(struct store *st, char *err, size_t errlen);
int store_commit(struct store *st, char *err, size_t errlen);
void store_rollback(struct store *st);

/*
 * The last-good copy. store_copy writes a copy of the database at src (a
 * live store: read through a connection of its own, one consistent
 * snapshot, with SQLite's online backup) to dest, mode 0600: into
 * dest.tmp, which must pass quick_check, is synced and then renamed over
 * dest, so dest is always a whole, checked copy. The copy stands alone (no
 * WAL beside it) and records when it was taken.
 */
int store_copy(const char *src, const char *dest, char *err, size_t errlen);
/* Check the copy at path (quick_check) and tell when it was taken (ns
 * since the epoch, 0 unknown): 0, -ENOENT when there is none, -EUCLEAN
 * when it is damaged, else -errno. */
int store_copy_info(const char *path, int64_t *copied_ns, char *err,
		    size_t errlen);
/*
 * Keep dest a copy of st: once a change is committed and the last copy is
 * at least interval_s seconds old, a thread of the store's own takes a new
 * one with store_copy. It reads through its own connection (WAL: it never
 * blocks a writer), so no request waits for it. A copy that fails is
 * reported through report (from that thread) and tried again an interval
 * later. Counts the copy just taken at mount as the last one.
 */
int store_keep_copy(struct store *st, const char *dest, int interval_s,
		    void (*report)(void *ctx, const char *line), void *ctx);

#endif
