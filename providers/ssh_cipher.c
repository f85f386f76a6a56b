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
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define SSH_CIPHER_STREAM 16384
#define SSH_CIPHER_BLOCK  16

/* One block in one vector register (SSE2's on x86-64). */
typedef unsigned char ssh_cipher_v16
	__attribute__((vector_size(SSH_CIPHER_BLOCK)));

static inline void ssh_cipher_xor_block(unsigned char *out,
					const unsigned char *in,
					const unsigned char *ks)
{
	ssh_cipher_v16 a;
	ssh_cipher_v16 b;

	memcpy(&a, in, sizeof(a));
	memcpy(&b, ks, sizeof(b));
	a ^= b;
	memcpy(out, &a, sizeof(a));
}

/* One direction of one session. */
struct ssh_cipher_state {
	EVP_CIPHER_CTX *aes; /* OpenSSL's own AES-CTR, run over zeros */
	/* The counter the run began at (the last IV given), and the bytes
	 * ciphered since: a new key alone goes on from the next block, as
	 * OpenSSL's does. */
	unsigned char iv[SSH_CIPHER_BLOCK];
	uint64_t done;
	size_t used; /* of stream */
	unsigned char stream[SSH_CIPHER_STREAM];
};

static const unsigned char ssh_cipher_zeros[SSH_CIPHER_STREAM];

static const struct ssh_cipher_kind {
	int nid;
	int key_len;
	const char *name; /* OpenSSL's implementation, by name */
	const char *fn;	  /* and libcrypto's function */
} ssh_cipher_kinds[] = {
	{NID_aes_128_ctr, 16, "AES-128-CTR", "EVP_aes_128_ctr"},
	{NID_aes_192_ctr, 24, "AES-192-CTR", "EVP_aes_192_ctr"},
	{NID_aes_256_ctr, 32, "AES-256-CTR", "EVP_aes_256_ctr"},
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

/* ctr += n, as the 128-bit big-endian number CTR mode counts with. */
static void ssh_cipher_count(unsigned char *ctr, uint64_t n)
{
	for (int i = SSH_CIPHER_BLOCK - 1; i >= 0 && n > 0; i--) {
		uint64_t v = ctr[i] + (n & 0xff);

		ctr[i] = (unsigned char)v;
		n = (n >> 8) + (v >> 8);
	}
}

static int ssh_cipher_init(EVP_CIPHER_CTX *ctx, const unsigned char *key,
			   const unsigned char *iv, int enc)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);
	const struct ssh_cipher_kind *k =
		ssh_cipher_kind_of(EVP_CIPHER_CTX_get_nid(ctx));
	EVP_CIPHER *aes = NULL;
	int ok;

	(void)enc; /* CTR: the same both ways */
	if (st == NULL || k == NULL)
		return 0;
	if (iv != NULL)
		memcpy(st->iv, iv, SSH_CIPHER_BLOCK);
	else if (key != NULL)
		ssh_cipher_count(st->iv, (st->done + SSH_CIPHER_BLOCK - 1) /
						 SSH_CIPHER_BLOCK);
	else
		return 1;
	st->done = 0;
	st->used = SSH_CIPHER_STREAM; /* nothing made for the new counter */
	if (st->aes == NULL && key == NULL)
		return 1; /* the IV waits for its key */
	if (st->aes == NULL) {
		st->aes = EVP_CIPHER_CTX_new();
		if (st->aes == NULL)
			return 0;
	}
	if (key != NULL) {
		aes = EVP_CIPHER_fetch(NULL, k->name, NULL);
		if (aes == NULL)
			return 0;
	}
	ok = EVP_EncryptInit_ex(st->aes, aes, NULL, key, st->iv);
	EVP_CIPHER_free(aes);
	return ok;
}

/* Any run of bytes: the keystream made as it runs out. Apart from
 * ssh_cipher_do, whose one-block calls then save no registers for it. */
__attribute__((noinline)) static int ssh_cipher_run(struct ssh_cipher_state *st,
						    unsigned char *out,
						    const unsigned char *in,
						    size_t len)
{
	size_t total = len;

	if (st == NULL || st->aes == NULL || len > INT_MAX)
		return -1;
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
				return -1;
			st->used = 0;
			n = SSH_CIPHER_STREAM;
		}
		if (n > len)
			n = len;
		ks = st->stream + st->used;
		/* A block at a time in one vector register, then eight
		 * bytes, then one. */
		for (; i + SSH_CIPHER_BLOCK <= n; i += SSH_CIPHER_BLOCK)
			ssh_cipher_xor_block(out + i, in + i, ks + i);
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
	st->done += total;
	return (int)total;
}

