/* libFuzzer target for the assumption-value parser (resolver/assumption.c):
 * feeds arbitrary bytes to assumption_parse and assumption_normalise for each
 * kind and traps as soon as one invariant of their contract breaks. */
#include "resolver/assumption.h"
#include "tests/fuzz/fuzz_check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A "normal" error buffer: holds every message whole. */
#define ERR_BIG 512

static bool same(const struct assumption *a, const struct assumption *b)
{
	return a->op == b->op && a->lo == b->lo && a->hi == b->hi &&
	       strcmp(a->name, b->name) == 0;
}

static bool is_quantity_op(enum assumption_op op)
{
	return op == ASSUMPTION_JUST || op == ASSUMPTION_ATLEAST ||
	       op == ASSUMPTION_ATMOST || op == ASSUMPTION_RANGE;
}

/* A failed call left in err[0..errlen) one non-empty line, terminated
 * within errlen (nothing fits in 1 byte but the terminator). */
static void check_error(const char *err, size_t errlen)
{
	if (errlen == 0)
		return;
	const char *end = memchr(err, '\0', errlen);

	CHECK(end != NULL);
	if (errlen >= 2)
		CHECK(err[0] != '\0');
	for (const char *p = err; p < end; p++)
		CHECK((unsigned char)*p >= 0x20 && *p != 0x7F);
}

/* Parse with every tiny error buffer (and none at all): same outcome as
 * with the big one, a truncated prefix of its message, nothing written
 * past the buffer. */
static void check_tiny_parse(enum assumption_kind kind, const char *text,
			     size_t n, int r, const struct assumption *a,
			     const char *err)
{
	for (size_t i = 0; i < FUZZ_TINY_COUNT; i++) {
		size_t len = fuzz_tiny_len[i];
		char *e = sentinel_buf(len);
		struct assumption b;

		memset(&b, 0x5A, sizeof(b));
		CHECK(assumption_parse(kind, text, n, &b, e, len) == r);
		if (len == 0) {
			CHECK(e[0] == FUZZ_SENTINEL);
		} else if (r == 0) {
			CHECK(e[0] == '\0');
		} else {
			check_error(e, len);
			CHECK(strncmp(e, err, strlen(e)) == 0);
		}
		if (r == 0)
			CHECK(same(&b, a));
		free(e);
	}
	CHECK(assumption_parse(kind, text, n, NULL, NULL, 0) == r);
}

/* The value with blanks and a newline around it means the same. */
static void check_padded(enum assumption_kind kind, const char *text, size_t n,
			 int r, const struct assumption *a, const char *err)
{
	char *p = malloc(n + 4);
	char e[ERR_BIG];
	struct assumption b;

	if (!p)
		abort();
	p[0] = ' ';
	p[1] = '\t';
	if (n)
		memcpy(p + 2, text, n);
	p[n + 2] = ' ';
	p[n + 3] = '\n';
	CHECK(assumption_parse(kind, p, n + 4, &b, e, sizeof(e)) == r);
	if (r == 0)
		CHECK(same(&b, a));
	else
		CHECK(strcmp(e, err) == 0);
	free(p);
}

/* What a parsed value must look like. */
static void check_value(enum assumption_kind kind, const struct assumption *a)
{
	if (kind == ASSUMPTION_TYPE)
		CHECK(a->op == ASSUMPTION_ANY || a->op == ASSUMPTION_NAME);
	else
		CHECK(a->op == ASSUMPTION_ANY || is_quantity_op(a->op));
	if (a->op == ASSUMPTION_ANY) {
		CHECK(a->name[0] == '\0');
		CHECK(assumption_holds(a, 0));
		return;
	}
	if (a->op == ASSUMPTION_NAME) {
		const char *end = memchr(a->name, '\0', sizeof(a->name));

		CHECK(end != NULL && end > a->name);
		CHECK(!assumption_holds(a, 0));
		return;
	}
	CHECK(a->name[0] == '\0');
	CHECK(!isnan(a->lo) && !isnan(a->hi));
	CHECK(isfinite(a->lo) && a->lo >= 0);
	CHECK(a->lo <= a->hi);
	if (a->op == ASSUMPTION_JUST)
		CHECK(a->lo == a->hi);
	if (a->op == ASSUMPTION_ATLEAST)
		CHECK(a->hi == INFINITY);
	if (a->op == ASSUMPTION_ATMOST)
		CHECK(a->lo == 0 && isfinite(a->hi));
	if (a->op != ASSUMPTION_ATMOST)
		CHECK(assumption_holds(a, a->lo));
	if (a->op != ASSUMPTION_ATLEAST)
		CHECK(assumption_holds(a, a->hi));
	CHECK(!assumption_holds(a, NAN));
}

