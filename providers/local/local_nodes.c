/* The local provider's nodes: each node is a private working directory under
 * the provider's base directory plus every process that carries its
 * CCLFS_INSTANCE; creating, signalling, describing and running on them. */
#include "providers/conf_keys.h"
#include "providers/local/local.h"
#include "providers/provider.h"
#include "providers/provider_conf.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOCAL_ENV_NAME	"CCLFS_INSTANCE"
#define LOCAL_ENTRY_MAX (sizeof(LOCAL_ENV_NAME "=") + PROVIDER_ID_MAX)
/* What marks the processes of one command: CCLFS_EXEC=<its tag>. */
#define LOCAL_EXEC_NAME	     "CCLFS_EXEC"
#define LOCAL_TAG_MAX	     100
#define LOCAL_EXEC_ENTRY_MAX (sizeof(LOCAL_EXEC_NAME "=") + LOCAL_TAG_MAX)
/* The PATH of a command when the daemon has none. */
#define LOCAL_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* Room for "the manager of cluster HANDLE". */
#define LOCAL_NAME_MAX 128
/* Rounds of scan-and-signal before giving up with EBUSY, and the waits
 * between them (ns). */
#define LOCAL_PASSES	  100
#define LOCAL_ROUND_FIRST 200000L
#define LOCAL_ROUND_MAX	  20000000L
/* Waits between two looks at a running command (ns). */
#define LOCAL_POLL_FIRST 200000L
#define LOCAL_POLL_MAX	 20000000L

extern const struct provider_entry provider_local;

struct local_provider {
	struct provider base;
	char basedir[PROVIDER_PATH_MAX + 1]; /* absolute, no trailing '/' */
};

enum local_env { LOCAL_ENV_OTHER, LOCAL_ENV_HAS, LOCAL_ENV_BLANK };

/* A process whose environment read as empty, and its parent. */
struct local_blank {
	pid_t pid, ppid;
};

/* What one pass over /proc found for one node. */
struct local_scan {
	size_t found;	  /* live processes that carry the node's entry */
	size_t stopped;	  /* of which stopped or about to stop */
	size_t signalled; /* of which were sent the signal */
	pid_t denied;	  /* a process we may not signal, or 0 */
	/* The pass's bookkeeping: the node's processes, and the processes
	 * with a blank environment, whose parent may be one of them. */
	pid_t *mine;
	size_t nmine, capmine;
	struct local_blank *blank;
	size_t nblank, capblank;
	bool nomem;
};

/* Everything the child needs, prepared before fork so that the child only
 * makes async-signal-safe system calls. */
struct local_child {
	const char *dir;
	const char *stdout_path, *stderr_path; /* never NULL */
	bool same; /* one file for both: they interleave as with 2>&1 */
	char *const *argv;
	char *const *envp;
};

__attribute__((format(printf, 3, 4))) static void
local_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* strerror without its shared buffer. */
static const char *local_strerror(int e)
{
	const char *s = strerrordesc_np(e);

	return s ? s : "unknown error";
}

static void local_sleep(long ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000L,
			      .tv_nsec = ns % 1000000000L};

	nanosleep(&ts, NULL);
}

/* "node 3 of cluster H" or "the manager of cluster H", for messages; the
 * handle's unprintable bytes are shown as '?'. */
static void local_node_name(const struct provider_node *node, char *buf,
			    size_t len)
{
	char h[sizeof(node->handle)];
	size_t i;

	for (i = 0; i + 1 < sizeof(h) && node->handle[i]; i++)
		h[i] = isprint((unsigned char)node->handle[i]) ? node->handle[i]
							       : '?';
	h[i] = '\0';
	if (node->rank == -1)
		snprintf(buf, len, "the manager of cluster %s", h);
	else
		snprintf(buf, len, "node %d of cluster %s", node->rank, h);
}

