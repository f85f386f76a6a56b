/* GCP credentials and their tokens: discovery in Google's order, the service
 * account's RS256 JWT (OpenSSL), refresh tokens, the metadata server, over
 * libcurl; retried when the network fails, never when Google refuses. */
#include "providers/gcp/gcp_auth.h"

#include "providers/cancel.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GCP_TOKEN_URI_DEFAULT "https://oauth2.googleapis.com/token"
#define GCP_METADATA_DEFAULT  "metadata.google.internal"
#define GCP_METADATA_TOKEN                                                     \
	"/computeMetadata/v1/instance/service-accounts/default/token"
#define GCP_METADATA_PROJECT "/computeMetadata/v1/project/project-id"
#define GCP_FORM_JWT                                                           \
	"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"     \
	"&assertion="
#define GCP_ADC_FILE "application_default_credentials.json"
/* Google accepts assertions that live an hour at most. */
#define GCP_JWT_LIFETIME 3600
/* A token this close to its expiry is replaced: a call made with it must
 * not fail halfway through a deploy. */
#define GCP_TOKEN_MARGIN 300
/* Network failures: tries, and the first backoff (doubled each time). */
#define GCP_ATTEMPTS   4
#define GCP_BACKOFF_MS 250
/* How often a transfer in progress looks at its cancellation token. */
#define GCP_POLL_MS 50
/* The largest credentials file and answer read. */
#define GCP_FILE_MAX   65536
#define GCP_ANSWER_MAX 262144

enum gcp_kind { GCP_SERVICE_ACCOUNT, GCP_AUTHORIZED_USER, GCP_METADATA };

struct gcp_auth {
	pthread_mutex_t lock; /* token and fresh_until */
	enum gcp_kind kind;
	char source[PATH_MAX + 64];
	char project[256];
	char scopes[1024];
	/* Where tokens come from: the file's token_uri, or the metadata
	 * server's token URL. */
	char token_url[2048];
	char metadata_host[256];
	/* A service account's. */
	char email[320];
	char key_id[128];
	EVP_PKEY *key;
	/* An authorized user's (heap copies, wiped when freed). */
	char *client_id, *client_secret, *refresh_token;
	char token[GCP_AUTH_TOKEN_MAX];
	time_t fresh_until; /* CLOCK_MONOTONIC seconds */
};

/* One HTTP exchange: a GET, or a POST of a form. */
struct gcp_exchange {
	const char *url;
	const char *form; /* NULL: a GET */
	bool metadata;	  /* Metadata-Flavor: Google and a short timeout */
	int attempts;
};

/* An answer growing as it arrives; it may hold a token, so every copy is
 * wiped before it is freed. */
struct gcp_buf {
	char *data;
	size_t len, cap;
	bool failed;
};

/* What a failed transfer means, and whether another try may help. */
static const struct gcp_curl_error {
	CURLcode code;
	int err;
	bool retry;
} gcp_curl_errors[] = {
	{CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT, true},
	{CURLE_COULDNT_CONNECT, -ECONNREFUSED, true},
	{CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH, true},
	{CURLE_RECV_ERROR, -EIO, true},
	{CURLE_SEND_ERROR, -EIO, true},
	{CURLE_GOT_NOTHING, -EIO, true},
	{CURLE_PARTIAL_FILE, -EIO, true},
	{CURLE_ABORTED_BY_CALLBACK, -ECANCELED, false},
};

static pthread_once_t gcp_curl_once = PTHREAD_ONCE_INIT;

static void gcp_curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static time_t gcp_now_mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec;
}

