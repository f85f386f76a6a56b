/* The [hosts] and [hosts.NAME] sections of cclfs.conf: the machines of the
 * hosts provider, their features for the catalog, and how to reach them. */
#include "providers/hosts/hosts_conf.h"

#include "providers/provider.h"
#include "providers/provider_conf.h"
#include "resolver/assumption.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTSCONF_CONNECT_TIMEOUT_S 10
#define HOSTSCONF_COMMAND_TIMEOUT_S 86400
#define HOSTSCONF_KEEPALIVE_S	    15

/* A whole number of seconds (or a port) in [min, max]. */
static int hostsconf_int(const char *v, long min, long max, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (end == v || *end || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

/* A text value into a field of `len` bytes: -1 when it does not fit (a
 * user name or a file cut short would name another). */
static int hostsconf_text(const char *v, char *out, size_t len)
{
	if (strlen(v) >= len)
		return -1;
	snprintf(out, len, "%s", v);
	return 0;
}

static int hostsconf_quantity(enum assumption_kind kind, const char *v,
			      double *out)
{
	struct assumption a;
	char why[256];

	if (assumption_parse(kind, v, strlen(v), &a, why, sizeof(why)) ||
	    a.op != ASSUMPTION_JUST)
		return -1;
	*out = a.lo;
	return 0;
}

static int hostsconf_settings(const struct config *cfg, const char *key,
			      const char *v, struct hosts_settings *s)
{
	long n;

	if (strcmp(key, "user") == 0)
		return hostsconf_text(v, s->user, sizeof(s->user));
	else if (strcmp(key, "keyfile") == 0)
		return hostsconf_text(v, s->keyfile, sizeof(s->keyfile));
	else if (strcmp(key, "known_hosts") == 0)
		return hostsconf_text(v, s->known_hosts,
				      sizeof(s->known_hosts));
	else if (strcmp(key, "accept_new_host_keys") == 0) {
		if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0)
			s->record_new = 1;
		else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0)
			s->record_new = 0;
		else
			return -1;
	} else if (strcmp(key, "connect_timeout") == 0) {
		if (hostsconf_int(v, 1, 3600, &n))
			return -1;
		s->connect_timeout_ms = (int)n * 1000;
	} else if (strcmp(key, "command_timeout") == 0) {
		if (hostsconf_int(v, 0, 2000000, &n))
			return -1;
		s->command_timeout_ms = (int)n * 1000;
	} else if (strcmp(key, "keepalive") == 0) {
		if (hostsconf_int(v, 0, 3600, &n))
			return -1;
		s->keepalive_s = (int)n;
	} else {
		return -2;
	}
	(void)cfg;
	return 0;
}

static int hostsconf_host(const char *key, const char *v, struct hosts_host *h)
{
	long n;

	if (strcmp(key, "address") == 0) {
		if (!*v || strlen(v) >= sizeof(h->address) ||
		    strpbrk(v, " \t'\"[]"))
			return -1;
		snprintf(h->address, sizeof(h->address), "%s", v);
	} else if (strcmp(key, "port") == 0) {
		if (hostsconf_int(v, 1, 65535, &n))
			return -1;
		h->port = (int)n;
	} else if (strcmp(key, "user") == 0) {
		return hostsconf_text(v, h->user, sizeof(h->user));
	} else if (strcmp(key, "keyfile") == 0) {
		return hostsconf_text(v, h->keyfile, sizeof(h->keyfile));
	} else if (strcmp(key, "type") == 0) {
		size_t len = strlen(v);

		if (len == 0 || len >= sizeof(h->type) ||
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv"
			      "wxyz0123456789._-") != len)
			return -1;
		snprintf(h->type, sizeof(h->type), "%s", v);
	} else if (strcmp(key, "vcpus") == 0) {
		return hostsconf_quantity(ASSUMPTION_COUNT, v, &h->vcpus);
	} else if (strcmp(key, "memory") == 0) {
		return hostsconf_quantity(ASSUMPTION_BYTES, v,
					  &h->memory_bytes);
	} else if (strcmp(key, "accelerator_count") == 0) {
		return hostsconf_quantity(ASSUMPTION_COUNT, v,
					  &h->accelerators);
	} else if (strcmp(key, "accelerator") == 0) {
		return hostsconf_text(v, h->accelerator,
				      sizeof(h->accelerator));
	} else if (strcmp(key, "price") == 0) {
		return provider_price(v, &h->price);
	} else {
		return -2;
	}
	return 0;
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
		struct hosts_host *h = NULL;
		int rc;

		if (strcmp(e->section, "hosts") == 0) {
			rc = hostsconf_settings(cfg, e->key, e->value, s);
		} else if (strncmp(e->section, "hosts.", 6) == 0) {
			const char *name = e->section + 6;

			for (size_t k = 0; k < count; k++)
				if (strcmp(v[k].name, name) == 0)
					h = &v[k];
			if (!h) {
				struct hosts_host *nv =
					realloc(v, (count + 1) * sizeof(*nv));

				if (!nv) {
					free(v);
					snprintf(err, errlen, "out of memory");
					return -1;
				}
				v = nv;
				h = &v[count++];
				memset(h, 0, sizeof(*h));
				snprintf(h->name, sizeof(h->name), "%s", name);
				snprintf(h->type, sizeof(h->type), "host");
				h->port = 22;
				h->vcpus = h->memory_bytes = h->accelerators =
					NAN;
			}
			rc = hostsconf_host(e->key, e->value, h);
		} else {
			continue;
		}
		if (rc == -2) {
			snprintf(err, errlen, "%s: [%s] has no key \"%s\"; %s",
				 cfg->path, e->section, e->key,
				 h ? "a host takes address, port, user, "
				     "keyfile, type, vcpus, memory, "
				     "accelerator_count, accelerator and price"
				   : "[hosts] takes user, keyfile, "
				     "known_hosts, accept_new_host_keys, "
				     "connect_timeout, command_timeout and "
				     "keepalive");
			free(v);
			return -1;
		}
		if (rc) {
			snprintf(err, errlen,
				 "%s: [%s] %s: \"%s\" is not valid", cfg->path,
				 e->section, e->key, e->value);
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
