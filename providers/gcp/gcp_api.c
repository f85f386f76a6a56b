/* Google's REST calls: JSON bodies with the Bearer token over libcurl, many at
 * once in one curl multi (so N stops take the time of one), each retried with
 * full-jitter backoff when Google or the network asks for patience. */
#include "providers/gcp/gcp_api.h"

#include "providers/cancel.h"
#include "providers/gcp/gcp_auth.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* How often the transfers look at their cancellation token. */
#define GCP_API_POLL_MS 50
/* The largest answer read (an aggregated list page is well below). */
#define GCP_API_ANSWER_MAX (16 << 20)
/* Items asked for per page of a list. */
#define GCP_API_PAGE 500
/* Idle connections the share keeps. libcurl's default is 4 per transfer of
 * the multi, counted as they end: a batch of 64 calls closed most of its
 * connections as it drained, and the next batch opened them again (a TCP
 * handshake, and with TLS a new session, for each node of an interrupt). */
#define GCP_API_CONNS_KEPT 256L

struct gcp_api {
	struct gcp_auth *auth;
	char endpoint[GCP_URL_MAX];
	struct gcp_retry retry;
	/* Connections, DNS answers and TLS sessions shared by every call of
	 * every thread: a call reuses an open connection instead of a new
	 * handshake. One lock per kind of data. */
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

static void gcp_api_lock(CURL *h, curl_lock_data data, curl_lock_access acc,
			 void *ud)
{
	struct gcp_api *a = ud;

	(void)h;
	(void)acc;
	pthread_mutex_lock(&a->locks[data]);
}

static void gcp_api_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct gcp_api *a = ud;

	(void)h;
	pthread_mutex_unlock(&a->locks[data]);
}

static pthread_once_t gcp_api_once = PTHREAD_ONCE_INIT;

static void gcp_api_curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct gcp_api *gcp_api_new(struct gcp_auth *auth, const char *endpoint,
			    const struct gcp_retry *retry, char *err,
			    size_t errlen)
{
	struct gcp_api *a = calloc(1, sizeof(*a));
	size_t n;

	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_once(&gcp_api_once, gcp_api_curl_init);
	a->auth = auth;
	n = strlen(endpoint);
	snprintf(a->endpoint, sizeof(a->endpoint), "%s%s", endpoint,
		 n && endpoint[n - 1] == '/' ? "" : "/");
	a->retry = *retry;
	if (a->retry.attempts < 1)
		a->retry.attempts = 1;
	for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&a->locks[i], NULL);
	a->share = curl_share_init();
	if (a->share) {
		curl_share_setopt(a->share, CURLSHOPT_LOCKFUNC, gcp_api_lock);
		curl_share_setopt(a->share, CURLSHOPT_UNLOCKFUNC,
				  gcp_api_unlock);
		curl_share_setopt(a->share, CURLSHOPT_USERDATA, a);
		curl_share_setopt(a->share, CURLSHOPT_SHARE,
				  CURL_LOCK_DATA_CONNECT);
		curl_share_setopt(a->share, CURLSHOPT_SHARE,
				  CURL_LOCK_DATA_DNS);
		curl_share_setopt(a->share, CURLSHOPT_SHARE,
				  CURL_LOCK_DATA_SSL_SESSION);
	}
	return a;
}

void gcp_api_free(struct gcp_api *a)
{
	if (!a)
		return;
	if (a->share)
		curl_share_cleanup(a->share);
	for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&a->locks[i]);
	free(a);
}

const char *gcp_api_project(const struct gcp_api *a)
{
	return gcp_auth_project(a->auth);
}

void gcp_call_init(struct gcp_call *c, const char *method, const char *fmt, ...)
{
	va_list ap;

	memset(c, 0, sizeof(*c));
	c->method = method;
	va_start(ap, fmt);
	vsnprintf(c->url, sizeof(c->url), fmt, ap);
	va_end(ap);
}