/* EVP_CIPH_FLAG_CUSTOM_CIPHER's convention, as OpenSSL's own: the bytes
 * made, -1 on failure (libssh2 1.10 tells failure by it), 0 at the end.
 * libssh2 1.10 asks one block a call, 64 Ki calls a MiB: a block the
 * keystream made so far covers takes this shortest way. */
static inline int ssh_cipher_step(struct ssh_cipher_state *st,
				  unsigned char *out, const unsigned char *in,
				  size_t len)
{
	if (in == NULL)
		return 0;
	if (len == SSH_CIPHER_BLOCK && st != NULL && st->aes != NULL &&
	    st->used <= SSH_CIPHER_STREAM - SSH_CIPHER_BLOCK) {
		ssh_cipher_xor_block(out, in, st->stream + st->used);
		st->used += SSH_CIPHER_BLOCK;
		st->done += SSH_CIPHER_BLOCK;
		return SSH_CIPHER_BLOCK;
	}
	return ssh_cipher_run(st, out, in, len);
}

static int ssh_cipher_do(EVP_CIPHER_CTX *ctx, unsigned char *out,
			 const unsigned char *in, size_t len)
{
	return ssh_cipher_step(EVP_CIPHER_CTX_get_cipher_data(ctx), out, in,
			       len);
}

/* EVP_CIPHER_CTX_copy copied the state's bytes: the copy gets an AES
 * context of its own, at the same counter. */
static int ssh_cipher_ctrl(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);
	EVP_CIPHER_CTX *from;

	(void)arg;
	(void)ptr;
	if (type != EVP_CTRL_COPY)
		return -1;
	if (st == NULL || st->aes == NULL)
		return 1;
	from = st->aes;
	st->aes = EVP_CIPHER_CTX_new();
	if (st->aes == NULL || EVP_CIPHER_CTX_copy(st->aes, from) != 1) {
		EVP_CIPHER_CTX_free(st->aes);
		st->aes = NULL;
		return 0;
	}
	return 1;
}

/* Bumped as any context of this file's ends: a thread's note of which
 * state a context has (ssh_cipher_state_of) holds only while it stays. */
static atomic_uint ssh_cipher_ended;

static int ssh_cipher_cleanup(EVP_CIPHER_CTX *ctx)
{
	struct ssh_cipher_state *st = EVP_CIPHER_CTX_get_cipher_data(ctx);

	atomic_fetch_add_explicit(&ssh_cipher_ended, 1, memory_order_release);

	if (st != NULL) {
		EVP_CIPHER_CTX_free(st->aes);
		st->aes = NULL;
	}
	return 1; /* OpenSSL clears the state's bytes as it frees them */
}

static void ssh_cipher_make(void)
{
	for (size_t i = 0; i < SSH_CIPHER_NKINDS; i++) {
		const struct ssh_cipher_kind *k = &ssh_cipher_kinds[i];
		/* Block size 1, as OpenSSL's CTR. */
		EVP_CIPHER *m = EVP_CIPHER_meth_new(k->nid, 1, k->key_len);

		if (m == NULL ||
		    !EVP_CIPHER_meth_set_iv_length(m, SSH_CIPHER_BLOCK) ||
		    !EVP_CIPHER_meth_set_flags(
			    m, EVP_CIPH_CTR_MODE | EVP_CIPH_ALWAYS_CALL_INIT |
				       EVP_CIPH_CUSTOM_IV |
				       EVP_CIPH_FLAG_CUSTOM_CIPHER |
				       EVP_CIPH_CUSTOM_COPY) ||
		    !EVP_CIPHER_meth_set_init(m, ssh_cipher_init) ||
		    !EVP_CIPHER_meth_set_do_cipher(m, ssh_cipher_do) ||
		    !EVP_CIPHER_meth_set_ctrl(m, ssh_cipher_ctrl) ||
		    !EVP_CIPHER_meth_set_cleanup(m, ssh_cipher_cleanup) ||
		    !EVP_CIPHER_meth_set_impl_ctx_size(
			    m, (int)sizeof(struct ssh_cipher_state))) {
			EVP_CIPHER_meth_free(m);
			m = NULL;
		}
		ssh_cipher_meths[i] = m;
	}
}

