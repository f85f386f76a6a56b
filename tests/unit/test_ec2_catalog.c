/* The ec2 provider against the fake EC2 endpoint (tests/fakeec2): the
 * catalog refresh (every type and offer of the fixture made from
 * catalog/data, prices by the fake's rule, the API's mistakes corrected,
 * pagination, a failing Price List, a failing DescribeInstanceTypes,
 * cancellation), per-region clients and the default region. */
#include "check.h"
#include "providers/cancel.h"
#include "providers/ec2/ec2.h"
#include "providers/ec2/ec2_conf.h"
#include "providers/provider.h"
#include "providers/provider_conf.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define AKID   "AKIAFAKEEC2EXAMPLE"
#define SECRET "fake-ec2-secret-key"
#define GIB    1073741824.0

static char tmpdir[64], datadir[PATH_MAX], fakepy[PATH_MAX];

/* --- the fake --- */

struct fake {
	char url[64];
	char dir[128];
	pid_t pid;
};

/* Start the fake with extra arguments (NULL-terminated); 0 or -1. */
static int fake_start(struct fake *f, const char *name, const char *const *args)
{
	const char *argv[32];
	char portfile[192], log[192];
	size_t n = 0;

	snprintf(f->dir, sizeof(f->dir), "%s/%s", tmpdir, name);
	snprintf(portfile, sizeof(portfile), "%s/port", f->dir);
	snprintf(log, sizeof(log), "%s/%s.log", tmpdir, name);
	argv[n++] = "python3";
	argv[n++] = fakepy;
	argv[n++] = "--dir";
	argv[n++] = f->dir;
	argv[n++] = "--net";
	argv[n++] = "127.0.11";
	for (size_t i = 0; args && args[i] && n < 30; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	f->pid = fork();
	if (f->pid < 0)
		return -1;
	if (f->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 600; i++) {
		FILE *p = fopen(portfile, "r");
		int port = 0;

		if (p) {
			if (fscanf(p, "%d", &port) != 1)
				port = 0;
			fclose(p);
		}
		if (port > 0) {
			snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d",
				 port);
			return 0;
		}
		usleep(50000);
	}
	fprintf(stderr, "the fake did not start; see %s\n", log);
	return -1;
}

static void fake_stop(struct fake *f)
{
	if (f->pid <= 0)
		return;
	kill(f->pid, SIGTERM);
	waitpid(f->pid, NULL, 0);
	f->pid = 0;
}

struct body {
	char *data;
	size_t len;
};

static size_t body_write(char *p, size_t size, size_t n, void *ud)
{
	struct body *b = ud;
	char *d = realloc(b->data, b->len + size * n + 1);

	if (!d)
		return 0;
	memcpy(d + b->len, p, size * n);
	b->len += size * n;
	d[b->len] = '\0';
	b->data = d;
	return size * n;
}

