/* The state store: every persistent byte of cclfs lives in one SQLite
 * database under the state directory. This file owns its schema, its
 * migrations and every statement that reads or writes it. */
#include "lifecycle/store.h"

#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_SCHEMA_VERSION 5

enum store_stmt {
	STMT_CONTRACT_ADD,
	STMT_CONTRACT_REMOVE,
	STMT_VALUE_PUT,
	STMT_CONTRACT_ERROR,
	STMT_LOG,
	STMT_CLUSTER_PUT,
	STMT_CLUSTER_REMOVE,
	STMT_NODE_PUT,
	STMT_COUNT,
};

static const char *const store_sql[STMT_COUNT] = {
	[STMT_CONTRACT_ADD] = "INSERT INTO contracts(name, created_ns, error, "
			      "error_ns) VALUES(?1, ?2, '', ?2)",
	[STMT_CONTRACT_REMOVE] = "DELETE FROM contracts WHERE name = ?1",
	[STMT_VALUE_PUT] = "INSERT INTO contract_values(contract, file, value, "
			   "changed_ns) VALUES(?1, ?2, ?3, ?4) ON CONFLICT"
			   "(contract, file) DO UPDATE SET value = excluded."
			   "value, changed_ns = excluded.changed_ns",
	[STMT_CONTRACT_ERROR] = "UPDATE contracts SET error = ?2, error_ns = "
				"?3 WHERE name = ?1",
	[STMT_LOG] = "INSERT INTO log(at_ns, subject, line) VALUES(?1, ?2, ?3)",
	/* An upsert, not INSERT OR REPLACE: a replace deletes the row, and
	 * the delete would cascade to the cluster's nodes. */
	[STMT_CLUSTER_PUT] =
		"INSERT INTO clusters(handle, contract, cluster_type, "
		"resolution, state, error, node_count, process_count, "
		"created_ns, state_ns, error_ns, price, ssh_user, ssh_keyfile, "
		"token, options, mpi_exit_status, mpi_ns) "
		"VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
		"?13, ?14, ?15, ?16, ?17, ?18) ON CONFLICT(handle) DO "
		"UPDATE SET contract = excluded.contract, cluster_type = "
		"excluded.cluster_type, resolution = excluded.resolution, "
		"state = excluded.state, error = excluded.error, node_count = "
		"excluded.node_count, process_count = excluded.process_count, "
		"created_ns = excluded.created_ns, state_ns = "
		"excluded.state_ns, error_ns = excluded.error_ns, price = "
		"excluded.price, ssh_user = excluded.ssh_user, ssh_keyfile = "
		"excluded.ssh_keyfile, token = excluded.token, options = "
		"excluded.options, mpi_exit_status = excluded.mpi_exit_status, "
		"mpi_ns = excluded.mpi_ns",
	[STMT_CLUSTER_REMOVE] = "DELETE FROM clusters WHERE handle = ?1",
	[STMT_NODE_PUT] =
		"INSERT INTO nodes(handle, rank, provider, instance_type, "
		"instance_id, address, workdir, state, since_ns, exit_status, "
		"exec_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
		"ON CONFLICT(handle, rank) DO UPDATE SET provider = "
		"excluded.provider, instance_type = excluded.instance_type, "
		"instance_id = excluded.instance_id, address = "
		"excluded.address, workdir = excluded.workdir, state = "
		"excluded.state, since_ns = excluded.since_ns, exit_status = "
		"excluded.exit_status, exec_ns = excluded.exec_ns",
};

