/* The [gcp] section of cclfs.conf, read through one table of keys into the
 * gcp provider's settings: words, URLs and durations in seconds, each
 * checked, an unknown key refused with the list of those there are. */
#include "providers/gcp/gcp_conf.h"

#include "providers/conf_keys.h"
#include "providers/provider_conf.h"

#include <stdio.h>
#include <string.h>

#define GCPCONF_KEY(k, kind, f, lo, hi)                                        \
	CONFKEYS_KEY(k, kind, struct gcp_settings, f, lo, hi)

static const char *const gcpconf_addresses[] = {"public", "private", NULL};

static const struct confkeys_key gcpconf_keys[] = {
	GCPCONF_KEY("project", CONFKEYS_WORD, project, 0, 0),
	GCPCONF_KEY("endpoint", CONFKEYS_URL, endpoint, 0, 0),
	GCPCONF_KEY("billing_endpoint", CONFKEYS_URL, billing_endpoint, 0, 0),
	{.name = "billing_api_key",
	 .kind = CONFKEYS_WORD,
	 CONFKEYS_FIELD(struct gcp_settings, billing_api_key),
	 .secret = true},
	GCPCONF_KEY("region", CONFKEYS_WORD, region, 0, 0),
	GCPCONF_KEY("zone", CONFKEYS_WORD, zone, 0, 0),
	GCPCONF_KEY("imageid", CONFKEYS_WORD, imageid, 0, 0),
	GCPCONF_KEY("network", CONFKEYS_WORD, network, 0, 0),
	GCPCONF_KEY("subnet_id", CONFKEYS_WORD, subnet_id, 0, 0),
	GCPCONF_KEY("ssh_cidr", CONFKEYS_NONEMPTY, ssh_cidr, 0, 0),
	GCPCONF_KEY("user", CONFKEYS_NONEMPTY, user, 0, 0),
	CONFKEYS_CHOICE_KEY("address", struct gcp_settings, address,
			    gcpconf_addresses),
	GCPCONF_KEY("known_hosts", CONFKEYS_TEXT, known_hosts, 0, 0),
	CONFKEYS_CLOUD_TIMINGS(struct gcp_settings),
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

int gcpconf_read(const struct config *cfg, const char *statedir,
		 struct gcp_settings *s, char *err, size_t errlen)
{
	gcpconf_defaults(statedir, s);
	for (size_t i = 0; cfg && i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];

		if (strcmp(e->section, "gcp") == 0 &&
		    confkeys_apply(gcpconf_keys, GCPCONF_NKEYS, cfg->path, e, s,
				   err, errlen))
			return -1;
	}
	if (s->poll_max_ms < s->poll_first_ms)
		s->poll_max_ms = s->poll_first_ms;
	if (s->retry.max_ms < s->retry.base_ms)
		s->retry.max_ms = s->retry.base_ms;
	return 0;
}
