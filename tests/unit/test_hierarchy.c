/* Unit tests of the platform-type hierarchy (resolver/hierarchy): declaring
 * types and aliases, lookups, the subtype test, missing parents, cycles and
 * suggestions for misspelt names. */
#include "check.h"
#include "resolver/hierarchy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Any two distinct fields (indices into assumption_fields). */
enum { ARCH = 10, MACHINE = 2, PROC = 13 };

static bool str_eq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static void test_chain(void)
{
	struct hierarchy *h = hierarchy_new();
	int root, volta, turing, ampere, ada, hopper;

	CHECK(h != NULL);
	CHECK(hierarchy_count(h) == 0);
	root = hierarchy_add(h, ARCH, "NVIDIAArchitecture", NULL);
	volta = hierarchy_add(h, ARCH, "Volta", "NVIDIAArchitecture");
	turing = hierarchy_add(h, ARCH, "Turing", "Volta");
	ampere = hierarchy_add(h, ARCH, "Ampere", "Turing");
	ada = hierarchy_add(h, ARCH, "Ada", "Ampere");
	hopper = hierarchy_add(h, ARCH, "Hopper", "Ada");
	CHECK(root >= 0 && volta >= 0 && turing >= 0);
	CHECK(ampere >= 0 && ada >= 0 && hopper >= 0);
	CHECK(hierarchy_count(h) == 6);
	CHECK(str_eq(hierarchy_name(h, ada), "Ada"));
	CHECK(hierarchy_name(h, -1) == NULL);
	CHECK(hierarchy_name(h, 6) == NULL);
	CHECK(hierarchy_check(h, NULL) == 0);

	/* Subtypes at every depth, never the other way round. */
	CHECK(hierarchy_is_a(h, ada, ampere));
	CHECK(!hierarchy_is_a(h, ampere, ada));
	CHECK(hierarchy_is_a(h, ada, ada));
	CHECK(hierarchy_is_a(h, root, root));
	CHECK(hierarchy_is_a(h, hopper, volta));
	CHECK(hierarchy_is_a(h, hopper, root));
	CHECK(hierarchy_is_a(h, turing, root));
	CHECK(!hierarchy_is_a(h, root, hopper));
	CHECK(!hierarchy_is_a(h, volta, turing));
	CHECK(!hierarchy_is_a(h, -1, root));
	CHECK(!hierarchy_is_a(h, ada, -1));
	CHECK(!hierarchy_is_a(h, -1, -1));
	CHECK(!hierarchy_is_a(h, ada, 99));

	/* Lookups ignore case. */
	CHECK(hierarchy_find(h, ARCH, "Ada") == ada);
	CHECK(hierarchy_find(h, ARCH, "ADA") == ada);
	CHECK(hierarchy_find(h, ARCH, "hOpPeR") == hopper);
	CHECK(hierarchy_find(h, ARCH, "Blackwell") < 0);
	CHECK(hierarchy_find(h, ARCH, "") < 0);
	CHECK(hierarchy_find(h, ARCH, NULL) < 0);
	CHECK(hierarchy_find(h, PROC, "Ada") < 0);
	CHECK(hierarchy_find(h, 64, "Ada") < 0);
	CHECK(str_eq(hierarchy_spelling(h, ARCH, "aMpErE"), "Ampere"));
	CHECK(hierarchy_spelling(h, ARCH, "Blackwell") == NULL);

	/* Declaring again: same parent is a no-op, another is an error. */
	CHECK(hierarchy_add(h, ARCH, "Ada", "Ampere") == ada);
	CHECK(hierarchy_add(h, ARCH, "ada", "AMPERE") == ada);
	CHECK(hierarchy_add(h, ARCH, "Ada", "Turing") < 0);
	CHECK(hierarchy_add(h, ARCH, "Ada", NULL) < 0);
	CHECK(hierarchy_add(h, ARCH, "NVIDIAArchitecture", "") == root);
	CHECK(hierarchy_add(h, ARCH, "NVIDIAArchitecture", NULL) == root);
	CHECK(hierarchy_add(h, ARCH, "Volta", NULL) < 0);
	CHECK(hierarchy_count(h) == 6);
	CHECK(hierarchy_is_a(h, ada, ampere));

	/* Bad arguments. */
	CHECK(hierarchy_add(h, ARCH, "", NULL) < 0);
	CHECK(hierarchy_add(h, ARCH, NULL, NULL) < 0);
	CHECK(hierarchy_add(h, 64, "X", NULL) < 0);
	CHECK(hierarchy_add(NULL, ARCH, "X", NULL) < 0);
	CHECK(hierarchy_count(h) == 6);
	hierarchy_free(h);
	hierarchy_free(NULL);
}

