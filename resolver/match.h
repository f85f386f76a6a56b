/* Matching: whether an instance type's features satisfy a set of instance
 * assumptions, and which assumption rules a set of types out. Pure
 * functions over feature vectors; the catalog supplies the vectors. */
#ifndef CCLFS_RESOLVER_MATCH_H
#define CCLFS_RESOLVER_MATCH_H

#include "resolver/assumption.h"

#include <stdbool.h>
#include <stddef.h>

#define RESOLVER_FIELDS 18

/* One instance type's features, indexed like assumption_fields. */
struct resolver_instance {
	const char *provider; /* cclfs provider name: "local", "ec2", "gcp" */
	const char *name;     /* the provider's type name: "t3.xlarge" */
	double number[RESOLVER_FIELDS];	   /* quantities; NAN = unknown */
	const char *type[RESOLVER_FIELDS]; /* type names; NULL = unknown */
	double price;			   /* USD per hour; NAN = unknown */
};

/* Whether feature `field` of it satisfies assumption a (an unknown
 * feature satisfies nothing but the empty assumption). */
bool resolver_match_field(const struct assumption *a, size_t field,
			  const struct resolver_instance *it);

/* Whether every assumption of a[RESOLVER_FIELDS] holds for it. */
bool resolver_match(const struct assumption *a,
		    const struct resolver_instance *it);

/* Write feature `field` of it as text ("16G", "4", "Ada", "unknown"). */
void resolver_feature_text(size_t field, const struct resolver_instance *it,
			   char *buf, size_t len);

/* Write a quantity of `kind` compactly: bytes and bit rates with the largest
 * suffix that keeps a value >= 1 ("23.5G"), counts as plain numbers. */
void resolver_quantity_text(enum assumption_kind kind, double v, char *buf,
			    size_t len);

/*
 * None of the n instances satisfies a: find the assumption that emptied the
 * set, applying them in file order, and the closest miss among the types
 * still left before it. Writes one sentence into why.
 */
void resolver_explain_none(const struct assumption *a,
			   const struct resolver_instance *const *all, size_t n,
			   char *why, size_t len);

#endif
