/* Catalog refreshes: a provider's catalog_refresh run in a thread of its
 * own, its rows merged with what the catalog knew, stored in the state
 * store and put in place of the provider's compiled-in rows; the state
 * catalog/PROVIDER/refresh reads back; the stored rows loaded at mount. */
#ifndef CCLFS_LIFECYCLE_REFRESH_H
#define CCLFS_LIFECYCLE_REFRESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct model;

/* Load the stored refreshes into the catalog (a refresh that no longer
 * loads is reported and left out: the compiled-in rows serve). Called once
 * the providers are open. 0, or -ENOMEM. */
int refresh_open(struct model *m, char *err, size_t errlen);
/* Cancel the refreshes under way and wait for them (unmount). */
void refresh_close(struct model *m);

/* Whether catalog/PROVIDER/refresh exists: the provider is set up and
 * has a catalog of its own to refresh. */
bool refresh_offered(struct model *m, const char *provider);
/* The content of catalog/PROVIDER/refresh (malloc'd) and when it last
 * changed; -ENOENT when it does not exist. */
int refresh_state(struct model *m, const char *provider, char **text,
		  size_t *len, int64_t *mtime_ns);
/* A write or touch of catalog/PROVIDER/refresh: empty or `refresh` starts
 * a refresh in the background, `default` goes back to the compiled-in
 * rows. 0, or -EBUSY (one is under way), -EINVAL (another word), or the
 * store's errno; each with a sentence in the log. */
int refresh_request(struct model *m, const char *provider, const char *value,
		    size_t len);
/* When the catalog last changed (mount, refresh, default). */
int64_t refresh_catalog_ns(struct model *m);

#endif
