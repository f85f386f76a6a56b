/* The instance-type catalog: the EC2 and GCP types, their offers (type ×
 * region, with prices and zones) and the platform-type hierarchy of
 * catalog/data (compiled in), a provider's rows replaced by a refresh, and
 * the types providers add of their own (this machine, the hosts). */
#include "catalog/catalog.h"

#include "catalog/csv.h"
#include "catalog/data.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* An offer as read, before catalog_sort attaches it to its type. */
struct catalog_pending {
	const char *provider, *type, *region, *zones;
	double price, spot;
	int locale;
};

/* A provider's region: its name and its cluster_locale type. */
struct catalog_region {
	const char *provider, *name;
	int locale;
};

struct catalog {
	struct hierarchy *types;
	struct resolver_instance *v; /* by provider, name after sorting */
	const struct resolver_instance **byprice;
	struct resolver_offer *offers; /* grouped by type, cheapest first */
	struct catalog_pending *pend;
	struct catalog_region *regions; /* by provider, name after sorting */
	char **strings;			/* every string the vectors point to */
	char *notes;
	/* While a source loads: the compiled-in machine-type labels of its
	 * provider's types (name, label pairs by name), for rows that have
	 * none. */
	const char **labels;
	size_t nlabels;
	size_t count, cap;
	size_t noffers;
	size_t npend, cappend;
	size_t nregions, capregions;
	size_t nstrings, capstrings;
	size_t notes_len;
};

/* The hierarchy kind of each row of platform_types.csv and the other type
 * files, as the assumption file it serves. */
static const struct {
	const char *kind;
	const char *field;
} catalog_kinds[] = {
	{"provider", "node_provider"},
	{"locale", "cluster_locale"},
	{"machine_type", "node_machinetype"},
	{"accelerator_type", "accelerator_type"},
	{"accelerator_manufacturer", "accelerator_manufacturer"},
	{"accelerator_architecture", "accelerator_architecture"},
	{"accelerator", "accelerator"},
	{"processor_manufacturer", "processor_manufacturer"},
	{"processor_microarchitecture", "processor_microarchitecture"},
	{"processor", "processor"},
	{"storage_type", "storage_type"},
	{"architecture", "node_architecture"},
};

/* The types.csv column of each assumption file, and where a name the
 * hierarchy does not know goes in a refreshed row: under the
 * manufacturer's type (the value of `maker` followed by `suffix`) when
 * there is one, else under `generic`. */
static const struct {
	const char *field;
	const char *column;
	const char *maker, *suffix, *generic;
} catalog_columns[] = {
	{"node_provider", "provider", NULL, NULL, NULL},
	{"cluster_locale", "locale", NULL, NULL, NULL},
	{"node_machinetype", "machine_type", NULL, NULL, ""},
	{"node_memory_size", "memory_bytes", NULL, NULL, NULL},
	{"node_ecu_count", "ecu", NULL, NULL, NULL},
	{"node_vcpus_count", "vcpus", NULL, NULL, NULL},
	{"accelerator_count", "accelerator_count", NULL, NULL, NULL},
	{"accelerator_memory", "accelerator_memory_bytes", NULL, NULL, NULL},
	{"accelerator_type", "accelerator_type", NULL, NULL, "AcceleratorType"},
	{"accelerator_manufacturer", "accelerator_manufacturer", NULL, NULL,
	 "Manufacturer"},
	{"accelerator_architecture", "accelerator_architecture",
	 "accelerator_manufacturer", "Architecture", "AcceleratorArchitecture"},
	{"accelerator", "accelerator", "accelerator_manufacturer",
	 "Accelerator", "Accelerator"},
	{"processor_manufacturer", "processor_manufacturer", NULL, NULL,
	 "Manufacturer"},
	{"processor_microarchitecture", "processor_microarchitecture", NULL,
	 NULL, "ProcessorMicroarchitecture"},
	{"processor", "processor", "processor_manufacturer", "Processor",
	 "Processor"},
	{"storage_type", "storage_type", NULL, NULL, "StorageType"},
	{"storage_size", "storage_bytes", NULL, NULL, NULL},
	{"network_performance", "network_bits_per_s", NULL, NULL, NULL},
	{"node_architecture", "architecture", NULL, NULL, "Architecture"},
};

#define CATALOG_COLUMNS (sizeof(catalog_columns) / sizeof(*catalog_columns))

static int catalog_kind_field(const char *kind)
{
	for (size_t i = 0; i < sizeof(catalog_kinds) / sizeof(*catalog_kinds);
	     i++)
		if (strcmp(catalog_kinds[i].kind, kind) == 0)
			return assumption_field_find(catalog_kinds[i].field);
	return -1;
}

