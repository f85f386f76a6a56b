/* bench/resolve_bench.c: how long resolution takes inside the daemon. Times
 * resolution_run and resolution_candidates in one process on the real
 * catalog and on a synthetic one of 100,000 types offered in 30 regions
 * each (median and p90), the lines of a catalog interleaved. */
#include "catalog/catalog.h"
#include "lifecycle/config.h"
#include "lifecycle/contract.h"
#include "lifecycle/resolution.h"
#include "providers/provider.h"
#include "resolver/hierarchy.h"
#include "resolver/match.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef CCLFS_VERSION
#define CCLFS_VERSION "unknown"
#endif

/* Targets for the median of one resolve (docs/performance.md): < 1 ms on
 * the real catalog, < 50 ms at 100,000 types x 30 regions. candidates has
 * none in one process (through the mount: bench/resolve.sh). */
#define TARGET_REAL_US	 1000.0
#define TARGET_SYNTH_US	 50000.0
#define SYNTH_TYPES	 100000
#define SYNTH_REGIONS	 30 /* per provider; every type is in all of its */
#define SYNTH_REAL	 5  /* of which regions the real catalog has */
#define DEFAULT_REPS	 2000
#define DEFAULT_BUDGET_S 3.0
#define MIN_REPS	 11
#define WARMUP		 3
/* A line whose first call takes longer than SLOW_US has no untimed calls
 * and needs only MIN_REPS_SLOW (the synthetic catalog's long lists). */
#define SLOW_US	      1e6
#define MIN_REPS_SLOW 3
#define MAX_SET	      8
#define MAX_LINES     32
#define NELEM(a)      (sizeof(a) / sizeof((a)[0]))

/* A contract: the files written, as "path" = "value"; the rest default. */
struct bench_contract {
	const char *label;
	const char *set[MAX_SET][2];
	bool fails; /* resolution must fail (for resolve) */
};

static const struct bench_contract resolve_contracts[] = {
	{"unique",
	 {{"node_machinetype", "t3.xlarge"}, {"cluster_locale", "us-east-1"}},
	 false},
	{"unique-regions", {{"node_machinetype", "t3.xlarge"}}, true},
	{"cheapest",
	 {{"accelerator_count", "just 4"},
	  {"accelerator_architecture", "Ampere"},
	  {"node_memory_size", "atmost 256G"},
	  {"config/resolve_policy", "cheapest"}},
	 false},
	{"hopper-cheapest",
	 {{"accelerator_architecture", "Hopper"},
	  {"accelerator_count", "atleast 1"},
	  {"config/resolve_policy", "cheapest"}},
	 false},
	{"region",
	 {{"cluster_locale", "europe-west4"},
	  {"node_vcpus_count", "atleast 16"},
	  {"node_memory_size", "atleast 64G"},
	  {"config/resolve_policy", "cheapest"}},
	 false},
	{"arm64",
	 {{"node_architecture", "arm64"},
	  {"config/resolve_policy", "cheapest"}},
	 false},
	{"none", {{"node_memory_size", "atleast 100T"}}, true},
	{"manager-workers",
	 {{"cluster_type", "ManagerWorkers"},
	  {"config/resolve_policy", "cheapest"},
	  {"manager/node_provider", "ec2"},
	  {"manager/node_vcpus_count", "just 2"},
	  {"manager/node_memory_size", "atleast 4G"},
	  {"worker/accelerator", "NVIDIA_L4"},
	  {"worker/accelerator_count", "atleast 1"}},
	 false},
};

static const struct bench_contract candidates_contracts[] = {
	{"broad", {{"accelerator_count", "atleast 1"}}, false},
	{"broad-region",
	 {{"accelerator_count", "atleast 1"},
	  {"cluster_locale", "europe-west4"}},
	 false},
	{"empty", {{NULL, NULL}}, false},
};

#define NRESOLVE    NELEM(resolve_contracts)
#define NCANDIDATES NELEM(candidates_contracts)

/* The values of one contract, indexed by contract schema field. */
struct bench_values {
	const char **v;
	size_t n;
};

static const char *bench_value(void *ctx, int field)
{
	const struct bench_values *bv = ctx;

	if (field < 0 || (size_t)field >= bv->n)
		return "";
	return bv->v[field] ? bv->v[field]
			    : contract_field_at((size_t)field)->def;
}

static void die(const char *what)
{
	fprintf(stderr, "resolve_bench: %s\n", what);
	exit(1);
}

static void bench_values_set(struct bench_values *bv,
			     const struct bench_contract *c)
{
	char msg[160];

	bv->n = contract_field_count();
	bv->v = calloc(bv->n, sizeof(*bv->v));
	if (!bv->v)
		die("out of memory");
	for (size_t i = 0; i < MAX_SET && c->set[i][0]; i++) {
		int f = contract_field_by_path(c->set[i][0]);

		if (f < 0) {
			snprintf(msg, sizeof(msg), "no contract file %s",
				 c->set[i][0]);
			die(msg);
		}
		bv->v[f] = c->set[i][1];
	}
}

