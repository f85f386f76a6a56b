/* Unit tests of the catalog (catalog/): the compiled-in data loads, agrees
 * with the CSV files it came from, its hierarchy, offers and ordering hold,
 * a provider's rows are replaced by a refresh's; and of the local
 * provider's GPU detection (providers/local). */
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
	snprintf(path, sizeof(path), "%s/offers.csv", data);
	CHECK(csv_rows(path, "ec2") > 19000);
	CHECK(catalog_offer_count(cat) ==
	      csv_rows(path, "ec2") + csv_rows(path, "gcp"));
	snprintf(path, sizeof(path), "%s/types.csv", data);
	CHECK(csv_rows(path, "ec2") > 1200);
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
		/* Its offers: us-east-1 priced, with zones; others unpriced. */
		CHECK(catalog_offer_in(t, "us-east-1") &&
		      catalog_offer_in(t, "us-east-1")->price == 5.672 &&
		      strstr(catalog_offer_in(t, "us-east-1")->zones,
			     "us-east-1"));
		CHECK(catalog_offer_in(t, "eu-west-1") &&
		      isnan(catalog_offer_in(t, "eu-west-1")->price));
		CHECK(t->offers[0].price == 5.672); /* priced first */
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
		/* v2: Blackwell <: Hopper. */
		CHECK(hierarchy_is_a(
			h, hierarchy_find(h, (size_t)arch, "Blackwell"),
			hierarchy_find(h, (size_t)arch, "Hopper")));
	}
	/* local sits under Localhost. */
	{
		size_t p = (size_t)assumption_field_find("node_provider");

		CHECK(hierarchy_is_a(h, hierarchy_find(h, p, "local"),
				     hierarchy_find(h, p, "Localhost")));
		CHECK(hierarchy_is_a(h, hierarchy_find(h, p, "ec2"),
				     hierarchy_find(h, p, "CloudProvider")));
	}
	CHECK(catalog_add_local(cat, 2, 4.0 * 1024 * 1024 * 1024, "aarch64", 1,
				"NVIDIA_A10G", err, sizeof(err)) == 0);
	t = catalog_find(cat, "local", "local");
	CHECK(t && t == catalog_at(cat, 0)); /* price 0 comes first */
	CHECK(t &&
	      t->type[assumption_field_find("accelerator")] ==
		      hierarchy_find(
			      h, (size_t)assumption_field_find("accelerator"),
			      "NVIDIA_A10G"));
	/* aarch64 is the catalog's alias of arm64. */
	CHECK(t && t->type[assumption_field_find("node_architecture")] ==
			   hierarchy_find(h,
					  (size_t)assumption_field_find(
						  "node_architecture"),
					  "arm64"));
	CHECK(t && t->noffers == 0);
	catalog_close(cat);
}

/* A refresh's rows replace the provider's compiled-in ones, and what the
 * hierarchy does not know is placed and reported. */
static void test_catalog_source(void)
{
	static const char types[] =
		"provider,instance_type,vcpus,memory_bytes,accelerator_count,"
		"accelerator_manufacturer,accelerator,architecture\n"
		"ec2,t3.xlarge,4,17179869184,0,,,x86_64\n"
		"ec2,p9.48xlarge,192,2199023255552,8,NVIDIA,GB300,x86_64\n";
	static const char offers[] = "instance_type,region,price_usd_hour,"
				     "spot_price_usd_hour,zones\n"
				     "t3.xlarge,eu-west-1,0.1824,0.05,"
				     "eu-west-1a eu-west-1b\n"
				     "t3.xlarge,mars-north-1,9,,\n"
				     "p9.48xlarge,us-east-1,99,,\n"
				     "gone.large,us-east-1,1,,\n";
	struct catalog_source src = {"ec2", types, sizeof(types) - 1, offers,
				     sizeof(offers) - 1};
	char err[512] = "";
	struct catalog *cat = catalog_open_with(&src, 1, err, sizeof(err));
	const struct resolver_instance *t;
	const struct hierarchy *h;
	size_t ec2 = 0, acc = (size_t)assumption_field_find("accelerator");

	CHECK(cat != NULL);
	if (!cat) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	h = catalog_hierarchy(cat);
	for (size_t i = 0; catalog_provider_type(cat, "ec2", i); i++)
		ec2++;
	CHECK(ec2 == 2);
	CHECK(catalog_find(cat, "gcp", "a3-highgpu-8g") != NULL);
	t = catalog_find(cat, "ec2", "t3.xlarge");
	CHECK(t && t->noffers == 2 && t->price == 0.1824);
	CHECK(t && catalog_offer_in(t, "eu-west-1") &&
	      catalog_offer_in(t, "eu-west-1")->spot == 0.05 &&
	      strcmp(catalog_offer_in(t, "eu-west-1")->zones,
		     "eu-west-1a eu-west-1b") == 0);
	/* The compiled-in alias still names the machine type. */
	CHECK(t && hierarchy_find(
			   h, (size_t)assumption_field_find("node_machinetype"),
			   "t3.xlarge") >= 0);
	t = catalog_find(cat, "ec2", "p9.48xlarge");
	CHECK(t && t->type[acc] >= 0 &&
	      hierarchy_is_a(h, t->type[acc],
			     hierarchy_find(h, acc, "NVIDIAAccelerator")));
	CHECK(strstr(catalog_notes(cat), "GB300") != NULL);
	CHECK(strstr(catalog_notes(cat), "mars-north-1") != NULL);
	CHECK(strstr(catalog_notes(cat), "1 offers name a type") != NULL);
	CHECK(catalog_provider_region(cat, "ec2", 0) != NULL);
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
	test_catalog_source();
	test_catalog(argv[1]);
	test_gpus();
	return check_summary("catalog");
}
