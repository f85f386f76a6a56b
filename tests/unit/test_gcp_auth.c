/* gcp_auth against the fake Google Cloud endpoint (tests/fakegce): keys and
 * authorized users, the token cache, refusals (no secret in the error),
 * discovery and project order, the metadata server, retries, cancellation. */
#include "check.h"
#include "providers/cancel.h"
#include "providers/gcp/gcp_auth.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EMAIL "cclfs@key-project.iam.gserviceaccount.com"

static char tmpdir[64], fakepy[4096];
static char fake_url[64], fake_dir[128];
static int fake_port;
static pid_t fake_pid;

/* --- the fake --- */

/* Start python3 fakepy ARGS... (NULL-terminated), its output into log when
 * given: its pid, or -1. */
static pid_t spawn_fake_py(const char *const *args, const char *log)
{
	const char *argv[16] = {"python3", fakepy};
	posix_spawn_file_actions_t fa;
	size_t n = 2;
	pid_t pid;
	int rc;

	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	if (log) {
		posix_spawn_file_actions_addopen(
			&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	}
	rc = posix_spawnp(&pid, "python3", &fa, NULL, (char *const *)argv,
			  environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc ? -1 : pid;
}

/* Run python3 fakepy ARGS... to its end: its exit status, or -1. */
static int run_fake_tool(const char *const *args)
{
	pid_t pid = spawn_fake_py(args, NULL);
	int status = 0;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The port the fake writes once it listens (CHECK_WAIT_MS at most), or
 * 0. */
static int fake_wait_port(const char *portfile)
{
	struct timespec t0;
	int port = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (port <= 0 && check_ms_since(&t0) < CHECK_WAIT_MS) {
		FILE *p = fopen(portfile, "r");

		if (!p || fscanf(p, "%d", &port) != 1)
			port = 0;
		if (p)
			fclose(p);
		if (port <= 0)
			usleep(50000);
	}
	return port > 0 ? port : 0;
}

static int fake_start(void)
{
	char portfile[192], log[192], sa[128], user[128];
	const char *args[] = {"--dir",
			      fake_dir,
			      "--project",
			      "meta-project",
			      "--service-account",
			      sa,
			      "--authorized-user",
			      user,
			      NULL};

	snprintf(fake_dir, sizeof(fake_dir), "%s/fake", tmpdir);
	snprintf(portfile, sizeof(portfile), "%s/port", fake_dir);
	snprintf(log, sizeof(log), "%s/fake.log", tmpdir);
	snprintf(sa, sizeof(sa), "%s/sa.json", tmpdir);
	snprintf(user, sizeof(user), "%s/user.json", tmpdir);
	fake_pid = spawn_fake_py(args, log);
	fake_port = fake_pid > 0 ? fake_wait_port(portfile) : 0;
	if (!fake_port) {
		fprintf(stderr, "the fake did not start; see %s\n", log);
		return -1;
	}
	snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d", fake_port);
	return 0;
}

static void fake_stop(void)
{
	if (fake_pid > 0 && kill(fake_pid, SIGTERM) == 0)
		waitpid(fake_pid, NULL, 0);
	fake_pid = 0;
}

/* A control request of the fake (a POST when post is given); its JSON
 * answer, NULL on failure. */
static cJSON *fake_control(const char *path, const char *post)
{
	CURL *e = curl_easy_init();
	char url[256], *text = NULL;
	size_t len = 0;
	FILE *answer = open_memstream(&text, &len);
	CURLcode rc = CURLE_FAILED_INIT;
	cJSON *doc = NULL;

	snprintf(url, sizeof(url), "%s%s", fake_url, path);
	if (e && answer) {
		curl_easy_setopt(e, CURLOPT_URL, url);
		if (post)
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, post);
		/* libcurl's own writer: fwrite into the stream. */
		curl_easy_setopt(e, CURLOPT_WRITEDATA, answer);
		curl_easy_setopt(e, CURLOPT_TIMEOUT, 20L);
		rc = curl_easy_perform(e);
	}
	if (answer)
		fclose(answer);
	if (rc == CURLE_OK && text)
		doc = cJSON_ParseWithLength(text, len);
	curl_easy_cleanup(e);
	free(text);
	return doc;
}

/* How many tokens the fake gave for a grant type ("jwt-bearer",
 * "refresh_token", "metadata"); -1 when it cannot say. */
static int fake_grants(const char *kind)
{
	cJSON *state = fake_control("/_fake/state", NULL);
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(state, "grants"), kind);
	int n = state ? (cJSON_IsNumber(g) ? g->valueint : 0) : -1;

	cJSON_Delete(state);
	return n;
}

/* --- files --- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = calloc(1, 65536);

	if (f && text && fread(text, 1, 65535, f) == 0)
		text[0] = '\0';
	if (f)
		fclose(f);
	return text;
}

/* A key file made by the fake, its token_uri at url. */
static int make_key(const char *path, const char *url)
{
	const char *args[] = {"--make-key",  path,	  "--email",
			      EMAIL,	     "--project", "key-project",
			      "--token-uri", url,	  NULL};

	return run_fake_tool(args);
}

static void write_user(const char *path, const char *refresh)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"type\": \"authorized_user\", \"client_id\": "
		 "\"764086051850-fake.apps.googleusercontent.com\", "
		 "\"client_secret\": \"d-FL95Q19q7MQmFpd7hHD0Ty\", "
		 "\"refresh_token\": \"%s\", \"token_uri\": \"%s/token\"}\n",
		 refresh, fake_url);
	write_file(path, text);
}

