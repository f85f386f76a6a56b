/* SFTP spoken by hand on a channel of its own, for what libssh2 1.10 does
 * not do (OpenSSH's extensions, big writes): the channel opened up to the
 * server's version, whole packets sent and read. */
#include "providers/sftp_wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum { WIRE_CHANNEL, WIRE_STARTUP, WIRE_INIT, WIRE_VERSION, WIRE_OPEN };

static int wire_broken(struct sftp_wire *w, struct ssh_req *r, const char *why)
{
	w->broken = true;
	snprintf(r->err, sizeof(r->err), "SFTP: %s", why);
	return -EIO;
}

int sftp_wire_open(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w)
{
	int rc;

	switch (w->phase) {
	case WIRE_CHANNEL:
		w->ch = ssh_conn_open_session(c, r, &rc);
		if (!w->ch)
			return rc;
		w->phase = WIRE_STARTUP;
		/* fall through */
	case WIRE_STARTUP:
		rc = libssh2_channel_process_startup(w->ch, "subsystem", 9,
						     "sftp", 4);
		if (rc == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (rc)
			return wire_broken(w, r, "no SFTP subsystem");
		r->progress = true;
		sftp_wire_put32(w->out, 5);
		w->out[4] = 1; /* SSH_FXP_INIT, version 3 */
		sftp_wire_put32(w->out + 5, 3);
		w->out_len = 9;
		w->out_off = 0;
		w->phase = WIRE_INIT;
		/* fall through */
	case WIRE_INIT:
		rc = sftp_wire_flush(c, r, w);
		if (rc)
			return rc;
		w->in_len = 0;
		w->phase = WIRE_VERSION;
		/* fall through */
	case WIRE_VERSION:
		rc = sftp_wire_read(c, r, w);
		if (rc)
			return rc;
		if (w->in[4] != SFTP_WIRE_VERSION)
			return wire_broken(w, r, "no version");
		w->phase = WIRE_OPEN;
		/* fall through */
	default:
		return 0;
	}
}

int sftp_wire_send(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w,
		   const unsigned char *buf, size_t n, size_t *off)
{
	while (*off < n) {
		ssize_t k = libssh2_channel_write(
			w->ch, (const char *)buf + *off, n - *off);

		/* 0: the channel's window is shut until sshd opens it */
		if (k == LIBSSH2_ERROR_EAGAIN || k == 0)
			return -EAGAIN;
		if (k < 0)
			return ssh_conn_fail(c, r, "sending to SFTP");
		r->progress = true;
		*off += (size_t)k;
	}
	return 0;
}

int sftp_wire_flush(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w)
{
	return sftp_wire_send(c, r, w, w->out, w->out_len, &w->out_off);
}

int sftp_wire_read(struct ssh_conn *c, struct ssh_req *r, struct sftp_wire *w)
{
	for (;;) {
		size_t want =
			w->in_len < 4 ? 4 : 4 + (size_t)sftp_wire_get32(w->in);
		ssize_t n;

		if (want > sizeof(w->in))
			return wire_broken(w, r, "an answer too long");
		if (w->in_len >= 4 && w->in_len == want)
			return want < 9 ? wire_broken(w, r,
						      "an answer too short")
					: 0;
		n = libssh2_channel_read(w->ch, (char *)w->in + w->in_len,
					 want - w->in_len);
		if (n == LIBSSH2_ERROR_EAGAIN)
			return -EAGAIN;
		if (n < 0)
			return ssh_conn_fail(c, r, "reading from SFTP");
		if (n == 0) {
			if (libssh2_channel_eof(w->ch))
				return wire_broken(w, r, "the channel closed");
			return -EAGAIN;
		}
		r->progress = true;
		w->in_len += (size_t)n;
	}
}

bool sftp_wire_put_str(struct sftp_wire *w, const void *p, size_t n)
{
	if (w->out_len + 4 + n > sizeof(w->out))
		return false;
	sftp_wire_put32(w->out + w->out_len, (uint32_t)n);
	memcpy(w->out + w->out_len + 4, p, n);
	w->out_len += 4 + n;
	return true;
}

bool sftp_wire_has_ext(const struct sftp_wire *w, const char *name)
{
	size_t off = 9, len = w->in_len, want = strlen(name);

	while (off + 4 <= len) {
		size_t nl = sftp_wire_get32(w->in + off), dl;

		if (nl > len - off - 4 || off + 8 + nl > len)
			break;
		dl = sftp_wire_get32(w->in + off + 4 + nl);
		if (dl > len - off - 8 - nl)
			break;
		if (nl == want && memcmp(w->in + off + 4, name, nl) == 0)
			return true;
		off += 8 + nl + dl;
	}
	return false;
}
