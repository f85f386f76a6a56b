/* Small files of an SSH node's directory opened and read ahead of their
 * opens: when the files of a listing are opened in its order, a thread
 * opens the next few and reads them, one's read in flight beside the
 * next one's open, and an open soon after takes the handle. */
#include "providers/remote_ahead.h"

#include "providers/remote_attrs.h"
#include "providers/ssh_sftp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Files opened ahead of the last one opened in a directory; directories
 * whose listings are kept. */
#define AHEAD_DEPTH 8
#define AHEAD_DIRS  4
/* Opens in the listing's order, in a row, before any file is opened
 * ahead: a single file opened in a listed directory costs nothing more. */
#define AHEAD_RUN 2
/* Threads that open ahead, each on a session of its own (the node's, its
 * second one): libssh2 has one open in flight on a session at a time. */
#define AHEAD_LANES 2

struct ahead_file {
	struct ahead_file *next;
	struct ssh_conn *c;
	char *path;
	struct ssh_file *f; /* NULL: the open failed */
	struct stat st;
	uint64_t epoch; /* remote_attrs_epoch before the open */
	int64_t ns;	/* when the open started */
	bool busy;	/* its open or read is in flight (the thread's) */
	bool stale;	/* found too old by an open: for the sweep alone */
};

struct ahead_dir {
	struct ssh_conn *c; /* NULL: a free slot */
	char *dir;
	char **names;
	size_t n;
	size_t at;    /* the index after the file opened last (0: none) */
	unsigned run; /* files opened in the listing's order in a row */
	size_t next;  /* the next file to open ahead, */
	size_t upto;  /* up to this one */
};

static pthread_mutex_t ahead_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ahead_cv = PTHREAD_COND_INITIALIZER;
static bool ahead_running[AHEAD_LANES];
static struct ahead_file *ahead_files;
static struct ahead_dir ahead_dirs[AHEAD_DIRS];
static unsigned ahead_dir_next;

static int64_t ahead_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void ahead_dir_clear(struct ahead_dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->names[i]);
	free(d->names);
	free(d->dir);
	memset(d, 0, sizeof(*d));
}

void remote_ahead_listed(struct ssh_conn *c, const char *dir,
			 const char *const *names, size_t n)
{
	struct ahead_dir nd = {.c = c};
	struct ahead_dir *d = NULL;

	if (n > REMOTE_AHEAD_LIST)
		n = REMOTE_AHEAD_LIST;
	nd.dir = strdup(dir);
	nd.names = calloc(n ? n : 1, sizeof(*nd.names));
	if (!nd.dir || !nd.names) {
		ahead_dir_clear(&nd);
		return;
	}
	for (; nd.n < n; nd.n++)
		if (!(nd.names[nd.n] = strdup(names[nd.n]))) {
			ahead_dir_clear(&nd);
			return;
		}
	pthread_mutex_lock(&ahead_mu);
	for (int i = 0; i < AHEAD_DIRS && !d; i++)
		if (ahead_dirs[i].c == c && strcmp(ahead_dirs[i].dir, dir) == 0)
			d = &ahead_dirs[i];
	if (!d)
		d = &ahead_dirs[ahead_dir_next++ % AHEAD_DIRS];
	ahead_dir_clear(d);
	*d = nd;
	pthread_mutex_unlock(&ahead_mu);
}

static bool ahead_has(const struct ssh_conn *c, const char *path)
{
	for (struct ahead_file *a = ahead_files; a; a = a->next)
		if (!a->stale && a->c == c && strcmp(a->path, path) == 0)
			return true;
	return false;
}

/* The next file of d to open ahead, listed as busy (lock held); NULL when
 * there is none (d then has nothing more to open). */
static struct ahead_file *ahead_new(struct ahead_dir *d)
{
	while (d->next < d->upto) {
		const char *name = d->names[d->next++];
		size_t dl = strlen(d->dir), nl = strlen(name);
		struct ahead_file *a;

		if (dl + 1 + nl >= PATH_MAX)
			continue;
		a = calloc(1, sizeof(*a));
		if (a)
			a->path = malloc(dl + 1 + nl + 1);
		if (!a || !a->path) {
			free(a);
			d->next = d->upto;
			return NULL;
		}
		memcpy(a->path, d->dir, dl);
		a->path[dl] = '/';
		memcpy(a->path + dl + 1, name, nl + 1);
		if (ahead_has(d->c, a->path)) {
			free(a->path);
			free(a);
			continue;
		}
		a->c = d->c;
		a->busy = true;
		a->epoch = remote_attrs_epoch();
		a->ns = ahead_now();
		a->next = ahead_files;
		ahead_files = a;
		return a;
	}
	return NULL;
}

