/* The state directory: where it is ($XDG_STATE_HOME/cclfs or -o statedir=),
 * its creation with mode 0700, and the lock that keeps a second daemon
 * from using it at the same time. */
#include "lifecycle/statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
		snprintf(err, errlen, "state directory %s: %s", path,
			 strerror(errno));
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
