/* DescribeInstanceTypes items in the catalog's terms, by the rules of
 * catalog/data/SOURCES.md: the API's accelerator names and Graviton
 * families mapped through tables, and the API's known mistakes corrected
 * through a table (each correction becomes a note). */
#include "providers/ec2/ec2_types.h"

#include "providers/ec2/ec2_xml.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EC2_MIB 1048576.0
#define EC2_GIB 1073741824.0

/* An accelerator as the API names it, and its platform type ("" when the
 * hierarchy has no type for it: only the manufacturer is known). */
struct ec2_accel {
	const char *api;
	const char *platform;
	const char *manufacturer;
	const char *type;	  /* NULL: the kind of the API's block */
	const char *architecture; /* NULL: unknown, or from the Neuron core */
};

static const struct ec2_accel ec2_accels[] = {
	{"A100", "NVIDIA_A100", "NVIDIA", "GPU", "Ampere"},
	{"A10G", "NVIDIA_A10G", "NVIDIA", "GPU", "Ampere"},
	{"B200", "NVIDIA_B200", "NVIDIA", "GPU", "Blackwell"},
	{"B300", "NVIDIA_B300", "NVIDIA", "GPU", "Blackwell"},
	{"GB200", "NVIDIA_GB200", "NVIDIA", "GPU", "Blackwell"},
	{"H100", "NVIDIA_H100", "NVIDIA", "GPU", "Hopper"},
	{"H200", "NVIDIA_H200", "NVIDIA", "GPU", "Hopper"},
	{"K80", "NVIDIATesla_K80", "NVIDIA", "GPU", "Kepler"},
	{"L4", "NVIDIA_L4", "NVIDIA", "GPU", "Ada"},
	{"L40S", "NVIDIA_L40S", "NVIDIA", "GPU", "Ada"},
	{"M60", "NVIDIATesla_M60", "NVIDIA", "GPU", "Maxwell"},
	{"RTX PRO Server 6000", "NVIDIA_RTXPRO6000", "NVIDIA", "GPU",
	 "Blackwell"},
	{"T4", "NVIDIATesla_T4", "NVIDIA", "GPU", "Turing"},
	{"T4g", "NVIDIATesla_T4", "NVIDIA", "GPU", "Turing"},
	{"V100", "NVIDIATesla_V100", "NVIDIA", "GPU", "Volta"},
	{"Radeon Pro V520", "AMDRadeon_PRO_V520", "AMD", "GPU", "RDNA"},
	{"Gaudi", "HabanaGaudi", "Habana", "NPU", NULL},
	{"Gaudi HL-205", "HabanaGaudi", "Habana", "NPU", NULL},
	{"Inferentia", "AWSInferentia", "AWS", "NPU", NULL},
	{"Inferentia2", "AWSInferentia2", "AWS", "NPU", NULL},
	{"Trainium", "AWSTrainium", "AWS", "NPU", NULL},
	{"Trainium2", "AWSTrainium2", "AWS", "NPU", NULL},
	{"Qualcomm AI100", "QualcommCloudAI100", "Qualcomm", "NPU", NULL},
	/* FPGAs and video transcoders: only the maker has a type. */
	{"VU47P", "", "Xilinx", "FPGA", NULL},
	{"VU9P", "", "Xilinx", "FPGA", NULL},
	{"U30", "", "Xilinx", NULL, NULL},
};

/* The blocks of DescribeInstanceTypes that list accelerators, in the
 * order the rules take the first of (no type has two). */
static const struct {
	const char *info, *list, *type;
} ec2_blocks[] = {
	{"gpuInfo", "gpus", "GPU"},
	{"neuronInfo", "neuronDevices", "NPU"},
	{"inferenceAcceleratorInfo", "accelerators", "NPU"},
	{"fpgaInfo", "fpgas", "FPGA"},
	{"mediaAcceleratorInfo", "accelerators", NULL},
};

