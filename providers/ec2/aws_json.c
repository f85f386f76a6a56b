/* The AWS JSON 1.1 protocol over the signed POST of ec2_query.c: requests
 * serialized and answers parsed with cJSON, X-Amz-Target per call, error
 * answers read from "__type" and "message". */
#include "providers/ec2/aws_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int aws_json_error(const char *body, size_t len, char *code, size_t codelen,
		   char *msg, size_t msglen)
{
	cJSON *doc = body ? cJSON_ParseWithLength(body, len) : NULL;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "__type");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "message");
	const char *t, *hash;
	int rc = -1;

	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(doc, "Message");
	if (cJSON_IsString(type) && *type->valuestring) {
		t = type->valuestring;
		hash = strrchr(t, '#');
		snprintf(code, codelen, "%s", hash ? hash + 1 : t);
		snprintf(msg, msglen, "%s",
			 cJSON_IsString(m) ? m->valuestring : "");
		rc = 0;
	}
	cJSON_Delete(doc);
	return rc;
}

struct ec2_client *aws_json_client_new(const struct aws_config *cfg,
				       const char *url, const char *service,
				       const char *region,
				       const struct ec2_retry *retry, char *err,
				       size_t errlen)
{
	return aws_client_new(cfg, url, service, region,
			      "application/x-amz-json-1.1", aws_json_error,
			      retry, err, errlen);
}

int aws_json_call(struct ec2_client *c, const char *target,
		  const cJSON *request, struct cancel *cancel, cJSON **out,
		  char *code, size_t codelen, char *err, size_t errlen)
{
	const char *op = strrchr(target, '.');
	char *body = cJSON_PrintUnformatted(request), *answer = NULL;
	char header[160];
	size_t len = 0;
	int rc;

	*out = NULL;
	op = op ? op + 1 : target;
	if (!body) {
		snprintf(err, errlen, "%s: out of memory building the request",
			 op);
		return -ENOMEM;
	}
	snprintf(header, sizeof(header), "X-Amz-Target: %s", target);
	rc = aws_client_post(c, op, header, body, strlen(body), cancel, &answer,
			     &len, code, codelen, err, errlen);
	free(body);
	if (rc == 0) {
		*out = cJSON_ParseWithLength(answer, len);
		if (!*out || !cJSON_IsObject(*out)) {
			cJSON_Delete(*out);
			*out = NULL;
			snprintf(err, errlen, "%s: the answer is not JSON", op);
			rc = -EIO;
		}
	}
	free(answer);
	return rc;
}