static void gcp_free_secret(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

/* Wipe every string of a JSON tree (a key file, a token answer) before it
 * is deleted. */
static void gcp_json_wipe(cJSON *item)
{
	for (; item; item = item->next) {
		if (item->valuestring)
			OPENSSL_cleanse(item->valuestring,
					strlen(item->valuestring));
		gcp_json_wipe(item->child);
	}
}

static void gcp_json_free(cJSON *doc)
{
	gcp_json_wipe(doc);
	cJSON_Delete(doc);
}

/* A non-empty string member, else NULL. */
static const char *gcp_json_str(const cJSON *doc, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, name);

	return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

/* --- HTTP --- */

/* Room in b for n more bytes and a NUL; false past GCP_ANSWER_MAX or out of
 * memory. A larger block is a new one (not realloc's), so the old one can be
 * wiped before it is freed. */
static bool gcp_buf_room(struct gcp_buf *b, size_t n)
{
	size_t need = b->len + n + 1, cap = b->cap ? b->cap : 4096;
	char *bigger;

	if (need <= b->cap)
		return true;
	if (need > GCP_ANSWER_MAX)
		return false;
	for (; cap < need; cap <<= 1)
		;
	if (!(bigger = malloc(cap)))
		return false;
	if (b->data) {
		memcpy(bigger, b->data, b->len);
		OPENSSL_cleanse(b->data, b->cap);
		free(b->data);
	}
	b->data = bigger;
	b->cap = cap;
	return true;
}

static size_t gcp_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct gcp_buf *b = ud;
	size_t n = size * nmemb;

	if (!gcp_buf_room(b, n)) {
		b->failed = true;
		return 0;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

static void gcp_buf_free(struct gcp_buf *b)
{
	if (b->data) {
		OPENSSL_cleanse(b->data, b->cap);
		free(b->data);
	}
	memset(b, 0, sizeof(*b));
}

/* Run easy's transfer in a multi handle of its own, whose poll wakes often
 * enough to see cancel fire at once (libcurl's progress callback may be a
 * second apart while nothing arrives). */
static CURLcode gcp_run(CURL *easy, struct cancel *cancel)
{
	CURLM *multi = curl_multi_init();
	CURLcode rc = CURLE_OK;
	CURLMsg *msg;
	int running = 1, left;

	if (!multi)
		return CURLE_OUT_OF_MEMORY;
	if (curl_multi_add_handle(multi, easy) != CURLM_OK) {
		curl_multi_cleanup(multi);
		return CURLE_FAILED_INIT;
	}
	while (running && rc == CURLE_OK) {
		if (cancel_requested(cancel))
			rc = CURLE_ABORTED_BY_CALLBACK;
		else if (curl_multi_perform(multi, &running) != CURLM_OK ||
			 (running &&
			  curl_multi_poll(multi, NULL, 0, GCP_POLL_MS, NULL) !=
				  CURLM_OK))
			rc = CURLE_FAILED_INIT;
	}
	while (rc == CURLE_OK && (msg = curl_multi_info_read(multi, &left)))
		if (msg->msg == CURLMSG_DONE)
			rc = msg->data.result;
	curl_multi_remove_handle(multi, easy);
	curl_multi_cleanup(multi);
	return rc;
}

/* One try of x: CURLE_OK with the answer and its status, or why not. */
static CURLcode gcp_try(const struct gcp_exchange *x, struct cancel *cancel,
			struct gcp_buf *b, long *status)
{
	CURL *e = curl_easy_init();
	struct curl_slist *headers = NULL;
	CURLcode rc;

	*status = 0;
	if (!e)
		return CURLE_OUT_OF_MEMORY;
	if (x->metadata)
		headers = curl_slist_append(NULL, "Metadata-Flavor: Google");
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	if (x->form) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->form);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE,
				 (long)strlen(x->form));
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "cclfs/" CCLFS_VERSION);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/* The metadata server is near or absent: a short wait tells which. */
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 x->metadata ? 1000L : 10000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, x->metadata ? 5000L : 30000L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, gcp_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
	rc = gcp_run(e, cancel);
	if (rc == CURLE_OK && b->failed)
		rc = CURLE_OUT_OF_MEMORY;
	if (rc == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(e);
	curl_slist_free_all(headers);
	return rc;
}

/* Full jitter: uniform in [0, GCP_BACKOFF_MS * 2^k]. */
static long gcp_backoff_ms(int k)
{
	uint32_t rnd = 0;

	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)time(NULL);
	return (long)(rnd % (uint32_t)((GCP_BACKOFF_MS << k) + 1));
}

/* x, retried while the network fails: 0 with any HTTP answer in b and its
 * status, or -errno with err. */
static int gcp_fetch(const struct gcp_exchange *x, struct cancel *cancel,
		     struct gcp_buf *b, long *status, char *err, size_t errlen)
{
	int rc = -EIO;

