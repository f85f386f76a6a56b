/* A big file's writes on an SFTP channel of their own, spoken here: one
 * OPEN of the file for writing, then WRITEs as big as the server takes
 * (libssh2 1.10 sends 30,000 bytes a request), many in flight. */
#include "providers/ssh_bigwrite.h"

#include "providers/sftp_wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SFTP version 3's packets (draft-ietf-secsh-filexfer-02) and OpenSSH's
 * limits@openssh.com. */
enum {
	FXP_OPEN = 3,
	FXP_WRITE = 6,
	FXP_FSTAT = 8,
	FXP_HANDLE = 102,
	FXP_ATTRS = 105,
	FXP_EXTENDED = 200,
	FXP_EXTENDED_REPLY = 201,
	FXF_WRITE = 2,
};

/* The server's write length when it tells none: what every server takes
 * (the draft's 32768-byte packets, less a WRITE's header). */
#define BW_UNIT_MIN 30000
/* Above this, a request holds the sftp-server's loop without saving more
 * of its or our work per byte; page-sized so each write is too. */
#define BW_UNIT_MAX ((size_t)256 << 10)
/* WRITEs in flight: the channel's window (2 MiB from OpenSSH) holds
 * fewer of the biggest; this bounds the small ones. */
#define BW_FLIGHT     64
#define BW_HANDLE_MAX 256

enum {
	BW_WIRE,
	BW_LIMITS,
	BW_OPEN,
	BW_READY,
	BW_BROKEN,
};

struct ssh_bigwrite {
	struct sftp_wire w;
	unsigned gen; /* c's session it belongs to */
	int phase;
	/* bw_ask's request sent, its answer awaited; an FSTAT begun */
	bool asking, fstat_begun;
	uint32_t id; /* the last request's */
	size_t unit;
	unsigned char handle[BW_HANDLE_MAX];
	size_t handle_len;
	/* The WRITEs in flight, oldest first (ids id - n + 1 .. id): their
	 * lengths. */
	size_t flight[BW_FLIGHT];
	unsigned fl_head, fl_n;
	/* Bytes of the caller's region put in WRITEs so far, the last one's
	 * maybe in part: its header (hdr_off of hdr_len sent) and its bytes
	 * (cur_off of cur_len sent). */
	size_t sent;
	bool cur;
	unsigned char hdr[4 + 1 + 4 + 4 + BW_HANDLE_MAX + 8 + 4];
	size_t hdr_len, hdr_off, cur_len, cur_off;
	char path[];
};

struct ssh_bigwrite *ssh_bigwrite_new(struct ssh_conn *c, const char *path)
{
	size_t n = strlen(path) + 1;
	struct ssh_bigwrite *b = calloc(1, sizeof(*b) + n);

	if (!b)
		return NULL;
	memcpy(b->path, path, n);
	b->gen = ssh_conn_generation(c);
	b->unit = BW_UNIT_MIN;
	return b;
}

void ssh_bigwrite_free(struct ssh_conn *c, struct ssh_bigwrite *b)
{
	if (!b)
		return;
	/* Closing the channel ends its sftp-server, which closes the
	 * handle; one of a session gone went with it. */
	if (b->w.ch && c && b->gen == ssh_conn_generation(c))
		ssh_conn_drop_channel(c, b->w.ch);
	free(b);
}

static int bw_broken(struct ssh_bigwrite *b, struct ssh_req *r, const char *why)
{
	b->phase = BW_BROKEN;
	snprintf(r->err, sizeof(r->err), "SFTP writes of %s: %s", b->path, why);
	return -EIO;
}

/* A request of type t with the next id begins in b->w.out. */
static void bw_begin(struct ssh_bigwrite *b, int t)
{
	b->w.out_len = 9;
	b->w.out_off = 0;
	b->w.out[4] = (unsigned char)t;
	sftp_wire_put32(b->w.out + 5, ++b->id);
}

static void bw_end(struct ssh_bigwrite *b)
{
	sftp_wire_put32(b->w.out, (uint32_t)(b->w.out_len - 4));
}

/* Send the request in b->w.out, then read its answer into b->w.in: 0
 * once there. */
static int bw_ask(struct ssh_conn *c, struct ssh_req *r, struct ssh_bigwrite *b)
{
	int rc;

	if (!b->asking) {
		rc = sftp_wire_flush(c, r, &b->w);
		if (rc)
			return rc;
		b->asking = true;
		b->w.in_len = 0;
	}
	rc = sftp_wire_read(c, r, &b->w);
	if (rc == 0)
		b->asking = false;
	return rc;
}

/* A refusal in b->w.in (an SSH_FXP_STATUS other than ok): -EPERM with
 * *status set; 0 for ok. */
