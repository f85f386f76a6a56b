/* DescribeInstanceTypes items read into the catalog's terms: the type
 * hierarchy's names for accelerators, processors and storage (tables from
 * the API's words), quantities in bytes and bits/s, and the API's known
 * mistakes corrected, each with a sentence saying so. */
#ifndef CCLFS_PROVIDERS_EC2_TYPES_H
#define CCLFS_PROVIDERS_EC2_TYPES_H

#include "providers/provider.h"

#include <libxml/tree.h>
#include <stddef.h>

/* One type; t's strings point into the struct or at static tables. */
struct ec2_type {
	struct provider_catalog_type t;
	char name[64];
	char accelerator[64]; /* an unknown accelerator: the API's name */
	char accelerator_manufacturer[64];
	char accelerator_architecture[32];
	char processor_manufacturer[64];
};

/* Sentences for the refresh's summary. */
struct ec2_notes {
	char **v;
	size_t n, cap;
};

__attribute__((format(printf, 2, 3))) void ec2_notes_add(struct ec2_notes *l,
							 const char *fmt, ...);
void ec2_notes_free(struct ec2_notes *l);

struct ec2_types {
	struct ec2_type *v;
	size_t n, cap;
};

/* Where the items of DescribeInstanceTypes pages go. */
struct ec2_types_page {
	struct ec2_types *types;
	struct ec2_notes *notes; /* the corrections' sentences */
};

/* Append one instanceTypeSet item to ctx (a struct ec2_types_page),
 * as ec2_xml_items calls it: 0, or -1 out of memory. */
int ec2_types_item(const xmlNode *item, void *ctx);

/* Sort by name (after the last page) and find one by name. */
void ec2_types_sort(struct ec2_types *l);
const struct ec2_type *ec2_types_find(const struct ec2_types *l,
				      const char *name);
void ec2_types_free(struct ec2_types *l);

/* "Up to 12.5 Gigabit" and the like: bits/s (NAN when it is a word such
 * as "High") and whether it is a ceiling. */
double ec2_types_network(const char *perf, bool *up_to);

#endif
