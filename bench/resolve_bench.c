/* bench/resolve_bench.c: how long resolution takes inside the daemon. Times
 * resolution_run and resolution_candidates in one process on the real
 * catalog and on a synthetic one of 100,000 types (median and p90). */
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
 * the real catalog, < 50 ms at 100k types. candidates has none. */
#define TARGET_REAL_US	 1000.0
#define TARGET_SYNTH_US	 50000.0
#define SYNTH_TYPES	 100000
#define DEFAULT_REPS	 2000
#define DEFAULT_BUDGET_S 3.0
#define MIN_REPS	 11
#define WARMUP		 3
#define MAX_SET		 8
#define MAX_LINES	 16
#define NELEM(a)	 (sizeof(a) / sizeof((a)[0]))

/* A contract: the files written, as "path" = "value"; the rest default. */
struct bench_contract {
	const char *label;
	bool fails; /* resolution must fail (for resolve) */
	const char *set[MAX_SET][2];
};

static const struct bench_contract resolve_contracts[] = {
	{"unique", false, {{"node_machinetype", "t3.xlarge"}}},
	{"cheapest",
	 false,
	 {{"accelerator_count", "just 4"},
	  {"accelerator_architecture", "Ampere"},
	  {"node_memory_size", "atmost 256G"},
	  {"config/resolve_policy", "cheapest"}}},
	{"none", true, {{"node_memory_size", "atleast 100T"}}},
	{"manager-workers",
	 false,
	 {{"cluster_type", "ManagerWorkers"},
	  {"config/resolve_policy", "cheapest"},
	  {"manager/node_provider", "ec2"},
	  {"manager/node_vcpus_count", "just 2"},
	  {"manager/node_memory_size", "atleast 4G"},
	  {"worker/accelerator", "NVIDIA_L4"},
	  {"worker/accelerator_count", "atleast 1"}}},
};

static const struct bench_contract candidates_contracts[] = {
	{"broad", false, {{"accelerator_count", "atleast 1"}}},
	{"empty", false, {{NULL, NULL}}},
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

/* "path = value; path = value", or "(nothing written: every type)". */
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
		snprintf(buf, len, "(nothing written: every type)");
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
	const char *catalog; /* "real", "synthetic" */
	size_t types;
	const char *operation; /* "resolve", "candidates" */
	const char *contract;
	size_t reps;
	double median, p90; /* microseconds */
	double target;	    /* microseconds; 0 = none */
	char outcome[320];
};

static struct bench_row rows[MAX_LINES];
static size_t nrows;

struct bench_opts {
	size_t reps;
	double budget_s;
};

/* The text of `resolution` on one line: "node ec2 t3.xlarge 0.1664". */
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

