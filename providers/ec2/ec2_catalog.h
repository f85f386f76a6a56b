/* The ec2 provider's catalog refresh: what EC2 offers today in every
 * region the account can use (DescribeRegions, DescribeInstanceTypes,
 * DescribeInstanceTypeOfferings, DescribeSpotPriceHistory) and the Price
 * List API's on-demand prices, handed to the catalog's sink. */
#ifndef CCLFS_PROVIDERS_EC2_CATALOG_H
#define CCLFS_PROVIDERS_EC2_CATALOG_H

#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_query.h"
#include "providers/provider.h"

#include <stddef.h>

struct cancel;

/* Refresh with cfg's credentials (its region, "" for none, is where
 * DescribeRegions goes, else us-east-1; its endpoint, when given, serves
 * every region) and its pricing_endpoint. Regions are done `threads` calls
 * at a time (0: a default). 0, or -errno with err (one sentence) when the
 * refresh failed as a whole; see provider_ops.catalog_refresh. */
int ec2_catalog_refresh(const struct aws_config *cfg,
			const struct ec2_retry *retry, int threads,
			const struct provider_catalog_sink *sink,
			struct cancel *cancel, char *err, size_t errlen);

#endif