static const char *catalog_intern(struct catalog *cat, const char *s)
{
	char *copy;

	if (cat->nstrings == cat->capstrings) {
		size_t cap = cat->capstrings ? cat->capstrings * 2 : 1024;
		char **v = realloc(cat->strings, cap * sizeof(*v));

		if (!v)
			return NULL;
		cat->strings = v;
		cat->capstrings = cap;
	}
	copy = strdup(s);
	if (copy)
		cat->strings[cat->nstrings++] = copy;
	return copy;
}

static void catalog_note(struct catalog *cat, const char *sentence)
{
	size_t n = strlen(sentence);
	char *grown = realloc(cat->notes, cat->notes_len + n + 2);

	if (!grown)
		return;
	cat->notes = grown;
	memcpy(cat->notes + cat->notes_len, sentence, n);
	cat->notes_len += n;
	cat->notes[cat->notes_len++] = '\n';
	cat->notes[cat->notes_len] = '\0';
}

const char *catalog_notes(const struct catalog *cat)
{
	return cat->notes ? cat->notes : "";
}

/* --- the hierarchy, from the type files --- */

static int catalog_load_types(struct catalog *cat, const char *data,
			      size_t size, const char *file, char *err,
			      size_t errlen)
{
	struct csv c;
	int rc;

	csv_open(&c, data, size);
	if (csv_next(&c) != 1 || c.count != 3) {
		snprintf(err, errlen, "catalog: %s: no header", file);
		return -1;
	}
	while ((rc = csv_next(&c)) == 1) {
		int f = c.count == 3 ? catalog_kind_field(c.field[0]) : -1;

		/* Machine families form a tree of their own that no instance
		 * type links to: no assumption file takes them. */
		if (c.count == 3 && strcmp(c.field[0], "machine_family") == 0)
			continue;
		if (f < 0 || hierarchy_add(cat->types, (size_t)f, c.field[1],
					   c.field[2]) < 0) {
			snprintf(err, errlen, "catalog: %s:%zu: bad type row",
				 file, c.lineno);
			return -1;
		}
	}
	if (rc < 0) {
		snprintf(err, errlen, "catalog: %s:%zu: unreadable line", file,
			 c.lineno);
		return -1;
	}
	return 0;
}

static int catalog_load_aliases(struct catalog *cat, const char *data,
				size_t size, char *err, size_t errlen)
{
	struct csv c;

	csv_open(&c, data, size);
	csv_next(&c);
	while (csv_next(&c) == 1) {
		int f = c.count == 3 ? catalog_kind_field(c.field[0]) : -1;

		if (f < 0 || hierarchy_alias(cat->types, (size_t)f, c.field[1],
					     c.field[2])) {
			snprintf(err, errlen,
				 "catalog: aliases line %zu: bad alias %s",
				 c.lineno, c.count > 1 ? c.field[1] : "");
			return -1;
		}
	}
	return 0;
}

static int catalog_region_add(struct catalog *cat, const char *provider,
			      const char *name, int locale)
{
	struct catalog_region *r;

	if (cat->nregions == cat->capregions) {
		size_t cap = cat->capregions ? cat->capregions * 2 : 128;
		struct catalog_region *v =
			realloc(cat->regions, cap * sizeof(*v));

		if (!v)
			return -1;
		cat->regions = v;
		cat->capregions = cap;
	}
	r = &cat->regions[cat->nregions];
	r->provider = catalog_intern(cat, provider);
	r->name = catalog_intern(cat, name);
	r->locale = locale;
	if (!r->provider || !r->name)
		return -1;
	cat->nregions++;
	return 0;
}

/* regions.csv: each region's locale type, and the provider's name of it
 * as an alias ("eu-west-1" for EC2Region_EUWest1). */
static int catalog_load_regions(struct catalog *cat, char *err, size_t errlen)
{
	size_t lf = (size_t)assumption_field_find("cluster_locale");
	struct csv c;
	int p, r, t, a;

	csv_open(&c, catalog_data_regions, catalog_data_regions_size);
	csv_next(&c);
	p = csv_column(&c, "provider");
	r = csv_column(&c, "region");
	t = csv_column(&c, "platform_type_name");
	a = csv_column(&c, "alias");
	if (p < 0 || r < 0 || t < 0 || a < 0) {
		snprintf(err, errlen, "catalog: regions.csv lacks a column");
		return -1;
	}
	while (csv_next(&c) == 1) {
		int id = c.count == 4
				 ? hierarchy_find(cat->types, lf, c.field[t])
				 : -1;

		if (id < 0 ||
		    (strcasecmp(c.field[a], c.field[t]) != 0 &&
		     hierarchy_alias(cat->types, lf, c.field[a], c.field[t])) ||
		    catalog_region_add(cat, c.field[p], c.field[r], id)) {
			snprintf(err, errlen,
				 "catalog: regions.csv:%zu: bad region row",
				 c.lineno);
			return -1;
		}
	}
	return 0;
}

