/* When OpenSSL cannot make the SSH sessions' own AES-CTR (an allocation
 * failure: here EVP_CIPHER_meth_new is made to fail), EVP_aes_*_ctr answer
 * with libcrypto's own cipher, OpenSSL's fetches by name still work (the
 * first fetch calls these functions), and the sessions cipher as before. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "providers/ssh_cipher.h"
#include "tests/unit/check.h"

#include <dlfcn.h>
#include <libssh2.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <string.h>

#if LIBSSH2_VERSION_NUM < 0x010b00

static int meth_new_calls;

/* Found by ssh_cipher.c before libcrypto's: no cipher can be made. */
EVP_CIPHER *EVP_CIPHER_meth_new(int cipher_type, int block_size, int key_len)
{
	(void)cipher_type;
	(void)block_size;
	(void)key_len;
	meth_new_calls++;
	return NULL;
}

/* libcrypto's own EVP_aes_<bits>_ctr(), past the executable's. */
static const EVP_CIPHER *libcrypto_cipher(const char *fn)
{
	const EVP_CIPHER *(*f)(void) = NULL;
	void *sym = dlsym(RTLD_NEXT, fn);

	if (sym == NULL)
		return NULL;
	memcpy(&f, &sym, sizeof(f));
	return f();
}

#define LEN 4096

int main(void)
{
	static const struct {
		const char *fn, *name;
		const EVP_CIPHER *(*ours)(void);
	} kinds[] = {
		{"EVP_aes_128_ctr", "AES-128-CTR", EVP_aes_128_ctr},
		{"EVP_aes_192_ctr", "AES-192-CTR", EVP_aes_192_ctr},
		{"EVP_aes_256_ctr", "AES-256-CTR", EVP_aes_256_ctr},
	};
	unsigned char key[32], iv[16], plain[LEN], want[LEN], got[LEN];

	/* OpenSSL's first fetch fills its table of names through
	 * EVP_aes_*_ctr: it must neither deadlock nor fail. */
	EVP_CIPHER *fetched = EVP_CIPHER_fetch(NULL, "AES-128-CTR", NULL);

	CHECK(fetched != NULL);
	EVP_CIPHER_free(fetched);
	ssh_cipher_setup();
	CHECK(meth_new_calls > 0);
	CHECK(!ssh_cipher_bulk());
	CHECK(RAND_bytes(key, sizeof(key)) == 1);
	CHECK(RAND_bytes(iv, sizeof(iv)) == 1);
	CHECK(RAND_bytes(plain, sizeof(plain)) == 1);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const EVP_CIPHER *c = kinds[k].ours();
		EVP_CIPHER *ref = EVP_CIPHER_fetch(NULL, kinds[k].name, NULL);
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
		int n = 0;

		CHECK(c != NULL && c == libcrypto_cipher(kinds[k].fn));
		CHECK(EVP_CIPHER_get_nid(c) == EVP_CIPHER_get_nid(ref));
		/* the reference in one call, libssh2's way in 16-byte ones */
		CHECK(EVP_EncryptInit_ex(ctx, ref, NULL, key, iv) == 1 &&
		      EVP_EncryptUpdate(ctx, want, &n, plain, LEN) == 1 &&
		      n == LEN);
		CHECK(EVP_CipherInit(ctx, c, key, iv, 1) == 1);
		for (size_t o = 0; o < LEN; o += 16)
			CHECK(EVP_Cipher(ctx, got + o, plain + o, 16) == 16);
		CHECK(memcmp(got, want, LEN) == 0);
		EVP_CIPHER_CTX_free(ctx);
		EVP_CIPHER_free(ref);
	}
	return check_summary("ssh_cipher_fallback");
}

#else /* libssh2 1.11 and later: the file makes no cipher */

int main(void)
{
	CHECK(!ssh_cipher_bulk());
	return check_summary("ssh_cipher_fallback");
}

#endif