static void bench_case(struct resolution_env *env, const char *catalog,
		       size_t types, enum bench_op op,
		       const struct bench_contract *c, double target,
		       const struct bench_opts *opt)
{
	struct bench_row *r;
	struct bench_values bv;
	char why[4096], msg[4400];
	char *text = NULL;
	double *sample, spent = 0;
	int rc;

	if (nrows == MAX_LINES)
		die("too many lines for the table");
	r = &rows[nrows++];
	bench_values_set(&bv, c);
	*r = (struct bench_row){
		.catalog = catalog,
		.types = types,
		.operation = op == OP_RESOLVE ? "resolve" : "candidates",
		.contract = c->label,
		.target = target,
	};

	/* Check the outcome once: the numbers must measure what the label
	 * says. */
	bench_once(env, op, &bv, &rc, &text, why, sizeof(why));
	if (op == OP_CANDIDATES) {
		size_t lines = 0;

		for (const char *p = text; p && *p; p++)
			lines += *p == '\n';
		snprintf(r->outcome, sizeof(r->outcome),
			 "%zu types listed, %zu bytes", lines ? lines - 1 : 0,
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

	for (int i = 1; i < WARMUP; i++)
		bench_once(env, op, &bv, &rc, NULL, why, sizeof(why));
	sample = malloc(opt->reps * sizeof(*sample));
	if (!sample)
		die("out of memory");
	while (r->reps < opt->reps &&
	       (r->reps < MIN_REPS || spent < opt->budget_s * 1e6)) {
		sample[r->reps] =
			bench_once(env, op, &bv, &rc, NULL, why, sizeof(why));
		spent += sample[r->reps++];
	}
	qsort(sample, r->reps, sizeof(*sample), cmp_double);
	r->median =
		r->reps % 2
			? sample[r->reps / 2]
			: (sample[r->reps / 2 - 1] + sample[r->reps / 2]) / 2;
	/* Nearest rank. */
	r->p90 = sample[(size_t)ceil(0.9 * (double)r->reps) - 1];
	free(sample);
	free(bv.v);
	fprintf(stderr, "  %-9s %-10s %-15s %6zu calls, median %.1f us\n",
		catalog, r->operation, r->contract, r->reps, r->median);
}

static void bench_all(struct resolution_env *env, const char *catalog,
		      size_t types, double target, const struct bench_opts *opt)
{
	for (size_t i = 0; i < NRESOLVE; i++)
		bench_case(env, catalog, types, OP_RESOLVE,
			   &resolve_contracts[i], target, opt);
	for (size_t i = 0; i < NCANDIDATES; i++)
		bench_case(env, catalog, types, OP_CANDIDATES,
			   &candidates_contracts[i], 0, opt);
}

/* --- the synthetic catalog --- */

/* Machine-type series the synthetic types belong to (real parents in the
 * hierarchy), with what their types look like. */
static const struct {
	const char *parent, *provider, *locale, *tag;
	bool gpu;
	double gib_per_vcpu;
} synth_series[] = {
	{"EC2Type_M5", "ec2", "EC2Region_USEast1", "m5", false, 4},
	{"EC2Type_C5", "ec2", "EC2Region_USEast1", "c5", false, 2},
	{"EC2Type_R5", "ec2", "EC2Region_USEast1", "r5", false, 8},
	{"EC2Type_T3", "ec2", "EC2Region_USEast1", "t3", false, 4},
	{"EC2Type_G5", "ec2", "EC2Region_USEast1", "g5", true, 4},
	{"EC2Type_G6", "ec2", "EC2Region_USEast1", "g6", true, 4},
	{"EC2Type_P4D", "ec2", "EC2Region_USEast1", "p4d", true, 8},
	{"GCPType_N2", "gcp", "GCPRegion_USCentral1", "n2", false, 4},
	{"GCPType_C2D", "gcp", "GCPRegion_USCentral1", "c2d", false, 2},
	{"GCPType_M2", "gcp", "GCPRegion_USCentral1", "m2", false, 16},
	{"GCPType_G2", "gcp", "GCPRegion_USCentral1", "g2", true, 4},
	{"GCPType_A2", "gcp", "GCPRegion_USCentral1", "a2", true, 8},
};

/* Accelerators, from the real catalog's names, with their architecture. */
static const struct {
	const char *name, *maker, *arch;
	double gib, usd_hour;
} synth_accels[] = {
	{"NVIDIA_A10G", "NVIDIA", "Ampere", 24, 1.0},
	{"NVIDIA_L4", "NVIDIA", "Ada", 24, 0.7},
	{"NVIDIA_A100", "NVIDIA", "Ampere", 40, 3.0},
	{"NVIDIA_A100", "NVIDIA", "Ampere", 80, 4.0},
	{"NVIDIATesla_T4", "NVIDIA", "Turing", 16, 0.35},
	{"NVIDIATesla_V100", "NVIDIA", "Volta", 16, 2.5},
	{"AMDRadeon_PRO_V520", "AMD", "RDNA", 8, 0.4},
};

static const struct {
	const char *maker, *uarch, *name;
} synth_cpus[] = {
	{"Intel", "IceLake", "IntelXeon_8375C"},
	{"Intel", "CascadeLake", "IntelXeon_8280L"},
	{"AMD", "Zen", "AMDEPYC_7R13"},
	{"AWS", NULL, "AWSGraviton2"},
};

static const char *const synth_storage[] = {
	"StorageType_EC2_EBSOnly", "StorageType_EC2_NVMeSSD", "StorageType_SSD",
	"StorageType_HDD", NULL};

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

static void synth_field(const char *name, int *out)
{
	*out = assumption_field_find(name);
	if (*out < 0)
		die("unknown assumption field");
}

/*
 * `count` types: one is ec2's real t3.xlarge (so that the unique contract
 * is the same on both catalogs), the others are spread over real series,
 * each with a machine type of its own declared under its series (as every
 * real type has), with real accelerator, processor and storage names.
 */
static struct catalog *synth_catalog(size_t count)
{
	static const double vcpus[] = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128};
	static const double gpus[] = {1, 2, 4, 8};
	int f_prov, f_loc, f_mt, f_mem, f_ecu, f_vc, f_acc, f_accm, f_acct,
		f_accmk, f_arch, f_accel, f_pmk, f_uarch, f_cpu, f_st, f_ss,
		f_net;
	char err[256], name[64], mt[64];
	struct catalog *cat = catalog_open_empty(err, sizeof(err));
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS];

	if (!cat)
		die(err);
	/* Undeclared machine types would be roots; declaring them under
	 * their series first keeps the hierarchy as deep as the real one. */
	synth_field("node_provider", &f_prov);
	synth_field("cluster_locale", &f_loc);
	synth_field("node_machinetype", &f_mt);
	synth_field("node_memory_size", &f_mem);
	synth_field("node_ecu_count", &f_ecu);
	synth_field("node_vcpus_count", &f_vc);
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
		size_t a = synth_pick(NELEM(synth_accels));
		size_t p = synth_pick(NELEM(synth_cpus));
		size_t st = synth_pick(NELEM(synth_storage));
		double vc = vcpus[synth_pick(NELEM(vcpus))];
		double gib = vc * synth_series[s].gib_per_vcpu;
		double price;

		for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
			number[f] = NAN;
			type[f] = NULL;
		}
		if (i == count / 2) {
			/* ec2's t3.xlarge, as the real catalog has it. */
			snprintf(name, sizeof(name), "t3.xlarge");
			snprintf(mt, sizeof(mt), "EC2Type_T3_xLarge");
			s = 3;
			vc = 4;
			gib = 16;
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
		type[f_prov] = synth_series[s].provider;
		type[f_loc] = synth_series[s].locale;
		type[f_mt] = mt;
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
		price = vc * 0.035 + gib * 0.0045;
		if (synth_series[s].gpu) {
			double n = gpus[synth_pick(NELEM(gpus))];

			number[f_acc] = n;
			number[f_accm] = synth_accels[a].gib * 1073741824.0;
			type[f_acct] = "GPU";
			type[f_accmk] = synth_accels[a].maker;
			type[f_arch] = synth_accels[a].arch;
			type[f_accel] = synth_accels[a].name;
			price += n * synth_accels[a].usd_hour;
		}
		/* +-20 %, to 4 decimals; 1 % of types without a price. */
		price *= 0.8 + 0.4 * (double)synth_pick(10001) / 10000;
		price = round(price * 10000) / 10000;
		if (i == count / 2)
			price = 0.1664;
		else if (synth_pick(100) == 0)
			price = NAN;
		if (catalog_add(cat, synth_series[s].provider, name, number,
				type, price, err, sizeof(err)))
			die(err);
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

static void bench_table(FILE *out)
{
	char tgt[32];

	fprintf(out, "%-10s %7s  %-10s %-16s %6s %11s %11s %9s %6s\n",
		"catalog", "types", "operation", "contract", "calls",
		"median us", "p90 us", "target", "result");
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];

		bench_target_text(r, tgt, sizeof(tgt));
		fprintf(out,
			"%-10s %7zu  %-10s %-16s %6zu %11.1f %11.1f %9s %6s\n",
			r->catalog, r->types, r->operation, r->contract,
			r->reps, r->median, r->p90, tgt, bench_result(r));
	}
}