static void test_late_parents(void)
{
	struct hierarchy *h = hierarchy_new();
	const char *missing = NULL;
	int hopper, ada, ampere, root;

	/* Children first, their parents afterwards. */
	hopper = hierarchy_add(h, ARCH, "Hopper", "Ada");
	ada = hierarchy_add(h, ARCH, "Ada", "Ampere");
	CHECK(hopper >= 0 && ada >= 0);
	CHECK(hierarchy_is_a(h, hopper, ada));
	CHECK(hierarchy_check(h, &missing) < 0);
	CHECK(str_eq(missing, "Ampere"));
	ampere = hierarchy_add(h, ARCH, "Ampere", "NVIDIAArchitecture");
	CHECK(ampere >= 0);
	missing = NULL;
	CHECK(hierarchy_check(h, &missing) < 0);
	CHECK(str_eq(missing, "NVIDIAArchitecture"));
	CHECK(hierarchy_is_a(h, hopper, ampere));
	CHECK(!hierarchy_is_a(h, ampere, hopper));
	root = hierarchy_add(h, ARCH, "NVIDIAArchitecture", NULL);
	CHECK(root >= 0);
	missing = "unchanged";
	CHECK(hierarchy_check(h, &missing) == 0);
	CHECK(str_eq(missing, "unchanged"));
	CHECK(hierarchy_is_a(h, hopper, root));
	CHECK(hierarchy_is_a(h, ada, root));
	CHECK(!hierarchy_is_a(h, root, ada));
	/* A conflicting re-declaration is still caught once resolved. */
	CHECK(hierarchy_add(h, ARCH, "Hopper", "Ampere") < 0);
	CHECK(hierarchy_add(h, ARCH, "Hopper", "ada") == hopper);
	hierarchy_free(h);
}

static void test_fields(void)
{
	struct hierarchy *h = hierarchy_new();
	int a, b;

	/* The same name in two fields is two types. */
	a = hierarchy_add(h, ARCH, "Intel", NULL);
	b = hierarchy_add(h, PROC, "Intel", NULL);
	CHECK(a >= 0 && b >= 0 && a != b);
	CHECK(hierarchy_count(h) == 2);
	CHECK(hierarchy_find(h, ARCH, "intel") == a);
	CHECK(hierarchy_find(h, PROC, "INTEL") == b);
	CHECK(!hierarchy_is_a(h, a, b));
	/* A parent is looked up in the child's own field. */
	CHECK(hierarchy_add(h, MACHINE, "Xeon", "Intel") >= 0);
	CHECK(hierarchy_check(h, NULL) < 0);
	hierarchy_free(h);
}

