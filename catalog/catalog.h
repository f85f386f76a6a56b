/* The instance-type catalog: the EC2 and GCP types, their offers (type ×
 * region, with prices and zones) and the platform-type hierarchy of
 * catalog/data (compiled in), a provider's rows replaced by a refresh, and
 * the types providers add of their own (this machine, the hosts). */
#ifndef CCLFS_CATALOG_CATALOG_H
#define CCLFS_CATALOG_CATALOG_H

#include "resolver/hierarchy.h"
#include "resolver/match.h"

#include <stddef.h>

struct catalog;

/* A provider's rows that replace its compiled-in ones (a refresh): the
 * text of a types.csv and of an offers.csv, with their header lines, in
 * the compiled-in files' format (columns by name; missing ones are
 * unknown). Type names the hierarchy does not know are placed under their
 * manufacturer's parent, else the generic one, and reported in the notes. */
struct catalog_source {
	const char *provider;
	const char *types;
	size_t types_len;
	const char *offers;
	size_t offers_len;
};

/* Load the compiled-in catalog, with the rows of each of the n sources in
 * place of its provider's. Returns NULL with err filled on failure. */
struct catalog *catalog_open_with(const struct catalog_source *src, size_t n,
				  char *err, size_t errlen);
/* The compiled-in catalog alone. */
struct catalog *catalog_open(char *err, size_t errlen);
/* An empty catalog with the hierarchy only (for tests and benchmarks). */
struct catalog *catalog_open_empty(char *err, size_t errlen);
void catalog_close(struct catalog *cat);

/* What loading the sources placed or left out, one sentence per line
 * ("" when nothing). */
const char *catalog_notes(const struct catalog *cat);

/* Add a type. number[] and type[] are indexed like assumption_fields;
 * type names must be known to the hierarchy of their field, or NULL. A
 * machine-type name that is not declared is declared on the fly under
 * nothing. price is for a type without offers (NAN otherwise). Returns 0,
 * or -1 with err filled. */
int catalog_add(struct catalog *cat, const char *provider, const char *name,
		const double *number, const char *const *type, double price,
		char *err, size_t errlen);
/* Add an offer of type `name` of `provider` in `region` (a region of the
 * hierarchy or a new one, declared under the provider's region parent).
 * Returns 0, or -1 with err filled. */
int catalog_add_offer(struct catalog *cat, const char *provider,
		      const char *name, const char *region, double price,
		      double spot, const char *zones, char *err, size_t errlen);
/* Declare a type name of assumption file `field` under `parent` (types
 * built by the caller, such as a synthetic catalog). Returns its id, or
 * -1. */
int catalog_declare(struct catalog *cat, size_t field, const char *name,
		    const char *parent);
/* Make `alias` another spelling of type `target` of `field`; 0 or -1. */
int catalog_alias(struct catalog *cat, size_t field, const char *alias,
		  const char *target);
/* Order the types and attach their offers after catalog_add and
 * catalog_add_offer (catalog_at and the look-ups below need it). Returns
 * 0, or -1 when out of memory. */
int catalog_sort(struct catalog *cat);

/* Add the `local` type of the local provider: this machine's vCPUs,
 * memory and architecture ("x86_64", "arm64" or NULL), and `gpus`
 * accelerators named `gpu` (an accelerator type name such as NVIDIA_A10G,
 * or NULL when unknown). */
int catalog_add_local(struct catalog *cat, double vcpus, double memory_bytes,
		      const char *architecture, double gpus, const char *gpu,
		      char *err, size_t errlen);

size_t catalog_count(const struct catalog *cat);
/* Type i, for i < catalog_count(), in order of price (the lowest known of
 * its offers; unknown last), then fewer vCPUs, then name. */
const struct resolver_instance *catalog_at(const struct catalog *cat, size_t i);
/* Type i in the order they lie in memory (by provider and name): the
 * fastest to scan. */
const struct resolver_instance *catalog_type_at(const struct catalog *cat,
						size_t i);
/* The number of regions (an offer's region_index is below it). */
size_t catalog_region_count(const struct catalog *cat);
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
/* Regions of one provider, sorted by name: i = 0, 1, ... until NULL. */
const char *catalog_provider_region(const struct catalog *cat,
				    const char *provider, size_t i);
/* The offer of type t in `region`, or NULL. */
const struct resolver_offer *catalog_offer_in(const struct resolver_instance *t,
					      const char *region);
/* The total number of offers. */
size_t catalog_offer_count(const struct catalog *cat);

const struct hierarchy *catalog_hierarchy(const struct catalog *cat);

#endif