void gcp_call_body(struct gcp_call *c, const cJSON *body)
{
	free(c->body);
	c->body = body ? cJSON_PrintUnformatted(body) : NULL;
}

void gcp_call_clear(struct gcp_call *c)
{
	free(c->body);
	c->body = NULL;
	cJSON_Delete(c->answer);
	c->answer = NULL;
}

int gcp_api_encode(const char *s, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || strchr("-_.~", ch)) {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = (char)ch;
		} else {
			if (o + 3 >= outlen)
				return -1;
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (o >= outlen)
		return -1;
	out[o] = '\0';
	return 0;
}

/* --- one call in flight --- */

struct gcp_flight {
	struct gcp_call *call;
	CURL *easy;
	struct curl_slist *headers;
	char *data;
	size_t len, cap;
	bool overflow;
	int attempt;	  /* tries made */
	int64_t next_ms;  /* when to try again (monotonic) */
	bool busy, final; /* in the multi; answered for good */
	bool reauth;	  /* a 401 already made the token be fetched anew */
};

static int64_t gcp_api_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long gcp_api_jitter(const struct gcp_retry *r, int k)
{
	uint32_t rnd = 0;
	long cap = r->base_ms;

	for (int i = 0; i < k && cap < r->max_ms; i++)
		cap *= 2;
	if (cap > r->max_ms)
		cap = r->max_ms;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)time(NULL);
	return cap > 0 ? (long)(rnd % (uint32_t)(cap + 1)) : 0;
}

static size_t gcp_api_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct gcp_flight *f = ud;
	size_t n = size * nmemb;

	if (f->len + n + 1 > GCP_API_ANSWER_MAX) {
		f->overflow = true;
		return 0;
	}
	if (f->len + n + 1 > f->cap) {
		size_t cap = f->cap ? f->cap : 8192;
		char *d;

		while (cap < f->len + n + 1)
			cap *= 2;
		d = realloc(f->data, cap);
		if (!d) {
			f->overflow = true;
			return 0;
		}
		f->data = d;
		f->cap = cap;
	}
	memcpy(f->data + f->len, ptr, n);
	f->len += n;
	f->data[f->len] = '\0';
	return n;
}

/* The call's path for messages: relative to the endpoint, no query. */
static void gcp_api_path(const struct gcp_api *a, const struct gcp_call *c,
			 char *out, size_t outlen)
{
	const char *u = c->url;
	size_t n = strlen(a->endpoint);

	if (strncmp(u, a->endpoint, n) == 0)
		u += n;
	snprintf(out, outlen, "%.*s", (int)strcspn(u, "?"), u);
}

static void gcp_api_release(struct gcp_flight *f, CURLM *multi)
{
	if (f->easy) {
		if (f->busy)
			curl_multi_remove_handle(multi, f->easy);
		curl_easy_cleanup(f->easy);
	}
	if (f->headers) {
		/* The Authorization line holds the token. */
		for (struct curl_slist *h = f->headers; h; h = h->next)
			OPENSSL_cleanse(h->data, strlen(h->data));
		curl_slist_free_all(f->headers);
	}
	f->easy = NULL;
	f->headers = NULL;
	f->busy = false;
}

