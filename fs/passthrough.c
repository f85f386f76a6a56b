/* FUSE passthrough for the files of local nodes. libfuse 3.14 has no API
 * for it (3.16 has), so this file is the daemon's I/O with /dev/fuse
 * (fuse_session_custom_io): it asks for passthrough in the INIT reply
 * when the kernel offers it, and marks an open reply with the backing
 * file that the thread sending it registered. */
#define FUSE_USE_VERSION 314
#include "fs/passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The parts of the kernel's FUSE protocol used here, as of Linux 6.9
 * (Debian 12's <linux/fuse.h> is older and has no passthrough). */
enum {
	PT_OP_INIT = 26,
	PT_INIT_WRITEBACK_CACHE = 1U << 16,
	PT_INIT_EXT = 1U << 30,
	PT_INIT2_PASSTHROUGH = 1U << (37 - 32), /* FUSE_PASSTHROUGH */
	PT_FOPEN_PASSTHROUGH = 1U << 7,
	/* all that an open reply may carry with FOPEN_PASSTHROUGH */
	PT_FOPEN_ALLOWED = (1U << 0) | (1U << 5) | (1U << 6) | (1U << 7),
	/* the daemon's own files are on a disk file system: one level */
	PT_STACK_DEPTH = 1,
};

struct pt_in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};

/* fuse_init_in: major, minor, max_readahead, flags, flags2 */
enum { PT_INIT_IN_FLAGS = 12, PT_INIT_IN_FLAGS2 = 16, PT_INIT_IN_MIN = 20 };

struct pt_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

struct pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
};

struct pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

/* struct fuse_backing_map: the descriptor, flags (none), 64 bits unused */
typedef uint32_t pt_backing_map[4];

#define PT_IOC_BACKING_OPEN  _IOW(229, 1, pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* An open reply is the open_out alone, a create reply the entry_out (128
 * bytes since protocol 7.9) and then the open_out. */
enum { PT_ENTRY_OUT = 128 };

_Static_assert(sizeof(struct pt_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct pt_out_header) == 16, "fuse_out_header");
_Static_assert(sizeof(struct pt_init_out) == 40, "fuse_init_out head");
_Static_assert(sizeof(struct pt_open_out) == 16, "fuse_open_out");

/* A backing file registered with the kernel: one per file of the disk
 * (device and inode), shared by all its opens, since the kernel wants one
 * backing file per inode of the mount for as long as any is open. Found
 * by a table of PT_BUCKETS lists, hashed by inode: every open looks. */
struct passthrough_file {
	dev_t dev;
	ino_t ino;
	int32_t id;
	int opens;
	struct passthrough_file *next;
};

#define PT_BUCKET_BITS 10
#define PT_BUCKETS     (1 << PT_BUCKET_BITS)

static struct {
	pthread_mutex_t lock;
	int fd;	     /* /dev/fuse of the session */
	bool enable; /* not -o nopassthrough */
	/* set by the thread that reads INIT, looked at by all */
	atomic_bool offered;	      /* the kernel offered passthrough */
	atomic_bool on;		      /* and it was asked for */
	_Atomic uint64_t init_unique; /* the INIT request's */
	struct passthrough_file *files[PT_BUCKETS];
} pt = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static struct passthrough_file **pt_bucket(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32)) *
		     0x9e3779b97f4a7c15ULL; /* Fibonacci hashing */

	return &pt.files[h >> (64 - PT_BUCKET_BITS)];
}

/* The backing id of the open this thread is answering, or 0. */
static _Thread_local int32_t pt_pending;

/* The kernel lets only a daemon with CAP_SYS_ADMIN register files. */
static bool pt_may(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};

	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
	       CAP_TO_MASK(CAP_SYS_ADMIN);
}

static ssize_t pt_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	struct pt_in_header in;
	uint32_t flags, flags2;
	const char *init = (const char *)buf + sizeof(in);

	(void)userdata;
	/* INIT is the first request, read before libfuse splices any */
	if (pt.enable && !pt.init_unique &&
	    n >= (ssize_t)(sizeof(in) + PT_INIT_IN_MIN)) {
		memcpy(&in, buf, sizeof(in));
		memcpy(&flags, init + PT_INIT_IN_FLAGS, sizeof(flags));
		memcpy(&flags2, init + PT_INIT_IN_FLAGS2, sizeof(flags2));
		if (in.opcode == PT_OP_INIT) {
			pt.init_unique = in.unique;
			pt.offered = (flags & PT_INIT_EXT) &&
				     (flags2 & PT_INIT2_PASSTHROUGH) &&
				     pt_may();
		}
	}
	return n;
}