/* Whether err holds any line of at least 16 characters of secret's text
 * (a PEM body, a refresh token) or the bare secret itself. */
static int leaks(const char *err, const char *secret)
{
	char line[256];
	const char *p = secret;

	while (*p) {
		size_t n = strcspn(p, "\n");

		if (n >= 16 && n < sizeof(line)) {
			memcpy(line, p, n);
			line[n] = '\0';
			if (strstr(err, line))
				return 1;
		}
		p += n + (p[n] == '\n');
	}
	return strstr(err, "PRIVATE KEY") != NULL;
}

static void clear_env(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("CLOUDSDK_CORE_PROJECT");
	unsetenv("GOOGLE_CLOUD_PROJECT");
	unsetenv("GCE_METADATA_HOST");
}

/* --- the tests --- */

static void test_service_account(const char *sa)
{
	char err[GCP_AUTH_ERR_MAX] = "", tok[GCP_AUTH_TOKEN_MAX], tok2[4096];
	struct gcp_auth *a;
	int before = fake_grants("jwt-bearer");

	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (!a) {
		fprintf(stderr, "open: %s\n", err);
		return;
	}
	CHECK(strstr(gcp_auth_source(a), "service account key") != NULL);
	CHECK(strstr(gcp_auth_source(a), sa) != NULL);
	CHECK(strcmp(gcp_auth_project(a), "key-project") == 0);
	CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err, sizeof(err)) == 0);
	CHECK(strncmp(tok, "ya29.fake-", 10) == 0);
	/* The fake verified the JWT: its grant counts. */
	CHECK(fake_grants("jwt-bearer") == before + 1);
	/* Cached: no new grant. */
	CHECK(gcp_auth_token(a, NULL, tok2, sizeof(tok2), err, sizeof(err)) ==
	      0);
	CHECK(strcmp(tok, tok2) == 0);
	CHECK(fake_grants("jwt-bearer") == before + 1);
	/* Too small a buffer. */
	CHECK(gcp_auth_token(a, NULL, tok2, 8, err, sizeof(err)) == -ENOBUFS);
	/* Forgotten: a new one. */
	gcp_auth_forget_token(a);
	CHECK(gcp_auth_token(a, NULL, tok2, sizeof(tok2), err, sizeof(err)) ==
	      0);
	CHECK(strcmp(tok, tok2) != 0);
	CHECK(fake_grants("jwt-bearer") == before + 2);
	/* A token that lives less than 5 minutes is not kept. */
	cJSON_Delete(fake_control("/_fake/settings", "{\"token_ttl\": 200}"));
	gcp_auth_forget_token(a);
	for (int i = 0; i < 3; i++)
		CHECK(gcp_auth_token(a, NULL, tok2, sizeof(tok2), err,
				     sizeof(err)) == 0);
	CHECK(fake_grants("jwt-bearer") == before + 5);
	cJSON_Delete(fake_control("/_fake/settings", "{\"token_ttl\": 3599}"));
	gcp_auth_close(a);
}

struct racer {
	struct gcp_auth *a;
	char tok[GCP_AUTH_TOKEN_MAX];
	int rc;
};

static void *race_token(void *ctx)
{
	struct racer *r = ctx;
	char err[GCP_AUTH_ERR_MAX];

	r->rc = gcp_auth_token(r->a, NULL, r->tok, sizeof(r->tok), err,
			       sizeof(err));
	return NULL;
}

