/* The names of a gcp cluster's resources (providers/gcp/gcp_names.c, pure):
 * the handle's label encoding and its reverse, the hash of an encoding too
 * long for a label, the name prefix and the RFC 1035 instance names made from
 * it, requestIds, the rank an instance name carries, and the last element of
 * a URL. */
#include "check.h"
#include "providers/gcp/gcp_names.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define TOKEN "0123456789abcdef0123456789abcdef"

/* A label value: at most 63 of [a-z0-9_-]. */
static bool label_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63)
		return false;
	for (const char *p = s; *p; p++)
		if (!islower((unsigned char)*p) &&
		    !isdigit((unsigned char)*p) && *p != '_' && *p != '-')
			return false;
	return true;
}

/* An RFC 1035 name as Compute Engine takes one: a lowercase letter, then
 * lowercase letters, digits and '-', not ending with '-', at most 63. */
static bool rfc1035(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || !islower((unsigned char)s[0]) ||
	    s[n - 1] == '-')
		return false;
	for (const char *p = s; *p; p++)
		if (!islower((unsigned char)*p) &&
		    !isdigit((unsigned char)*p) && *p != '-')
			return false;
	return true;
}

/* "h-" and 16 lowercase hex digits. */
static bool is_hash(const char *s)
{
	if (strlen(s) != 18 || strncmp(s, "h-", 2) != 0)
		return false;
	for (const char *p = s + 2; *p; p++)
		if (!isdigit((unsigned char)*p) && (*p < 'a' || *p > 'f'))
			return false;
	return true;
}

static void test_label_encode(void)
{
	static const struct {
		const char *handle, *label;
	} cases[] = {
		{"h1", "h1"},
		{"my-cluster-2", "my-cluster-2"},
		{"A", "_a"},
		{"MyCluster", "_my_cluster"},
		{"a.b", "a_-b"},
		{"a_b", "a__b"},
		{"9", "9"},
		{"-", "-"},
		{"X.Y_z-1", "_x_-_y__z-1"},
		{"...", "_-_-_-"},
		{"___", "______"},
	};
	char out[GCP_LABEL_MAX], back[72];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(out, 'q', sizeof(out));
		CHECK(gcp_label_encode(cases[i].handle, out, sizeof(out)) == 0);
		CHECK(strcmp(out, cases[i].label) == 0);
		CHECK(label_ok(out));
		CHECK(gcp_label_decode(out, back, sizeof(back)) == 0);
		CHECK(strcmp(back, cases[i].handle) == 0);
	}

	/* Not handles: empty, longer than 64, characters outside
	 * [A-Za-z0-9._-]. */
	static const char *const bad[] = {"",	  "a/b", "a b", "a:b", "é",
					  "a\nb", "a+b", "a@b", "a~b", "a,b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(gcp_label_encode(bad[i], out, sizeof(out)) == -1);
	char h65[66];
	memset(h65, 'a', 65);
	h65[65] = '\0';
	CHECK(gcp_label_encode(h65, out, sizeof(out)) == -1);
	/* The output must hold any label. */
	char small[GCP_LABEL_MAX - 1];
	CHECK(gcp_label_encode("h1", small, sizeof(small)) == -1);
}

static void test_label_hash(void)
{
	char handle[72], out[GCP_LABEL_MAX], other[GCP_LABEL_MAX], back[72];

	/* 63 of the label's characters are kept as they are. */
	memset(handle, 'a', 63);
	handle[63] = '\0';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(strcmp(out, handle) == 0);
	CHECK(gcp_label_decode(out, back, sizeof(back)) == 0);
	CHECK(strcmp(back, handle) == 0);

	/* 64 lowercase letters: one too many, a hash. */
	memset(handle, 'a', 64);
	handle[64] = '\0';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(is_hash(out));
	CHECK(label_ok(out));
	CHECK(gcp_label_decode(out, back, sizeof(back)) == -1);

	/* 31 capitals and a letter encode to 63: kept; 32 capitals to 64:
	 * hashed. */
	memset(handle, 'B', 31);
	handle[31] = 'c';
	handle[32] = '\0';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(strlen(out) == 63 && !is_hash(out));
	CHECK(gcp_label_decode(out, back, sizeof(back)) == 0);
	CHECK(strcmp(back, handle) == 0);
	handle[31] = 'B';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(is_hash(out));

	/* The same handle, the same hash; another handle, another one. */
	CHECK(gcp_label_encode(handle, other, sizeof(other)) == 0);
	CHECK(strcmp(out, other) == 0);
	handle[0] = 'C';
	CHECK(gcp_label_encode(handle, other, sizeof(other)) == 0);
	CHECK(is_hash(other));
	CHECK(strcmp(out, other) != 0);

	/* Dots and underscores count two each. */
	memset(handle, '.', 40);
	handle[40] = '\0';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(is_hash(out));
	memset(handle, '_', 31);
	handle[31] = 'z';
	handle[32] = '\0';
	CHECK(gcp_label_encode(handle, out, sizeof(out)) == 0);
	CHECK(strlen(out) == 63);
	CHECK(gcp_label_decode(out, back, sizeof(back)) == 0);
	CHECK(strcmp(back, handle) == 0);
}

