/* Compute's machine types and accelerator types read into the catalog's
 * terms (provider_catalog_type): names of the type hierarchy, bytes. */
#ifndef CCLFS_PROVIDERS_GCP_MACHINE_H
#define CCLFS_PROVIDERS_GCP_MACHINE_H

#include "providers/provider.h"

#include <cjson/cJSON.h>

#define GCP_MACHINE_NAME 64

/* An accelerator type as the catalog names it. */
struct gcp_accel_spec {
	char name[64];	       /* "NVIDIA_L4", else the API's name */
	char manufacturer[16]; /* "NVIDIA", or "" */
	char type[8];	       /* "GPU", or "" */
	char architecture[16]; /* "Ada", or "" */
	double memory_bytes;   /* per device, NAN when unknown */
};

/* One machine type; t's strings point at tables, or into the struct once
 * its accelerator is named (the array then no longer moves); t.name is set
 * when it is handed over. */
struct gcp_machine {
	struct provider_catalog_type t;
	struct gcp_accel_spec accel;
	char name[GCP_MACHINE_NAME];
	char accel_api[GCP_MACHINE_NAME]; /* "nvidia-l4", or "" */
};

/* Read an accelerator type's name ("nvidia-a100-80gb") and description
 * ("NVIDIA A100 80GB", NULL when unknown) into *s. */
void gcp_machine_accelerator(const char *name, const char *description,
			     struct gcp_accel_spec *s);

/* Fill x (zeroed) from a machineTypes item; its accelerator is named by
 * gcp_machine_name_accelerator once the accelerator types are known. */
void gcp_machine_fill(struct gcp_machine *x, const cJSON *item);
/* Name x's accelerator (it has one) with its accelerator type's
 * description, NULL when unknown. */
void gcp_machine_name_accelerator(struct gcp_machine *x,
				  const char *description);

/* A JSON object's string member, "" when it has none. */
const char *gcp_machine_text(const cJSON *o, const char *name);

#endif
