/* A provider's sections of cclfs.conf read through a table of keys: each key
 * names its kind of value and the field of the provider's settings it fills,
 * so every section checks, stores and explains its values the same way. */
#ifndef CCLFS_PROVIDERS_CONF_KEYS_H
#define CCLFS_PROVIDERS_CONF_KEYS_H

#include "providers/provider_conf.h"

#include <stdbool.h>
#include <stddef.h>

enum confkeys_kind {
	CONFKEYS_WORD,	   /* text without blanks, quotes, '&', '=' or '?' */
	CONFKEYS_NONEMPTY, /* a word, not empty */
	CONFKEYS_URL,	   /* a word starting http:// or https:// */
	CONFKEYS_TEXT,	   /* any text that fits (a file name, a login) */
	CONFKEYS_CHOICE,   /* one of the key's choices, stored as text */
	CONFKEYS_BOOL,	   /* yes, true, no or false: an int 1 or 0 */
	CONFKEYS_INT,	   /* a whole number in [min, max]: an int */
	CONFKEYS_MS,	  /* seconds in [min, max], fractions allowed: int ms */
	CONFKEYS_WHOLE_S, /* seconds in [min, max]: int seconds, rounded up */
	CONFKEYS_ATTEMPTS, /* retries in [min, max]: int attempts (one more) */
	CONFKEYS_PRICE,	   /* US dollars per hour: a double */
	CONFKEYS_PARSE,	   /* the key's own parse function */
};

struct confkeys_key {
	const char *name;
	enum confkeys_kind kind;
	bool secret;		    /* never echoed in an error */
	size_t offset, size;	    /* of the field in the settings */
	double min, max;	    /* CONFKEYS_INT, _MS, _WHOLE_S, _ATTEMPTS */
	const char *const *choices; /* CONFKEYS_CHOICE: NULL-terminated */
	/* CONFKEYS_PARSE: 0, or -1 when v is not valid (field untouched). */
	int (*parse)(const char *v, void *field, size_t size);
	const char *takes; /* CONFKEYS_PARSE: what a valid value is */
};

/* Table entries: a key named k filling field f of settings type T. */
#define CONFKEYS_FIELD(T, f)                                                   \
	.offset = offsetof(T, f), .size = sizeof(((T *)0)->f)
#define CONFKEYS_KEY(k, kd, T, f, lo, hi)                                      \
	{                                                                      \
		.name = (k), .kind = (kd), CONFKEYS_FIELD(T, f), .min = (lo),  \
		.max = (hi)                                                    \
	}
#define CONFKEYS_CHOICE_KEY(k, T, f, list)                                     \
	{                                                                      \
		.name = (k), .kind = CONFKEYS_CHOICE, CONFKEYS_FIELD(T, f),    \
		.choices = (list)                                              \
	}
#define CONFKEYS_PARSE_KEY(k, T, f, fn, what)                                  \
	{                                                                      \
		.name = (k), .kind = CONFKEYS_PARSE, CONFKEYS_FIELD(T, f),     \
		.parse = (fn), .takes = (what)                                 \
	}

/* The timings of a cloud provider's settings T (ec2, gcp): its fields
 * retry, connect_timeout_ms ... poll_max_ms, in seconds in cclfs.conf. */
#define CONFKEYS_CLOUD_TIMINGS(T)                                              \
	CONFKEYS_KEY("retries", CONFKEYS_ATTEMPTS, T, retry.attempts, 0, 100), \
		CONFKEYS_KEY("connect_timeout", CONFKEYS_MS, T,                \
			     connect_timeout_ms, 0.1, 3600),                   \
		CONFKEYS_KEY("command_timeout", CONFKEYS_MS, T,                \
			     command_timeout_ms, 0, 2000000),                  \
		CONFKEYS_KEY("keepalive", CONFKEYS_WHOLE_S, T, keepalive_s, 0, \
			     3600),                                            \
		CONFKEYS_KEY("boot_timeout", CONFKEYS_MS, T, boot_timeout_ms,  \
			     1, 86400),                                        \
		CONFKEYS_KEY("poll_interval", CONFKEYS_MS, T, poll_first_ms,   \
			     0.01, 600),                                       \
		CONFKEYS_KEY("poll_max", CONFKEYS_MS, T, poll_max_ms, 0.01,    \
			     600),                                             \
		CONFKEYS_KEY("retry_backoff", CONFKEYS_MS, T, retry.base_ms,   \
			     0.001, 600),                                      \
		CONFKEYS_KEY("retry_backoff_max", CONFKEYS_MS, T,              \
			     retry.max_ms, 0.001, 3600),                       \
		CONFKEYS_KEY("request_timeout", CONFKEYS_MS, T,                \
			     retry.request_timeout_ms, 0.1, 3600)

/* Store e's value through the key of table t (n keys) named as e's key,
 * into the settings at base. 0, or -1 with err naming the file, the
 * section, the key and the value, and saying which keys or values there
 * are; base is changed only when 0 is returned. */
int confkeys_apply(const struct confkeys_key *t, size_t n, const char *path,
		   const struct config_entry *e, void *base, char *err,
		   size_t errlen);

#endif