static const char store_schema[] =
	"CREATE TABLE IF NOT EXISTS meta("
	"  key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS contracts("
	"  name TEXT PRIMARY KEY,"
	"  created_ns INTEGER NOT NULL,"
	"  error TEXT NOT NULL DEFAULT '',"
	"  error_ns INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS contract_values("
	"  contract TEXT NOT NULL REFERENCES contracts(name) ON DELETE CASCADE,"
	"  file TEXT NOT NULL,"
	"  value TEXT NOT NULL,"
	"  changed_ns INTEGER NOT NULL,"
	"  PRIMARY KEY(contract, file)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS log("
	"  id INTEGER PRIMARY KEY,"
	"  at_ns INTEGER NOT NULL,"
	"  subject TEXT NOT NULL,"
	"  line TEXT NOT NULL);"
	"CREATE INDEX IF NOT EXISTS log_subject ON log(subject, id);"
	/* Schema 2: clusters and their nodes. */
	"CREATE TABLE IF NOT EXISTS clusters("
	"  handle TEXT PRIMARY KEY,"
	"  contract TEXT NOT NULL,"
	"  cluster_type TEXT NOT NULL,"
	"  resolution TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  error TEXT NOT NULL,"
	"  node_count INTEGER NOT NULL,"
	"  process_count INTEGER NOT NULL,"
	"  created_ns INTEGER NOT NULL,"
	"  state_ns INTEGER NOT NULL,"
	"  error_ns INTEGER NOT NULL,"
	"  price REAL,"
	/* Schema 3: how to log in to its nodes (config/user, keyfile). */
	"  ssh_user TEXT NOT NULL DEFAULT '',"
	"  ssh_keyfile TEXT NOT NULL DEFAULT '',"
	/* Schema 4: the cluster's token and provider options. */
	"  token TEXT NOT NULL DEFAULT '',"
	"  options TEXT NOT NULL DEFAULT '',"
	/* Schema 5: the last mpiexec's exit status and when it ended. */
	"  mpi_exit_status INTEGER NOT NULL DEFAULT -1,"
	"  mpi_ns INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS nodes("
	"  handle TEXT NOT NULL REFERENCES clusters(handle) ON DELETE CASCADE,"
	"  rank INTEGER NOT NULL,"
	"  provider TEXT NOT NULL,"
	"  instance_type TEXT NOT NULL,"
	"  instance_id TEXT NOT NULL,"
	"  address TEXT NOT NULL,"
	"  workdir TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  since_ns INTEGER NOT NULL,"
	"  exit_status INTEGER NOT NULL,"
	"  exec_ns INTEGER NOT NULL,"
	"  PRIMARY KEY(handle, rank)) WITHOUT ROWID;";

struct store {
	sqlite3 *db;
	sqlite3_stmt *stmt[STMT_COUNT];
};

static int store_fail(struct store *st, const char *what, char *err,
		      size_t errlen)
{
	snprintf(err, errlen, "state database: %s: %s", what,
		 st->db ? sqlite3_errmsg(st->db) : "out of memory");
	return -1;
}

static int store_exec(struct store *st, const char *sql, char *err,
		      size_t errlen)
{
	if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return store_fail(st, sql, err, errlen);
	return 0;
}

static int store_migrate(struct store *st, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int version = 0;

	if (store_exec(st, store_schema, err, errlen))
		return -1;
	if (sqlite3_prepare_v2(st->db,
			       "SELECT value FROM meta WHERE key = 'schema'",
			       -1, &q, NULL) != SQLITE_OK)
		return store_fail(st, "reading the schema version", err,
				  errlen);
	if (sqlite3_step(q) == SQLITE_ROW)
		version = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	if (version > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "state database: schema version %d is newer than "
			 "this cclfs understands (%d); use a newer cclfs",
			 version, STORE_SCHEMA_VERSION);
		return -1;
	}
	/* A schema 2 database has its clusters table without the login. */
	if (version == 2 &&
	    store_exec(st,
		       "ALTER TABLE clusters ADD COLUMN ssh_user TEXT NOT NULL "
		       "DEFAULT '';"
		       "ALTER TABLE clusters ADD COLUMN ssh_keyfile TEXT NOT "
		       "NULL DEFAULT '';",
		       err, errlen))
		return -1;
	/* Schema 2 and 3 lack the token and the options. */
	if ((version == 2 || version == 3) &&
	    store_exec(st,
		       "ALTER TABLE clusters ADD COLUMN token TEXT NOT NULL "
		       "DEFAULT '';"
		       "ALTER TABLE clusters ADD COLUMN options TEXT NOT NULL "
		       "DEFAULT '';",
		       err, errlen))
		return -1;
	/* Schema 2 to 4 lack the last mpiexec's results. */
	if (version >= 2 && version <= 4 &&
	    store_exec(
		    st,
		    "ALTER TABLE clusters ADD COLUMN mpi_exit_status INTEGER "
		    "NOT NULL DEFAULT -1;"
		    "ALTER TABLE clusters ADD COLUMN mpi_ns INTEGER NOT NULL "
		    "DEFAULT 0;",
		    err, errlen))
		return -1;
	if (version < STORE_SCHEMA_VERSION)
		return store_exec(st,
				  "INSERT OR REPLACE INTO meta(key, value) "
				  "VALUES('schema', '5')",
				  err, errlen);
	return 0;
}

