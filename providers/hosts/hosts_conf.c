/* The [hosts] and [hosts.NAME] sections of cclfs.conf: the machines of the
 * hosts provider, their features for the catalog, and how to reach them,
 * read through one table of keys for each. */
#include "providers/hosts/hosts_conf.h"

#include "providers/conf_keys.h"
#include "providers/provider_conf.h"
#include "resolver/assumption.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTSCONF_CONNECT_TIMEOUT_S 10
#define HOSTSCONF_COMMAND_TIMEOUT_S 86400
#define HOSTSCONF_KEEPALIVE_S	    15

/* An address as the manager and the workers name the host: a name or an
 * IP address, nothing a hostfile or a command line would split. */
static int hostsconf_address(const char *v, void *field, size_t size)
{
	if (!*v || strlen(v) >= size || strpbrk(v, " \t'\"[]"))
		return -1;
	snprintf(field, size, "%s", v);
	return 0;
}

/* A type name as the catalog and the resolution's files show it. */
static int hostsconf_type(const char *v, void *field, size_t size)
{
	size_t len = strlen(v);

	if (len == 0 || len >= size ||
	    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-") != len)
		return -1;
	snprintf(field, size, "%s", v);
	return 0;
}

/* A quantity written as in a contract (16, 64G), with no operator. */
static int hostsconf_quantity(enum assumption_kind kind, const char *v,
			      void *field)
{
	struct assumption a;
	char why[256];

	if (assumption_parse(kind, v, strlen(v), &a, why, sizeof(why)) ||
	    a.op != ASSUMPTION_JUST)
		return -1;
	*(double *)field = a.lo;
	return 0;
}

static int hostsconf_count(const char *v, void *field, size_t size)
{
	(void)size;
	return hostsconf_quantity(ASSUMPTION_COUNT, v, field);
}

static int hostsconf_bytes(const char *v, void *field, size_t size)
{
	(void)size;
	return hostsconf_quantity(ASSUMPTION_BYTES, v, field);
}

#define HOSTSCONF_SETTING(k, kind, f, lo, hi)                                  \
	CONFKEYS_KEY(k, kind, struct hosts_settings, f, lo, hi)
#define HOSTSCONF_HOST(k, kind, f)                                             \
	CONFKEYS_KEY(k, kind, struct hosts_host, f, 0, 0)
#define HOSTSCONF_PARSED(k, f, fn, what)                                       \
	CONFKEYS_PARSE_KEY(k, struct hosts_host, f, fn, what)

/* [hosts]: how every host is reached. */
static const struct confkeys_key hostsconf_settings[] = {
	HOSTSCONF_SETTING("user", CONFKEYS_TEXT, user, 0, 0),
	HOSTSCONF_SETTING("keyfile", CONFKEYS_TEXT, keyfile, 0, 0),
	HOSTSCONF_SETTING("known_hosts", CONFKEYS_TEXT, known_hosts, 0, 0),
	HOSTSCONF_SETTING("accept_new_host_keys", CONFKEYS_BOOL, record_new, 0,
			  0),
	HOSTSCONF_SETTING("connect_timeout", CONFKEYS_MS, connect_timeout_ms,
			  0.1, 3600),
	HOSTSCONF_SETTING("command_timeout", CONFKEYS_MS, command_timeout_ms, 0,
			  2000000),
	HOSTSCONF_SETTING("keepalive", CONFKEYS_WHOLE_S, keepalive_s, 0, 3600),
};
#define HOSTSCONF_NSETTINGS                                                    \
	(sizeof(hostsconf_settings) / sizeof(hostsconf_settings[0]))

/* [hosts.NAME]: one machine. */
static const struct confkeys_key hostsconf_host_keys[] = {
	HOSTSCONF_PARSED("address", address, hostsconf_address,
			 "a host name or an IP address, without blanks, quotes "
			 "or brackets"),
	CONFKEYS_KEY("port", CONFKEYS_INT, struct hosts_host, port, 1, 65535),
	HOSTSCONF_HOST("user", CONFKEYS_TEXT, user),
	HOSTSCONF_HOST("keyfile", CONFKEYS_TEXT, keyfile),
	HOSTSCONF_PARSED("type", type, hostsconf_type,
			 "a name of letters, digits, '.', '_' or '-'"),
	HOSTSCONF_PARSED("vcpus", vcpus, hostsconf_count,
			 "a number, such as 16"),
	HOSTSCONF_PARSED("memory", memory_bytes, hostsconf_bytes,
			 "a size, such as 64G"),
	HOSTSCONF_PARSED("accelerator_count", accelerators, hostsconf_count,
			 "a number, such as 4"),
	HOSTSCONF_HOST("accelerator", CONFKEYS_TEXT, accelerator),
	HOSTSCONF_HOST("price", CONFKEYS_PRICE, price),
};
#define HOSTSCONF_NHOST_KEYS                                                   \
	(sizeof(hostsconf_host_keys) / sizeof(hostsconf_host_keys[0]))

/* The host named `name` in v (count of them), added when new. */
static struct hosts_host *hostsconf_host(struct hosts_host **v, size_t *count,
					 const char *name)
{
	struct hosts_host *nv, *h;

	for (size_t k = 0; k < *count; k++)
		if (strcmp((*v)[k].name, name) == 0)
			return &(*v)[k];
	nv = realloc(*v, (*count + 1) * sizeof(*nv));
	if (!nv)
		return NULL;
	*v = nv;
	h = &nv[(*count)++];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(h->type, sizeof(h->type), "host");
	h->port = 22;
	h->vcpus = h->memory_bytes = h->accelerators = NAN;
	return h;
}

int hostsconf_read(const struct config *cfg, const char *statedir,
		   struct hosts_host **hosts, size_t *n,
		   struct hosts_settings *s, char *err, size_t errlen)
{
	struct hosts_host *v = NULL;
	size_t count = 0;

	memset(s, 0, sizeof(*s));
	s->connect_timeout_ms = HOSTSCONF_CONNECT_TIMEOUT_S * 1000;
	s->command_timeout_ms = HOSTSCONF_COMMAND_TIMEOUT_S * 1000;
	s->keepalive_s = HOSTSCONF_KEEPALIVE_S;
	snprintf(s->own_hosts, sizeof(s->own_hosts), "%s/known_hosts",
		 statedir);
	*hosts = NULL;
	*n = 0;
	for (size_t i = 0; i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];
		struct hosts_host *h;
		int rc = 0;

		if (strcmp(e->section, "hosts") == 0) {
			rc = confkeys_apply(hostsconf_settings,
					    HOSTSCONF_NSETTINGS, cfg->path, e,
					    s, err, errlen);
		} else if (strncmp(e->section, "hosts.", 6) == 0) {
			h = hostsconf_host(&v, &count, e->section + 6);
			if (!h)
				snprintf(err, errlen, "out of memory");
			rc = !h || confkeys_apply(hostsconf_host_keys,
						  HOSTSCONF_NHOST_KEYS,
						  cfg->path, e, h, err, errlen);
		}
		if (rc) {
			free(v);
			return -1;
		}
	}
	for (size_t k = 0; k < count; k++) {
		if (!*v[k].address) {
			snprintf(err, errlen,
				 "%s: [hosts.%s] has no address; add "
				 "address = \"HOST\"",
				 cfg->path, v[k].name);
			free(v);
			return -1;
		}
	}
	*hosts = v;
	*n = count;
	return 0;
}