static void ahead_free(struct ahead_file *a)
{
	if (a->f)
		(void)ssh_sftp_close(a->f);
	free(a->path);
	free(a);
}

/* Unlink the entries that took too long to be wanted (lock held). */
static struct ahead_file *ahead_expired(void)
{
	struct ahead_file *old = NULL, **pp = &ahead_files;
	int64_t now = ahead_now();

	while (*pp) {
		struct ahead_file *a = *pp;

		if (a->busy || (!a->stale && now - a->ns < REMOTE_ATTRS_NS)) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		a->next = old;
		old = a;
	}
	return old;
}

/* c's second session when it is up (else NULL). */
static struct ssh_conn *ahead_second(struct ssh_conn *c)
{
	struct ssh_conn *b = ssh_sftp_second(c);
	char status[64];

	if (!b)
		return NULL;
	ssh_conn_status(b, status, sizeof(status), NULL);
	return strcmp(status, "reachable") == 0 ? b : NULL;
}

/* Bring d's second session up (lock held, let go meanwhile) before the
 * lane opens files there: no file waits for its handshake. Listed as
 * busy meanwhile, so that d's connection stays. */
static void ahead_warm(struct ahead_dir *d)
{
	struct ahead_file *a = calloc(1, sizeof(*a));
	struct ssh_conn *b;
	struct stat st;

	if (!a || !(a->path = strdup(""))) {
		free(a);
		return;
	}
	a->c = d->c;
	a->busy = true; /* and expired: the sweep frees it */
	a->next = ahead_files;
	ahead_files = a;
	pthread_mutex_unlock(&ahead_mu);
	b = ssh_sftp_second(a->c);
	if (b && !ahead_second(a->c))
		(void)ssh_sftp_stat(b, ".", &st);
	pthread_mutex_lock(&ahead_mu);
	a->busy = false;
	pthread_cond_broadcast(&ahead_cv);
}

/* Open a's file (the lock not held); with the file's first bytes asked
 * when they are few: true while that read is in flight. */
static bool ahead_open(struct ahead_file *a, int lane, struct ssh_file **f,
		       struct stat *st)
{
	struct ssh_conn *on = lane ? ahead_second(a->c) : NULL;
	int rc = ssh_sftp_open(on ? on : a->c, a->path, O_RDONLY, 0, f, st);

	if (rc) {
		*f = NULL;
		return false;
	}
	return S_ISREG(st->st_mode) && st->st_size > 0 &&
	       st->st_size <= REMOTE_AHEAD_SIZE &&
	       ssh_sftp_ahead_start(*f, (size_t)st->st_size) == 0;
}

static void *ahead_main(void *arg)
{
	int lane = (int)(intptr_t)arg;
	struct ahead_file *rd = NULL; /* the one whose read is in flight */
	const struct ssh_conn *warmed = NULL;

	pthread_mutex_lock(&ahead_mu);
	for (;;) {
		struct ahead_file *a = NULL;
		struct ssh_file *f = NULL;
		struct stat st = {0};
		bool reads, warm = false;

		for (int i = 0; i < AHEAD_DIRS && !a && !warm; i++) {
			struct ahead_dir *d = &ahead_dirs[i];

			if (!d->c || d->next >= d->upto)
				continue;
			warm = lane && d->c != warmed && !rd;
			if (warm) {
				warmed = d->c;
				ahead_warm(d);
			} else {
				a = ahead_new(d);
			}
		}
		if (warm)
			continue;
		if (a) {
			/* Its open goes out while the last one's read is in
			 * flight. */
			pthread_mutex_unlock(&ahead_mu);
			reads = ahead_open(a, lane, &f, &st);
			if (rd)
				(void)ssh_sftp_ahead_end(rd->f);
			pthread_mutex_lock(&ahead_mu);
			if (rd)
				rd->busy = false;
			a->f = f;
			a->st = st;
			a->busy = reads;
			rd = reads ? a : NULL;
			pthread_cond_broadcast(&ahead_cv);
			continue;
		}
		if (rd) {
			pthread_mutex_unlock(&ahead_mu);
			(void)ssh_sftp_ahead_end(rd->f);
			pthread_mutex_lock(&ahead_mu);
			rd->busy = false;
			rd = NULL;
			pthread_cond_broadcast(&ahead_cv);
			continue;
		}
		struct ahead_file *old = ahead_expired();

		if (old) {
			pthread_mutex_unlock(&ahead_mu);
			while (old) {
				struct ahead_file *next = old->next;

				ahead_free(old);
				old = next;
			}
			pthread_mutex_lock(&ahead_mu);
			continue;
		}
		if (!ahead_files)
			break;
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += REMOTE_ATTRS_NS / 2;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&ahead_cv, &ahead_mu, &until);
	}
	ahead_running[lane] = false;
	pthread_mutex_unlock(&ahead_mu);
	return NULL;
}

