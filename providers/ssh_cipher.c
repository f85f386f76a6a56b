/* AES-CTR for the SSH sessions' bytes. libssh2 1.10 encrypts and decrypts
 * one 16-byte block per EVP_Cipher call, and OpenSSL 3's per-call cost is
 * most of that; this file gives libssh2 an AES-CTR of the same keys and
 * counters whose calls XOR a keystream OpenSSL makes 16 KiB at a time. */
#include "providers/ssh_cipher.h"

#include <libssh2.h>

#if LIBSSH2_VERSION_NUM < 0x010b00

/* EVP_CIPHER_meth_new is deprecated in OpenSSL 3, but it is the only way to
 * hand libssh2 an EVP_CIPHER of one's own: libssh2 asks for its ciphers by
 * function (EVP_aes_128_ctr()), never by name from a provider. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <dlfcn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define SSH_CIPHER_STREAM 16384

/* One direction of one session. */
struct ssh_cipher_state {
	EVP_CIPHER_CTX *aes; /* OpenSSL's own AES-CTR, run over zeros */
	size_t used;	     /* of stream */
	unsigned char stream[SSH_CIPHER_STREAM];
};

static const unsigned char ssh_cipher_zeros[SSH_CIPHER_STREAM];

static const struct ssh_cipher_kind {
	int nid;
	int key_len;
	const char *fetch; /* OpenSSL's implementation, by name */
} ssh_cipher_kinds[] = {
	{NID_aes_128_ctr, 16, "AES-128-CTR"},
	{NID_aes_192_ctr, 24, "AES-192-CTR"},
	{NID_aes_256_ctr, 32, "AES-256-CTR"},
};

#define SSH_CIPHER_NKINDS                                                      \
	(sizeof(ssh_cipher_kinds) / sizeof(ssh_cipher_kinds[0]))

static EVP_CIPHER *ssh_cipher_meths[SSH_CIPHER_NKINDS];
static pthread_once_t ssh_cipher_once = PTHREAD_ONCE_INIT;

static const struct ssh_cipher_kind *ssh_cipher_kind_of(int nid)
{
	for (size_t i = 0; i < SSH_CIPHER_NKINDS; i++)
		if (ssh_cipher_kinds[i].nid == nid)
			return &ssh_cipher_kinds[i];
	return NULL;
}

static int ssh_cipher_init(EVP_CIPHER_CTX *ctx, const unsigned char *key,
			   const unsigned char *iv, int enc)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);
	const struct ssh_cipher_kind *k =
		ssh_cipher_kind_of(EVP_CIPHER_CTX_get_nid(ctx));
	EVP_CIPHER *aes;
	int ok;

	(void)enc; /* CTR: the same both ways */
	if (st == NULL || k == NULL)
		return 0;
	if (key == NULL && iv == NULL)
		return 1;
	if (st->aes == NULL) {
		if (key == NULL)
			return 0; /* a new counter needs the key once */
		st->aes = EVP_CIPHER_CTX_new();
		if (st->aes == NULL)
			return 0;
	}
	aes = key != NULL ? EVP_CIPHER_fetch(NULL, k->fetch, NULL) : NULL;
	if (key != NULL && aes == NULL)
		return 0;
	ok = EVP_EncryptInit_ex(st->aes, aes, NULL, key, iv);
	EVP_CIPHER_free(aes);
	st->used = SSH_CIPHER_STREAM; /* nothing made for the new counter */
	return ok;
}

static int ssh_cipher_do(EVP_CIPHER_CTX *ctx, unsigned char *out,
			 const unsigned char *in, size_t len)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);

	if (st == NULL || st->aes == NULL)
		return 0;
	while (len > 0) {
		size_t n = SSH_CIPHER_STREAM - st->used;
		const unsigned char *ks;
		size_t i = 0;

		if (n == 0) {
			int made = 0;

			if (EVP_EncryptUpdate(st->aes, st->stream, &made,
					      ssh_cipher_zeros,
					      SSH_CIPHER_STREAM) != 1 ||
			    made != SSH_CIPHER_STREAM)
				return 0;
			st->used = 0;
			n = SSH_CIPHER_STREAM;
		}
		if (n > len)
			n = len;
		ks = st->stream + st->used;
		/* Eight bytes at a time: this loop is most of the call. */
		for (; i + 8 <= n; i += 8) {
			uint64_t a;
			uint64_t b;

			memcpy(&a, in + i, 8);
			memcpy(&b, ks + i, 8);
			a ^= b;
			memcpy(out + i, &a, 8);
		}
		for (; i < n; i++)
			out[i] = in[i] ^ ks[i];
		st->used += n;
		in += n;
		out += n;
		len -= n;
	}
	return 1;
}