static void test_aliases(void)
{
	struct hierarchy *h = hierarchy_new();
	int t3, t3x, t3l, m5;

	t3 = hierarchy_add(h, MACHINE, "EC2Type_T3", "EC2Type");
	CHECK(hierarchy_add(h, MACHINE, "EC2Type", NULL) >= 0);
	t3x = hierarchy_add(h, MACHINE, "EC2Type_T3_xLarge", "EC2Type_T3");
	t3l = hierarchy_add(h, MACHINE, "EC2Type_T3_Large", "EC2Type_T3");
	m5 = hierarchy_add(h, MACHINE, "EC2Type_M5", "EC2Type");
	CHECK(t3 >= 0 && t3x >= 0 && t3l >= 0 && m5 >= 0);
	CHECK(hierarchy_alias(h, MACHINE, "t3.xlarge", "EC2Type_T3_xLarge") ==
	      0);
	CHECK(hierarchy_alias(h, MACHINE, "t3.large", "ec2type_t3_large") == 0);
	CHECK(hierarchy_find(h, MACHINE, "t3.xlarge") == t3x);
	CHECK(hierarchy_find(h, MACHINE, "T3.XLARGE") == t3x);
	CHECK(hierarchy_find(h, ARCH, "t3.xlarge") < 0);
	CHECK(str_eq(hierarchy_spelling(h, MACHINE, "T3.XLARGE"), "t3.xlarge"));
	CHECK(str_eq(hierarchy_spelling(h, MACHINE, "ec2type_t3_xlarge"),
		     "EC2Type_T3_xLarge"));
	CHECK(str_eq(hierarchy_name(h, hierarchy_find(h, MACHINE, "t3.xlarge")),
		     "EC2Type_T3_xLarge"));
	CHECK(hierarchy_is_a(h, hierarchy_find(h, MACHINE, "t3.xlarge"), t3));
	CHECK(hierarchy_count(h) == 5);

	/* Aliasing again to the same type is fine, to another one not. */
	CHECK(hierarchy_alias(h, MACHINE, "T3.xlarge", "EC2Type_T3_xLarge") ==
	      0);
	CHECK(hierarchy_alias(h, MACHINE, "t3.xlarge", "EC2Type_T3_Large") < 0);
	CHECK(hierarchy_alias(h, MACHINE, "EC2Type_M5", "EC2Type_T3_xLarge") <
	      0);
	CHECK(hierarchy_alias(h, MACHINE, "ec2type_t3_xlarge",
			      "EC2Type_T3_xLarge") == 0);
	CHECK(hierarchy_alias(h, MACHINE, "m5", "EC2Type_M6") < 0);
	CHECK(hierarchy_alias(h, ARCH, "m5", "EC2Type_M5") < 0);
	CHECK(hierarchy_alias(h, MACHINE, "", "EC2Type_M5") < 0);
	CHECK(hierarchy_alias(h, MACHINE, "m5", NULL) < 0);
	/* An alias of an alias names the same type. */
	CHECK(hierarchy_alias(h, MACHINE, "t3x", "t3.xlarge") == 0);
	CHECK(hierarchy_find(h, MACHINE, "T3X") == t3x);
	/* A type cannot take a name an alias already has. */
	CHECK(hierarchy_add(h, MACHINE, "t3.large", "EC2Type_T3") < 0);
	CHECK(hierarchy_count(h) == 5);
	/* A parent may be named by an alias. */
	CHECK(hierarchy_alias(h, MACHINE, "m5", "EC2Type_M5") == 0);
	CHECK(hierarchy_add(h, MACHINE, "EC2Type_M5_Large", "m5") >= 0);
	CHECK(hierarchy_is_a(h, hierarchy_find(h, MACHINE, "EC2Type_M5_Large"),
			     m5));
	CHECK(hierarchy_check(h, NULL) == 0);
	hierarchy_free(h);
}