/* [A-Za-z0-9._-]{1,64}, not "." or "..". */
static bool local_handle_valid(const char *h, size_t size)
{
	size_t n = strnlen(h, size);

	if (n == 0 || n >= size || strcmp(h, ".") == 0 || strcmp(h, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && !strchr("._-", h[i]))
			return false;
	return true;
}

/* The node's directory, BASEDIR/HANDLE/RANK (or HANDLE alone when `rank`
 * is false), after checking the handle, the rank and, when the node has
 * one, that its recorded workdir is that directory. */
static int local_node_dir(const struct local_provider *lp,
			  const struct provider_node *node, bool rank,
			  char *path, size_t len, char *err, size_t errlen)
{
	char name[LOCAL_NAME_MAX];
	int n;

	local_node_name(node, name, sizeof(name));
	if (!local_handle_valid(node->handle, sizeof(node->handle))) {
		local_error(err, errlen,
			    "%s has a cluster handle that is not valid (1 to "
			    "64 letters, digits, '.', '_' or '-', not . or ..)",
			    name);
		return -EINVAL;
	}
	if (node->rank < -1) {
		local_error(err, errlen,
			    "%s has a rank that is not valid (0 or more, or "
			    "-1 for the manager)",
			    name);
		return -EINVAL;
	}
	if (!rank)
		n = snprintf(path, len, "%s/%s", lp->basedir, node->handle);
	else if (node->rank == -1)
		n = snprintf(path, len, "%s/%s/manager", lp->basedir,
			     node->handle);
	else
		n = snprintf(path, len, "%s/%s/%d", lp->basedir, node->handle,
			     node->rank);
	if (n < 0 || (size_t)n >= len) {
		local_error(err, errlen,
			    "the working directory of %s would be longer than "
			    "%zu bytes",
			    name, len - 1);
		return -ENAMETOOLONG;
	}
	if (rank && node->workdir[0] &&
	    strncmp(node->workdir, path, sizeof(node->workdir)) != 0) {
		local_error(err, errlen,
			    "%s has the working directory %.*s, which is not "
			    "%s of the local provider",
			    name,
			    (int)strnlen(node->workdir, PROVIDER_PATH_MAX),
			    node->workdir, path);
		return -EINVAL;
	}
	return 0;
}

/* "CCLFS_INSTANCE=<instance_id>" of a created node. */
static int local_node_entry(const struct provider_node *node, char *entry,
			    size_t len, char *err, size_t errlen)
{
	char name[LOCAL_NAME_MAX];
	size_t n = strnlen(node->instance_id, sizeof(node->instance_id));

	if (n == 0 || n >= sizeof(node->instance_id)) {
		local_node_name(node, name, sizeof(name));
		local_error(err, errlen,
			    "%s has not been created (it has no instance id)",
			    name);
		return -EINVAL;
	}
	snprintf(entry, len, "%s=%s", LOCAL_ENV_NAME, node->instance_id);
	return 0;
}

/* mkdir -p. A parent that vanishes meanwhile (a terminate removing an empty
 * cluster directory) is made again. */
static int local_mkdir_p(const char *path, mode_t mode)
{
	char buf[PROVIDER_PATH_MAX + 1];
	size_t len = strlen(path);
	struct stat st;

	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	for (int tries = 0; tries < 8; tries++) {
		bool again = false;

		memcpy(buf, path, len + 1);
		for (char *p = buf + 1;; p++) {
			char c = *p;

			if (c != '/' && c != '\0')
				continue;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST) {
				if (errno != ENOENT)
					return -errno;
				again = true;
				break;
			}
			*p = c;
			if (c == '\0')
				break;
		}
		if (again)
			continue;
		if (stat(path, &st) < 0)
			return -errno;
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	}
	return -ENOENT;
}

/* "local-" and 16 random hex digits. */
static int local_new_id(char *out, size_t len)
{
	unsigned char r[8];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	snprintf(out, len, "local-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1],
		 r[2], r[3], r[4], r[5], r[6], r[7]);
	return 0;
}

static int local_create_one(struct provider *p, struct provider_batch *b,
			    size_t i)
{
	struct local_provider *lp = (struct local_provider *)p;
	char *err = b->results[i].msg;
	size_t errlen = sizeof(b->results[i].msg);

	{
		struct provider_node *node = &b->nodes[i];
		char dir[PROVIDER_PATH_MAX + 1], id[PROVIDER_ID_MAX + 1] = "";
		char name[LOCAL_NAME_MAX];
		int rc = local_node_dir(lp, node, true, dir, sizeof(dir), err,
					errlen);

		if (rc < 0)
			return rc;
		local_node_name(node, name, sizeof(name));
		if (!node->instance_id[0] &&
		    (rc = local_new_id(id, sizeof(id))) < 0) {
			local_error(err, errlen,
				    "cannot make an instance id for %s: %s",
				    name, local_strerror(-rc));
			return rc;
		}
		rc = local_mkdir_p(dir, 0700);
		if (rc < 0) {
			local_error(err, errlen,
				    "cannot create the working directory %s of "
				    "%s: %s",
				    dir, name, local_strerror(-rc));
			return rc;
		}
		if (id[0]) {
			snprintf(node->instance_id, sizeof(node->instance_id),
				 "%s", id);
			snprintf(node->address, sizeof(node->address),
				 "localhost");
		}
		if (!node->workdir[0])
			snprintf(node->workdir, sizeof(node->workdir), "%s",
				 dir);
	}
	return 0;
}

/* Whether the environment of the process whose /proc directory is `dirfd`
 * holds exactly `entry` (NAME=VALUE), read as a stream of NUL-terminated
 * strings: LOCAL_ENV_HAS, LOCAL_ENV_OTHER, or LOCAL_ENV_BLANK when it reads
 * as empty (kernel threads, and a process in the middle of an exec until the
 * kernel has laid out its new stack). Unreadable processes hold nothing. */
