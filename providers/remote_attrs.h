/* What an SFTP flight of files/ learned of a path besides its answer (the
 * attributes after a change, or at an open), kept for the getattrs the
 * kernel sends next, only while nothing changed the node's files since. */
#ifndef CCLFS_PROVIDERS_REMOTE_ATTRS_H
#define CCLFS_PROVIDERS_REMOTE_ATTRS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* How long an entry answers: the getattr it is for comes within a round
 * trip or two, and no kept answer may add much to the kernel's own 0.9 s
 * of attribute caching. */
#define REMOTE_ATTRS_NS 100000000LL

/* The count of changes ended so far: read it before a flight that asks
 * attributes, and give it to remote_attrs_put. */
uint64_t remote_attrs_epoch(void);
/* A change of files through the mount ended (whatever its result), or a
 * command ended on a node: every entry kept before is void. */
void remote_attrs_changed(void);
/* Keep st (the server's own, before any mapping) for `path` of `node`,
 * asked in a flight that began at epoch `before` and changed nothing: it
 * answers only while no change ended since. An st_mode of 0 (not known)
 * keeps nothing. */
void remote_attrs_put(const void *node, const char *path, const struct stat *st,
		      uint64_t before);
/* The same for a flight that made a change itself (the attributes are
 * those it left): counts the change, and keeps st only when no other
 * change ended during the flight. */
void remote_attrs_put_changed(const void *node, const char *path,
			      const struct stat *st, uint64_t before);
/* Path's entry: true, with st filled, while it is valid. */
bool remote_attrs_get(const void *node, const char *path, struct stat *st);
/* Drop every entry of node (its connection is freed). */
void remote_attrs_forget(const void *node);

#endif