/* The locale type of a provider's region; a region the catalog does not
 * know (a refresh found it) is declared under the provider's region type
 * of cclfs_regions.csv. -1 when it cannot be. */
static int catalog_region_locale(struct catalog *cat, const char *provider,
				 const char *region)
{
	size_t lf = (size_t)assumption_field_find("cluster_locale");
	char sentence[256];
	struct csv c;
	int id = -1;

	for (size_t i = 0; i < cat->nregions; i++)
		if (strcmp(cat->regions[i].name, region) == 0 &&
		    strcmp(cat->regions[i].provider, provider) == 0)
			return cat->regions[i].locale;
	csv_open(&c, catalog_data_cclfs_regions,
		 catalog_data_cclfs_regions_size);
	csv_next(&c);
	while (id < 0 && csv_next(&c) == 1)
		if (c.count == 2 && strcmp(c.field[0], provider) == 0)
			id = hierarchy_add(cat->types, lf, region, c.field[1]);
	if (id < 0 || catalog_region_add(cat, provider, region, id))
		return -1;
	snprintf(sentence, sizeof(sentence),
		 "region %s of %s is new to the catalog: placed under %s",
		 region, provider, hierarchy_name(cat->types, id));
	catalog_note(cat, sentence);
	return id;
}

/* --- instance types and offers, from types.csv and offers.csv --- */

static bool catalog_number_field(size_t f)
{
	return assumption_fields[f].kind != ASSUMPTION_TYPE;
}

/* The parent of a name new to the hierarchy in feature column k of a
 * refreshed row: the manufacturer's type when the hierarchy has it. */
static const char *catalog_parent(struct catalog *cat, size_t k,
				  const struct csv *c, const int *col,
				  char *buf, size_t len)
{
	size_t f = (size_t)assumption_field_find(catalog_columns[k].field);

	if (catalog_columns[k].maker) {
		for (size_t j = 0; j < CATALOG_COLUMNS; j++) {
			const char *maker;

			if (strcmp(catalog_columns[j].column,
				   catalog_columns[k].maker) != 0 ||
			    col[j] < 0 || (size_t)col[j] >= c->count)
				continue;
			maker = c->field[col[j]];
			snprintf(buf, len, "%s%s", maker,
				 catalog_columns[k].suffix);
			if (*maker && hierarchy_find(cat->types, f, buf) >= 0)
				return buf;
		}
	}
	return catalog_columns[k].generic;
}

