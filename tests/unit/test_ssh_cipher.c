/* The SSH sessions' AES-CTR (providers/ssh_cipher.c) gives OpenSSL's bytes
 * for every way libssh2 or anyone else may call it, and is what libssh2's
 * cipher table and OpenSSL's table of names point at. */
#include "providers/ssh_cipher.h"
#include "tests/unit/check.h"

#include <dlfcn.h>
#include <libssh2.h>
#include <link.h>
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
		else /* the bytes made, as OpenSSL's AES-CTR answers */
			ok = EVP_Cipher(ctx, out + o, in + o,
					(unsigned int)n) == (int)n;
		o += n;
	}
	EVP_CIPHER_CTX_free(ctx);
	return ok;
}

/* The sequence of a test below, with cipher: key and IV given apart, in
 * either order, a new key alone after some bytes. */
static bool keys_apart(const EVP_CIPHER *cipher, const unsigned char *key,
		       const unsigned char *key2, const unsigned char *iv,
		       unsigned char *out)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	bool ok = ctx != NULL &&
		  EVP_EncryptInit_ex(ctx, cipher, NULL, NULL, NULL) == 1 &&
		  EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) == 1 &&
		  EVP_EncryptInit_ex(ctx, NULL, NULL, key, NULL) == 1 &&
		  EVP_EncryptUpdate(ctx, out, &n, plain, 1000) == 1 &&
		  n == 1000 &&
		  /* 1,000 bytes: the next key goes on from block 63 */
		  EVP_EncryptInit_ex(ctx, NULL, NULL, key2, NULL) == 1 &&
		  EVP_EncryptUpdate(ctx, out + 1000, &n, plain + 1000,
				    LEN - 1000) == 1 &&
		  n == LEN - 1000;

	EVP_CIPHER_CTX_free(ctx);
	return ok;
}

/* A copy made midway goes on as the original does, each on its own. */
static bool copied(const EVP_CIPHER *cipher, const unsigned char *key,
		   const unsigned char *iv, unsigned char *a, unsigned char *b)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	EVP_CIPHER_CTX *dup = EVP_CIPHER_CTX_new();
	int n = 0;
	bool ok = ctx != NULL && dup != NULL &&
		  EVP_EncryptInit_ex(ctx, cipher, NULL, key, iv) == 1 &&
		  EVP_EncryptUpdate(ctx, a, &n, plain, 20000) == 1 &&
		  EVP_CIPHER_CTX_copy(dup, ctx) == 1;

	memcpy(b, a, 20000);
	ok = ok && EVP_EncryptUpdate(ctx, a + 20000, &n, plain + 20000,
				     LEN - 20000) == 1;
	EVP_CIPHER_CTX_free(ctx); /* the copy keeps working without it */
	ok = ok && EVP_EncryptUpdate(dup, b + 20000, &n, plain + 20000,
				     LEN - 20000) == 1;
	EVP_CIPHER_CTX_free(dup);
	return ok;
}

/* What libssh2's loaded, relocated data holds: how many pointers to want
 * and to other (its cipher table points at EVP_aes_128_ctr). */
struct slots {
	const void *want, *other;
	int n_want, n_other;
	bool seen;
};

static int slots_count(struct dl_phdr_info *info, size_t size, void *data)
{
	struct slots *s = data;

	(void)size;
	if (strstr(info->dlpi_name, "libssh2.so") == NULL)
		return 0;
	s->seen = true;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		for (size_t o = 0; o + sizeof(void *) <= ph->p_memsz;
		     o += sizeof(void *)) {
			const void *v;

			memcpy(&v, p + o, sizeof(v));
			s->n_want += v == s->want;
			s->n_other += v == s->other;
		}
	}
	return 1;
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
	CHECK(libssh2_init(0) == 0); /* libssh2 loaded, as in the daemon */
#if LIBSSH2_VERSION_NUM < 0x010b00
	CHECK(ssh_cipher_bulk());
	{
		struct slots s = {0};

		s.want = (const void *)(uintptr_t)EVP_aes_128_ctr;
		s.other = dlsym(RTLD_NEXT, "EVP_aes_128_ctr"); /* libcrypto's */
		CHECK(s.other != NULL && s.other != s.want);
		dl_iterate_phdr(slots_count, &s);
		CHECK(s.seen);
		CHECK(s.n_want >= 1);
		CHECK(s.n_other == 0);
	}
	/* and so does OpenSSL's own table of names */
	CHECK(EVP_get_cipherbyname("aes-128-ctr") == EVP_aes_128_ctr());
	/* libssh2's EVP_Cipher is found here too */
	CHECK(dlsym(RTLD_DEFAULT, "EVP_Cipher") ==
	      (void *)(uintptr_t)EVP_Cipher);
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

	/* key and IV apart, a new key alone: as OpenSSL's own does */
	{
		unsigned char key2[32];
		EVP_CIPHER *aes = EVP_CIPHER_fetch(NULL, "AES-192-CTR", NULL);

		CHECK(RAND_bytes(key2, sizeof(key2)) == 1);
		CHECK(keys_apart(aes, key, key2, ivs[1], want));
		memset(got, 0, LEN);
		CHECK(keys_apart(EVP_aes_192_ctr(), key, key2, ivs[1], got));
		CHECK(memcmp(got, want, LEN) == 0);
		EVP_CIPHER_free(aes);
	}

	/* a copy */
	CHECK(reference("AES-128-CTR", key, ivs[2]));
	CHECK(copied(EVP_aes_128_ctr(), key, ivs[2], got, back));
	CHECK(memcmp(got, want, LEN) == 0);
	CHECK(memcmp(back, want, LEN) == 0);

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

	/* EVP_Cipher hands other ciphers' contexts to libcrypto's, and never
	 * takes a new context for one of this file's that ended before it
	 * (malloc gives the same address back) */
	{
		EVP_CIPHER *aes = EVP_CIPHER_fetch(NULL, "AES-128-CTR", NULL);

		CHECK(aes != NULL && aes != EVP_aes_128_ctr());
		CHECK(reference("AES-128-CTR", key, ivs[1]));
		for (int i = 0; i < 8; i++) {
			const EVP_CIPHER *c = i % 2 ? aes : EVP_aes_128_ctr();

			memset(got, 0, LEN);
			CHECK(run(c, key, ivs[1], 1, plain, got, i < 4 ? 16 : 0,
				  false));
			CHECK(memcmp(got, want, LEN) == 0);
		}
		EVP_CIPHER_free(aes);
	}

	/* a context with no key yet refuses to cipher */
	{
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

		CHECK(EVP_CipherInit(ctx, EVP_aes_256_ctr(), NULL, NULL, 1) ==
		      1);
		CHECK(EVP_Cipher(ctx, got, plain, 16) == -1);
		EVP_CIPHER_CTX_free(ctx);
	}

	/* by name, as OpenSSL's own table has it */
	{
		const EVP_CIPHER *byname = EVP_get_cipherbyname("aes-256-ctr");

		CHECK(byname != NULL);
		CHECK(reference("AES-256-CTR", key, ivs[3]));
		CHECK(run(byname, key, ivs[3], 1, plain, got, 16, false));
		CHECK(memcmp(got, want, LEN) == 0);
		CHECK(run(byname, key, ivs[3], 1, plain, got, 0, true));
		CHECK(memcmp(got, want, LEN) == 0);
	}
	return check_summary("ssh_cipher");
}