struct store *store_open(const char *path, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));
	int fd;

	if (!st) {
		snprintf(err, errlen, "state database: out of memory");
		return NULL;
	}
	/* Create the file ourselves so that it is 0600 from the start. */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	if (sqlite3_open_v2(path, &st->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				    SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		store_fail(st, path, err, errlen);
		store_close(st);
		return NULL;
	}
	sqlite3_busy_timeout(st->db, 5000);
	/* WAL with FULL sync: a committed change survives a crash of the
	 * daemon and of the machine. */
	if (store_exec(st, "PRAGMA journal_mode = WAL", err, errlen) ||
	    store_exec(st, "PRAGMA synchronous = FULL", err, errlen) ||
	    store_exec(st, "PRAGMA foreign_keys = ON", err, errlen) ||
	    store_migrate(st, err, errlen)) {
		store_close(st);
		return NULL;
	}
	for (int i = 0; i < STMT_COUNT; i++) {
		if (sqlite3_prepare_v3(st->db, store_sql[i], -1,
				       SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
				       NULL) != SQLITE_OK) {
			store_fail(st, store_sql[i], err, errlen);
			store_close(st);
			return NULL;
		}
	}
	return st;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	for (int i = 0; i < STMT_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db);
	free(st);
}

/* Run a prepared statement whose parameters are bound; reset it after. */
static int store_step(struct store *st, enum store_stmt which, char *err,
		      size_t errlen)
{
	sqlite3_stmt *q = st->stmt[which];
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_DONE)
		return store_fail(st, "write", err, errlen);
	return 0;
}

static void store_bind_text(sqlite3_stmt *q, int i, const char *s)
{
	sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC);
}

int store_contract_add(struct store *st, const char *name, int64_t created_ns,
		       char *err, size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_CONTRACT_ADD];

	store_bind_text(q, 1, name);
	sqlite3_bind_int64(q, 2, created_ns);
	return store_step(st, STMT_CONTRACT_ADD, err, errlen);
}

int store_contract_remove(struct store *st, const char *name, char *err,
			  size_t errlen)
{
	store_bind_text(st->stmt[STMT_CONTRACT_REMOVE], 1, name);
	return store_step(st, STMT_CONTRACT_REMOVE, err, errlen);
}

int store_value_put(struct store *st, const char *contract, const char *file,
		    const char *value, int64_t changed_ns, char *err,
		    size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_VALUE_PUT];

	store_bind_text(q, 1, contract);
	store_bind_text(q, 2, file);
	store_bind_text(q, 3, value);
	sqlite3_bind_int64(q, 4, changed_ns);
	return store_step(st, STMT_VALUE_PUT, err, errlen);
}

int store_contract_error(struct store *st, const char *contract,
			 const char *error, int64_t changed_ns, char *err,
			 size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_CONTRACT_ERROR];

	store_bind_text(q, 1, contract);
	store_bind_text(q, 2, error);
	sqlite3_bind_int64(q, 3, changed_ns);
	return store_step(st, STMT_CONTRACT_ERROR, err, errlen);
}

int store_log(struct store *st, const char *subject, int64_t at_ns,
	      const char *line, char *err, size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_LOG];

	sqlite3_bind_int64(q, 1, at_ns);
	store_bind_text(q, 2, subject);
	store_bind_text(q, 3, line);
	return store_step(st, STMT_LOG, err, errlen);
}

int store_begin(struct store *st, char *err, size_t errlen)
{
	return store_exec(st, "BEGIN IMMEDIATE", err, errlen);
}

int store_commit(struct store *st, char *err, size_t errlen)
{
	return store_exec(st, "COMMIT", err, errlen);
}

