/* The instance-type catalog: the EC2 and GCP types and the platform-type
 * hierarchy of catalog/data (compiled in), imported into SQLite and held as
 * feature vectors in price order, plus the `local` type of this machine. */
#include "catalog/catalog.h"

#include "catalog/csv.h"
#include "catalog/data.h"

#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct catalog {
	struct hierarchy *types;
	struct resolver_instance *v; /* by price */
	size_t count, cap;
	const struct resolver_instance **byname; /* by provider, name */
	char **strings; /* provider and type names the vectors point to */
	size_t nstrings, capstrings;
};

/* The hierarchy kind of each column of platform_types.csv and the other
 * type files, as the assumption file it serves. */
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
};

/* The instance_types.csv column of each assumption file. */
static const struct {
	const char *field;
	const char *column;
} catalog_columns[] = {
	{"node_provider", "provider"},
	{"cluster_locale", "locale"},
	{"node_machinetype", "machine_type"},
	{"node_memory_size", "memory_bytes"},
	{"node_ecu_count", "ecu"},
	{"node_vcpus_count", "vcpus"},
	{"accelerator_count", "accelerator_count"},
	{"accelerator_memory", "accelerator_memory_bytes"},
	{"accelerator_type", "accelerator_type"},
	{"accelerator_manufacturer", "accelerator_manufacturer"},
	{"accelerator_architecture", "accelerator_architecture"},
	{"accelerator", "accelerator"},
	{"processor_manufacturer", "processor_manufacturer"},
	{"processor_microarchitecture", "processor_microarchitecture"},
	{"processor", "processor"},
	{"storage_type", "storage_type"},
	{"storage_size", "storage_bytes"},
	{"network_performance", "network_bits_per_s"},
};

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

/* --- instance types, through SQLite --- */

static const char catalog_schema[] =
	"CREATE TABLE instance_types("
	"  provider TEXT NOT NULL, name TEXT NOT NULL, vcpus REAL,"
	"  memory_bytes REAL, ecu REAL, accelerator_count REAL,"
	"  accelerator_type TEXT, accelerator_manufacturer TEXT,"
	"  accelerator_architecture TEXT, accelerator TEXT,"
	"  accelerator_memory_bytes REAL, processor_manufacturer TEXT,"
	"  processor_microarchitecture TEXT, processor TEXT,"
	"  storage_type TEXT, storage_bytes REAL, network_bits_per_s REAL,"
	"  price_usd_hour REAL, locale TEXT, machine_type TEXT,"
	"  PRIMARY KEY(provider, name));"
	"CREATE INDEX instance_price ON instance_types(price_usd_hour, vcpus,"
	"  name);"
	"CREATE INDEX instance_vcpus ON instance_types(vcpus);"
	"CREATE INDEX instance_memory ON instance_types(memory_bytes);"
	"CREATE INDEX instance_accelerators ON instance_types("
	"  accelerator_count, accelerator);";

static int catalog_sql_fail(sqlite3 *db, const char *what, char *err,
			    size_t errlen)
{
	snprintf(err, errlen, "catalog: %s: %s", what, sqlite3_errmsg(db));
	return -1;
}

static bool catalog_numeric(const char *column)
{
	static const char *const numeric[] = {"vcpus",
					      "memory_bytes",
					      "ecu",
					      "accelerator_count",
					      "accelerator_memory_bytes",
					      "storage_bytes",
					      "network_bits_per_s",
					      "price_usd_hour"};

	for (size_t i = 0; i < sizeof(numeric) / sizeof(*numeric); i++)
		if (strcmp(column, numeric[i]) == 0)
			return true;
	return false;
}

/* Give the types of a provider whose locale is unknown the region the
 * catalog describes them in (cclfs_regions.csv). */