struct bench_info {
	char date[64], machine[512];
	size_t real_types, synth_types;
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
		"type), opened in %.1f ms\n",
		in->real_types, in->real_open_ms);
	fprintf(out,
		"             synthetic: %zu types (catalog_open_empty + "
		"catalog_add + catalog_sort), built in %.1f ms\n",
		in->synth_types, in->synth_build_ms);
	fprintf(out,
		"timing:      in one process, clock_gettime(CLOCK_MONOTONIC) "
		"around each call, after %d untimed;\n"
		"             up to %zu calls per line, stopping after %.1f s "
		"(at least %d); median and p90 (nearest rank)\n",
		WARMUP, in->opt.reps, in->opt.budget_s, MIN_REPS);
	fprintf(out,
		"targets:     median of resolve < %.0f ms on the real catalog, "
		"< %.0f ms on the synthetic one;\n"
		"             candidates has none (reported only)\n\n",
		TARGET_REAL_US / 1000, TARGET_SYNTH_US / 1000);
	fprintf(out,
		"in one process (resolution_run, resolution_candidates):\n");
	bench_table(out);
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
		     "result\n");
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];

		fprintf(out,
			"%s,%ld,%s,%s,in-process,%s,%zu,%s,%s,%zu,%.1f,%.1f,",
			in->date, n, u.release, CCLFS_VERSION, r->catalog,
			r->types, r->operation, r->contract, r->reps, r->median,
			r->p90);
		if (r->target > 0)
			fprintf(out, "%.0f", r->target);
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
		"[--types N] [OUTDIR]\n\n"
		"Time resolution_run and resolution_candidates in one "
		"process on the real\n"
		"catalog and on a synthetic one; print a table, and write "
		"OUTDIR/resolve.txt\n"
		"and OUTDIR/resolve.csv when OUTDIR is given.\n\n"
		"  --reps N          most timed calls per line (default %d)\n"
		"  --budget SECONDS  stop a line after this much time, once "
		"it has %d calls\n"
		"                    (default %.0f)\n"
		"  --types N         types in the synthetic catalog "
		"(default %d)\n",
		DEFAULT_REPS, MIN_REPS, DEFAULT_BUDGET_S, SYNTH_TYPES);
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

