/* Google's JSON REST APIs (Compute Engine, Cloud Billing) over libcurl: calls
 * with the credentials' Bearer token, several at once in one curl multi, each
 * retried with full-jitter backoff; lists read page by page; operations waited
 * on together. */
#ifndef CCLFS_PROVIDERS_GCP_API_H
#define CCLFS_PROVIDERS_GCP_API_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

struct cancel;
struct gcp_auth;

#define GCP_COMPUTE_DEFAULT "https://compute.googleapis.com/compute/v1/"
#define GCP_URL_MAX	    2048
#define GCP_REASON_MAX	    96
#define GCP_CALL_ERR_MAX    512

struct gcp_retry {
	int attempts;		/* tries in all, >= 1 */
	int base_ms, max_ms;	/* backoff: random in [0, min(max, base*2^k)] */
	int request_timeout_ms; /* one HTTP exchange */
};

struct gcp_api;

/* A client of `endpoint` (a '/' is added when it does not end in one) with
 * auth's tokens; auth is borrowed and must outlive the client. NULL with err
 * when out of memory. */
struct gcp_api *gcp_api_new(struct gcp_auth *auth, const char *endpoint,
			    const struct gcp_retry *retry, char *err,
			    size_t errlen);
void gcp_api_free(struct gcp_api *a);
/* The project of the client's credentials ("" when none is known). */
const char *gcp_api_project(const struct gcp_api *a);

/* One call. The caller fills method, url and body; gcp_api_do fills the
 * rest. */
struct gcp_call {
	const char *method; /* "GET", "POST", "DELETE" */
	/* Relative to the endpoint ("projects/P/zones/Z/instances"), or
	 * absolute (http:// or https://, another API's). */
	char url[GCP_URL_MAX];
	char *body; /* JSON, malloc'd, freed by gcp_call_clear; or NULL */
	/* Sent without a Bearer token (the url carries an API key). */
	bool no_auth;
	int rc;	       /* 0 for a 2xx answer, else -errno */
	long status;   /* the HTTP status, 0 when none came */
	cJSON *answer; /* the answer's JSON (also an error's), or NULL */
	/* The error's first errors[].reason, else its status ("NOT_FOUND"). */
	char reason[GCP_REASON_MAX];
	/* "METHOD PATH: STATUS REASON: message" (no query, never a key). */
	char err[GCP_CALL_ERR_MAX];
};

/* Set up c (zeroed) for METHOD and the url of fmt. body: NULL, or a JSON
 * value whose text becomes the body (the value is not taken). */
__attribute__((format(printf, 3, 4))) void
gcp_call_init(struct gcp_call *c, const char *method, const char *fmt, ...);
void gcp_call_body(struct gcp_call *c, const cJSON *body);
/* Free the body and answer; c can be set up again. */
void gcp_call_clear(struct gcp_call *c);

/* Carry out the n calls at once (one curl multi), each retried on its own
 * after 429, 5xx, the reasons rateLimitExceeded, userRateLimitExceeded and
 * backendError, and network failures and timeouts; a 401 makes the token be
 * fetched afresh once. Returns 0 when every call got a 2xx answer, else the
 * first failed call's rc: -EACCES (401, 403, the credentials refused),
 * -ENOENT (404), -EEXIST (409), -EINVAL (400), -EAGAIN (still throttled),
 * -EIO, -ETIMEDOUT, -ECONNREFUSED; -ECANCELED when cancel fired (within
 * 50 ms). A token that cannot be had fails every call with its error. */
int gcp_api_do(struct gcp_api *a, struct gcp_call *calls, size_t n,
	       struct cancel *cancel);

/* What a list gives, item by item: for an aggregatedList `scope` is the
 * item's scope ("zones/us-central1-a"), else NULL. 0 to go on, else stop
 * with that value. */
typedef int (*gcp_item_fn)(void *ctx, const cJSON *item, const char *scope);

/* GET url page by page (maxResults and pageToken), with filter (NULL: none;
 * it is percent-encoded here) and fn called for every item. 0, fn's value
 * when it stopped, or -errno with err (the failed call's). */
int gcp_api_list(struct gcp_api *a, const char *url, const char *filter,
		 gcp_item_fn fn, void *ctx, struct cancel *cancel, char *err,
		 size_t errlen);

/* An operation to wait for, from the answer of the call that made it. */
struct gcp_op {
	char link[GCP_URL_MAX]; /* its selfLink */
	bool done;
	int rc;			   /* 0, or -EIO when it ended in error */
	char code[GCP_REASON_MAX]; /* its first error's code */
	/* Every error as "CODE: message", joined by "; ". */
	char err[GCP_CALL_ERR_MAX];
};

/* Fill op from an operation's JSON (an answer of insert, stop, ...): 0, or
 * -EPROTO when it is not one. */
int gcp_op_from(struct gcp_op *op, const cJSON *answer);

/* Wait until each of the n operations is DONE, asking about all of them at
 * once (their .../wait, which answers when done or after a while). Returns
 * 0 when they were all waited for (each op's rc says how it ended), or
 * -errno with err when asking failed (-ECANCELED: cancel fired). */
int gcp_api_wait(struct gcp_api *a, struct gcp_op *ops, size_t n,
		 struct cancel *cancel, char *err, size_t errlen);

/* Percent-encode s for a URL's query (RFC 3986's unreserved kept). 0, or -1
 * when out is too small. */
int gcp_api_encode(const char *s, char *out, size_t outlen);

#endif
