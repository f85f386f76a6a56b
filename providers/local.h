/* The local provider: nodes are working directories and process groups on
 * this machine. This part detects the machine's features, which make up
 * the one instance type, `local`, that the provider offers. */
#ifndef CCLFS_PROVIDERS_LOCAL_H
#define CCLFS_PROVIDERS_LOCAL_H

struct local_features {
	double vcpus;
	double memory_bytes;
};

/* Detect this machine's features. Returns 0. */
int local_detect(struct local_features *out);

#endif
