/* The gcp catalog refresh: SKU descriptions, GPU names and prices computed
 * from rates (pure), then the refresh against the fake Google Cloud endpoint
 * (tests/fakegce): machine and accelerator types, SKUs with an API key or the
 * bearer token, and what a failure keeps or hands over. */
#include "check.h"
#include "providers/cancel.h"
#include "providers/gcp/gcp_auth.h"
#include "providers/gcp/gcp_billing.h"
#include "providers/gcp/gcp_catalog.h"
#include "providers/gcp/gcp_machine.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEY	   "AIzaFakeCatalogKey-0123456789abcdef"
#define GIB	   (1024.0 * 1024 * 1024)
#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static char tmpdir[64], fake_url[64], fake_dir[128];
static pid_t fake_pid;

/* --- pure: descriptions, GPU names, prices --- */

static void test_describe(void)
{
	static const struct {
		const char *text;
		int rc;
		enum gcp_rate_kind kind;
		const char *key;
		bool spot;
	} cases[] = {
		{"E2 Instance Core running in Americas", 0, GCP_RATE_CORE, "e2",
		 false},
		{"N2 Instance Ram running in Belgium", 0, GCP_RATE_RAM, "n2",
		 false},
		{"Spot Preemptible E2 Instance Core running in Sydney", 0,
		 GCP_RATE_CORE, "e2", true},
		{"N1 Predefined Instance Core running in Americas", 0,
		 GCP_RATE_CORE, "n1", false},
		{"N2D AMD Instance Ram running in Iowa", 0, GCP_RATE_RAM, "n2d",
		 false},
		{"T2A Arm Instance Core running in Americas", 0, GCP_RATE_CORE,
		 "t2a", false},
		{"Compute optimized Core running in Americas", 0, GCP_RATE_CORE,
		 "c2", false},
		{"Memory-optimized Instance Ram running in Americas", 0,
		 GCP_RATE_RAM, "m1", false},
		{"Nvidia L4 GPU running in Americas", 0, GCP_RATE_GPU, "L4",
		 false},
		{"Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running "
		 "in Americas",
		 0, GCP_RATE_GPU, "T4", false},
		{"Nvidia A100 80GB GPU running in Americas", 0, GCP_RATE_GPU,
		 "A100-80GB", false},
		{"Nvidia Tesla A100 GPU running in Americas", 0, GCP_RATE_GPU,
		 "A100", false},
		{"Micro Instance with burstable CPU running in Americas", 0,
		 GCP_RATE_VM, "f1-micro", false},
		{"Spot Preemptible Small Instance with 1 VCPU running in EMEA",
		 0, GCP_RATE_VM, "g1-small", true},
		{"N2 Custom Instance Core running in Americas", -1, 0, "",
		 false},
		{"N2 Custom Extended Instance Ram running in Americas", -1, 0,
		 "", false},
		{"N2 Sole Tenancy Instance Core running in Americas", -1, 0, "",
		 false},
		{"Commitment v1: E2 Cpu in Americas for 1 Year", -1, 0, "",
		 false},
		{"Storage PD Capacity", -1, 0, "", false},
		{"Licensing Fee for Windows Server 2022", -1, 0, "", false},
		{"", -1, 0, "", false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct gcp_sku_use u;
		int rc = gcp_billing_describe(cases[i].text, &u);

		CHECK(rc == cases[i].rc);
		if (rc != cases[i].rc) {
			fprintf(stderr, "  describe: %s\n", cases[i].text);
			continue;
		}
		if (rc)
			continue;
		CHECK(u.kind == cases[i].kind);
		CHECK(strcmp(u.key, cases[i].key) == 0);
		CHECK(u.spot == cases[i].spot);
	}
	CHECK(gcp_billing_describe(NULL, &(struct gcp_sku_use){0}) == -1);
}

static void test_names(void)
{
	static const struct {
		const char *words, *key, *model;
		double gib;
	} gpus[] = {
		{"nvidia-l4", "L4", "L4", 0},
		{"nvidia-tesla-a100", "A100", "A100", 0},
		{"nvidia-a100-80gb", "A100-80GB", "A100", 80},
		{"nvidia-h100-mega-80gb", "H100MEGA-80GB", "H100", 80},
		{"Nvidia H100 80GB Mega", "H100MEGA-80GB", "H100", 80},
		{"nvidia-rtx-pro-6000", "RTXPRO6000", "RTXPRO6000", 0},
		{"NVIDIA T4", "T4", "T4", 0},
	};
	static const struct {
		const char *type, *series;
	} series[] = {
		{"e2-standard-2", "e2"},   {"n2d-highmem-4", "n2d"},
		{"t2a-standard-1", "t2a"}, {"a2-highgpu-1g", "a2"},
		{"f1-micro", "f1"},	   {"c3-standard-4-lssd", "c3"},
	};
	struct gcp_accel_spec s;
	char key[48], model[48], out[16];
	double gib;

	for (size_t i = 0; i < sizeof(gpus) / sizeof(*gpus); i++) {
		gcp_billing_gpu_key(gpus[i].words, key, sizeof(key), model,
				    sizeof(model), &gib);
		CHECK(strcmp(key, gpus[i].key) == 0);
		CHECK(strcmp(model, gpus[i].model) == 0);
		CHECK(gib == gpus[i].gib);
	}
	for (size_t i = 0; i < sizeof(series) / sizeof(*series); i++) {
		gcp_billing_series(series[i].type, out, sizeof(out));
		CHECK(strcmp(out, series[i].series) == 0);
	}
	gcp_machine_accelerator("nvidia-l4", "NVIDIA L4", &s);
	CHECK(strcmp(s.name, "NVIDIA_L4") == 0);
	CHECK(strcmp(s.manufacturer, "NVIDIA") == 0);
	CHECK(strcmp(s.type, "GPU") == 0);
	CHECK(strcmp(s.architecture, "Ada") == 0);
	CHECK(s.memory_bytes == 24 * GIB);
	/* The description's memory wins over the model's usual one. */
	gcp_machine_accelerator("nvidia-tesla-a100", "NVIDIA A100 40GB", &s);
	CHECK(strcmp(s.name, "NVIDIA_A100") == 0 && s.memory_bytes == 40 * GIB);
	gcp_machine_accelerator("nvidia-a100-80gb", NULL, &s);
	CHECK(strcmp(s.name, "NVIDIA_A100") == 0 && s.memory_bytes == 80 * GIB);
	gcp_machine_accelerator("nvidia-h100-mega-80gb", NULL, &s);
	CHECK(strcmp(s.name, "NVIDIA_H100") == 0);
	CHECK(strcmp(s.architecture, "Hopper") == 0);
	/* Not an NVIDIA name: the API's, nothing else known. */
	gcp_machine_accelerator("ct5lp-hightpu", NULL, &s);
	CHECK(strcmp(s.name, "ct5lp-hightpu") == 0);
	CHECK(!*s.manufacturer && isnan(s.memory_bytes));
}

/* A SKU's JSON: description, usage type, region(s), unit, tiers. */
static cJSON *sku(const char *desc, const char *usage, const char *regions,
		  const char *unit, const char *tiers)
{
	char text[2048];

	snprintf(text, sizeof(text),
		 "{\"description\": \"%s\", \"category\": {\"resourceFamily\": "
		 "\"Compute\", \"resourceGroup\": \"CPU\", \"usageType\": "
		 "\"%s\"}, \"serviceRegions\": [%s], \"pricingInfo\": "
		 "[{\"pricingExpression\": {\"usageUnit\": \"%s\", "
		 "\"tieredRates\": [%s]}}]}",
		 desc, usage, regions, unit, tiers);
	return cJSON_Parse(text);
}

#define RATE(units, nanos)                                                     \
	"{\"startUsageAmount\": 0, \"unitPrice\": {\"currencyCode\": "         \
	"\"USD\", \"units\": \"" units "\", \"nanos\": " nanos "}}"

static void test_prices(void)
{
	static const struct {
		const char *desc, *usage, *regions, *unit, *tiers;
		int rc;
	} skus[] = {
		{"E2 Instance Core running in Americas", "OnDemand",
		 "\"us-central1\", \"us-east1\"", "h", RATE("0", "21811590"),
		 0},
		{"E2 Instance Ram running in Americas", "OnDemand",
		 "\"us-central1\", \"us-east1\"", "GiBy.h",
		 RATE("0", "2923530"), 0},
		{"Spot Preemptible E2 Instance Core running in Americas",
		 "Preemptible", "\"us-central1\"", "h", RATE("0", "6543000"),
		 0},
		{"Spot Preemptible E2 Instance Ram running in Americas",
		 "Preemptible", "\"us-central1\"", "GiBy.h",
		 RATE("0", "877000"), 0},
		/* A second SKU pricing the same: the first stays. */
		{"E2 Instance Core running in Americas", "OnDemand",
		 "\"us-central1\"", "h", RATE("5", "0"), 0},
		/* The tier from zero, wherever it is listed. */
		{"G2 Instance Core running in Americas", "OnDemand",
		 "\"us-central1\"", "h",
		 "{\"startUsageAmount\": 100, \"unitPrice\": {\"units\": "
		 "\"0\", "
		 "\"nanos\": 1000000}}, " RATE("0", "24988000"),
		 0},
		{"G2 Instance Ram running in Americas", "OnDemand",
		 "\"us-central1\"", "GiBy.h", RATE("0", "2928000"), 0},
		{"Nvidia L4 GPU running in Americas", "OnDemand",
		 "\"us-central1\"", "h", RATE("0", "560000000"), 0},
		{"Micro Instance with burstable CPU running in Americas",
		 "OnDemand", "\"us-central1\"", "h", RATE("0", "7600000"), 0},
		{"N2 Instance Core running in Americas", "OnDemand",
		 "\"us-central1\"", "h", RATE("1", "500000000"), 0},
		/* No offer uses these. */
		{"N2 Instance Ram running in Americas", "Commit1Yr",
		 "\"us-central1\"", "GiBy.h", RATE("0", "1000"), 1},
		{"N2 Instance Ram running in Americas", "OnDemand",
		 "\"us-central1\"", "GiBy.mo", RATE("0", "1000"), 1},
		{"N2 Custom Instance Ram running in Americas", "OnDemand",
		 "\"us-central1\"", "GiBy.h", RATE("0", "1000"), 1},
		{"E2 Instance Ram running in Americas", "OnDemand",
		 "\"europe-west4\"", "GiBy.h",
		 "{\"startUsageAmount\": 0, \"unitPrice\": {\"currencyCode\": "
		 "\"EUR\", \"units\": \"0\", \"nanos\": 1000}}",
		 1},
	};
	struct gcp_rates r = {0};
	struct gcp_vm e2 = {"e2-standard-2", 2, 8 * GIB, NULL, 0};
	struct gcp_vm micro = {"e2-micro", 2, 1 * GIB, NULL, 0};
	struct gcp_vm g2 = {"g2-standard-4", 4, 16 * GIB, "nvidia-l4", 1};
	struct gcp_vm f1 = {"f1-micro", 1, 0.6 * GIB, NULL, 0};
	struct gcp_vm n2 = {"n2-standard-2", 2, 8 * GIB, NULL, 0};
	char missing[64];
	double p;

	for (size_t i = 0; i < sizeof(skus) / sizeof(*skus); i++) {
		cJSON *j = sku(skus[i].desc, skus[i].usage, skus[i].regions,
			       skus[i].unit, skus[i].tiers);

		CHECK(j != NULL);
		CHECK(gcp_rates_add(&r, j) == skus[i].rc);
		cJSON_Delete(j);
	}
	gcp_rates_sort(&r);
	CHECK(r.used == 10);
	CHECK(NEAR(gcp_rates_get(&r, GCP_RATE_CORE, "e2", "us-east1", false),
		   0.02181159));
	CHECK(isnan(gcp_rates_get(&r, GCP_RATE_CORE, "e2", "us-east1", true)));
	p = gcp_billing_price(&r, &e2, "us-central1", false, missing,
			      sizeof(missing));
	CHECK(NEAR(p, 2 * 0.02181159 + 8 * 0.00292353));
	CHECK(NEAR(gcp_billing_price(&r, &e2, "us-central1", true, NULL, 0),
		   2 * 0.006543 + 8 * 0.000877));
	/* e2-micro: a quarter of a vCPU, an eighth of e2-standard-2. */
	CHECK(NEAR(gcp_billing_price(&r, &micro, "us-central1", false, NULL, 0),
		   p / 8));
	CHECK(NEAR(gcp_billing_price(&r, &g2, "us-central1", false, NULL, 0),
		   4 * 0.024988 + 16 * 0.002928 + 0.56));
	CHECK(NEAR(gcp_billing_price(&r, &f1, "us-central1", false, NULL, 0),
		   0.0076));
	/* What is missing is named. */
	p = gcp_billing_price(&r, &n2, "us-central1", false, missing,
			      sizeof(missing));
	CHECK(isnan(p));
	CHECK(strcmp(missing, "n2 RAM") == 0);
	p = gcp_billing_price(&r, &g2, "us-central1", true, missing,
			      sizeof(missing));
	CHECK(isnan(p) && strcmp(missing, "g2 core") == 0);
	CHECK(isnan(gcp_billing_price(&r, &e2, "europe-west4", false, missing,
				      sizeof(missing))));
	gcp_rates_free(&r);
	/* No rates at all. */
	CHECK(isnan(gcp_billing_price(&r, &e2, "us-central1", false, NULL, 0)));
}

/* --- the fake --- */

static pid_t spawn_py(const char *fakepy, const char *const *args,
		      const char *log)
{
	const char *argv[20] = {"python3", fakepy};
	posix_spawn_file_actions_t fa;
	size_t n = 2;
	pid_t pid;
	int rc;

	for (size_t i = 0; args[i] && n < 19; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log,
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawnp(&pid, "python3", &fa, NULL, (char *const *)argv,
			  environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc ? -1 : pid;
}

static int fake_start(const char *fakepy)
{
	char portfile[192], log[192], user[128];
	const char *args[] = {"--dir",
			      fake_dir,
			      "--project",
			      "cclfs-test",
			      "--authorized-user",
			      user,
			      "--billing-key",
			      KEY,
			      NULL};
	struct timespec t0;
	int port = 0;

	snprintf(fake_dir, sizeof(fake_dir), "%s/fake", tmpdir);
	snprintf(portfile, sizeof(portfile), "%s/port", fake_dir);
	snprintf(log, sizeof(log), "%s/fake.log", tmpdir);
	snprintf(user, sizeof(user), "%s/user.json", tmpdir);
	fake_pid = spawn_py(fakepy, args, log);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (fake_pid > 0 && port <= 0 &&
	       check_ms_since(&t0) < 3L * CHECK_WAIT_MS) {
		FILE *p = fopen(portfile, "r");

		if (!p || fscanf(p, "%d", &port) != 1)
			port = 0;
		if (p)
			fclose(p);
		if (port <= 0)
			usleep(50000);
	}
	if (port <= 0) {
		fprintf(stderr, "the fake did not start; see %s\n", log);
		return -1;
	}
	snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d", port);
	return 0;
}

static void fake_stop(void)
{
	if (fake_pid > 0 && kill(fake_pid, SIGTERM) == 0)
		waitpid(fake_pid, NULL, 0);
	fake_pid = 0;
}

/* A control request (a POST when post is given): its JSON, or NULL. */
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

static void fake_settings(const char *json)
{
	cJSON *a = fake_control("/_fake/catalog/settings", json);

	CHECK(a && cJSON_GetObjectItemCaseSensitive(a, "settings"));
	cJSON_Delete(a);
}

/* How often the billing endpoint took the key or a bearer token. */
static int fake_auth(const char *how)
{
	cJSON *s = fake_control("/_fake/catalog/state", NULL);
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(s, "auth"), how);
	int v = cJSON_IsNumber(n) ? n->valueint : 0;

	cJSON_Delete(s);
	return v;
}

/* --- a sink that keeps what it is given --- */

struct got_offer {
	char type[64], region[32], zones[256];
	double price, spot;
};

struct got {
	char types[64][64];
	struct provider_catalog_type t[64];
	char accel[64][32];
	struct got_offer offers[256];
	char notes[4096];
	size_t ntypes, noffers, progress_calls, last_done, last_total;
	int refuse; /* a type's answer */
};

static int got_type(void *ctx, const struct provider_catalog_type *t)
{
	struct got *g = ctx;

	if (g->refuse)
		return g->refuse;
	if (g->ntypes < 64) {
		snprintf(g->types[g->ntypes], 64, "%s", t->name);
		snprintf(g->accel[g->ntypes], 32, "%s",
			 t->accelerator ? t->accelerator : "");
		g->t[g->ntypes] = *t;
		g->ntypes++;
	}
	return 0;
}

static int got_offer(void *ctx, const struct provider_catalog_offer *o)
{
	struct got *g = ctx;
	struct got_offer *x;

	if (g->noffers >= 256)
		return 0;
	x = &g->offers[g->noffers++];
	snprintf(x->type, sizeof(x->type), "%s", o->type);
	snprintf(x->region, sizeof(x->region), "%s", o->region);
	snprintf(x->zones, sizeof(x->zones), "%s", o->zones);
	x->price = o->price;
	x->spot = o->spot;
	return 0;
}

static void got_progress(void *ctx, size_t done, size_t total)
{
	struct got *g = ctx;

	g->progress_calls++;
	g->last_done = done;
	g->last_total = total;
}

static void got_note(void *ctx, const char *sentence)
{
	struct got *g = ctx;
	size_t n = strlen(g->notes);

	snprintf(g->notes + n, sizeof(g->notes) - n, "%s\n", sentence);
}

static const struct got_offer *got_find(const struct got *g, const char *type,
					const char *region)
{
	for (size_t i = 0; i < g->noffers; i++)
		if (strcmp(g->offers[i].type, type) == 0 &&
		    strcmp(g->offers[i].region, region) == 0)
			return &g->offers[i];
	return NULL;
}

static int got_type_index(const struct got *g, const char *name)
{
	for (size_t i = 0; i < g->ntypes; i++)
		if (strcmp(g->types[i], name) == 0)
			return (int)i;
	return -1;
}

static int refresh(struct gcp_api *api, const char *key, struct got *g,
		   struct cancel *c, char *err, size_t errlen)
{
	char billing[96];
	struct provider_catalog_sink s = {g, got_type, got_offer, got_progress,
					  got_note};
	int refuse = g->refuse;

	memset(g, 0, sizeof(*g));
	g->refuse = refuse;
	*err = '\0';
	snprintf(billing, sizeof(billing), "%s/v1", fake_url);
	return gcp_catalog_refresh(api, billing, key, &s, c, err, errlen);
}

/* The fake's rates (fake_catalog.py) in us-central1. */
#define E2_CORE	     0.021811
#define E2_RAM	     0.002923
#define E2_SPOT_CORE 0.006543
#define E2_SPOT_RAM  0.000877

static void test_refresh(struct gcp_api *api)
{
	static struct got g;
	char err[PROVIDER_ERR_MAX];
	const struct got_offer *o;
	int before = fake_auth("key"), i;

	CHECK(refresh(api, KEY, &g, NULL, err, sizeof(err)) == 0);
	if (*err)
		fprintf(stderr, "refresh: %s\n", err);
	CHECK(fake_auth("key") > before);
	/* The fake's 11 machine types, each once; the OBSOLETE one left
	 * out. */
	CHECK(g.ntypes == 11);
	for (size_t k = 0; k < g.ntypes; k++)
		CHECK(got_type_index(&g, g.types[k]) == (int)k);
	CHECK(got_type_index(&g, "t2a-standard-4") >= 0);
	CHECK(got_type_index(&g, "e2-small") >= 0);
	CHECK(got_type_index(&g, "n1-highcpu-2") < 0);
	CHECK(g.notes[0] == '\0');
	if (g.notes[0])
		fprintf(stderr, "notes: %s", g.notes);
	i = got_type_index(&g, "g2-standard-4");
	CHECK(i >= 0);
	if (i >= 0) {
		CHECK(g.t[i].vcpus == 4 && g.t[i].memory_bytes == 16 * GIB);
		CHECK(strcmp(g.accel[i], "NVIDIA_L4") == 0);
		CHECK(g.t[i].accelerator_count == 1);
		CHECK(g.t[i].accelerator_memory_bytes == 24 * GIB);
		CHECK(strcmp(g.t[i].architecture, "x86_64") == 0);
	}
	i = got_type_index(&g, "t2a-standard-2");
	CHECK(i >= 0 && strcmp(g.t[i].architecture, "arm64") == 0);
	o = got_find(&g, "e2-standard-2", "us-central1");
	CHECK(o != NULL);
	if (o) {
		CHECK(strcmp(o->zones, "us-central1-a us-central1-b "
				       "us-central1-c us-central1-f") == 0);
		CHECK(NEAR(o->price, 2 * E2_CORE + 8 * E2_RAM));
		CHECK(NEAR(o->spot, 2 * E2_SPOT_CORE + 8 * E2_SPOT_RAM));
	}
	/* europe-west4 is 10% dearer in the fake. */
	o = got_find(&g, "e2-standard-2", "europe-west4");
	CHECK(o && NEAR(o->price, 1.1 * (2 * E2_CORE + 8 * E2_RAM)));
	o = got_find(&g, "e2-small", "us-central1");
	CHECK(o && NEAR(o->price, 0.5 * E2_CORE + 2 * E2_RAM));
	/* n1's first tier is the one from zero use. */
	o = got_find(&g, "n1-standard-4", "us-central1");
	CHECK(o && NEAR(o->price, 4 * 0.031611 + 15 * 0.004237));
	/* g2: its machine type's zones that have its GPU; with the L4. */
	o = got_find(&g, "g2-standard-4", "us-central1");
	CHECK(o && strcmp(o->zones, "us-central1-a us-central1-b") == 0);
	CHECK(o && NEAR(o->price, 4 * 0.024988 + 16 * 0.002928 + 0.56));
	CHECK(o && NEAR(o->spot, 4 * 0.00999 + 16 * 0.00117 + 0.2236));
	o = got_find(&g, "g2-standard-4", "europe-west4");
	CHECK(o && strcmp(o->zones, "europe-west4-a europe-west4-b "
				    "europe-west4-c") == 0);
	/* t2a-standard-4 is not offered in europe-west4. */
	CHECK(got_find(&g, "t2a-standard-4", "europe-west4") == NULL);
	CHECK(got_find(&g, "t2a-standard-4", "us-central1") != NULL);
	CHECK(g.noffers == 21);
	CHECK(g.progress_calls == 2 && g.last_done == 2 && g.last_total == 2);

	/* Without a key: the credentials' bearer token. */
	before = fake_auth("bearer");
	CHECK(refresh(api, "", &g, NULL, err, sizeof(err)) == 0);
	CHECK(fake_auth("bearer") > before);
	o = got_find(&g, "e2-standard-2", "us-central1");
	CHECK(o && NEAR(o->price, 2 * E2_CORE + 8 * E2_RAM));
}

static void test_refresh_failures(struct gcp_api *api)
{
	static struct got g;
	char err[PROVIDER_ERR_MAX];
	const struct got_offer *o;
	struct cancel c;

	/* A key refused: types and offers, no prices, a note; never the
	 * key. */
	CHECK(refresh(api, "AIzaWrongKey-42", &g, NULL, err, sizeof(err)) == 0);
	CHECK(g.ntypes == 11 && g.noffers == 21);
	o = got_find(&g, "e2-standard-2", "us-central1");
	CHECK(o && isnan(o->price) && isnan(o->spot));
	CHECK(strstr(g.notes, "prices were not obtained") != NULL);
	CHECK(strstr(g.notes, "API key not valid") != NULL);
	CHECK(strstr(g.notes, "AIzaWrongKey") == NULL);

	/* The Billing API refusing the token. */
	fake_settings("{\"billing_fault\": {\"status\": 403, \"reason\": "
		      "\"forbidden\", \"message\": \"Cloud Billing API has not "
		      "been used in project cclfs-test\"}}");
	CHECK(refresh(api, "", &g, NULL, err, sizeof(err)) == 0);
	CHECK(strstr(g.notes, "has not been used") != NULL);
	fake_settings("{\"billing_fault\": null}");

	/* A rate missing: those offers' price NAN (the catalog keeps its
	 * own), a note naming it; the rest priced. */
	fake_settings("{\"skus_left_out\": [\"E2 Instance Ram running in "
		      "Americas\"]}");
	CHECK(refresh(api, KEY, &g, NULL, err, sizeof(err)) == 0);
	o = got_find(&g, "e2-standard-2", "us-central1");
	CHECK(o && isnan(o->price) && !isnan(o->spot));
	CHECK(strstr(g.notes, "no on-demand price (no SKU for e2 RAM)") !=
	      NULL);
	o = got_find(&g, "e2-standard-2", "europe-west4");
	CHECK(o && !isnan(o->price));
	fake_settings("{\"skus_left_out\": []}");

	/* The accelerator types failing: a note, the machine types' zones. */
	fake_settings("{\"accelerator_types_fault\": {\"status\": 403}}");
	CHECK(refresh(api, KEY, &g, NULL, err, sizeof(err)) == 0);
	CHECK(strstr(g.notes, "accelerator types were not obtained") != NULL);
	o = got_find(&g, "g2-standard-4", "us-central1");
	CHECK(o && strcmp(o->zones, "us-central1-a us-central1-b "
				    "us-central1-c") == 0);
	fake_settings("{\"accelerator_types_fault\": null}");

	/* The machine types failing: the refresh fails, nothing handed. */
	fake_settings("{\"machine_types_fault\": {\"status\": 403, "
		      "\"message\": \"Required 'compute.machineTypes.list' "
		      "permission\"}}");
	CHECK(refresh(api, KEY, &g, NULL, err, sizeof(err)) == -EACCES);
	CHECK(strstr(err, "machineTypes.aggregatedList") != NULL);
	CHECK(strstr(err, KEY) == NULL);
	CHECK(g.ntypes == 0 && g.noffers == 0 && !g.notes[0]);
	fake_settings("{\"machine_types_fault\": null}");

	/* The sink refusing. */
	g.refuse = -ENOSPC;
	CHECK(refresh(api, KEY, &g, NULL, err, sizeof(err)) == -ENOSPC);
	CHECK(strstr(err, "did not take type") != NULL);
	g.refuse = 0;

	/* Cancelled. */
	cancel_init(&c);
	cancel_fire(&c);
	CHECK(refresh(api, KEY, &g, &c, err, sizeof(err)) == -ECANCELED);
	CHECK(g.ntypes == 0 && g.noffers == 0);
	cancel_destroy(&c);
}

int main(int argc, char **argv)
{
	char user[128], err[GCP_AUTH_ERR_MAX], compute[96], cmd[256];
	struct gcp_retry retry = {3, 10, 100, 20000};
	struct gcp_auth *auth = NULL;
	struct gcp_api *api = NULL;
	FILE *f;

	test_describe();
	test_names();
	test_prices();
	if (argc < 2) {
		fprintf(stderr, "usage: %s FAKE_GCE.py\n", argv[0]);
		return 2;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gcpcat.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 2;
	if (fake_start(argv[1]))
		return 2;
	snprintf(user, sizeof(user), "%s/user.json", tmpdir);
	f = fopen(user, "w");
	if (f) {
		fprintf(f,
			"{\"type\": \"authorized_user\", \"client_id\": "
			"\"764086051850-fake.apps.googleusercontent.com\", "
			"\"client_secret\": \"d-FL95Q19q7MQmFpd7hHD0Ty\", "
			"\"refresh_token\": \"1//fake-refresh-token\", "
			"\"token_uri\": \"%s/token\"}\n",
			fake_url);
		fclose(f);
	}
	setenv("GOOGLE_APPLICATION_CREDENTIALS", user, 1);
	auth = gcp_auth_open("cclfs-test", NULL, err, sizeof(err));
	CHECK(auth != NULL);
	snprintf(compute, sizeof(compute), "%s/compute/v1/", fake_url);
	if (auth)
		api = gcp_api_new(auth, compute, &retry, err, sizeof(err));
	CHECK(api != NULL);
	if (api) {
		test_refresh(api);
		test_refresh_failures(api);
	} else {
		fprintf(stderr, "%s\n", err);
	}
	gcp_api_free(api);
	gcp_auth_close(auth);
	fake_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
	if (!failed && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return check_summary("gcp_catalog");
}