static void test_copies_and_lengths(void)
{
	struct hierarchy *h = hierarchy_new();
	char name[200], parent[200];
	int id;

	/* The caller's strings may change or go away afterwards. */
	strcpy(name, "Zen4");
	strcpy(parent, "Zen");
	id = hierarchy_add(h, PROC, name, parent);
	CHECK(hierarchy_alias(h, PROC, strcpy(name, "zen-4"), "Zen4") == 0);
	memset(name, 'q', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	strcpy(parent, "Nope");
	CHECK(str_eq(hierarchy_name(h, id), "Zen4"));
	CHECK(hierarchy_find(h, PROC, "ZEN-4") == id);
	CHECK(hierarchy_add(h, PROC, "Zen", NULL) >= 0);
	CHECK(hierarchy_is_a(h, id, hierarchy_find(h, PROC, "zen")));

	/* 127 bytes are fine, 128 are not. */
	memset(name, 'a', 127);
	name[127] = '\0';
	CHECK(hierarchy_add(h, PROC, name, NULL) >= 0);
	CHECK(hierarchy_find(h, PROC, name) >= 0);
	name[127] = 'a';
	name[128] = '\0';
	CHECK(hierarchy_add(h, PROC, name, NULL) < 0);
	CHECK(hierarchy_add(h, PROC, "Short", name) < 0);
	CHECK(hierarchy_alias(h, PROC, name, "Zen") < 0);
	CHECK(hierarchy_find(h, PROC, name) < 0);
	CHECK(hierarchy_count(h) == 3);
	hierarchy_free(h);
}

static void test_cycles(void)
{
	struct hierarchy *h = hierarchy_new();
	int a, b, c, d;

	a = hierarchy_add(h, ARCH, "A", "B");
	b = hierarchy_add(h, ARCH, "B", "A");
	c = hierarchy_add(h, ARCH, "C", "A");
	d = hierarchy_add(h, ARCH, "D", NULL);
	CHECK(a >= 0 && b >= 0 && c >= 0 && d >= 0);
	/* A type cannot be its own parent. */
	CHECK(hierarchy_add(h, ARCH, "E", "e") < 0);
	CHECK(hierarchy_check(h, NULL) == 0);
	CHECK(hierarchy_is_a(h, a, b));
	CHECK(hierarchy_is_a(h, b, a));
	CHECK(hierarchy_is_a(h, c, b));
	CHECK(!hierarchy_is_a(h, a, d));
	CHECK(!hierarchy_is_a(h, c, d));
	CHECK(!hierarchy_is_a(h, a, c));
	hierarchy_free(h);
}

static void test_suggest(void)
{
	struct hierarchy *h = hierarchy_new();
	const char *out[16];
	size_t n;

	hierarchy_add(h, ARCH, "NVIDIAArchitecture", NULL);
	hierarchy_add(h, ARCH, "Volta", "NVIDIAArchitecture");
	hierarchy_add(h, ARCH, "Turing", "Volta");
	hierarchy_add(h, ARCH, "Ampere", "Turing");
	hierarchy_add(h, ARCH, "Ada", "Ampere");
	hierarchy_add(h, ARCH, "Hopper", "Ada");
	hierarchy_add(h, MACHINE, "EC2Type_T3_xLarge", NULL);
	hierarchy_add(h, MACHINE, "EC2Type_T3_Large", NULL);
	hierarchy_alias(h, MACHINE, "t3.xlarge", "EC2Type_T3_xLarge");
	hierarchy_alias(h, MACHINE, "t3.large", "EC2Type_T3_Large");

	n = hierarchy_suggest(h, ARCH, "Amper", out, 3);
	CHECK(n == 3);
	CHECK(n >= 1 && str_eq(out[0], "Ampere"));
	n = hierarchy_suggest(h, ARCH, "aMPERE", out, 1);
	CHECK(n == 1 && str_eq(out[0], "Ampere"));
	/* Every spelling of the field at most, none of another field. */
	n = hierarchy_suggest(h, ARCH, "Amper", out, 16);
	CHECK(n == 6);
	for (size_t i = 0; i < n; i++)
		CHECK(hierarchy_find(h, ARCH, out[i]) >= 0);

	n = hierarchy_suggest(h, MACHINE, "t3.xlarg", out, 4);
	CHECK(n == 4);
	CHECK(n >= 2 && str_eq(out[0], "t3.xlarge"));
	CHECK(n >= 2 && str_eq(out[1], "t3.large"));
	n = hierarchy_suggest(h, MACHINE, "T3.LARGE", out, 2);
	CHECK(n == 2 && str_eq(out[0], "t3.large") &&
	      str_eq(out[1], "t3.xlarge"));

	/* Ties are broken by name, case-insensitively. */
	{
		struct hierarchy *t = hierarchy_new();

		hierarchy_add(t, PROC, "bx", NULL);
		hierarchy_add(t, PROC, "Ax", NULL);
		hierarchy_add(t, PROC, "cx", NULL);
		n = hierarchy_suggest(t, PROC, "zx", out, 3);
		CHECK(n == 3 && str_eq(out[0], "Ax") && str_eq(out[1], "bx") &&
		      str_eq(out[2], "cx"));
		n = hierarchy_suggest(t, PROC, "zx", out, 2);
		CHECK(n == 2 && str_eq(out[0], "Ax") && str_eq(out[1], "bx"));
		/* At the same distance a substring match ranks first. */
		hierarchy_add(t, PROC, "Aba", NULL);
		hierarchy_add(t, PROC, "Adam", NULL);
		n = hierarchy_suggest(t, PROC, "ada", out, 2);
		CHECK(n == 2 && str_eq(out[0], "Adam") &&
		      str_eq(out[1], "Aba"));
		hierarchy_free(t);
	}

	CHECK(hierarchy_suggest(h, ARCH, "Amper", out, 0) == 0);
	CHECK(hierarchy_suggest(h, PROC, "Amper", out, 16) == 0);
	CHECK(hierarchy_suggest(h, ARCH, NULL, out, 16) == 0);
	/* A query longer than any name still works. */
	{
		char longq[300];

		memset(longq, 'x', sizeof(longq) - 1);
		longq[sizeof(longq) - 1] = '\0';
		memcpy(longq, "Hopper", 6);
		CHECK(hierarchy_suggest(h, ARCH, longq, out, 1) == 1);
		CHECK(str_eq(out[0], "Hopper"));
	}
	hierarchy_free(h);
}

static void test_many(void)
{
	struct hierarchy *h = hierarchy_new();
	char name[64], parent[64];
	const char *out[5];
	int ok = 1, found = 1, chain = 1;

	/* 5,000 types in 50 trees of 100-long chains, parents declared after
	 * children half the time, plus 1,000 aliases. */
	for (int i = 0; i < 5000; i++) {
		int tree = i % 50, depth = i / 50;
		int d = tree % 2 ? 99 - depth : depth;

		snprintf(name, sizeof(name), "Type_%d_%d", tree, d);
		snprintf(parent, sizeof(parent), "Type_%d_%d", tree, d - 1);
		if (hierarchy_add(h, ARCH, name, d ? parent : NULL) < 0)
			ok = 0;
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "alias.%d", i);
		snprintf(parent, sizeof(parent), "type_%d_%d", i % 50, i / 50);
		if (hierarchy_alias(h, ARCH, name, parent) < 0)
			ok = 0;
	}
	CHECK(ok);
	CHECK(hierarchy_count(h) == 5000);
	CHECK(hierarchy_check(h, NULL) == 0);
	for (int i = 0; i < 5000; i++) {
		int id;

		snprintf(name, sizeof(name), "TYPE_%d_%d", i % 50, i / 50);
		id = hierarchy_find(h, ARCH, name);
		if (id < 0 || strcasecmp(hierarchy_name(h, id), name) != 0)
			found = 0;
	}
	CHECK(found);
	for (int t = 0; t < 50; t++) {
		int leaf, root;

		snprintf(name, sizeof(name), "Type_%d_99", t);
		leaf = hierarchy_find(h, ARCH, name);
		snprintf(name, sizeof(name), "Type_%d_0", t);
		root = hierarchy_find(h, ARCH, name);
		if (!hierarchy_is_a(h, leaf, root) ||
		    hierarchy_is_a(h, root, leaf))
			chain = 0;
		snprintf(name, sizeof(name), "Type_%d_0", (t + 1) % 50);
		if (hierarchy_is_a(h, leaf, hierarchy_find(h, ARCH, name)))
			chain = 0;
	}
	CHECK(chain);
	CHECK(hierarchy_find(h, ARCH, "ALIAS.999") ==
	      hierarchy_find(h, ARCH, "Type_49_19"));
	CHECK(hierarchy_suggest(h, ARCH, "Type_7_4x", out, 5) == 5);
	CHECK(str_eq(out[0], "Type_7_4"));
	hierarchy_free(h);
}

int main(void)
{
	test_chain();
	test_late_parents();
	test_fields();
	test_aliases();
	test_copies_and_lengths();
	test_cycles();
	test_suggest();
	test_many();
	return check_summary("hierarchy");
}
