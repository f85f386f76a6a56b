/* The [gcp] section of cclfs.conf, read through one table of keys into the
 * gcp provider's settings: words, URLs and durations in seconds, each
 * checked, an unknown key refused with the list of those there are. */
#include "providers/gcp/gcp_conf.h"

#include "providers/provider_conf.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum gcpconf_kind {
	GCPCONF_WORD,	  /* no blank, quote or URL delimiter */
	GCPCONF_NONEMPTY, /* a word, not empty */
	GCPCONF_URL,	  /* http:// or https:// */
	GCPCONF_PATH,	  /* anything */
	GCPCONF_ADDRESS,  /* public | private */
	GCPCONF_SECONDS,  /* a duration, stored in ms */
	GCPCONF_WHOLE_S,  /* a duration, stored in seconds rounded up */
	GCPCONF_RETRIES,  /* retries, stored as attempts */
};

struct gcpconf_key {
	const char *name;
	enum gcpconf_kind kind;
	size_t offset, size; /* of the field in gcp_settings */
	double min, max;     /* GCPCONF_SECONDS, GCPCONF_WHOLE_S */
};

#define GCPCONF_S(k, kind, field)                                              \
	{                                                                      \
		k, kind, offsetof(struct gcp_settings, field),                 \
			sizeof(((struct gcp_settings *)0)->field), 0, 0        \
	}
#define GCPCONF_T(k, field, lo, hi)                                            \
	{                                                                      \
		k, GCPCONF_SECONDS, offsetof(struct gcp_settings, field), 0,   \
			lo, hi                                                 \
	}

#define GCPCONF_W(k, field, lo, hi)                                            \
	{                                                                      \
		k, GCPCONF_WHOLE_S, offsetof(struct gcp_settings, field), 0,   \
			lo, hi                                                 \
	}

static const struct gcpconf_key gcpconf_keys[] = {
	GCPCONF_S("project", GCPCONF_WORD, project),
	GCPCONF_S("endpoint", GCPCONF_URL, endpoint),
	GCPCONF_S("billing_endpoint", GCPCONF_URL, billing_endpoint),
	GCPCONF_S("billing_api_key", GCPCONF_WORD, billing_api_key),
	GCPCONF_S("region", GCPCONF_WORD, region),
	GCPCONF_S("zone", GCPCONF_WORD, zone),
	GCPCONF_S("imageid", GCPCONF_WORD, imageid),
	GCPCONF_S("network", GCPCONF_WORD, network),
	GCPCONF_S("subnet_id", GCPCONF_WORD, subnet_id),
	GCPCONF_S("ssh_cidr", GCPCONF_NONEMPTY, ssh_cidr),
	GCPCONF_S("user", GCPCONF_NONEMPTY, user),
	GCPCONF_S("address", GCPCONF_ADDRESS, address),
	GCPCONF_S("known_hosts", GCPCONF_PATH, known_hosts),
	{"retries", GCPCONF_RETRIES, offsetof(struct gcp_settings, retry), 0, 0,
	 100},
	GCPCONF_T("connect_timeout", connect_timeout_ms, 0.1, 3600),
	GCPCONF_T("command_timeout", command_timeout_ms, 0, 2000000),
	/* libssh2 counts keepalives in seconds: 0.5 is 1, not 0 (off). */
	GCPCONF_W("keepalive", keepalive_s, 0, 3600),
	GCPCONF_T("boot_timeout", boot_timeout_ms, 1, 86400),
	GCPCONF_T("poll_interval", poll_first_ms, 0.01, 600),
	GCPCONF_T("poll_max", poll_max_ms, 0.01, 600),
	GCPCONF_T("retry_backoff", retry.base_ms, 0.001, 600),
	GCPCONF_T("retry_backoff_max", retry.max_ms, 0.001, 3600),
	GCPCONF_T("request_timeout", retry.request_timeout_ms, 0.1, 3600),
};
#define GCPCONF_NKEYS (sizeof(gcpconf_keys) / sizeof(gcpconf_keys[0]))