static enum local_env local_proc_env(int dirfd, const char *entry, size_t len)
{
	char buf[4096];
	size_t pos = 0, total = 0;
	bool match = true, found = false;
	ssize_t n;
	int fd = openat(dirfd, "environ", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return LOCAL_ENV_OTHER;
	while (!found && ((n = read(fd, buf, sizeof(buf))) > 0 ||
			  (n < 0 && errno == EINTR))) {
		total += n > 0 ? (size_t)n : 0;
		for (ssize_t i = 0; i < n; i++) {
			char c = buf[i];

			if (c == '\0') {
				if (match && pos == len) {
					found = true;
					break;
				}
				pos = 0;
				match = true;
			} else if (match && pos < len && c == entry[pos]) {
				pos++;
			} else {
				match = false;
			}
		}
	}
	close(fd);
	if (total == 0)
		return LOCAL_ENV_BLANK;
	return found || (match && pos == len) ? LOCAL_ENV_HAS : LOCAL_ENV_OTHER;
}

/* The fields of /proc/PID/stat after "PID (COMM) ", read into buf, or NULL.
 * COMM may hold ')' but the fields after it are numbers. */
static const char *local_proc_stat(int dirfd, char *buf, size_t size)
{
	const char *paren;
	ssize_t n;
	int fd = openat(dirfd, "stat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	paren = memrchr(buf, ')', (size_t)n);
	return paren && paren + 2 < buf + n ? paren + 2 : NULL;
}

/* The state letter in /proc/PID/stat ('R', 'S', 'T'...), or 0. */
static char local_proc_state(int dirfd)
{
	char buf[256];
	const char *f = local_proc_stat(dirfd, buf, sizeof(buf));

	return f ? f[0] : 0;
}

/* The parent's pid from /proc/PID/stat ("S PPID ..."), or 0. */
static pid_t local_proc_ppid(int dirfd)
{
	char buf[256];
	const char *f = local_proc_stat(dirfd, buf, sizeof(buf));
	long ppid = f && f[1] == ' ' ? strtol(f + 2, NULL, 10) : 0;

	return ppid > 0 && ppid <= INT_MAX ? (pid_t)ppid : 0;
}

/* Whether SIGSTOP is pending for the process: it stops as soon as it leaves
 * the kernel. A shell waiting in vfork for a child that we stopped before
 * its exec stays in state D, and would never reach T. */
static bool local_proc_stop_pending(int dirfd)
{
	static const char *const keys[] = {"\nShdPnd:", "\nSigPnd:"};
	unsigned long long bit = 1ULL << (SIGSTOP - 1);
	char buf[4096];
	ssize_t n;
	int fd = openat(dirfd, "status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v = strstr(buf, keys[i]);

		if (v && strtoull(v + strlen(keys[i]), NULL, 16) & bit)
			return true;
	}
	return false;
}

/* Send `sig` to the process behind `pidfd` (or `pid` when pidfds are not
 * supported). 0, or -errno; a process that is gone is not an error. */
static int local_proc_signal(pid_t pid, int pidfd, int sig)
{
	int rc = pidfd >= 0 ? pidfd_send_signal(pidfd, sig, NULL, 0)
			    : kill(pid, sig);

	return rc < 0 && errno != ESRCH ? -errno : 0;
}

/* Append to one of the pass's lists; on failure the pass reports ENOMEM. */
static void *local_grow(void *arr, size_t *cap, size_t n, size_t size,
			bool *nomem)
{
	void *bigger;
	size_t want = *cap ? *cap * 2 : 64;

	if (n < *cap)
		return arr;
	bigger = reallocarray(arr, want, size);
	if (!bigger) {
		*nomem = true;
		return NULL;
	}
	*cap = want;
	return bigger;
}

/* Look at one process for the node, and signal it if `sig` calls for it:
 * SIGSTOP a process neither stopped nor about to, SIGCONT and SIGKILL any. The
 * pidfd is opened before the environment is read again, so that a pid reused
 * meanwhile is never signalled. `blank` takes a process whose environment
 * reads as empty, known to be the child of one of the node's. */
static void local_scan_one(int procfd, const char *pidname, pid_t pid,
			   const char *entry, size_t len, int sig, bool blank,
			   struct local_scan *s)
{
	int dirfd = openat(procfd, pidname,
			   O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	enum local_env want = blank ? LOCAL_ENV_BLANK : LOCAL_ENV_HAS;
	enum local_env env;
	int pidfd = -1;
	bool stopped, pending;
	char state;

	if (dirfd < 0)
		return;
	env = local_proc_env(dirfd, entry, len);
	if (env == LOCAL_ENV_BLANK && !blank) {
		struct local_blank *b =
			local_grow(s->blank, &s->capblank, s->nblank,
				   sizeof(*s->blank), &s->nomem);

		if (b) {
			s->blank = b;
			b[s->nblank].pid = pid;
			b[s->nblank++].ppid = local_proc_ppid(dirfd);
		}
		goto out;
	}
	/* A blank one may have finished its exec meanwhile. */
	if (env != want && !(blank && env == LOCAL_ENV_HAS))
		goto out;
	if (sig) {
		pidfd = pidfd_open(pid, 0);
		if (pidfd < 0 && errno != ENOSYS)
			goto out; /* gone */
		env = local_proc_env(dirfd, entry, len);
		if (pidfd >= 0 && env != LOCAL_ENV_HAS &&
		    !(blank && env == LOCAL_ENV_BLANK))
			goto out;
	}
	/* Pending first: a process takes SIGSTOP off its pending set and
	 * enters T under one lock, so it is seen as one or the other. */
	pending =
		(sig == 0 || sig == SIGSTOP) && local_proc_stop_pending(dirfd);
	state = local_proc_state(dirfd);
	if (state == 0 || state == 'Z' || state == 'X')
		goto out;
	if (!blank) {
		pid_t *m = local_grow(s->mine, &s->capmine, s->nmine,
				      sizeof(*s->mine), &s->nomem);

		if (m) {
			s->mine = m;
			m[s->nmine++] = pid;
		}
	}
	s->found++;
	stopped = pending || state == 'T' || state == 't';
	if (stopped)
		s->stopped++;

	if (sig && !(sig == SIGSTOP && stopped)) {
		if (local_proc_signal(pid, pidfd, sig) < 0) {
			if (!s->denied)
				s->denied = pid;
		} else {
			s->signalled++;
		}
	}
out:
	if (pidfd >= 0)
		close(pidfd);
	close(dirfd);
}

static int local_pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* One pass over /proc for the processes whose environment holds `entry`,
 * sending them `sig` (0: only count them). A child of one of them caught in
 * the middle of an exec shows no environment yet: it is the node's too.
 * 0, or -errno. */
static int local_scan_pass(const char *entry, int sig, struct local_scan *s)
{
	size_t len = strlen(entry);
	pid_t self = getpid();
	struct dirent *e;
	DIR *d = opendir("/proc");
	int rc = 0;

	memset(s, 0, sizeof(*s));
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid > INT_MAX || pid == self)
			continue;
		local_scan_one(dirfd(d), e->d_name, (pid_t)pid, entry, len, sig,
			       false, s);
	}
	if (s->nmine)
		qsort(s->mine, s->nmine, sizeof(*s->mine), local_pid_cmp);
	for (size_t i = 0; s->nmine && i < s->nblank; i++) {
		char name[16];

		if (!bsearch(&s->blank[i].ppid, s->mine, s->nmine,
			     sizeof(*s->mine), local_pid_cmp))
			continue;
		snprintf(name, sizeof(name), "%d", (int)s->blank[i].pid);
		local_scan_one(dirfd(d), name, s->blank[i].pid, entry, len, sig,
			       true, s);
	}
	closedir(d);
	if (s->nomem)
		rc = -ENOMEM;
	free(s->mine);
	free(s->blank);
	s->mine = NULL;
	s->blank = NULL;
	s->nmine = s->capmine = s->nblank = s->capblank = 0;
	return rc;
}

/* Signal every process whose environment holds `entry` (those of a node,
 * or of one command; `name` says which in errors), again and again until a
 * pass finds none that still needs it: processes may fork while we scan. */
static int local_signal_entry(const char *entry, const char *name, int sig,
			      char *err, size_t errlen)
{
	struct local_scan s = {0};
	long delay = LOCAL_ROUND_FIRST;
	int clean = 0;
	int rc;

	for (int pass = 0; pass < LOCAL_PASSES; pass++) {
		rc = local_scan_pass(entry, sig, &s);
		if (rc < 0) {
			local_error(err, errlen,
				    "cannot list the processes of %s: %s", name,
				    local_strerror(-rc));
			return rc;
		}
		if (s.denied) {
			local_error(err, errlen,
				    "process %d of %s cannot be sent SIG%s: %s",
				    (int)s.denied, name, sigabbrev_np(sig),
				    local_strerror(EPERM));
			return -EPERM;
		}
		/* Two clean passes in a row: a child in the middle of its
		 * exec shows an empty environment for a moment, and one pass
		 * can miss it (for SIGKILL too: the child of a shell killed
		 * while it forked would outlive the node's end). */
		if (sig == SIGSTOP)
			clean = s.signalled == 0 ? clean + 1 : 0;
		else if (sig == SIGKILL)
			clean = s.found == 0 ? clean + 1 : 0;
		if (sig == SIGSTOP && (clean == 2 || (clean && s.found == 0)))
			return 0;
		if (sig == SIGKILL && clean == 2)
			return 0;
		/* SIGCONT acts at once; a second pass catches processes a
		 * continued one forked while we scanned. */
		if (sig == SIGCONT && (s.found == 0 || pass == 1))
			return 0;
		if (clean) {
			local_sleep(LOCAL_ROUND_FIRST);
		} else if (sig != SIGCONT) {
			local_sleep(delay);
			delay = delay * 2 > LOCAL_ROUND_MAX ? LOCAL_ROUND_MAX
							    : delay * 2;
		}
	}
	if (sig == SIGSTOP)
		local_error(err, errlen,
			    "%zu processes of %s did not stop after %d rounds "
			    "of SIGSTOP",
			    s.signalled, name, LOCAL_PASSES);
	else
		local_error(err, errlen,
			    "%zu processes of %s are still alive after %d "
			    "rounds of SIGKILL",
			    s.found, name, LOCAL_PASSES);
	return -EBUSY;
}

/* Signal every process of the node. */
static int local_signal_node(const struct provider_node *node, int sig,
			     char *err, size_t errlen)
{
	char entry[LOCAL_ENTRY_MAX], name[LOCAL_NAME_MAX];
	int rc = local_node_entry(node, entry, sizeof(entry), err, errlen);

	if (rc < 0)
		return rc;
	local_node_name(node, name, sizeof(name));
	return local_signal_entry(entry, name, sig, err, errlen);
}

/* "CCLFS_EXEC=<tag>": what marks the processes of one command. */
static int local_exec_entry(const struct provider_node *node, const char *tag,
			    char *entry, size_t len, char *err, size_t errlen)
{
	size_t n = strnlen(tag, LOCAL_TAG_MAX + 1);
	char name[LOCAL_NAME_MAX];

	for (size_t i = 0; i < n && n <= LOCAL_TAG_MAX; i++)
		if (!isalnum((unsigned char)tag[i]) && !strchr("._-", tag[i]))
			n = 0;
	if (n == 0 || n > LOCAL_TAG_MAX) {
		local_node_name(node, name, sizeof(name));
		local_error(err, errlen,
			    "the command on %s has a tag that is not valid (1 "
			    "to %d letters, digits, '.', '_' or '-')",
			    name, LOCAL_TAG_MAX);
		return -EINVAL;
	}
	snprintf(entry, len, "%s=%s", LOCAL_EXEC_NAME, tag);
	return 0;
}

/* The daemon was cut off while the command of `tag` ran: its processes,
 * and what they started, are killed. */
static int local_end_lost(struct provider *p, const struct provider_node *node,
			  const char *tag, char *err, size_t errlen)
{
	char entry[LOCAL_EXEC_ENTRY_MAX], name[LOCAL_NAME_MAX + 64];
	char node_name[LOCAL_NAME_MAX];
	int rc = local_exec_entry(node, tag, entry, sizeof(entry), err, errlen);

	(void)p;
	if (rc < 0)
		return rc;
	local_node_name(node, node_name, sizeof(node_name));
	snprintf(name, sizeof(name), "the lost command on %s", node_name);
	return local_signal_entry(entry, name, SIGKILL, err, errlen);
}

/* The signal of a batch action, to every process of node i. */
static int local_signal_one(struct provider *p, struct provider_batch *b,
			    size_t i, int sig)
{
	(void)p;
	/* Never created (a deploy cut short): nothing runs there. */
	if (!b->nodes[i].instance_id[0])
		return 0;
	return local_signal_node(&b->nodes[i], sig, b->results[i].msg,
				 sizeof(b->results[i].msg));
}

static int local_stop_one(struct provider *p, struct provider_batch *b,
			  size_t i)
{
	return local_signal_one(p, b, i, SIGSTOP);
}

static int local_start_one(struct provider *p, struct provider_batch *b,
			   size_t i)
{
	return local_signal_one(p, b, i, SIGCONT);
}

static int local_sig_one(struct provider *p, struct provider_batch *b, size_t i)
{
	char entry[LOCAL_ENTRY_MAX];
	struct local_scan s = {0};
	int rc;

	if (b->sig != 0 || !b->nodes[i].instance_id[0])
		return local_signal_one(p, b, i, b->sig);
	/* Signal 0: only look for a process of the node. */
	rc = local_node_entry(&b->nodes[i], entry, sizeof(entry),
			      b->results[i].msg, sizeof(b->results[i].msg));
	if (rc == 0)
		rc = local_scan_pass(entry, 0, &s);
	b->results[i].busy = rc == 0 && s.found > 0;
	return rc < 0 ? rc : 0;
}

/* nftw callback of local_remove_tree: returns an errno to stop the walk. */
static int local_remove_entry(const char *path, const struct stat *st, int type,
			      struct FTW *ftw)
{
	int rc;

