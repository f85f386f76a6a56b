/* A cluster's SSH key pair: ed25519 generated with OpenSSL, the private key
 * written in OpenSSH's format (what libssh2 reads) with mode 0600, the
 * public key as the "ssh-ed25519 AAAA... comment" line EC2 imports. */
#ifndef CCLFS_PROVIDERS_EC2_KEYS_H
#define CCLFS_PROVIDERS_EC2_KEYS_H

#include <stddef.h>

#define EC2_PUBKEY_MAX 256

/* Make the pair: `path` (0600) and `path`.pub, each written whole or not at
 * all. 0, or -errno with err. */
int ec2_keys_generate(const char *path, const char *comment, char *err,
		      size_t errlen);

/* The public key line of a pair made by ec2_keys_generate; -ENOENT when
 * either file is missing. */
int ec2_keys_public(const char *path, char *pub, size_t publen, char *err,
		    size_t errlen);

/* Base64 (with padding, no newlines) of len bytes into out; -1 when out is
 * too short. */
int ec2_keys_base64(const void *in, size_t len, char *out, size_t outlen);

#endif
