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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Idle handles kept (with their connections) for the next calls. */
#define EC2_POOL_MAX 8
/* How often a transfer in progress looks at its cancellation token. */
#define EC2_POLL_MS 50

/* An easy handle and the multi handle it runs in: the multi keeps the
 * connections, and its poll wakes the transfer often enough to see a
 * cancellation at once (libcurl's progress callback may be a second
 * apart when nothing arrives). */
struct ec2_conn {
	CURL *easy;
	CURLM *multi;
};

struct ec2_client {
	/* Calls of many clusters run at once, each on a handle of its own
	 * taken from the pool: one slow call never holds up another. */
	pthread_mutex_t lock;
	struct ec2_conn pool[EC2_POOL_MAX];
	size_t npool;
	struct curl_slist *headers;
	aws_error_fn errors;
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

/* The token header (a secret too) is wiped before it is freed. */
static void ec2_headers_free(struct curl_slist *headers)
{
	for (struct curl_slist *h = headers; h; h = h->next)
		memset(h->data, 0, strlen(h->data));
	curl_slist_free_all(headers);
}

struct ec2_client *aws_client_new(const struct aws_config *cfg, const char *url,
				  const char *service, const char *region,
				  const char *content_type, aws_error_fn errors,
				  const struct ec2_retry *retry, char *err,
				  size_t errlen)
{
	struct ec2_client *c = calloc(1, sizeof(*c));
	size_t eplen = strlen(url);
	const char *path;
	char ctype[160];

	pthread_once(&ec2_curl_once, ec2_curl_init);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	c->retry = *retry;
	c->errors = errors;
	if (c->retry.attempts < 1)
		c->retry.attempts = 1;
	if (strncmp(url, "https://", 8) != 0 &&
	    strncmp(url, "http://", 7) != 0) {
		snprintf(err, errlen,
			 "the %s endpoint \"%.200s\" is not an http(s):// URL",
			 service, url);
		goto fail;
	}
	/* The path is "/" unless the endpoint has one. */
	path = strchr(url + (url[4] == 's' ? 8 : 7), '/');
	snprintf(c->url, sizeof(c->url), "%.*s%s",
		 (int)(eplen && url[eplen - 1] == '/' ? eplen - 1 : eplen), url,
		 path ? (url[eplen - 1] == '/' ? "/" : "") : "/");
	snprintf(c->sigv4, sizeof(c->sigv4), "aws:amz:%s:%s", region, service);
	snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
	c->headers = curl_slist_append(NULL, ctype);
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
	ec2_headers_free(c->headers);
	aws_config_clear(&c->cfg);
	free(c);
	return NULL;
}

struct ec2_client *ec2_client_new(const struct aws_config *cfg,
				  const struct ec2_retry *retry, char *err,
				  size_t errlen)
{
	return aws_client_new(cfg, cfg->endpoint, "ec2", cfg->region,
			      "application/x-www-form-urlencoded; "
			      "charset=utf-8",
			      ec2_xml_error, retry, err, errlen);
}

void ec2_client_free(struct ec2_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->npool; i++) {
		curl_easy_cleanup(c->pool[i].easy);
		curl_multi_cleanup(c->pool[i].multi);
	}
	ec2_headers_free(c->headers);
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

static int ec2_handle_take(struct ec2_client *c, struct ec2_conn *h)
{
	int found = 0;

	pthread_mutex_lock(&c->lock);
	if (c->npool) {
		*h = c->pool[--c->npool];
		found = 1;
	}
	pthread_mutex_unlock(&c->lock);
	if (found)
		return 0;
	h->easy = curl_easy_init();
	h->multi = curl_multi_init();
	if (h->easy && h->multi)
		return 0;
	curl_easy_cleanup(h->easy);
	curl_multi_cleanup(h->multi);
	return -1;
}

static void ec2_handle_put(struct ec2_client *c, const struct ec2_conn *h)
{
	int kept = 0;

	pthread_mutex_lock(&c->lock);
	if (c->npool < EC2_POOL_MAX) {
		c->pool[c->npool++] = *h;
		kept = 1;
	}
	pthread_mutex_unlock(&c->lock);
	if (!kept) {
		curl_easy_cleanup(h->easy);
		curl_multi_cleanup(h->multi);
	}
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

/* Run the transfer of h in its multi handle until it ends or cancel
 * fires (CURLE_ABORTED_BY_CALLBACK). */
static CURLcode ec2_perform(const struct ec2_conn *h, struct cancel *cancel)
{
	CURLcode rc = CURLE_OK;
	bool aborted = false;
	CURLMsg *msg;
	int left;

	if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	for (;;) {
		int running = 0, fds;

		if (curl_multi_perform(h->multi, &running) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (!running)
			break;
		if (cancel_requested(cancel)) {
			aborted = true;
			break;
		}
		if (curl_multi_poll(h->multi, NULL, 0, EC2_POLL_MS, &fds) !=
		    CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
	}
	while ((msg = curl_multi_info_read(h->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy)
			rc = msg->data.result;
	curl_multi_remove_handle(h->multi, h->easy);
	return aborted ? CURLE_ABORTED_BY_CALLBACK : rc;
}

/* One HTTP exchange. 0 with the status, or a curl error. */
static CURLcode ec2_exchange(struct ec2_client *c, const struct ec2_conn *h,
			     const char *body, size_t len,
			     const struct curl_slist *headers,
			     struct cancel *cancel, struct ec2_buf *b,
			     long *status)
{
	CURL *e = h->easy;
	CURLcode rc;

	curl_easy_reset(e);
	curl_easy_setopt(e, CURLOPT_URL, c->url);
	curl_easy_setopt(e, CURLOPT_POST, 1L);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(e, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(e, CURLOPT_USERNAME, c->cfg.access_key);
	curl_easy_setopt(e, CURLOPT_PASSWORD, c->cfg.secret_key);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "cclfs/" CCLFS_VERSION);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
			 (long)(c->retry.request_timeout_ms > 0
					? c->retry.request_timeout_ms
					: 30000));
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, ec2_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, ec2_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, cancel);
	rc = ec2_perform(h, cancel);
	*status = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
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

int aws_code_errno(const char *code)
{
	static const char *const denied[] = {
		"AuthFailure",
		"UnauthorizedOperation",
		"SignatureDoesNotMatch",
		"AccessDeniedException",
		"UnrecognizedClientException",
		"InvalidSignatureException",
		"OptInRequired",
		"ExpiredToken",
		"ExpiredTokenException",
	};

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		if (strcmp(code, denied[i]) == 0)
			return -EACCES;
	return -EIO;
}

/* The client's headers and one more line, for one call (NULL: out of
 * memory). */
static struct curl_slist *ec2_call_headers(const struct ec2_client *c,
					   const char *header)
{
	struct curl_slist *l = NULL;

	for (const struct curl_slist *h = c->headers; h; h = h->next) {
		struct curl_slist *n = curl_slist_append(l, h->data);

		if (!n) {
			ec2_headers_free(l);
			return NULL;
		}
		l = n;
	}
	if (header) {
		struct curl_slist *n = curl_slist_append(l, header);

		if (!n) {
			ec2_headers_free(l);
			return NULL;
		}
		l = n;
	}
	return l;
}

int aws_client_post(struct ec2_client *c, const char *name, const char *header,
		    const char *body, size_t len, struct cancel *cancel,
		    char **out, size_t *outlen, char *code, size_t codelen,
		    char *err, size_t errlen)
{
	struct curl_slist *headers = NULL;
	struct ec2_conn h;
	int rc = -EIO;

	*out = NULL;
	*outlen = 0;
	if (codelen)
		code[0] = '\0';
	if (header && !(headers = ec2_call_headers(c, header))) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	if (ec2_handle_take(c, &h)) {
		ec2_headers_free(headers);
		snprintf(err, errlen, "%s: cannot set up libcurl", name);
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
			snprintf(err, errlen, "%s: cancelled", name);
			rc = -ECANCELED;
			break;
		}
		cr = ec2_exchange(c, &h, body, len,
				  headers ? headers : c->headers, cancel, &b,
				  &status);
		if (cr == CURLE_OK && status == 200 && !b.failed) {
			*out = b.data ? b.data : strdup("");
			*outlen = b.len;
			rc = *out ? 0 : -ENOMEM;
			if (rc)
				snprintf(err, errlen, "out of memory");
			break;
		}
		if (cr == CURLE_ABORTED_BY_CALLBACK) {
			snprintf(err, errlen, "%s: cancelled", name);
			rc = -ECANCELED;
			again = 0;
		} else if (cr != CURLE_OK) {
			snprintf(err, errlen, "%s: cannot reach %.300s: %s",
				 name, c->url, curl_easy_strerror(cr));
			rc = ec2_curl_errno(cr);
			again = ec2_curl_retryable(cr);
		} else if (b.failed) {
			snprintf(err, errlen, "%s: out of memory", name);
			rc = -ENOMEM;
			again = 0;
		} else {
			if (c->errors(b.data, b.len, acode, sizeof(acode), msg,
				      sizeof(msg)) == 0)
				snprintf(err, errlen, "%s: %s: %s", name, acode,
					 msg);
			else
				snprintf(err, errlen,
					 "%s: HTTP status %ld from %.300s",
					 name, status, c->url);
			snprintf(code, codelen, "%s", acode);
			again = ec2_retryable(acode, status);
			rc = aws_code_errno(acode);
		}
		free(b.data);
		if (!again || rc == -ECANCELED)
			break;
	}
	ec2_handle_put(c, &h);
	ec2_headers_free(headers);
	return rc;
}

int ec2_call(struct ec2_client *c, const struct ec2_query *q,
	     struct cancel *cancel, char **body, size_t *len, char *code,
	     size_t codelen, char *err, size_t errlen)
{
	if (q->failed || !q->body) {
		*body = NULL;
		*len = 0;
		if (codelen)
			code[0] = '\0';
		snprintf(err, errlen, "%s: out of memory building the request",
			 q->action);
		return -ENOMEM;
	}
	return aws_client_post(c, q->action, NULL, q->body, q->len, cancel,
			       body, len, code, codelen, err, errlen);
}