	(void)st;
	(void)ftw;
	if (type == FTW_DP || type == FTW_D || type == FTW_DNR)
		rc = rmdir(path);
	else
		rc = unlink(path);
	return rc < 0 && errno != ENOENT ? errno : 0;
}

/* rm -r that follows no symlink and stays on one filesystem; a missing
 * directory is removed already. 0, or -errno. */
static int local_remove_tree(const char *dir)
{
	int rc = nftw(dir, local_remove_entry, 16,
		      FTW_DEPTH | FTW_PHYS | FTW_MOUNT);

	if (rc < 0)
		return errno == ENOENT ? 0 : -errno;
	return -rc;
}

static int local_terminate_one(struct provider *p, struct provider_batch *b,
			       size_t i)
{
	struct local_provider *lp = (struct local_provider *)p;
	const struct provider_node *node = &b->nodes[i];
	char *err = b->results[i].msg;
	size_t errlen = sizeof(b->results[i].msg);
	char dir[PROVIDER_PATH_MAX + 1], name[LOCAL_NAME_MAX];
	int rc = local_node_dir(lp, node, true, dir, sizeof(dir), err, errlen);

	if (rc < 0)
		return rc;
	/* A node whose create crashed before its id was recorded has no
	 * processes, but may have its directory. */
	if (node->instance_id[0]) {
		rc = local_signal_node(node, SIGKILL, err, errlen);
		if (rc < 0)
			return rc;
	}
	rc = local_remove_tree(dir);
	if (rc < 0) {
		local_node_name(node, name, sizeof(name));
		local_error(err, errlen,
			    "cannot remove the working directory %s of %s: %s",
			    dir, name, local_strerror(-rc));
		return rc;
	}
	/* A command started while the tree was being removed is killed
	 * too: nothing of the node may outlive its terminate. */
	if (node->instance_id[0]) {
		rc = local_signal_node(node, SIGKILL, err, errlen);
		if (rc < 0)
			return rc;
	}
	/* The cluster's directory goes with its last node. */
	if (local_node_dir(lp, node, false, dir, sizeof(dir), NULL, 0) == 0)
		rmdir(dir);
	return 0;
}

static int local_describe_one(struct provider *p, struct provider_batch *b,
			      size_t i)
{
	struct local_provider *lp = (struct local_provider *)p;
	const struct provider_node *node = &b->nodes[i];
	enum provider_state *state = &b->results[i].state;
	char *err = b->results[i].msg;
	size_t errlen = sizeof(b->results[i].msg);
	char dir[PROVIDER_PATH_MAX + 1], entry[LOCAL_ENTRY_MAX];
	char name[LOCAL_NAME_MAX];
	struct local_scan s;
	struct stat st;
	int rc = local_node_dir(lp, node, true, dir, sizeof(dir), err, errlen);

	if (rc < 0)
		return rc;
	local_node_name(node, name, sizeof(name));
	if (!node->instance_id[0]) { /* never created */
		*state = PROVIDER_NODE_GONE;
		return 0;
	}
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT) {
			*state = PROVIDER_NODE_GONE;
			return 0;
		}
		rc = -errno;
		local_error(err, errlen,
			    "cannot look at the working directory %s of %s: %s",
			    dir, name, local_strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		local_error(err, errlen,
			    "the working directory %s of %s is not a directory",
			    dir, name);
		return -ENOTDIR;
	}
	rc = local_node_entry(node, entry, sizeof(entry), err, errlen);
	if (rc < 0)
		return rc;
	rc = local_scan_pass(entry, 0, &s);
	if (rc < 0) {
		local_error(err, errlen, "cannot list the processes of %s: %s",
			    name, local_strerror(-rc));
		return rc;
	}
	*state = s.stopped > 0 && s.stopped == s.found ? PROVIDER_NODE_STOPPED
						       : PROVIDER_NODE_RUNNING;
	return 0;
}