/* Threads sharing one gcp_auth: each gets a token, then all share the
 * cached one. */
static void test_threads(const char *sa)
{
	char err[GCP_AUTH_ERR_MAX] = "";
	struct racer r[4];
	pthread_t th[4];
	struct gcp_auth *a;
	int before = fake_grants("jwt-bearer");

	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (!a)
		return;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 4; i++) {
			r[i].a = a;
			r[i].rc = -1;
			CHECK(pthread_create(&th[i], NULL, race_token, &r[i]) ==
			      0);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			CHECK(r[i].rc == 0);
			CHECK(strncmp(r[i].tok, "ya29.fake-", 10) == 0);
		}
	}
	/* At most one grant per thread of the first round. */
	CHECK(fake_grants("jwt-bearer") - before >= 1);
	CHECK(fake_grants("jwt-bearer") - before <= 4);
	CHECK(strcmp(r[0].tok, r[3].tok) == 0);
	gcp_auth_close(a);
}

static void test_refused_key(const char *other)
{
	char err[GCP_AUTH_ERR_MAX] = "", tok[GCP_AUTH_TOKEN_MAX];
	struct gcp_auth *a;
	char *key = read_file(other);
	cJSON *doc = key ? cJSON_Parse(key) : NULL;
	const cJSON *pem = cJSON_GetObjectItemCaseSensitive(doc, "private_key");
	struct timespec t0;

	setenv("GOOGLE_APPLICATION_CREDENTIALS", other, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err,
				     sizeof(err)) == -EACCES);
		/* Not retried. */
		CHECK(check_ms_since(&t0) < 5000);
		CHECK(strstr(err, other) != NULL);
		CHECK(strstr(err, "invalid_grant") != NULL);
		CHECK(cJSON_IsString(pem) && !leaks(err, pem->valuestring));
		gcp_auth_close(a);
	}
	cJSON_Delete(doc);
	free(key);
}

static void test_authorized_user(const char *user, const char *bad)
{
	char err[GCP_AUTH_ERR_MAX] = "", tok[GCP_AUTH_TOKEN_MAX];
	struct gcp_auth *a;
	int before = fake_grants("refresh_token");

	setenv("GOOGLE_APPLICATION_CREDENTIALS", user, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		CHECK(strstr(gcp_auth_source(a), "authorized user") != NULL);
		CHECK(strcmp(gcp_auth_project(a), "") == 0);
		CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err,
				     sizeof(err)) == 0);
		CHECK(strncmp(tok, "ya29.fake-", 10) == 0);
		CHECK(fake_grants("refresh_token") == before + 1);
		gcp_auth_close(a);
	}
	setenv("GOOGLE_APPLICATION_CREDENTIALS", bad, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err,
				     sizeof(err)) == -EACCES);
		CHECK(strstr(err, bad) != NULL);
		CHECK(strstr(err, "invalid_grant: Bad Request") != NULL);
		CHECK(!leaks(err, "1//revoked-refresh-token"));
		CHECK(!leaks(err, "d-FL95Q19q7MQmFpd7hHD0Ty"));
		gcp_auth_close(a);
	}
}

/* The source of what gcp_auth_open finds now (its project in project),
 * or "" with its error. */
static void discovered(const char *conf, char *source, size_t len,
		       char *project, size_t plen)
{
	char err[GCP_AUTH_ERR_MAX] = "";
	struct gcp_auth *a = gcp_auth_open(conf, NULL, err, sizeof(err));

	snprintf(source, len, "%s", a ? gcp_auth_source(a) : err);
	snprintf(project, plen, "%s", a ? gcp_auth_project(a) : "");
	if (!a)
		source[0] = '\0';
	gcp_auth_close(a);
}