static int bw_refused(struct ssh_bigwrite *b, struct ssh_req *r,
		      unsigned long *status)
{
	*status = sftp_wire_get32(b->w.in + 9);
	if (*status == 0)
		return 0;
	snprintf(r->err, sizeof(r->err), "SFTP writes of %s: refused (%lu)",
		 b->path, *status);
	return -EPERM;
}

/* The answer in b->w.in, of the request with id `id`: of type t (0), a
 * refusal (-EPERM, *status set), or broken. */
static int bw_answer(struct ssh_bigwrite *b, struct ssh_req *r, uint32_t id,
		     int t, unsigned long *status)
{
	if (sftp_wire_get32(b->w.in + 5) != id)
		return bw_broken(b, r, "an answer out of place");
	if (b->w.in[4] == t && t != SFTP_WIRE_STATUS)
		return 0;
	if (b->w.in[4] != SFTP_WIRE_STATUS || b->w.in_len < 13)
		return bw_broken(b, r, "an answer of another kind");
	if (bw_refused(b, r, status))
		return -EPERM;
	return t == SFTP_WIRE_STATUS ? 0
				     : bw_broken(b, r, "\"ok\" for an answer");
}

/* The write length of limits@openssh.com's answer (u64 packet, read,
 * write, handles), rounded down to pages, within our bounds. */
static void bw_take_limits(struct ssh_bigwrite *b)
{
	uint64_t w;

	if (b->w.in[4] != FXP_EXTENDED_REPLY || b->w.in_len < 9 + 32)
		return;
	w = (uint64_t)sftp_wire_get32(b->w.in + 25) << 32 |
	    sftp_wire_get32(b->w.in + 29);
	if (w > BW_UNIT_MAX)
		w = BW_UNIT_MAX;
	w &= ~(uint64_t)4095;
	if (w > BW_UNIT_MIN)
		b->unit = (size_t)w;
}

/* The OPEN of the path for writing into b->w.out: false when too long. */
static bool bw_open_packet(struct ssh_bigwrite *b)
{
	bw_begin(b, FXP_OPEN);
	if (!sftp_wire_put_str(&b->w, b->path, strlen(b->path)) ||
	    b->w.out_len + 8 > sizeof(b->w.out))
		return false;
	sftp_wire_put32(b->w.out + b->w.out_len, FXF_WRITE);
	sftp_wire_put32(b->w.out + b->w.out_len + 4, 0); /* no attributes */
	b->w.out_len += 8;
	bw_end(b);
	return true;
}

/* After the server's version: the limits asked, or the OPEN. */
static int bw_after_version(struct ssh_bigwrite *b, struct ssh_req *r)
{
	bool limits = sftp_wire_has_ext(&b->w, "limits@openssh.com");

	b->w.in_len = 0;
	if (limits) {
		bw_begin(b, FXP_EXTENDED);
		(void)sftp_wire_put_str(&b->w, "limits@openssh.com", 18);
		bw_end(b);
		b->phase = BW_LIMITS;
		return 0;
	}
	b->phase = BW_OPEN;
	return bw_open_packet(b) ? 0 : bw_broken(b, r, "a path too long");
}

/* The handle in the OPEN's answer (b->w.in). */
static int bw_take_handle(struct ssh_bigwrite *b, struct ssh_req *r)
{
	size_t hl = b->w.in_len >= 13 ? sftp_wire_get32(b->w.in + 9) : 0;

	if (hl == 0 || hl > BW_HANDLE_MAX || 13 + hl > b->w.in_len)
		return bw_broken(b, r, "a handle out of bounds");
	memcpy(b->handle, b->w.in + 13, hl);
	b->handle_len = hl;
	b->phase = BW_READY;
	return 0;
}

int ssh_bigwrite_open(struct ssh_conn *c, struct ssh_req *r,
		      struct ssh_bigwrite *b, unsigned long *status)
{
	int rc;

	*status = 0;
	if (b->phase == BW_WIRE) {
		rc = sftp_wire_open(c, r, &b->w);
		if (rc)
			return rc;
		rc = bw_after_version(b, r);
		if (rc)
			return rc;
	}
	if (b->phase == BW_LIMITS) {
		rc = bw_ask(c, r, b);
		if (rc)
			return rc;
		if (sftp_wire_get32(b->w.in + 5) != b->id)
			return bw_broken(b, r, "an answer out of place");
		bw_take_limits(b); /* a refusal leaves the least */
		b->w.in_len = 0;
		b->phase = BW_OPEN;
		if (!bw_open_packet(b))
			return bw_broken(b, r, "a path too long");
	}
	if (b->phase == BW_OPEN) {
		rc = bw_ask(c, r, b);
		if (rc)
			return rc;
		rc = bw_answer(b, r, b->id, FXP_HANDLE, status);
		if (rc == 0)
			rc = bw_take_handle(b, r);
		b->w.in_len = 0;
		if (rc)
			return rc;
	}
	return b->phase == BW_READY ? 0 : bw_broken(b, r, "not open");
}

