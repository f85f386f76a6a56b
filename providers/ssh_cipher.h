/* AES-CTR for the SSH sessions, keystream made in bulk (ssh_cipher.c). */
#ifndef CCLFS_PROVIDERS_SSH_CIPHER_H
#define CCLFS_PROVIDERS_SSH_CIPHER_H

#include <stdbool.h>

/* Makes the ciphers, before libssh2 asks for one. */
void ssh_cipher_setup(void);
/* True when libssh2's lookup of EVP_aes_128_ctr finds this file's cipher
 * (with libssh2 1.11 and later, which cipher whole packets, it is not
 * made). */
bool ssh_cipher_bulk(void);

#endif