static void test_discovery(const char *sa, const char *user)
{
	char gcloud[128], home[128], adc[192], cmd[1024], src[1024], proj[256];
	char meta[64], err[GCP_AUTH_ERR_MAX] = "", tok[GCP_AUTH_TOKEN_MAX];
	struct gcp_auth *a;
	int before;

	snprintf(gcloud, sizeof(gcloud), "%s/gcloud", tmpdir);
	snprintf(home, sizeof(home), "%s/home", tmpdir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/.config/gcloud", gcloud,
		 home);
	CHECK(system(cmd) == 0);
	snprintf(cmd, sizeof(cmd),
		 "cp %s %s/application_default_credentials.json && "
		 "cp %s %s/.config/gcloud/application_default_credentials.json",
		 user, gcloud, user, home);
	CHECK(system(cmd) == 0);
	snprintf(meta, sizeof(meta), "127.0.0.1:%d", fake_port);
	setenv("GCE_METADATA_HOST", meta, 1);
	setenv("HOME", home, 1);
	setenv("CLOUDSDK_CONFIG", gcloud, 1);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);

	/* GOOGLE_APPLICATION_CREDENTIALS first. */
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strstr(src, sa) != NULL);
	CHECK(strcmp(proj, "key-project") == 0);
	/* Project: configured, else CLOUDSDK_CORE_PROJECT, else the key's. */
	discovered("conf-project", src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "conf-project") == 0);
	setenv("CLOUDSDK_CORE_PROJECT", "env-project", 1);
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "env-project") == 0);
	discovered("conf-project", src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "conf-project") == 0);
	setenv("GOOGLE_CLOUD_PROJECT", "lib-project", 1);
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "env-project") == 0);
	unsetenv("CLOUDSDK_CORE_PROJECT");
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "lib-project") == 0);
	unsetenv("GOOGLE_CLOUD_PROJECT");

	/* Then $CLOUDSDK_CONFIG's ADC file, then $HOME's. */
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	snprintf(adc, sizeof(adc), "%s/application_default_credentials.json",
		 gcloud);
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strstr(src, adc) != NULL);
	CHECK(strstr(src, "authorized user") != NULL);
	unsetenv("CLOUDSDK_CONFIG");
	snprintf(adc, sizeof(adc),
		 "%s/.config/gcloud/application_default_credentials.json",
		 home);
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strstr(src, adc) != NULL);
	unlink(adc);

	/* Then the metadata server, and its project. */
	discovered(NULL, src, sizeof(src), proj, sizeof(proj));
	CHECK(strstr(src, "the metadata server at 127.0.0.1:") != NULL);
	CHECK(strcmp(proj, "meta-project") == 0);
	discovered("conf-project", src, sizeof(src), proj, sizeof(proj));
	CHECK(strcmp(proj, "conf-project") == 0);
	before = fake_grants("metadata");
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err,
				     sizeof(err)) == 0);
		CHECK(strncmp(tok, "ya29.fake-", 10) == 0);
		CHECK(gcp_auth_token(a, NULL, tok, sizeof(tok), err,
				     sizeof(err)) == 0);
		CHECK(fake_grants("metadata") == before + 1);
		gcp_auth_close(a);
	}

	/* Nothing anywhere: the error says where it looked. */
	setenv("GCE_METADATA_HOST", "127.0.0.1:1", 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a == NULL);
	CHECK(strstr(err, "GOOGLE_APPLICATION_CREDENTIALS") != NULL);
	CHECK(strstr(err, adc) != NULL);
	CHECK(strstr(err, "metadata server") != NULL);
	CHECK(strstr(err, "127.0.0.1:1") != NULL);

	/* A named file must exist; a type not understood is said. */
	snprintf(adc, sizeof(adc), "%s/missing.json", tmpdir);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", adc, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a == NULL);
	CHECK(strstr(err, adc) != NULL);
	snprintf(adc, sizeof(adc), "%s/broken.json", tmpdir);
	write_file(adc, "{\"type\": \"service_account\", \"client_email\": "
			"\"" EMAIL "\", \"private_key_id\": \"abc\", "
			"\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n"
			"c2VjcmV0LWJ1dC1ub3QtYS1rZXk=\\n-----END PRIVATE "
			"KEY-----\\n\"}\n");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", adc, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a == NULL);
	CHECK(strstr(err, "not an RSA private key") != NULL);
	CHECK(!strstr(err, "c2VjcmV0"));
	snprintf(adc, sizeof(adc), "%s/external.json", tmpdir);
	write_file(adc, "{\"type\": \"external_account\"}\n");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", adc, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a == NULL);
	CHECK(strstr(err, "external_account") != NULL);
	clear_env();
}

static void *fire_later(void *ctx)
{
	usleep(300 * 1000);
	cancel_fire(ctx);
	return NULL;
}

/* A port that accepts connections and never answers (the backlog does),
 * its socket in *fd; 0 when none. */
