/* Resolution of a contract: gathers the contract's assumptions per role
 * (role files override contract-level ones), runs the resolver over the
 * catalog, applies the resolve policy, renders resolution/candidates, and
 * serves the catalog for browsing. */
#ifndef CCLFS_LIFECYCLE_RESOLUTION_H
#define CCLFS_LIFECYCLE_RESOLUTION_H

#include "lifecycle/config.h"

#include <stdbool.h>
#include <stddef.h>

struct resolution_env;
struct provider_entry;

/* The current value of contract schema field `field` (never NULL). */
typedef const char *(*resolution_value_fn)(void *ctx, int field);

struct resolution_env *
resolution_env_open(const struct config *cfg,
		    const struct provider_entry *const *reg, char *err,
		    size_t errlen);
void resolution_env_close(struct resolution_env *env);
/* An environment over a catalog built by the caller (benchmarks, tests),
 * which it takes over; NULL when out of memory (the catalog is closed). */
struct catalog;
struct catalog_source;
struct resolution_env *resolution_env_wrap(const struct config *cfg,
					   struct catalog *cat);

/* Replace the catalog by the compiled-in one with the n sources' rows in
 * place of their providers' (a refresh, or none to go back), plus the
 * providers' own types. 0, or -errno with err; the catalog in use is then
 * unchanged. */
int resolution_env_replace(struct resolution_env *env,
			   const struct catalog_source *src, size_t n,
			   char *err, size_t errlen);

/*
 * Check a type name written to assumption file `field` (an index into
 * assumption_fields): 0 with its canonical spelling in out, or -EINVAL with
 * one sentence in why that suggests the closest known names.
 */
int resolution_check_name(const struct resolution_env *env, int field,
			  const char *name, char *out, size_t outlen, char *why,
			  size_t whylen);

/*
 * Resolve: on success *text is the malloc'd content of `resolution`, one
 * line per role: "ROLE<TAB>PROVIDER<TAB>TYPE<TAB>PRICE/HOUR<TAB>REGION<TAB>
 * ZONES<TAB>MARKET" (REGION and ZONES "-" when none or unknown; the price
 * is the market's: on-demand or spot). On failure
 * returns -errno and one sentence in why.
 */
int resolution_run(struct resolution_env *env, resolution_value_fn value,
		   void *ctx, char **text, char *why, size_t whylen);

/* The same, leaving out the offers of `except` ("PROVIDER<TAB>TYPE<TAB>
 * REGION" lines, NULL: none): the next candidate after those that were
 * tried. */
int resolution_run_except(struct resolution_env *env, resolution_value_fn value,
			  void *ctx, const char *except, char **text, char *why,
			  size_t whylen);

/* The content of `candidates`, malloc'd (NULL when out of memory). */
char *resolution_candidates(struct resolution_env *env,
			    resolution_value_fn value, void *ctx);

/* Browsing the catalog: providers, their types (i = 0, 1, ... until NULL),
 * and the files of a type (feature i = 0, 1, ... until NULL). */
size_t resolution_providers(const struct resolution_env *env, const char **out,
			    size_t max);
const char *resolution_provider_type(const struct resolution_env *env,
				     const char *provider, size_t i);
int resolution_type_exists(const struct resolution_env *env,
			   const char *provider, const char *type);
/* A provider's regions by name: i = 0, 1, ... until NULL. */
const char *resolution_provider_region(const struct resolution_env *env,
				       const char *provider, size_t i);
/* The types offered in a region, one name per line (malloc'd); -ENOENT
 * when the provider has no such region. */
int resolution_region_types(const struct resolution_env *env,
			    const char *provider, const char *region,
			    char **names, size_t *len);
/* Whether the provider has the region and, when type is not NULL, offers
 * that type there. */
bool resolution_offered(const struct resolution_env *env, const char *provider,
			const char *region, const char *type);
/* The prices the catalog has for an offer (NAN when unknown); -ENOENT
 * when it has no such offer. */
int resolution_offer_price(const struct resolution_env *env,
			   const char *provider, const char *type,
			   const char *region, double *price, double *spot);
const char *resolution_feature_name(size_t i);
/* The content of one feature file ("16G\n", "" when unknown), malloc'd;
 * -ENOENT when there is no such type or file. */
int resolution_feature(const struct resolution_env *env, const char *provider,
		       const char *type, const char *feature, char **buf,
		       size_t *len);

#endif
