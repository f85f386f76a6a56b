/* The instance-type catalog: every type resolution can choose from, as
 * feature vectors. It holds the `local` type of this machine; the cloud
 * providers' types are added from catalog/data/. */
#ifndef CCLFS_CATALOG_CATALOG_H
#define CCLFS_CATALOG_CATALOG_H

#include "resolver/match.h"

#include <stddef.h>

struct catalog;

struct catalog *catalog_open(char *err, size_t errlen);
void catalog_close(struct catalog *cat);

/* Add the `local` type of the local provider with these features. */
int catalog_add_local(struct catalog *cat, double vcpus, double memory_bytes);

size_t catalog_count(const struct catalog *cat);
/* Type i, for i < catalog_count(). */
const struct resolver_instance *catalog_at(const struct catalog *cat, size_t i);

#endif