/* A control request of the fake; its JSON answer (NULL on failure). */
static cJSON *fake_control(const struct fake *f, const char *method,
			   const char *path, const char *json)
{
	CURL *h = curl_easy_init();
	struct body b = {0};
	char url[256];
	cJSON *out = NULL;

	if (!h)
		return NULL;
	snprintf(url, sizeof(url), "%s%s", f->url, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (json)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
	if (curl_easy_perform(h) == CURLE_OK && b.data)
		out = cJSON_Parse(b.data);
	curl_easy_cleanup(h);
	free(b.data);
	return out;
}

static double json_num(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);

	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

/* --- the provider --- */

static void env_clear(void)
{
	static const char *const vars[] = {
		"AWS_ACCESS_KEY_ID",	"AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",	"AWS_PROFILE",
		"AWS_DEFAULT_PROFILE",	"AWS_REGION",
		"AWS_DEFAULT_REGION",	"AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_PRICING",
		"AWS_CONFIG_FILE",	"AWS_SHARED_CREDENTIALS_FILE",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("HOME", tmpdir, 1);
}

static struct provider *provider_for(const struct fake *f, const char *region)
{
	struct ec2_settings s;
	char err[1024];
	struct provider *p;

	env_clear();
	setenv("AWS_ACCESS_KEY_ID", AKID, 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	if (ec2conf_read(NULL, tmpdir, &s, err, sizeof(err)))
		return NULL;
	if (mkdir(s.keydir, 0700) && errno != EEXIST)
		return NULL;
	snprintf(s.endpoint_url, sizeof(s.endpoint_url), "%s", f->url);
	snprintf(s.pricing_endpoint_url, sizeof(s.pricing_endpoint_url), "%s",
		 f->url);
	snprintf(s.region, sizeof(s.region), "%s", region);
	s.retry.attempts = 2;
	s.retry.base_ms = 10;
	s.retry.max_ms = 20;
	s.retry.request_timeout_ms = 120000;
	s.poll_first_ms = 10;
	s.poll_max_ms = 20;
	p = ec2_provider_open(&s, err, sizeof(err));
	if (!p)
		fprintf(stderr, "ec2_provider_open: %s\n", err);
	return p;
}

/* --- a sink that keeps everything --- */

struct got_type {
	struct provider_catalog_type t;
	char *s[8];
};

struct got_offer {
	char type[64], region[64], zones[512];
	double price, spot;
};

struct sink {
	struct got_type *types;
	struct got_offer *offers;
	char **notes;
	size_t ntypes, noffers, nnotes, progress_calls, last_done, last_total;
	size_t captypes, capoffers;
	int sorted; /* the offers, once the refresh returned */
	pthread_mutex_t lock;
	int overlap, in_progress;
};

/* realloc, or the test ends: it has nothing to do without memory. */
static void *grow(void *p, size_t size)
{
	void *q = realloc(p, size);

	if (!q) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return q;
}

/* The types come sorted by name (a check of its own: the refresh hands
 * them over so). */
static const struct provider_catalog_type *got_type(const struct sink *s,
						    const char *name)
{
	size_t lo = 0, hi = s->ntypes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->types[mid].t.name, name);

		if (c == 0)
			return &s->types[mid].t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int sink_type(void *ctx, const struct provider_catalog_type *t)
{
	struct sink *s = ctx;
	struct got_type *g;

	if (s->ntypes == s->captypes) {
		s->captypes = s->captypes ? s->captypes * 2 : 256;
		s->types = grow(s->types, s->captypes * sizeof(*s->types));
	}
	g = &s->types[s->ntypes++];
	g->t = *t;
	g->t.name = g->s[0] = dup_or_null(t->name);
	g->t.architecture = g->s[1] = dup_or_null(t->architecture);
	g->t.accelerator = g->s[2] = dup_or_null(t->accelerator);
	g->t.accelerator_manufacturer = g->s[3] =
		dup_or_null(t->accelerator_manufacturer);
	g->t.accelerator_type = g->s[4] = dup_or_null(t->accelerator_type);
	g->t.accelerator_architecture = g->s[5] =
		dup_or_null(t->accelerator_architecture);
	g->t.processor = g->s[6] = dup_or_null(t->processor);
	g->t.storage_type = g->s[7] = dup_or_null(t->storage_type);
	g->t.processor_manufacturer = NULL;
	return 0;
}

static int sink_offer(void *ctx, const struct provider_catalog_offer *o)
{
	struct sink *s = ctx;
	struct got_offer *g;

	CHECK(got_type(s, o->type) != NULL);
	if (s->noffers == s->capoffers) {
		s->capoffers = s->capoffers ? s->capoffers * 2 : 1024;
		s->offers = grow(s->offers, s->capoffers * sizeof(*s->offers));
	}
	g = &s->offers[s->noffers++];
	snprintf(g->type, sizeof(g->type), "%s", o->type);
	snprintf(g->region, sizeof(g->region), "%s", o->region);
	snprintf(g->zones, sizeof(g->zones), "%s", o->zones);
	g->price = o->price;
	g->spot = o->spot;
	return 0;
}

static void sink_progress(void *ctx, size_t done, size_t total)
{
	struct sink *s = ctx;

	if (__atomic_fetch_add(&s->in_progress, 1, __ATOMIC_SEQ_CST))
		s->overlap = 1;
	s->progress_calls++;
	s->last_done = done;
	s->last_total = total;
	__atomic_fetch_sub(&s->in_progress, 1, __ATOMIC_SEQ_CST);
}

static void sink_note(void *ctx, const char *sentence)
{
	struct sink *s = ctx;

	s->notes = grow(s->notes, (s->nnotes + 1) * sizeof(*s->notes));
	s->notes[s->nnotes++] = strdup(sentence);
}

static void sink_free(struct sink *s)
{
	for (size_t i = 0; i < s->ntypes; i++)
		for (int k = 0; k < 8; k++)
			free(s->types[i].s[k]);
	for (size_t i = 0; i < s->nnotes; i++)
		free(s->notes[i]);
	free(s->types);
	free(s->offers);
	free(s->notes);
	memset(s, 0, sizeof(*s));
}

static struct provider_catalog_sink sink_of(struct sink *s)
{
	struct provider_catalog_sink k = {s, sink_type, sink_offer,
					  sink_progress, sink_note};

	return k;
}

static int offer_cmp(const void *a, const void *b)
{
	const struct got_offer *x = a, *y = b;
	int c = strcmp(x->type, y->type);

	return c ? c : strcmp(x->region, y->region);
}

static const struct got_offer *got_offer(struct sink *s, const char *type,
					 const char *region)
{
	struct got_offer key = {0};

	if (!s->sorted && s->noffers)
		qsort(s->offers, s->noffers, sizeof(*s->offers), offer_cmp);
	s->sorted = 1;
	snprintf(key.type, sizeof(key.type), "%s", type);
	snprintf(key.region, sizeof(key.region), "%s", region);
	return s->noffers ? bsearch(&key, s->offers, s->noffers,
				    sizeof(*s->offers), offer_cmp)
			  : NULL;
}

static bool note_has(const struct sink *s, const char *a, const char *b)
{
	for (size_t i = 0; i < s->nnotes; i++)
		if (strstr(s->notes[i], a) && (!b || strstr(s->notes[i], b)))
			return true;
	return false;
}

static bool str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool near(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-9;
}

/* The fake rounds its prices to 6 decimals (Python's rounding, which may
 * differ from C's by one in the last place); the spot entries that must
 * not win are 1 % and more away. */
static bool price_near(double got, double want)
{
	if (isnan(got) || isnan(want))
		return isnan(got) && isnan(want);
	return fabs(got - want) <= 1e-6;
}

/* --- the CSV files --- */

/* Split one CSV line (no quoted commas in these files) into at most n
 * fields; the count. */
static size_t csv_split(char *line, char **f, size_t n)
{
	size_t k = 0;

	line[strcspn(line, "\r\n")] = '\0';
	for (char *p = line; k < n;) {
		f[k++] = p;
		p = strchr(p, ',');
		if (!p)
			break;
		*p++ = '\0';
	}
	return k;
}

static int col(char **head, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(head[i], name) == 0)
			return (int)i;
	return -1;
}

/* Field i of a row of n, "" when there is none. */
static const char *fld(char *const *f, size_t n, int i)
{
	return i >= 0 && (size_t)i < n && f[i] ? f[i] : "";
}

static double num_or_nan(const char *s)
{
	return *s ? strtod(s, NULL) : NAN;
}

/* Every ec2 row of types.csv against what the refresh gave; the count. */
static size_t check_types_csv(const struct sink *s)
{
	char path[PATH_MAX + 16], line[4096], hline[4096];
	char *head[40] = {0}, *f[40] = {0};
	FILE *in;
	size_t nh, rows = 0, bad = 0;

	snprintf(path, sizeof(path), "%s/types.csv", datadir);
	in = fopen(path, "r");
	CHECK(in != NULL);
	if (!in || !fgets(hline, sizeof(hline), in))
		return 0;
	nh = csv_split(hline, head, 40);
	while (fgets(line, sizeof(line), in)) {
		const struct provider_catalog_type *t;
		size_t n = csv_split(line, f, 40);
		bool ok;

#define COL(name) fld(f, n, col(head, nh, name))
		if (n != nh || strcmp(fld(f, n, 0), "ec2") != 0)
			continue;
		rows++;
		t = got_type(s, COL("instance_type"));
		if (!t) {
			if (bad++ < 5)
				fprintf(stderr, "type %s missing\n",
					COL("instance_type"));
			continue;
		}
		ok = near(t->vcpus, num_or_nan(COL("vcpus"))) &&
		     near(t->memory_bytes, num_or_nan(COL("memory_bytes"))) &&
		     str_eq(t->architecture, COL("architecture")) &&
		     near(t->accelerator_count,
			  num_or_nan(COL("accelerator_count"))) &&
		     str_eq(t->accelerator, COL("accelerator")) &&
		     str_eq(t->accelerator_type, COL("accelerator_type")) &&
		     str_eq(t->accelerator_architecture,
			    COL("accelerator_architecture")) &&
		     str_eq(t->storage_type, COL("storage_type")) &&
		     near(t->storage_bytes, num_or_nan(COL("storage_bytes"))) &&
		     fabs(t->network_bits_per_s -
			  num_or_nan(COL("network_bits_per_s"))) < 1 &&
		     t->network_up_to ==
			     (strcmp(COL("network_up_to"), "1") == 0);
		if (*COL("accelerator_count") &&
		    strcmp(COL("accelerator_count"), "0") != 0)
			ok = ok &&
			     str_eq(t->accelerator_manufacturer,
				    COL("accelerator_manufacturer")) &&
			     near(t->accelerator_memory_bytes,
				  num_or_nan(COL("accelerator_memory_bytes")));
		if (strncmp(COL("processor"), "AWSGraviton", 11) == 0)
			ok = ok && str_eq(t->processor, COL("processor"));
#undef COL
		if (!ok && bad++ < 5)
			fprintf(stderr, "type %s differs from types.csv\n",
				t->name);
	}
	fclose(in);
	CHECK(bad == 0);
	return rows;
}

/* Sort the words of a space-separated list, for comparing zone lists. */
static void words_sorted(const char *in, char *out, size_t len)
{
	char buf[512], *w[64], *save = NULL;
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s", in);
	for (char *t = strtok_r(buf, " ", &save); t && n < 64;
	     t = strtok_r(NULL, " ", &save))
		w[n++] = t;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(w[j - 1], w[j]) > 0; j--) {
			char *x = w[j];

			w[j] = w[j - 1];
			w[j - 1] = x;
		}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s",
			 i ? " " : "", w[i]);
}