/* Normalising into a buffer of `size` bytes (< needed) fails cleanly:
 * -1, an empty buffer, an error, nothing written past either buffer. */
static void check_too_small(enum assumption_kind kind, const char *text,
			    size_t n, size_t size)
{
	char *buf = sentinel_buf(size);
	char err[ERR_BIG];

	for (size_t i = 0; i <= FUZZ_TINY_COUNT; i++) {
		size_t len =
			i < FUZZ_TINY_COUNT ? fuzz_tiny_len[i] : sizeof(err);
		char *e = sentinel_buf(len);

		memset(buf, FUZZ_SENTINEL, size ? size : 1);
		CHECK(assumption_normalise(kind, text, n, buf, size, e, len) ==
		      -1);
		CHECK(size ? buf[0] == '\0' : buf[0] == FUZZ_SENTINEL);
		if (len)
			check_error(e, len);
		else
			CHECK(e[0] == FUZZ_SENTINEL);
		free(e);
	}
	free(buf);
	CHECK(assumption_normalise(kind, text, n, NULL, 0, err, sizeof(err)) ==
	      -1);
	check_error(err, sizeof(err));
}

/* A value that parsed: its normal form exists, fits the limit, parses to
 * the same assumption and normalises to itself; smaller buffers fail. */
static void check_normal_form(enum assumption_kind kind, const char *text,
			      size_t n, const struct assumption *a)
{
	char norm[ASSUMPTION_TEXT_MAX + 1];
	char again[ASSUMPTION_TEXT_MAX + 1];
	char err[ERR_BIG];
	struct assumption b;

	memset(norm, FUZZ_SENTINEL, sizeof(norm));
	CHECK(assumption_normalise(kind, text, n, norm, sizeof(norm), err,
				   sizeof(err)) == 0);
	CHECK(memchr(norm, '\0', sizeof(norm)) != NULL);
	size_t len = strlen(norm);

	CHECK(len <= ASSUMPTION_TEXT_MAX);
	CHECK((len == 0) == (a->op == ASSUMPTION_ANY));
	if (a->op == ASSUMPTION_NAME)
		CHECK(strcmp(norm, a->name) == 0);

	memset(&b, 0x5A, sizeof(b));
	CHECK(assumption_parse(kind, norm, len, &b, err, sizeof(err)) == 0);
	CHECK(same(&b, a));
	CHECK(assumption_normalise(kind, norm, len, again, sizeof(again), err,
				   sizeof(err)) == 0);
	CHECK(strcmp(again, norm) == 0);

	/* Exactly enough room works; one byte less, 1 or 0 bytes fail. */
	char *exact = sentinel_buf(len + 1);

	CHECK(assumption_normalise(kind, text, n, exact, len + 1, err,
				   sizeof(err)) == 0);
	CHECK(strcmp(exact, norm) == 0);
	free(exact);
	check_too_small(kind, text, n, len);
	if (len > 1)
		check_too_small(kind, text, n, 1);
	if (len > 0)
		check_too_small(kind, text, n, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;

	static const enum assumption_kind kinds[] = {
		ASSUMPTION_COUNT, ASSUMPTION_BYTES, ASSUMPTION_BITRATE,
		ASSUMPTION_TYPE};
	enum assumption_kind kind = kinds[data[0] % 4];
	/* Not NUL-terminated: libFuzzer's buffer ends right after it. */
	const char *text = (const char *)data + 1;
	size_t n = size - 1;
	struct assumption a;
	char err[ERR_BIG];

	memset(&a, 0x5A, sizeof(a));
	memset(err, FUZZ_SENTINEL, sizeof(err));
	int r = assumption_parse(kind, text, n, &a, err, sizeof(err));

	CHECK(r == 0 || r == -1);
	check_tiny_parse(kind, text, n, r, &a, err);
	check_padded(kind, text, n, r, &a, err);

	if (r != 0) {
		char buf[64];
		char err2[ERR_BIG];

		check_error(err, sizeof(err));
		CHECK(((const unsigned char *)&a)[0] == 0x5A);
		memset(buf, FUZZ_SENTINEL, sizeof(buf));
		CHECK(assumption_normalise(kind, text, n, buf, sizeof(buf),
					   err2, sizeof(err2)) == -1);
		CHECK(buf[0] == '\0');
		CHECK(strcmp(err2, err) == 0);
		return 0;
	}
	CHECK(err[0] == '\0');
	check_value(kind, &a);
	check_normal_form(kind, text, n, &a);
	return 0;
}