static int catalog_regions(sqlite3 *db, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	struct csv c;
	int rc = 0;

	if (sqlite3_prepare_v2(db,
			       "UPDATE instance_types SET locale = ?2 WHERE "
			       "provider = ?1 AND locale IS NULL",
			       -1, &q, NULL) != SQLITE_OK)
		return catalog_sql_fail(db, "regions", err, errlen);
	csv_open(&c, catalog_data_cclfs_regions,
		 catalog_data_cclfs_regions_size);
	csv_next(&c);
	while (rc == 0 && csv_next(&c) == 1) {
		if (c.count != 2)
			continue;
		sqlite3_bind_text(q, 1, c.field[0], -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(q, 2, c.field[1], -1, SQLITE_TRANSIENT);
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = catalog_sql_fail(db, "regions", err, errlen);
		sqlite3_reset(q);
	}
	sqlite3_finalize(q);
	return rc;
}

/* Insert instance_types.csv, then set machine_type from the extras. */
static int catalog_import(sqlite3 *db, char *err, size_t errlen)
{
	static const char *const columns[] = {"provider",
					      "name",
					      "vcpus",
					      "memory_bytes",
					      "ecu",
					      "accelerator_count",
					      "accelerator_type",
					      "accelerator_manufacturer",
					      "accelerator_architecture",
					      "accelerator",
					      "accelerator_memory_bytes",
					      "processor_manufacturer",
					      "processor_microarchitecture",
					      "processor",
					      "storage_type",
					      "storage_bytes",
					      "network_bits_per_s",
					      "price_usd_hour",
					      "locale"};
	const size_t ncol = sizeof(columns) / sizeof(*columns);
	sqlite3_stmt *ins = NULL, *upd = NULL;
	struct csv c;
	int rc = -1, col[32];

	if (sqlite3_exec(db, catalog_schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return catalog_sql_fail(db, "schema", err, errlen);
	if (sqlite3_prepare_v2(db,
			       "INSERT INTO instance_types VALUES(?1, ?2, ?3, "
			       "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
			       "?14, ?15, ?16, ?17, ?18, ?19, NULL)",
			       -1, &ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "UPDATE instance_types SET machine_type = ?3 "
			       "WHERE provider = ?1 AND name = ?2",
			       -1, &upd, NULL) != SQLITE_OK) {
		catalog_sql_fail(db, "prepare", err, errlen);
		goto out;
	}
	csv_open(&c, catalog_data_instance_types,
		 catalog_data_instance_types_size);
	csv_next(&c);
	for (size_t i = 0; i < ncol; i++) {
		/* The CSV calls the type name instance_type. */
		col[i] = csv_column(&c, i == 1 ? "instance_type" : columns[i]);
		if (col[i] < 0) {
			snprintf(err, errlen,
				 "catalog: instance_types.csv has no column "
				 "%s",
				 columns[i]);
			goto out;
		}
	}
	while (csv_next(&c) == 1) {
		for (size_t i = 0; i < ncol; i++) {
			const char *v =
				(size_t)col[i] < c.count ? c.field[col[i]] : "";

			if (!*v)
				sqlite3_bind_null(ins, (int)i + 1);
			else if (catalog_numeric(columns[i]))
				sqlite3_bind_double(ins, (int)i + 1,
						    strtod(v, NULL));
			else
				sqlite3_bind_text(ins, (int)i + 1, v, -1,
						  SQLITE_TRANSIENT);
		}
		if (sqlite3_step(ins) != SQLITE_DONE) {
			catalog_sql_fail(db, "instance_types.csv", err, errlen);
			goto out;
		}
		sqlite3_reset(ins);
	}
	csv_open(&c, catalog_data_instance_extras,
		 catalog_data_instance_extras_size);
	csv_next(&c);
	{
		int p = csv_column(&c, "provider");
		int n = csv_column(&c, "instance_type");
		int m = csv_column(&c, "machine_type");

		if (p < 0 || n < 0 || m < 0) {
			snprintf(err, errlen,
				 "catalog: instance_extras.csv "
				 "lacks a column");
			goto out;
		}
		while (csv_next(&c) == 1) {
			if ((size_t)m >= c.count)
				continue;
			sqlite3_bind_text(upd, 1, c.field[p], -1,
					  SQLITE_TRANSIENT);
			sqlite3_bind_text(upd, 2, c.field[n], -1,
					  SQLITE_TRANSIENT);
			sqlite3_bind_text(upd, 3, c.field[m], -1,
					  SQLITE_TRANSIENT);
			if (sqlite3_step(upd) != SQLITE_DONE) {
				catalog_sql_fail(db, "instance_extras.csv", err,
						 errlen);
				goto out;
			}
			sqlite3_reset(upd);
		}
	}
	if (catalog_regions(db, err, errlen))
		goto out;
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		catalog_sql_fail(db, "commit", err, errlen);
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	return rc;
}

/* Read every imported type back as a feature vector. */
static int catalog_vectors(struct catalog *cat, sqlite3 *db, char *err,
			   size_t errlen)
{
	char sql[1024];
	sqlite3_stmt *q;
	size_t o;
	int rc = 0;

	o = (size_t)snprintf(sql, sizeof(sql),
			     "SELECT provider, name, price_usd_hour");
	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		o += (size_t)snprintf(sql + o, sizeof(sql) - o, ", %s",
				      catalog_columns[f].column);
	snprintf(sql + o, sizeof(sql) - o,
		 " FROM instance_types ORDER BY price_usd_hour IS NULL, "
		 "price_usd_hour, vcpus, name");
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		return catalog_sql_fail(db, "select", err, errlen);
	while (rc == 0 && sqlite3_step(q) == SQLITE_ROW) {
		double number[RESOLVER_FIELDS];
		const char *type[RESOLVER_FIELDS];

		for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
			int i = (int)f + 3;
			int fi =
				assumption_field_find(catalog_columns[f].field);

			number[fi] = NAN;
			type[fi] = NULL;
			if (sqlite3_column_type(q, i) == SQLITE_NULL)
				continue;
			if (assumption_fields[fi].kind == ASSUMPTION_TYPE)
				type[fi] =
					(const char *)sqlite3_column_text(q, i);
			else
				number[fi] = sqlite3_column_double(q, i);
		}
		rc = catalog_add(cat, (const char *)sqlite3_column_text(q, 0),
				 (const char *)sqlite3_column_text(q, 1),
				 number, type,
				 sqlite3_column_type(q, 2) == SQLITE_NULL
					 ? NAN
					 : sqlite3_column_double(q, 2),
				 err, errlen);
	}
	sqlite3_finalize(q);
	return rc;
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
			       t->name) == 0)
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
	    catalog_load_types(cat, catalog_data_machine_types,
			       catalog_data_machine_types_size,
			       "machine_types.csv", err, errlen) ||
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
	return cat;
}