static int catalog_cmp_label(const void *pa, const void *pb)
{
	return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* The compiled-in machine-type labels of `provider`'s types. */
static int catalog_load_labels(struct catalog *cat, const char *provider)
{
	struct csv c;
	int p, n, m;

	cat->nlabels = 0;
	csv_open(&c, catalog_data_types, catalog_data_types_size);
	csv_next(&c);
	p = csv_column(&c, "provider");
	n = csv_column(&c, "instance_type");
	m = csv_column(&c, "machine_type");
	if (p < 0 || n < 0 || m < 0)
		return 0;
	while (csv_next(&c) == 1) {
		const char **v;

		if ((size_t)m >= c.count || strcmp(c.field[p], provider) != 0 ||
		    !*c.field[m])
			continue;
		v = realloc(cat->labels,
			    (cat->nlabels + 1) * 2 * sizeof(*cat->labels));
		if (!v)
			return -1;
		cat->labels = v;
		v[2 * cat->nlabels] = catalog_intern(cat, c.field[n]);
		v[2 * cat->nlabels + 1] = catalog_intern(cat, c.field[m]);
		if (!v[2 * cat->nlabels] || !v[2 * cat->nlabels + 1])
			return -1;
		cat->nlabels++;
	}
	if (cat->nlabels) /* labels is NULL when there are none */
		qsort(cat->labels, cat->nlabels, 2 * sizeof(*cat->labels),
		      catalog_cmp_label);
	return 0;
}

/* One types.csv row of `provider` (NULL: the row's own). lenient: a name
 * the hierarchy does not know is declared (a refresh) instead of an
 * error (the compiled-in data). */
static int catalog_type_row(struct catalog *cat, const char *provider,
			    const struct csv *c, const int *col, int namecol,
			    int fraccol, bool lenient, char *err, size_t errlen)
{
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS] = {0};
	const char *prov = provider;
	char parent[128], sentence[384];

	if (namecol < 0 || (size_t)namecol >= c->count)
		return 0;
	for (size_t k = 0; k < CATALOG_COLUMNS; k++) {
		size_t f =
			(size_t)assumption_field_find(catalog_columns[k].field);
		const char *v = col[k] >= 0 && (size_t)col[k] < c->count
					? c->field[col[k]]
					: "";

		number[f] = NAN;
		if (!*v)
			continue;
		if (catalog_number_field(f)) {
			number[f] = strtod(v, NULL);
			continue;
		}
		if (f == (size_t)assumption_field_find("node_provider")) {
			if (!prov)
				prov = v;
			continue;
		}
		type[f] = v;
		if (!lenient || !catalog_columns[k].generic ||
		    hierarchy_find(cat->types, f, v) >= 0)
			continue;
		if (hierarchy_add(cat->types, f, v,
				  catalog_parent(cat, k, c, col, parent,
						 sizeof(parent))) < 0) {
			type[f] = NULL;
			continue;
		}
		if (f != (size_t)assumption_field_find("node_machinetype")) {
			snprintf(sentence, sizeof(sentence),
				 "%s %s of %s is new to the hierarchy: placed "
				 "under %s",
				 assumption_fields[f].name, v,
				 c->field[namecol],
				 *catalog_parent(cat, k, c, col, parent,
						 sizeof(parent))
					 ? parent
					 : "nothing");
			catalog_note(cat, sentence);
		}
	}
	if (!prov)
		return 0;
	if (lenient && !type[assumption_field_find("node_machinetype")]) {
		/* A refreshed row: the label the compiled-in row had, so that
		 * EC2Type_T3 and t3.xlarge keep naming it; a new type is its
		 * own machine type. */
		const char *key = c->field[namecol];
		const char **hit =
			cat->nlabels ? bsearch(&key, cat->labels, cat->nlabels,
					       2 * sizeof(*cat->labels),
					       catalog_cmp_label)
				     : NULL;

		type[assumption_field_find("node_machinetype")] =
			hit ? hit[1] : key;
	}
	if (provider)
		type[assumption_field_find("node_provider")] = provider;
	else
		type[assumption_field_find("node_provider")] = prov;
	{
		/* A partition of one device (g6f: an eighth of an L4) counts
		 * as that fraction of an accelerator, so that `atleast 1`
		 * means a whole one. */
		int fc = fraccol;
		size_t ac = (size_t)assumption_field_find("accelerator_count");
		double frac = fc >= 0 && (size_t)fc < c->count && *c->field[fc]
				      ? strtod(c->field[fc], NULL)
				      : 1;

		if (frac > 0 && frac < 1 && !isnan(number[ac]))
			number[ac] *= frac;
	}
	return catalog_add(cat, prov, c->field[namecol], number, type, NAN, err,
			   errlen);
}

/* Every row of a types.csv text, but those of the providers in skip[] (the
 * compiled-in rows a refresh replaced), or only those of `provider`. */
static int catalog_load_rows(struct catalog *cat, const char *data, size_t size,
			     const char *provider,
			     const struct catalog_source *skip, size_t nskip,
			     char *err, size_t errlen)
{
	int col[CATALOG_COLUMNS], namecol, provcol, fraccol, rc;
	struct csv c;

	csv_open(&c, data, size);
	if (csv_next(&c) != 1) {
		snprintf(err, errlen, "catalog: types of %s: no header",
			 provider ? provider : "catalog/data");
		return -1;
	}
	for (size_t k = 0; k < CATALOG_COLUMNS; k++)
		col[k] = csv_column(&c, catalog_columns[k].column);
	namecol = csv_column(&c, "instance_type");
	fraccol = csv_column(&c, "accelerator_fraction");
	provcol = csv_column(&c, "provider");
	while ((rc = csv_next(&c)) == 1) {
		bool skipped = false;

		for (size_t i = 0; i < nskip && provcol >= 0; i++)
			if ((size_t)provcol < c.count &&
			    strcmp(c.field[provcol], skip[i].provider) == 0)
				skipped = true;
		if (skipped)
			continue;
		if (catalog_type_row(cat, provider, &c, col, namecol, fraccol,
				     provider != NULL, err, errlen))
			return -1;
	}
	if (rc < 0) {
		snprintf(err, errlen,
			 "catalog: types of %s: line %zu unreadable",
			 provider ? provider : "catalog/data", c.lineno);
		return -1;
	}
	return 0;
}

