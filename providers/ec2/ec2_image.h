/* The image of a deploy: an AMI id, or an alias resolved in the deploy's
 * region for the instance type's architecture through AWS's public SSM
 * parameters, its architecture checked against the type's, and the login
 * user that goes with it. */
#ifndef CCLFS_PROVIDERS_EC2_IMAGE_H
#define CCLFS_PROVIDERS_EC2_IMAGE_H

#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_query.h"

#include <stddef.h>

struct cancel;

/* The alias cclfs launches when nothing names an image. */
#define EC2_IMAGE_DEFAULT "al2023"

/* The calls of one pick: EC2 and SSM of the deploy's region. */
struct ec2_image_calls {
	struct ec2_client *ec2;
	const struct aws_config *cfg; /* in the deploy's region */
	const struct ec2_retry *retry;
	struct cancel *cancel;
};

/* The login user of `image` (an alias or an AMI id): the alias's
 * (ec2-user, ubuntu, admin), else ec2-user. */
const char *ec2_image_user(const char *image);

/* Whether `image` names an alias rather than an AMI id. */
int ec2_image_is_alias(const char *image);

/* The AMI to launch `type` with: `image` itself when it is an AMI id whose
 * architecture (DescribeImages) is the type's (DescribeInstanceTypes), or
 * the AMI the alias stands for in the region for that architecture. 0 with
 * it in ami, or -errno with err: -EINVAL for an unknown alias or a
 * mismatch (a sentence naming both), the call's own failure otherwise. */
int ec2_image_pick(const struct ec2_image_calls *k, const char *type,
		   const char *image, char *ami, size_t amilen, char *err,
		   size_t errlen);

#endif
