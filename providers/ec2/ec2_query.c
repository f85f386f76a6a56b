/* EC2 Query API calls over libcurl: the body is built here, the SigV4
 * signature is libcurl's (CURLOPT_AWS_SIGV4; it adds X-Amz-Date itself and
 * hashes the body), errors come from the response's error document, and
 * throttling, 5xx and timeouts are retried with backoff and full jitter. */
#include "providers/ec2/ec2_query.h"

#include "providers/cancel.h"
#include "providers/ec2/ec2_xml.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Idle handles kept (with their connections) for the next calls. */
#define EC2_POOL_MAX 8

struct ec2_client {
	/* Calls of many clusters run at once, each on a handle of its own
	 * taken from the pool: one slow call never holds up another. */
	pthread_mutex_t lock;
	CURL *pool[EC2_POOL_MAX];
	size_t npool;
	struct curl_slist *headers;
	char url[600];
	char sigv4[128];
	struct aws_config cfg;
	struct ec2_retry retry;
};

/* A response body growing as it arrives. */
struct ec2_buf {
	char *data;
	size_t len, cap;
	int failed;
};

static pthread_once_t ec2_curl_once = PTHREAD_ONCE_INIT;

static void ec2_curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* --- the request body --- */

static void ec2_query_put(struct ec2_query *q, const char *s, size_t n)
{
	if (q->failed)
		return;
	if (q->len + n + 1 > q->cap) {
		size_t cap = q->cap ? q->cap : 256;
		char *b;

		while (cap < q->len + n + 1)
			cap *= 2;
		b = realloc(q->body, cap);
		if (!b) {
			q->failed = 1;
			return;
		}
		q->body = b;
		q->cap = cap;
	}
	memcpy(q->body + q->len, s, n);
	q->len += n;
	q->body[q->len] = '\0';
}

static void ec2_query_put_encoded(struct ec2_query *q, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s && !q->failed; s++) {
		unsigned char c = (unsigned char)*s;
		char e[3];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~') {
			ec2_query_put(q, (const char *)&c, 1);
			continue;
		}
		e[0] = '%';
		e[1] = hex[c >> 4];
		e[2] = hex[c & 15];
		ec2_query_put(q, e, 3);
	}
}

int ec2_query_encode(const char *s, char *out, size_t outlen)
{
	struct ec2_query q = {0};
	int rc = -1;

	ec2_query_put_encoded(&q, s);
	if (!q.failed && q.len < outlen) {
		memcpy(out, q.body ? q.body : "", q.len + 1);
		rc = 0;
	}
	free(q.body);
	return rc;
}

void ec2_query_init(struct ec2_query *q, const char *action)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->action, sizeof(q->action), "%s", action);
	ec2_query_put(q, "Action=", 7);
	ec2_query_put_encoded(q, action);
	ec2_query_put(q, "&Version=" EC2_API_VERSION,
		      strlen("&Version=" EC2_API_VERSION));
}

void ec2_query_add(struct ec2_query *q, const char *name, const char *value)
{
	ec2_query_put(q, "&", 1);
	ec2_query_put_encoded(q, name);
	ec2_query_put(q, "=", 1);
	ec2_query_put_encoded(q, value);
}

void ec2_query_addf(struct ec2_query *q, const char *name, const char *fmt, ...)
{
	char v[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(v)) {
		q->failed = 1;
		return;
	}
	ec2_query_add(q, name, v);
}

void ec2_query_free(struct ec2_query *q)
{
	free(q->body);
	memset(q, 0, sizeof(*q));
}

/* --- the client --- */