static int catalog_load_offers(struct catalog *cat, const char *data,
			       size_t size, const char *provider,
			       const struct catalog_source *skip, size_t nskip,
			       char *err, size_t errlen)
{
	struct csv c;
	int p, t, r, pr, sp, z, rc;

	csv_open(&c, data, size);
	csv_next(&c);
	p = csv_column(&c, "provider");
	t = csv_column(&c, "instance_type");
	r = csv_column(&c, "region");
	pr = csv_column(&c, "price_usd_hour");
	sp = csv_column(&c, "spot_price_usd_hour");
	z = csv_column(&c, "zones");
	if ((p < 0 && !provider) || t < 0 || r < 0) {
		snprintf(err, errlen, "catalog: offers of %s lack a column",
			 provider ? provider : "catalog/data");
		return -1;
	}
	while ((rc = csv_next(&c)) == 1) {
		const char *prov = provider ? provider : c.field[p];
#define CATALOG_COL(i) ((i) >= 0 && (size_t)(i) < c.count ? c.field[i] : "")
		const char *price = CATALOG_COL(pr), *spot = CATALOG_COL(sp);
		bool skipped = false;

		if ((size_t)t >= c.count || (size_t)r >= c.count ||
		    (!provider && (size_t)p >= c.count))
			continue;
		for (size_t i = 0; i < nskip; i++)
			if (strcmp(prov, skip[i].provider) == 0)
				skipped = true;
		if (skipped)
			continue;
		if (catalog_add_offer(cat, prov, c.field[t], c.field[r],
				      *price ? strtod(price, NULL) : NAN,
				      *spot ? strtod(spot, NULL) : NAN,
				      CATALOG_COL(z), err, errlen))
			return -1;
#undef CATALOG_COL
	}
	if (rc < 0) {
		snprintf(err, errlen,
			 "catalog: offers of %s: line %zu unreadable",
			 provider ? provider : "catalog/data", c.lineno);
		return -1;
	}
	return 0;
}

/* The provider's own names of machine types: t3.xlarge for
 * EC2Type_T3_xLarge. */
static int catalog_type_aliases(struct catalog *cat, char *err, size_t errlen)
{
	int mt = assumption_field_find("node_machinetype");

	for (size_t i = 0; i < cat->count; i++) {
		const struct resolver_instance *t = &cat->v[i];

		if (t->type[mt] < 0 ||
		    strcasecmp(hierarchy_name(cat->types, t->type[mt]),
			       t->name) == 0 ||
		    hierarchy_find(cat->types, (size_t)mt, t->name) ==
			    t->type[mt])
			continue;
		if (hierarchy_alias(cat->types, (size_t)mt, t->name,
				    hierarchy_name(cat->types, t->type[mt]))) {
			snprintf(err, errlen,
				 "catalog: %s %s: its name is taken by another "
				 "machine type",
				 t->provider, t->name);
			return -1;
		}
	}
	return 0;
}

struct catalog *catalog_open_empty(char *err, size_t errlen)
{
	struct catalog *cat = calloc(1, sizeof(*cat));
	const char *missing;

	if (!cat || !(cat->types = hierarchy_new())) {
		snprintf(err, errlen, "catalog: out of memory");
		catalog_close(cat);
		return NULL;
	}
	if (catalog_load_types(cat, catalog_data_platform_types,
			       catalog_data_platform_types_size,
			       "platform_types.csv", err, errlen) ||
	    catalog_load_types(cat, catalog_data_platform_types_added,
			       catalog_data_platform_types_added_size,
			       "platform_types_added.csv", err, errlen) ||
	    catalog_load_types(cat, catalog_data_machine_types,
			       catalog_data_machine_types_size,
			       "machine_types.csv", err, errlen) ||
	    catalog_load_types(cat, catalog_data_machine_types_added,
			       catalog_data_machine_types_added_size,
			       "machine_types_added.csv", err, errlen) ||
	    catalog_load_types(cat, catalog_data_cclfs_types,
			       catalog_data_cclfs_types_size, "cclfs_types.csv",
			       err, errlen) ||
	    catalog_load_aliases(cat, catalog_data_platform_aliases,
				 catalog_data_platform_aliases_size, err,
				 errlen) ||
	    catalog_load_aliases(cat, catalog_data_cclfs_aliases,
				 catalog_data_cclfs_aliases_size, err,
				 errlen)) {
		catalog_close(cat);
		return NULL;
	}
	if (hierarchy_check(cat->types, &missing)) {
		snprintf(err, errlen, "catalog: parent type %s is not declared",
			 missing);
		catalog_close(cat);
		return NULL;
	}
	if (catalog_load_regions(cat, err, errlen)) {
		catalog_close(cat);
		return NULL;
	}
	return cat;
}