/* Start f's next try in multi with the token (NULL: none). */
static int gcp_api_start(struct gcp_api *a, struct gcp_flight *f,
			 const char *token, CURLM *multi)
{
	struct gcp_call *c = f->call;
	char url[2 * GCP_URL_MAX + 8];
	char auth[GCP_AUTH_TOKEN_MAX + 32];
	CURL *e = curl_easy_init();

	if (!e)
		return -ENOMEM;
	if (strncmp(c->url, "http://", 7) == 0 ||
	    strncmp(c->url, "https://", 8) == 0)
		snprintf(url, sizeof(url), "%s", c->url);
	else
		snprintf(url, sizeof(url), "%s%s", a->endpoint, c->url);
	f->len = 0;
	f->overflow = false;
	if (f->data)
		f->data[0] = '\0';
	f->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (token && f->headers) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		f->headers = curl_slist_append(f->headers, auth);
		OPENSSL_cleanse(auth, sizeof(auth));
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, c->method);
	if (c->body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE,
				 (long)strlen(c->body));
	} else if (strcmp(c->method, "POST") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "cclfs/" CCLFS_VERSION);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
			 (long)(a->retry.request_timeout_ms > 0
					? a->retry.request_timeout_ms
					: 60000));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, gcp_api_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(e, CURLOPT_PRIVATE, f);
	if (a->share)
		curl_easy_setopt(e, CURLOPT_SHARE, a->share);
	f->easy = e;
	if (!f->headers || curl_multi_add_handle(multi, e) != CURLM_OK) {
		gcp_api_release(f, multi);
		return -ENOMEM;
	}
	f->busy = true;
	f->attempt++;
	return 0;
}

/* The errno of an HTTP status that is not worth another try. */
static const struct {
	long status;
	int err;
} gcp_api_statuses[] = {
	{400, -EINVAL}, {401, -EACCES},	   {403, -EACCES}, {404, -ENOENT},
	{409, -EEXIST}, {412, -EAGAIN},	   {429, -EAGAIN}, {500, -EIO},
	{503, -EAGAIN}, {504, -ETIMEDOUT},
};

/* Google's reasons that ask for another try (also with a 403). */
static const char *const gcp_api_again[] = {
	"rateLimitExceeded",
	"userRateLimitExceeded",
	"backendError",
	"internalError",
};

/* The network failures worth another try, and their errno. */
static const struct {
	CURLcode code;
	int err;
} gcp_api_curl[] = {
	{CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT},
	{CURLE_COULDNT_CONNECT, -ECONNREFUSED},
	{CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH},
	{CURLE_SEND_ERROR, -EIO},
	{CURLE_RECV_ERROR, -EIO},
	{CURLE_GOT_NOTHING, -EIO},
	{CURLE_PARTIAL_FILE, -EIO},
};

/* Read Google's error document of c's answer into reason and message. */
static void gcp_api_error_of(struct gcp_call *c, char *msg, size_t msglen)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(c->answer, "error");
	const cJSON *errs = cJSON_GetObjectItemCaseSensitive(e, "errors");
	const cJSON *first = cJSON_GetArrayItem(errs, 0);
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(first, "reason");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(e, "status");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");

	if (cJSON_IsString(reason))
		snprintf(c->reason, sizeof(c->reason), "%s",
			 reason->valuestring);
	else if (cJSON_IsString(status))
		snprintf(c->reason, sizeof(c->reason), "%s",
			 status->valuestring);
	else if (cJSON_IsString(e)) /* OAuth-style {"error": "x"} */
		snprintf(c->reason, sizeof(c->reason), "%s", e->valuestring);
	snprintf(msg, msglen, "%s",
		 cJSON_IsString(m) ? m->valuestring : "no message");
}

static bool gcp_api_retryable(const struct gcp_call *c)
{
	if (c->status == 429 || c->status >= 500)
		return true;
	for (size_t i = 0; i < sizeof(gcp_api_again) / sizeof(gcp_api_again[0]);
	     i++)
		if (strcmp(c->reason, gcp_api_again[i]) == 0)
			return true;
	return false;
}

/* f's transfer ended with cr: settle the call, or schedule another try
 * (true). */
