/* The state directory: where it is ($XDG_STATE_HOME/cclfs or -o statedir=),
 * its creation with mode 0700, and the lock that keeps a second daemon
 * from using it at the same time. */
#ifndef CCLFS_LIFECYCLE_STATEDIR_H
#define CCLFS_LIFECYCLE_STATEDIR_H

#include <stddef.h>

/*
 * Choose the state directory (explicit, else $XDG_STATE_HOME/cclfs, else
 * ~/.local/state/cclfs) into path, create it 0700 (parents as needed), and
 * take its lock. Returns the lock's descriptor (keep it open for the life
 * of the daemon), or -1 with err filled.
 */
int statedir_open(const char *explicit_dir, char *path, size_t pathlen,
		  char *err, size_t errlen);

/* Record the daemon's pid in the lock file (after it went to the
 * background). */
void statedir_set_pid(int lockfd);

#endif
