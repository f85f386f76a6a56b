/* The listing of an open directory of files/: read from the node once per
 * pass (opendir, or a rewind to the start) and kept until releasedir, so
 * that the kernel's several READDIR requests of one pass cost one. */
#ifndef CCLFS_FS_LISTING_H
#define CCLFS_FS_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

struct listing;

struct listing *listing_new(void);
void listing_free(struct listing *ls);
/* Empty it for a new pass (not filled until listing_done). */
void listing_clear(struct listing *ls);
/* Add an entry (st NULL: no attributes), in the shape of a provider's
 * readdir callback: 0, or 1 (stop) when out of memory. */
int listing_add(void *ls, const char *name, const struct stat *st);
/* The pass was read whole (ok) or not: only a whole one is used again. */
void listing_done(struct listing *ls, bool ok);
bool listing_filled(const struct listing *ls);
size_t listing_count(const struct listing *ls);
/* Entry i's name, and *st its attributes or NULL. */
const char *listing_entry(const struct listing *ls, size_t i,
			  const struct stat **st);

#endif