/* "path = value; path = value", or "(nothing written: every offer)". */
static void bench_describe(const struct bench_contract *c, char *buf,
			   size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < MAX_SET && c->set[i][0] && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s = %s",
				      i ? "; " : "", c->set[i][0],
				      c->set[i][1]);
	if (!buf[0])
		snprintf(buf, len, "(nothing written: every offer)");
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

enum bench_op { OP_RESOLVE, OP_CANDIDATES };

/* One call; its duration in microseconds. The result is freed after the
 * clock stops. */
static double bench_once(struct resolution_env *env, enum bench_op op,
			 struct bench_values *bv, int *rc, char **out,
			 char *why, size_t whylen)
{
	char *text = NULL;
	double t0, t1;

	why[0] = '\0';
	if (op == OP_RESOLVE) {
		t0 = now_us();
		*rc = resolution_run(env, bench_value, bv, &text, why, whylen);
		t1 = now_us();
	} else {
		t0 = now_us();
		text = resolution_candidates(env, bench_value, bv);
		t1 = now_us();
		*rc = text ? 0 : -ENOMEM;
	}
	if (out)
		*out = text;
	else
		free(text);
	return t1 - t0;
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return a < b ? -1 : a > b;
}

struct bench_row {
	const char *catalog;   /* "real", "synthetic" */
	const char *operation; /* "resolve", "candidates" */
	const char *contract;
	size_t types, reps;
	double median, p90; /* microseconds */
	double target;	    /* microseconds; 0 = none */
	char outcome[320];
};

static struct bench_row rows[MAX_LINES];
static size_t nrows;

struct bench_opts {
	const char *only;    /* the contracts to time, "a,b"; NULL = all */
	const char *catalog; /* the catalog to time; NULL = both */
	size_t reps;
	double budget_s;
};

/* The text of `resolution` on one line:
 * "node ec2 t3.xlarge 0.1664 us-east-1 us-east-1a ...". */
static void bench_flatten(const char *text, char *buf, size_t len)
{
	size_t o = 0;

	for (const char *p = text; *p && o + 1 < len; p++) {
		if (*p == '\t')
			buf[o++] = ' ';
		else if (*p == '\n')
			o += (size_t)snprintf(buf + o, len - o, "%s",
					      p[1] ? "; " : "");
		else
			buf[o++] = *p;
		if (o >= len)
			o = len - 1;
	}
	buf[o] = '\0';
}

/* One line of the table being measured: its contract's values and the
 * durations so far. */
struct bench_line {
	struct bench_row *row;
	double *sample;
	struct bench_values bv;
	size_t min_reps;
	double spent;
	enum bench_op op;
};

/* The lines of candidates: how many, and how many name a region. */
static void bench_count_lines(const char *text, size_t *lines, size_t *offers)
{
	*lines = 0;
	*offers = 0;
	if (!text || !(text = strchr(text, '\n')))
		return;
	for (const char *p = text + 1; *p;) {
		const char *end = strchr(p, '\n');
		const char *tab = strchr(p, '\t');

		tab = tab ? strchr(tab + 1, '\t') : NULL;
		(*lines)++;
		if (tab && (!end || tab < end) && strncmp(tab, "\t-\t", 3) != 0)
			(*offers)++;
		if (!end)
			break;
		p = end + 1;
	}
}

/* Set a line up: check its outcome once (the numbers must measure what
 * the label says), then the untimed calls. */
static void bench_line_open(struct bench_line *l, struct resolution_env *env,
			    const char *catalog, size_t types, enum bench_op op,
			    const struct bench_contract *c, double target,
			    const struct bench_opts *opt)
{
	struct bench_row *r;
	char why[4096], msg[4400];
	char *text = NULL;
	int rc;

	if (nrows == MAX_LINES)
		die("too many lines for the table");
	r = &rows[nrows++];
	*r = (struct bench_row){
		.catalog = catalog,
		.operation = op == OP_RESOLVE ? "resolve" : "candidates",
		.contract = c->label,
		.types = types,
		.target = target,
	};
	*l = (struct bench_line){.row = r, .op = op};
	bench_values_set(&l->bv, c);
	l->sample = malloc(opt->reps * sizeof(*l->sample));
	if (!l->sample)
		die("out of memory");

	l->min_reps = bench_once(env, op, &l->bv, &rc, &text, why,
				 sizeof(why)) > SLOW_US
			      ? MIN_REPS_SLOW
			      : MIN_REPS;
	if (op == OP_CANDIDATES) {
		size_t lines, offers;

		bench_count_lines(text, &lines, &offers);
		snprintf(r->outcome, sizeof(r->outcome),
			 "%zu lines (%zu offers), %zu bytes", lines, offers,
			 text ? strlen(text) : 0);
	} else if (rc == 0) {
		bench_flatten(text, r->outcome, sizeof(r->outcome));
	} else {
		snprintf(r->outcome, sizeof(r->outcome), "fails: %.280s%s", why,
			 strlen(why) > 280 ? "..." : "");
	}
	free(text);
	if (op == OP_RESOLVE && (rc != 0) != c->fails) {
		snprintf(msg, sizeof(msg),
			 "%s catalog, contract %s: expected resolution to %s, "
			 "got: %s",
			 catalog, c->label, c->fails ? "fail" : "succeed",
			 rc ? why : r->outcome);
		die(msg);
	}
	if (op == OP_CANDIDATES && rc)
		die("candidates: out of memory");
	for (int i = 1; i < WARMUP && l->min_reps == MIN_REPS; i++)
		bench_once(env, op, &l->bv, &rc, NULL, why, sizeof(why));
}