/* Every ec2 offer of offers.csv in the fake's enabled regions against
 * what the refresh gave (zones, prices by the fake's rule); the count. */
static size_t check_offers_csv(struct sink *s, const cJSON *catalog,
			       bool priced)
{
	const cJSON *enabled =
		cJSON_GetObjectItemCaseSensitive(catalog, "enabled");
	const cJSON *factor =
		cJSON_GetObjectItemCaseSensitive(catalog, "factor");
	char path[PATH_MAX + 16], line[4096], *f[8] = {0};
	FILE *in;
	size_t rows = 0, bad = 0, pass;

	/* Two passes: the us-east-1 prices first, then every row. */
	struct us {
		char type[64];
		double price;
	} *us = NULL;
	size_t nus = 0;

	snprintf(path, sizeof(path), "%s/offers.csv", datadir);
	for (pass = 0; pass < 2; pass++) {
		in = fopen(path, "r");
		CHECK(in != NULL);
		if (!in)
			return 0;
		while (fgets(line, sizeof(line), in)) {
			const struct got_offer *o;
			const cJSON *e;
			bool on = false;
			double od = NAN, fac;
			char want[512], have[512];

			if (csv_split(line, f, 8) != 6 ||
			    strcmp(f[0], "ec2") != 0)
				continue;
			if (pass == 0) {
				if (strcmp(f[2], "us-east-1") == 0 && *f[3]) {
					us = grow(us, (nus + 1) * sizeof(*us));
					snprintf(us[nus].type,
						 sizeof(us[nus].type), "%s",
						 f[1]);
					us[nus++].price = strtod(f[3], NULL);
				}
				continue;
			}
			cJSON_ArrayForEach(e, enabled) on |=
				cJSON_IsString(e) &&
				strcmp(e->valuestring, f[2]) == 0;
			if (!on)
				continue;
			rows++;
			o = got_offer(s, f[1], f[2]);
			if (!o) {
				if (bad++ < 5)
					fprintf(stderr, "offer %s %s missing\n",
						f[1], f[2]);
				continue;
			}
			for (size_t i = 0; i < nus; i++)
				if (strcmp(us[i].type, f[1]) == 0)
					od = us[i].price;
			fac = json_num(factor, f[2], NULL);
			if (!isnan(od))
				od *= fac;
			words_sorted(f[5], want, sizeof(want));
			words_sorted(o->zones, have, sizeof(have));
			if (strcmp(want, have) != 0 ||
			    !price_near(o->price, priced ? od : NAN) ||
			    !price_near(o->spot, 0.3 * od)) {
				if (bad++ < 5)
					fprintf(stderr,
						"offer %s %s: zones \"%s\" "
						"price "
						"%g spot %g; want \"%s\" %g "
						"%g\n",
						f[1], f[2], o->zones, o->price,
						o->spot, want, od, 0.3 * od);
			}
		}
		fclose(in);
	}
	free(us);
	CHECK(bad == 0);
	return rows;
}

