/* The state store: every persistent byte of cclfs lives in one SQLite
 * database under the state directory. This file owns its schema, its
 * migrations and every statement that reads or writes it, its check, and
 * its last-good copy. */
#include "lifecycle/store.h"

#include "lifecycle/text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define STORE_SCHEMA_VERSION 7

/* A disk with less free space than this, after an I/O error, is full. */
#define STORE_FULL_BYTES 65536u

enum store_stmt {
	STMT_CONTRACT_ADD,
	STMT_CONTRACT_REMOVE,
	STMT_VALUE_PUT,
	STMT_CONTRACT_ERROR,
	STMT_LOG,
	STMT_CLUSTER_PUT,
	STMT_CLUSTER_REMOVE,
	STMT_NODE_PUT,
	STMT_NODE_REMOVE,
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
	[STMT_NODE_REMOVE] =
		"DELETE FROM nodes WHERE handle = ?1 AND rank = ?2",
	[STMT_NODE_PUT] =
		"INSERT INTO nodes(handle, rank, provider, instance_type, "
		"instance_id, address, workdir, state, since_ns, exit_status, "
		"exec_ns, billed_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
		"?9, "
		"?10, ?11, ?12) "
		"ON CONFLICT(handle, rank) DO UPDATE SET provider = "
		"excluded.provider, instance_type = excluded.instance_type, "
		"instance_id = excluded.instance_id, address = "
		"excluded.address, workdir = excluded.workdir, state = "
		"excluded.state, since_ns = excluded.since_ns, exit_status = "
		"excluded.exit_status, exec_ns = excluded.exec_ns, billed_ns = "
		"excluded.billed_ns",
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
	/* Schema 7: the billable time before since_ns. */
	"  billed_ns INTEGER NOT NULL DEFAULT 0,"
	"  PRIMARY KEY(handle, rank)) WITHOUT ROWID;"
	/* Schema 6: a provider's catalog as its last refresh found it (in
	 * place of its compiled-in rows): types as lines of a types.csv
	 * under `header`, offers as columns. */
	"CREATE TABLE IF NOT EXISTS catalog_refresh("
	"  provider TEXT PRIMARY KEY,"
	"  header TEXT NOT NULL,"
	"  summary TEXT NOT NULL,"
	"  at_ns INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS catalog_types("
	"  provider TEXT NOT NULL,"
	"  name TEXT NOT NULL,"
	"  line TEXT NOT NULL,"
	"  PRIMARY KEY(provider, name)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS catalog_offers("
	"  provider TEXT NOT NULL,"
	"  type TEXT NOT NULL,"
	"  region TEXT NOT NULL,"
	"  price REAL,"
	"  spot REAL,"
	"  zones TEXT NOT NULL,"
	"  PRIMARY KEY(provider, type, region)) WITHOUT ROWID;";

/* The thread that keeps the last-good copy up to date (store_keep_copy). */
struct store_keeper {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on CLOCK_MONOTONIC */
	pthread_t thread;
	bool started, stop;
	bool pending;	   /* a change not in the copy yet */
	int64_t copied_ns; /* monotonic time of the last copy */
	int64_t interval_ns;
	char dest[PATH_MAX];
	void (*report)(void *ctx, const char *line);
	void *report_ctx;
};

struct store {
	sqlite3 *db;
	sqlite3_stmt *stmt[STMT_COUNT];
	char path[PATH_MAX];
	bool keeping; /* keep is set up */
	struct store_keeper keep;
};

/* Whether access(path, W_OK) fails because path cannot be written. */
static bool store_unwritable(const char *path)
{
	return access(path, W_OK) &&
	       (errno == EROFS || errno == EPERM || errno == EACCES);
}

/*
 * The errno of an I/O error that SQLite gives without the system's (it
 * often has none by then): a database or WAL that cannot be written, or a
 * disk with (next to) no space left, found by looking.
 */
static int store_probe_errno(sqlite3 *db)
{
	const char *path = db ? sqlite3_db_filename(db, "main") : NULL;
	char wal[PATH_MAX + 8], dir[PATH_MAX];
	const char *slash;
	struct statvfs sv;

	if (!path || !*path)
		return -EIO;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (store_unwritable(path) || store_unwritable(wal))
		return -EROFS;
	slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1,
		 slash ? path : ".");
	if (statvfs(dir, &sv) == 0 &&
	    (uint64_t)(geteuid() == 0 ? sv.f_bfree : sv.f_bavail) *
			    sv.f_frsize <
		    STORE_FULL_BYTES)
		return -ENOSPC;
	return -EIO;
}

int store_errno(sqlite3 *db, int rc)
{
	int sys = db ? sqlite3_system_errno(db) : 0;

	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		/* A full disk is sometimes reported as an I/O error (a journal
		 * or WAL write, a sync); so are an immutable file and a file
		 * system remounted read-only. */
		if (sys == ENOSPC || sys == EDQUOT)
			return -ENOSPC;
		if (sys == EROFS || sys == EPERM || sys == EACCES)
			return -EROFS;
		return store_probe_errno(db);
	default:
		return -EIO;
	}
}

