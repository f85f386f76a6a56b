/* The state directory: where it is ($XDG_STATE_HOME/cclfs or -o statedir=),
 * its creation with mode 0700, the lock that keeps a second daemon from
 * using it at the same time, and what it holds besides the store: the
 * remains of clusters found without the store (node directories, command
 * outputs, key files, processes of local nodes), files moved aside, and
 * whether it can be written. */
#include "lifecycle/statedir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mkdir -p with mode 0700 for every directory it creates. */
static int statedir_mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return -1;
	return 0;
}

static int statedir_choose(const char *explicit_dir, char *path, size_t pathlen)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char cwd[4096];
	int n;

	if (explicit_dir && *explicit_dir) {
		if (explicit_dir[0] != '/' && getcwd(cwd, sizeof(cwd)))
			n = snprintf(path, pathlen, "%s/%s", cwd, explicit_dir);
		else
			n = snprintf(path, pathlen, "%s", explicit_dir);
	} else if (xdg && xdg[0] == '/') {
		n = snprintf(path, pathlen, "%s/cclfs", xdg);
	} else if (home && *home) {
		n = snprintf(path, pathlen, "%s/.local/state/cclfs", home);
	} else {
		return -1;
	}
	return n < 0 || (size_t)n >= pathlen ? -1 : 0;
}

int statedir_open(const char *explicit_dir, char *path, size_t pathlen,
		  char *err, size_t errlen)
{
	char lock[4200], pid[32] = "";
	struct stat st;
	int fd;

	if (statedir_choose(explicit_dir, path, pathlen)) {
		snprintf(err, errlen,
			 "no state directory: set HOME or XDG_STATE_HOME, or "
			 "mount with -o statedir=DIR");
		return -1;
	}
	if (statedir_mkdirs(path) || stat(path, &st)) {
		snprintf(err, errlen, "state directory %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "state directory %s is not a directory",
			 path);
		return -1;
	}
	/* It holds credentials and keys later on: owner only. */
	if ((st.st_mode & 0777) != 0700 && chmod(path, 0700)) {
		snprintf(err, errlen,
			 "state directory %s: cannot make it 0700: "
			 "%s",
			 path, strerror(errno));
		return -1;
	}
	snprintf(lock, sizeof(lock), "%s/lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		if (statedir_check_writable(lock, err, errlen) == 0)
			snprintf(err, errlen, "state directory %s: %s: %s",
				 path, lock, strerror(e));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);

		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		snprintf(err, errlen,
			 "state directory %s is in use by another cclfs%s%s%s; "
			 "unmount it first, or use -o statedir=DIR",
			 path, *pid ? " (pid " : "", pid, *pid ? ")" : "");
		close(fd);
		return -1;
	}
	return fd;
}

void statedir_set_pid(int lockfd)
{
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

	if (ftruncate(lockfd, 0) == 0 && pwrite(lockfd, pid, (size_t)n, 0))
		fsync(lockfd);
}

/* Whether the file at path carries the immutable attribute (chattr +i). */
static bool statedir_immutable(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), flags = 0;
	bool imm = false;

	if (fd < 0)
		return false;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0)
		imm = (flags & FS_IMMUTABLE_FL) != 0;
	close(fd);
	return imm;
}

/* Why `what` (a file or directory) cannot be written, into err. */
static int statedir_unwritable(const char *what, const char *path, int e,
			       char *err, size_t errlen)
{
	if (e == EROFS)
		snprintf(err, errlen,
			 "%s %s is on a read-only file system, and cclfs "
			 "writes every change there: remount it read-write, or "
			 "use -o statedir=DIR",
			 what, path);
	else if (e == EPERM && statedir_immutable(path))
		snprintf(err, errlen,
			 "%s %s is immutable (chattr +i), and cclfs writes "
			 "every change there: run chattr -i %s and mount again",
			 what, path, path);
	else
		snprintf(err, errlen,
			 "%s %s cannot be written (%s), and cclfs writes every "
			 "change there: make it writable and mount again",
			 what, path, strerror(e));
	return -e;
}

int statedir_check_writable(const char *path, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (!slash || slash == path)
		snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (access(dir, W_OK))
		return statedir_unwritable("state directory", dir, errno, err,
					   errlen);
	if (access(path, F_OK) == 0 && access(path, W_OK))
		return statedir_unwritable("file", path, errno, err, errlen);
	return 0;
}