	pthread_once(&gcp_curl_once, gcp_curl_init);
	for (int attempt = 0; attempt < x->attempts; attempt++) {
		CURLcode cr;
		bool again = false;

		if (cancel_requested(cancel) ||
		    (attempt > 0 &&
		     cancel_sleep_ms(cancel, gcp_backoff_ms(attempt - 1)))) {
			snprintf(err, errlen, "cancelled");
			return -ECANCELED;
		}
		gcp_buf_free(b);
		cr = gcp_try(x, cancel, b, status);
		if (cr == CURLE_OK)
			return 0;
		rc = cr == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EIO;
		for (size_t i = 0;
		     i < sizeof(gcp_curl_errors) / sizeof(gcp_curl_errors[0]);
		     i++)
			if (gcp_curl_errors[i].code == cr) {
				rc = gcp_curl_errors[i].err;
				again = gcp_curl_errors[i].retry;
			}
		if (rc == -ECANCELED)
			snprintf(err, errlen, "cancelled");
		else
			snprintf(err, errlen, "cannot reach %.300s: %s", x->url,
				 curl_easy_strerror(cr));
		if (!again)
			break;
	}
	gcp_buf_free(b);
	return rc;
}

/* --- the service account's assertion --- */

/* base64url without padding (malloc'd, NULL: out of memory). */
static char *gcp_b64url(const unsigned char *in, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	int len;

	if (!out)
		return NULL;
	len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (char *p = out; *p; p++)
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	return out;
}

static char *gcp_b64url_json(const cJSON *doc)
{
	char *text = cJSON_PrintUnformatted(doc);
	char *out = text ? gcp_b64url((const unsigned char *)text, strlen(text))
			 : NULL;

	free(text);
	return out;
}

/* The signed JWT of a token request (malloc'd), or NULL with err. */
static char *gcp_jwt(const struct gcp_auth *a, char *err, size_t errlen)
{
	cJSON *header = cJSON_CreateObject(), *claims = cJSON_CreateObject();
	time_t now = time(NULL);
	char *h64 = NULL, *c64 = NULL, *s64 = NULL, *jwt = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0, inlen = 0, n;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *in = NULL;

	if (header && claims && md &&
	    cJSON_AddStringToObject(header, "alg", "RS256") &&
	    cJSON_AddStringToObject(header, "typ", "JWT") &&
	    cJSON_AddStringToObject(header, "kid", a->key_id) &&
	    cJSON_AddStringToObject(claims, "iss", a->email) &&
	    cJSON_AddStringToObject(claims, "scope", a->scopes) &&
	    cJSON_AddStringToObject(claims, "aud", a->token_url) &&
	    cJSON_AddNumberToObject(claims, "iat", (double)now) &&
	    cJSON_AddNumberToObject(claims, "exp",
				    (double)(now + GCP_JWT_LIFETIME))) {
		h64 = gcp_b64url_json(header);
		c64 = gcp_b64url_json(claims);
	}
	if (h64 && c64) {
		inlen = strlen(h64) + 1 + strlen(c64);
		in = malloc(inlen + 1);
	}
	if (in) {
		snprintf(in, inlen + 1, "%s.%s", h64, c64);
		if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, a->key) ==
			    1 &&
		    EVP_DigestSign(md, NULL, &siglen, (unsigned char *)in,
				   inlen) == 1 &&
		    (sig = malloc(siglen)) &&
		    EVP_DigestSign(md, sig, &siglen, (unsigned char *)in,
				   inlen) == 1)
			s64 = gcp_b64url(sig, siglen);
	}
	n = s64 ? inlen + 1 + strlen(s64) + 1 : 0;
	if (n && (jwt = malloc(n)))
		snprintf(jwt, n, "%s.%s", in, s64);
	if (!jwt)
		snprintf(err, errlen, "cannot sign the token request of %s",
			 a->source);
	ERR_clear_error();
	EVP_MD_CTX_free(md);
	cJSON_Delete(header);
	cJSON_Delete(claims);
	free(h64);
	free(c64);
	gcp_free_secret(s64); /* with `in`, a valid assertion for an hour */
	free(sig);
	free(in);
	return jwt;
}

/* --- token requests --- */

/* s percent-encoded for a form (malloc'd, wiped by the caller). */
static char *gcp_form_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	char *copy = e ? strdup(e) : NULL;

	if (e) {
		OPENSSL_cleanse(e, strlen(e));
		curl_free(e);
	}
	return copy;
}