static bool bench_line_wants(const struct bench_line *l,
			     const struct bench_opts *opt)
{
	return l->row->reps < opt->reps &&
	       (l->row->reps < l->min_reps || l->spent < opt->budget_s * 1e6);
}

static void bench_line_close(struct bench_line *l)
{
	struct bench_row *r = l->row;

	qsort(l->sample, r->reps, sizeof(*l->sample), cmp_double);
	r->median = r->reps % 2 ? l->sample[r->reps / 2]
				: (l->sample[r->reps / 2 - 1] +
				   l->sample[r->reps / 2]) /
					  2;
	/* Nearest rank. */
	r->p90 = l->sample[(size_t)ceil(0.9 * (double)r->reps) - 1];
	free(l->sample);
	free(l->bv.v);
	fprintf(stderr, "  %-9s %-10s %-15s %6zu calls, median %.1f us\n",
		r->catalog, r->operation, r->contract, r->reps, r->median);
}

/* Whether the contract labelled `label` is to be timed. */
static bool bench_wanted(const struct bench_opts *opt, const char *label)
{
	size_t n = strlen(label);

	for (const char *p = opt->only; p; p = strchr(p, ',')) {
		p += *p == ',';
		if (strncmp(p, label, n) == 0 && (p[n] == ',' || !p[n]))
			return true;
	}
	return !opt->only;
}

/* Every contract on one catalog, interleaved: each round calls each line
 * that still wants calls once, so that a change of the machine's load
 * falls on every line alike. */
static void bench_all(struct resolution_env *env, const char *catalog,
		      size_t types, double target, const struct bench_opts *opt)
{
	struct bench_line lines[NRESOLVE + NCANDIDATES];
	size_t n = 0;
	char why[4096];
	bool more = true;
	int rc;

	if (opt->catalog && strcmp(opt->catalog, catalog) != 0)
		return;
	for (size_t i = 0; i < NRESOLVE; i++)
		if (bench_wanted(opt, resolve_contracts[i].label))
			bench_line_open(&lines[n++], env, catalog, types,
					OP_RESOLVE, &resolve_contracts[i],
					target, opt);
	for (size_t i = 0; i < NCANDIDATES; i++)
		if (bench_wanted(opt, candidates_contracts[i].label))
			bench_line_open(&lines[n++], env, catalog, types,
					OP_CANDIDATES, &candidates_contracts[i],
					0, opt);
	while (more) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			struct bench_line *l = &lines[i];
			double t;

			if (!bench_line_wants(l, opt))
				continue;
			t = bench_once(env, l->op, &l->bv, &rc, NULL, why,
				       sizeof(why));
			l->sample[l->row->reps++] = t;
			l->spent += t;
			more = true;
		}
	}
	for (size_t i = 0; i < n; i++)
		bench_line_close(&lines[i]);
}

/* --- the synthetic catalog --- */

/* Accelerators, from the real catalog's names, with their architecture. */
static const struct {
	const char *name, *maker, *arch;
	double gib, usd_hour;
} synth_accels[] = {
	{"NVIDIA_A10G", "NVIDIA", "Ampere", 24, 1.0},
	{"NVIDIA_L4", "NVIDIA", "Ada", 24, 0.7},
	{"NVIDIA_A100", "NVIDIA", "Ampere", 40, 3.0},
	{"NVIDIA_H100", "NVIDIA", "Hopper", 80, 9.0},
	{"NVIDIATesla_T4", "NVIDIA", "Turing", 16, 0.35},
	{"NVIDIATesla_V100", "NVIDIA", "Volta", 16, 2.5},
	{"AMDRadeon_PRO_V520", "AMD", "RDNA", 8, 0.4},
};

/* Processors: the x86 ones any x86 series may have, then the Arm ones. */
static const struct {
	const char *maker, *uarch, *name;
} synth_cpus[] = {
	{"Intel", "IceLake", "IntelXeon_8375C"},
	{"Intel", "CascadeLake", "IntelXeon_8280L"},
	{"AMD", "Zen", "AMDEPYC_7R13"},
	{"AWS", NULL, "AWSGraviton2"},
	{"AWS", NULL, "AWSGraviton3"},
	{NULL, NULL, NULL}, /* an Arm processor the hierarchy does not name */
};

#define SYNTH_X86 3 /* the first SYNTH_X86 of synth_cpus */

