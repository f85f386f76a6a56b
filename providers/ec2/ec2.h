/* The ec2 provider: clusters of EC2 instances, launched with one
 * RunInstances per role, idempotent through a ClientToken derived from the
 * cluster's token, tagged with the cluster, reached over SSH. */
#ifndef CCLFS_PROVIDERS_EC2_H
#define CCLFS_PROVIDERS_EC2_H

#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_query.h"
#include "providers/provider.h"

#include <limits.h>
#include <stddef.h>

/* cclfs.conf's [ec2] section, and where the provider keeps its files. */
struct ec2_settings {
	char region[64];		/* "": AWS_REGION & co. */
	char endpoint_url[512];		/* "": AWS_ENDPOINT_URL & co. */
	char pricing_endpoint_url[512]; /* "": AWS_ENDPOINT_URL_PRICING... */
	char ssm_endpoint_url[512];	/* "": AWS_ENDPOINT_URL_SSM... */
	char imageid[128];		/* defaults of config/ */
	char subnet_id[64];
	char security_group_id[64]; /* "": a group per cluster */
	char ssh_cidr[64];	    /* its SSH rule's source (0.0.0.0/0) */
	char placement_group[128];  /* "none": no placement group */
	char key_name[128];	    /* "": a key pair per cluster */
	char user[64];	  /* login user ("": the image's, ec2-user for an id) */
	char address[16]; /* "public" (default) or "private" */
	char keydir[PATH_MAX]; /* STATEDIR/keys: generated keys */
	char known_hosts[PATH_MAX];
	char own_hosts[PATH_MAX]; /* STATEDIR/known_hosts */
	int connect_timeout_ms;
	int command_timeout_ms;
	int keepalive_s;
	int boot_timeout_ms; /* until running and reachable over SSH */
	int poll_first_ms, poll_max_ms; /* DescribeInstances while waiting */
	struct ec2_retry retry;
};

struct provider *ec2_provider_open(const struct ec2_settings *s, char *err,
				   size_t errlen);

#endif
