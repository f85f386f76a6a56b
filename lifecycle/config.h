/* cclfs.conf: where it is found, its parsing (libinih, TOML-style
 * `[section]` / `key = "value"`), and the defaults it gives to contracts. */
#ifndef CCLFS_LIFECYCLE_CONFIG_H
#define CCLFS_LIFECYCLE_CONFIG_H

#include <stddef.h>

#include "providers/provider_conf.h"

/*
 * Find and read the configuration: `explicit_path` (-o config=) if given,
 * else $CCLFS_CONFIG, else ./cclfs.conf, else ~/.config/cclfs/cclfs.conf.
 * No file at the two last places is fine (built-in defaults); a file named
 * explicitly that cannot be read, or any file that does not parse, is an
 * error. Returns 0, or -1 with err filled ("FILE:LINE: why").
 */
int config_load(struct config *cfg, const char *explicit_path, char *err,
		size_t errlen);
void config_free(struct config *cfg);

/* The value of key in section, or NULL. */
const char *config_get(const struct config *cfg, const char *section,
		       const char *key);

#endif