static int ssh_cipher_cleanup(EVP_CIPHER_CTX *ctx)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);

	if (st != NULL) {
		EVP_CIPHER_CTX_free(st->aes);
		st->aes = NULL;
		OPENSSL_cleanse(st->stream, sizeof(st->stream));
	}
	return 1;
}

static void ssh_cipher_make(void)
{
	for (size_t i = 0; i < SSH_CIPHER_NKINDS; i++) {
		const struct ssh_cipher_kind *k = &ssh_cipher_kinds[i];
		/* Block size 1, as OpenSSL's CTR: EVP_EncryptUpdate then
		 * passes any length straight to ssh_cipher_do. */
		EVP_CIPHER *m = EVP_CIPHER_meth_new(k->nid, 1, k->key_len);

		if (m == NULL || !EVP_CIPHER_meth_set_iv_length(m, 16) ||
		    !EVP_CIPHER_meth_set_flags(
			    m, EVP_CIPH_CTR_MODE | EVP_CIPH_ALWAYS_CALL_INIT |
				       EVP_CIPH_CUSTOM_IV) ||
		    !EVP_CIPHER_meth_set_init(m, ssh_cipher_init) ||
		    !EVP_CIPHER_meth_set_do_cipher(m, ssh_cipher_do) ||
		    !EVP_CIPHER_meth_set_cleanup(m, ssh_cipher_cleanup) ||
		    !EVP_CIPHER_meth_set_impl_ctx_size(
			    m, (int)sizeof(struct ssh_cipher_state))) {
			EVP_CIPHER_meth_free(m);
			m = NULL; /* OpenSSL's own, called per block, serves */
		}
		ssh_cipher_meths[i] = m;
	}
}

/* The fetched implementation when this file's could not be made: the
 * caller gets a working AES-CTR either way. */
static const EVP_CIPHER *ssh_cipher_get(size_t i)
{
	static EVP_CIPHER *fallback[SSH_CIPHER_NKINDS];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const EVP_CIPHER *c;

	pthread_once(&ssh_cipher_once, ssh_cipher_make);
	if (ssh_cipher_meths[i] != NULL)
		return ssh_cipher_meths[i];
	pthread_mutex_lock(&lock);
	if (fallback[i] == NULL)
		fallback[i] =
			EVP_CIPHER_fetch(NULL, ssh_cipher_kinds[i].fetch, NULL);
	c = fallback[i];
	pthread_mutex_unlock(&lock);
	return c;
}

/* These definitions in the executable are found before libcrypto's by
 * every library's lookup of the names (as an allocator's malloc is), so
 * libssh2's cipher table points at them. Anyone else in the process who
 * asks gets an AES-CTR that gives the same bytes for any call lengths. */
const EVP_CIPHER *EVP_aes_128_ctr(void)
{
	return ssh_cipher_get(0);
}

const EVP_CIPHER *EVP_aes_192_ctr(void)
{
	return ssh_cipher_get(1);
}

const EVP_CIPHER *EVP_aes_256_ctr(void)
{
	return ssh_cipher_get(2);
}

void ssh_cipher_setup(void)
{
	pthread_once(&ssh_cipher_once, ssh_cipher_make);
}

bool ssh_cipher_bulk(void)
{
	/* The lookup libssh2's relocations made when it was loaded. */
	const void *found = dlsym(RTLD_DEFAULT, "EVP_aes_128_ctr");

	ssh_cipher_setup();
	return ssh_cipher_meths[0] != NULL &&
	       found == (const void *)(uintptr_t)EVP_aes_128_ctr;
}

#else /* libssh2 1.11 and later cipher whole packets */

void ssh_cipher_setup(void)
{
}

bool ssh_cipher_bulk(void)
{
	return false;
}

#endif