int statedir_move_aside(const char *path, const char *why, char *out,
			size_t outlen, char *err, size_t errlen)
{
	char stamp[32], from[PATH_MAX + 8], to[PATH_MAX + 8];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	/* Two in one second: -2, -3... */
	for (int n = 1;; n++) {
		int len = n == 1 ? snprintf(out, outlen, "%s.%s-%s", path, why,
					    stamp)
				 : snprintf(out, outlen, "%s.%s-%s-%d", path,
					    why, stamp, n);

		if (len < 0 || (size_t)len >= outlen || len + 4 >= PATH_MAX) {
			snprintf(err, errlen, "%s: the name is too long", path);
			return -ENAMETOOLONG;
		}
		if (access(out, F_OK) && errno == ENOENT)
			break;
		if (n > 100) {
			snprintf(err, errlen, "%s: too many files moved aside",
				 path);
			return -EEXIST;
		}
	}
	if (access(path, F_OK) == 0 && rename(path, out)) {
		int e = errno;

		snprintf(err, errlen, "cannot move %s aside to %s: %s", path,
			 out, strerror(e));
		return -e;
	}
	/* The WAL holds committed changes of the file: it goes with it. */
	snprintf(from, sizeof(from), "%s-wal", path);
	snprintf(to, sizeof(to), "%s-wal", out);
	if (rename(from, to) && errno != ENOENT) {
		int e = errno;

		snprintf(err, errlen, "cannot move %s aside to %s: %s", from,
			 to, strerror(e));
		return -e;
	}
	snprintf(from, sizeof(from), "%s-shm", path);
	unlink(from);
	return 0;
}

int statedir_copy_file(const char *src, const char *dest, char *err,
		       size_t errlen)
{
	char tmp[PATH_MAX], buf[65536];
	int in, out, rc = 0;
	ssize_t n;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", dest) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: the name is too long", dest);
		return -ENAMETOOLONG;
	}
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", src, strerror(-rc));
		return rc;
	}
	unlink(tmp);
	out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(-rc));
		close(in);
		return rc;
	}
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno != EINTR)
				rc = -errno;
			continue;
		}
		for (ssize_t done = 0; rc == 0 && done < n;) {
			ssize_t w = write(out, buf + done, (size_t)(n - done));

			if (w < 0 && errno != EINTR)
				rc = -errno;
			else if (w > 0)
				done += w;
		}
	}
	if (rc == 0 && fsync(out))
		rc = -errno;
	close(in);
	if (close(out) && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, dest))
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "cannot copy %s to %s: %s", src, dest,
			 strerror(-rc));
		unlink(tmp);
	}
	return rc;
}

/* --- remains --- */

struct statedir_found {
	struct statedir_remains *v;
	size_t n, cap;
};

/* [A-Za-z0-9._-]{1,64}, not "." or "..": a cluster handle. */
static bool statedir_handle_valid(const char *h, size_t n)
{
	if (n == 0 || n > 64 || (n == 1 && h[0] == '.') ||
	    (n == 2 && h[0] == '.' && h[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr("._-", h[i]))
			return false;
	return true;
}

/* The entry of handle h (n bytes), added when new; NULL out of memory or
 * for a name that is no handle. */
static struct statedir_remains *statedir_entry(struct statedir_found *f,
					       const char *h, size_t n)
{
	struct statedir_remains *r;

	if (!statedir_handle_valid(h, n))
		return NULL;
	for (size_t i = 0; i < f->n; i++)
		if (strlen(f->v[i].handle) == n &&
		    memcmp(f->v[i].handle, h, n) == 0)
			return &f->v[i];
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct statedir_remains *v = realloc(f->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		f->v = v;
		f->cap = cap;
	}
	r = &f->v[f->n++];
	memset(r, 0, sizeof(*r));
	memcpy(r->handle, h, n);
	return r;
}

/* Entries of dir/sub (not . and ..), or -1 when it cannot be read. */
static int statedir_count(const char *dir, const char *sub)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, sub) >=
	    (int)sizeof(path))
		return -1;
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* The addresses of STATEDIR/clusters/HANDLE/hostfile (lines "ADDRESS
 * slots=N"), but this machine's, into r->hosts. */
static void statedir_hosts(const char *dir, struct statedir_remains *r)
{
	char path[PATH_MAX], line[512];
	size_t n = 0;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/clusters/%s/hostfile", dir,
		     r->handle) >= (int)sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && n < sizeof(r->hosts)) {
		line[strcspn(line, " \t\r\n")] = '\0';
		if (!line[0] || strcmp(line, "localhost") == 0 ||
		    strcmp(line, "127.0.0.1") == 0)
			continue;
		n += (size_t)snprintf(r->hosts + n, sizeof(r->hosts) - n,
				      "%s%s", n ? ", " : "", line);
	}
	fclose(f);
}