/* The form body of a's grant (malloc'd, a secret), or NULL with err. */
static char *gcp_grant_form(const struct gcp_auth *a, char *err, size_t errlen)
{
	char *form = NULL, *jwt, *id, *secret, *refresh;
	size_t n;

	if (a->kind == GCP_SERVICE_ACCOUNT) {
		if (!(jwt = gcp_jwt(a, err, errlen)))
			return NULL;
		n = strlen(GCP_FORM_JWT) + strlen(jwt) + 1;
		if ((form = malloc(n)))
			snprintf(form, n, "%s%s", GCP_FORM_JWT, jwt);
		gcp_free_secret(jwt);
	} else {
		id = gcp_form_escape(a->client_id);
		secret = gcp_form_escape(a->client_secret);
		refresh = gcp_form_escape(a->refresh_token);
		n = id && secret && refresh
			    ? strlen(id) + strlen(secret) + strlen(refresh) + 80
			    : 0;
		if (n && (form = malloc(n)))
			snprintf(form, n,
				 "grant_type=refresh_token&client_id=%s"
				 "&client_secret=%s&refresh_token=%s",
				 id, secret, refresh);
		gcp_free_secret(id);
		gcp_free_secret(secret);
		gcp_free_secret(refresh);
	}
	if (!form)
		snprintf(err, errlen, "out of memory");
	return form;
}

/* A refused request: Google's error and description when the answer has
 * them (never anything else of it). */
static void gcp_refused(const struct gcp_auth *a, const struct gcp_buf *b,
			long status, char *err, size_t errlen)
{
	cJSON *doc = b->data ? cJSON_ParseWithLength(b->data, b->len) : NULL;
	const char *code = gcp_json_str(doc, "error");
	const char *what = gcp_json_str(doc, "error_description");
	char who[PATH_MAX + 400];

	if (a->kind == GCP_METADATA)
		snprintf(who, sizeof(who), "%s", a->source);
	else
		snprintf(who, sizeof(who), "the token endpoint %.300s",
			 a->token_url);
	if (code)
		snprintf(err, errlen, "%s refused %s: %s%s%s", who,
			 a->kind == GCP_METADATA ? "a token" : a->source, code,
			 what ? ": " : "", what ? what : "");
	else
		snprintf(err, errlen, "%s refused %s: HTTP status %ld", who,
			 a->kind == GCP_METADATA ? "a token" : a->source,
			 status);
	gcp_json_free(doc);
}

/* A fresh token from a's cache into out: 0, 1 when there is none, or
 * -ENOBUFS. */
