/* cclfs.conf as read (lifecycle/config.c parses it): its entries in file
 * order. Each provider reads its own section from this. */
#ifndef CCLFS_PROVIDERS_PROVIDER_CONF_H
#define CCLFS_PROVIDERS_PROVIDER_CONF_H

#include <limits.h>
#include <stddef.h>

struct config_entry {
	char *section;
	char *key;
	char *value;
};

struct config {
	char path[PATH_MAX]; /* the file read; "" when none was found */
	struct config_entry *entries;
	size_t count;
};

#endif