struct catalog *catalog_open_with(const struct catalog_source *src, size_t n,
				  char *err, size_t errlen)
{
	struct catalog *cat = catalog_open_empty(err, errlen);

	if (!cat)
		return NULL;
	if (catalog_load_rows(cat, catalog_data_types, catalog_data_types_size,
			      NULL, src, n, err, errlen) ||
	    catalog_load_offers(cat, catalog_data_offers,
				catalog_data_offers_size, NULL, src, n, err,
				errlen))
		goto fail;
	for (size_t i = 0; i < n; i++)
		if (catalog_load_labels(cat, src[i].provider) ||
		    catalog_load_rows(cat, src[i].types, src[i].types_len,
				      src[i].provider, NULL, 0, err, errlen) ||
		    catalog_load_offers(cat, src[i].offers, src[i].offers_len,
					src[i].provider, NULL, 0, err, errlen))
			goto fail;
	if (catalog_sort(cat) || catalog_type_aliases(cat, err, errlen)) {
		if (!*err)
			snprintf(err, errlen, "catalog: out of memory");
		goto fail;
	}
	return cat;
fail:
	catalog_close(cat);
	return NULL;
}

struct catalog *catalog_open(char *err, size_t errlen)
{
	return catalog_open_with(NULL, 0, err, errlen);
}

void catalog_close(struct catalog *cat)
{
	if (!cat)
		return;
	hierarchy_free(cat->types);
	for (size_t i = 0; i < cat->nstrings; i++)
		free(cat->strings[i]);
	free(cat->strings);
	free(cat->v);
	free(cat->byprice);
	free(cat->offers);
	free(cat->pend);
	free(cat->regions);
	free(cat->notes);
	free(cat->labels);
	free(cat);
}

static int catalog_cmp_price(const void *pa, const void *pb)
{
	const struct resolver_instance *a = *(const void *const *)pa;
	const struct resolver_instance *b = *(const void *const *)pb;
	int vc = assumption_field_find("node_vcpus_count");
	double x = isnan(a->price) ? INFINITY : a->price;
	double y = isnan(b->price) ? INFINITY : b->price;
	int c;

	if (x != y)
		return x < y ? -1 : 1;
	if (a->number[vc] != b->number[vc] && !isnan(a->number[vc]) &&
	    !isnan(b->number[vc]))
		return a->number[vc] < b->number[vc] ? -1 : 1;
	c = strcmp(a->name, b->name);
	return c ? c : strcmp(a->provider, b->provider);
}

static int catalog_cmp_name(const void *pa, const void *pb)
{
	const struct resolver_instance *a = pa, *b = pb;
	int c = strcmp(a->provider, b->provider);

	return c ? c : strcmp(a->name, b->name);
}

/* Offers by type, then price (unknown last), then region. */
static int catalog_cmp_pending(const void *pa, const void *pb)
{
	const struct catalog_pending *a = pa, *b = pb;
	double x = isnan(a->price) ? INFINITY : a->price;
	double y = isnan(b->price) ? INFINITY : b->price;
	int c = strcmp(a->provider, b->provider);

	if (c == 0)
		c = strcmp(a->type, b->type);
	if (c)
		return c;
	if (x != y)
		return x < y ? -1 : 1;
	return strcmp(a->region, b->region);
}

static int catalog_cmp_region(const void *pa, const void *pb)
{
	const struct catalog_region *a = pa, *b = pb;
	int c = strcmp(a->provider, b->provider);

	return c ? c : strcmp(a->name, b->name);
}

static struct resolver_instance *
catalog_lookup(struct catalog *cat, const char *provider, const char *name)
{
	struct resolver_instance key = {.provider = provider, .name = name};

	if (!cat->count) /* v may be NULL */
		return NULL;
	return bsearch(&key, cat->v, cat->count, sizeof(*cat->v),
		       catalog_cmp_name);
}

