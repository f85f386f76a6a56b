/* EC2 Query API calls: a form-encoded body (Action, Version and the
 * parameters), POSTed over libcurl and signed with its SigV4, retried with
 * exponential backoff and full jitter on throttling, 5xx and timeouts; and
 * the same signed POST for the other AWS services cclfs calls. */
#ifndef CCLFS_PROVIDERS_EC2_QUERY_H
#define CCLFS_PROVIDERS_EC2_QUERY_H

#include "providers/ec2/aws_config.h"

#include <stddef.h>

#define EC2_API_VERSION "2016-11-15"
#define EC2_CODE_MAX	96

/* A request body being built: "Action=A&Version=V&Name=Value...". */
struct ec2_query {
	char *body;
	size_t len, cap;
	char action[64];
	int failed; /* out of memory: the call is refused */
};

void ec2_query_init(struct ec2_query *q, const char *action);
/* Add one parameter, both parts percent-encoded (RFC 3986). */
void ec2_query_add(struct ec2_query *q, const char *name, const char *value);
__attribute__((format(printf, 3, 4))) void
ec2_query_addf(struct ec2_query *q, const char *name, const char *fmt, ...);
void ec2_query_free(struct ec2_query *q);

/* Percent-encode s (RFC 3986: all but A-Z a-z 0-9 - _ . ~). 0, or -1 when
 * out is too short. */
int ec2_query_encode(const char *s, char *out, size_t outlen);

struct ec2_retry {
	int attempts;		/* tries in all, >= 1 */
	int base_ms, max_ms;	/* backoff: random in [0, min(max, base*2^k)] */
	int request_timeout_ms; /* one HTTP exchange */
};

struct ec2_client;

/* A client for cfg's endpoint and region (copied, secrets included). */
struct ec2_client *ec2_client_new(const struct aws_config *cfg,
				  const struct ec2_retry *retry, char *err,
				  size_t errlen);
void ec2_client_free(struct ec2_client *c);

/* How a service's error documents read: 0 with the code and message, or -1
 * when the body is not one. */
typedef int (*aws_error_fn)(const char *body, size_t len, char *code,
			    size_t codelen, char *msg, size_t msglen);

/* The same client for any AWS service's signed POST API: cfg's credentials,
 * the endpoint `url`, the SigV4 scope (service, region), the body's content
 * type and how its errors read. Calls go through aws_client_post. */
struct ec2_client *aws_client_new(const struct aws_config *cfg, const char *url,
				  const char *service, const char *region,
				  const char *content_type, aws_error_fn errors,
				  const struct ec2_retry *retry, char *err,
				  size_t errlen);

struct cancel;

/* One POST of `body` with retries, as ec2_call: `name` names the call in
 * messages, `header` (or NULL) is one more header line ("X-Amz-Target:
 * ..."). A fired cancel stops the exchange within 50 ms. */
int aws_client_post(struct ec2_client *c, const char *name, const char *header,
		    const char *body, size_t len, struct cancel *cancel,
		    char **out, size_t *outlen, char *code, size_t codelen,
		    char *err, size_t errlen);

/* One call, with retries. On success 0 and the response body in *body
 * (NUL-terminated, free() it). Else -errno, err says "ACTION: CODE: message"
 * and the AWS error code (or "") goes to code. -ECONNREFUSED and
 * -EHOSTUNREACH: the endpoint was never reached (nothing was delivered);
 * -ECANCELED: cancel fired (a waiting retry or the exchange stops at
 * once). cancel may be NULL. */
int ec2_call(struct ec2_client *c, const struct ec2_query *q,
	     struct cancel *cancel, char **body, size_t *len, char *code,
	     size_t codelen, char *err, size_t errlen);

/* Whether an AWS error code or HTTP status is worth another try. */
int ec2_retryable(const char *code, long http_status);
/* The errno of an AWS error code: -EACCES for the credentials' and
 * permissions' codes, else -EIO. */
int aws_code_errno(const char *code);

#endif