int ssh_bigwrite_fstat(struct ssh_conn *c, struct ssh_req *r,
		       struct ssh_bigwrite *b, const unsigned char **attrs,
		       size_t *len, unsigned long *status)
{
	int rc;

	*status = 0;
	if (b->phase != BW_READY || b->fl_n || b->cur)
		return bw_broken(b, r, "asked while busy");
	if (!b->fstat_begun) {
		bw_begin(b, FXP_FSTAT);
		(void)sftp_wire_put_str(&b->w, b->handle, b->handle_len);
		bw_end(b);
		b->fstat_begun = true;
	}
	rc = bw_ask(c, r, b);
	if (rc)
		return rc;
	b->fstat_begun = false;
	rc = bw_answer(b, r, b->id, FXP_ATTRS, status);
	*attrs = b->w.in + 9; /* stays there until the next answer */
	*len = b->w.in_len - 9;
	b->w.in_len = 0;
	return rc;
}

/* Take the answers that came to the WRITEs in flight: *acked grows by
 * the bytes of each. 0 or -EAGAIN when no more came, else -errno. */
static int bw_acks(struct ssh_conn *c, struct ssh_req *r,
		   struct ssh_bigwrite *b, size_t *acked, unsigned long *status)
{
	while (b->fl_n && !(b->cur && b->fl_n == 1)) {
		int rc = sftp_wire_read(c, r, &b->w);

		if (rc)
			return rc;
		rc = bw_answer(b, r, b->id - b->fl_n + 1, SFTP_WIRE_STATUS,
			       status);
		b->w.in_len = 0;
		if (rc)
			return rc;
		*acked += b->flight[b->fl_head];
		b->fl_head = (b->fl_head + 1) % BW_FLIGHT;
		b->fl_n--;
	}
	return 0;
}

/* The next WRITE: header for the unit at the region's byte b->sent. */
static void bw_next(struct ssh_bigwrite *b, size_t len, off_t off)
{
	size_t n = len - b->sent < b->unit ? len - b->sent : b->unit;
	uint64_t at = (uint64_t)off + b->sent;
	unsigned char *p = b->hdr;

	p[4] = FXP_WRITE;
	sftp_wire_put32(p + 5, ++b->id);
	sftp_wire_put32(p + 9, (uint32_t)b->handle_len);
	memcpy(p + 13, b->handle, b->handle_len);
	p += 13 + b->handle_len;
	sftp_wire_put32(p, (uint32_t)(at >> 32));
	sftp_wire_put32(p + 4, (uint32_t)at);
	sftp_wire_put32(p + 8, (uint32_t)n);
	b->hdr_len = (size_t)(p + 12 - b->hdr);
	sftp_wire_put32(b->hdr, (uint32_t)(b->hdr_len - 4 + n));
	b->hdr_off = 0;
	b->cur_len = n;
	b->cur_off = 0;
	b->cur = true;
	b->flight[(b->fl_head + b->fl_n) % BW_FLIGHT] = n;
	b->fl_n++;
	b->sent += n;
}

ssize_t ssh_bigwrite_send(struct ssh_conn *c, struct ssh_req *r,
			  struct ssh_bigwrite *b, const char *buf, size_t len,
			  off_t off, unsigned long *status)
{
	size_t acked = 0;
	int rc = 0;

	*status = 0;
	if (b->phase != BW_READY || b->w.broken)
		return bw_broken(b, r, "not open");
	if (len < b->sent)
		return bw_broken(b, r, "bytes in flight taken back");
	for (;;) {
		rc = bw_acks(c, r, b, &acked, status);
		if (rc && rc != -EAGAIN)
			break;
		/* Less than a unit only with nothing else in flight: more
		 * bytes come meanwhile, as the kernel writes back. */
		if (!b->cur && b->sent < len && b->fl_n < BW_FLIGHT &&
		    (len - b->sent >= b->unit || b->fl_n == 0))
			bw_next(b, len, off);
		if (!b->cur)
			break; /* all sent, or enough in flight */
		/* The unit's header, then its bytes (libssh2 sends 32 KiB a
		 * packet and copies them; they stay in buf until acked). */
		ssh_conn_hold(c, true);
		rc = sftp_wire_send(c, r, &b->w, b->hdr, b->hdr_len,
				    &b->hdr_off);
		ssh_conn_hold(c, false);
		if (rc == 0)
			rc = sftp_wire_send(c, r, &b->w,
					    (const unsigned char *)buf +
						    b->sent - b->cur_len,
					    b->cur_len, &b->cur_off);
		if (rc)
			break;
		b->cur = false;
	}
	/* The region starts after the bytes acked, from the next call on. */
	b->sent -= acked;
	if (rc && rc != -EAGAIN)
		b->phase = BW_BROKEN; /* answers to come would be out of step */
	if (acked && (rc == 0 || rc == -EAGAIN))
		return (ssize_t)acked;
	return rc ? rc : -EAGAIN;
}
