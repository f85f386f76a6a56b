/* The unit tests' CHECK: count a check, and on failure say where and what
 * failed, then go on; a test ends with check_summary(). */
#ifndef CCLFS_TESTS_CHECK_H
#define CCLFS_TESTS_CHECK_H

#include <stdio.h>

static int checks, failed;

#define CHECK(e)                                                               \
	do {                                                                   \
		checks++;                                                      \
		if (!(e)) {                                                    \
			failed++;                                              \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, \
				__LINE__, #e);                                 \
		}                                                              \
	} while (0)

/* Print "NAME: N checks, M failed" and return the exit status. */
static inline int check_summary(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, checks, failed);
	return failed ? 1 : 0;
}

#endif
