/* The instance-type catalog: every type resolution can choose from, as
 * feature vectors. It holds the `local` type of this machine; the cloud
 * providers' types are added from catalog/data/. */
#include "catalog/catalog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct catalog {
	struct resolver_instance *types;
	size_t count;
};

struct catalog *catalog_open(char *err, size_t errlen)
{
	struct catalog *cat = calloc(1, sizeof(*cat));

	if (!cat)
		snprintf(err, errlen, "catalog: out of memory");
	return cat;
}

void catalog_close(struct catalog *cat)
{
	if (!cat)
		return;
	free(cat->types);
	free(cat);
}

static struct resolver_instance *catalog_new_type(struct catalog *cat)
{
	struct resolver_instance *v =
		realloc(cat->types, (cat->count + 1) * sizeof(*v));

	if (!v)
		return NULL;
	cat->types = v;
	v = &cat->types[cat->count++];
	memset(v, 0, sizeof(*v));
	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		v->number[f] = NAN;
	v->price = NAN;
	return v;
}

int catalog_add_local(struct catalog *cat, double vcpus, double memory_bytes)
{
	struct resolver_instance *t = catalog_new_type(cat);
	int f;

	if (!t)
		return -1;
	t->provider = "local";
	t->name = "local";
	t->price = 0;
	if ((f = assumption_field_find("node_provider")) >= 0)
		t->type[f] = "Localhost";
	if ((f = assumption_field_find("node_machinetype")) >= 0)
		t->type[f] = "local";
	if ((f = assumption_field_find("node_vcpus_count")) >= 0)
		t->number[f] = vcpus;
	if ((f = assumption_field_find("node_memory_size")) >= 0)
		t->number[f] = memory_bytes;
	if ((f = assumption_field_find("accelerator_count")) >= 0)
		t->number[f] = 0;
	return 0;
}

size_t catalog_count(const struct catalog *cat)
{
	return cat->count;
}

const struct resolver_instance *catalog_at(const struct catalog *cat, size_t i)
{
	return &cat->types[i];
}