int main(int argc, char **argv)
{
	struct bench_info in = {.opt = {DEFAULT_REPS, DEFAULT_BUDGET_S}};
	struct config cfg = {0}; /* no cclfs.conf: built-in defaults */
	struct resolution_env *env;
	struct catalog *cat;
	const char *outdir = NULL;
	size_t synth = SYNTH_TYPES;
	char err[512];
	time_t now = time(NULL);
	double t0;

	for (int i = 1; i < argc; i++) {
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

	fprintf(stderr, "resolve_bench: real catalog\n");
	t0 = now_us();
	env = resolution_env_open(&cfg, provider_registry, err, sizeof(err));
	in.real_open_ms = (now_us() - t0) / 1000;
	if (!env)
		die(err);
	/* The number of types: what an empty contract lists. */
	{
		static const struct bench_contract all = {"all", false, {{0}}};
		struct bench_values bv;
		char *text;

		bench_values_set(&bv, &all);
		text = resolution_candidates(env, bench_value, &bv);
		for (const char *p = text; p && *p; p++)
			in.real_types += *p == '\n';
		in.real_types -= in.real_types ? 1 : 0;
		free(text);
		free(bv.v);
	}
	bench_all(env, "real", in.real_types, TARGET_REAL_US, &in.opt);
	resolution_env_close(env);

	fprintf(stderr, "resolve_bench: synthetic catalog of %zu types\n",
		synth);
	t0 = now_us();
	cat = synth_catalog(synth);
	in.synth_build_ms = (now_us() - t0) / 1000;
	in.synth_types = catalog_count(cat);
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
