/* The AWS JSON 1.1 protocol (the Price List Query API, SSM): a JSON body
 * POSTed with X-Amz-Target SERVICE.Operation and SigV4, errors answered as
 * {"__type": CODE, "message": ...}. Built on the signed POST of
 * ec2_query.h (its retries and cancellation). */
#ifndef CCLFS_PROVIDERS_AWS_JSON_H
#define CCLFS_PROVIDERS_AWS_JSON_H

#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_query.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* A client of `service` (SigV4 scope, "pricing") in `region` at `url`,
 * with cfg's credentials; free it with ec2_client_free. */
struct ec2_client *aws_json_client_new(const struct aws_config *cfg,
				       const char *url, const char *service,
				       const char *region,
				       const struct ec2_retry *retry, char *err,
				       size_t errlen);

/* One call of `target` ("AWSPriceListService.GetProducts"): 0 and the
 * answer in *out (cJSON_Delete it), or -errno with err "Operation: CODE:
 * message" and the code in `code` (as ec2_call). */
int aws_json_call(struct ec2_client *c, const char *target,
		  const cJSON *request, struct cancel *cancel, cJSON **out,
		  char *code, size_t codelen, char *err, size_t errlen);

/* The code and message of a JSON error answer (the code without the
 * "namespace#" some services put before it). 0, or -1 when the body is not
 * one. */
int aws_json_error(const char *body, size_t len, char *code, size_t codelen,
		   char *msg, size_t msglen);

#endif