/* --- the refresh --- */

static int refresh(struct provider *p, struct sink *s, struct cancel *c,
		   char *err, size_t errlen)
{
	struct provider_catalog_sink k = sink_of(s);

	memset(s, 0, sizeof(*s));
	err[0] = '\0';
	return p->ops->catalog_refresh(p, &k, c, err, errlen);
}

static long pages(double items, double page)
{
	return items <= 0 ? 1 : (long)ceil(items / page);
}

/* The calls the fake saw are what pagination implies. */
static void check_calls(const cJSON *state)
{
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(state, "catalog");
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(cat, "items");
	const cJSON *pmax = cJSON_GetObjectItemCaseSensitive(cat, "page_max");
	const cJSON *by =
		cJSON_GetObjectItemCaseSensitive(state, "calls_by_region");
	const cJSON *r;
	long want_types = pages(json_num(items, "DescribeInstanceTypes", NULL),
				json_num(pmax, "DescribeInstanceTypes", NULL));
	long got_types = 0;

	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(
				      by, "DescribeInstanceTypes")) got_types +=
		(long)r->valuedouble;
	CHECK(got_types == want_types);
	CHECK(json_num(cJSON_GetObjectItemCaseSensitive(state, "calls"),
		       "DescribeRegions", NULL) == 1);
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(cat, "enabled"))
	{
		const char *g = r->valuestring;
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(
			by, "DescribeInstanceTypeOfferings");
		long offerings =
			pages(json_num(cJSON_GetObjectItemCaseSensitive(
					       items,
					       "DescribeInstanceTypeOfferings:"
					       "region"),
				       g, NULL),
			      json_num(pmax, "DescribeInstanceTypeOfferings",
				       NULL)) +
			pages(json_num(cJSON_GetObjectItemCaseSensitive(
					       items,
					       "DescribeInstanceTypeOfferings:"
					       "availability-zone"),
				       g, NULL),
			      json_num(pmax, "DescribeInstanceTypeOfferings",
				       NULL));
		long spot = pages(
			json_num(cJSON_GetObjectItemCaseSensitive(
					 items,
					 "DescribeSpotPriceHistory:Linux/UNIX"),
				 g, NULL),
			json_num(pmax, "DescribeSpotPriceHistory", NULL));
		long prices =
			pages(json_num(cJSON_GetObjectItemCaseSensitive(
					       items, "GetProducts:Linux"),
				       g, NULL),
			      json_num(pmax, "GetProducts", NULL));

		CHECK(json_num(o, g, NULL) == offerings);
		CHECK(json_num(cJSON_GetObjectItemCaseSensitive(
				       by, "DescribeSpotPriceHistory"),
			       g, NULL) == spot);
		/* Pricing is asked of us-east-1 for every region. */
		(void)prices;
	}
	{
		long want = 0;

		cJSON_ArrayForEach(
			r, cJSON_GetObjectItemCaseSensitive(cat, "enabled"))
		{
			want += pages(
				json_num(cJSON_GetObjectItemCaseSensitive(
						 items, "GetProducts:Linux"),
					 r->valuestring, NULL),
				json_num(pmax, "GetProducts", NULL));
		}
		CHECK(json_num(by, "GetProducts", "us-east-1") == want);
	}
}