/* What a failure with errno e means for the user, and what to do. */
static const char *store_hint(int e)
{
	switch (e) {
	case -ENOSPC:
		return "no space is left on its disk; free some there and try "
		       "again";
	case -EROFS:
		return "it cannot be written (a read-only file system, or an "
		       "immutable file); make it writable and try again";
	case -EBUSY:
		return "another process holds it locked";
	case -ENOMEM:
		return "out of memory";
	default:
		return NULL;
	}
}

/* Fill err with why `what` failed on db with SQLite result rc, and return
 * its errno. */
static int store_fail_db(sqlite3 *db, const char *path, int rc,
			 const char *what, char *err, size_t errlen)
{
	int e = store_errno(db, rc);
	const char *hint = store_hint(e ? e : -EIO);
	char msg[512];

	text_escape(db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), msg,
		    sizeof(msg));
	if (hint)
		snprintf(err, errlen, "state database %s: %s: %s (%s)", path,
			 what, hint, msg);
	else
		snprintf(err, errlen, "state database %s: %s: %s", path, what,
			 msg);
	return e ? e : -EIO;
}

static int store_fail(struct store *st, int rc, const char *what, char *err,
		      size_t errlen)
{
	return store_fail_db(st->db, st->path, rc, what, err, errlen);
}

static int store_exec(struct store *st, const char *sql, char *err,
		      size_t errlen)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		return store_fail(st, rc, "the change was not stored", err,
				  errlen);
	return 0;
}

static int store_migrate(struct store *st, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int version = 0, rc;

	rc = store_exec(st, store_schema, err, errlen);
	if (rc)
		return rc;
	rc = sqlite3_prepare_v2(st->db,
				"SELECT value FROM meta WHERE key = 'schema'",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "reading the schema version failed",
				  err, errlen);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		version = sqlite3_column_int(q, 0);
	else if (rc != SQLITE_DONE)
		rc = store_fail(st, rc, "reading the schema version failed",
				err, errlen);
	sqlite3_finalize(q);
	if (rc < 0)
		return rc;
	if (version > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "state database %s: schema version %d is newer than "
			 "this cclfs understands (%d); use a newer cclfs",
			 st->path, version, STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	/* A schema 2 database has its clusters table without the login. */
	if (version == 2 &&
	    (rc = store_exec(
		     st,
		     "ALTER TABLE clusters ADD COLUMN ssh_user TEXT NOT "
		     "NULL DEFAULT '';"
		     "ALTER TABLE clusters ADD COLUMN ssh_keyfile TEXT "
		     "NOT NULL DEFAULT '';",
		     err, errlen)))
		return rc;
	/* Schema 2 and 3 lack the token and the options. */
	if ((version == 2 || version == 3) &&
	    (rc = store_exec(st,
			     "ALTER TABLE clusters ADD COLUMN token TEXT NOT "
			     "NULL DEFAULT '';"
			     "ALTER TABLE clusters ADD COLUMN options TEXT NOT "
			     "NULL DEFAULT '';",
			     err, errlen)))
		return rc;
	/* Schema 2 to 4 lack the last mpiexec's results. */
	if (version >= 2 && version <= 4 &&
	    (rc = store_exec(st,
			     "ALTER TABLE clusters ADD COLUMN mpi_exit_status "
			     "INTEGER NOT NULL DEFAULT -1;"
			     "ALTER TABLE clusters ADD COLUMN mpi_ns INTEGER "
			     "NOT NULL DEFAULT 0;",
			     err, errlen)))
		return rc;
	/* Schema 6 only adds tables (made above by CREATE IF NOT EXISTS);
	 * 2 to 6 lack a node's billable time (counted from now on: what a
	 * node ran before is not known per state). */
	if (version >= 2 && version <= 6 &&
	    (rc = store_exec(st,
			     "ALTER TABLE nodes ADD COLUMN billed_ns INTEGER "
			     "NOT NULL DEFAULT 0;",
			     err, errlen)))
		return rc;
	if (version < STORE_SCHEMA_VERSION)
		return store_exec(st,
				  "INSERT OR REPLACE INTO meta(key, value) "
				  "VALUES('schema', '7')",
				  err, errlen);
	return 0;
}

/* Whether SQLite's result rc says the file is damaged (or no database). */
static bool store_rc_damaged(int rc)
{
	return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/*
 * SQLite's quick_check of db (every page, every b-tree, every record's
 * format and NOT NULL; not the match of indexes to their tables): 0, or
 * -EUCLEAN with what it found in err, or another -errno when it could not
 * run.
 */
static int store_quick_check(sqlite3 *db, const char *path, char *err,
			     size_t errlen)
{
	char found[640] = "";
	sqlite3_stmt *q;
	size_t n = 0;
	int rc, rows = 0;

	rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(4)", -1, &q, NULL);
	if (rc == SQLITE_OK) {
		while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(q, 0);
			char raw[256], line[256];
			const char *head = "*** in database main ***\n";

			rows++;
			if (rows == 1 && t &&
			    strcmp((const char *)t, "ok") == 0)
				continue;
			/* One line per problem, without SQLite's heading. */
			snprintf(raw, sizeof(raw), "%s",
				 t ? (const char *)t : "?");
			if (strncmp(raw, head, strlen(head)) == 0)
				memmove(raw, raw + strlen(head),
					strlen(raw + strlen(head)) + 1);
			for (char *c = raw; (c = strchr(c, '\n'));)
				*c = ' ';
			text_escape(raw, line, sizeof(line));
			if (n < sizeof(found))
				n += (size_t)snprintf(found + n,
						      sizeof(found) - n, "%s%s",
						      n ? "; " : "", line);
		}
	}
	if (rc != SQLITE_DONE && !store_rc_damaged(rc)) {
		int e = store_fail_db(db, path, rc, "it could not be checked",
				      err, errlen);

		sqlite3_finalize(q);
		return e;
	}
	if (rc != SQLITE_DONE) {
		char why[256];

		/* The check stopped at a page it could not read: what it found
		 * until then, and that. */
		text_escape(sqlite3_errmsg(db), why, sizeof(why));
		if (n < sizeof(found))
			snprintf(found + n, sizeof(found) - n, "%s%s",
				 n ? "; " : "", why);
	} else if (!found[0]) {
		sqlite3_finalize(q);
		return 0;
	}
	sqlite3_finalize(q);
	snprintf(err, errlen, "state database %s is damaged: %s", path, found);
	return -EUCLEAN;
}

/* Whether db holds any table: 1, 0, or -errno (err filled). */
static int store_has_tables(sqlite3 *db, const char *path, char *err,
			    size_t errlen)
{
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master",
				    -1, &q, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			int n = sqlite3_column_int(q, 0);

			sqlite3_finalize(q);
			return n > 0;
		}
		sqlite3_finalize(q);
	}
	return store_fail_db(db, path, rc, "it cannot be read", err, errlen);
}

