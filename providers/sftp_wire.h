/* SFTP spoken by hand on a channel of its own, for what libssh2 1.10 does
 * not do (OpenSSH's extensions, big writes): the channel opened up to the
 * server's version, whole packets sent and read. */
#ifndef CCLFS_PROVIDERS_SFTP_WIRE_H
#define CCLFS_PROVIDERS_SFTP_WIRE_H

#include "providers/ssh_priv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	SFTP_WIRE_VERSION = 2, /* SSH_FXP_VERSION */
	SFTP_WIRE_STATUS = 101,
};

#define SFTP_WIRE_BUF 16384

/* A channel, a request going out and an answer coming in. */
struct sftp_wire {
	LIBSSH2_CHANNEL *ch;
	int phase;   /* of sftp_wire_open */
	bool broken; /* the server did what it should not have */
	unsigned char out[SFTP_WIRE_BUF], in[SFTP_WIRE_BUF];
	size_t out_len, out_off, in_len;
};

static inline void sftp_wire_put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static inline uint32_t sftp_wire_get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* On c's thread, stepping without blocking: 0 once done, -EAGAIN to be
 * called again, or -errno (r->err filled; -EIO with w->broken set for
 * what the server should not have done: the channel is no more use). */

/* The channel, its sftp subsystem, SSH_FXP_INIT (version 3) and the
 * server's SSH_FXP_VERSION, left in w->in. */
int sftp_wire_open(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w);
/* Send buf[*off, n) on the channel, 0 once all of it is (the channel's
 * window shut is -EAGAIN). */
int sftp_wire_send(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w,
		   const unsigned char *buf, size_t n, size_t *off);
/* Send w->out[w->out_off, w->out_len). */
int sftp_wire_flush(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w);
/* Read into w->in until it holds a whole packet of at least 9 bytes
 * (length, type, id or version): 0 once it does. */
int sftp_wire_read(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w);
/* Append an SSH string of n bytes at p to w->out: false when it would
 * not fit. */
bool sftp_wire_put_str(struct sftp_wire *w, const void *p, size_t n);
/* Whether the SSH_FXP_VERSION in w->in announces extension `name`. */
bool sftp_wire_has_ext(const struct sftp_wire *w, const char *name);

#endif
