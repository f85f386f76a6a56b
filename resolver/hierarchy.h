/* The platform-type hierarchy: type names per assumption file (`Ada`,
 * `NVIDIA`, `EC2Type_T3_xLarge`, `t3.xlarge` as an alias), each with its
 * parent, and the subtype test that matching uses. Pure data structure; the
 * catalog fills it. */
#ifndef CCLFS_RESOLVER_HIERARCHY_H
#define CCLFS_RESOLVER_HIERARCHY_H

#include <stdbool.h>
#include <stddef.h>

struct hierarchy;

struct hierarchy *hierarchy_new(void);
void hierarchy_free(struct hierarchy *h);

/*
 * Declare type `name` in assumption file `field` (an index into
 * assumption_fields) with `parent` (NULL or "" for a root). A parent may be
 * declared after its children. Names are unique per field, compared
 * case-insensitively; declaring one again with the same parent is a no-op,
 * with another parent an error. Returns the type's id (>= 0), or -1.
 */
int hierarchy_add(struct hierarchy *h, size_t field, const char *name,
		  const char *parent);

/* Make `alias` another spelling of type `target` of the same field (the
 * provider's own names: "t3.xlarge" for EC2Type_T3_xLarge, or RDNA2 for
 * RDNA_2_0). Returns 0, or -1 when target is unknown or alias is taken by
 * another type. */
int hierarchy_alias(struct hierarchy *h, size_t field, const char *alias,
		    const char *target);

/* Check that every parent named was declared; returns 0, or -1 and the
 * first unknown parent's name in *missing (valid while h lives). */
int hierarchy_check(const struct hierarchy *h, const char **missing);

/* The id of the type spelled `name` (case-insensitive; aliases too) in
 * `field`, or -1. */
int hierarchy_find(const struct hierarchy *h, size_t field, const char *name);

/* The canonical spelling of a name: the declared type name, or the alias as
 * declared (so "T3.XLARGE" normalises to "t3.xlarge"), or NULL if unknown. */
const char *hierarchy_spelling(const struct hierarchy *h, size_t field,
			       const char *name);

/* The declared name of type id. */
const char *hierarchy_name(const struct hierarchy *h, int id);

/* Whether type `id` is `ancestor` or one of its subtypes (any depth).
 * False when either is -1. Cycles in the data must not loop forever. */
bool hierarchy_is_a(const struct hierarchy *h, int id, int ancestor);

/* Up to `max` known spellings of `field` closest to `name` (edit distance,
 * case-insensitive; ties by name), most similar first, into out. Returns
 * how many. */
size_t hierarchy_suggest(const struct hierarchy *h, size_t field,
			 const char *name, const char **out, size_t max);

/* Number of types declared (ids are 0 .. count-1). */
size_t hierarchy_count(const struct hierarchy *h);

#endif
