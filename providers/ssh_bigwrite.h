/* A big file's writes on an SFTP channel of their own, spoken here: one
 * OPEN of the file for writing, then WRITEs as big as the server takes
 * (libssh2 1.10 sends 30,000 bytes a request), many in flight. */
#ifndef CCLFS_PROVIDERS_SSH_BIGWRITE_H
#define CCLFS_PROVIDERS_SSH_BIGWRITE_H

#include "providers/ssh_priv.h"

#include <stddef.h>
#include <sys/types.h>

struct ssh_bigwrite;

/* For the file at path of c's current session; NULL out of memory. */
struct ssh_bigwrite *ssh_bigwrite_new(struct ssh_conn *c, const char *path);
/* On c's thread: the channel goes (closed in the background) when it is
 * of c's current session; then b is freed. */
void ssh_bigwrite_free(struct ssh_conn *c, struct ssh_bigwrite *b);

/* The calls below are made on c's thread and step without blocking: 0
 * once done, -EAGAIN to be called again, or -errno with r->err filled
 * and *status the server's SFTP status when it refused (else 0). */

/* The channel, SFTP's INIT, the server's limits and the OPEN. */
int ssh_bigwrite_open(struct ssh_conn *c, struct ssh_req *r,
		      struct ssh_bigwrite *b, unsigned long *status);
/* An FSTAT of the handle: *attrs and *len, the answer's attributes as
 * SSH_FXP_ATTRS sends them, valid until the next call. */
int ssh_bigwrite_fstat(struct ssh_conn *c, struct ssh_req *r,
		       struct ssh_bigwrite *b, const unsigned char **attrs,
		       size_t *len, unsigned long *status);
/* Bytes [off, off + len) at buf, none of them acked yet: the same bytes
 * from the same place as in the last call, but for the ones it acked.
 * Sends the WRITEs of those not sent yet, takes the answers that came:
 * how many more bytes are acked (> 0), -EAGAIN when none, or -errno. */
ssize_t ssh_bigwrite_send(struct ssh_conn *c, struct ssh_req *r,
			  struct ssh_bigwrite *b, const char *buf, size_t len,
			  off_t off, unsigned long *status);

#endif
