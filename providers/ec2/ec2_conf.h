/* The [ec2] section of cclfs.conf: defaults for the contracts' config/
 * (imageid, subnet_id...), the login, and the provider's timings. */
#ifndef CCLFS_LIFECYCLE_EC2CONF_H
#define CCLFS_LIFECYCLE_EC2CONF_H

#include "providers/ec2/ec2.h"

#include <stddef.h>

struct config;

/* Fill s from cfg's [ec2] (defaults where it is silent); statedir holds
 * the generated keys and cclfs's known_hosts. 0, or -1 with err naming the
 * file, the key and the value. */
int ec2conf_read(const struct config *cfg, const char *statedir,
		 struct ec2_settings *s, char *err, size_t errlen);

#endif