/* The INIT reply asks for passthrough: libfuse 3.14 cannot. */
static void pt_patch_init(struct pt_init_out *o)
{
	if (o->flags & PT_INIT_WRITEBACK_CACHE)
		return; /* the kernel takes one or the other */
	o->flags |= PT_INIT_EXT;
	o->flags2 |= PT_INIT2_PASSTHROUGH;
	o->max_stack_depth = PT_STACK_DEPTH;
	pt.on = true;
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct pt_out_header out;
	struct iovec v[2];
	char body[PT_ENTRY_OUT + sizeof(struct pt_open_out)];
	struct pt_open_out oo;
	bool init;
	size_t at;

	(void)userdata;
	/* most replies need nothing: sent as they are, without a copy */
	if ((!pt_pending && !pt.offered) || count != 2 ||
	    iov[0].iov_len != sizeof(out) || iov[1].iov_len > sizeof(body))
		return writev(fd, iov, count);
	memcpy(&out, iov[0].iov_base, sizeof(out));
	init = pt.offered && out.unique == pt.init_unique;
	if (out.unique == 0 || (!init && !pt_pending))
		return writev(fd, iov, count); /* a notification, or not ours */
	memcpy(body, iov[1].iov_base, iov[1].iov_len);
	v[0] = iov[0];
	v[1] = (struct iovec){body, iov[1].iov_len};
	if (init) {
		struct pt_init_out o;

		pt.offered = false;
		if (out.error == 0 &&
		    iov[1].iov_len >= sizeof(struct pt_init_out)) {
			memcpy(&o, body, sizeof(o));
			pt_patch_init(&o);
			memcpy(body, &o, sizeof(o));
		}
		return writev(fd, v, 2);
	}
	/* the first reply this thread sends after passthrough_open is that
	 * open's (or its error) */
	at = iov[1].iov_len == sizeof(oo)		   ? 0
	     : iov[1].iov_len == PT_ENTRY_OUT + sizeof(oo) ? PT_ENTRY_OUT
							   : SIZE_MAX;
	if (out.error == 0 && at != SIZE_MAX) {
		memcpy(&oo, body + at, sizeof(oo));
		if (!(oo.open_flags & ~PT_FOPEN_ALLOWED)) {
			oo.open_flags |= PT_FOPEN_PASSTHROUGH;
			oo.backing_id = pt_pending;
			memcpy(body + at, &oo, sizeof(oo));
		}
	}
	pt_pending = 0;
	return writev(fd, v, 2);
}

static ssize_t pt_splice(int fdin, off_t *offin, int fdout, off_t *offout,
			 size_t len, unsigned int flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

/* The kernel forgets backing file id: each open made with it holds its
 * file on its own. */
static void pt_forget(int32_t id)
{
	uint32_t u = (uint32_t)id;

	ioctl(pt.fd, PT_IOC_BACKING_CLOSE, &u);
}

int passthrough_attach(struct fuse_session *se, bool enable)
{
	static const struct fuse_custom_io io = {
		.writev = pt_writev,
		.read = pt_read,
		.splice_receive = pt_splice,
		.splice_send = pt_splice,
	};

	pt.fd = fuse_session_fd(se);
	pt.enable = enable;
	return fuse_session_custom_io(se, &io, pt.fd) == 0 ? 0 : -1;
}

struct passthrough_file *passthrough_open(int fd)
{
	pt_backing_map map = {(uint32_t)fd};
	struct passthrough_file *f, **head;
	struct stat st;
	int id;

	if (!pt.on || fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	pthread_mutex_lock(&pt.lock);
	head = pt_bucket(st.st_dev, st.st_ino);
	for (f = *head; f; f = f->next)
		if (f->dev == st.st_dev && f->ino == st.st_ino)
			break;
	if (!f) {
		id = ioctl(pt.fd, PT_IOC_BACKING_OPEN, map);
		f = id > 0 ? calloc(1, sizeof(*f)) : NULL;
		if (!f) {
			if (id > 0)
				pt_forget(id);
			else if (errno == EPERM) /* not for any file */
				pt.on = false;
			pthread_mutex_unlock(&pt.lock);
			return NULL;
		}
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		f->id = id;
		f->next = *head;
		*head = f;
	}
	f->opens++;
	pt_pending = f->id;
	pthread_mutex_unlock(&pt.lock);
	return f;
}

void passthrough_close(struct passthrough_file *pf)
{
	struct passthrough_file **p;

	if (!pf)
		return;
	pthread_mutex_lock(&pt.lock);
	if (pt_pending == pf->id)
		pt_pending = 0;
	if (--pf->opens == 0) {
		for (p = pt_bucket(pf->dev, pf->ino); *p != pf; p = &(*p)->next)
			;
		*p = pf->next;
		pt_forget(pf->id);
		free(pf);
	}
	pthread_mutex_unlock(&pt.lock);
}
