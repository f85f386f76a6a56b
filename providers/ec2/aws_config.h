/* AWS credentials, region and endpoint, found where the AWS CLI finds them:
 * environment variables, then the profile of ~/.aws/credentials and
 * ~/.aws/config, then cclfs.conf's [ec2] settings. */
#ifndef CCLFS_PROVIDERS_AWS_CONFIG_H
#define CCLFS_PROVIDERS_AWS_CONFIG_H

#include <limits.h>
#include <stddef.h>

#define AWS_ERR_MAX 1024

struct aws_config {
	char access_key[128];
	char secret_key[256];
	char session_token[4096]; /* "" when none */
	char region[64];
	char endpoint[512]; /* "https://ec2.REGION.amazonaws.com" or given */
	char profile[128];
	/* Where the credentials came from, for messages (never the keys). */
	char source[PATH_MAX + 64];
};

/* What cclfs.conf says ("" when it says nothing): the lowest precedence. */
struct aws_defaults {
	const char *region;
	const char *endpoint;
};

/* Fill cfg; 0, or -1 with err saying what is missing and where it looked.
 * Reads the environment and the files it names, nothing else. */
int aws_config_load(const struct aws_defaults *d, struct aws_config *cfg,
		    char *err, size_t errlen);

/* Forget the secrets (overwritten, not just freed). */
void aws_config_clear(struct aws_config *cfg);

#endif