void store_rollback(struct store *st)
{
	sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

static const char *store_column_text(sqlite3_stmt *q, int i)
{
	const unsigned char *s = sqlite3_column_text(q, i);

	return s ? (const char *)s : "";
}

int store_load(struct store *st, const struct store_loader *loader, char *err,
	       size_t errlen)
{
	sqlite3_stmt *c = NULL, *v = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT name, created_ns, error, error_ns FROM "
			       "contracts ORDER BY name",
			       -1, &c, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(st->db,
			       "SELECT file, value, changed_ns FROM "
			       "contract_values WHERE contract = ?1",
			       -1, &v, NULL) != SQLITE_OK) {
		store_fail(st, "reading contracts", err, errlen);
		goto out;
	}
	while (sqlite3_step(c) == SQLITE_ROW) {
		const char *name = store_column_text(c, 0);

		if (loader->contract(loader->ctx, name,
				     sqlite3_column_int64(c, 1),
				     store_column_text(c, 2),
				     sqlite3_column_int64(c, 3))) {
			snprintf(err, errlen,
				 "state database: contract %s "
				 "could not be loaded",
				 name);
			goto out;
		}
		store_bind_text(v, 1, name);
		while (sqlite3_step(v) == SQLITE_ROW) {
			if (loader->value(loader->ctx, name,
					  store_column_text(v, 0),
					  store_column_text(v, 1),
					  sqlite3_column_int64(v, 2))) {
				snprintf(err, errlen,
					 "state database: value %s of "
					 "contract %s could not be loaded",
					 store_column_text(v, 0), name);
				goto out;
			}
		}
		sqlite3_reset(v);
	}
	rc = 0;
out:
	sqlite3_finalize(c);
	sqlite3_finalize(v);
	return rc;
}

int store_cluster_put(struct store *st, const struct store_cluster *c,
		      char *err, size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_CLUSTER_PUT];

	store_bind_text(q, 1, c->handle);
	store_bind_text(q, 2, c->contract);
	store_bind_text(q, 3, c->cluster_type);
	store_bind_text(q, 4, c->resolution);
	store_bind_text(q, 5, c->state);
	store_bind_text(q, 6, c->error);
	sqlite3_bind_int(q, 7, c->node_count);
	sqlite3_bind_int(q, 8, c->process_count);
	sqlite3_bind_int64(q, 9, c->created_ns);
	sqlite3_bind_int64(q, 10, c->state_ns);
	sqlite3_bind_int64(q, 11, c->error_ns);
	if (isnan(c->price))
		sqlite3_bind_null(q, 12);
	else
		sqlite3_bind_double(q, 12, c->price);
	store_bind_text(q, 13, c->ssh_user ? c->ssh_user : "");
	store_bind_text(q, 14, c->ssh_keyfile ? c->ssh_keyfile : "");
	store_bind_text(q, 15, c->token ? c->token : "");
	store_bind_text(q, 16, c->options ? c->options : "");
	sqlite3_bind_int(q, 17, c->mpi_exit_status);
	sqlite3_bind_int64(q, 18, c->mpi_ns);
	return store_step(st, STMT_CLUSTER_PUT, err, errlen);
}

int store_cluster_remove(struct store *st, const char *handle, char *err,
			 size_t errlen)
{
	char subject[96];
	sqlite3_stmt *q;
	int rc;

	/* The cluster, its nodes (cascade) and its log, at once: a cluster
	 * made later under the same name starts clean. */
	if (store_begin(st, err, errlen))
		return -1;
	store_bind_text(st->stmt[STMT_CLUSTER_REMOVE], 1, handle);
	rc = store_step(st, STMT_CLUSTER_REMOVE, err, errlen);
	snprintf(subject, sizeof(subject), "clusters/%s", handle);
	if (rc == 0 &&
	    sqlite3_prepare_v2(st->db, "DELETE FROM log WHERE subject = ?1", -1,
			       &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, subject, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = store_fail(st, "removing the log", err, errlen);
		sqlite3_finalize(q);
	}
	if (rc == 0)
		rc = store_commit(st, err, errlen);
	if (rc)
		store_rollback(st);
	return rc;
}

int store_node_put(struct store *st, const struct store_node *n, char *err,
		   size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_NODE_PUT];

	store_bind_text(q, 1, n->handle);
	sqlite3_bind_int(q, 2, n->rank);
	store_bind_text(q, 3, n->provider);
	store_bind_text(q, 4, n->instance_type);
	store_bind_text(q, 5, n->instance_id);
	store_bind_text(q, 6, n->address);
	store_bind_text(q, 7, n->workdir);
	store_bind_text(q, 8, n->state);
	sqlite3_bind_int64(q, 9, n->since_ns);
	sqlite3_bind_int(q, 10, n->exit_status);
	sqlite3_bind_int64(q, 11, n->exec_ns);
	return store_step(st, STMT_NODE_PUT, err, errlen);
}

