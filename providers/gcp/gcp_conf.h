/* The [gcp] section of cclfs.conf: the project, endpoints and billing key,
 * defaults of the contracts' config/ (zone, imageid, network, subnet_id,
 * ssh_cidr), the login, and the provider's timings. */
#ifndef CCLFS_PROVIDERS_GCP_CONF_H
#define CCLFS_PROVIDERS_GCP_CONF_H

#include "providers/gcp/gcp_api.h"

#include <limits.h>
#include <stddef.h>

struct gcp_settings {
	char project[128];	    /* "": CLOUDSDK_CORE_PROJECT & co. */
	char endpoint[512];	    /* "": the override, else Google's */
	char billing_endpoint[512]; /* "": Cloud Billing's */
	char billing_api_key[256];  /* "": the credentials' token */
	char region[64];	    /* "": the resolution's */
	char zone[64];	   /* "": CLOUDSDK_COMPUTE_ZONE, the region's */
	char imageid[512]; /* an alias or an image URL */
	char network[256];
	char subnet_id[256];
	char ssh_cidr[64];
	char user[64];	  /* login user (cclfs) */
	char address[16]; /* "public" (default) or "private" */
	char keydir[PATH_MAX];
	char known_hosts[PATH_MAX];
	char own_hosts[PATH_MAX];
	int connect_timeout_ms;
	int command_timeout_ms;
	int keepalive_s;
	int boot_timeout_ms;
	int poll_first_ms, poll_max_ms;
	struct gcp_retry retry;
};

struct config;

/* Fill s from cfg's [gcp] (defaults where it is silent); statedir holds the
 * generated keys and cclfs's known_hosts. 0, or -1 with err naming the file,
 * the key and the value. */
int gcpconf_read(const struct config *cfg, const char *statedir,
		 struct gcp_settings *s, char *err, size_t errlen);

#endif