int catalog_sort(struct catalog *cat)
{
	const struct resolver_instance **byprice;
	struct resolver_offer *offers;
	size_t no = 0, dropped = 0, *first, nloc;
	int *index;

	/* An empty array may be NULL, which qsort must not be given. */
	if (cat->count)
		qsort(cat->v, cat->count, sizeof(*cat->v), catalog_cmp_name);
	if (cat->npend)
		qsort(cat->pend, cat->npend, sizeof(*cat->pend),
		      catalog_cmp_pending);
	if (cat->nregions)
		qsort(cat->regions, cat->nregions, sizeof(*cat->regions),
		      catalog_cmp_region);
	/* Each offer's index among the regions, through their locale ids. */
	nloc = hierarchy_count(cat->types);
	index = malloc((nloc ? nloc : 1) * sizeof(*index));
	if (!index)
		return -1;
	for (size_t i = 0; i < nloc; i++)
		index[i] = -1;
	for (size_t i = 0; i < cat->nregions; i++)
		if (cat->regions[i].locale >= 0 &&
		    (size_t)cat->regions[i].locale < nloc)
			index[cat->regions[i].locale] = (int)i;
	offers = malloc((cat->npend ? cat->npend : 1) * sizeof(*offers));
	byprice = malloc((cat->count ? cat->count : 1) * sizeof(*byprice));
	first = malloc((cat->count ? cat->count : 1) * sizeof(*first));
	if (!offers || !byprice || !first) {
		free(offers);
		free(byprice);
		free(first);
		free(index);
		return -1;
	}
	for (size_t i = 0; i < cat->count; i++)
		if (cat->v[i].noffers || cat->v[i].offers) {
			cat->v[i].offers = NULL;
			cat->v[i].noffers = 0;
			cat->v[i].price = NAN;
		}
	for (size_t i = 0; i < cat->npend;) {
		const struct catalog_pending *g = &cat->pend[i];
		struct resolver_instance *t =
			catalog_lookup(cat, g->provider, g->type);
		size_t k = i;

		for (; k < cat->npend &&
		       strcmp(cat->pend[k].type, g->type) == 0 &&
		       strcmp(cat->pend[k].provider, g->provider) == 0;
		     k++) {
			if (!t)
				continue;
			offers[no].region = cat->pend[k].region;
			offers[no].zones = cat->pend[k].zones;
			offers[no].price = cat->pend[k].price;
			offers[no].spot = cat->pend[k].spot;
			offers[no].locale = cat->pend[k].locale;
			offers[no].region_index =
				cat->pend[k].locale >= 0 &&
						(size_t)cat->pend[k].locale <
							nloc
					? index[cat->pend[k].locale]
					: -1;
			no++;
		}
		if (t) {
			t->noffers = k - i;
			t->price = offers[no - t->noffers].price;
			first[t - cat->v] = no - t->noffers;
		} else {
			dropped += k - i;
		}
		i = k;
	}
	free(cat->offers);
	cat->offers = offers;
	cat->noffers = no;
	for (size_t i = 0; i < cat->count; i++) {
		if (cat->v[i].noffers)
			cat->v[i].offers = offers + first[i];
		byprice[i] = &cat->v[i];
	}
	free(first);
	free(index);
	qsort(byprice, cat->count, sizeof(*byprice), catalog_cmp_price);
	free(cat->byprice);
	cat->byprice = byprice;
	if (dropped) {
		char sentence[128];

		snprintf(sentence, sizeof(sentence),
			 "%zu offers name a type the catalog does not have; "
			 "they were left out",
			 dropped);
		catalog_note(cat, sentence);
	}
	return 0;
}

int catalog_add(struct catalog *cat, const char *provider, const char *name,
		const double *number, const char *const *type, double price,
		char *err, size_t errlen)
{
	int mt = assumption_field_find("node_machinetype");
	struct resolver_instance *t;

	if (cat->count == cat->cap) {
		size_t cap = cat->cap ? cat->cap * 2 : 1024;
		struct resolver_instance *v = realloc(cat->v, cap * sizeof(*v));

		if (!v) {
			snprintf(err, errlen, "catalog: out of memory");
			return -1;
		}
		cat->v = v;
		cat->cap = cap;
	}
	t = &cat->v[cat->count];
	memset(t, 0, sizeof(*t));
	t->provider = catalog_intern(cat, provider);
	t->name = catalog_intern(cat, name);
	t->price = price;
	if (!t->provider || !t->name) {
		snprintf(err, errlen, "catalog: out of memory");
		return -1;
	}
	for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
		t->number[f] = number[f];
		t->type[f] = -1;
		if (!type[f] || !*type[f])
			continue;
		t->type[f] = hierarchy_find(cat->types, f, type[f]);
		if (t->type[f] < 0 && (int)f == mt)
			t->type[f] = hierarchy_add(cat->types, f, type[f], "");
		if (t->type[f] < 0) {
			snprintf(err, errlen,
				 "catalog: %s %s: %s %s is not a known type",
				 provider, name, assumption_fields[f].name,
				 type[f]);
			return -1;
		}
	}
	cat->count++;
	return 0;
}

