/* The SSH sessions' AES-CTR (providers/ssh_cipher.c) gives OpenSSL's bytes
 * for every way libssh2 or anyone else may call it, and is what a library's
 * lookup of EVP_aes_128_ctr finds. */
#include "providers/ssh_cipher.h"
#include "tests/unit/check.h"

#include <libssh2.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LEN 100000

static unsigned char plain[LEN], want[LEN], got[LEN], back[LEN];

/* OpenSSL's own AES-CTR of name over plain, in one call. */
static bool reference(const char *name, const unsigned char *key,
		      const unsigned char *iv)
{
	EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, name, NULL);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	bool ok = c != NULL && ctx != NULL &&
		  EVP_EncryptInit_ex(ctx, c, NULL, key, iv) == 1 &&
		  EVP_EncryptUpdate(ctx, want, &n, plain, LEN) == 1 && n == LEN;

	EVP_CIPHER_CTX_free(ctx);
	EVP_CIPHER_free(c);
	return ok;
}

/* cipher over in, into out, in calls of step bytes (0: random lengths of
 * 1 to 5,000), by EVP_Cipher as libssh2 calls it or by EVP_CipherUpdate. */
static bool run(const EVP_CIPHER *cipher, const unsigned char *key,
		const unsigned char *iv, int enc, const unsigned char *in,
		unsigned char *out, size_t step, bool update)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	bool ok = ctx != NULL && EVP_CipherInit(ctx, cipher, key, iv, enc) == 1;

	for (size_t o = 0; ok && o < LEN;) {
		size_t n = step ? step : 1 + (size_t)rand() % 5000;
		int made = 0;

		if (n > LEN - o)
			n = LEN - o;
		if (update)
			ok = EVP_CipherUpdate(ctx, out + o, &made, in + o,
					      (int)n) == 1 &&
			     made == (int)n;
		else
			ok = EVP_Cipher(ctx, out + o, in + o,
					(unsigned int)n) == 1;
		o += n;
	}
	EVP_CIPHER_CTX_free(ctx);
	return ok;
}

int main(void)
{
	static const struct {
		const EVP_CIPHER *(*get)(void);
		const char *name;
		int key_len;
	} kinds[] = {{EVP_aes_128_ctr, "AES-128-CTR", 16},
		     {EVP_aes_192_ctr, "AES-192-CTR", 24},
		     {EVP_aes_256_ctr, "AES-256-CTR", 32}};
	/* counters whose low 32 and 64 bits, and all 128, carry over
	 * within the first block or after a few */
	static const unsigned char ivs[][16] = {
		{0},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xff, 0xff, 0xff, 0xf0},
		{1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		 0xff, 0xfe},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	};
	static const size_t steps[] = {16, 1, 0, 16384, 16400};
	unsigned char key[32];

	srand(17);
	CHECK(RAND_bytes(plain, LEN) == 1);
	CHECK(RAND_bytes(key, sizeof(key)) == 1);
#if LIBSSH2_VERSION_NUM < 0x010b00
	/* libssh2's relocations find this file's cipher */
	CHECK(ssh_cipher_bulk());
#else
	CHECK(!ssh_cipher_bulk());
#endif
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const EVP_CIPHER *c = kinds[k].get();

		CHECK(c != NULL);
		CHECK(EVP_CIPHER_get_key_length(c) == kinds[k].key_len);
		CHECK(EVP_CIPHER_get_iv_length(c) == 16);
		for (size_t v = 0; v < sizeof(ivs) / sizeof(ivs[0]); v++) {
			CHECK(reference(kinds[k].name, key, ivs[v]));
			for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]);
			     s++) {
				bool update = s % 2 == 1;

				memset(got, 0, LEN);
				CHECK(run(c, key, ivs[v], 1, plain, got,
					  steps[s], update));
				CHECK(memcmp(got, want, LEN) == 0);
				/* and back: CTR is the same both ways */
				CHECK(run(c, key, ivs[v], 0, got, back,
					  steps[s], !update));
				CHECK(memcmp(back, plain, LEN) == 0);
			}
		}
	}

	/* a new counter for the same key, as EVP_CipherInit_ex allows */
	{
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
		int n = 0;

		CHECK(reference("AES-128-CTR", key, ivs[2]));
		CHECK(EVP_EncryptInit_ex(ctx, EVP_aes_128_ctr(), NULL, key,
					 ivs[1]) == 1);
		CHECK(EVP_EncryptUpdate(ctx, got, &n, plain, 100) == 1);
		CHECK(EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, ivs[2]) == 1);
		CHECK(EVP_EncryptUpdate(ctx, got, &n, plain, LEN) == 1);
		CHECK(n == LEN && memcmp(got, want, LEN) == 0);
		EVP_CIPHER_CTX_free(ctx);
	}

	/* a context with no key yet refuses to cipher */
	{
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

		CHECK(EVP_CipherInit(ctx, EVP_aes_256_ctr(), NULL, NULL, 1) ==
		      1);
		CHECK(EVP_Cipher(ctx, got, plain, 16) != 1);
		EVP_CIPHER_CTX_free(ctx);
	}

	/* by name, as OpenSSL's own table has it */
	{
		const EVP_CIPHER *byname = EVP_get_cipherbyname("aes-256-ctr");

		CHECK(byname != NULL);
		CHECK(reference("AES-256-CTR", key, ivs[3]));
		CHECK(run(byname, key, ivs[3], 1, plain, got, 16, false));
		CHECK(memcmp(got, want, LEN) == 0);
	}
	return check_summary("ssh_cipher");
}