struct catalog *catalog_open(char *err, size_t errlen)
{
	struct catalog *cat = catalog_open_empty(err, errlen);
	sqlite3 *db = NULL;

	if (!cat)
		return NULL;
	if (sqlite3_open_v2(":memory:", &db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
			    NULL) != SQLITE_OK ||
	    catalog_import(db, err, errlen) ||
	    catalog_vectors(cat, db, err, errlen) ||
	    catalog_type_aliases(cat, err, errlen) || catalog_sort(cat)) {
		if (db && !*err)
			catalog_sql_fail(db, "open", err, errlen);
		sqlite3_close(db);
		catalog_close(cat);
		return NULL;
	}
	sqlite3_close(db);
	return cat;
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
	free(cat->byname);
	free(cat);
}

static int catalog_cmp_price(const void *pa, const void *pb)
{
	const struct resolver_instance *a = pa, *b = pb;
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
	const struct resolver_instance *a = *(const void *const *)pa;
	const struct resolver_instance *b = *(const void *const *)pb;
	int c = strcmp(a->provider, b->provider);

	return c ? c : strcmp(a->name, b->name);
}

int catalog_sort(struct catalog *cat)
{
	const struct resolver_instance **byname;

	qsort(cat->v, cat->count, sizeof(*cat->v), catalog_cmp_price);
	byname = realloc(cat->byname, cat->count * sizeof(*byname));
	if (!byname)
		return -1;
	for (size_t i = 0; i < cat->count; i++)
		byname[i] = &cat->v[i];
	qsort(byname, cat->count, sizeof(*byname), catalog_cmp_name);
	cat->byname = byname;
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
		      double gpus, const char *gpu, char *err, size_t errlen)
{
	double number[RESOLVER_FIELDS];
	const char *type[RESOLVER_FIELDS] = {0};

	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		number[f] = NAN;
	type[assumption_field_find("node_provider")] = "local";
	type[assumption_field_find("node_machinetype")] = "local";
	number[assumption_field_find("node_vcpus_count")] = vcpus;
	number[assumption_field_find("node_memory_size")] = memory_bytes;
	number[assumption_field_find("accelerator_count")] = gpus;
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
	return &cat->v[i];
}

const struct resolver_instance *
catalog_find(const struct catalog *cat, const char *provider, const char *name)
{
	size_t lo = 0, hi = cat->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct resolver_instance *t = cat->byname[mid];
		int c = strcmp(t->provider, provider);

		if (c == 0)
			c = strcmp(t->name, name);
		if (c == 0)
			return t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

size_t catalog_providers(const struct catalog *cat, const char **out,
			 size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < cat->count && n < max; i++)
		if (n == 0 || strcmp(out[n - 1], cat->byname[i]->provider) != 0)
			out[n++] = cat->byname[i]->provider;
	return n;
}

const struct resolver_instance *
catalog_provider_type(const struct catalog *cat, const char *provider, size_t i)
{
	size_t lo = 0, hi = cat->count;

	/* First type of the provider, then the i-th after it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(cat->byname[mid]->provider, provider) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo + i >= cat->count ||
	    strcmp(cat->byname[lo + i]->provider, provider) != 0)
		return NULL;
	return cat->byname[lo + i];
}

const struct hierarchy *catalog_hierarchy(const struct catalog *cat)
{
	return cat->types;
}