/* Each entry of dir/sub: nodes/HANDLE, clusters/HANDLE, keys/HANDLE-T. */
static int statedir_scan(const char *dir, const char *sub,
			 struct statedir_found *f)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/%s", dir, sub) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		const char *name = e->d_name;
		struct statedir_remains *r;
		size_t n = strlen(name);

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (strcmp(sub, "keys") == 0) {
			/* HANDLE-TOKEN8, and its .pub */
			const char *dash;

			if (n > 4 && strcmp(name + n - 4, ".pub") == 0)
				n -= 4;
			dash = memrchr(name, '-', n);
			if (!dash)
				continue;
			n = (size_t)(dash - name);
		}
		r = statedir_entry(f, name, n);
		if (!r)
			continue;
		if (strcmp(sub, "keys") == 0) {
			r->keys++;
		} else {
			char inner[PATH_MAX];
			int count;

			snprintf(inner, sizeof(inner), "%s/%s", sub, name);
			count = statedir_count(dir, inner);
			if (strcmp(sub, "nodes") == 0) {
				r->node_dirs += count > 0 ? count : 0;
			} else {
				r->outputs += count > 0 ? count : 0;
				statedir_hosts(dir, r);
			}
		}
	}
	closedir(d);
	return 0;
}

/* The handle in path when it is PREFIX/HANDLE[/...] ("" when not). */
static void statedir_handle_under(const char *path, const char *prefix,
				  char *out, size_t outlen)
{
	size_t n = strlen(prefix);
	const char *h = path + n + 1;

	out[0] = '\0';
	if (!*prefix || strncmp(path, prefix, n) != 0 || path[n] != '/')
		return;
	n = strcspn(h, "/");
	if (statedir_handle_valid(h, n) && n < outlen)
		snprintf(out, outlen, "%.*s", (int)n, h);
}

/* The value of NAME= in an environment block (NUL-separated), or NULL. */
static const char *statedir_env(const char *env, size_t len, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = env; p < env + len; p += strlen(p) + 1)
		if (strncmp(p, name, n) == 0 && p[n] == '=')
			return p + n + 1;
	return NULL;
}

/* Process pid, when it carries CCLFS_INSTANCE and belongs to a cluster of
 * this state directory (dir as given and as the kernel resolves it). */
static void statedir_proc(const char *dir, const char *real, int pid,
			  struct statedir_found *f)
{
	char path[64], env[65536], cwd[PATH_MAX], prefix[PATH_MAX + 16];
	char handle[72] = "";
	const char *inst, *hostfile;
	struct statedir_remains *r;
	ssize_t len = 0, n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((size_t)len < sizeof(env) - 1 &&
	       (n = read(fd, env + len, sizeof(env) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	env[len] = '\0';
	inst = statedir_env(env, (size_t)len, "CCLFS_INSTANCE");
	if (!inst)
		return;
	hostfile = statedir_env(env, (size_t)len, "CCLFS_HOSTFILE");
	for (int i = 0; i < 2 && !handle[0] && hostfile; i++) {
		snprintf(prefix, sizeof(prefix), "%s/clusters", i ? real : dir);
		statedir_handle_under(hostfile, prefix, handle, sizeof(handle));
	}
	snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
	n = readlink(path, cwd, sizeof(cwd) - 1);
	cwd[n > 0 ? n : 0] = '\0';
	for (int i = 0; i < 2 && !handle[0] && cwd[0]; i++) {
		snprintf(prefix, sizeof(prefix), "%s/nodes", i ? real : dir);
		statedir_handle_under(cwd, prefix, handle, sizeof(handle));
	}
	if (!handle[0])
		return;
	r = statedir_entry(f, handle, strlen(handle));
	if (!r)
		return;
	if (r->nprocs < STATEDIR_PROCS_MAX) {
		struct statedir_proc *p = &r->procs[r->nprocs];

		p->pid = pid;
		snprintf(p->instance, sizeof(p->instance), "%s", inst);
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, p->comm, sizeof(p->comm) - 1) : 0;
		p->comm[n > 0 ? n : 0] = '\0';
		p->comm[strcspn(p->comm, "\n")] = '\0';
		if (fd >= 0)
			close(fd);
	}
	r->nprocs++;
}

static int statedir_by_handle(const void *a, const void *b)
{
	return strcmp(((const struct statedir_remains *)a)->handle,
		      ((const struct statedir_remains *)b)->handle);
}

int statedir_remains(const char *dir,
		     int (*fn)(void *ctx, const struct statedir_remains *r),
		     void *ctx)
{
	static const char *const subs[] = {"nodes", "clusters", "keys"};
	struct statedir_found f = {0};
	char real[PATH_MAX];
	struct dirent *e;
	DIR *proc;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(subs) / sizeof(*subs); i++)
		rc = statedir_scan(dir, subs[i], &f);
	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	proc = rc == 0 ? opendir("/proc") : NULL;
	while (proc && (e = readdir(proc))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		statedir_proc(dir, real, (int)pid, &f);
	}
	if (proc)
		closedir(proc);
	if (f.n)
		qsort(f.v, f.n, sizeof(*f.v), statedir_by_handle);
	for (size_t i = 0; rc == 0 && i < f.n; i++)
		rc = fn(ctx, &f.v[i]);
	free(f.v);
	return rc;
}
