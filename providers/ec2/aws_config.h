/* AWS credentials, region and endpoint, found where the AWS CLI finds them:
 * environment variables, then the profile of ~/.aws/credentials and
 * ~/.aws/config, then cclfs.conf's [ec2] settings. */
#ifndef CCLFS_PROVIDERS_AWS_CONFIG_H
#define CCLFS_PROVIDERS_AWS_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define AWS_ERR_MAX 1024

struct aws_config {
	char access_key[128];
	char secret_key[256];
	char session_token[4096]; /* "" when none */
	char region[64];    /* "" only with aws_defaults.region_optional */
	char endpoint[512]; /* "https://ec2.REGION.amazonaws.com" or given */
	/* The Price List API's endpoint (AWS_ENDPOINT_URL_PRICING & co.). */
	char pricing_endpoint[512];
	/* SSM's (the public image parameters): AWS_ENDPOINT_URL_SSM & co.,
	 * else each region's own. */
	char ssm_endpoint[512];
	char profile[128];
	/* Where the credentials came from, for messages (never the keys). */
	char source[PATH_MAX + 64];
	/* The EC2 endpoint was given (environment, profile, cclfs.conf): every
	 * region is called there; else each region at its own. */
	bool endpoint_given;
	bool ssm_endpoint_given;
};

/* What cclfs.conf says ("" when it says nothing): the lowest precedence. */
struct aws_defaults {
	const char *region;
	const char *endpoint;
};

/* More of cclfs.conf, for aws_config_load_with. */
struct aws_extra {
	const char *pricing_endpoint;
	const char *ssm_endpoint;
	/* No region anywhere is not an error: cfg.region is then "" (each
	 * call names its region, see aws_config_in_region). */
	bool region_optional;
};

/* Fill cfg; 0, or -1 with err saying what is missing and where it looked.
 * Reads the environment and the files it names, nothing else. */
int aws_config_load(const struct aws_defaults *d, struct aws_config *cfg,
		    char *err, size_t errlen);
/* The same with x (NULL: none). */
int aws_config_load_with(const struct aws_defaults *d,
			 const struct aws_extra *x, struct aws_config *cfg,
			 char *err, size_t errlen);

/* The region the AWS CLI would use, from the environment, the profile of
 * the config file and d (credentials are not needed): 1 with it in buf, or
 * 0 when none is configured. Reads files only, never fails. */
int aws_config_region(const struct aws_defaults *d, char *buf, size_t len);

/* base for calls in `region`: its endpoints (EC2, SSM) unless they were
 * given. */
void aws_config_in_region(const struct aws_config *base, const char *region,
			  struct aws_config *out);

/* Forget the secrets (overwritten, not just freed). */
void aws_config_clear(struct aws_config *cfg);

#endif
