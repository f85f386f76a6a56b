/* The thread's read buffer and pipe (fs/readpipe.c): what is filled in is
 * what the pipe gives, whatever the size; a pipe libfuse left bytes in is
 * made anew; each thread has a buffer of its own. */
#include "fs/readpipe.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void pattern(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)((i * 131 + seed) >> 3);
}

/* Reads n bytes from fd and checks them against the pattern, and that no
 * more is there. */
static void expect_pipe(int fd, size_t n, unsigned seed)
{
	char *want = malloc(n), *got = malloc(n);
	size_t have = 0;
	int left = -1;

	CHECK(want && got);
	if (!want || !got)
		goto out;
	pattern(want, n, seed);
	while (have < n) {
		ssize_t k = read(fd, got + have, n - have);

		if (k <= 0)
			break;
		have += (size_t)k;
	}
	CHECK(have == n);
	CHECK(memcmp(want, got, n) == 0);
	CHECK(ioctl(fd, FIONREAD, &left) == 0 && left == 0);
out:
	free(want);
	free(got);
}

static void fill_and_check(size_t n, unsigned seed)
{
	char *b = readpipe_buf(n);
	int fd;

	CHECK(b != NULL && (uintptr_t)b % 4096 == 0);
	if (!b)
		return;
	pattern(b, n, seed);
	fd = readpipe_fill(n);
	CHECK(fd >= 0);
	if (fd >= 0)
		expect_pipe(fd, n, seed);
}

static void *other_thread(void *arg)
{
	const char *mine = arg;
	char *b = readpipe_buf(65536);

	CHECK(b != NULL && b != mine);
	fill_and_check(65536, 9);
	return NULL;
}

int main(void)
{
	char *b;
	int fd;
	pthread_t t;

	/* sizes libfuse splices: two pages, a read of 128 KiB, an odd one,
	 * and 1 MiB (the pipe grows to each) */
	fill_and_check(8192, 1);
	fill_and_check(131072, 2);
	fill_and_check(100001, 3);
	fill_and_check(1048576, 4);
	fill_and_check(131072, 5); /* smaller again, in the grown pipe */

	/* a pipe still holding bytes is made anew: only the new ones come */
	b = readpipe_buf(32768);
	pattern(b, 32768, 6);
	fd = readpipe_fill(32768);
	CHECK(fd >= 0);
	if (fd >= 0) {
		char part[4096];

		CHECK(read(fd, part, sizeof(part)) == (ssize_t)sizeof(part));
	}
	fill_and_check(20000, 7);

	/* more than the buffer holds is refused */
	b = readpipe_buf(16384);
	CHECK(b != NULL);
	CHECK(readpipe_fill((size_t)4 << 20) == -1);

	/* another thread's buffer is another */
	CHECK(pthread_create(&t, NULL, other_thread, b) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	fill_and_check(16384, 8);
	return check_summary("readpipe");
}