/* Machine-type series the synthetic types belong to (real parents in the
 * hierarchy), with what their types look like: accel indexes synth_accels
 * (-1: none), cpu synth_cpus (-1: any x86 one). */
static const struct {
	const char *parent, *provider, *tag;
	double gib_per_vcpu;
	int accel, cpu;
} synth_series[] = {
	{"EC2Type_M5", "ec2", "m5", 4, -1, -1},
	{"EC2Type_C5", "ec2", "c5", 2, -1, -1},
	{"EC2Type_R5", "ec2", "r5", 8, -1, -1},
	{"EC2Type_T3", "ec2", "t3", 4, -1, -1},
	{"EC2Type_M6G", "ec2", "m6g", 4, -1, 3},
	{"EC2Type_C7G", "ec2", "c7g", 2, -1, 4},
	{"EC2Type_G4DN", "ec2", "g4dn", 4, 4, -1},
	{"EC2Type_G4AD", "ec2", "g4ad", 4, 6, 2},
	{"EC2Type_G5", "ec2", "g5", 4, 0, 2},
	{"EC2Type_G6", "ec2", "g6", 4, 1, 2},
	{"EC2Type_P3", "ec2", "p3", 8, 5, -1},
	{"EC2Type_P4D", "ec2", "p4d", 8, 2, -1},
	{"EC2Type_P5", "ec2", "p5", 8, 3, 2},
	{"GCPType_N2", "gcp", "n2", 4, -1, -1},
	{"GCPType_C2D", "gcp", "c2d", 2, -1, 2},
	{"GCPType_M2", "gcp", "m2", 16, -1, -1},
	{"GCPType_T2A", "gcp", "t2a", 4, -1, 5},
	{"GCPType_G2", "gcp", "g2", 4, 1, -1},
	{"GCPType_A2", "gcp", "a2", 8, 2, -1},
	{"GCPType_A3", "gcp", "a3", 8, 3, -1},
};

static const char *const synth_storage[] = {
	"StorageType_EC2_EBSOnly", "StorageType_EC2_NVMeSSD", "StorageType_SSD",
	"StorageType_HDD", NULL};

/* The regions of the two providers: SYNTH_REAL the real catalog has, the
 * others new to the hierarchy (catalog_add_offer declares them under
 * EC2Region and GCPRegion). us-east-1 and europe-west4 are those the
 * contracts name. */
static const char *const synth_real_regions[2][SYNTH_REAL] = {
	{"us-east-1", "us-west-2", "eu-west-1", "eu-central-1",
	 "ap-northeast-1"},
	{"us-central1", "europe-west4", "europe-west1", "asia-east1",
	 "us-east4"},
};
static const char *const synth_providers[2] = {"ec2", "gcp"};

struct synth_region {
	char name[32], zones[128];
	double factor; /* its prices over the cheapest region's */
};

static uint64_t synth_state = 0x9e3779b97f4a7c15u;

/* xorshift64*: the same catalog on every run. */
static uint64_t synth_rand(void)
{
	synth_state ^= synth_state >> 12;
	synth_state ^= synth_state << 25;
	synth_state ^= synth_state >> 27;
	return synth_state * 0x2545f4914f6cdd1du;
}

static size_t synth_pick(size_t n)
{
	return (size_t)(synth_rand() % n);
}

/* Uniform in [0, 1]. */
static double synth_unit(void)
{
	return (double)synth_pick(10001) / 10000;
}

static void synth_field(const char *name, int *out)
{
	*out = assumption_field_find(name);
	if (*out < 0)
		die("unknown assumption field");
}

/* Each provider's SYNTH_REGIONS regions: names, two or three zones, and
 * a price factor (1 for us-east-1 and us-central1, else 1 to 1.4). */
static void synth_regions(struct synth_region reg[2][SYNTH_REGIONS])
{
	for (size_t p = 0; p < 2; p++)
		for (size_t i = 0; i < SYNTH_REGIONS; i++) {
			struct synth_region *r = &reg[p][i];
			const char *sep = p == 0 ? "" : "-";
			size_t nz = 2 + synth_pick(2), o = 0;
			char name[sizeof(r->name)];

			if (i < SYNTH_REAL)
				snprintf(r->name, sizeof(r->name), "%s",
					 synth_real_regions[p][i]);
			else
				snprintf(r->name, sizeof(r->name),
					 "%s-syn-%02zu", synth_providers[p],
					 i - SYNTH_REAL + 1);
			/* The name from a copy: gcc sees r->zones and r->name
			 * as one object and refuses the overlap. */
			memcpy(name, r->name, sizeof(name));
			for (size_t z = 0; z < nz; z++)
				o += (size_t)snprintf(
					r->zones + o, sizeof(r->zones) - o,
					"%s%s%s%c", z ? " " : "", name, sep,
					(char)('a' + z));
			r->factor = i == 0 ? 1 : 1 + 0.4 * synth_unit();
		}
	/* As the real catalog has it, for the unique contract. */
	snprintf(reg[0][0].zones, sizeof(reg[0][0].zones),
		 "us-east-1a us-east-1b us-east-1c us-east-1d us-east-1f");
}