static size_t ec2_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct ec2_buf *b = ud;
	size_t n = size * nmemb;

	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d) {
			b->failed = 1;
			return 0;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

struct ec2_client *ec2_client_new(const struct aws_config *cfg,
				  const struct ec2_retry *retry, char *err,
				  size_t errlen)
{
	struct ec2_client *c = calloc(1, sizeof(*c));
	const char *ep = cfg->endpoint;
	size_t eplen = strlen(ep);
	const char *path;

	pthread_once(&ec2_curl_once, ec2_curl_init);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	c->retry = *retry;
	if (c->retry.attempts < 1)
		c->retry.attempts = 1;
	if (strncmp(ep, "https://", 8) != 0 && strncmp(ep, "http://", 7) != 0) {
		snprintf(err, errlen,
			 "the EC2 endpoint \"%.200s\" is not an http(s):// URL",
			 ep);
		goto fail;
	}
	/* The path is "/" unless the endpoint has one. */
	path = strchr(ep + (ep[4] == 's' ? 8 : 7), '/');
	snprintf(c->url, sizeof(c->url), "%.*s%s",
		 (int)(eplen && ep[eplen - 1] == '/' ? eplen - 1 : eplen), ep,
		 path ? (ep[eplen - 1] == '/' ? "/" : "") : "/");
	snprintf(c->sigv4, sizeof(c->sigv4), "aws:amz:%s:ec2", cfg->region);
	c->headers = curl_slist_append(
		NULL, "Content-Type: application/x-www-form-urlencoded; "
		      "charset=utf-8");
	if (c->headers && *cfg->session_token) {
		size_t hl = strlen(cfg->session_token) + 32;
		char *h = malloc(hl);

		if (h) {
			snprintf(h, hl, "X-Amz-Security-Token: %s",
				 cfg->session_token);
			c->headers = curl_slist_append(c->headers, h);
			memset(h, 0, hl);
			free(h);
		} else {
			curl_slist_free_all(c->headers);
			c->headers = NULL;
		}
	}
	if (!c->headers) {
		snprintf(err, errlen, "cannot set up libcurl");
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	return c;
fail:
	curl_slist_free_all(c->headers);
	aws_config_clear(&c->cfg);
	free(c);
	return NULL;
}

void ec2_client_free(struct ec2_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	/* The token header is a secret too. */
	for (struct curl_slist *h = c->headers; h; h = h->next)
		memset(h->data, 0, strlen(h->data));
	curl_slist_free_all(c->headers);
	aws_config_clear(&c->cfg);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int ec2_retryable(const char *code, long http_status)
{
	static const char *const throttled[] = {
		"RequestLimitExceeded", "Throttling",
		"ThrottlingException",	"RequestThrottled",
		"ServiceUnavailable",	"Unavailable",
		"InternalError",	"InternalFailure",
	};

	for (size_t i = 0; i < sizeof(throttled) / sizeof(throttled[0]); i++)
		if (strcmp(code, throttled[i]) == 0)
			return 1;
	/* EC2 answers a lack of capacity with a server error: retrying at
	 * once does not help, and the deploy must say so. */
	if (strncmp(code, "Insufficient", 12) == 0)
		return 0;
	return http_status >= 500 || http_status == 429;
}

/* Full jitter: uniform in [0, min(max, base * 2^k)]. */
static long ec2_backoff_ms(const struct ec2_retry *r, int k)
{
	long cap = r->base_ms > 0 ? r->base_ms : 1;
	uint32_t rnd = 0;

	for (int i = 0; i < k && cap < r->max_ms; i++)
		cap *= 2;
	if (r->max_ms > 0 && cap > r->max_ms)
		cap = r->max_ms;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)time(NULL);
	return (long)(rnd % (uint32_t)(cap + 1));
}

static CURL *ec2_handle_take(struct ec2_client *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->npool)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->lock);
	return h ? h : curl_easy_init();
}

static void ec2_handle_put(struct ec2_client *c, CURL *h)
{
	pthread_mutex_lock(&c->lock);
	if (c->npool < EC2_POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (h)
		curl_easy_cleanup(h);
}

/* libcurl's progress callback: a cancelled call stops at once. */
static int ec2_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
			curl_off_t ultotal, curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancel_requested(ctx);
}