static void test_refresh(void)
{
	const char *const args[] = {"--regions", "4", NULL};
	struct fake f = {0};
	struct provider *p;
	struct sink s;
	char err[1024];
	cJSON *state;
	const struct provider_catalog_type *t;
	const struct got_offer *o;
	size_t rows;
	int rc;

	if (fake_start(&f, "fake1", args)) {
		CHECK(0);
		return;
	}
	/* No region configured: DescribeRegions goes to us-east-1. */
	p = provider_for(&f, "");
	CHECK(p != NULL);
	if (!p) {
		fake_stop(&f);
		return;
	}
	rc = refresh(p, &s, NULL, err, sizeof(err));
	if (rc)
		fprintf(stderr, "refresh: %s\n", err);
	CHECK(rc == 0);
	state = fake_control(&f, "GET", "/_fake/state", NULL);
	CHECK(state != NULL);

	rows = check_types_csv(&s);
	CHECK(rows > 1000);
	CHECK(s.ntypes == rows + 1);
	/* A few by hand. */
	t = got_type(&s, "p5.48xlarge");
	CHECK(t && t->accelerator_count == 8 &&
	      str_eq(t->accelerator, "NVIDIA_H100") &&
	      t->accelerator_memory_bytes == 80 * GIB &&
	      str_eq(t->accelerator_type, "GPU") &&
	      str_eq(t->accelerator_architecture, "Hopper") &&
	      t->vcpus == 192 && str_eq(t->architecture, "x86_64"));
	t = got_type(&s, "m7g.large");
	CHECK(t && str_eq(t->architecture, "arm64") &&
	      str_eq(t->processor, "AWSGraviton3") && t->vcpus == 2 &&
	      t->memory_bytes == 8 * GIB && t->network_up_to &&
	      t->network_bits_per_s == 12.5e9);
	t = got_type(&s, "trn2.48xlarge");
	CHECK(t && str_eq(t->accelerator, "AWSTrainium2") &&
	      t->accelerator_count == 16 &&
	      t->accelerator_memory_bytes == 96 * GIB &&
	      str_eq(t->accelerator_type, "NPU") &&
	      str_eq(t->accelerator_architecture, "NeuronCore_v3"));
	CHECK(note_has(&s, "trn2.48xlarge", "96 GiB"));
	t = got_type(&s, "p5.4xlarge");
	CHECK(t && t->accelerator_count == 1 &&
	      str_eq(t->accelerator, "NVIDIA_H100") &&
	      t->accelerator_memory_bytes == 80 * GIB);
	CHECK(note_has(&s, "p5.4xlarge", "0 GPUs"));
	t = got_type(&s, "p5en.48xlarge");
	CHECK(t && str_eq(t->accelerator, "NVIDIA_H200") &&
	      t->accelerator_count == 8);
	CHECK(note_has(&s, "p5en.48xlarge", "\"NVIDIA\""));
	t = got_type(&s, "g5.xlarge");
	CHECK(t && str_eq(t->accelerator, "NVIDIA_A10G") &&
	      t->accelerator_memory_bytes == 24 * GIB);
	CHECK(note_has(&s, "A10G", "22888 MiB"));
	t = got_type(&s, "g6f.large");
	CHECK(t && t->accelerator_count == 1 &&
	      t->accelerator_memory_bytes == 3 * GIB);
	/* The type new to the hierarchy: the API's own words. */
	t = got_type(&s, "p6e-gb300.36xlarge");
	CHECK(t && str_eq(t->accelerator, "GB300") &&
	      str_eq(t->accelerator_manufacturer, "NVIDIA") &&
	      str_eq(t->accelerator_type, "GPU") && t->accelerator_count == 4 &&
	      str_eq(t->architecture, "arm64"));

	/* Offers: every one of the fixture with its zones and prices. */
	rows = check_offers_csv(
		&s, cJSON_GetObjectItemCaseSensitive(state, "catalog"), true);
	CHECK(s.noffers == rows + 2);
	o = got_offer(&s, "p6e-gb300.36xlarge", "us-west-2");
	CHECK(o && near(o->price, 126) && price_near(o->spot, 37.8) &&
	      strcmp(o->zones, "us-west-2b") == 0);
	o = got_offer(&s, "t3.micro", "us-east-1");
	CHECK(o && near(o->price, 0.0104) && price_near(o->spot, 0.00312));
	o = got_offer(&s, "t3.micro", "eu-west-1");
	CHECK(o && near(o->price, 0.01144) && price_near(o->spot, 0.003432));
	CHECK(got_offer(&s, "t3.micro", "ap-south-1") == NULL);

	CHECK(s.progress_calls == 4 && s.last_done == 4 && s.last_total == 4);
	CHECK(!s.overlap);
	if (state)
		check_calls(state);
	cJSON_Delete(state);
	sink_free(&s);
	p->ops->close(p);
	fake_stop(&f);
}

