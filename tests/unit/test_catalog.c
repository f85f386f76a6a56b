/* Unit tests of the catalog (catalog/): the compiled-in data loads, agrees
 * with the CSV files it came from, and its hierarchy and ordering hold; and
 * of the local provider's GPU detection (providers/local). */
#include "catalog/catalog.h"
#include "check.h"
#include "providers/local/local.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rows of a CSV file (without the header) whose first column is `first`. */
static size_t csv_rows(const char *path, const char *first)
{
	char line[2048];
	size_t n = 0, len = strlen(first);
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, first, len) == 0 && line[len] == ',')
			n++;
	fclose(f);
	return n;
}

static void test_catalog(const char *data)
{
	char err[512] = "", path[4096];
	struct catalog *cat = catalog_open(err, sizeof(err));
	const struct hierarchy *h;
	const struct resolver_instance *t;
	const char *providers[8];
	size_t ec2 = 0, gcp = 0;
	int arch, mt, vc;

	CHECK(cat != NULL);
	if (!cat) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	snprintf(path, sizeof(path), "%s/instance_types.csv", data);
	CHECK(csv_rows(path, "ec2") > 600);
	CHECK(catalog_count(cat) ==
	      csv_rows(path, "ec2") + csv_rows(path, "gcp"));
	for (size_t i = 0; catalog_provider_type(cat, "ec2", i); i++)
		ec2++;
	for (size_t i = 0; catalog_provider_type(cat, "gcp", i); i++)
		gcp++;
	CHECK(ec2 == csv_rows(path, "ec2"));
	CHECK(gcp == csv_rows(path, "gcp"));
	CHECK(catalog_providers(cat, providers, 8) == 2);

	/* Price order: non-decreasing, unknown prices last. */
	for (size_t i = 1; i < catalog_count(cat); i++) {
		double a = catalog_at(cat, i - 1)->price;
		double b = catalog_at(cat, i)->price;

		if (!isnan(b) && (isnan(a) || a > b)) {
			CHECK(!"catalog not in price order");
			break;
		}
	}

	/* One row checked against the CSV: g5.12xlarge. */
	h = catalog_hierarchy(cat);
	t = catalog_find(cat, "ec2", "g5.12xlarge");
	CHECK(t != NULL);
	if (t) {
		vc = assumption_field_find("node_vcpus_count");
		arch = assumption_field_find("accelerator_architecture");
		mt = assumption_field_find("node_machinetype");
		CHECK(t->number[vc] == 48);
		CHECK(t->price == 5.672);
		CHECK(strcmp(hierarchy_name(h, t->type[arch]), "Ampere") == 0);
		CHECK(strcmp(hierarchy_name(h, t->type[mt]),
			     "EC2Type_G5_12xLarge") == 0);
		/* t3.xlarge is an alias of its machine type. */
		CHECK(hierarchy_find(h, (size_t)mt, "t3.xlarge") ==
		      hierarchy_find(h, (size_t)mt, "EC2Type_T3_xLarge"));
		/* The NVIDIA chain: Hopper <: Ada <: Ampere. */
		CHECK(hierarchy_is_a(
			h, hierarchy_find(h, (size_t)arch, "Hopper"),
			hierarchy_find(h, (size_t)arch, "Ampere")));
		CHECK(!hierarchy_is_a(h,
				      hierarchy_find(h, (size_t)arch, "Ampere"),
				      hierarchy_find(h, (size_t)arch, "Ada")));
	}
	/* local sits under Localhost. */
	{
		size_t p = (size_t)assumption_field_find("node_provider");

		CHECK(hierarchy_is_a(h, hierarchy_find(h, p, "local"),
				     hierarchy_find(h, p, "Localhost")));
		CHECK(hierarchy_is_a(h, hierarchy_find(h, p, "ec2"),
				     hierarchy_find(h, p, "CloudProvider")));
	}
	CHECK(catalog_add_local(cat, 2, 4.0 * 1024 * 1024 * 1024, 1,
				"NVIDIA_A10G", err, sizeof(err)) == 0);
	t = catalog_find(cat, "local", "local");
	CHECK(t && t == catalog_at(cat, 0)); /* price 0 comes first */
	CHECK(t &&
	      t->type[assumption_field_find("accelerator")] ==
		      hierarchy_find(
			      h, (size_t)assumption_field_find("accelerator"),
			      "NVIDIA_A10G"));
	catalog_close(cat);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_gpus(void)
{
	char dir[] = "/tmp/cclfs-gpus.XXXXXX", path[256];
	struct local_features lf;

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	local_detect_gpus("/nonexistent/cclfs", &lf);
	CHECK(lf.gpus == 0 && lf.gpu[0] == '\0');
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/0000:0%d:00.0", dir, i);
		mkdir(path, 0700);
		snprintf(path, sizeof(path), "%s/0000:0%d:00.0/information",
			 dir, i);
		write_file(path, "Model: \t NVIDIA A10G\nIRQ: 1\n");
	}
	local_detect_gpus(dir, &lf);
	CHECK(lf.gpus == 2);
	CHECK(strcmp(lf.gpu, "NVIDIA_A10G") == 0);
	/* A different third GPU: counted, model unknown. */
	snprintf(path, sizeof(path), "%s/0000:09:00.0", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/0000:09:00.0/information", dir);
	write_file(path, "Model: Tesla T4\n");
	local_detect_gpus(dir, &lf);
	CHECK(lf.gpus == 3);
	CHECK(lf.gpu[0] == '\0');
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/0000:0%d:00.0/information",
			 dir, i);
		unlink(path);
		snprintf(path, sizeof(path), "%s/0000:0%d:00.0", dir, i);
		rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/0000:09:00.0/information", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/0000:09:00.0", dir);
	rmdir(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CATALOG_DATA_DIR\n", argv[0]);
		return 2;
	}
	test_catalog(argv[1]);
	test_gpus();
	return check_summary("catalog");
}