/* One HTTP exchange. 0 with the status, or a curl error. */
static CURLcode ec2_exchange(struct ec2_client *c, CURL *h,
			     const struct ec2_query *q, struct cancel *cancel,
			     struct ec2_buf *b, long *status)
{
	CURLcode rc;

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_POST, 1L);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)q->len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(h, CURLOPT_USERNAME, c->cfg.access_key);
	curl_easy_setopt(h, CURLOPT_PASSWORD, c->cfg.secret_key);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "cclfs/" CCLFS_VERSION);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 (long)(c->retry.request_timeout_ms > 0
					? c->retry.request_timeout_ms
					: 30000));
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ec2_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, ec2_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, cancel);
	rc = curl_easy_perform(h);
	*status = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return rc;
}

static int ec2_curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_ABORTED_BY_CALLBACK:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

static int ec2_curl_retryable(CURLcode rc)
{
	return rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT ||
	       rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
	       rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE ||
	       rc == CURLE_COULDNT_RESOLVE_HOST;
}

int ec2_call(struct ec2_client *c, const struct ec2_query *q,
	     struct cancel *cancel, char **body, size_t *len, char *code,
	     size_t codelen, char *err, size_t errlen)
{
	int rc = -EIO;
	CURL *h;

	*body = NULL;
	*len = 0;
	if (codelen)
		code[0] = '\0';
	if (q->failed || !q->body) {
		snprintf(err, errlen, "%s: out of memory building the request",
			 q->action);
		return -ENOMEM;
	}
	h = ec2_handle_take(c);
	if (!h) {
		snprintf(err, errlen, "%s: cannot set up libcurl", q->action);
		return -ENOMEM;
	}
	for (int attempt = 0; attempt < c->retry.attempts; attempt++) {
		struct ec2_buf b = {0};
		char acode[EC2_CODE_MAX] = "", msg[512] = "";
		long status = 0;
		CURLcode cr;
		int again;

		if (attempt > 0 &&
		    cancel_sleep_ms(cancel,
				    ec2_backoff_ms(&c->retry, attempt - 1))) {
			snprintf(err, errlen, "%s: cancelled", q->action);
			rc = -ECANCELED;
			break;
		}
		cr = ec2_exchange(c, h, q, cancel, &b, &status);
		if (cr == CURLE_OK && status == 200 && !b.failed) {
			*body = b.data ? b.data : strdup("");
			*len = b.len;
			rc = *body ? 0 : -ENOMEM;
			if (rc)
				snprintf(err, errlen, "out of memory");
			break;
		}
		if (cr != CURLE_OK) {
			snprintf(err, errlen, "%s: cannot reach %.300s: %s",
				 q->action, c->url, curl_easy_strerror(cr));
			rc = ec2_curl_errno(cr);
			again = ec2_curl_retryable(cr);
		} else if (b.failed) {
			snprintf(err, errlen, "%s: out of memory", q->action);
			rc = -ENOMEM;
			again = 0;
		} else {
			if (ec2_xml_error(b.data, b.len, acode, sizeof(acode),
					  msg, sizeof(msg)) == 0)
				snprintf(err, errlen, "%s: %s: %s", q->action,
					 acode, msg);
			else
				snprintf(err, errlen,
					 "%s: HTTP status %ld from %.300s",
					 q->action, status, c->url);
			snprintf(code, codelen, "%s", acode);
			again = ec2_retryable(acode, status);
			rc = strcmp(acode, "AuthFailure") == 0 ||
					     strcmp(acode,
						    "UnauthorizedOperation") ==
						     0 ||
					     strcmp(acode,
						    "SignatureDoesNotMatch") ==
						     0
				     ? -EACCES
				     : -EIO;
		}
		free(b.data);
		if (!again || rc == -ECANCELED)
			break;
	}
	ec2_handle_put(c, h);
	return rc;
}