/* This file's cipher, or when it could not be made libcrypto's own
 * function's. Never a fetch here: OpenSSL's first fetch fills its table of
 * names by calling these very functions. */
static const EVP_CIPHER *ssh_cipher_get(size_t i)
{
	const EVP_CIPHER *(*libcrypto)(void) = NULL;
	void *sym;

	pthread_once(&ssh_cipher_once, ssh_cipher_make);
	if (ssh_cipher_meths[i] != NULL)
		return ssh_cipher_meths[i];
	sym = dlsym(RTLD_NEXT, ssh_cipher_kinds[i].fn);
	if (sym == NULL)
		return NULL;
	memcpy(&libcrypto, &sym, sizeof(libcrypto)); /* POSIX allows it */
	return libcrypto();
}

/* These definitions in the executable are found before libcrypto's by
 * every library's lookup of the names (as an allocator's malloc is), so
 * libssh2's cipher table points at them, and so does OpenSSL's table of
 * names. Anyone else in the process who asks gets an AES-CTR that gives
 * the same bytes, though not the parameters only a provider's cipher
 * reports (the updated IV, for one). */
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

/* The state of a context of this file's cipher, NULL for any other
 * context. A connection's thread ciphers with its two contexts (one each
 * way) call after call: it notes them, and asks libcrypto again only
 * after any context of this file ended. */
struct ssh_cipher_seen {
	const EVP_CIPHER_CTX *ctx;
	struct ssh_cipher_state *st;
	unsigned ended;
};

static _Thread_local struct ssh_cipher_seen ssh_cipher_seen[2];
static _Thread_local unsigned ssh_cipher_seen_next;

static struct ssh_cipher_state *ssh_cipher_state_of(EVP_CIPHER_CTX *ctx)
{
	unsigned ended =
		atomic_load_explicit(&ssh_cipher_ended, memory_order_acquire);
	const EVP_CIPHER *c;
	struct ssh_cipher_seen *n;

	for (int i = 0; i < 2; i++)
		if (ssh_cipher_seen[i].ctx == ctx &&
		    ssh_cipher_seen[i].ended == ended)
			return ssh_cipher_seen[i].st;
	c = EVP_CIPHER_CTX_get0_cipher(ctx);
	if (c == NULL)
		return NULL;
	/* made before they are compared (another thread may be making them) */
	pthread_once(&ssh_cipher_once, ssh_cipher_make);
	for (size_t k = 0; k < SSH_CIPHER_NKINDS; k++) {
		if (c != ssh_cipher_meths[k])
			continue;
		n = &ssh_cipher_seen[ssh_cipher_seen_next++ & 1];
		n->ctx = ctx;
		n->st = EVP_CIPHER_CTX_get_cipher_data(ctx);
		n->ended = ended;
		return n->st;
	}
	return NULL;
}

static int (*ssh_cipher_libcrypto)(EVP_CIPHER_CTX *, unsigned char *,
				   const unsigned char *, unsigned int);
static pthread_once_t ssh_cipher_libcrypto_once = PTHREAD_ONCE_INIT;

static void ssh_cipher_libcrypto_find(void)
{
	void *sym = dlsym(RTLD_NEXT, "EVP_Cipher");

	if (sym != NULL)
		memcpy(&ssh_cipher_libcrypto, &sym,
		       sizeof(ssh_cipher_libcrypto));
}

/* libssh2 1.10 calls EVP_Cipher for each block, and OpenSSL's finds this
 * file's function through the context on every call: this definition,
 * found before libcrypto's as the EVP_aes_*_ctr above are, goes straight
 * to it for this file's contexts and hands every other to libcrypto's. */
int EVP_Cipher(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in,
	       unsigned int inl)
{
	struct ssh_cipher_state *st =
		ctx != NULL ? ssh_cipher_state_of(ctx) : NULL;

	if (st != NULL)
		return ssh_cipher_step(st, out, in, inl);
	pthread_once(&ssh_cipher_libcrypto_once, ssh_cipher_libcrypto_find);
	if (ssh_cipher_libcrypto == NULL)
		return -1;
	return ssh_cipher_libcrypto(ctx, out, in, inl);
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