static int gcp_cached(struct gcp_auth *a, char *out, size_t outlen)
{
	int rc = 1;

	pthread_mutex_lock(&a->lock);
	if (*a->token && gcp_now_mono() < a->fresh_until) {
		rc = strlen(a->token) < outlen ? 0 : -ENOBUFS;
		if (!rc)
			snprintf(out, outlen, "%s", a->token);
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

/* A token answer into out and a's cache: 0, or -EPROTO / -ENOBUFS. */
static int gcp_keep_token(struct gcp_auth *a, const struct gcp_buf *b,
			  char *out, size_t outlen)
{
	cJSON *doc = b->data ? cJSON_ParseWithLength(b->data, b->len) : NULL;
	const char *token = gcp_json_str(doc, "access_token");
	const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(doc, "expires_in");
	/* An answer without a lifetime: the usual hour; one beyond a day is
	 * not believed (nor cast to time_t). */
	double life = cJSON_IsNumber(ttl) ? ttl->valuedouble : 3600;
	int rc = -EPROTO;

	if (!(life >= 0 && life <= 86400))
		life = life > 86400 ? 86400 : 0;
	if (token && strlen(token) < sizeof(a->token)) {
		pthread_mutex_lock(&a->lock);
		snprintf(a->token, sizeof(a->token), "%s", token);
		/* A token that lives less than the margin is used once. */
		a->fresh_until =
			gcp_now_mono() + (time_t)life - GCP_TOKEN_MARGIN;
		pthread_mutex_unlock(&a->lock);
		rc = strlen(token) < outlen ? 0 : -ENOBUFS;
		if (!rc)
			snprintf(out, outlen, "%s", token);
	}
	gcp_json_free(doc);
	return rc;
}

/* A new token from a's endpoint into out and the cache: 0 or -errno with
 * err. */
static int gcp_grant(struct gcp_auth *a, struct cancel *cancel, char *out,
		     size_t outlen, char *err, size_t errlen)
{
	struct gcp_exchange x = {.url = a->token_url,
				 .metadata = a->kind == GCP_METADATA,
				 .attempts = GCP_ATTEMPTS};
	struct gcp_buf b = {0};
	char *form = NULL, why[512];
	long status = 0;
	int rc;

	if (a->kind != GCP_METADATA && !(form = gcp_grant_form(a, err, errlen)))
		return -ENOMEM;
	x.form = form;
	rc = gcp_fetch(&x, cancel, &b, &status, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "%s: no token: %s", a->source, why);
	} else if (status < 200 || status > 299) {
		gcp_refused(a, &b, status, err, errlen);
		rc = -EACCES;
	} else if ((rc = gcp_keep_token(a, &b, out, outlen)) == -EPROTO) {
		snprintf(err, errlen, "%s: the answer of %.300s is not a token",
			 a->source, a->token_url);
	} else if (rc) {
		snprintf(err, errlen, "%s: the token is too long", a->source);
	}
	gcp_buf_free(&b);
	gcp_free_secret(form);
	return rc;
}

int gcp_auth_token(struct gcp_auth *a, struct cancel *cancel, char *out,
		   size_t outlen, char *err, size_t errlen)
{
	int rc = gcp_cached(a, out, outlen);

	/* The grant runs without the lock: it may take long, and the cache
	 * stays readable meanwhile (two threads may both ask for one). */
	if (rc > 0)
		return gcp_grant(a, cancel, out, outlen, err, errlen);
	if (rc)
		snprintf(err, errlen, "%s: the token is too long", a->source);
	return rc;
}

void gcp_auth_forget_token(struct gcp_auth *a)
{
	pthread_mutex_lock(&a->lock);
	OPENSSL_cleanse(a->token, sizeof(a->token));
	a->fresh_until = 0;
	pthread_mutex_unlock(&a->lock);
}

/* --- credentials files --- */

/* Copy a member into dst: 0, or -1 with err when it is missing (and
 * required) or too long. */
static int gcp_take(const cJSON *doc, const char *name, bool required,
		    char *dst, size_t size, const char *path, char *err,
		    size_t errlen)
{
	const char *v = gcp_json_str(doc, name);

	if (!v && !required)
		return 0;
	if (!v || strlen(v) >= size) {
		snprintf(err, errlen, "%s: \"%s\" is %s", path, name,
			 v ? "too long" : "missing");
		return -1;
	}
	snprintf(dst, size, "%s", v);
	return 0;
}

/* Key files hold unencrypted keys; an encrypted one must fail, not make
 * OpenSSL ask for a passphrase on the terminal. */
static int gcp_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

static int gcp_load_key(struct gcp_auth *a, const cJSON *doc, const char *path,
			char *err, size_t errlen)
{
	const char *pem = gcp_json_str(doc, "private_key");
	BIO *bio;

	if (gcp_take(doc, "client_email", true, a->email, sizeof(a->email),
		     path, err, errlen) ||
	    gcp_take(doc, "private_key_id", true, a->key_id, sizeof(a->key_id),
		     path, err, errlen))
		return -1;
	if (!pem) {
		snprintf(err, errlen, "%s: \"private_key\" is missing", path);
		return -1;
	}
	bio = BIO_new_mem_buf(pem, -1);
	a->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, gcp_no_passphrase,
					       NULL)
		     : NULL;
	BIO_free(bio);
	ERR_clear_error();
	if (!a->key || EVP_PKEY_base_id(a->key) != EVP_PKEY_RSA) {
		snprintf(err, errlen,
			 "%s: \"private_key\" is not an RSA private key", path);
		return -1;
	}
	return 0;
}

