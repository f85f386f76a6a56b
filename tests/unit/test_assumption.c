/* Unit tests for resolver/assumption.c: the field table, parsing of every
 * kind, normalisation, error messages and assumption_holds. */
#include "resolver/assumption.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int checks;
static int failed;

static void check_at(bool ok, const char *file, int line, const char *expr,
		     const char *what)
{
	checks++;
	if (ok)
		return;
	failed++;
	fprintf(stderr, "%s:%d: check failed: %s", file, line, expr);
	if (what && *what)
		fprintf(stderr, " [%s]", what);
	fputc('\n', stderr);
}

#define CHECK(expr)	      check_at((expr), __FILE__, __LINE__, #expr, NULL)
#define CHECK_WHY(expr, what) check_at((expr), __FILE__, __LINE__, #expr, what)

#define KiB 1024.0
#define MiB (1024.0 * KiB)
#define GiB (1024.0 * MiB)
#define TiB (1024.0 * GiB)
#define PiB (1024.0 * TiB)

/* Parse text (a C string) and expect op, lo and hi. */
static void ok_at(const char *file, int line, enum assumption_kind kind,
		  const char *text, enum assumption_op op, double lo, double hi)
{
	struct assumption a;
	char err[256] = "";
	int r = assumption_parse(kind, text, strlen(text), &a, err,
				 sizeof(err));

	check_at(r == 0, file, line, "parses", text);
	if (r != 0) {
		fprintf(stderr, "    error: %s\n", err);
		return;
	}
	check_at(a.op == op, file, line, "op", text);
	check_at(a.lo == lo, file, line, "lo", text);
	check_at(a.hi == hi, file, line, "hi", text);
	check_at(err[0] == '\0', file, line, "no error on success", text);
}

/* Parse text (len bytes) and expect an error message. */
static void bad_len_at(const char *file, int line, enum assumption_kind kind,
		       const char *text, size_t len)
{
	struct assumption a;
	char err[512];
	char norm[64];

	memset(err, 'x', sizeof(err));
	memset(&a, 0x5A, sizeof(a));
	int r = assumption_parse(kind, text, len, &a, err, sizeof(err));

	check_at(r == -1, file, line, "rejected", text);
	check_at(memchr(err, '\0', sizeof(err)) != NULL, file, line,
		 "error is terminated", text);
	check_at(err[0] != '\0', file, line, "error is not empty", text);
	check_at(err[0] == '"', file, line, "error quotes the value", text);
	check_at(strchr(err, ':') != NULL, file, line,
		 "error says what is expected", text);
	check_at(strchr(err, '\n') == NULL, file, line, "error is one line",
		 text);
	check_at(((unsigned char *)&a)[0] == 0x5A, file, line,
		 "out untouched on error", text);
	if (r == 0)
		fprintf(stderr, "    parsed as op %d\n", (int)a.op);

	err[0] = '\0';
	r = assumption_normalise(kind, text, len, norm, sizeof(norm), err,
				 sizeof(err));
	check_at(r == -1, file, line, "normalise rejects too", text);
	check_at(norm[0] == '\0', file, line, "normalise leaves buf empty",
		 text);
	check_at(err[0] != '\0', file, line, "normalise explains", text);
}

/* Normalise text, expect `want`, and check that `want` is a fixed point
 * that parses to the same assumption as text. */
static void norm_at(const char *file, int line, enum assumption_kind kind,
		    const char *text, const char *want)
{
	char buf[ASSUMPTION_TEXT_MAX + 16];
	char buf2[ASSUMPTION_TEXT_MAX + 16];
	char err[256] = "";
	struct assumption a, b;

	int r = assumption_normalise(kind, text, strlen(text), buf, sizeof(buf),
				     err, sizeof(err));
	check_at(r == 0, file, line, "normalises", text);
	if (r != 0) {
		fprintf(stderr, "    error: %s\n", err);
		return;
	}
	check_at(strcmp(buf, want) == 0, file, line, "normal form", text);
	if (strcmp(buf, want) != 0)
		fprintf(stderr, "    got \"%s\", want \"%s\"\n", buf, want);

	r = assumption_normalise(kind, buf, strlen(buf), buf2, sizeof(buf2),
				 err, sizeof(err));
	check_at(r == 0 && strcmp(buf, buf2) == 0, file, line,
		 "normal form is a fixed point", text);

	r = assumption_parse(kind, text, strlen(text), &a, err, sizeof(err));
	check_at(r == 0, file, line, "text parses", text);
	r = assumption_parse(kind, buf, strlen(buf), &b, err, sizeof(err));
	check_at(r == 0, file, line, "normal form parses", text);
	check_at(a.op == b.op, file, line, "same op", text);
	check_at(a.lo == b.lo, file, line, "same lo", text);
	check_at(a.hi == b.hi, file, line, "same hi", text);
	check_at(strcmp(a.name, b.name) == 0, file, line, "same name", text);
}