struct bg {
	struct provider *p;
	struct cancel *cancel;
	struct sink s;
	char err[1024];
	int rc;
	int done;
};

static void *bg_refresh(void *arg)
{
	struct bg *b = arg;

	b->rc = refresh(b->p, &b->s, b->cancel, b->err, sizeof(b->err));
	__atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Pricing refused, DescribeInstanceTypes refused, a call that hangs. */
static void test_failures(void)
{
	const char *const args[] = {"--regions", "3", "--fail-pricing",
				    "AccessDeniedException", NULL};
	struct fake f = {0};
	struct provider *p;
	struct sink s;
	struct cancel c;
	struct bg b = {0};
	pthread_t tid;
	struct timespec t0;
	char err[1024];
	cJSON *state;
	int rc;

	if (fake_start(&f, "fake2", args)) {
		CHECK(0);
		return;
	}
	p = provider_for(&f, "eu-west-1");
	if (!p) {
		CHECK(0);
		fake_stop(&f);
		return;
	}
	rc = refresh(p, &s, NULL, err, sizeof(err));
	CHECK(rc == 0);
	CHECK(s.noffers > 1000);
	for (size_t i = 0; i < s.noffers; i++)
		if (!isnan(s.offers[i].price)) {
			CHECK(isnan(s.offers[i].price));
			break;
		}
	CHECK(note_has(&s, "on-demand prices were not obtained",
		       "AccessDeniedException"));
	CHECK(note_has(&s, "catalog's prices are kept", NULL));
	state = fake_control(&f, "GET", "/_fake/state", NULL);
	/* Refused once, not asked again for every region. */
	CHECK(json_num(cJSON_GetObjectItemCaseSensitive(state, "calls"),
		       "GetProducts", NULL) <= 3);
	/* The configured region is asked for the regions. */
	CHECK(json_num(cJSON_GetObjectItemCaseSensitive(state,
							"calls_by_region"),
		       "DescribeRegions", "eu-west-1") == 1);
	cJSON_Delete(state);
	sink_free(&s);

	cJSON_Delete(fake_control(&f, "POST", "/_fake/faults",
				  "{\"action\": \"DescribeInstanceTypes\", "
				  "\"code\": \"UnauthorizedOperation\", "
				  "\"count\": -1}"));
	rc = refresh(p, &s, NULL, err, sizeof(err));
	CHECK(rc == -EACCES);
	CHECK(strstr(err, "DescribeInstanceTypes") &&
	      strstr(err, "UnauthorizedOperation"));
	CHECK(s.ntypes == 0 && s.noffers == 0);
	sink_free(&s);

	/* A call that never answers: cancelled, the refresh returns at
	 * once. */
	cJSON_Delete(fake_control(&f, "DELETE", "/_fake/faults", NULL));
	cJSON_Delete(fake_control(&f, "POST", "/_fake/faults",
				  "{\"action\": \"DescribeSpotPriceHistory\", "
				  "\"delay_ms\": 600000, \"count\": -1}"));
	cancel_init(&c);
	b.p = p;
	b.cancel = &c;
	CHECK(pthread_create(&tid, NULL, bg_refresh, &b) == 0);
	usleep(500000);
	CHECK(!__atomic_load_n(&b.done, __ATOMIC_SEQ_CST));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cancel_fire(&c);
	while (!__atomic_load_n(&b.done, __ATOMIC_SEQ_CST) &&
	       check_ms_since(&t0) < 5000)
		check_nap();
	CHECK(check_ms_since(&t0) < 1000);
	pthread_join(tid, NULL);
	CHECK(b.rc == -ECANCELED);
	CHECK(b.s.ntypes == 0);
	sink_free(&b.s);
	cancel_destroy(&c);

	p->ops->close(p);
	fake_stop(&f);
}

/* --- per-region clients --- */

static long calls_in(const cJSON *state, const char *action, const char *region)
{
	return (long)json_num(cJSON_GetObjectItemCaseSensitive(
				      cJSON_GetObjectItemCaseSensitive(
					      state, "calls_by_region"),
				      action),
			      region, NULL);
}

static void node_in(struct provider_node *n, const char *handle,
		    const char *region)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->handle, sizeof(n->handle), "%s", handle);
	n->rank = -1;
	snprintf(n->token, sizeof(n->token), "tok%s", handle);
	snprintf(n->instance_type, sizeof(n->instance_type), "t3.micro");
	if (region)
		snprintf(n->options, sizeof(n->options),
			 "imageid=ami-bad1\nregion=%s\n", region);
	else
		snprintf(n->options, sizeof(n->options), "imageid=ami-bad1\n");
}

