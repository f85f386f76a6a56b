/* The [ec2] section of cclfs.conf, read into the ec2 provider's settings:
 * region, endpoint_url and pricing_endpoint_url (below the AWS environment
 * and profile), the
 * defaults of imageid, subnet_id, security_group_id, placement_group and
 * key_name, the SSH rule's ssh_cidr, the login (user, address), and timings in
 * seconds. */
#include "providers/ec2/ec2_conf.h"

#include "providers/provider_conf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number of seconds in [min, max] (fractions allowed), as ms. */
static int ec2conf_seconds(const char *v, double min, double max, int *ms)
{
	char *end;
	double d = strtod(v, &end);

	if (end == v || *end || !isfinite(d) || d < min || d > max)
		return -1;
	*ms = (int)lround(d * 1000);
	return 0;
}

static int ec2conf_word(const char *v, char *out, size_t len)
{
	size_t n = strlen(v);

	if (n >= len || strpbrk(v, " \t\n'\"&=?"))
		return -1;
	snprintf(out, len, "%s", v);
	return 0;
}

static int ec2conf_url(const char *v, char *out, size_t len)
{
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return -1;
	return ec2conf_word(v, out, len);
}

static void ec2conf_defaults(const char *statedir, struct ec2_settings *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->ssh_cidr, sizeof(s->ssh_cidr), "0.0.0.0/0");
	snprintf(s->address, sizeof(s->address), "public");
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
	s->retry.request_timeout_ms = 30000;
}

/* 0, -1 (bad value) or -2 (no such key). */
static int ec2conf_key(const char *key, const char *v, struct ec2_settings *s)
{
	int ms;

	if (strcmp(key, "region") == 0)
		return ec2conf_word(v, s->region, sizeof(s->region));
	if (strcmp(key, "endpoint_url") == 0)
		return ec2conf_url(v, s->endpoint_url, sizeof(s->endpoint_url));
	if (strcmp(key, "pricing_endpoint_url") == 0)
		return ec2conf_url(v, s->pricing_endpoint_url,
				   sizeof(s->pricing_endpoint_url));
	if (strcmp(key, "ssm_endpoint_url") == 0)
		return ec2conf_url(v, s->ssm_endpoint_url,
				   sizeof(s->ssm_endpoint_url));
	if (strcmp(key, "imageid") == 0)
		return ec2conf_word(v, s->imageid, sizeof(s->imageid));
	if (strcmp(key, "subnet_id") == 0)
		return ec2conf_word(v, s->subnet_id, sizeof(s->subnet_id));
	if (strcmp(key, "security_group_id") == 0)
		return ec2conf_word(v, s->security_group_id,
				    sizeof(s->security_group_id));
	if (strcmp(key, "ssh_cidr") == 0)
		return *v ? ec2conf_word(v, s->ssh_cidr, sizeof(s->ssh_cidr))
			  : -1;
	if (strcmp(key, "placement_group") == 0)
		return ec2conf_word(v, s->placement_group,
				    sizeof(s->placement_group));
	if (strcmp(key, "key_name") == 0)
		return ec2conf_word(v, s->key_name, sizeof(s->key_name));
	if (strcmp(key, "user") == 0)
		return *v ? ec2conf_word(v, s->user, sizeof(s->user)) : -1;
	if (strcmp(key, "known_hosts") == 0) {
		snprintf(s->known_hosts, sizeof(s->known_hosts), "%s", v);
		return 0;
	}
	if (strcmp(key, "address") == 0) {
		if (strcmp(v, "public") != 0 && strcmp(v, "private") != 0)
			return -1;
		snprintf(s->address, sizeof(s->address), "%s", v);
		return 0;
	}
	if (strcmp(key, "retries") == 0) {
		char *end;
		long n = strtol(v, &end, 10);

		if (end == v || *end || n < 0 || n > 100)
			return -1;
		s->retry.attempts = (int)n + 1;
		return 0;
	}
	if (strcmp(key, "connect_timeout") == 0)
		return ec2conf_seconds(v, 0.1, 3600, &s->connect_timeout_ms);
	if (strcmp(key, "command_timeout") == 0) {
		if (ec2conf_seconds(v, 0, 2000000, &ms))
			return -1;
		s->command_timeout_ms = ms;
		return 0;
	}
	if (strcmp(key, "keepalive") == 0) {
		if (ec2conf_seconds(v, 0, 3600, &ms))
			return -1;
		s->keepalive_s = ms / 1000;
		return 0;
	}
	if (strcmp(key, "boot_timeout") == 0)
		return ec2conf_seconds(v, 1, 86400, &s->boot_timeout_ms);
	if (strcmp(key, "poll_interval") == 0)
		return ec2conf_seconds(v, 0.01, 600, &s->poll_first_ms);
	if (strcmp(key, "poll_max") == 0)
		return ec2conf_seconds(v, 0.01, 600, &s->poll_max_ms);
	if (strcmp(key, "retry_backoff") == 0)
		return ec2conf_seconds(v, 0.001, 600, &s->retry.base_ms);
	if (strcmp(key, "retry_backoff_max") == 0)
		return ec2conf_seconds(v, 0.001, 3600, &s->retry.max_ms);
	if (strcmp(key, "request_timeout") == 0)
		return ec2conf_seconds(v, 0.1, 3600,
				       &s->retry.request_timeout_ms);
	return -2;
}

int ec2conf_read(const struct config *cfg, const char *statedir,
		 struct ec2_settings *s, char *err, size_t errlen)
{
	ec2conf_defaults(statedir, s);
	for (size_t i = 0; cfg && i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];
		int rc;

		if (strcmp(e->section, "ec2") != 0)
			continue;
		rc = ec2conf_key(e->key, e->value, s);
		if (rc == -2) {
			snprintf(
				err, errlen,
				"%s: [ec2] has no key \"%s\"; it takes region, "
				"endpoint_url, pricing_endpoint_url, imageid, "
				"subnet_id, "
				"security_group_id, ssh_cidr, placement_group, "
				"key_name, "
				"user, address, known_hosts, retries, "
				"connect_timeout, command_timeout, keepalive, "
				"boot_timeout, poll_interval, poll_max, "
				"retry_backoff, retry_backoff_max and "
				"request_timeout",
				cfg->path, e->key);
			return -1;
		}
		if (rc) {
			snprintf(err, errlen,
				 "%s: [ec2] %s: \"%s\" is not valid", cfg->path,
				 e->key, e->value);
			return -1;
		}
	}
	if (s->poll_max_ms < s->poll_first_ms)
		s->poll_max_ms = s->poll_first_ms;
	if (s->retry.max_ms < s->retry.base_ms)
		s->retry.max_ms = s->retry.base_ms;
	return 0;
}
