/* The local provider: nodes are working directories and process groups on
 * this machine. This part detects the machine's features, which make up
 * the one instance type, `local`, that the provider offers. */
#ifndef CCLFS_PROVIDERS_LOCAL_H
#define CCLFS_PROVIDERS_LOCAL_H

#include <stddef.h>

struct local_features {
	double vcpus;
	double memory_bytes;
	double gpus;  /* NVIDIA GPUs found */
	char gpu[64]; /* their model as an accelerator type ("NVIDIA_A10G"),
			 or "" when unknown or mixed */
};

/* Detect this machine's features. Returns 0. */
int local_detect(struct local_features *out);

/* Count the GPUs described under `dir` (normally /proc/driver/nvidia/gpus:
 * one folder per GPU with an `information` file holding "Model: NAME"),
 * and name their model as an accelerator type: "NVIDIA A10G" becomes
 * "NVIDIA_A10G". */
void local_detect_gpus(const char *dir, struct local_features *out);

struct provider;

/* The local provider, with nodes under `basedir` (created 0700). */
struct provider *local_provider_open(const char *basedir, char *err,
				     size_t errlen);

#endif
