/* SSH key pairs of clusters: ed25519 generated with OpenSSL, the private key
 * in OpenSSH's format (what libssh2 and ssh read), the public key as the
 * "ssh-ed25519 AAAA... comment" line of authorized_keys and EC2's import. */
#ifndef CCLFS_PROVIDERS_SSHKEY_H
#define CCLFS_PROVIDERS_SSHKEY_H

#include <stddef.h>

#define SSHKEY_PUBKEY_MAX 256

/* Make a pair in memory: *pem (malloc'd, for the caller to wipe and free)
 * the private key file's text, `line` the public key line ending in a
 * newline. 0, or -errno with err. */
int sshkey_make(const char *comment, char **pem, size_t *pem_len, char *line,
		size_t linelen, char *err, size_t errlen);

/* Make the pair: `path` (0600) and `path`.pub, each written whole or not at
 * all. 0, or -errno with err. */
int sshkey_generate(const char *path, const char *comment, char *err,
		    size_t errlen);

/* The public key line of a pair made by sshkey_generate; -ENOENT when
 * either file is missing. */
int sshkey_public(const char *path, char *pub, size_t publen, char *err,
		  size_t errlen);

/* Base64 (with padding, no newlines) of len bytes into out; -1 when out is
 * too short. */
int sshkey_base64(const void *in, size_t len, char *out, size_t outlen);

#endif