static bool gcp_api_settle(struct gcp_api *a, struct gcp_flight *f, CURLcode cr,
			   bool *reauth)
{
	struct gcp_call *c = f->call;
	char path[256], msg[320];
	bool again = false;

	gcp_api_path(a, c, path, sizeof(path));
	cJSON_Delete(c->answer);
	c->answer = NULL;
	c->reason[0] = '\0';
	c->status = 0;
	if (cr != CURLE_OK || f->overflow) {
		c->rc = f->overflow ? -EFBIG : -EIO;
		for (size_t i = 0;
		     i < sizeof(gcp_api_curl) / sizeof(gcp_api_curl[0]); i++)
			if (gcp_api_curl[i].code == cr) {
				c->rc = gcp_api_curl[i].err;
				again = true;
			}
		snprintf(c->err, sizeof(c->err), "%s %.200s: %s", c->method,
			 path,
			 f->overflow ? "the answer is too large"
				     : curl_easy_strerror(cr));
	} else {
		curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &c->status);
		c->answer = f->data ? cJSON_Parse(f->data) : NULL;
		if (c->status >= 200 && c->status < 300) {
			c->rc = 0;
			c->err[0] = '\0';
			if (!c->answer && f->len) {
				c->rc = -EPROTO;
				snprintf(c->err, sizeof(c->err),
					 "%s %.200s: the answer is not JSON",
					 c->method, path);
			}
			return false;
		}
		gcp_api_error_of(c, msg, sizeof(msg));
		c->rc = -EIO;
		for (size_t i = 0;
		     i < sizeof(gcp_api_statuses) / sizeof(gcp_api_statuses[0]);
		     i++)
			if (gcp_api_statuses[i].status == c->status)
				c->rc = gcp_api_statuses[i].err;
		snprintf(c->err, sizeof(c->err), "%s %.200s: %ld %.95s%s%.200s",
			 c->method, path, c->status, c->reason,
			 c->reason[0] ? ": " : "", msg);
		again = gcp_api_retryable(c);
		if (c->status == 401 && !f->reauth && !c->no_auth) {
			/* The token was revoked or expired early: one more
			 * try with a new one. */
			f->reauth = true;
			*reauth = true;
			f->next_ms = 0;
			return true;
		}
	}
	if (!again || f->attempt >= a->retry.attempts)
		return false;
	f->next_ms =
		gcp_api_now_ms() + gcp_api_jitter(&a->retry, f->attempt - 1);
	return true;
}

static int gcp_api_token(struct gcp_api *a, struct gcp_flight *fl, size_t n,
			 struct cancel *cancel, char *token, size_t len)
{
	char err[GCP_AUTH_ERR_MAX];
	int rc;
	bool needed = false;

	for (size_t i = 0; i < n; i++)
		needed |= !fl[i].call->no_auth && !fl[i].final;
	if (!needed)
		return 0;
	rc = gcp_auth_token(a->auth, cancel, token, len, err, sizeof(err));
	if (rc == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!fl[i].call->no_auth && !fl[i].final) {
			fl[i].call->rc = rc;
			snprintf(fl[i].call->err, sizeof(fl[i].call->err),
				 "%.500s", err);
			fl[i].final = true;
		}
	return rc;
}

int gcp_api_do(struct gcp_api *a, struct gcp_call *calls, size_t n,
	       struct cancel *cancel)
{
	struct gcp_flight *fl = n ? calloc(n, sizeof(*fl)) : NULL;
	CURLM *multi = curl_multi_init();
	char token[GCP_AUTH_TOKEN_MAX];
	size_t left = n;
	int first = 0;