int catalog_add_offer(struct catalog *cat, const char *provider,
		      const char *name, const char *region, double price,
		      double spot, const char *zones, char *err, size_t errlen)
{
	struct catalog_pending *o;
	int locale = catalog_region_locale(cat, provider, region);

	if (locale < 0) {
		snprintf(err, errlen,
			 "catalog: %s %s: region %s cannot be placed (no "
			 "region type for %s)",
			 provider, name, region, provider);
		return -1;
	}
	if (cat->npend == cat->cappend) {
		size_t cap = cat->cappend ? cat->cappend * 2 : 4096;
		struct catalog_pending *v =
			realloc(cat->pend, cap * sizeof(*v));

		if (!v) {
			snprintf(err, errlen, "catalog: out of memory");
			return -1;
		}
		cat->pend = v;
		cat->cappend = cap;
	}
	o = &cat->pend[cat->npend];
	/* Interned strings repeat: the region of the region table, the
	 * provider of the first type. */
	o->provider = NULL;
	o->region = NULL;
	for (size_t i = 0; i < cat->nregions && !o->region; i++)
		if (cat->regions[i].locale == locale) {
			o->region = cat->regions[i].name;
			o->provider = cat->regions[i].provider;
		}
	o->type = catalog_intern(cat, name);
	o->zones = *zones ? catalog_intern(cat, zones) : "";
	o->price = price;
	o->spot = spot;
	o->locale = locale;
	if (!o->provider || !o->region || !o->type || !o->zones) {
		snprintf(err, errlen, "catalog: out of memory");
		return -1;
	}
	cat->npend++;
	return 0;
}

int catalog_declare(struct catalog *cat, size_t field, const char *name,
		    const char *parent)
{
	return hierarchy_add(cat->types, field, name, parent);
}

int catalog_alias(struct catalog *cat, size_t field, const char *alias,
		  const char *target)
{
	return hierarchy_alias(cat->types, field, alias, target);
}

int catalog_add_local(struct catalog *cat, double vcpus, double memory_bytes,
		      const char *architecture, double gpus, const char *gpu,
		      char *err, size_t errlen)
{
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS] = {0};
	size_t arch = (size_t)assumption_field_find("node_architecture");

	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		number[f] = NAN;
	type[assumption_field_find("node_provider")] = "local";
	type[assumption_field_find("node_machinetype")] = "local";
	number[assumption_field_find("node_vcpus_count")] = vcpus;
	number[assumption_field_find("node_memory_size")] = memory_bytes;
	number[assumption_field_find("accelerator_count")] = gpus;
	if (architecture && hierarchy_find(cat->types, arch, architecture) >= 0)
		type[arch] = architecture;
	if (gpus > 0 && gpu &&
	    hierarchy_find(cat->types,
			   (size_t)assumption_field_find("accelerator"),
			   gpu) >= 0)
		type[assumption_field_find("accelerator")] = gpu;
	if (catalog_add(cat, "local", "local", number, type, 0, err, errlen))
		return -1;
	if (catalog_sort(cat)) {
		snprintf(err, errlen, "catalog: out of memory");
		return -1;
	}
	return 0;
}

size_t catalog_count(const struct catalog *cat)
{
	return cat->count;
}

const struct resolver_instance *catalog_at(const struct catalog *cat, size_t i)
{
	return cat->byprice[i];
}

const struct resolver_instance *
catalog_find(const struct catalog *cat, const char *provider, const char *name)
{
	struct resolver_instance key = {.provider = provider, .name = name};

	if (!cat->count) /* v may be NULL */
		return NULL;
	return bsearch(&key, cat->v, cat->count, sizeof(*cat->v),
		       catalog_cmp_name);
}

size_t catalog_providers(const struct catalog *cat, const char **out,
			 size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < cat->count && n < max; i++)
		if (n == 0 || strcmp(out[n - 1], cat->v[i].provider) != 0)
			out[n++] = cat->v[i].provider;
	return n;
}

const struct resolver_instance *
catalog_provider_type(const struct catalog *cat, const char *provider, size_t i)
{
	size_t lo = 0, hi = cat->count;

	/* First type of the provider, then the i-th after it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(cat->v[mid].provider, provider) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo + i >= cat->count ||
	    strcmp(cat->v[lo + i].provider, provider) != 0)
		return NULL;
	return &cat->v[lo + i];
}

const char *catalog_provider_region(const struct catalog *cat,
				    const char *provider, size_t i)
{
	size_t lo = 0, hi = cat->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(cat->regions[mid].provider, provider) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo + i >= cat->nregions ||
	    strcmp(cat->regions[lo + i].provider, provider) != 0)
		return NULL;
	return cat->regions[lo + i].name;
}

const struct resolver_offer *catalog_offer_in(const struct resolver_instance *t,
					      const char *region)
{
	for (size_t i = 0; i < t->noffers; i++)
		if (strcmp(t->offers[i].region, region) == 0)
			return &t->offers[i];
	return NULL;
}

size_t catalog_offer_count(const struct catalog *cat)
{
	return cat->noffers;
}

const struct hierarchy *catalog_hierarchy(const struct catalog *cat)
{
	return cat->types;
}

const struct resolver_instance *catalog_type_at(const struct catalog *cat,
						size_t i)
{
	return &cat->v[i];
}

size_t catalog_region_count(const struct catalog *cat)
{
	return cat->nregions;
}
