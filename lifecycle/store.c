/* The state store: every persistent byte of cclfs lives in one SQLite
 * database under the state directory. This file owns its schema, its
 * migrations and every statement that reads or writes it. */
#include "lifecycle/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_SCHEMA_VERSION 1

enum store_stmt {
	STMT_CONTRACT_ADD,
	STMT_CONTRACT_REMOVE,
	STMT_VALUE_PUT,
	STMT_CONTRACT_ERROR,
	STMT_LOG,
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
	"CREATE INDEX IF NOT EXISTS log_subject ON log(subject, id);";

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
	if (version < STORE_SCHEMA_VERSION)
		return store_exec(st,
				  "INSERT OR REPLACE INTO meta(key, value) "
				  "VALUES('schema', '1')",
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