static int gcp_load_user(struct gcp_auth *a, const cJSON *doc, const char *path,
			 char *err, size_t errlen)
{
	static const char *const names[] = {"client_id", "client_secret",
					    "refresh_token"};
	char **dst[] = {&a->client_id, &a->client_secret, &a->refresh_token};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = gcp_json_str(doc, names[i]);

		if (!v) {
			snprintf(err, errlen, "%s: \"%s\" is missing", path,
				 names[i]);
			return -1;
		}
		if (!(*dst[i] = strdup(v))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* The credential file types understood, and how each is read. */
static const struct gcp_type {
	const char *type;
	const char *what; /* for gcp_auth_source */
	enum gcp_kind kind;
	int (*load)(struct gcp_auth *a, const cJSON *doc, const char *path,
		    char *err, size_t errlen);
} gcp_types[] = {
	{"service_account", "the service account key", GCP_SERVICE_ACCOUNT,
	 gcp_load_key},
	{"authorized_user", "the authorized user credentials",
	 GCP_AUTHORIZED_USER, gcp_load_user},
};

/* The whole of a credentials file (malloc'd, a secret), or NULL with
 * err. */
static char *gcp_slurp(const char *path, const char *why, char *err,
		       size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot read %s (%s): %s", path, why,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > GCP_FILE_MAX) {
		snprintf(err, errlen, "%s (%s) is not a credentials file", path,
			 why);
	} else if ((text = malloc((size_t)st.st_size + 1))) {
		while (got < (size_t)st.st_size) {
			ssize_t n =
				read(fd, text + got, (size_t)st.st_size - got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		text[got] = '\0';
	} else {
		snprintf(err, errlen, "out of memory");
	}
	close(fd);
	return text;
}

/* Read the credentials file at path into a: 0, or -1 with err. */
static int gcp_load_file(struct gcp_auth *a, const char *path, const char *why,
			 char *err, size_t errlen)
{
	char *text = gcp_slurp(path, why, err, errlen);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	const char *type = gcp_json_str(doc, "type");
	const struct gcp_type *t = NULL;
	int rc = -1;

	if (text && !cJSON_IsObject(doc))
		snprintf(err, errlen, "%s (%s) is not JSON", path, why);
	for (size_t i = 0; type && i < sizeof(gcp_types) / sizeof(gcp_types[0]);
	     i++)
		if (strcmp(type, gcp_types[i].type) == 0)
			t = &gcp_types[i];
	if (cJSON_IsObject(doc) && !t)
		snprintf(err, errlen,
			 "%s (%s): the credentials type \"%.64s\" is not "
			 "supported (service_account and authorized_user are)",
			 path, why, type ? type : "");
	if (t) {
		a->kind = t->kind;
		snprintf(a->source, sizeof(a->source), "%s %s", t->what, path);
		rc = t->load(a, doc, path, err, errlen);
	}
	if (rc == 0)
		rc = gcp_take(doc, "token_uri", false, a->token_url,
			      sizeof(a->token_url), path, err, errlen);
	if (rc == 0 && !*a->project)
		rc = gcp_take(doc, "project_id", false, a->project,
			      sizeof(a->project), path, err, errlen);
	if (rc == 0 && !*a->token_url)
		snprintf(a->token_url, sizeof(a->token_url), "%s",
			 GCP_TOKEN_URI_DEFAULT);
	gcp_json_free(doc);
	if (text) {
		OPENSSL_cleanse(text, strlen(text));
		free(text);
	}
	return rc;
}

/* --- the metadata server --- */

/* Whether the metadata server answers; its project id into a when a has
 * none. 0, or -1 with err saying what happened. */
static int gcp_probe_metadata(struct gcp_auth *a, char *err, size_t errlen)
{
	char url[sizeof(a->metadata_host) + 64];
	struct gcp_exchange x = {.url = url, .metadata = true, .attempts = 1};
	struct gcp_buf b = {0};
	long status = 0;
	int rc;

	snprintf(url, sizeof(url), "http://%s" GCP_METADATA_PROJECT,
		 a->metadata_host);
	rc = gcp_fetch(&x, NULL, &b, &status, err, errlen);
	if (rc == 0 && status != 200) {
		snprintf(err, errlen, "%s answered HTTP status %ld", url,
			 status);
		rc = -1;
	}
	if (rc == 0 && !*a->project && b.data) {
		size_t n = strcspn(b.data, "\r\n");

		if (n < sizeof(a->project))
			snprintf(a->project, sizeof(a->project), "%.*s", (int)n,
				 b.data);
	}
	gcp_buf_free(&b);
	return rc ? -1 : 0;
}

static int gcp_use_metadata(struct gcp_auth *a, char *err, size_t errlen)
{
	const char *host = getenv("GCE_METADATA_HOST");

	if (!host || !*host)
		host = GCP_METADATA_DEFAULT;
	if (strlen(host) >= sizeof(a->metadata_host) || strchr(host, '/')) {
		snprintf(err, errlen,
			 "GCE_METADATA_HOST \"%.200s\" is not a "
			 "host[:port]",
			 host);
		return -1;
	}
	snprintf(a->metadata_host, sizeof(a->metadata_host), "%s", host);
	a->kind = GCP_METADATA;
	snprintf(a->source, sizeof(a->source), "the metadata server at %s",
		 host);
	snprintf(a->token_url, sizeof(a->token_url), "http://%s%s", host,
		 GCP_METADATA_TOKEN);
	/* Other scopes than the default are asked for by name, separated by
	 * commas there. */
	if (strcmp(a->scopes, GCP_SCOPE_COMPUTE) != 0) {
		char list[sizeof(a->scopes)], *s;

		snprintf(list, sizeof(list), "%s", a->scopes);
		for (char *p = list; *p; p++)
			if (*p == ' ')
				*p = ',';
		s = gcp_form_escape(list);
		if (s)
			snprintf(a->token_url + strlen(a->token_url),
				 sizeof(a->token_url) - strlen(a->token_url),
				 "?scopes=%s", s);
		free(s);
	}
	return gcp_probe_metadata(a, err, errlen);
}

/* --- discovery --- */

/* Fill a from the first place that has credentials: 0, or -1 with err. */
static int gcp_discover(struct gcp_auth *a, char *err, size_t errlen)
{
	const char *named = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char *conf = getenv("CLOUDSDK_CONFIG");
	const char *home = getenv("HOME");
	char adc[PATH_MAX], why[512];

	if (named && *named)
		return gcp_load_file(a, named, "GOOGLE_APPLICATION_CREDENTIALS",
				     err, errlen);
	if (conf && *conf)
		snprintf(adc, sizeof(adc), "%s/" GCP_ADC_FILE, conf);
	else
		snprintf(adc, sizeof(adc), "%s/.config/gcloud/" GCP_ADC_FILE,
			 home ? home : "");
	if (access(adc, F_OK) == 0)
		return gcp_load_file(a, adc,
				     "gcloud's application default "
				     "credentials",
				     err, errlen);
	if (gcp_use_metadata(a, why, sizeof(why)) == 0)
		return 0;
	snprintf(err, errlen,
		 "no GCP credentials: GOOGLE_APPLICATION_CREDENTIALS is not "
		 "set, %s does not exist (gcloud auth application-default "
		 "login writes it), and no metadata server answers (%s)",
		 adc, why);
	return -1;
}

struct gcp_auth *gcp_auth_open(const char *project_conf, const char *scopes,
			       char *err, size_t errlen)
{
	struct gcp_auth *a = calloc(1, sizeof(*a));
	/* The project variables of gcloud and of Google's client libraries,
	 * in their order. */
	static const char *const project_vars[] = {"CLOUDSDK_CORE_PROJECT",
						   "GOOGLE_CLOUD_PROJECT"};

	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->lock, NULL);
	if (!scopes || !*scopes)
		scopes = GCP_SCOPE_COMPUTE;
	if (strlen(scopes) >= sizeof(a->scopes)) {
		snprintf(err, errlen, "the OAuth scopes are too long");
		gcp_auth_close(a);
		return NULL;
	}
	snprintf(a->scopes, sizeof(a->scopes), "%s", scopes);
	/* The configured project comes first: a file's or the metadata
	 * server's is taken only when a->project is still empty. */
	if (project_conf && *project_conf)
		snprintf(a->project, sizeof(a->project), "%s", project_conf);
	for (size_t i = 0;
	     !*a->project && i < sizeof(project_vars) / sizeof(project_vars[0]);
	     i++) {
		const char *v = getenv(project_vars[i]);

		snprintf(a->project, sizeof(a->project), "%s", v ? v : "");
	}
	if (gcp_discover(a, err, errlen)) {
		gcp_auth_close(a);
		return NULL;
	}
	return a;
}

const char *gcp_auth_project(const struct gcp_auth *a)
{
	return a->project;
}

const char *gcp_auth_source(const struct gcp_auth *a)
{
	return a->source;
}

void gcp_auth_close(struct gcp_auth *a)
{
	if (!a)
		return;
	EVP_PKEY_free(a->key);
	gcp_free_secret(a->client_id);
	gcp_free_secret(a->client_secret);
	gcp_free_secret(a->refresh_token);
	OPENSSL_cleanse(a->token, sizeof(a->token));
	pthread_mutex_destroy(&a->lock);
	free(a);
}