int store_load_clusters(struct store *st,
			const struct store_cluster_loader *loader, char *err,
			size_t errlen)
{
	sqlite3_stmt *c = NULL, *n = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT handle, contract, cluster_type, "
			       "resolution, state, error, node_count, "
			       "process_count, created_ns, state_ns, error_ns, "
			       "price, ssh_user, ssh_keyfile, token, options, "
			       "mpi_exit_status, mpi_ns FROM clusters "
			       "ORDER BY handle",
			       -1, &c, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    st->db,
		    "SELECT rank, provider, instance_type, "
		    "instance_id, address, workdir, state, since_ns, "
		    "exit_status, exec_ns FROM nodes WHERE handle = "
		    "?1 ORDER BY rank",
		    -1, &n, NULL) != SQLITE_OK) {
		store_fail(st, "reading clusters", err, errlen);
		goto out;
	}
	while (sqlite3_step(c) == SQLITE_ROW) {
		struct store_cluster cl = {
			.handle = store_column_text(c, 0),
			.contract = store_column_text(c, 1),
			.cluster_type = store_column_text(c, 2),
			.resolution = store_column_text(c, 3),
			.state = store_column_text(c, 4),
			.error = store_column_text(c, 5),
			.node_count = sqlite3_column_int(c, 6),
			.process_count = sqlite3_column_int(c, 7),
			.created_ns = sqlite3_column_int64(c, 8),
			.state_ns = sqlite3_column_int64(c, 9),
			.error_ns = sqlite3_column_int64(c, 10),
			.price = sqlite3_column_type(c, 11) == SQLITE_NULL
					 ? NAN
					 : sqlite3_column_double(c, 11),
			.ssh_user = store_column_text(c, 12),
			.ssh_keyfile = store_column_text(c, 13),
			.token = store_column_text(c, 14),
			.options = store_column_text(c, 15),
			.mpi_exit_status = sqlite3_column_int(c, 16),
			.mpi_ns = sqlite3_column_int64(c, 17),
		};

		if (loader->cluster(loader->ctx, &cl)) {
			snprintf(err, errlen,
				 "state database: cluster %s could not be "
				 "loaded",
				 cl.handle);
			goto out;
		}
		store_bind_text(n, 1, cl.handle);
		while (sqlite3_step(n) == SQLITE_ROW) {
			struct store_node nd = {
				.handle = cl.handle,
				.rank = sqlite3_column_int(n, 0),
				.provider = store_column_text(n, 1),
				.instance_type = store_column_text(n, 2),
				.instance_id = store_column_text(n, 3),
				.address = store_column_text(n, 4),
				.workdir = store_column_text(n, 5),
				.state = store_column_text(n, 6),
				.since_ns = sqlite3_column_int64(n, 7),
				.exit_status = sqlite3_column_int(n, 8),
				.exec_ns = sqlite3_column_int64(n, 9),
			};

			if (loader->node(loader->ctx, &nd)) {
				snprintf(err, errlen,
					 "state database: node %d of cluster "
					 "%s could not be loaded",
					 nd.rank, cl.handle);
				goto out;
			}
		}
		sqlite3_reset(n);
	}
	rc = 0;
out:
	sqlite3_finalize(c);
	sqlite3_finalize(n);
	return rc;
}

int store_log_lines(struct store *st, const char *subject,
		    int (*fn)(void *ctx, int64_t at_ns, const char *line),
		    void *ctx, char *err, size_t errlen)
{
	sqlite3_stmt *q;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT at_ns, line FROM log WHERE subject = "
			       "?1 ORDER BY id",
			       -1, &q, NULL) != SQLITE_OK)
		return store_fail(st, "reading the log", err, errlen);
	store_bind_text(q, 1, subject);
	while (sqlite3_step(q) == SQLITE_ROW)
		if (fn(ctx, sqlite3_column_int64(q, 0),
		       store_column_text(q, 1)))
			break;
	sqlite3_finalize(q);
	return 0;
}