	token[0] = '\0';
	if ((n && !fl) || !multi) {
		for (size_t i = 0; i < n; i++) {
			calls[i].rc = -ENOMEM;
			snprintf(calls[i].err, sizeof(calls[i].err),
				 "out of memory");
		}
		free(fl);
		if (multi)
			curl_multi_cleanup(multi);
		return n ? -ENOMEM : 0;
	}
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, GCP_API_CONNS_KEPT);
	for (size_t i = 0; i < n; i++) {
		fl[i].call = &calls[i];
		calls[i].rc = -EIO;
	}
	if (gcp_api_token(a, fl, n, cancel, token, sizeof(token)) != 0)
		for (size_t i = 0; i < n; i++)
			left -= fl[i].final;
	while (left > 0) {
		int64_t now = gcp_api_now_ms();
		bool reauth = false;
		int running = 0, qleft;
		CURLMsg *m;

		if (cancel_requested(cancel))
			break;
		for (size_t i = 0; i < n; i++)
			if (!fl[i].final && !fl[i].busy &&
			    fl[i].next_ms <= now &&
			    gcp_api_start(a, &fl[i],
					  fl[i].call->no_auth ? NULL : token,
					  multi) != 0) {
				fl[i].call->rc = -ENOMEM;
				snprintf(fl[i].call->err,
					 sizeof(fl[i].call->err),
					 "out of memory");
				fl[i].final = true;
				left--;
			}
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &qleft))) {
			struct gcp_flight *f = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&f);
			if (!f)
				continue;
			if (!gcp_api_settle(a, f, m->data.result, &reauth)) {
				f->final = true;
				left--;
			}
			gcp_api_release(f, multi);
		}
		if (reauth) {
			gcp_auth_forget_token(a->auth);
			if (gcp_api_token(a, fl, n, cancel, token,
					  sizeof(token)) != 0) {
				left = 0;
				for (size_t i = 0; i < n; i++)
					left += !fl[i].final;
			}
		}
		if (left > 0)
			curl_multi_poll(multi, NULL, 0, GCP_API_POLL_MS, NULL);
	}
	OPENSSL_cleanse(token, sizeof(token));
	for (size_t i = 0; i < n; i++) {
		if (!fl[i].final) {
			fl[i].call->rc = -ECANCELED;
			snprintf(fl[i].call->err, sizeof(fl[i].call->err),
				 "cancelled");
		}
		gcp_api_release(&fl[i], multi);
		free(fl[i].data);
		if (fl[i].call->rc && !first)
			first = fl[i].call->rc;
	}
	free(fl);
	curl_multi_cleanup(multi);
	return first;
}

/* --- lists --- */

/* Hand the items of one page to fn: an array, or (aggregatedList) an
 * object of scopes, each holding one array beside an optional warning. */
static int gcp_api_items(const cJSON *items, gcp_item_fn fn, void *ctx)
{
	const cJSON *scope, *list, *item;
	int rc;

	if (cJSON_IsArray(items)) {
		cJSON_ArrayForEach(item, items)
		{
			if ((rc = fn(ctx, item, NULL)))
				return rc;
		}
		return 0;
	}
	cJSON_ArrayForEach(scope, items)
	{
		cJSON_ArrayForEach(list, scope)
		{
			if (!cJSON_IsArray(list))
				continue;
			cJSON_ArrayForEach(item, list)
			{
				if ((rc = fn(ctx, item, scope->string)))
					return rc;
			}
		}
	}
	return 0;
}

int gcp_api_list(struct gcp_api *a, const char *url, const char *filter,
		 gcp_item_fn fn, void *ctx, struct cancel *cancel, char *err,
		 size_t errlen)
{
	char fenc[1024] = "", page[1024] = "";
	const char *sep = strchr(url, '?') ? "&" : "?";
	struct gcp_call c;
	int rc;

	if (filter && gcp_api_encode(filter, fenc, sizeof(fenc)) != 0) {
		snprintf(err, errlen, "the filter is too long");
		return -ENAMETOOLONG;
	}
	for (;;) {
		const cJSON *next;
		char penc[sizeof(page) * 3];

		if (gcp_api_encode(page, penc, sizeof(penc)) != 0)
			penc[0] = '\0';
		gcp_call_init(&c, "GET", "%s%smaxResults=%d%s%s%s%s", url, sep,
			      GCP_API_PAGE, fenc[0] ? "&filter=" : "", fenc,
			      penc[0] ? "&pageToken=" : "", penc);
		rc = gcp_api_do(a, &c, 1, cancel);
		if (rc) {
			snprintf(err, errlen, "%s", c.err);
			gcp_call_clear(&c);
			return rc;
		}
		rc = gcp_api_items(
			cJSON_GetObjectItemCaseSensitive(c.answer, "items"), fn,
			ctx);
		next = cJSON_GetObjectItemCaseSensitive(c.answer,
							"nextPageToken");
		if (rc == 0 && cJSON_IsString(next) && next->valuestring[0])
			snprintf(page, sizeof(page), "%s", next->valuestring);
		else
			page[0] = '\0';
		gcp_call_clear(&c);
		if (rc || !page[0])
			return rc;
	}
}

