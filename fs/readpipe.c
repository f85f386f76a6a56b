/* Replies to reads of remote nodes' files. Their bytes are in the daemon's
 * memory, and libfuse, which splices replies (for local nodes' files, see
 * fs_read_buf), would write them into its pipe (one copy) and splice that
 * pipe to the kernel (a second). Given to libfuse as a pipe of the thread's
 * own, which holds the buffer's pages by reference (vmsplice), they are
 * moved from pipe to pipe and copied once, by the kernel. The pages must not
 * change until then: they are the thread's buffer, which only the thread's
 * next read writes, after libfuse replied to this one. */
#include "fs/readpipe.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#define READPIPE_PAGE 4096

struct readpipe {
	char *buf;
	size_t cap;
	int fd[2]; /* -1 until made */
	size_t pipe_cap;
};

static pthread_key_t readpipe_key;
static pthread_once_t readpipe_once = PTHREAD_ONCE_INIT;

static void readpipe_close(struct readpipe *r)
{
	if (r->fd[0] >= 0) {
		close(r->fd[0]);
		close(r->fd[1]);
	}
	r->fd[0] = r->fd[1] = -1;
	r->pipe_cap = 0;
}

static void readpipe_free(void *p)
{
	struct readpipe *r = p;

	readpipe_close(r);
	free(r->buf);
	free(r);
}

static void readpipe_init(void)
{
	(void)pthread_key_create(&readpipe_key, readpipe_free);
}

static struct readpipe *readpipe_self(void)
{
	struct readpipe *r;

	(void)pthread_once(&readpipe_once, readpipe_init);
	r = pthread_getspecific(readpipe_key);
	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->fd[0] = r->fd[1] = -1;
	if (pthread_setspecific(readpipe_key, r) != 0) {
		free(r);
		return NULL;
	}
	return r;
}

char *readpipe_buf(size_t size)
{
	struct readpipe *r = readpipe_self();
	size_t want =
		(size + READPIPE_PAGE - 1) / READPIPE_PAGE * READPIPE_PAGE;
	void *p = NULL;

	if (!r)
		return NULL;
	if (want == 0)
		want = READPIPE_PAGE;
	if (r->cap < want) {
		if (posix_memalign(&p, READPIPE_PAGE, want) != 0)
			return NULL;
		free(r->buf);
		r->buf = p;
		r->cap = want;
	}
	return r->buf;
}

/* An empty pipe of room for n bytes of pages. A pipe that still holds
 * bytes (libfuse gave up on a reply midway) is made anew: its pages are the
 * buffer's, which is about to change. */
static int readpipe_ready(struct readpipe *r, size_t n)
{
	int left = 0;

	if (r->fd[0] >= 0 && ioctl(r->fd[0], FIONREAD, &left) == 0 && left > 0)
		readpipe_close(r);
	if (r->fd[0] < 0 && pipe2(r->fd, O_CLOEXEC) != 0) {
		r->fd[0] = r->fd[1] = -1;
		return -1;
	}
	if (r->pipe_cap < n) {
		int got = fcntl(r->fd[0], F_SETPIPE_SZ, (int)n);

		if (got < 0)
			return -1;
		r->pipe_cap = (size_t)got;
	}
	return 0;
}

int readpipe_fill(size_t n)
{
	struct readpipe *r = readpipe_self();
	struct iovec v;
	size_t done = 0;

	if (!r || !r->buf || n > r->cap || n > (size_t)1 << 30 ||
	    readpipe_ready(r, n) != 0)
		return -1;
	while (done < n) {
		ssize_t k;

		v.iov_base = r->buf + done;
		v.iov_len = n - done;
		k = vmsplice(r->fd[1], &v, 1, SPLICE_F_NONBLOCK);
		if (k <= 0) {
			readpipe_close(r);
			return -1;
		}
		done += (size_t)k;
	}
	return r->fd[0];
}
