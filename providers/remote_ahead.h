/* Small files of an SSH node's directory opened and read ahead of their
 * opens: a copy out of a directory (tar, cp -r) opens its files in the
 * order of the listing, each an OPEN and a READ in turn on the node. */
#ifndef CCLFS_PROVIDERS_REMOTE_AHEAD_H
#define CCLFS_PROVIDERS_REMOTE_AHEAD_H

#include "providers/ssh.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct ssh_file;

/* The files of a listing that are worth reading ahead (regular, not
 * empty, at most this size); a directory's first REMOTE_AHEAD_LIST. */
#define REMOTE_AHEAD_SIZE ((off_t)64 << 10)
#define REMOTE_AHEAD_LIST 4096

/* Directory `dir` (the server's path) of connection c was listed: `names`
 * are its files worth reading ahead, in the listing's order. */
void remote_ahead_listed(struct ssh_conn *c, const char *dir,
			 const char *const *names, size_t n);
/* An open for reading of `path`: true with the handle opened ahead (its
 * first bytes read), the attributes seen at its open and the change count
 * (remote_attrs_epoch) before it, when it was opened within
 * REMOTE_ATTRS_NS and nothing changed since. Files opened in the
 * listing's order have the next ones opened ahead. */
bool remote_ahead_take(const struct ssh_conn *c, const char *path,
		       struct ssh_file **f, struct stat *st, uint64_t *epoch);
/* c is about to be freed: nothing of it is kept or in flight after. */
void remote_ahead_forget(const struct ssh_conn *c);

#endif