/* Graviton generations by family: a family named as one of these bases
 * plus letters (c7gn, im4gn, is4gen, c8gb) is of its base's generation. */
static const struct {
	const char *base, *processor;
} ec2_gravitons[] = {
	{"a1", "AWSGraviton1"},	  {"c6g", "AWSGraviton2"},
	{"m6g", "AWSGraviton2"},  {"r6g", "AWSGraviton2"},
	{"t4g", "AWSGraviton2"},  {"x2g", "AWSGraviton2"},
	{"g5g", "AWSGraviton2"},  {"i4g", "AWSGraviton2"},
	{"im4g", "AWSGraviton2"}, {"is4g", "AWSGraviton2"},
	{"c7g", "AWSGraviton3"},  {"m7g", "AWSGraviton3"},
	{"r7g", "AWSGraviton3"},  {"hpc7g", "AWSGraviton3"},
	{"c8g", "AWSGraviton4"},  {"m8g", "AWSGraviton4"},
	{"r8g", "AWSGraviton4"},  {"x8g", "AWSGraviton4"},
	{"i8g", "AWSGraviton4"},
};

/* What the API gets wrong, and what is true instead. A rule applies to a
 * type whose name starts with `family` (the whole name when it has a
 * dot), whose accelerator's API name is `api` (NULL: any) and whose
 * device count (count_was >= 0) or memory in MiB (mib_was > 0) is the
 * wrong one given. */
struct ec2_fix {
	const char *family, *api;
	double count_was, mib_was;
	const char *name_now; /* NULL: the name stays */
	double count_now;     /* < 0: the count stays */
	double gib_now;	      /* < 0: the memory stays */
	const char *why;
};

static const struct ec2_fix ec2_fixes[] = {
	{"p5.4xlarge", NULL, 0, -1, "H100", 1, 80,
	 "DescribeInstanceTypes gives it 0 GPUs; taken as 1 NVIDIA H100 of "
	 "80 GiB"},
	{"p5en.", "NVIDIA", -1, -1, "H200", -1, -1,
	 "DescribeInstanceTypes names its GPU just \"NVIDIA\"; taken as the "
	 "H200"},
	{"trn2", "Trainium2", -1, 524288, NULL, -1, 96,
	 "DescribeInstanceTypes gives each Trainium2 device 512 GiB; taken as "
	 "96 GiB, AWS's documented figure"},
};

void ec2_notes_add(struct ec2_notes *l, const char *fmt, ...)
{
	char buf[PROVIDER_MSG_MAX], *s;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return;
		l->v = v;
		l->cap = cap;
	}
	/* One sentence for many types saying the same. */
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], buf) == 0)
			return;
	s = strdup(buf);
	if (s)
		l->v[l->n++] = s;
}