/* Open the store at path: check it first when asked; when `create` is
 * false, a missing file (-ENOENT) or one without tables (-ENODATA) is
 * refused, and nothing is written. */
static struct store *store_connect(const char *path, bool check, bool create,
				   int *rcp, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));
	int fd, rc;

	*rcp = -ENOMEM;
	if (!create && access(path, F_OK)) {
		*rcp = -errno;
		snprintf(err, errlen, "state database %s: %s", path,
			 strerror(errno));
		free(st);
		return NULL;
	}
	if (!st) {
		snprintf(err, errlen, "state database %s: out of memory", path);
		return NULL;
	}
	if (snprintf(st->path, sizeof(st->path), "%s", path) >=
	    (int)sizeof(st->path)) {
		snprintf(err, errlen, "state database %s: the name is too long",
			 path);
		*rcp = -ENAMETOOLONG;
		goto fail;
	}
	/* Create the file ourselves so that it is 0600 from the start. */
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	rc = sqlite3_open_v2(path, &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		*rcp = store_fail(st, rc, "it cannot be opened", err, errlen);
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	/* SQLite opens a file it may not write read-only: every write would
	 * fail later on. */
	if (sqlite3_db_readonly(st->db, "main") == 1) {
		snprintf(
			err, errlen,
			"state database %s can only be read (a read-only file "
			"system, an immutable file or its permissions); cclfs "
			"writes every change there: make it writable and mount "
			"again",
			path);
		*rcp = -EROFS;
		goto fail;
	}
	sqlite3_busy_timeout(st->db, 5000);
	/* The check comes before anything is written: a damaged file is
	 * left as it was found. */
	if (check && (*rcp = store_quick_check(st->db, path, err, errlen)))
		goto fail;
	if (!create) {
		rc = store_has_tables(st->db, path, err, errlen);
		if (rc == 0) {
			snprintf(err, errlen,
				 "state database %s holds no store (it is "
				 "empty)",
				 path);
			rc = -ENODATA;
		}
		if (rc < 0) {
			*rcp = rc;
			goto fail;
		}
	}
	/* WAL with FULL sync: a committed change survives a crash of the
	 * daemon and of the machine. */
	if ((*rcp = store_exec(st, "PRAGMA journal_mode = WAL", err, errlen)) ||
	    (*rcp = store_exec(st, "PRAGMA synchronous = FULL", err, errlen)) ||
	    (*rcp = store_exec(st, "PRAGMA foreign_keys = ON", err, errlen)) ||
	    (*rcp = store_migrate(st, err, errlen)))
		goto fail;
	for (int i = 0; i < STMT_COUNT; i++) {
		rc = sqlite3_prepare_v3(st->db, store_sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
					NULL);
		if (rc != SQLITE_OK) {
			*rcp = store_fail(st, rc,
					  "preparing a statement failed", err,
					  errlen);
			goto fail;
		}
	}
	*rcp = 0;
	return st;
fail:
	/* A file SQLite cannot read at all is damaged too. */
	if (check && *rcp == -EIO && st->db &&
	    store_rc_damaged(sqlite3_extended_errcode(st->db))) {
		char why[512];

		text_escape(sqlite3_errmsg(st->db), why, sizeof(why));
		snprintf(err, errlen, "state database %s is damaged: %s", path,
			 why);
		*rcp = -EUCLEAN;
	}
	store_close(st);
	return NULL;
}