/* The offers of one type in every region of its provider: its price
 * times the region's factor, +-3 %, to 4 decimals; 5 % of offers (and
 * every offer of the unpriced types) without a price, a spot price of
 * 30 to 45 % for three offers in four. */
static void synth_offers(struct catalog *cat, const char *provider,
			 const char *name, double price, bool t3xl,
			 const struct synth_region *reg)
{
	char err[256];

	for (size_t i = 0; i < SYNTH_REGIONS; i++) {
		double p = price * reg[i].factor * (0.97 + 0.06 * synth_unit());
		double spot = NAN;

		p = round(p * 10000) / 10000;
		if (synth_pick(20) == 0)
			p = NAN;
		if (t3xl && i == 0)
			p = 0.1664; /* us-east-1, as in the real catalog */
		else if (!isnan(p) && synth_pick(4))
			spot = round(p * (0.3 + 0.15 * synth_unit()) * 10000) /
			       10000;
		if (catalog_add_offer(cat, provider, name, reg[i].name, p, spot,
				      reg[i].zones, err, sizeof(err)))
			die(err);
	}
}

/*
 * `count` types, each offered in SYNTH_REGIONS regions: one is ec2's real
 * t3.xlarge (so that the unique contracts are the same on both catalogs),
 * the others are spread over real series, each with a machine type of its
 * own declared under its series (as every real type has), with real
 * accelerator, processor and storage names.
 */
static struct catalog *synth_catalog(size_t count)
{
	static const double vcpus[] = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128};
	static const double gpus[] = {1, 2, 4, 8};
	static struct synth_region reg[2][SYNTH_REGIONS];
	int f_prov, f_mt, f_mem, f_ecu, f_vc, f_acc, f_accm, f_acct, f_accmk,
		f_arch, f_accel, f_pmk, f_uarch, f_cpu, f_st, f_ss, f_net,
		f_node_arch;
	char err[256], name[64], mt[64];
	struct catalog *cat = catalog_open_empty(err, sizeof(err));
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS];

	if (!cat)
		die(err);
	synth_regions(reg);
	synth_field("node_provider", &f_prov);
	synth_field("node_machinetype", &f_mt);
	synth_field("node_memory_size", &f_mem);
	synth_field("node_ecu_count", &f_ecu);
	synth_field("node_vcpus_count", &f_vc);
	synth_field("node_architecture", &f_node_arch);
	synth_field("accelerator_count", &f_acc);
	synth_field("accelerator_memory", &f_accm);
	synth_field("accelerator_type", &f_acct);
	synth_field("accelerator_manufacturer", &f_accmk);
	synth_field("accelerator_architecture", &f_arch);
	synth_field("accelerator", &f_accel);
	synth_field("processor_manufacturer", &f_pmk);
	synth_field("processor_microarchitecture", &f_uarch);
	synth_field("processor", &f_cpu);
	synth_field("storage_type", &f_st);
	synth_field("storage_size", &f_ss);
	synth_field("network_performance", &f_net);

	for (size_t i = 0; i < count; i++) {
		size_t s = synth_pick(NELEM(synth_series));
		size_t st = synth_pick(NELEM(synth_storage));
		size_t p = synth_pick(SYNTH_X86);
		double vc = vcpus[synth_pick(NELEM(vcpus))];
		double gib, price;
		int a;
		bool t3xl = i == count / 2, gcp;

		for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
			number[f] = NAN;
			type[f] = NULL;
		}
		if (t3xl) {
			/* ec2's t3.xlarge, as the real catalog has it. */
			snprintf(name, sizeof(name), "t3.xlarge");
			snprintf(mt, sizeof(mt), "EC2Type_T3_xLarge");
			s = 3;
			vc = 4;
			st = 0;
			p = 0;
		} else {
			snprintf(name, sizeof(name), "%s.syn%06zu",
				 synth_series[s].tag, i);
			snprintf(mt, sizeof(mt), "SynType_%s_%06zu",
				 synth_series[s].tag, i);
			if (catalog_declare(cat, (size_t)f_mt, mt,
					    synth_series[s].parent) < 0)
				die("cannot declare a synthetic machine type");
		}
		if (synth_series[s].cpu >= 0)
			p = (size_t)synth_series[s].cpu;
		gib = vc * synth_series[s].gib_per_vcpu;
		a = synth_series[s].accel;
		gcp = strcmp(synth_series[s].provider, "gcp") == 0;
		type[f_prov] = synth_series[s].provider;
		type[f_mt] = mt;
		type[f_node_arch] = p >= SYNTH_X86 ? "arm64" : "x86_64";
		number[f_vc] = vc;
		number[f_mem] = gib * 1073741824.0;
		number[f_ecu] = synth_pick(3) ? NAN : vc * 3.5;
		number[f_acc] = 0;
		number[f_net] = (vc >= 32 ? 25e9 : 10e9);
		type[f_pmk] = synth_cpus[p].maker;
		type[f_uarch] = synth_cpus[p].uarch;
		type[f_cpu] = synth_cpus[p].name;
		type[f_st] = synth_storage[st];
		if (synth_storage[st] && st != 0)
			number[f_ss] = vc * 50 * 1073741824.0;
		price = vc * (p >= SYNTH_X86 ? 0.028 : 0.035) + gib * 0.0045;
		if (a >= 0) {
			double n = gpus[synth_pick(NELEM(gpus))];

			number[f_acc] = n;
			number[f_accm] = synth_accels[a].gib * 1073741824.0;
			type[f_acct] = "GPU";
			type[f_accmk] = synth_accels[a].maker;
			type[f_arch] = synth_accels[a].arch;
			type[f_accel] = synth_accels[a].name;
			price += n * synth_accels[a].usd_hour;
		}
		/* +-20 %; 1 % of types without any price. */
		price *= 0.8 + 0.4 * synth_unit();
		if (!t3xl && synth_pick(100) == 0)
			price = NAN;
		if (catalog_add(cat, synth_series[s].provider, name, number,
				type, NAN, err, sizeof(err)))
			die(err);
		synth_offers(cat, synth_series[s].provider, name, price, t3xl,
			     reg[gcp]);
	}
	if (catalog_alias(cat, (size_t)f_mt, "t3.xlarge", "EC2Type_T3_xLarge"))
		die("cannot declare the alias t3.xlarge");
	if (catalog_sort(cat))
		die("out of memory");
	return cat;
}