static int act(struct provider *p, enum provider_action a,
	       struct provider_node *n)
{
	struct provider_result r = {0};
	struct provider_batch b = {.nodes = n, .n = 1, .results = &r};
	int rc = provider_act(p, a, &b);

	if (rc)
		fprintf(stderr, "action %d: %s\n", (int)a, b.err);
	return rc;
}

static int stray_known(void *ctx, const char *handle, const char *token)
{
	(void)ctx;
	(void)handle;
	(void)token;
	return 1;
}

static void stray_report(void *ctx, const char *sentence)
{
	(void)ctx;
	(void)sentence;
}

static void test_regions(void)
{
	const char *const args[] = {"--regions", "3", NULL};
	struct fake f = {0};
	struct provider *p;
	struct provider_node n;
	cJSON *state;
	char err[1024];
	int rc;

	if (fake_start(&f, "fake3", args)) {
		CHECK(0);
		return;
	}
	/* No region configured at all: the node's serves. */
	p = provider_for(&f, "");
	if (!p) {
		CHECK(0);
		fake_stop(&f);
		return;
	}
	node_in(&n, "c1", "eu-west-1");
	rc = act(p, PROVIDER_CREATE, &n);
	CHECK(rc != 0); /* the fake has no ami-bad images */
	CHECK(act(p, PROVIDER_DESCRIBE, &n) == 0);
	CHECK(act(p, PROVIDER_TERMINATE, &n) == 0);
	state = fake_control(&f, "GET", "/_fake/state", NULL);
	/* The image is looked at in the node's region before anything is
	 * made there. */
	CHECK(calls_in(state, "DescribeInstanceTypes", "eu-west-1") == 1);
	CHECK(calls_in(state, "DescribeImages", "eu-west-1") == 1);
	CHECK(calls_in(state, "ImportKeyPair", "eu-west-1") == 0);
	CHECK(calls_in(state, "CreatePlacementGroup", "eu-west-1") == 0);
	CHECK(calls_in(state, "RunInstances", "eu-west-1") == 0);
	CHECK(calls_in(state, "DescribeInstances", "eu-west-1") >= 2);
	CHECK(calls_in(state, "DeleteKeyPair", "eu-west-1") >= 1);
	CHECK(calls_in(state, "DescribeInstances", "us-east-1") == 0);
	CHECK(calls_in(state, "DescribeImages", "us-east-1") == 0);
	CHECK(calls_in(state, "RunInstances", "us-east-1") == 0);
	cJSON_Delete(state);
	/* Without the option nor a configured region: no call, a reason. */
	node_in(&n, "c2", NULL);
	{
		struct provider_result r = {0};
		struct provider_batch b = {.nodes = &n, .n = 1, .results = &r};

		CHECK(provider_act(p, PROVIDER_DESCRIBE, &b) != 0);
		CHECK(strstr(b.err, "no AWS region") != NULL);
	}
	p->ops->close(p);

	/* Configured us-east-1: a node without the option goes there, the
	 * strays check covers both regions. */
	cJSON_Delete(fake_control(&f, "POST", "/_fake/reset-calls", "{}"));
	p = provider_for(&f, "us-east-1");
	node_in(&n, "c3", NULL);
	CHECK(act(p, PROVIDER_DESCRIBE, &n) == 0);
	node_in(&n, "c4", "us-west-2");
	p->ops->attach(p, &n);
	CHECK(p->ops->strays(p, stray_known, stray_report, NULL, NULL, err,
			     sizeof(err)) == 0);
	state = fake_control(&f, "GET", "/_fake/state", NULL);
	CHECK(calls_in(state, "DescribeInstances", "us-east-1") == 2);
	CHECK(calls_in(state, "DescribeInstances", "us-west-2") == 1);
	CHECK(calls_in(state, "DescribeInstances", "eu-west-1") == 0);
	cJSON_Delete(state);
	p->ops->close(p);
	fake_stop(&f);
}