struct store *store_open(const char *path, char *err, size_t errlen)
{
	int rc;

	return store_connect(path, false, true, &rc, err, errlen);
}

struct store *store_open_checked(const char *path, bool create, int *rc,
				 char *err, size_t errlen)
{
	return store_connect(path, true, create, rc, err, errlen);
}

static void store_keep_stop(struct store *st);

void store_close(struct store *st)
{
	if (!st)
		return;
	store_keep_stop(st);
	for (int i = 0; i < STMT_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db);
	free(st);
}

static void store_changed(struct store *st);

/* Run a prepared statement whose parameters are bound; reset it after. */
static int store_step(struct store *st, enum store_stmt which, char *err,
		      size_t errlen)
{
	sqlite3_stmt *q = st->stmt[which];
	int rc = sqlite3_step(q), e = 0;

	if (rc != SQLITE_DONE)
		e = store_fail(st, rc, "the change was not stored", err,
			       errlen);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (e == 0)
		store_changed(st);
	return e;
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
	int rc = store_exec(st, "COMMIT", err, errlen);

	if (rc == 0)
		store_changed(st);
	return rc;
}

void store_rollback(struct store *st)
{
	/* SQLite may have rolled back already (a full disk does). */
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

static const char *store_column_text(sqlite3_stmt *q, int i)
{
	const unsigned char *s = sqlite3_column_text(q, i);

	return s ? (const char *)s : "";
}

/* The end of a read: 0 when every row was read (SQLITE_DONE), else why
 * not. A row that cannot be read must never pass for a missing one. */
static int store_read_end(struct store *st, int rc, const char *what, char *err,
			  size_t errlen)
{
	char why[512];

	if (rc == SQLITE_DONE)
		return 0;
	if (!store_rc_damaged(rc))
		return store_fail(st, rc, what, err, errlen);
	text_escape(sqlite3_errmsg(st->db), why, sizeof(why));
	snprintf(err, errlen, "state database %s is damaged: %s (%s)", st->path,
		 why, what);
	return -EUCLEAN;
}

int store_load(struct store *st, const struct store_loader *loader, char *err,
	       size_t errlen)
{
	sqlite3_stmt *c = NULL, *v = NULL;
	int rc;

	rc = sqlite3_prepare_v2(st->db,
				"SELECT name, created_ns, error, error_ns FROM "
				"contracts ORDER BY name",
				-1, &c, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db,
					"SELECT file, value, changed_ns FROM "
					"contract_values WHERE contract = ?1",
					-1, &v, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail(st, rc, "reading contracts failed", err,
				errlen);
		goto out;
	}
	while ((rc = sqlite3_step(c)) == SQLITE_ROW) {
		const char *name = store_column_text(c, 0);

		if (loader->contract(loader->ctx, name,
				     sqlite3_column_int64(c, 1),
				     store_column_text(c, 2),
				     sqlite3_column_int64(c, 3))) {
			snprintf(err, errlen,
				 "state database %s: contract %s "
				 "could not be loaded",
				 st->path, name);
			rc = -ENOMEM;
			goto out;
		}
		store_bind_text(v, 1, name);
		while ((rc = sqlite3_step(v)) == SQLITE_ROW) {
			if (loader->value(loader->ctx, name,
					  store_column_text(v, 0),
					  store_column_text(v, 1),
					  sqlite3_column_int64(v, 2))) {
				snprintf(err, errlen,
					 "state database %s: value %s of "
					 "contract %s could not be loaded",
					 st->path, store_column_text(v, 0),
					 name);
				rc = -ENOMEM;
				goto out;
			}
		}
		rc = store_read_end(st, rc, "reading values failed", err,
				    errlen);
		if (rc)
			goto out;
		sqlite3_reset(v);
	}
	rc = store_read_end(st, rc, "reading contracts failed", err, errlen);
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
	rc = store_begin(st, err, errlen);
	if (rc)
		return rc;
	store_bind_text(st->stmt[STMT_CLUSTER_REMOVE], 1, handle);
	rc = store_step(st, STMT_CLUSTER_REMOVE, err, errlen);
	snprintf(subject, sizeof(subject), "clusters/%s", handle);
	if (rc == 0) {
		int src = sqlite3_prepare_v2(
			st->db, "DELETE FROM log WHERE subject = ?1", -1, &q,
			NULL);

		if (src == SQLITE_OK) {
			sqlite3_bind_text(q, 1, subject, -1, SQLITE_TRANSIENT);
			src = sqlite3_step(q);
			if (src != SQLITE_DONE)
				rc = store_fail(st, src,
						"removing the log failed", err,
						errlen);
			sqlite3_finalize(q);
		} else {
			rc = store_fail(st, src, "removing the log failed", err,
					errlen);
		}
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
	sqlite3_bind_int64(q, 12, n->billed_ns);
	return store_step(st, STMT_NODE_PUT, err, errlen);
}

int store_node_remove(struct store *st, const char *handle, int rank, char *err,
		      size_t errlen)
{
	sqlite3_stmt *q = st->stmt[STMT_NODE_REMOVE];

	store_bind_text(q, 1, handle);
	sqlite3_bind_int(q, 2, rank);
	return store_step(st, STMT_NODE_REMOVE, err, errlen);
}

int store_load_clusters(struct store *st,
			const struct store_cluster_loader *loader, char *err,
			size_t errlen)
{
	sqlite3_stmt *c = NULL, *n = NULL;
	int rc;

	rc = sqlite3_prepare_v2(
		st->db,
		"SELECT handle, contract, cluster_type, "
		"resolution, state, error, node_count, "
		"process_count, created_ns, state_ns, error_ns, "
		"price, ssh_user, ssh_keyfile, token, options, "
		"mpi_exit_status, mpi_ns FROM clusters "
		"ORDER BY handle",
		-1, &c, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
			st->db,
			"SELECT rank, provider, instance_type, "
			"instance_id, address, workdir, state, since_ns, "
			"exit_status, exec_ns, billed_ns FROM nodes WHERE "
			"handle = "
			"?1 ORDER BY rank",
			-1, &n, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail(st, rc, "reading clusters failed", err, errlen);
		goto out;
	}
	while ((rc = sqlite3_step(c)) == SQLITE_ROW) {
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
				 "state database %s: cluster %s could not be "
				 "loaded",
				 st->path, cl.handle);
			rc = -EIO;
			goto out;
		}
		store_bind_text(n, 1, cl.handle);
		while ((rc = sqlite3_step(n)) == SQLITE_ROW) {
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
				.billed_ns = sqlite3_column_int64(n, 10),
			};

			if (loader->node(loader->ctx, &nd)) {
				snprintf(err, errlen,
					 "state database %s: node %d of "
					 "cluster %s could not be loaded",
					 st->path, nd.rank, cl.handle);
				rc = -EIO;
				goto out;
			}
		}
		rc = store_read_end(st, rc, "reading nodes failed", err,
				    errlen);
		if (rc)
			goto out;
		sqlite3_reset(n);
	}
	rc = store_read_end(st, rc, "reading clusters failed", err, errlen);
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
	int rc;

	rc = sqlite3_prepare_v2(st->db,
				"SELECT at_ns, line FROM log WHERE subject = "
				"?1 ORDER BY id",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "reading the log failed", err,
				  errlen);
	store_bind_text(q, 1, subject);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW)
		if (fn(ctx, sqlite3_column_int64(q, 0),
		       store_column_text(q, 1))) {
			rc = SQLITE_DONE;
			break;
		}
	rc = store_read_end(st, rc, "reading the log failed", err, errlen);
	sqlite3_finalize(q);
	return rc;
}