#define OK(kind, text, op, lo, hi)                                             \
	ok_at(__FILE__, __LINE__, ASSUMPTION_##kind, text, ASSUMPTION_##op,    \
	      lo, hi)
#define BAD(kind, text)                                                        \
	bad_len_at(__FILE__, __LINE__, ASSUMPTION_##kind, text, strlen(text))
#define BAD_LEN(kind, text, len)                                               \
	bad_len_at(__FILE__, __LINE__, ASSUMPTION_##kind, text, len)
#define NORM(kind, text, want)                                                 \
	norm_at(__FILE__, __LINE__, ASSUMPTION_##kind, text, want)

/* The first error message for text, for content checks. */
static const char *message(enum assumption_kind kind, const char *text)
{
	static char err[512];
	struct assumption a;

	err[0] = '\0';
	assumption_parse(kind, text, strlen(text), &a, err, sizeof(err));
	return err;
}

static void test_fields(void)
{
	static const char *const names[] = {
		"node_provider",
		"cluster_locale",
		"node_machinetype",
		"node_memory_size",
		"node_ecu_count",
		"node_vcpus_count",
		"accelerator_count",
		"accelerator_memory",
		"accelerator_type",
		"accelerator_manufacturer",
		"accelerator_architecture",
		"accelerator",
		"processor_manufacturer",
		"processor_microarchitecture",
		"processor",
		"storage_type",
		"storage_size",
		"network_performance",
		"node_architecture",
	};
	static const enum assumption_kind kinds[] = {
		ASSUMPTION_TYPE,  ASSUMPTION_TYPE,  ASSUMPTION_TYPE,
		ASSUMPTION_BYTES, ASSUMPTION_COUNT, ASSUMPTION_COUNT,
		ASSUMPTION_COUNT, ASSUMPTION_BYTES, ASSUMPTION_TYPE,
		ASSUMPTION_TYPE,  ASSUMPTION_TYPE,  ASSUMPTION_TYPE,
		ASSUMPTION_TYPE,  ASSUMPTION_TYPE,  ASSUMPTION_TYPE,
		ASSUMPTION_TYPE,  ASSUMPTION_BYTES, ASSUMPTION_BITRATE,
		ASSUMPTION_TYPE,
	};

	CHECK(assumption_field_count == 19);
	for (size_t i = 0; i < 19 && i < assumption_field_count; i++) {
		CHECK_WHY(strcmp(assumption_fields[i].name, names[i]) == 0,
			  names[i]);
		CHECK_WHY(assumption_fields[i].kind == kinds[i], names[i]);
		CHECK_WHY(assumption_field_find(names[i]) == (int)i, names[i]);
	}
	CHECK(assumption_field_find("cluster_locale") ==
	      ASSUMPTION_FIELD_LOCALE);
	CHECK(assumption_field_find("") == -1);
	CHECK(assumption_field_find(NULL) == -1);
	CHECK(assumption_field_find("Node_Provider") == -1);
	CHECK(assumption_field_find("node_provider ") == -1);
	CHECK(assumption_field_find("accelerators") == -1);
	CHECK(assumption_field_find("name") == -1);
}

static void test_any(void)
{
	static const enum assumption_kind all[] = {
		ASSUMPTION_COUNT, ASSUMPTION_BYTES, ASSUMPTION_BITRATE,
		ASSUMPTION_TYPE};
	static const char *const blanks[] = {"",     " ",     "\n",
					     "\r\n", "\t \n", "  \t\r\n  \n\n"};

	for (size_t k = 0; k < 4; k++) {
		for (size_t i = 0; i < 6; i++) {
			struct assumption a;
			char buf[8] = "junk";
			char err[64] = "junk";

			int r = assumption_parse(all[k], blanks[i],
						 strlen(blanks[i]), &a, err,
						 sizeof(err));
			CHECK(r == 0);
			CHECK(a.op == ASSUMPTION_ANY);
			CHECK(a.name[0] == '\0');
			CHECK(assumption_holds(&a, 0));
			CHECK(assumption_holds(&a, 1e300));
			r = assumption_normalise(all[k], blanks[i],
						 strlen(blanks[i]), buf,
						 sizeof(buf), err, sizeof(err));
			CHECK(r == 0 && buf[0] == '\0');
		}
		struct assumption a;
		char buf[1] = {'x'};
		char err[64];

		CHECK(assumption_parse(all[k], NULL, 0, &a, err, sizeof(err)) ==
			      0 &&
		      a.op == ASSUMPTION_ANY);
		/* The empty form fits a one-byte buffer. */
		CHECK(assumption_normalise(all[k], " \n", 2, buf, 1, err,
					   sizeof(err)) == 0 &&
		      buf[0] == '\0');
	}
}

static void test_count(void)
{
	OK(COUNT, "4", JUST, 4, 4);
	OK(COUNT, "0", JUST, 0, 0);
	OK(COUNT, "just 4", JUST, 4, 4);
	OK(COUNT, "JUST 4", JUST, 4, 4);
	OK(COUNT, "@just 4", JUST, 4, 4);
	OK(COUNT, "@Just\t4", JUST, 4, 4);
	OK(COUNT, "atleast 2", ATLEAST, 2, INFINITY);
	OK(COUNT, "@AtLeast   16", ATLEAST, 16, INFINITY);
	OK(COUNT, "atmost 8", ATMOST, 0, 8);
	OK(COUNT, "ATMOST 8", ATMOST, 0, 8);
	OK(COUNT, "@atmost \t 96", ATMOST, 0, 96);
	OK(COUNT, "2..8", RANGE, 2, 8);
	OK(COUNT, "2 .. 8", RANGE, 2, 8);
	OK(COUNT, "2\t..\t8", RANGE, 2, 8);
	OK(COUNT, "2.. 8", RANGE, 2, 8);
	OK(COUNT, "2 ..8", RANGE, 2, 8);
	OK(COUNT, "8..8", RANGE, 8, 8);
	OK(COUNT, "0..0", RANGE, 0, 0);
	OK(COUNT, "6.5", JUST, 6.5, 6.5);
	OK(COUNT, "0.25", JUST, 0.25, 0.25);
	OK(COUNT, "atleast 6.5", ATLEAST, 6.5, INFINITY);
	OK(COUNT, "1.5..2.5", RANGE, 1.5, 2.5);
	OK(COUNT, "007", JUST, 7, 7);
	OK(COUNT, "  4  \n", JUST, 4, 4);
	OK(COUNT, "\r\n\t 4\r\n", JUST, 4, 4);
	OK(COUNT, "123456789012345678901234567890", JUST,
	   123456789012345678901234567890.0, 123456789012345678901234567890.0);
	OK(COUNT, "0.1", JUST, 0.1, 0.1);
	OK(COUNT, "3.14159", JUST, 3.14159, 3.14159);

	BAD(COUNT, "4G");
	BAD(COUNT, "4k");
	BAD(COUNT, "atleast 16G");
	BAD(COUNT, "2..8K");
	BAD(COUNT, "four");
	BAD(COUNT, "-4");
	BAD(COUNT, "+4");
	BAD(COUNT, "1e3");
	BAD(COUNT, "1,000");
	BAD(COUNT, ".5");
	BAD(COUNT, "5.");
	BAD(COUNT, "5.x");
	BAD(COUNT, "1.2.3");
	BAD(COUNT, "0x10");
	BAD(COUNT, "4 4");
	BAD(COUNT, "just");
	BAD(COUNT, "just ");
	BAD(COUNT, "@");
	BAD(COUNT, "@4");
	BAD(COUNT, "@ just 4");
	BAD(COUNT, "@@just 4");
	BAD(COUNT, "just4");
	BAD(COUNT, "justt 4");
	BAD(COUNT, "exactly 4");
	BAD(COUNT, "atleast atmost 4");
	BAD(COUNT, "just 2..8");
	BAD(COUNT, "atleast 2..8");
	BAD(COUNT, "8..2");
	BAD(COUNT, "2..");
	BAD(COUNT, "..8");
	BAD(COUNT, "..");
	BAD(COUNT, "2...8");
	BAD(COUNT, "2..8..9");
	BAD(COUNT, "2..atmost 8");
	BAD(COUNT, "2 8");
	BAD(COUNT, "4 cores");
	BAD(COUNT, "\"4\"");
	BAD(COUNT, "t3");
	BAD(COUNT, "inf");
	BAD(COUNT, "nan");
	BAD(COUNT, "4\n5");
	BAD(COUNT, "4\r5");
	BAD(COUNT, "just\n4");
	BAD(COUNT, "4;");
	BAD(COUNT, "4 # four");
	BAD_LEN(COUNT, "4\0", 2);
	BAD_LEN(COUNT, "\0", 1);
	BAD_LEN(COUNT, "4\0 5", 4);
}

static void test_bytes(void)
{
	OK(BYTES, "4", JUST, 4, 4);
	OK(BYTES, "4G", JUST, 4 * GiB, 4 * GiB);
	OK(BYTES, "4g", JUST, 4 * GiB, 4 * GiB);
	OK(BYTES, "just 4G", JUST, 4 * GiB, 4 * GiB);
	OK(BYTES, "1K", JUST, KiB, KiB);
	OK(BYTES, "1k", JUST, KiB, KiB);
	OK(BYTES, "1M", JUST, MiB, MiB);
	OK(BYTES, "1m", JUST, MiB, MiB);
	OK(BYTES, "1T", JUST, TiB, TiB);
	OK(BYTES, "1t", JUST, TiB, TiB);
	OK(BYTES, "1P", JUST, PiB, PiB);
	OK(BYTES, "1p", JUST, PiB, PiB);
	OK(BYTES, "atleast 16G", ATLEAST, 16 * GiB, INFINITY);
	OK(BYTES, "@AtLeast 16G", ATLEAST, 16 * GiB, INFINITY);
	OK(BYTES, "atmost 256G", ATMOST, 0, 256 * GiB);
	OK(BYTES, "16G..32G", RANGE, 16 * GiB, 32 * GiB);
	OK(BYTES, "16g .. 32g", RANGE, 16 * GiB, 32 * GiB);
	OK(BYTES, "512M..1G", RANGE, 512 * MiB, GiB);
	OK(BYTES, "1024M..1G", RANGE, GiB, GiB);
	OK(BYTES, "0..1P", RANGE, 0, PiB);
	OK(BYTES, "6.5G", JUST, 6.5 * GiB, 6.5 * GiB);
	OK(BYTES, "0.5K", JUST, 512, 512);
	OK(BYTES, "0.25T", JUST, 0.25 * TiB, 0.25 * TiB);
	OK(BYTES, "1.5", JUST, 1.5, 1.5);
	OK(BYTES, "3G", JUST, 3 * GiB, 3 * GiB);
	OK(BYTES, "24G", JUST, 24 * GiB, 24 * GiB);
	OK(BYTES, "1000000P", JUST, 1e6 * PiB, 1e6 * PiB);
	OK(BYTES, "16.0G", JUST, 16 * GiB, 16 * GiB);
	OK(BYTES, "0016G", JUST, 16 * GiB, 16 * GiB);
	OK(BYTES, " atleast 16G\n", ATLEAST, 16 * GiB, INFINITY);

	BAD(BYTES, "16Q");
	BAD(BYTES, "16GB");
	BAD(BYTES, "16Gi");
	BAD(BYTES, "16GiB");
	BAD(BYTES, "16 G");
	BAD(BYTES, "16KM");
	BAD(BYTES, "G");
	BAD(BYTES, "G16");
	BAD(BYTES, "16E");
	BAD(BYTES, "16B");
	BAD(BYTES, "-16G");
	BAD(BYTES, "1e9");
	BAD(BYTES, "1,024");
	BAD(BYTES, ".5G");
	BAD(BYTES, "5.G");
	BAD(BYTES, "32G..16G");
	BAD(BYTES, "1G..1023M");
	BAD(BYTES, "16G..");
	BAD(BYTES, "..32G");
	BAD(BYTES, "16G..32G..64G");
	BAD(BYTES, "atleast16G");
	BAD(BYTES, "atleast");
	BAD(BYTES, "atleast 16G 32G");
	BAD(BYTES, "atleast 16G..32G");
	BAD(BYTES, "more 16G");
	BAD(BYTES, "16G\n32G");
	BAD(BYTES, "16G 32G");
	BAD(BYTES, "16G;");
	BAD(BYTES, "Ada");
}

static void test_bitrate(void)
{
	OK(BITRATE, "10G", JUST, 10e9, 10e9);
	OK(BITRATE, "10g", JUST, 10e9, 10e9);
	OK(BITRATE, "1K", JUST, 1e3, 1e3);
	OK(BITRATE, "1M", JUST, 1e6, 1e6);
	OK(BITRATE, "1T", JUST, 1e12, 1e12);
	OK(BITRATE, "1P", JUST, 1e15, 1e15);
	OK(BITRATE, "100", JUST, 100, 100);
	OK(BITRATE, "atleast 25G", ATLEAST, 25e9, INFINITY);
	OK(BITRATE, "@ATLEAST 25g", ATLEAST, 25e9, INFINITY);
	OK(BITRATE, "atmost 100G", ATMOST, 0, 100e9);
	OK(BITRATE, "10G..100G", RANGE, 10e9, 100e9);
	OK(BITRATE, "500M..1G", RANGE, 500e6, 1e9);
	OK(BITRATE, "1000M..1G", RANGE, 1e9, 1e9);
	OK(BITRATE, "12.5G", JUST, 12.5e9, 12.5e9);
	OK(BITRATE, "0.1G", JUST, 1e8, 1e8);
	OK(BITRATE, "0.001K", JUST, 1, 1);

	BAD(BITRATE, "10Gbps");
	BAD(BITRATE, "10Gb");
	BAD(BITRATE, "10 Gbit");
	BAD(BITRATE, "Up to 10 Gigabit");
	BAD(BITRATE, "High");
	BAD(BITRATE, "10Q");
	BAD(BITRATE, "100G..10G");
	BAD(BITRATE, "1001M..1G");
	BAD(BITRATE, ".5G");
	BAD(BITRATE, "1.G");
	BAD(BITRATE, "-1G");
	BAD(BITRATE, "atleast");
	BAD(BITRATE, "10G\n\n1G");
	OK(BITRATE, "10G\n", JUST, 10e9, 10e9);
}

static void test_large(void)
{
	char big[ASSUMPTION_TEXT_MAX + 64];
	struct assumption a;
	char err[256];

	/* 300 digits fits a double, 310 does not. */
	memset(big, '9', 300);
	big[300] = '\0';
	CHECK(assumption_parse(ASSUMPTION_COUNT, big, strlen(big), &a, err,
			       sizeof(err)) == 0 &&
	      a.op == ASSUMPTION_JUST && a.lo > 9e299 && isfinite(a.lo));
	memset(big, '9', 310);
	big[310] = '\0';
	BAD(COUNT, big);
	CHECK(strstr(message(ASSUMPTION_COUNT, big), "too large") != NULL);
	CHECK(strstr(message(ASSUMPTION_COUNT, big), "\xe2\x80\xa6") != NULL);

	/* Fits as a number but not once scaled to bytes or bits/s. */
	memset(big, '9', 300);
	memcpy(big + 300, "P", 2);
	BAD(BYTES, big);
	BAD(BITRATE, big);
	CHECK(strstr(message(ASSUMPTION_BYTES, big), "too large") != NULL);
	memset(big, '9', 300);
	memcpy(big + 300, "K", 2);
	OK(BYTES, big, JUST, a.lo * 1024, a.lo * 1024);
	struct assumption b;

	CHECK(assumption_parse(ASSUMPTION_BITRATE, big, strlen(big), &b, err,
			       sizeof(err)) == 0 &&
	      b.op == ASSUMPTION_JUST && b.lo == b.hi &&
	      fabs(b.lo / (a.lo * 1000) - 1) < 1e-15);

	/* Leading zeros and a long fraction do not make a number large. */
	memset(big, '0', 1000);
	memcpy(big + 1000, "1.5", 4);
	OK(COUNT, big, JUST, 1.5, 1.5);
	NORM(COUNT, big, "just 1.5");
	memcpy(big, "1.", 3);
	memset(big + 2, '0', 2000);
	memcpy(big + 2002, "G", 2);
	OK(BYTES, big, JUST, GiB, GiB);
	NORM(BYTES, big, "just 1G");

	/* Numbers of any size keep their digits in the normal form. */
	NORM(COUNT, "123456789012345678901234567890",
	     "just 123456789012345678901234567890");
	NORM(BYTES, "0.000000000000000000000000000001K",
	     "just 0.000000000000000000000000000001K");

	/* Longest accepted value, and one byte more. */
	memset(big, ' ', 10);
	memcpy(big + 10, "atleast ", 8);
	memset(big + 18, '0', ASSUMPTION_TEXT_MAX - 8 - 1);
	big[18 + ASSUMPTION_TEXT_MAX - 9] = '1';
	big[18 + ASSUMPTION_TEXT_MAX - 8] = '\0';
	OK(COUNT, big, ATLEAST, 1, INFINITY);
	NORM(COUNT, big, "atleast 1");
	big[18 + ASSUMPTION_TEXT_MAX - 8] = '2';
	big[18 + ASSUMPTION_TEXT_MAX - 7] = '\0';
	BAD(COUNT, big);
	CHECK(strstr(message(ASSUMPTION_COUNT, big), "too long") != NULL);

	/* A bare number whose normal form `just N` would be too long. */
	memset(big, '1', ASSUMPTION_TEXT_MAX);
	big[1] = '.';
	big[ASSUMPTION_TEXT_MAX] = '\0';
	BAD(COUNT, big);
	big[ASSUMPTION_TEXT_MAX - 5] = '\0';
	OK(COUNT, big, JUST, 1.1111111111111111, 1.1111111111111111);
	CHECK(assumption_normalise(ASSUMPTION_COUNT, big, strlen(big), NULL, 0,
				   err, sizeof(err)) == -1);
}

static void test_type(void)
{
	static const char *const good[] = {
		"Ada",
		"ada",
		"t3.xlarge",
		"EC2Type_T3",
		"p4d.24xlarge",
		"NVIDIA",
		"Standard_D2s_v3",
		"n2-standard-8",
		"x86_64",
		"arm64",
		"4",
		"t3",
		"16G",
		"16G..32G",
		"atleast16G",
		"a:b",
		"c++",
		"A100-SXM4-80GB",
		"eu-west-1",
		"us-east-1a",
		"gp3",
		"0",
		"Z",
		"e2.micro+",
	};
	static const char *const bad[] = {
		"atleast Ada", "just 4", "Ada Lovelace", "Ada\tLovelace",
		"\"Ada\"",     "'Ada'",	 "a/b",		 "a\\b",
		"_ada",	       ".ada",	 "-ada",	 "+ada",
		":ada",	       "@Ada",	 "4 4",		 "Ada,Hopper",
		"Ada;",	       "Ada*",	 "Ada\nHopper",	 "caf\xc3\xa9",
		"a=b",	       "(Ada)",	 "Ada#1",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct assumption a;
		char err[128] = "";

		int r = assumption_parse(ASSUMPTION_TYPE, good[i],
					 strlen(good[i]), &a, err, sizeof(err));
		CHECK_WHY(r == 0, good[i]);
		CHECK_WHY(r == 0 && a.op == ASSUMPTION_NAME, good[i]);
		CHECK_WHY(r == 0 && strcmp(a.name, good[i]) == 0, good[i]);
		CHECK_WHY(r == 0 && !assumption_holds(&a, 4), good[i]);
		NORM(TYPE, good[i], good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		BAD(TYPE, bad[i]);

	NORM(TYPE, "Ada\n", "Ada");
	NORM(TYPE, "  Ada \r\n", "Ada");
	NORM(TYPE, "\tEC2Type_T3\n", "EC2Type_T3");
	BAD_LEN(TYPE, "Ada\0", 4);

	char name[ASSUMPTION_NAME_MAX + 8];

	memset(name, 'a', ASSUMPTION_NAME_MAX);
	name[ASSUMPTION_NAME_MAX] = '\0';
	NORM(TYPE, name, name);
	OK(TYPE, name, NAME, 0, 0);
	name[ASSUMPTION_NAME_MAX] = 'a';
	name[ASSUMPTION_NAME_MAX + 1] = '\0';
	BAD(TYPE, name);
	CHECK(strstr(message(ASSUMPTION_TYPE, name), "too long") != NULL);
}

static void test_normalise(void)
{
	NORM(COUNT, "4", "just 4");
	NORM(COUNT, "just 4", "just 4");
	NORM(COUNT, "JUST 4", "just 4");
	NORM(COUNT, "@Just\t\t4", "just 4");
	NORM(COUNT, "007", "just 7");
	NORM(COUNT, "0", "just 0");
	NORM(COUNT, "000", "just 0");
	NORM(COUNT, "0.0", "just 0");
	NORM(COUNT, "00.000", "just 0");
	NORM(COUNT, "0.50", "just 0.5");
	NORM(COUNT, "00.5", "just 0.5");
	NORM(COUNT, "6.50", "just 6.5");
	NORM(COUNT, "10", "just 10");
	NORM(COUNT, "100.00", "just 100");
	NORM(COUNT, "10.01", "just 10.01");
	NORM(COUNT, "@ATLEAST 02", "atleast 2");
	NORM(COUNT, "AtMost 8.0", "atmost 8");
	NORM(COUNT, "2 .. 8", "2..8");
	NORM(COUNT, "02\t..\t08.0", "2..8");
	NORM(COUNT, "  atleast 16  \n", "atleast 16");

	NORM(BYTES, "16.0G", "just 16G");
	NORM(BYTES, "16g", "just 16G");
	NORM(BYTES, "atleast 16g", "atleast 16G");
	NORM(BYTES, "@AtLeast 16G", "atleast 16G");
	NORM(BYTES, "ATMOST 256g", "atmost 256G");
	NORM(BYTES, "16G .. 32G", "16G..32G");
	NORM(BYTES, "16g..32g", "16G..32G");
	NORM(BYTES, "1024M..1G", "1024M..1G");
	NORM(BYTES, "0.5k", "just 0.5K");
	NORM(BYTES, "1.50m", "just 1.5M");
	NORM(BYTES, "0t", "just 0T");
	NORM(BYTES, "4p", "just 4P");
	NORM(BYTES, "4", "just 4");
	NORM(BYTES, "0016.2500G", "just 16.25G");

	NORM(BITRATE, "10g", "just 10G");
	NORM(BITRATE, "@atleast 25g", "atleast 25G");
	NORM(BITRATE, "10G .. 100G", "10G..100G");
	NORM(BITRATE, "1000M..1G", "1000M..1G");
	NORM(BITRATE, "12.50G", "just 12.5G");

	/* Buffer sizes: exactly enough, one short, none. */
	char buf[16];
	char err[256];

	CHECK(assumption_normalise(ASSUMPTION_BYTES, "16g", 3, buf, 9, err,
				   sizeof(err)) == 0 &&
	      strcmp(buf, "just 16G") == 0);
	memset(buf, 'x', sizeof(buf));
	err[0] = '\0';
	CHECK(assumption_normalise(ASSUMPTION_BYTES, "16g", 3, buf, 8, err,
				   sizeof(err)) == -1);
	CHECK(buf[0] == '\0');
	CHECK(buf[8] == 'x');
	CHECK(err[0] != '\0');
	CHECK(strstr(err, "\"16g\"") != NULL);
	memset(buf, 'x', sizeof(buf));
	CHECK(assumption_normalise(ASSUMPTION_BYTES, "16g", 3, buf, 1, err,
				   sizeof(err)) == -1 &&
	      buf[0] == '\0' && buf[1] == 'x');
	err[0] = '\0';
	CHECK(assumption_normalise(ASSUMPTION_BYTES, "16g", 3, buf, 0, err,
				   sizeof(err)) == -1 &&
	      err[0] != '\0' && buf[0] == '\0');
	CHECK(assumption_normalise(ASSUMPTION_BYTES, "16g", 3, NULL, 0, err,
				   sizeof(err)) == -1);
	CHECK(assumption_normalise(ASSUMPTION_TYPE, "Ada", 3, buf, 4, err,
				   sizeof(err)) == 0 &&
	      strcmp(buf, "Ada") == 0);
	CHECK(assumption_normalise(ASSUMPTION_TYPE, "Ada", 3, buf, 3, err,
				   sizeof(err)) == -1);
	/* Only len bytes are read: the rest of the string is ignored. */
	CHECK(assumption_normalise(ASSUMPTION_COUNT, "4 junk", 1, buf,
				   sizeof(buf), err, sizeof(err)) == 0 &&
	      strcmp(buf, "just 4") == 0);
}

static void test_messages(void)
{
	const char *m;

	m = message(ASSUMPTION_BYTES, "16Q");
	CHECK_WHY(strncmp(m, "\"16Q\" is not a size", 19) == 0, m);
	CHECK_WHY(strstr(m, "K, M, G, T or P") != NULL, m);
	CHECK_WHY(strstr(m, "atleast 16G") != NULL, m);
	m = message(ASSUMPTION_COUNT, "4G");
	CHECK_WHY(strstr(m, "\"4G\"") != NULL, m);
	CHECK_WHY(strstr(m, "no suffix") != NULL, m);
	m = message(ASSUMPTION_COUNT, "4\n5");
	CHECK_WHY(strstr(m, "one value on one line") != NULL, m);
	CHECK_WHY(strstr(m, "\"4\\n5\"") != NULL, m);
	m = message(ASSUMPTION_BYTES, "32G..16G");
	CHECK_WHY(strstr(m, "\"32G..16G\"") != NULL, m);
	CHECK_WHY(strstr(m, "range") != NULL, m);
	m = message(ASSUMPTION_COUNT, ".5");
	CHECK_WHY(strstr(m, "0.5") != NULL, m);
	m = message(ASSUMPTION_COUNT, "5.");
	CHECK_WHY(strstr(m, "after") != NULL, m);
	m = message(ASSUMPTION_TYPE, "atleast Ada");
	CHECK_WHY(strstr(m, "\"atleast Ada\" is not a type name") == m, m);
	m = message(ASSUMPTION_TYPE, "a/b");
	CHECK_WHY(strstr(m, "type name") != NULL, m);
	m = message(ASSUMPTION_BITRATE, "10Gbps");
	CHECK_WHY(strstr(m, "bit rate") != NULL, m);
	m = message(ASSUMPTION_BITRATE, " 10Gbps \n");
	CHECK_WHY(strncmp(m, "\"10Gbps\"", 8) == 0, m);
	m = message(ASSUMPTION_TYPE, "say \"hi\"");
	CHECK_WHY(strncmp(m, "\"say \\\"hi\\\"\"", 12) == 0, m);

	/* Long values are cut short in the message. */
	char longv[200];

	memset(longv, 'Q', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	m = message(ASSUMPTION_BYTES, longv);
	CHECK_WHY(strlen(m) < 250, m);
	CHECK_WHY(strstr(m, "\xe2\x80\xa6\"") != NULL, m);

	/* Small error buffers: never overrun, always terminated. */
	for (size_t n = 1; n < 80; n++) {
		char err[96];
		struct assumption a;

		memset(err, '#', sizeof(err));
		int r = assumption_parse(ASSUMPTION_BYTES, longv, strlen(longv),
					 &a, err, n);
		CHECK(r == -1);
		CHECK(memchr(err, '\0', n) != NULL);
		CHECK(err[n] == '#');
	}
	/* A cut never leaves half a UTF-8 character. */
	for (size_t n = 40; n < 50; n++) {
		char err[64];
		struct assumption a;

		assumption_parse(ASSUMPTION_BYTES, longv, strlen(longv), &a,
				 err, n);
		size_t len = strlen(err);
		bool whole = true;

		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)err[i];

			if (c == 0xE2 && (i + 2 >= len ||
					  (unsigned char)err[i + 1] != 0x80 ||
					  (unsigned char)err[i + 2] != 0xA6))
				whole = false;
		}
		CHECK_WHY(whole, err);
	}
	struct assumption a;

	CHECK(assumption_parse(ASSUMPTION_BYTES, "16Q", 3, &a, NULL, 0) == -1);
	CHECK(assumption_parse(ASSUMPTION_BYTES, "16Q", 3, &a, NULL, 99) == -1);
	CHECK(assumption_parse(ASSUMPTION_BYTES, "16G", 3, NULL, NULL, 0) == 0);
	char one[1] = {'x'};

	CHECK(assumption_parse(ASSUMPTION_BYTES, "16Q", 3, &a, one, 1) == -1 &&
	      one[0] == '\0');
	/* An unknown kind is an error, not a crash. */
	char err[128] = "";

	CHECK(assumption_parse((enum assumption_kind)42, "4", 1, &a, err,
			       sizeof(err)) == -1 &&
	      err[0] != '\0');
}

static void test_holds(void)
{
	struct assumption a;

	memset(&a, 0, sizeof(a));
	a.op = ASSUMPTION_ANY;
	CHECK(assumption_holds(&a, 0));
	CHECK(assumption_holds(&a, -1));
	CHECK(assumption_holds(&a, INFINITY));
	CHECK(!assumption_holds(NULL, 1));

	CHECK(assumption_parse(ASSUMPTION_COUNT, "4", 1, &a, NULL, 0) == 0);
	CHECK(assumption_holds(&a, 4));
	CHECK(!assumption_holds(&a, 3.999999));
	CHECK(!assumption_holds(&a, 4.000001));
	CHECK(!assumption_holds(&a, 0));
	CHECK(!assumption_holds(&a, NAN));

	CHECK(assumption_parse(ASSUMPTION_BYTES, "atleast 16G", 11, &a, NULL,
			       0) == 0);
	CHECK(assumption_holds(&a, 16 * GiB));
	CHECK(assumption_holds(&a, 17 * GiB));
	CHECK(assumption_holds(&a, 1e300));
	CHECK(assumption_holds(&a, INFINITY));
	CHECK(!assumption_holds(&a, 16 * GiB - 1));
	CHECK(!assumption_holds(&a, 0));
	CHECK(!assumption_holds(&a, NAN));

	CHECK(assumption_parse(ASSUMPTION_BYTES, "atmost 256G", 11, &a, NULL,
			       0) == 0);
	CHECK(assumption_holds(&a, 0));
	CHECK(assumption_holds(&a, 256 * GiB));
	CHECK(assumption_holds(&a, 1));
	CHECK(!assumption_holds(&a, 256 * GiB + 1));
	CHECK(!assumption_holds(&a, -1));
	CHECK(!assumption_holds(&a, NAN));

	CHECK(assumption_parse(ASSUMPTION_BITRATE, "10G..100G", 9, &a, NULL,
			       0) == 0);
	CHECK(assumption_holds(&a, 10e9));
	CHECK(assumption_holds(&a, 25e9));
	CHECK(assumption_holds(&a, 100e9));
	CHECK(!assumption_holds(&a, 9.999e9));
	CHECK(!assumption_holds(&a, 100.001e9));
	CHECK(!assumption_holds(&a, NAN));

	CHECK(assumption_parse(ASSUMPTION_COUNT, "6.5", 3, &a, NULL, 0) == 0);
	CHECK(assumption_holds(&a, 6.5));
	CHECK(!assumption_holds(&a, 6));

	CHECK(assumption_parse(ASSUMPTION_TYPE, "Ada", 3, &a, NULL, 0) == 0);
	CHECK(!assumption_holds(&a, 0));
	CHECK(!assumption_holds(&a, 1));

	a.op = (enum assumption_op)99;
	CHECK(!assumption_holds(&a, 1));
}

int main(void)
{
	test_fields();
	test_any();
	test_count();
	test_bytes();
	test_bitrate();
	test_large();
	test_type();
	test_normalise();
	test_messages();
	test_holds();
	printf("assumption: %d checks, %d failed\n", checks, failed);
	return failed ? 1 : 0;
}