/* --- report --- */

static void bench_target_text(const struct bench_row *r, char *buf, size_t len)
{
	if (r->target > 0)
		snprintf(buf, len, "< %.0f ms", r->target / 1000);
	else
		snprintf(buf, len, "-");
}

static const char *bench_result(const struct bench_row *r)
{
	if (r->target <= 0)
		return "-";
	return r->median < r->target ? "PASS" : "FAIL";
}

/* The median over the target ("0.012"), "-" without one. */
static void bench_ratio_text(const struct bench_row *r, char *buf, size_t len)
{
	if (r->target > 0)
		snprintf(buf, len, "%.4f", r->median / r->target);
	else
		snprintf(buf, len, "-");
}

static void bench_table(FILE *out)
{
	char tgt[32], ratio[32];

	fprintf(out, "%-10s %7s  %-10s %-16s %6s %11s %11s %9s %8s %6s\n",
		"catalog", "types", "operation", "contract", "calls",
		"median us", "p90 us", "target", "/target", "result");
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];

		bench_target_text(r, tgt, sizeof(tgt));
		bench_ratio_text(r, ratio, sizeof(ratio));
		fprintf(out,
			"%-10s %7zu  %-10s %-16s %6zu %11.1f %11.1f %9s %8s "
			"%6s\n",
			r->catalog, r->types, r->operation, r->contract,
			r->reps, r->median, r->p90, tgt, ratio,
			bench_result(r));
	}
}

/* Each line of the synthetic catalog over the same line of the real one:
 * what 55 times the types and 90 times the offers cost. */
static void bench_scaling(FILE *out)
{
	fprintf(out, "%-10s %-16s %11s %11s %9s\n", "operation", "contract",
		"real us", "synth us", "synth/real");
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];

		if (strcmp(r->catalog, "real") != 0)
			continue;
		for (size_t k = 0; k < nrows; k++) {
			const struct bench_row *s = &rows[k];

			if (strcmp(s->catalog, "synthetic") != 0 ||
			    strcmp(s->operation, r->operation) != 0 ||
			    strcmp(s->contract, r->contract) != 0)
				continue;
			fprintf(out, "%-10s %-16s %11.1f %11.1f %9.1f\n",
				r->operation, r->contract, r->median, s->median,
				r->median > 0 ? s->median / r->median : 0);
		}
	}
}

struct bench_info {
	char date[64], machine[512];
	size_t real_types, real_regions, real_offers;
	size_t synth_types, synth_regions, synth_offers;
	double real_open_ms, synth_build_ms;
	struct bench_opts opt;
};

