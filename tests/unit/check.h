/* The unit tests' CHECK: count a check, and on failure say where and what
 * failed, then go on; a test ends with check_summary(). */
#ifndef CCLFS_TESTS_CHECK_H
#define CCLFS_TESTS_CHECK_H

#include <stdio.h>
#include <time.h>

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

/* Milliseconds since t0 (CLOCK_MONOTONIC), and a short pause: the bounded
 * waits of tests that poll what other threads do. */
static inline long check_ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 +
	       (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static inline void check_nap(void)
{
	struct timespec ts = {0, 2 * 1000000L};

	nanosleep(&ts, NULL);
}

/* Wait until e holds, 10 s at most (a bound for a loaded machine, not a
 * duration that is checked), then check it. */
#define CHECK_WAIT_MS 10000
#define CHECK_SOON(e)                                                          \
	do {                                                                   \
		struct timespec t0_;                                           \
		clock_gettime(CLOCK_MONOTONIC, &t0_);                          \
		while (!(e) && check_ms_since(&t0_) < CHECK_WAIT_MS)           \
			check_nap();                                           \
		CHECK(e);                                                      \
	} while (0)

/* Print "NAME: N checks, M failed" and return the exit status. */
static inline int check_summary(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, checks, failed);
	return failed ? 1 : 0;
}

#endif