/* The threads, each started when there is work and it does not run (lock
 * held). */
static void ahead_wake(void)
{
	pthread_t t;

	pthread_cond_broadcast(&ahead_cv);
	for (int lane = 0; lane < AHEAD_LANES; lane++)
		if (!ahead_running[lane] &&
		    pthread_create(&t, NULL, ahead_main,
				   (void *)(intptr_t)lane) == 0) {
			pthread_detach(t);
			ahead_running[lane] = true;
		}
}

/* An open of name in d (lock held): in the listing's order, the next
 * files are to be opened ahead. */
static void ahead_opened(struct ahead_dir *d, const char *name)
{
	size_t i = d->at;

	/* Most often the one after the last; else anywhere. */
	if (i >= d->n || strcmp(d->names[i], name) != 0)
		for (i = 0; i < d->n && strcmp(d->names[i], name) != 0; i++)
			;
	if (i >= d->n)
		return;
	d->run = i == d->at ? d->run + 1 : 1;
	d->at = i + 1;
	if (d->next < d->at)
		d->next = d->at;
	if (d->run < AHEAD_RUN)
		return;
	d->upto = d->at + AHEAD_DEPTH < d->n ? d->at + AHEAD_DEPTH : d->n;
	if (d->next < d->upto)
		ahead_wake();
}

bool remote_ahead_take(const struct ssh_conn *c, const char *path,
		       struct ssh_file **f, struct stat *st, uint64_t *epoch)
{
	const char *slash = strrchr(path, '/');
	size_t dl = slash ? (size_t)(slash - path) : 0;
	struct ahead_file *a, **pp;
	bool ok;

	if (!slash)
		return false;
	pthread_mutex_lock(&ahead_mu);
	for (int i = 0; i < AHEAD_DIRS; i++) {
		struct ahead_dir *d = &ahead_dirs[i];

		if (d->c == c && strncmp(d->dir, path, dl) == 0 &&
		    d->dir[dl] == '\0') {
			ahead_opened(d, slash + 1);
			break;
		}
	}
again:
	for (pp = &ahead_files; (a = *pp) != NULL; pp = &a->next)
		if (!a->stale && a->c == c && strcmp(a->path, path) == 0)
			break;
	if (!a) {
		pthread_mutex_unlock(&ahead_mu);
		return false;
	}
	if (a->busy) {
		pthread_cond_wait(&ahead_cv, &ahead_mu);
		goto again;
	}
	/* Opened so lately, with nothing changed since through the mount or
	 * by a command, that a new open would see the same file. */
	ok = a->f && ahead_now() - a->ns < REMOTE_ATTRS_NS &&
	     remote_attrs_epoch() == a->epoch && ssh_sftp_current(a->f);
	if (!ok && a->f) {
		/* Its close is the sweep's: this open does not wait for it. */
		a->stale = true;
		ahead_wake();
		pthread_mutex_unlock(&ahead_mu);
		return false;
	}
	*pp = a->next;
	pthread_mutex_unlock(&ahead_mu);
	if (ok) {
		*f = a->f;
		*st = a->st;
		*epoch = a->epoch;
		a->f = NULL;
	}
	ahead_free(a);
	return ok;
}

void remote_ahead_forget(const struct ssh_conn *c)
{
	struct ahead_file *old = NULL, **pp;

	pthread_mutex_lock(&ahead_mu);
	for (int i = 0; i < AHEAD_DIRS; i++)
		if (ahead_dirs[i].c == c)
			ahead_dir_clear(&ahead_dirs[i]);
	pp = &ahead_files;
	while (*pp) {
		struct ahead_file *a = *pp;

		if (a->c != c) {
			pp = &a->next;
		} else if (a->busy) {
			pthread_cond_wait(&ahead_cv, &ahead_mu);
			pp = &ahead_files;
		} else {
			*pp = a->next;
			a->next = old;
			old = a;
		}
	}
	pthread_mutex_unlock(&ahead_mu);
	while (old) {
		struct ahead_file *next = old->next;

		ahead_free(old);
		old = next;
	}
}