/* --- the default region --- */

static void test_default_region(void)
{
	const struct provider_entry *e = provider_entry_find("ec2");
	struct config_entry entry = {"ec2", "region", "ap-south-1"};
	struct config conf = {"test.conf", &entry, 1};
	char buf[64], path[128];
	FILE *out;

	CHECK(e && e->default_region);
	if (!e || !e->default_region)
		return;
	env_clear();
	CHECK(e->default_region(NULL, buf, sizeof(buf)) == 0);
	CHECK(e->default_region(&conf, buf, sizeof(buf)) == 1 &&
	      strcmp(buf, "ap-south-1") == 0);
	snprintf(path, sizeof(path), "%s/aws-config", tmpdir);
	out = fopen(path, "w");
	if (out) {
		fputs("[default]\nregion = eu-north-1\n[profile x]\nregion = "
		      "sa-east-1\n",
		      out);
		fclose(out);
	}
	setenv("AWS_CONFIG_FILE", path, 1);
	CHECK(e->default_region(&conf, buf, sizeof(buf)) == 1 &&
	      strcmp(buf, "eu-north-1") == 0);
	setenv("AWS_PROFILE", "x", 1);
	CHECK(e->default_region(NULL, buf, sizeof(buf)) == 1 &&
	      strcmp(buf, "sa-east-1") == 0);
	setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
	CHECK(e->default_region(NULL, buf, sizeof(buf)) == 1 &&
	      strcmp(buf, "us-west-1") == 0);
	setenv("AWS_REGION", "ca-central-1", 1);
	CHECK(e->default_region(&conf, buf, sizeof(buf)) == 1 &&
	      strcmp(buf, "ca-central-1") == 0);
	env_clear();
}

/* bench/ec2_refresh.sh's driver: one refresh against a running fake at
 * url, timed; prints "wall_ms=... types=... offers=... notes=...". */
static int bench_refresh(const char *url)
{
	struct fake f = {0};
	struct provider *p;
	struct timespec t0;
	struct sink s;
	char err[1024];
	long ms;
	int rc;

	snprintf(f.url, sizeof(f.url), "%s", url);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cclfs-ec2bench.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 2;
	p = provider_for(&f, "");
	if (!p)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = refresh(p, &s, NULL, err, sizeof(err));
	ms = check_ms_since(&t0);
	if (rc)
		fprintf(stderr, "refresh: %s\n", err);
	else
		printf("wall_ms=%ld types=%zu offers=%zu notes=%zu\n", ms,
		       s.ntypes, s.noffers, s.nnotes);
	sink_free(&s);
	p->ops->close(p);
	snprintf(err, sizeof(err), "rm -rf %s", tmpdir);
	if (system(err) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	char cmd[256];

	if (argc == 3 && strcmp(argv[1], "--refresh") == 0)
		return bench_refresh(argv[2]);
	if (argc != 3) {
		fprintf(stderr, "usage: test_ec2_catalog DATADIR FAKE_EC2_PY\n"
				"       test_ec2_catalog --refresh URL\n");
		return 2;
	}
	snprintf(datadir, sizeof(datadir), "%s", argv[1]);
	snprintf(fakepy, sizeof(fakepy), "%s", argv[2]);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cclfs-ec2cat.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 2;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	test_default_region();
	test_refresh();
	test_failures();
	test_regions();
	curl_global_cleanup();
	if (!failed) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	} else {
		fprintf(stderr, "kept %s\n", tmpdir);
	}
	return check_summary("unit.ec2_catalog");
}