/* --- operations --- */

/* Read an operation's state into op: done, and its errors. */
static void gcp_op_read(struct gcp_op *op, const cJSON *o)
{
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
	const cJSON *errs = cJSON_GetObjectItemCaseSensitive(e, "errors");
	const cJSON *one;
	size_t len = 0;

	op->done = cJSON_IsString(status) &&
		   strcmp(status->valuestring, "DONE") == 0;
	if (!op->done || !cJSON_IsArray(errs) || cJSON_GetArraySize(errs) == 0)
		return;
	op->rc = -EIO;
	op->err[0] = '\0';
	cJSON_ArrayForEach(one, errs)
	{
		const cJSON *code =
			cJSON_GetObjectItemCaseSensitive(one, "code");
		const cJSON *msg =
			cJSON_GetObjectItemCaseSensitive(one, "message");
		const char *cs = cJSON_IsString(code) ? code->valuestring : "";
		int w;

		if (!op->code[0])
			snprintf(op->code, sizeof(op->code), "%s", cs);
		if (len >= sizeof(op->err) - 1)
			break;
		w = snprintf(op->err + len, sizeof(op->err) - len, "%s%s: %s",
			     len ? "; " : "", cs,
			     cJSON_IsString(msg) ? msg->valuestring : "");
		len += w > 0 ? (size_t)w : 0;
	}
}

int gcp_op_from(struct gcp_op *op, const cJSON *answer)
{
	const cJSON *link =
		cJSON_GetObjectItemCaseSensitive(answer, "selfLink");

	memset(op, 0, sizeof(*op));
	if (!cJSON_IsString(link))
		return -EPROTO;
	snprintf(op->link, sizeof(op->link), "%s", link->valuestring);
	gcp_op_read(op, answer);
	return 0;
}

int gcp_api_wait(struct gcp_api *a, struct gcp_op *ops, size_t n,
		 struct cancel *cancel, char *err, size_t errlen)
{
	struct gcp_call *calls = n ? calloc(n, sizeof(*calls)) : NULL;
	size_t *which = n ? calloc(n, sizeof(*which)) : NULL;
	int rc = 0;

	if (n && (!calls || !which)) {
		free(calls);
		free(which);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (!ops[i].done) {
				gcp_call_init(&calls[k], "POST", "%s/wait",
					      ops[i].link);
				which[k++] = i;
			}
		if (k == 0)
			break;
		/* Each call's own result is read below. */
		(void)gcp_api_do(a, calls, k, cancel);
		for (size_t j = 0; j < k; j++) {
			if (calls[j].rc == 0)
				gcp_op_read(&ops[which[j]], calls[j].answer);
			else if (calls[j].rc == -ENOENT) {
				/* Operations are kept for a while only: one
				 * that is gone has long ended. */
				ops[which[j]].done = true;
			}
		}
		rc = 0;
		for (size_t j = 0; j < k && !rc; j++)
			if (calls[j].rc && calls[j].rc != -ENOENT) {
				snprintf(err, errlen, "%s", calls[j].err);
				rc = calls[j].rc;
			}
		for (size_t j = 0; j < k; j++)
			gcp_call_clear(&calls[j]);
		if (rc)
			break;
	}
	free(calls);
	free(which);
	return rc;
}
