/* Matching: whether an instance type's features satisfy a set of instance
 * assumptions (type names match their subtypes in the platform-type
 * hierarchy), and which assumption rules a set of types out. Pure functions
 * over feature vectors; the catalog supplies the vectors. */
#ifndef CCLFS_RESOLVER_MATCH_H
#define CCLFS_RESOLVER_MATCH_H

#include "resolver/assumption.h"
#include "resolver/hierarchy.h"

#include <stdbool.h>
#include <stddef.h>

#define RESOLVER_FIELDS 19

/* Where a type is sold: one region, its prices and zones. */
struct resolver_offer {
	const char *region; /* the provider's name: "eu-west-1" */
	const char *zones;  /* space-separated; "" = unknown */
	double price, spot; /* USD per hour (on-demand, spot); NAN = unknown */
	int locale;	    /* the region's cluster_locale type id */
	int region_index;   /* its index among the catalog's regions */
};

/* One instance type's features, indexed like assumption_fields, and the
 * regions that offer it, cheapest first (unknown prices last). A type
 * without offers (this machine, a host) has no region: its locale is its
 * cluster_locale feature (usually unknown). */
struct resolver_instance {
	const char *provider; /* cclfs provider name: "local", "ec2", "gcp" */
	const char *name;     /* the provider's type name: "t3.xlarge" */
	const struct resolver_offer *offers;
	size_t noffers;
	double number[RESOLVER_FIELDS]; /* quantities; NAN = unknown */
	int type[RESOLVER_FIELDS];	/* hierarchy ids; -1 = unknown */
	double price; /* USD per hour, the lowest known of its offers; NAN =
			 unknown */
};

/* What a role asks for: the assumptions, and for each type name the id of
 * the type it names (-1 when it names none). */
struct resolver_query {
	struct assumption a[RESOLVER_FIELDS];
	int type[RESOLVER_FIELDS];
};

/* Whether feature `field` of it satisfies the query (an unknown feature
 * satisfies nothing but the empty assumption). */
bool resolver_match_field(const struct hierarchy *h,
			  const struct resolver_query *q, size_t field,
			  const struct resolver_instance *it);

/* Whether offer o is in a region cluster_locale of q allows. */
bool resolver_offer_allowed(const struct hierarchy *h,
			    const struct resolver_query *q,
			    const struct resolver_offer *o);

/* Whether every assumption of q holds for it (cluster_locale: for at least
 * one of its offers). */
bool resolver_match(const struct hierarchy *h, const struct resolver_query *q,
		    const struct resolver_instance *it);
/* The same but for cluster_locale of a type with offers, which the caller
 * tests per offer (resolver_offer_allowed). */
bool resolver_match_features(const struct hierarchy *h,
			     const struct resolver_query *q,
			     const struct resolver_instance *it);

/* Write feature `field` of it as text ("16G", "4", "Ada"); "" when
 * unknown. Quantities are exact when a suffix divides them. */
void resolver_feature_text(const struct hierarchy *h, size_t field,
			   const struct resolver_instance *it, char *buf,
			   size_t len);

/* Write a quantity of `kind`: bytes and bit rates with the largest suffix
 * that divides them exactly ("16G"), else with the largest that keeps a
 * value >= 1 ("614.4M"); counts as plain numbers. */
void resolver_quantity_text(enum assumption_kind kind, double v, char *buf,
			    size_t len);

/*
 * None of the n instances satisfies q: find the assumption that emptied the
 * set, applying them in file order, and the closest miss among the types
 * still left before it. Writes one sentence into why.
 */
void resolver_explain_none(const struct hierarchy *h,
			   const struct resolver_query *q,
			   const struct resolver_instance *const *all, size_t n,
			   char *why, size_t len);

#endif