/* Length of the NAME in "NAME=VALUE". */
static size_t local_env_name_len(const char *e)
{
	const char *eq = strchr(e, '=');

	return eq ? (size_t)(eq - e) : strlen(e);
}

static bool local_env_same(const char *a, const char *b)
{
	size_t n = local_env_name_len(a);

	return n == local_env_name_len(b) && memcmp(a, b, n) == 0;
}

/* Whether the daemon's entry e is one a local command gets: the login's
 * basics, the locale, the time zone, and Open MPI's consent to run as
 * root (which mpirun wants, as the daemon's user, for mpiexec). */
static bool local_env_kept(const char *e)
{
	static const char *const names[] = {"PATH",
					    "HOME",
					    "USER",
					    "LOGNAME",
					    "LANG",
					    "TZ",
					    "OMPI_ALLOW_RUN_AS_ROOT",
					    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"};
	size_t n = local_env_name_len(e);

	if (!e[n])
		return false;
	if (n > 3 && strncmp(e, "LC_", 3) == 0)
		return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && memcmp(e, names[i], n) == 0)
			return true;
	return false;
}

/* Whether one of the first n entries of envp sets the name of e. */
static bool local_env_has(char *const *envp, size_t n, const char *e)
{
	for (size_t i = 0; i < n; i++)
		if (local_env_same(envp[i], e))
			return true;
	return false;
}