static void bench_machine(char *buf, size_t len)
{
	struct utsname u;
	char line[512], cpu[256] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(cpu, sizeof(cpu), "%s", colon + 2);
			cpu[strcspn(cpu, "\n")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	snprintf(buf, len, "%ld cores%s%s%s, Linux %s", n, *cpu ? " (" : "",
		 cpu, *cpu ? ")" : "", u.release);
}

static void bench_text(FILE *out, const struct bench_info *in)
{
	char what[512];

	fprintf(out, "cclfs benchmark: resolve (bench/resolve_bench.c)\n\n");
	fprintf(out, "date:        %s\n", in->date);
	fprintf(out, "machine:     %s\n", in->machine);
	fprintf(out, "cclfs:       %s\n", CCLFS_VERSION);
	fprintf(out,
		"catalogs:    real: %zu types (catalog_open + the local "
		"type), %zu regions, %zu offers,\n"
		"             opened in %.1f ms\n",
		in->real_types, in->real_regions, in->real_offers,
		in->real_open_ms);
	fprintf(out,
		"             synthetic: %zu types, %zu regions (%d per "
		"provider), %zu offers\n"
		"             (catalog_open_empty + catalog_add + "
		"catalog_add_offer + catalog_sort), built in %.1f ms\n",
		in->synth_types, in->synth_regions, SYNTH_REGIONS,
		in->synth_offers, in->synth_build_ms);
	fprintf(out,
		"environment: AWS_REGION, AWS_DEFAULT_REGION and AWS_PROFILE "
		"unset, AWS_CONFIG_FILE=/dev/null:\n"
		"             no configured region, so a contract without "
		"cluster_locale considers every region\n");
	fprintf(out,
		"timing:      in one process, clock_gettime(CLOCK_MONOTONIC) "
		"around each call, after %d untimed;\n"
		"             the lines of a catalog interleaved (one call of "
		"each per round); up to %zu calls\n"
		"             per line, stopping after %.1f s of its calls (at "
		"least %d; at least %d and none\n"
		"             untimed when one call takes over %.0f s); median "
		"and p90 (nearest rank)\n",
		WARMUP, in->opt.reps, in->opt.budget_s, MIN_REPS, MIN_REPS_SLOW,
		SLOW_US / 1e6);
	fprintf(out,
		"targets:     median of resolve < %.0f ms on the real catalog, "
		"< %.0f ms on the synthetic one;\n"
		"             candidates has none in one process (through the "
		"mount: below)\n\n",
		TARGET_REAL_US / 1000, TARGET_SYNTH_US / 1000);
	fprintf(out,
		"in one process (resolution_run, resolution_candidates):\n");
	bench_table(out);
	fprintf(out, "\nsynthetic over real (medians):\n");
	bench_scaling(out);
	fprintf(out, "\ncontracts (files written; every other file empty):\n");
	for (size_t i = 0; i < NRESOLVE; i++) {
		bench_describe(&resolve_contracts[i], what, sizeof(what));
		fprintf(out, "  resolve    %-16s %s\n",
			resolve_contracts[i].label, what);
	}
	for (size_t i = 0; i < NCANDIDATES; i++) {
		bench_describe(&candidates_contracts[i], what, sizeof(what));
		fprintf(out, "  candidates %-16s %s\n",
			candidates_contracts[i].label, what);
	}
	fprintf(out, "\noutcomes:\n");
	for (size_t i = 0; i < nrows; i++)
		fprintf(out, "  %-10s %-10s %-16s %s\n", rows[i].catalog,
			rows[i].operation, rows[i].contract, rows[i].outcome);
}

static void bench_csv(FILE *out, const struct bench_info *in)
{
	struct utsname u;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	fprintf(out, "date,nproc,kernel,cclfs_version,where,catalog,types,"
		     "operation,contract,calls,median_us,p90_us,target_us,"
		     "median_over_target,result\n");
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];

		fprintf(out,
			"%s,%ld,%s,%s,in-process,%s,%zu,%s,%s,%zu,%.1f,%.1f,",
			in->date, n, u.release, CCLFS_VERSION, r->catalog,
			r->types, r->operation, r->contract, r->reps, r->median,
			r->p90);
		if (r->target > 0)
			fprintf(out, "%.0f,%.4f", r->target,
				r->median / r->target);
		else
			fprintf(out, ",");
		fprintf(out, ",%s\n", bench_result(r));
	}
}

static void bench_write(const char *dir, const char *file,
			void (*fn)(FILE *, const struct bench_info *),
			const struct bench_info *in)
{
	char path[4096], msg[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	if (!f) {
		snprintf(msg, sizeof(msg), "%s: %s", path, strerror(errno));
		die(msg);
	}
	fn(f, in);
	if (fclose(f)) {
		snprintf(msg, sizeof(msg), "%s: %s", path, strerror(errno));
		die(msg);
	}
	fprintf(stderr, "written: %s\n", path);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: resolve_bench [--reps N] [--budget SECONDS] "
		"[--types N]\n"
		"                     [--catalog real|synthetic] [--only "
		"A,B] [OUTDIR]\n\n"
		"Time resolution_run and resolution_candidates in one "
		"process on the real\n"
		"catalog and on a synthetic one; print a table, and write "
		"OUTDIR/resolve.txt\n"
		"and OUTDIR/resolve.csv when OUTDIR is given.\n\n"
		"  --reps N          most timed calls per line (default %d)\n"
		"  --budget SECONDS  stop a line after this much time, once "
		"it has %d calls\n"
		"                    (default %.0f)\n"
		"  --types N         types in the synthetic catalog, each in "
		"%d regions\n"
		"                    (default %d)\n"
		"  --catalog NAME    time one catalog only (for profiling)\n"
		"  --only A,B        time these contracts only (for "
		"profiling)\n",
		DEFAULT_REPS, MIN_REPS, DEFAULT_BUDGET_S, SYNTH_REGIONS,
		SYNTH_TYPES);
}