static void test_label_decode(void)
{
	char out[72];

	/* Not encodings: an escape of something else, a trailing '_',
	 * characters a label has not, nothing at all. */
	static const char *const bad[] = {"",	 "_",	"a_",  "_1",  "_.",
					  "a_9", "A",	"aB",  "a.b", "a b",
					  "a/b", "_-_", "x_y_"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(gcp_label_decode(bad[i], out, sizeof(out)) == -1);
	/* "_-_" ends with a lone '_' after the dot: -1 above; "_-" alone is
	 * the dot. */
	CHECK(gcp_label_decode("_-", out, sizeof(out)) == 0);
	CHECK(strcmp(out, ".") == 0);
	/* A hash is never taken for a handle. */
	CHECK(gcp_label_decode("h-0123456789abcdef", out, sizeof(out)) == -1);
	/* Only "h-" with 16 more is a hash's form. */
	CHECK(gcp_label_decode("h-0123", out, sizeof(out)) == 0);
	CHECK(strcmp(out, "h-0123") == 0);
	/* The output holds the handle and its NUL, else -1. */
	CHECK(gcp_label_decode("_a_b", out, 3) == 0);
	CHECK(strcmp(out, "AB") == 0);
	CHECK(gcp_label_decode("_a_b", out, 2) == -1);
	CHECK(gcp_label_decode("abc", out, 3) == -1);
}

static void test_prefix(void)
{
	static const struct {
		const char *handle, *prefix;
	} cases[] = {
		{"h1", "cclfs-h1-01234567"},
		{"MyCluster", "cclfs-mycluster-01234567"},
		{"my.cluster_2", "cclfs-my-cluster-2-01234567"},
		{"a..b", "cclfs-a-b-01234567"},
		{"-a-", "cclfs-a-01234567"},
		{"...", "cclfs-01234567"},
		{"9lives", "cclfs-9lives-01234567"},
		/* The slug is at most 20, without a '-' at its end. */
		{"abcdefghijklmnopqrstuvwxyz",
		 "cclfs-abcdefghijklmnopqrst-01234567"},
		{"abcdefghijklmnopqrs.tuv",
		 "cclfs-abcdefghijklmnopqrs-01234567"},
	};
	char out[GCP_NAME_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gcp_prefix(cases[i].handle, TOKEN, out, sizeof(out));
		CHECK(strcmp(out, cases[i].prefix) == 0);
		CHECK(rfc1035(out));
	}
	/* Two handles with the same slug differ by their tokens. */
	char a[GCP_NAME_MAX], b[GCP_NAME_MAX];
	gcp_prefix("A.b", "aaaaaaaa", a, sizeof(a));
	gcp_prefix("a_B", "bbbbbbbb", b, sizeof(b));
	CHECK(strcmp(a, "cclfs-a-b-aaaaaaaa") == 0);
	CHECK(strcmp(b, "cclfs-a-b-bbbbbbbb") == 0);
	/* A short buffer gets a NUL-terminated start. */
	char tiny[8];
	gcp_prefix("h1", TOKEN, tiny, sizeof(tiny));
	CHECK(strcmp(tiny, "cclfs-h") == 0);
}

/* The names gcp_deploy.c gives: bulkInsert's namePattern PREFIX-m-# and
 * PREFIX-w-#### (Compute Engine puts the number in, at least as many digits
 * as '#'), and a relaunch's PREFIX-w-NNNN-SUFFIX. */
static void test_instance_names(void)
{
	static const char *const handles[] = {
		"h1",
		"Z",
		"...",
		"a.b_c-D",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
	};
	static const int ranks[] = {0, 1, 7, 63, 999, 9998, 99999};

	for (size_t h = 0; h < sizeof(handles) / sizeof(handles[0]); h++) {
		char prefix[GCP_NAME_MAX], name[GCP_NAME_MAX + 16];
		int rank = 42;

		gcp_prefix(handles[h], TOKEN, prefix, sizeof(prefix));
		snprintf(name, sizeof(name), "%.40s-m-1", prefix);
		CHECK(rfc1035(name));
		CHECK(gcp_rank_of(name, prefix, &rank) == 0 && rank == -1);
		snprintf(name, sizeof(name), "%.40s-m-1-%.8s", prefix,
			 "5f0e1d2c-aaaa");
		CHECK(rfc1035(name));
		rank = 42;
		CHECK(gcp_rank_of(name, prefix, &rank) == 0 && rank == -1);
		for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++) {
			snprintf(name, sizeof(name), "%.40s-w-%04d", prefix,
				 ranks[r] + 1);
			CHECK(rfc1035(name));
			rank = -5;
			CHECK(gcp_rank_of(name, prefix, &rank) == 0);
			CHECK(rank == ranks[r]);
			snprintf(name, sizeof(name), "%.40s-w-%04d-%.8s",
				 prefix, ranks[r] + 1, "0badc0de99");
			CHECK(rfc1035(name));
			rank = -5;
			CHECK(gcp_rank_of(name, prefix, &rank) == 0);
			CHECK(rank == ranks[r]);
		}
	}
}

