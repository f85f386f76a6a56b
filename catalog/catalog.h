/* The instance-type catalog: the EC2 and GCP types and the platform-type
 * hierarchy of catalog/data (compiled in), imported into SQLite and held as
 * feature vectors in price order, plus the `local` type of this machine. */
#ifndef CCLFS_CATALOG_CATALOG_H
#define CCLFS_CATALOG_CATALOG_H

#include "resolver/hierarchy.h"
#include "resolver/match.h"

#include <stddef.h>

struct catalog;

/* Load the compiled-in catalog. Returns NULL with err filled on failure. */
struct catalog *catalog_open(char *err, size_t errlen);
/* An empty catalog with the hierarchy only (for tests and benchmarks). */
struct catalog *catalog_open_empty(char *err, size_t errlen);
void catalog_close(struct catalog *cat);

/* Add a type. number[] and type[] are indexed like assumption_fields;
 * type names must be known to the hierarchy of their field, or NULL. A
 * machine-type name that is not declared is declared on the fly under
 * nothing. Returns 0, or -1 with err filled. */
int catalog_add(struct catalog *cat, const char *provider, const char *name,
		const double *number, const char *const *type, double price,
		char *err, size_t errlen);
/* Declare a type name of assumption file `field` under `parent` (types
 * built by the caller, such as a synthetic catalog). Returns its id, or
 * -1. */
int catalog_declare(struct catalog *cat, size_t field, const char *name,
		    const char *parent);
/* Make `alias` another spelling of type `target` of `field`; 0 or -1. */
int catalog_alias(struct catalog *cat, size_t field, const char *alias,
		  const char *target);
/* Order the types after catalog_add (catalog_at and the look-ups below
 * need it). Returns 0, or -1 when out of memory. */
int catalog_sort(struct catalog *cat);

/* Add the `local` type of the local provider: this machine's vCPUs and
 * memory, and `gpus` accelerators named `gpu` (an accelerator type name
 * such as NVIDIA_A10G, or NULL when unknown). */
int catalog_add_local(struct catalog *cat, double vcpus, double memory_bytes,
		      double gpus, const char *gpu, char *err, size_t errlen);

size_t catalog_count(const struct catalog *cat);
/* Type i, for i < catalog_count(), in order of price (unknown last), then
 * fewer vCPUs, then name. */
const struct resolver_instance *catalog_at(const struct catalog *cat, size_t i);
/* The type `name` of `provider`, or NULL. */
const struct resolver_instance *
catalog_find(const struct catalog *cat, const char *provider, const char *name);
/* The providers with at least one type, sorted ("ec2", "gcp", "local"). */
size_t catalog_providers(const struct catalog *cat, const char **out,
			 size_t max);
/* Types of one provider, sorted by name: call with i = 0, 1, ... until
 * NULL. */
const struct resolver_instance *catalog_provider_type(const struct catalog *cat,
						      const char *provider,
						      size_t i);

const struct hierarchy *catalog_hierarchy(const struct catalog *cat);

#endif