/* What the login would give that the daemon's environment lacks: PATH,
 * and HOME, USER and LOGNAME from the user's entry in the password
 * database; written into blob (NAME=VALUE\0...), each pointed to from
 * envp[*n...]. */
static void local_env_fill(char **envp, size_t *n, char *blob, size_t bloblen)
{
	struct passwd pw, *found = NULL;
	char buf[4096];
	size_t o = 0;
	const char *want[] = {"PATH=", "HOME=", "USER=", "LOGNAME="};
	size_t have = *n;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *v = NULL;
		int len;

		if (local_env_has(envp, have, want[i]))
			continue;
		if (i == 0) {
			v = LOCAL_DEFAULT_PATH;
		} else {
			if (!found && getpwuid_r(geteuid(), &pw, buf,
						 sizeof(buf), &found) != 0)
				found = NULL;
			if (found)
				v = i == 1 ? found->pw_dir : found->pw_name;
		}
		if (!v)
			continue;
		len = snprintf(blob + o, bloblen - o, "%s%s", want[i], v);
		if (len < 0 || (size_t)len >= bloblen - o)
			break;
		envp[(*n)++] = blob + o;
		o += (size_t)len + 1;
	}
}

/* Room for local_env_fill's entries. */
#define LOCAL_FILL_MAX 8192

/* The command's environment, and nothing else: what local_env_kept keeps of
 * the daemon's (with what the login would give filled in), CCLFS_INSTANCE,
 * CCLFS_EXEC when the command has a tag, then the extra entries (the last
 * of a name wins). One allocation; the daemon's and the extra strings are
 * not copied. */
static int local_env_build(const char *entry, const char *exec_entry,
			   const char *const *extra, const char *name,
			   char ***out, char *err, size_t errlen)
{
	size_t nenv = 0, nextra = 0, n = 0;
	char **envp;

	for (size_t i = 0; extra && extra[i]; i++, nextra++) {
		size_t len = local_env_name_len(extra[i]);

		if (len == 0 || !extra[i][len]) {
			local_error(err, errlen,
				    "the environment entry \"%s\" for the "
				    "command on %s is not NAME=VALUE",
				    extra[i], name);
			return -EINVAL;
		}
		if (local_env_same(extra[i], entry) ||
		    local_env_same(extra[i], LOCAL_EXEC_NAME "=")) {
			local_error(err, errlen,
				    "the command on %s may not set %.*s: cclfs "
				    "sets it",
				    name, (int)len, extra[i]);
			return -EINVAL;
		}
	}
	for (char **e = environ; e && *e; e++)
		nenv++;
	envp = calloc(1, (nenv + nextra + 8) * sizeof(*envp) + LOCAL_FILL_MAX);
	if (!envp) {
		local_error(err, errlen,
			    "out of memory for the command's environment on %s",
			    name);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nenv; i++) {
		bool later = !local_env_kept(environ[i]);

		/* The daemon's own duplicates: the first one, as getenv. */
		later = later || local_env_has(envp, n, environ[i]);
		for (size_t j = 0; !later && j < nextra; j++)
			later = local_env_same(environ[i], extra[j]);
		if (!later)
			envp[n++] = environ[i];
	}
	{
		size_t have = n;

		local_env_fill(envp, &n, (char *)(envp + nenv + nextra + 8),
			       LOCAL_FILL_MAX);
		/* An extra entry of a name the fill gave wins over it. */
		for (size_t i = have; i < n; i++)
			for (size_t j = 0; j < nextra; j++)
				if (local_env_same(envp[i], extra[j])) {
					memmove(envp + i, envp + i + 1,
						(n - i - 1) * sizeof(*envp));
					n--;
					i--;
					break;
				}
	}
	envp[n++] = (char *)entry;
	if (exec_entry)
		envp[n++] = (char *)exec_entry;
	for (size_t i = 0; i < nextra; i++) {
		bool later = false;

		for (size_t j = i + 1; !later && j < nextra; j++)
			later = local_env_same(extra[i], extra[j]);
		if (!later)
			envp[n++] = (char *)extra[i];
	}
	envp[n] = NULL;
	*out = envp;
	return 0;
}

