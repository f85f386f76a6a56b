/* cclfs.conf: where it is found, its parsing (libinih, TOML-style
 * `[section]` / `key = "value"`), and the defaults it gives to contracts. */
#ifndef CCLFS_LIFECYCLE_CONFIG_H
#define CCLFS_LIFECYCLE_CONFIG_H

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