int store_cluster_known(struct store *st, const char *handle)
{
	sqlite3_stmt *q;
	int rc;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT 1 FROM clusters WHERE handle = ?1", -1,
			       &q, NULL) != SQLITE_OK)
		return store_errno(st->db, sqlite3_errcode(st->db));
	store_bind_text(q, 1, handle);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : store_errno(st->db, rc);
}

/* --- a provider's refreshed catalog --- */

/* Prepare sql, bind provider to ?1, step to the end; 0 or -errno. */
static int store_catalog_exec(struct store *st, const char *sql,
			      const char *provider, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);

	if (rc != SQLITE_OK)
		return store_fail(st, rc, "the catalog was not stored", err,
				  errlen);
	store_bind_text(q, 1, provider);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	return rc == SQLITE_DONE
		       ? 0
		       : store_fail(st, rc, "the catalog was not stored", err,
				    errlen);
}

static void store_bind_real(sqlite3_stmt *q, int i, double v)
{
	if (isnan(v))
		sqlite3_bind_null(q, i);
	else
		sqlite3_bind_double(q, i, v);
}

int store_catalog_put(struct store *st, const struct store_catalog *c,
		      char *err, size_t errlen)
{
	sqlite3_stmt *t = NULL, *o = NULL, *r = NULL;
	int rc;

	rc = store_begin(st, err, errlen);
	if (rc)
		return rc;
	rc = store_catalog_exec(st,
				"DELETE FROM catalog_types WHERE provider = ?1",
				c->provider, err, errlen);
	if (!rc)
		rc = store_catalog_exec(st,
					"DELETE FROM catalog_offers WHERE "
					"provider = ?1",
					c->provider, err, errlen);
	if (!rc &&
	    (sqlite3_prepare_v2(st->db,
				"INSERT OR REPLACE INTO catalog_types VALUES("
				"?1, ?2, ?3)",
				-1, &t, NULL) != SQLITE_OK ||
	     sqlite3_prepare_v2(st->db,
				"INSERT OR REPLACE INTO catalog_offers VALUES("
				"?1, ?2, ?3, ?4, ?5, ?6)",
				-1, &o, NULL) != SQLITE_OK ||
	     sqlite3_prepare_v2(st->db,
				"INSERT OR REPLACE INTO catalog_refresh "
				"VALUES(?1, ?2, ?3, ?4)",
				-1, &r, NULL) != SQLITE_OK))
		rc = store_fail(st, sqlite3_errcode(st->db),
				"the catalog was not stored", err, errlen);
	for (size_t i = 0; !rc && i < c->ntypes; i++) {
		char name[256];

		snprintf(name, sizeof(name), "%.*s",
			 (int)strcspn(c->types[i], ","), c->types[i]);
		store_bind_text(t, 1, c->provider);
		store_bind_text(t, 2, name);
		store_bind_text(t, 3, c->types[i]);
		if (sqlite3_step(t) != SQLITE_DONE)
			rc = store_fail(st, sqlite3_errcode(st->db),
					"the catalog was not stored", err,
					errlen);
		sqlite3_reset(t);
	}
	for (size_t i = 0; !rc && i < c->noffers; i++) {
		const struct store_offer *x = &c->offers[i];

		store_bind_text(o, 1, c->provider);
		store_bind_text(o, 2, x->type);
		store_bind_text(o, 3, x->region);
		store_bind_real(o, 4, x->price);
		store_bind_real(o, 5, x->spot);
		store_bind_text(o, 6, x->zones);
		if (sqlite3_step(o) != SQLITE_DONE)
			rc = store_fail(st, sqlite3_errcode(st->db),
					"the catalog was not stored", err,
					errlen);
		sqlite3_reset(o);
	}
	if (!rc) {
		store_bind_text(r, 1, c->provider);
		store_bind_text(r, 2, c->header);
		store_bind_text(r, 3, c->summary);
		sqlite3_bind_int64(r, 4, c->at_ns);
		if (sqlite3_step(r) != SQLITE_DONE)
			rc = store_fail(st, sqlite3_errcode(st->db),
					"the catalog was not stored", err,
					errlen);
	}
	sqlite3_finalize(t);
	sqlite3_finalize(o);
	sqlite3_finalize(r);
	if (!rc)
		rc = store_commit(st, err, errlen);
	if (rc)
		store_rollback(st);
	else
		store_changed(st);
	return rc;
}