/* Wait for the command, polling `cancelled` between ever longer sleeps. */
static int local_wait(pid_t pid, struct provider_run *run, const char *name,
		      char *err, size_t errlen)
{
	long delay = LOCAL_POLL_FIRST;
	int status = 0, rc = 0;
	/* Readable when the child exits: the sleeps end at once then. */
	struct pollfd pfd = {.fd = pidfd_open(pid, 0), .events = POLLIN};

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			rc = -errno;
			kill(-pid, SIGKILL);
			local_error(err, errlen,
				    "lost track of the command on %s: %s", name,
				    local_strerror(-rc));
			break;
		}
		if (run->cancelled && run->cancelled(run->cancel_ctx)) {
			kill(-pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			local_error(err, errlen,
				    "the command on %s was cancelled", name);
			rc = -EINTR;
			break;
		}
		if (pfd.fd >= 0) {
			struct timespec ts = {.tv_nsec = delay};

			ppoll(&pfd, 1, &ts, NULL);
		} else {
			local_sleep(delay);
		}
		delay = delay * 2 > LOCAL_POLL_MAX ? LOCAL_POLL_MAX : delay * 2;
	}
	if (pfd.fd >= 0)
		close(pfd.fd);
	if (rc < 0)
		return rc;
	if (WIFEXITED(status))
		run->exit_status = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		run->exit_status = 128 + WTERMSIG(status);
	else
		run->exit_status = 255;
	return 0;
}

/* Start the command with posix_spawn: its own process group, /dev/null
 * in, the output files out, the node's directory, default signals and no
 * other descriptor. Returns its pid, or -errno with the message in err. */
static pid_t local_spawn(const struct local_child *c, const char *name,
			 char *err, size_t errlen)
{
	const int wr = O_WRONLY | O_CREAT | O_TRUNC;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t all, none;
	pid_t pid = -1;
	int rc;

	sigfillset(&all);
	sigemptyset(&none);
	rc = posix_spawn_file_actions_init(&fa);
	if (rc) {
		local_error(err, errlen, "cannot start a process for %s: %s",
			    name, local_strerror(rc));
		return -rc;
	}
	rc = posix_spawnattr_init(&attr);
	if (rc == 0) {
		rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
						      O_RDONLY, 0);
		if (!rc)
			rc = posix_spawn_file_actions_addopen(
				&fa, 1, c->stdout_path, wr, 0600);
		if (!rc)
			rc = c->same ? posix_spawn_file_actions_adddup2(&fa, 1,
									2)
				     : posix_spawn_file_actions_addopen(
					       &fa, 2, c->stderr_path, wr,
					       0600);
		if (!rc)
			rc = posix_spawn_file_actions_addchdir_np(&fa, c->dir);
		if (!rc)
			rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
		if (!rc)
			rc = posix_spawnattr_setflags(
				&attr, POSIX_SPAWN_SETPGROUP |
					       POSIX_SPAWN_SETSIGDEF |
					       POSIX_SPAWN_SETSIGMASK);
		if (!rc)
			rc = posix_spawnattr_setpgroup(&attr, 0);
		if (!rc)
			rc = posix_spawnattr_setsigdefault(&attr, &all);
		if (!rc)
			rc = posix_spawnattr_setsigmask(&attr, &none);
		if (!rc)
			rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, c->argv,
					 c->envp);
		posix_spawnattr_destroy(&attr);
	}
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		/* An output file, /dev/null, the directory or /bin/sh. */
		local_error(err, errlen,
			    "cannot start the command on %s (working directory "
			    "%s, output %s): %s",
			    name, c->dir, c->stdout_path, local_strerror(rc));
		return -rc;
	}
	return pid;
}

static int local_run(struct provider *p, const struct provider_node *node,
		     struct provider_run *run, char *err, size_t errlen)
{
	struct local_provider *lp = (struct local_provider *)p;
	char dir[PROVIDER_PATH_MAX + 1], entry[LOCAL_ENTRY_MAX];
	char name[LOCAL_NAME_MAX], exec_entry[LOCAL_EXEC_ENTRY_MAX];
	char *argv[] = {"sh", "-c", (char *)run->command, NULL};
	char **envp = NULL;
	struct local_child c = {.dir = dir, .argv = argv};
	struct stat st;
	pid_t pid = -1;
	int rc;

