/* Unit tests of the state store (lifecycle/store.c): SQLite results as
 * errnos, a load that stops at a row it cannot read, the check at open, and
 * the last-good copy (taken at once, kept by its thread, checked). */
#include "check.h"
#include "lifecycle/statedir.h"
#include "lifecycle/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[] = "/tmp/cclfs-store-XXXXXX";

static int count_contract(void *ctx, const char *name, int64_t created_ns,
			  const char *error, int64_t error_ns)
{
	(void)name;
	(void)created_ns;
	(void)error;
	(void)error_ns;
	++*(int *)ctx;
	return 0;
}

static int count_value(void *ctx, const char *contract, const char *file,
		       const char *value, int64_t changed_ns)
{
	(void)ctx;
	(void)contract;
	(void)file;
	(void)value;
	(void)changed_ns;
	return 0;
}

/* Contracts in the store at path, or -errno. */
static int contracts_in(const char *path)
{
	char err[1024];
	int n = 0, rc;
	struct store_loader l = {&n, count_contract, count_value};
	struct store *st = store_open(path, err, sizeof(err));

	if (!st)
		return -EIO;
	rc = store_load(st, &l, err, sizeof(err));
	store_close(st);
	return rc ? rc : n;
}

static void test_errno(void)
{
	CHECK(store_errno(NULL, SQLITE_OK) == 0);
	CHECK(store_errno(NULL, SQLITE_DONE) == 0);
	CHECK(store_errno(NULL, SQLITE_FULL) == -ENOSPC);
	CHECK(store_errno(NULL, SQLITE_READONLY) == -EROFS);
	CHECK(store_errno(NULL, SQLITE_READONLY_DBMOVED) == -EROFS);
	CHECK(store_errno(NULL, SQLITE_BUSY) == -EBUSY);
	CHECK(store_errno(NULL, SQLITE_LOCKED) == -EBUSY);
	CHECK(store_errno(NULL, SQLITE_NOMEM) == -ENOMEM);
	CHECK(store_errno(NULL, SQLITE_CORRUPT) == -EIO);
	CHECK(store_errno(NULL, SQLITE_IOERR_WRITE) == -EIO);
	CHECK(store_errno(NULL, SQLITE_CONSTRAINT) == -EIO);
}

/* A duplicate contract: -errno (not -1) and a sentence naming the file. */
static void test_write_errors(void)
{
	char path[PATH_MAX], err[1024] = "";
	struct store *st;
	int rc;

	snprintf(path, sizeof(path), "%s/errors.db", base);
	st = store_open(path, err, sizeof(err));
	CHECK(st != NULL);
	if (!st)
		return;
	CHECK(store_contract_add(st, "c", 1, err, sizeof(err)) == 0);
	rc = store_contract_add(st, "c", 2, err, sizeof(err));
	CHECK(rc < 0 && rc != -1);
	CHECK(strstr(err, path) != NULL);
	store_close(st);
}

/* The check at open: a damaged page is -EUCLEAN, and nothing is written;
 * an empty or missing file is refused unless created. */
static void test_check(void)
{
	char path[PATH_MAX], err[1024] = "", junk[4096];
	struct store *st;
	struct stat before, after;
	int rc = 0, fd;

	snprintf(path, sizeof(path), "%s/check.db", base);
	st = store_open_checked(path, false, &rc, err, sizeof(err));
	CHECK(!st && rc == -ENOENT);
	CHECK(access(path, F_OK) != 0);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	close(fd);
	st = store_open_checked(path, false, &rc, err, sizeof(err));
	CHECK(!st && rc == -ENODATA);
	st = store_open_checked(path, true, &rc, err, sizeof(err));
	CHECK(st != NULL && rc == 0);
	for (int i = 0; st && i < 200; i++) {
		char name[32];

		snprintf(name, sizeof(name), "contract%d", i);
		CHECK(store_contract_add(st, name, i, err, sizeof(err)) == 0);
		CHECK(store_value_put(st, name, "node_count", "4", i, err,
				      sizeof(err)) == 0);
	}
	store_close(st);
	CHECK(contracts_in(path) == 200);
	st = store_open_checked(path, false, &rc, err, sizeof(err));
	CHECK(st != NULL);
	store_close(st);
	/* Page 3 in random bytes. */
	memset(junk, 0xa5, sizeof(junk));
	fd = open(path, O_WRONLY);
	CHECK(pwrite(fd, junk, sizeof(junk), (off_t)2 * 4096) == sizeof(junk));
	close(fd);
	stat(path, &before);
	st = store_open_checked(path, false, &rc, err, sizeof(err));
	CHECK(!st && rc == -EUCLEAN);
	CHECK(strstr(err, "is damaged") != NULL);
	stat(path, &after);
	CHECK(before.st_size == after.st_size &&
	      before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
	      before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
	/* Without the check the load stops at the page it cannot read:
	 * never fewer contracts without an error. */
	CHECK(contracts_in(path) < 0);
}

static int reported;

static void report(void *ctx, const char *line)
{
	(void)ctx;
	(void)line;
	reported++;
}

/* The copy: taken at once (0600, checked, standalone), then kept by the
 * store's thread after each change. */
static void test_copy(void)
{
	char path[PATH_MAX], copy[PATH_MAX], probe[PATH_MAX];
	char err[1024] = "", wal[PATH_MAX + 8];
	int64_t at = 0;
	struct store *st;
	struct stat sb;

	snprintf(path, sizeof(path), "%s/copy.db", base);
	snprintf(copy, sizeof(copy), "%s/copy.db.last-good", base);
	snprintf(probe, sizeof(probe), "%s/probe.db", base);
	CHECK(store_copy_info(copy, &at, err, sizeof(err)) == -ENOENT);
	st = store_open(path, err, sizeof(err));
	CHECK(st != NULL);
	if (!st)
		return;
	CHECK(store_contract_add(st, "first", 1, err, sizeof(err)) == 0);
	CHECK(store_copy(path, copy, err, sizeof(err)) == 0);
	CHECK(stat(copy, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	snprintf(wal, sizeof(wal), "%s-wal", copy);
	CHECK(access(wal, F_OK) != 0);
	CHECK(store_copy_info(copy, &at, err, sizeof(err)) == 0 && at > 0);
	CHECK(statedir_copy_file(copy, probe, err, sizeof(err)) == 0);
	CHECK(contracts_in(probe) == 1);
	/* No interval: the keeper copies as soon as a change is made. */
	CHECK(store_keep_copy(st, copy, 0, report, NULL) == 0);
	CHECK(store_contract_add(st, "second", 2, err, sizeof(err)) == 0);
	CHECK_SOON(statedir_copy_file(copy, probe, err, sizeof(err)) == 0 &&
		   contracts_in(probe) == 2);
	store_close(st);
	CHECK(reported == 0);
	/* A damaged copy is told as such. */
	CHECK(truncate(copy, 5000) == 0);
	CHECK(store_copy_info(copy, &at, err, sizeof(err)) == -EUCLEAN);
}

/* The test's directory holds files only. */
static void remove_base(void)
{
	DIR *d = opendir(base);
	struct dirent *e;
	char p[PATH_MAX];

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", base, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
	rmdir(base);
}

int main(void)
{
	if (!mkdtemp(base)) {
		perror(base);
		return 1;
	}
	test_errno();
	test_write_errors();
	test_check();
	test_copy();
	remove_base();
	return check_summary("store");
}
