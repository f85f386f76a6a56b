/* The [ec2] section of cclfs.conf, read into the ec2 provider's settings:
 * region and endpoints (below the AWS environment and profile), the
 * defaults of imageid, subnet_id, security_group_id, placement_group and
 * key_name, the SSH rule's ssh_cidr, the login (user, address) and timings in
 * seconds, through one table of keys. */
#include "providers/ec2/ec2_conf.h"

#include "providers/conf_keys.h"
#include "providers/provider_conf.h"

#include <stdio.h>
#include <string.h>

#define EC2CONF_KEY(k, kind, f, lo, hi)                                        \
	CONFKEYS_KEY(k, kind, struct ec2_settings, f, lo, hi)

static const char *const ec2conf_addresses[] = {"public", "private", NULL};

static const struct confkeys_key ec2conf_keys[] = {
	EC2CONF_KEY("region", CONFKEYS_WORD, region, 0, 0),
	EC2CONF_KEY("endpoint_url", CONFKEYS_URL, endpoint_url, 0, 0),
	EC2CONF_KEY("pricing_endpoint_url", CONFKEYS_URL, pricing_endpoint_url,
		    0, 0),
	EC2CONF_KEY("ssm_endpoint_url", CONFKEYS_URL, ssm_endpoint_url, 0, 0),
	EC2CONF_KEY("imageid", CONFKEYS_WORD, imageid, 0, 0),
	EC2CONF_KEY("subnet_id", CONFKEYS_WORD, subnet_id, 0, 0),
	EC2CONF_KEY("security_group_id", CONFKEYS_WORD, security_group_id, 0,
		    0),
	EC2CONF_KEY("ssh_cidr", CONFKEYS_NONEMPTY, ssh_cidr, 0, 0),
	EC2CONF_KEY("placement_group", CONFKEYS_WORD, placement_group, 0, 0),
	EC2CONF_KEY("key_name", CONFKEYS_WORD, key_name, 0, 0),
	EC2CONF_KEY("user", CONFKEYS_NONEMPTY, user, 0, 0),
	CONFKEYS_CHOICE_KEY("address", struct ec2_settings, address,
			    ec2conf_addresses),
	EC2CONF_KEY("known_hosts", CONFKEYS_TEXT, known_hosts, 0, 0),
	CONFKEYS_CLOUD_TIMINGS(struct ec2_settings),
};
#define EC2CONF_NKEYS (sizeof(ec2conf_keys) / sizeof(ec2conf_keys[0]))

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

int ec2conf_read(const struct config *cfg, const char *statedir,
		 struct ec2_settings *s, char *err, size_t errlen)
{
	ec2conf_defaults(statedir, s);
	for (size_t i = 0; cfg && i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];

		if (strcmp(e->section, "ec2") == 0 &&
		    confkeys_apply(ec2conf_keys, EC2CONF_NKEYS, cfg->path, e, s,
				   err, errlen))
			return -1;
	}
	if (s->poll_max_ms < s->poll_first_ms)
		s->poll_max_ms = s->poll_first_ms;
	if (s->retry.max_ms < s->retry.base_ms)
		s->retry.max_ms = s->retry.base_ms;
	return 0;
}