	run->exit_status = -1;
	rc = local_node_dir(lp, node, true, dir, sizeof(dir), err, errlen);
	if (rc < 0)
		return rc;
	rc = local_node_entry(node, entry, sizeof(entry), err, errlen);
	if (rc < 0)
		return rc;
	local_node_name(node, name, sizeof(name));
	if (!run->command) {
		local_error(err, errlen, "no command to run on %s", name);
		return -EINVAL;
	}
	rc = stat(dir, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (rc == -ENOENT || rc == -ENOTDIR) {
		local_error(err, errlen, "%s has no working directory (%s)",
			    name, dir);
		return -ENOENT;
	}
	if (rc < 0) {
		local_error(err, errlen,
			    "cannot look at the working directory %s of %s: %s",
			    dir, name, local_strerror(-rc));
		return rc;
	}
	if (run->tag) {
		rc = local_exec_entry(node, run->tag, exec_entry,
				      sizeof(exec_entry), err, errlen);
		if (rc < 0)
			return rc;
	}
	rc = local_env_build(entry, run->tag ? exec_entry : NULL, run->env,
			     name, &envp, err, errlen);
	if (rc < 0)
		return rc;
	c.envp = envp;
	c.stdout_path = run->stdout_path ? run->stdout_path : "/dev/null";
	c.stderr_path = run->stderr_path ? run->stderr_path : "/dev/null";
	c.same = run->stdout_path && run->stderr_path &&
		 strcmp(run->stdout_path, run->stderr_path) == 0;
	pid = local_spawn(&c, name, err, errlen);
	rc = pid < 0 ? (int)pid : 0;
	free(envp);
	/* Only a pidfd stays open while the command runs: a few hundred
	 * commands at once fit in the usual limit of 1024 fds. */
	return rc < 0 ? rc : local_wait(pid, run, name, err, errlen);
}

static void local_close(struct provider *p)
{
	free(p);
}

#define LOCAL_EACH(name)                                                       \
	static int name(struct provider *p, struct provider_batch *b)          \
	{                                                                      \
		return provider_each(p, b, name##_one);                        \
	}
LOCAL_EACH(local_create)
LOCAL_EACH(local_stop)
LOCAL_EACH(local_start)
LOCAL_EACH(local_sig)
LOCAL_EACH(local_terminate)
LOCAL_EACH(local_describe)

/* Every node is this machine: nothing to prepare. */
static const struct provider_ops local_ops = {
	.caps = PROVIDER_CAN_STOP | PROVIDER_HAS_FILES | PROVIDER_CAN_RESIZE,
	.files = &local_file_ops,
	.act =
		{
			[PROVIDER_CREATE] = local_create,
			[PROVIDER_STOP] = local_stop,
			[PROVIDER_START] = local_start,
			[PROVIDER_TERMINATE] = local_terminate,
			[PROVIDER_SIGNAL] = local_sig,
			[PROVIDER_DESCRIBE] = local_describe,
		},
	.run = local_run,
	.end_lost = local_end_lost,
	.close = local_close,
};

struct provider *local_provider_open(const char *basedir, char *err,
				     size_t errlen)
{
	struct local_provider *lp;
	char *abs;
	int rc;

	if (!basedir || !basedir[0]) {
		local_error(err, errlen,
			    "the local provider needs a base directory");
		errno = EINVAL;
		return NULL;
	}
	rc = local_mkdir_p(basedir, 0700);
	if (rc < 0) {
		local_error(err, errlen,
			    "cannot create the local provider's base directory "
			    "%s: %s",
			    basedir, local_strerror(-rc));
		errno = -rc;
		return NULL;
	}
	abs = realpath(basedir, NULL);
	if (!abs) {
		rc = errno;
		local_error(err, errlen,
			    "cannot resolve the local provider's base "
			    "directory %s: %s",
			    basedir, local_strerror(rc));
		errno = rc;
		return NULL;
	}
	/* Room for "/HANDLE/manager" below it. */
	if (strlen(abs) + 1 + 64 + sizeof("/manager") > PROVIDER_PATH_MAX + 1) {
		local_error(
			err, errlen,
			"the local provider's base directory %s is too long",
			abs);
		free(abs);
		errno = ENAMETOOLONG;
		return NULL;
	}
	lp = calloc(1, sizeof(*lp));
	if (!lp) {
		local_error(err, errlen,
			    "out of memory for the local provider");
		free(abs);
		errno = ENOMEM;
		return NULL;
	}
	lp->base.ops = &local_ops;
	lp->base.entry = &provider_local;
	snprintf(lp->basedir, sizeof(lp->basedir), "%s", abs);
	free(abs);
	return &lp->base;
}

static struct provider *local_open(const struct config *conf,
				   const char *statedir, char *err,
				   size_t errlen)
{
	char dir[PROVIDER_PATH_MAX + 1];

	(void)conf;
	snprintf(dir, sizeof(dir), "%.4000s/nodes", statedir);
	return local_provider_open(dir, err, errlen);
}

/* [local]: price, what a node costs an hour, for chargeback. */
static const struct confkeys_key local_conf_keys[] = {
	CONFKEYS_KEY("price", CONFKEYS_PRICE, struct provider_type, price, 0,
		     0),
};
#define LOCAL_NCONF_KEYS (sizeof(local_conf_keys) / sizeof(local_conf_keys[0]))

/* The one type, `local`: this machine as it is detected. */
static int local_types(const struct config *conf, struct provider_type **out,
		       size_t *n, char *err, size_t errlen)
{
	struct local_features lf;
	struct provider_type *t = calloc(1, sizeof(*t));
	struct utsname u;

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; conf && i < conf->count; i++) {
		if (strcmp(conf->entries[i].section, "local") == 0 &&
		    confkeys_apply(local_conf_keys, LOCAL_NCONF_KEYS,
				   conf->path, &conf->entries[i], t, err,
				   errlen)) {
			free(t);
			return -1;
		}
	}
	local_detect(&lf);
	snprintf(t->name, sizeof(t->name), "local");
	t->vcpus = lf.vcpus;
	t->memory_bytes = lf.memory_bytes;
	t->accelerators = lf.gpus;
	snprintf(t->accelerator, sizeof(t->accelerator), "%s",
		 lf.gpus > 0 ? lf.gpu : "");
	/* The kernel's name of this machine's architecture: x86_64, aarch64
	 * (the catalog's alias of arm64). */
	if (uname(&u) == 0)
		snprintf(t->architecture, sizeof(t->architecture), "%.15s",
			 u.machine);
	*out = t;
	*n = 1;
	return 0;
}

const struct provider_entry provider_local = {
	.name = "local",
	.platform_type = "Localhost",
	.section = "local",
	.open = local_open,
	.types = local_types,
};
