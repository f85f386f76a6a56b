/* What the libFuzzer targets share: CHECK, which names a broken invariant
 * and dies so that libFuzzer saves the input as a crash, and buffers of an
 * exact size filled with a sentinel, so that AddressSanitizer catches a
 * write past one and a check sees what was left untouched. */
#ifndef CCLFS_TESTS_FUZZ_CHECK_H
#define CCLFS_TESTS_FUZZ_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name the broken invariant on stderr (libFuzzer keeps it in its log),
 * then trap. */
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: invariant broken: %s\n",       \
				__FILE__, __LINE__, #cond);                    \
			__builtin_trap();                                      \
		}                                                              \
	} while (0)

/* A char array field holds a string: its NUL is within the array. */
#define CHECK_STR(field) CHECK(memchr((field), '\0', sizeof(field)) != NULL)

/* The sentinel of sentinel_buf. */
#define FUZZ_SENTINEL 'Z'

/* The tiny error buffers every call must also cope with. */
static const size_t fuzz_tiny_len[] = {0, 1, 7};
#define FUZZ_TINY_COUNT (sizeof(fuzz_tiny_len) / sizeof(fuzz_tiny_len[0]))

/* Heap buffer of exactly n bytes filled with the sentinel; one byte for
 * n == 0, which must stay untouched. */
static inline char *sentinel_buf(size_t n)
{
	char *b = malloc(n ? n : 1);

	if (!b)
		abort();
	memset(b, FUZZ_SENTINEL, n ? n : 1);
	return b;
}

/* What a call given `len` bytes for a string left there, when the same call
 * given room enough wrote `whole`: its prefix, cut to len - 1 bytes and
 * terminated; nothing at all when len is 0. */
static inline void check_truncated(const char *buf, size_t len,
				   const char *whole)
{
	if (len == 0) {
		CHECK(buf[0] == FUZZ_SENTINEL);
		return;
	}
	CHECK(memchr(buf, '\0', len) != NULL);
	CHECK(strncmp(buf, whole, len - 1) == 0);
}

#endif
