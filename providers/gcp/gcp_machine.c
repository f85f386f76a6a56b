/* Compute's machine types and accelerator types in the catalog's terms: the
 * hierarchy's names of GPUs (with their architecture and memory), what the
 * API does not say of a series (its processor's maker), quantities in
 * bytes. */
#include "providers/gcp/gcp_machine.h"

#include "providers/gcp/gcp_billing.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* What the catalog's hierarchy knows of a series the API does not say. */
static const struct {
	const char *series;
	const char *processor_manufacturer;
	const char *architecture; /* when the API gives none */
} gcp_series_facts[] = {
	{"a2", "Intel", "x86_64"}, {"a3", "Intel", "x86_64"},
	{"a4x", NULL, "arm64"},	   {"c2", "Intel", "x86_64"},
	{"c2d", "AMD", "x86_64"},  {"c3", "Intel", "x86_64"},
	{"c3d", "AMD", "x86_64"},  {"c4", "Intel", "x86_64"},
	{"c4a", NULL, "arm64"},	   {"c4d", "AMD", "x86_64"},
	{"g2", "Intel", "x86_64"}, {"h3", "Intel", "x86_64"},
	{"h4d", "AMD", "x86_64"},  {"m1", "Intel", "x86_64"},
	{"m2", "Intel", "x86_64"}, {"m3", "Intel", "x86_64"},
	{"n1", "Intel", "x86_64"}, {"n2", "Intel", "x86_64"},
	{"n2d", "AMD", "x86_64"},  {"n4", "Intel", "x86_64"},
	{"n4a", NULL, "arm64"},	   {"n4d", "AMD", "x86_64"},
	{"t2a", NULL, "arm64"},	   {"t2d", "AMD", "x86_64"},
	{"z3", "Intel", "x86_64"},
};

/* GPU models: the hierarchy's architecture and the memory of one device
 * when the API's names do not state it. */
static const struct {
	const char *model;
	const char *architecture;
	double memory_gib; /* 0: unknown */
} gcp_gpu_models[] = {
	{"A100", "Ampere", 40},	   {"B200", "Blackwell", 0},
	{"GB200", "Blackwell", 0}, {"H100", "Hopper", 80},
	{"H200", "Hopper", 141},   {"K80", "Kepler", 12},
	{"L4", "Ada", 24},	   {"P100", "Pascal", 16},
	{"P4", "Pascal", 8},	   {"RTXPRO6000", "Blackwell", 96},
	{"T4", "Turing", 16},	   {"V100", "Volta", 16},
};

/* The API's architecture words. */
static const struct {
	const char *api, *catalog;
} gcp_architectures[] = {{"X86_64", "x86_64"}, {"ARM64", "arm64"}};

void gcp_machine_accelerator(const char *name, const char *description,
			     struct gcp_accel_spec *s)
{
	char key[GCP_BILLING_KEY_MAX], model[GCP_BILLING_KEY_MAX];
	double mem = 0, dmem = 0;

	memset(s, 0, sizeof(*s));
	s->memory_bytes = NAN;
	gcp_billing_gpu_key(name, key, sizeof(key), model, sizeof(model), &mem);
	if (description)
		gcp_billing_gpu_key(description, key, sizeof(key), NULL, 0,
				    &dmem);
	if (strncmp(name, "nvidia-", 7) != 0 || !*model) {
		snprintf(s->name, sizeof(s->name), "%s", name);
		return;
	}
	snprintf(s->name, sizeof(s->name), "NVIDIA_%.48s", model);
	snprintf(s->manufacturer, sizeof(s->manufacturer), "NVIDIA");
	snprintf(s->type, sizeof(s->type), "GPU");
	for (size_t i = 0; i < sizeof(gcp_gpu_models) / sizeof(*gcp_gpu_models);
	     i++)
		if (strcmp(model, gcp_gpu_models[i].model) == 0) {
			snprintf(s->architecture, sizeof(s->architecture), "%s",
				 gcp_gpu_models[i].architecture);
			if (!mem)
				mem = gcp_gpu_models[i].memory_gib;
		}
	if (dmem > 0)
		mem = dmem;
	if (mem > 0)
		s->memory_bytes = mem * 1024 * 1024 * 1024;
}

static double gcp_machine_number(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *gcp_machine_text(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : "";
}

void gcp_machine_fill(struct gcp_machine *x, const cJSON *item)
{
	const cJSON *acc = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(item, "accelerators"), 0);
	const char *arch = gcp_machine_text(item, "architecture");
	char series[GCP_BILLING_KEY_MAX];

	snprintf(x->name, sizeof(x->name), "%s",
		 gcp_machine_text(item, "name"));
	x->t.vcpus = gcp_machine_number(item, "guestCpus");
	x->t.memory_bytes = gcp_machine_number(item, "memoryMb") * 1024 * 1024;
	x->t.accelerator_count = 0;
	x->t.accelerator_memory_bytes = NAN;
	x->t.storage_bytes = NAN;
	x->t.network_bits_per_s = NAN;
	for (size_t i = 0;
	     i < sizeof(gcp_architectures) / sizeof(*gcp_architectures); i++)
		if (strcmp(arch, gcp_architectures[i].api) == 0)
			x->t.architecture = gcp_architectures[i].catalog;
	gcp_billing_series(x->name, series, sizeof(series));
	for (size_t i = 0;
	     i < sizeof(gcp_series_facts) / sizeof(*gcp_series_facts); i++)
		if (strcmp(series, gcp_series_facts[i].series) == 0) {
			x->t.processor_manufacturer =
				gcp_series_facts[i].processor_manufacturer;
			if (!x->t.architecture)
				x->t.architecture =
					gcp_series_facts[i].architecture;
		}
	if (acc) {
		snprintf(x->accel_api, sizeof(x->accel_api), "%s",
			 gcp_machine_text(acc, "guestAcceleratorType"));
		x->t.accelerator_count =
			gcp_machine_number(acc, "guestAcceleratorCount");
	}
}

void gcp_machine_name_accelerator(struct gcp_machine *x,
				  const char *description)
{
	gcp_machine_accelerator(x->accel_api, description, &x->accel);
	x->t.accelerator = x->accel.name;
	x->t.accelerator_manufacturer =
		*x->accel.manufacturer ? x->accel.manufacturer : NULL;
	x->t.accelerator_type = *x->accel.type ? x->accel.type : NULL;
	x->t.accelerator_architecture =
		*x->accel.architecture ? x->accel.architecture : NULL;
	x->t.accelerator_memory_bytes = x->accel.memory_bytes;
}