static void gcpconf_defaults(const char *statedir, struct gcp_settings *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->ssh_cidr, sizeof(s->ssh_cidr), "0.0.0.0/0");
	snprintf(s->user, sizeof(s->user), "cclfs");
	snprintf(s->address, sizeof(s->address), "public");
	snprintf(s->imageid, sizeof(s->imageid), "debian-12");
	snprintf(s->network, sizeof(s->network), "global/networks/default");
	snprintf(s->keydir, sizeof(s->keydir), "%.4000s/keys", statedir);
	snprintf(s->own_hosts, sizeof(s->own_hosts), "%.4000s/known_hosts",
		 statedir);
	s->connect_timeout_ms = 10000;
	s->command_timeout_ms = 86400 * 1000;
	s->keepalive_s = 15;
	s->boot_timeout_ms = 600 * 1000;
	s->poll_first_ms = 2000;
	s->poll_max_ms = 15000;
	s->retry.attempts = 8;
	s->retry.base_ms = 500;
	s->retry.max_ms = 20000;
	s->retry.request_timeout_ms = 60000;
}

/* Store v as k says: 0, or -1 when it is not valid. */
static int gcpconf_store(const struct gcpconf_key *k, const char *v,
			 struct gcp_settings *s)
{
	char *field = (char *)s + k->offset, *end;
	double d;
	long n;

	switch (k->kind) {
	case GCPCONF_URL:
		if (strncmp(v, "http://", 7) != 0 &&
		    strncmp(v, "https://", 8) != 0)
			return -1;
		/* fall through */
	case GCPCONF_NONEMPTY:
		if (!*v)
			return -1;
		/* fall through */
	case GCPCONF_WORD:
		if (strpbrk(v, " \t\n'\"&?"))
			return -1;
		/* fall through */
	case GCPCONF_PATH:
		if (strlen(v) >= k->size)
			return -1;
		snprintf(field, k->size, "%s", v);
		return 0;
	case GCPCONF_ADDRESS:
		if (strcmp(v, "public") != 0 && strcmp(v, "private") != 0)
			return -1;
		snprintf(field, k->size, "%s", v);
		return 0;
	case GCPCONF_SECONDS:
	case GCPCONF_WHOLE_S:
		d = strtod(v, &end);
		if (end == v || *end || !isfinite(d) || d < k->min ||
		    d > k->max)
			return -1;
		*(int *)(void *)field = k->kind == GCPCONF_SECONDS
						? (int)lround(d * 1000)
						: (int)ceil(d);
		return 0;
	case GCPCONF_RETRIES:
		n = strtol(v, &end, 10);
		if (end == v || *end || n < 0 || n > (long)k->max)
			return -1;
		s->retry.attempts = (int)n + 1;
		return 0;
	}
	return -1;
}

int gcpconf_read(const struct config *cfg, const char *statedir,
		 struct gcp_settings *s, char *err, size_t errlen)
{
	gcpconf_defaults(statedir, s);
	for (size_t i = 0; cfg && i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];
		const struct gcpconf_key *k = NULL;

		if (strcmp(e->section, "gcp") != 0)
			continue;
		for (size_t j = 0; j < GCPCONF_NKEYS && !k; j++)
			if (strcmp(gcpconf_keys[j].name, e->key) == 0)
				k = &gcpconf_keys[j];
		if (!k) {
			size_t o = (size_t)snprintf(
				err, errlen,
				"%s: [gcp] has no key \"%.100s\"; it takes",
				cfg->path, e->key);

			for (size_t j = 0; j < GCPCONF_NKEYS && o < errlen; j++)
				o += (size_t)snprintf(
					err + o, errlen - o, "%s %s",
					j == 0			 ? ""
					: j + 1 == GCPCONF_NKEYS ? " and"
								 : ",",
					gcpconf_keys[j].name);
			return -1;
		}
		if (gcpconf_store(k, e->value, s)) {
			/* The billing key is a secret: never echoed. */
			snprintf(err, errlen,
				 "%s: [gcp] %s: \"%.200s\" is not valid",
				 cfg->path, e->key,
				 strcmp(e->key, "billing_api_key") == 0
					 ? "(not shown)"
					 : e->value);
			return -1;
		}
	}
	if (s->poll_max_ms < s->poll_first_ms)
		s->poll_max_ms = s->poll_first_ms;
	if (s->retry.max_ms < s->retry.base_ms)
		s->retry.max_ms = s->retry.base_ms;
	return 0;
}