int store_catalog_drop(struct store *st, const char *provider, char *err,
		       size_t errlen)
{
	static const char *const sql[] = {
		"DELETE FROM catalog_types WHERE provider = ?1",
		"DELETE FROM catalog_offers WHERE provider = ?1",
		"DELETE FROM catalog_refresh WHERE provider = ?1",
	};
	int rc = store_begin(st, err, errlen);

	for (size_t i = 0; !rc && i < sizeof(sql) / sizeof(*sql); i++)
		rc = store_catalog_exec(st, sql[i], provider, err, errlen);
	if (!rc)
		rc = store_commit(st, err, errlen);
	if (rc)
		store_rollback(st);
	else
		store_changed(st);
	return rc;
}

/* Append to a growing text; -1 out of memory. */
static int store_text_add(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);

	if (*len + n + 1 > *cap) {
		size_t bigger = (*cap + n + 1) * 2;
		char *grown = realloc(*buf, bigger);

		if (!grown)
			return -1;
		*buf = grown;
		*cap = bigger;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return 0;
}

/* One provider's stored rows as the text of a types.csv and an
 * offers.csv. */
static int store_catalog_text(struct store *st, const char *provider,
			      const char *header,
			      struct store_catalog_text *out, char *err,
			      size_t errlen)
{
	sqlite3_stmt *q = NULL;
	size_t tcap = 0, ocap = 0;
	int rc;

	if (store_text_add(&out->types, &out->types_len, &tcap, header) ||
	    store_text_add(&out->types, &out->types_len, &tcap, "\n") ||
	    store_text_add(&out->offers, &out->offers_len, &ocap,
			   "instance_type,region,price_usd_hour,"
			   "spot_price_usd_hour,zones\n"))
		return -ENOMEM;
	rc = sqlite3_prepare_v2(st->db,
				"SELECT line FROM catalog_types WHERE "
				"provider = ?1 ORDER BY name",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "reading the catalog failed", err,
				  errlen);
	store_bind_text(q, 1, provider);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW)
		if (store_text_add(&out->types, &out->types_len, &tcap,
				   store_column_text(q, 0)) ||
		    store_text_add(&out->types, &out->types_len, &tcap, "\n")) {
			sqlite3_finalize(q);
			return -ENOMEM;
		}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		return store_read_end(st, rc, "reading the catalog failed", err,
				      errlen);
	rc = sqlite3_prepare_v2(st->db,
				"SELECT type, region, price, spot, zones FROM "
				"catalog_offers WHERE provider = ?1 ORDER BY "
				"type, region",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "reading the catalog failed", err,
				  errlen);
	store_bind_text(q, 1, provider);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		char line[1024], price[40] = "", spot[40] = "";

		if (sqlite3_column_type(q, 2) != SQLITE_NULL)
			snprintf(price, sizeof(price), "%.17g",
				 sqlite3_column_double(q, 2));
		if (sqlite3_column_type(q, 3) != SQLITE_NULL)
			snprintf(spot, sizeof(spot), "%.17g",
				 sqlite3_column_double(q, 3));
		snprintf(line, sizeof(line), "%s,%s,%s,%s,%s\n",
			 store_column_text(q, 0), store_column_text(q, 1),
			 price, spot, store_column_text(q, 4));
		if (store_text_add(&out->offers, &out->offers_len, &ocap,
				   line)) {
			sqlite3_finalize(q);
			return -ENOMEM;
		}
	}
	sqlite3_finalize(q);
	return store_read_end(st, rc, "reading the catalog failed", err,
			      errlen);
}

