/* Compute Engine prices from the Cloud Billing Catalog's SKUs: which SKU
 * prices what (a series' vCPU or GiB of RAM, a GPU, a whole shared-core VM),
 * the rates by region, and a machine type's hourly price built from them. */
#ifndef CCLFS_PROVIDERS_GCP_BILLING_H
#define CCLFS_PROVIDERS_GCP_BILLING_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The Cloud Billing Catalog's id of the Compute Engine service. */
#define GCP_BILLING_COMPUTE "6F81-5844-456A"
#define GCP_BILLING_KEY_MAX 48

/* What one SKU prices, per hour. */
enum gcp_rate_kind {
	GCP_RATE_CORE, /* one vCPU of a series ("e2") */
	GCP_RATE_RAM,  /* one GiB of a series' memory */
	GCP_RATE_GPU,  /* one GPU (its key: gcp_billing_gpu_key) */
	GCP_RATE_VM,   /* a whole machine type ("f1-micro") */
};

struct gcp_sku_use {
	enum gcp_rate_kind kind;
	char key[GCP_BILLING_KEY_MAX]; /* the series, GPU key or type */
	bool spot; /* the description says Spot or Preemptible */
};

/* What a Compute SKU's description prices ("E2 Instance Core running in
 * Americas", "Spot Preemptible N2 Instance Ram running in Belgium", "Nvidia
 * L4 GPU running in ..."): 0 with *u, or -1 when it prices nothing an
 * offer is made of (custom, sole-tenant, commitments, disks, licences). */
int gcp_billing_describe(const char *description, struct gcp_sku_use *u);

/* A machine type's series: its name up to the first '-' ("n2d"). */
void gcp_billing_series(const char *type, char *out, size_t len);

/* One GPU as both the Compute API ("nvidia-a100-80gb") and the SKUs
 * ("Nvidia A100 80GB") name it, words split at ' ' or '-': key, the same
 * for both ("A100-80GB"); model, the hierarchy's word ("A100", variants
 * such as Mega left out); the memory the name states in GiB (0: none). */
void gcp_billing_gpu_key(const char *words, char *key, size_t keylen,
			 char *model, size_t modellen, double *memory_gib);

struct gcp_rate {
	char key[GCP_BILLING_KEY_MAX];
	char region[32];
	double value; /* USD per hour (per GiB-hour for RAM) */
	size_t seq;   /* the SKU's order: the first of two alike wins */
	enum gcp_rate_kind kind;
	bool spot;
};

struct gcp_rates {
	struct gcp_rate *v;
	size_t n, cap;
	size_t used; /* SKUs that gave a rate */
	size_t seq;
};

/* Add the rates of one SKU of the Compute service (a skus[] item): 0 when
 * it gave some, 1 when it prices nothing an offer uses (not USD, another
 * resource family, a commitment, a unit other than h / GiBy.h), -ENOMEM. */
int gcp_rates_add(struct gcp_rates *r, const cJSON *sku);
/* Sort once every SKU is in; then look rates up (NAN: none). */
void gcp_rates_sort(struct gcp_rates *r);
double gcp_rates_get(const struct gcp_rates *r, enum gcp_rate_kind kind,
		     const char *key, const char *region, bool spot);
void gcp_rates_free(struct gcp_rates *r);

/* A machine type as its price needs it. */
struct gcp_vm {
	const char *name;	  /* "g2-standard-4" */
	double vcpus;		  /* guestCpus */
	double memory_bytes;	  /* memoryMb * 2^20 */
	const char *accelerator;  /* "nvidia-l4", or NULL */
	double accelerator_count; /* whole GPUs */
};

/* vm's hourly price in region, on-demand or spot: its whole-VM rate when
 * it has one (f1-micro, g1-small), else vCPUs (the shared-core E2 types:
 * the fraction they are billed for) x the series' core rate + GiB x its RAM
 * rate + GPUs x the GPU's rate. NAN when a rate is missing; then missing
 * (when given) names the first: "e2 core", "nvidia-l4 GPU". */
double gcp_billing_price(const struct gcp_rates *r, const struct gcp_vm *vm,
			 const char *region, bool spot, char *missing,
			 size_t mlen);

#endif
