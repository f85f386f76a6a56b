/* The [hosts] and [hosts.NAME] sections of cclfs.conf: the machines of the
 * hosts provider, their features for the catalog, and how to reach them. */
#ifndef CCLFS_LIFECYCLE_HOSTSCONF_H
#define CCLFS_LIFECYCLE_HOSTSCONF_H

#include "providers/hosts/hosts.h"

#include <stddef.h>

struct config;

/* Read the hosts of cfg (in file order) into a malloc'd array and the
 * settings of [hosts]; statedir holds cclfs's own known_hosts. Returns 0,
 * or -1 with err naming the file, section, key and value. */
int hostsconf_read(const struct config *cfg, const char *statedir,
		   struct hosts_host **hosts, size_t *n,
		   struct hosts_settings *s, char *err, size_t errlen);

#endif