static int silent_port(int *fd)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*fd = socket(AF_INET, SOCK_STREAM, 0);
	if (*fd < 0 || bind(*fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(*fd, 8) || getsockname(*fd, (struct sockaddr *)&sin, &len))
		return 0;
	return ntohs(sin.sin_port);
}

static void test_cancel(void)
{
	char key[128], url[128], err[GCP_AUTH_ERR_MAX] = "";
	char tok[GCP_AUTH_TOKEN_MAX];
	struct cancel c;
	struct gcp_auth *a;
	struct timespec t0;
	pthread_t th;
	int fd = -1, port = silent_port(&fd);

	CHECK(port > 0);
	cancel_init(&c);
	snprintf(key, sizeof(key), "%s/silent.json", tmpdir);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/token", port);
	CHECK(make_key(key, url) == 0);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", key, 1);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		/* A call that hangs is cut short by the token. */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(pthread_create(&th, NULL, fire_later, &c) == 0);
		CHECK(gcp_auth_token(a, &c, tok, sizeof(tok), err,
				     sizeof(err)) == -ECANCELED);
		CHECK(check_ms_since(&t0) < 3000);
		pthread_join(th, NULL);
		CHECK(strstr(err, "cancel") != NULL);
		/* A fired token: at once. */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(gcp_auth_token(a, &c, tok, sizeof(tok), err,
				     sizeof(err)) == -ECANCELED);
		CHECK(check_ms_since(&t0) < 500);
		gcp_auth_close(a);
	}
	cancel_destroy(&c);
	cancel_init(&c);
	/* Refused connections: retried, then said; cancelled between
	 * tries. */
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/token", port);
	CHECK(make_key(key, url) == 0);
	a = gcp_auth_open(NULL, NULL, err, sizeof(err));
	CHECK(a != NULL);
	if (a) {
		int rc = gcp_auth_token(a, NULL, tok, sizeof(tok), err,
					sizeof(err));

		CHECK(rc == -ECONNREFUSED);
		CHECK(strstr(err, "cannot reach") != NULL);
		CHECK(strstr(err, key) != NULL);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(pthread_create(&th, NULL, fire_later, &c) == 0);
		rc = gcp_auth_token(a, &c, tok, sizeof(tok), err, sizeof(err));
		/* Before the token fires the tries may all be spent. */
		CHECK(rc == -ECANCELED || rc == -ECONNREFUSED);
		CHECK(check_ms_since(&t0) < 3000);
		pthread_join(th, NULL);
		gcp_auth_close(a);
	}
	cancel_destroy(&c);
	clear_env();
}

/* requests.log names calls, never a token or an assertion. */
static void test_log_has_no_secret(void)
{
	char path[192];
	char *log;

	snprintf(path, sizeof(path), "%s/requests.log", fake_dir);
	log = read_file(path);
	CHECK(log && strstr(log, "POST /token 200\n") != NULL);
	CHECK(log && strstr(log, "GET /computeMetadata/v1/project/project-id "
				 "200\n") != NULL);
	CHECK(log && !strstr(log, "ya29") && !strstr(log, "eyJ"));
	free(log);
}

int main(int argc, char **argv)
{
	char sa[128], other[128], user[128], bad[128], url[128];

	if (argc != 2) {
		fprintf(stderr, "usage: %s FAKE_GCE_PY\n", argv[0]);
		return 2;
	}
	snprintf(fakepy, sizeof(fakepy), "%s", argv[1]);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cclfs-gcpauth.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 2;
	clear_env();
	setenv("HOME", tmpdir, 1);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (fake_start()) {
		fake_stop();
		return 1;
	}
	snprintf(sa, sizeof(sa), "%s/sa.json", tmpdir);
	snprintf(other, sizeof(other), "%s/other.json", tmpdir);
	snprintf(user, sizeof(user), "%s/user.json", tmpdir);
	snprintf(bad, sizeof(bad), "%s/bad-user.json", tmpdir);
	snprintf(url, sizeof(url), "%s/token", fake_url);
	CHECK(make_key(sa, url) == 0);
	CHECK(make_key(other, url) == 0);
	write_user(user, "1//fake-refresh-token");
	write_user(bad, "1//revoked-refresh-token");

	test_service_account(sa);
	test_threads(sa);
	test_refused_key(other);
	test_authorized_user(user, bad);
	test_discovery(sa, user);
	test_cancel();

	fake_stop();
	test_log_has_no_secret();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmpdir);
	}
	curl_global_cleanup();
	return check_summary("gcp_auth");
}