int store_catalog_load(struct store *st,
		       int (*fn)(void *ctx,
				 const struct store_catalog_text *text),
		       void *ctx, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_prepare_v2(st->db,
				"SELECT provider, header, summary, at_ns FROM "
				"catalog_refresh ORDER BY provider",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return store_fail(st, rc, "reading the catalog failed", err,
				  errlen);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct store_catalog_text text = {
			.provider = store_column_text(q, 0),
			.summary = store_column_text(q, 2),
			.at_ns = sqlite3_column_int64(q, 3),
		};
		int e = store_catalog_text(st, text.provider,
					   store_column_text(q, 1), &text, err,
					   errlen);

		if (!e)
			e = fn(ctx, &text);
		free(text.types);
		free(text.offers);
		if (e) {
			sqlite3_finalize(q);
			return e < 0 ? e : 0;
		}
	}
	rc = store_read_end(st, rc, "reading the catalog failed", err, errlen);
	sqlite3_finalize(q);
	return rc;
}

/* --- the last-good copy --- */

static int64_t store_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* fsync a file or directory by name: 0 or -errno. */
static int store_sync_path(const char *path, bool dir)
{
	int fd =
		open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

/* The directory part of path (".", when there is none). */
static void store_dirname(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Copy the database at src into the new file tmp with SQLite's online
 * backup (a consistent snapshot, read through a connection of its own), make
 * the copy stand alone (no WAL beside it), record when it was taken, and
 * check it. */
static int store_copy_into(const char *src, const char *tmp, int64_t now_ns,
			   char *err, size_t errlen)
{
	sqlite3 *from = NULL, *to = NULL;
	sqlite3_backup *b;
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_open_v2(src, &from, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail_db(from, src, rc, "it cannot be read", err,
				   errlen);
		goto out;
	}
	rc = sqlite3_open_v2(tmp, &to, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail_db(to, tmp, rc, "it cannot be opened", err,
				   errlen);
		goto out;
	}
	sqlite3_extended_result_codes(from, 1);
	sqlite3_extended_result_codes(to, 1);
	sqlite3_busy_timeout(from, 5000);
	b = sqlite3_backup_init(to, "main", from, "main");
	if (!b) {
		rc = store_fail_db(to, tmp, sqlite3_extended_errcode(to),
				   "the copy cannot start", err, errlen);
		goto out;
	}
	rc = sqlite3_backup_step(b, -1);
	sqlite3_backup_finish(b);
	if (rc != SQLITE_DONE) {
		rc = store_fail_db(to, tmp, rc, "copying failed", err, errlen);
		goto out;
	}
	rc = sqlite3_exec(to, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(to,
					"INSERT OR REPLACE INTO meta(key, "
					"value) VALUES('copied_ns', ?1)",
					-1, &q, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(q, 1, now_ns);
		rc = sqlite3_step(q);
		sqlite3_finalize(q);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK) {
		rc = store_fail_db(to, tmp, rc, "writing the copy failed", err,
				   errlen);
		goto out;
	}
	rc = store_quick_check(to, tmp, err, errlen);
out:
	sqlite3_close(from);
	sqlite3_close(to);
	return rc;
}

int store_copy(const char *src, const char *dest, char *err, size_t errlen)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", dest) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: the name is too long", dest);
		return -ENAMETOOLONG;
	}
	/* A fresh file, 0600 from the start: it holds what state.db holds. */
	unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "last-good copy %s: %s", tmp,
			 strerror(-rc));
		return rc;
	}
	close(fd);
	rc = store_copy_into(src, tmp, store_clock_ns(CLOCK_REALTIME), err,
			     errlen);
	if (rc == 0 && (rc = store_sync_path(tmp, false)) < 0)
		snprintf(err, errlen, "last-good copy %s: %s", tmp,
			 strerror(-rc));
	if (rc == 0 && rename(tmp, dest)) {
		rc = -errno;
		snprintf(err, errlen, "last-good copy %s: %s", dest,
			 strerror(-rc));
	}
	if (rc) {
		unlink(tmp);
		return rc;
	}
	store_dirname(dest, dir, sizeof(dir));
	store_sync_path(dir, true);
	return 0;
}