static void test_rank_of(void)
{
	const char *p = "cclfs-h1-01234567";
	static const struct {
		const char *name;
		int rc, rank;
	} cases[] = {
		{"cclfs-h1-01234567-m-1", 0, -1},
		{"cclfs-h1-01234567-w-1", 0, 0},
		{"cclfs-h1-01234567-w-0064", 0, 63},
		{"cclfs-h1-01234567-w-0064-1a2b3c4d", 0, 63},
		{"cclfs-h1-01234567-w-1000000", 0, 999999},
		/* Not the prefix's, or not a name it gives. */
		{"cclfs-h1-01234567-w-0", -1, 0},
		{"cclfs-h1-01234567-w-0000", -1, 0},
		{"cclfs-h1-01234567-w-1000001", -1, 0},
		{"cclfs-h1-01234567-w--1", -1, 0},
		{"cclfs-h1-01234567-w-", -1, 0},
		{"cclfs-h1-01234567-w-12x", -1, 0},
		{"cclfs-h1-01234567-w-12_3", -1, 0},
		{"cclfs-h1-01234567-x-1", -1, 0},
		{"cclfs-h1-01234567-ww-1", -1, 0},
		{"cclfs-h1-01234567-w1", -1, 0},
		{"cclfs-h1-01234567", -1, 0},
		{"cclfs-h1-01234567-", -1, 0},
		{"cclfs-h1-01234567x-w-1", -1, 0},
		{"cclfs-h2-01234567-w-1", -1, 0},
		{"cclfs-h1-0123456-w-1", -1, 0},
		{"", -1, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rank = 12345;
		int rc = gcp_rank_of(cases[i].name, p, &rank);

		CHECK(rc == cases[i].rc);
		/* A name that is not one leaves the rank alone. */
		CHECK(rank == (rc == 0 ? cases[i].rank : 12345));
		if (rc != cases[i].rc)
			fprintf(stderr, "  for %s\n", cases[i].name);
	}
}

/* 8-4-4-4-12 lowercase hex digits, version 5, variant 10. */
static bool uuid_ok(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-'
			 : !isdigit((unsigned char)s[i]) &&
				    (s[i] < 'a' || s[i] > 'f'))
			return false;
	}
	return s[14] == '5' && strchr("89ab", s[19]) != NULL;
}

static void test_request_id(void)
{
	char a[GCP_UUID_MAX], b[GCP_UUID_MAX], c[GCP_UUID_MAX], long_what[400];

	gcp_request_id(TOKEN, "manager/us-central1-a", a, sizeof(a));
	CHECK(uuid_ok(a));
	/* The same call after a crash: the same requestId. */
	gcp_request_id(TOKEN, "manager/us-central1-a", b, sizeof(b));
	CHECK(strcmp(a, b) == 0);
	/* Another call, or another cluster's: another one. */
	gcp_request_id(TOKEN, "workers/us-central1-a", c, sizeof(c));
	CHECK(uuid_ok(c) && strcmp(a, c) != 0);
	gcp_request_id("fedcba9876543210", "manager/us-central1-a", c,
		       sizeof(c));
	CHECK(uuid_ok(c) && strcmp(a, c) != 0);
	gcp_request_id(TOKEN, "", c, sizeof(c));
	CHECK(uuid_ok(c) && strcmp(a, c) != 0);
	/* What does not fit the digest's input is cut, not refused. */
	memset(long_what, 'w', sizeof(long_what) - 1);
	long_what[sizeof(long_what) - 1] = '\0';
	gcp_request_id(TOKEN, long_what, c, sizeof(c));
	CHECK(uuid_ok(c));
}

static void test_short(void)
{
	CHECK(strcmp(gcp_short("zones/us-central1-a"), "us-central1-a") == 0);
	CHECK(strcmp(gcp_short("https://compute.googleapis.com/compute/v1/"
			       "projects/p/zones/europe-west4-b"),
		     "europe-west4-b") == 0);
	CHECK(strcmp(gcp_short("us-east1"), "us-east1") == 0);
	CHECK(strcmp(gcp_short("regions/"), "") == 0);
	CHECK(strcmp(gcp_short(""), "") == 0);
}

int main(void)
{
	test_label_encode();
	test_label_hash();
	test_label_decode();
	test_prefix();
	test_instance_names();
	test_rank_of();
	test_request_id();
	test_short();
	return check_summary("test_gcp_names");
}