void ec2_notes_free(struct ec2_notes *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* A number of a child element, NAN when absent or not a number. */
static double ec2_num(const xmlNode *n, const char *name)
{
	char buf[64], *end;
	double v;

	ec2_xml_text(n, name, buf, sizeof(buf));
	if (!*buf)
		return NAN;
	v = strtod(buf, &end);
	return *end ? NAN : v;
}

double ec2_types_network(const char *perf, bool *up_to)
{
	double k = 1, n;
	char *end;
	const char *p = perf;

	*up_to = false;
	if (strncmp(p, "Up to ", 6) == 0) {
		*up_to = true;
		p += 6;
	}
	n = strtod(p, &end);
	if (end == p)
		return NAN;
	/* "4 x 100 Gigabit": four cards of 100 each. */
	if (strncmp(end, " x ", 3) == 0) {
		k = n;
		p = end + 3;
		n = strtod(p, &end);
		if (end == p)
			return NAN;
	}
	if (strcmp(end, " Gigabit") == 0)
		return k * n * 1e9;
	if (strcmp(end, " Megabit") == 0)
		return k * n * 1e6;
	return NAN;
}

static void ec2_network(const xmlNode *item, struct provider_catalog_type *t)
{
	const xmlNode *net = ec2_xml_child(item, "networkInfo");
	const xmlNode *cards = ec2_xml_child(net, "networkCards");
	char perf[96];
	double sum = 0;
	bool any = false;

	ec2_xml_text(net, "networkPerformance", perf, sizeof(perf));
	t->network_bits_per_s = ec2_types_network(perf, &t->network_up_to);
	if (!isnan(t->network_bits_per_s))
		return;
	/* A word ("Low to Moderate", "High"): the cards' peak, a ceiling. */
	for (const xmlNode *c = cards ? cards->children : NULL; c;
	     c = c->next) {
		double v = ec2_num(c, "peakBandwidthInGbps");

		if (ec2_xml_is(c, "item") && !isnan(v)) {
			sum += v;
			any = true;
		}
	}
	t->network_bits_per_s = any ? sum * 1e9 : NAN;
	t->network_up_to = any;
}

static void ec2_storage(const xmlNode *item, struct provider_catalog_type *t)
{
	const xmlNode *st = ec2_xml_child(item, "instanceStorageInfo");
	const xmlNode *disks = ec2_xml_child(st, "disks");
	char nvme[32], type[16];
	bool hdd = false;

	if (!st) {
		t->storage_type = "StorageType_EC2_EBSOnly";
		t->storage_bytes = NAN;
		return;
	}
	for (const xmlNode *d = disks ? disks->children : NULL; d;
	     d = d->next) {
		ec2_xml_text(d, "type", type, sizeof(type));
		hdd |= strcmp(type, "hdd") == 0;
	}
	ec2_xml_text(st, "nvmeSupport", nvme, sizeof(nvme));
	t->storage_type = hdd ? "StorageType_HDD"
			  : strcmp(nvme, "required") == 0 ||
					  strcmp(nvme, "supported") == 0
				  ? "StorageType_EC2_NVMeSSD"
				  : "StorageType_SSD";
	/* Binary, as the catalog's rows (TotalSizeInGB x 2^30). */
	t->storage_bytes = ec2_num(st, "totalSizeInGB") * EC2_GIB;
}

static void ec2_processor(const xmlNode *item, struct ec2_type *e)
{
	const xmlNode *pi = ec2_xml_child(item, "processorInfo");
	const xmlNode *archs = ec2_xml_child(pi, "supportedArchitectures");
	size_t fl = strcspn(e->name, ".");

	for (const xmlNode *a = archs ? archs->children : NULL; a;
	     a = a->next) {
		char v[32];

		ec2_xml_text(a, NULL, v, sizeof(v));
		if (strncmp(v, "arm64", 5) == 0)
			e->t.architecture = "arm64";
		else if (strncmp(v, "x86_64", 6) == 0 && !e->t.architecture)
			e->t.architecture = "x86_64";
	}
	ec2_xml_text(pi, "manufacturer", e->processor_manufacturer,
		     sizeof(e->processor_manufacturer));
	if (strcmp(e->processor_manufacturer, "AWS") != 0)
		return;
	for (size_t i = 0; i < sizeof(ec2_gravitons) / sizeof(ec2_gravitons[0]);
	     i++) {
		size_t bl = strlen(ec2_gravitons[i].base);
		bool letters = true;

		if (fl < bl || strncmp(e->name, ec2_gravitons[i].base, bl) != 0)
			continue;
		for (size_t k = bl; k < fl; k++)
			letters &= e->name[k] >= 'a' && e->name[k] <= 'z';
		if (letters)
			e->t.processor = ec2_gravitons[i].processor;
	}
}

static const struct ec2_accel *ec2_accel_find(const char *api)
{
	for (size_t i = 0; i < sizeof(ec2_accels) / sizeof(ec2_accels[0]); i++)
		if (strcmp(ec2_accels[i].api, api) == 0)
			return &ec2_accels[i];
	return NULL;
}

/* The accelerator as the API gives it, before the tables. */
struct ec2_raw_accel {
	char name[64], maker[64];
	double count, mib;
	int core_version; /* Neuron; 0 unknown */
	const char *kind; /* the block's type */
};

static const xmlNode *ec2_accel_item(const xmlNode *item,
				     struct ec2_raw_accel *r)
{
	for (size_t i = 0; i < sizeof(ec2_blocks) / sizeof(ec2_blocks[0]);
	     i++) {
		const xmlNode *info = ec2_xml_child(item, ec2_blocks[i].info);
		const xmlNode *list = ec2_xml_child(info, ec2_blocks[i].list);
		const xmlNode *dev = ec2_xml_child(list, "item");

		if (dev) {
			r->kind = ec2_blocks[i].type;
			return dev;
		}
	}
	return NULL;
}

/* Whether a fix applies to the type and its accelerator. */
static bool ec2_fix_applies(const struct ec2_fix *f, const char *type,
			    const struct ec2_raw_accel *r)
{
	size_t fl = strlen(f->family);
	/* "p5.4xlarge" is one type, "p5en." or "trn2" a family. */
	bool exact = strchr(f->family, '.') && f->family[fl - 1] != '.';

	if (exact ? strcmp(type, f->family) != 0
		  : strncmp(type, f->family, fl) != 0)
		return false;
	if (f->api && strcmp(r->name, f->api) != 0)
		return false;
	if (f->count_was >= 0 && r->count != f->count_was)
		return false;
	return !(f->mib_was > 0 && r->mib != f->mib_was);
}

/* Whole decimal GB given in MiB (24 GB as 22888 MiB): the published size,
 * read as that many GiB as the catalog's rows are; 0 when it is not. */
static double ec2_decimal_gb(double mib)
{
	double gb = round(mib * EC2_MIB / 1e9);

	if (gb < 1 || fmod(mib, 1024) == 0 || floor(gb * 1e9 / EC2_MIB) != mib)
		return 0;
	return gb;
}

static void ec2_accelerator(const xmlNode *item, struct ec2_type *e,
			    struct ec2_notes *notes)
{
	struct ec2_raw_accel r = {0};
	const xmlNode *dev = ec2_accel_item(item, &r);
	const struct ec2_accel *a;
	double partition, gb;

	double version;

	e->t.accelerator_count = 0;
	e->t.accelerator_memory_bytes = NAN;
	ec2_xml_text(dev, "name", r.name, sizeof(r.name));
	ec2_xml_text(dev, "manufacturer", r.maker, sizeof(r.maker));
	/* No block at all is no device: a fix below may know better. */
	r.count = dev ? ec2_num(dev, "count") : 0;
	r.mib = ec2_num(ec2_xml_child(dev, "memoryInfo"), "sizeInMiB");
	version = ec2_num(ec2_xml_child(dev, "coreInfo"), "version");
	r.core_version = version > 0 && version < 100 ? (int)version : 0;
	partition = ec2_num(dev, "gpuPartitionSize");
	/* A fraction of one GPU (g6f): one device, the slice's memory. */
	if (r.count == 0 && partition > 0 && partition < 1 &&
	    ec2_num(dev, "logicalGpuCount") >= 1)
		r.count = 1;
	for (size_t i = 0; i < sizeof(ec2_fixes) / sizeof(ec2_fixes[0]); i++) {
		const struct ec2_fix *f = &ec2_fixes[i];

		if (!ec2_fix_applies(f, e->name, &r))
			continue;
		if (f->name_now)
			snprintf(r.name, sizeof(r.name), "%s", f->name_now);
		if (!r.kind)
			r.kind = "GPU";
		if (f->count_now >= 0)
			r.count = f->count_now;
		if (f->gib_now >= 0)
			r.mib = f->gib_now * 1024;
		ec2_notes_add(notes, "%s: %s.", e->name, f->why);
	}
	if (!(r.count > 0))
		return;
	gb = isnan(r.mib) ? 0 : ec2_decimal_gb(r.mib);
	if (gb > 0) {
		ec2_notes_add(notes,
			      "%s memory given as %.0f MiB (%.0f decimal GB) "
			      "was taken as %.0f GiB, as the catalog's rows "
			      "are.",
			      r.name, r.mib, gb, gb);
		r.mib = gb * 1024;
	}
	a = ec2_accel_find(r.name);
	e->t.accelerator_count = isnan(r.count) ? NAN : r.count;
	e->t.accelerator_memory_bytes = r.mib * EC2_MIB;
	e->t.accelerator_type = a && a->type ? a->type : r.kind;
	snprintf(e->accelerator, sizeof(e->accelerator), "%s",
		 a ? a->platform : r.name);
	snprintf(e->accelerator_manufacturer,
		 sizeof(e->accelerator_manufacturer), "%s",
		 a ? a->manufacturer : r.maker);
	if (a && a->architecture)
		snprintf(e->accelerator_architecture,
			 sizeof(e->accelerator_architecture), "%s",
			 a->architecture);
	else if (r.core_version > 0)
		snprintf(e->accelerator_architecture,
			 sizeof(e->accelerator_architecture), "NeuronCore_v%d",
			 r.core_version);
}

/* t's strings at the struct's own buffers (again after the struct
 * moved). */
static void ec2_type_point(struct ec2_type *e)
{
	e->t.name = e->name;
	e->t.accelerator = *e->accelerator ? e->accelerator : NULL;
	e->t.accelerator_manufacturer = *e->accelerator_manufacturer
						? e->accelerator_manufacturer
						: NULL;
	e->t.accelerator_architecture = *e->accelerator_architecture
						? e->accelerator_architecture
						: NULL;
	e->t.processor_manufacturer =
		*e->processor_manufacturer ? e->processor_manufacturer : NULL;
}

static void ec2_type_read(const xmlNode *item, struct ec2_type *e,
			  struct ec2_notes *notes)
{
	memset(e, 0, sizeof(*e));
	ec2_xml_text(item, "instanceType", e->name, sizeof(e->name));
	e->t.name = e->name;
	e->t.vcpus = ec2_num(ec2_xml_child(item, "vCpuInfo"), "defaultVCpus");
	e->t.memory_bytes =
		ec2_num(ec2_xml_child(item, "memoryInfo"), "sizeInMiB") *
		EC2_MIB;
	ec2_processor(item, e);
	ec2_storage(item, &e->t);
	ec2_network(item, &e->t);
	ec2_accelerator(item, e, notes);
	ec2_type_point(e);
}

int ec2_types_item(const xmlNode *item, void *ctx)
{
	struct ec2_types_page *pg = ctx;
	struct ec2_types *out = pg->types;

	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 256;
		struct ec2_type *v = realloc(out->v, cap * sizeof(*v));

		if (!v)
			return -1;
		out->v = v;
		out->cap = cap;
	}
	ec2_type_read(item, &out->v[out->n], pg->notes);
	if (out->v[out->n].name[0])
		out->n++;
	return 0;
}

static int ec2_type_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ec2_type *)a)->name,
		      ((const struct ec2_type *)b)->name);
}

void ec2_types_sort(struct ec2_types *l)
{
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), ec2_type_cmp);
	/* The strings point into the elements, which moved. */
	for (size_t i = 0; i < l->n; i++)
		ec2_type_point(&l->v[i]);
}

const struct ec2_type *ec2_types_find(const struct ec2_types *l,
				      const char *name)
{
	struct ec2_type key = {0};

	if (!l->n)
		return NULL;
	snprintf(key.name, sizeof(key.name), "%s", name);
	return bsearch(&key, l->v, l->n, sizeof(*l->v), ec2_type_cmp);
}

void ec2_types_free(struct ec2_types *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}