int store_copy_info(const char *path, int64_t *copied_ns, char *err,
		    size_t errlen)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q;
	int rc;

	*copied_ns = 0;
	if (access(path, F_OK)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail_db(db, path, rc, "it cannot be read", err,
				   errlen);
		sqlite3_close(db);
		return rc;
	}
	sqlite3_extended_result_codes(db, 1);
	rc = store_quick_check(db, path, err, errlen);
	if (rc == 0 && sqlite3_prepare_v2(db,
					  "SELECT value FROM meta WHERE key = "
					  "'copied_ns'",
					  -1, &q, NULL) == SQLITE_OK) {
		if (sqlite3_step(q) == SQLITE_ROW)
			*copied_ns = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
	}
	sqlite3_close(db);
	return rc;
}

/* The keeper: wakes on a change, copies when the last copy is older than
 * the interval, and sleeps again; a failed copy is reported and tried
 * again an interval later. */
static void *store_keeper_main(void *arg)
{
	struct store *st = arg;
	struct store_keeper *k = &st->keep;
	char err[1024];

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		int64_t now = store_clock_ns(CLOCK_MONOTONIC);
		int64_t due = k->copied_ns + k->interval_ns;
		struct timespec until;
		int rc;

		if (!k->pending) {
			pthread_cond_wait(&k->cond, &k->lock);
			continue;
		}
		if (now < due) {
			until.tv_sec = due / 1000000000;
			until.tv_nsec = due % 1000000000;
			pthread_cond_timedwait(&k->cond, &k->lock, &until);
			continue;
		}
		k->pending = false;
		pthread_mutex_unlock(&k->lock);
		rc = store_copy(st->path, k->dest, err, sizeof(err));
		if (rc && k->report)
			k->report(k->report_ctx, err);
		pthread_mutex_lock(&k->lock);
		k->copied_ns = store_clock_ns(CLOCK_MONOTONIC);
		if (rc)
			k->pending = true;
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

int store_keep_copy(struct store *st, const char *dest, int interval_s,
		    void (*report)(void *ctx, const char *line), void *ctx)
{
	struct store_keeper *k = &st->keep;
	pthread_condattr_t ca;

	if (st->keeping)
		return -EALREADY;
	if (snprintf(k->dest, sizeof(k->dest), "%s", dest) >=
	    (int)sizeof(k->dest))
		return -ENAMETOOLONG;
	if (pthread_condattr_init(&ca))
		return -ENOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&k->cond, &ca)) {
		pthread_condattr_destroy(&ca);
		return -ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&k->lock, NULL);
	k->interval_ns =
		(int64_t)(interval_s > 0 ? interval_s : 0) * 1000000000;
	k->copied_ns = store_clock_ns(CLOCK_MONOTONIC);
	k->report = report;
	k->report_ctx = ctx;
	st->keeping = true;
	return 0;
}

/* Wake the keeper: for a committed change (it starts at the first one),
 * or to stop it. */
static void store_keep_wake(struct store *st, bool stop)
{
	struct store_keeper *k = &st->keep;

	if (!st->keeping)
		return;
	pthread_mutex_lock(&k->lock);
	if (stop)
		k->stop = true;
	else
		k->pending = true;
	if (!k->started && !k->stop)
		k->started = pthread_create(&k->thread, NULL, store_keeper_main,
					    st) == 0;
	else
		pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
}

static void store_changed(struct store *st)
{
	store_keep_wake(st, false);
}

static void store_keep_stop(struct store *st)
{
	struct store_keeper *k = &st->keep;

	if (!st->keeping)
		return;
	store_keep_wake(st, true);
	if (k->started)
		pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
	st->keeping = false;
}