static double parse_number(const char *opt, const char *s, double min)
{
	char *end;
	double v;

	errno = 0;
	v = s ? strtod(s, &end) : NAN;
	if (!s || errno || end == s || *end || !(v >= min)) {
		fprintf(stderr, "resolve_bench: %s needs a number >= %g\n", opt,
			min);
		exit(2);
	}
	return v;
}

/* No configured region for ec2: what the contracts without cluster_locale
 * mean must not depend on the environment of whoever runs the benchmark. */
static void bench_environment(void)
{
	static const char *const unset[] = {"AWS_REGION", "AWS_DEFAULT_REGION",
					    "AWS_PROFILE",
					    "AWS_DEFAULT_PROFILE"};

	for (size_t i = 0; i < NELEM(unset); i++)
		unsetenv(unset[i]);
	setenv("AWS_CONFIG_FILE", "/dev/null", 1);
}

/* The real catalog's size, as resolution serves it: types and regions of
 * every provider, and the candidates of the empty contract that name a
 * region. */
static void bench_real_size(struct resolution_env *env, struct bench_info *in)
{
	static const struct bench_contract all = {"all", {{0}}, false};
	const char *prov[16];
	size_t np = resolution_providers(env, prov, NELEM(prov)), lines;
	struct bench_values bv;
	char *text;

	for (size_t p = 0; p < np; p++) {
		for (size_t i = 0; resolution_provider_type(env, prov[p], i);
		     i++)
			in->real_types++;
		for (size_t i = 0; resolution_provider_region(env, prov[p], i);
		     i++)
			in->real_regions++;
	}
	bench_values_set(&bv, &all);
	text = resolution_candidates(env, bench_value, &bv);
	bench_count_lines(text, &lines, &in->real_offers);
	free(text);
	free(bv.v);
}

int main(int argc, char **argv)
{
	struct bench_info in = {
		.opt = {.reps = DEFAULT_REPS, .budget_s = DEFAULT_BUDGET_S}};
	struct config cfg = {0}; /* no cclfs.conf: built-in defaults */
	struct resolution_env *env;
	struct catalog *cat;
	const char *outdir = NULL;
	size_t synth = SYNTH_TYPES;
	char err[512];
	time_t now = time(NULL);
	double t0;

	for (int i = 1; i < argc && argv[i]; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--reps") == 0) {
			in.opt.reps = (size_t)parse_number(a, v, MIN_REPS);
			i++;
		} else if (strcmp(a, "--budget") == 0) {
			in.opt.budget_s = parse_number(a, v, 0);
			i++;
		} else if (strcmp(a, "--only") == 0 && v) {
			in.opt.only = v;
			i++;
		} else if (strcmp(a, "--catalog") == 0 && v &&
			   (strcmp(v, "real") == 0 ||
			    strcmp(v, "synthetic") == 0)) {
			in.opt.catalog = v;
			i++;
		} else if (strcmp(a, "--types") == 0) {
			synth = (size_t)parse_number(a, v, 2);
			i++;
		} else if (a[0] == '-' || outdir) {
			usage(stderr);
			return 2;
		} else {
			outdir = a;
		}
	}
	if (outdir && mkdir(outdir, 0777) && errno != EEXIST) {
		snprintf(err, sizeof(err), "%s: %s", outdir, strerror(errno));
		die(err);
	}
	strftime(in.date, sizeof(in.date), "%Y-%m-%d %H:%M:%S UTC",
		 gmtime(&now));
	bench_machine(in.machine, sizeof(in.machine));
	bench_environment();

	fprintf(stderr, "resolve_bench: real catalog\n");
	t0 = now_us();
	env = resolution_env_open(&cfg, provider_registry, err, sizeof(err));
	in.real_open_ms = (now_us() - t0) / 1000;
	if (!env)
		die(err);
	bench_real_size(env, &in);
	bench_all(env, "real", in.real_types, TARGET_REAL_US, &in.opt);
	resolution_env_close(env);

	fprintf(stderr,
		"resolve_bench: synthetic catalog of %zu types x %d regions\n",
		synth, SYNTH_REGIONS);
	t0 = now_us();
	cat = synth_catalog(synth);
	in.synth_build_ms = (now_us() - t0) / 1000;
	in.synth_types = catalog_count(cat);
	in.synth_offers = catalog_offer_count(cat);
	in.synth_regions = NELEM(synth_providers) * SYNTH_REGIONS;
	env = resolution_env_wrap(&cfg, cat);
	if (!env)
		die("out of memory");
	bench_all(env, "synthetic", in.synth_types, TARGET_SYNTH_US, &in.opt);
	resolution_env_close(env);

	bench_text(stdout, &in);
	if (outdir) {
		bench_write(outdir, "resolve.txt", bench_text, &in);
		bench_write(outdir, "resolve.csv", bench_csv, &in);
	}
	return 0;
}
