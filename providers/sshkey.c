/* SSH key pairs of clusters, generated with OpenSSL (ed25519). libssh2 1.10
 * reads ed25519 private keys only in OpenSSH's own container
 * ("openssh-key-v1", unencrypted), which OpenSSL does not write: it is laid
 * out here from the raw keys OpenSSL gives. */
#include "providers/sshkey.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SSHKEY_TYPE "ssh-ed25519"

/* A growing byte string in SSH wire format. */
struct sshkey_wire {
	unsigned char b[1024];
	size_t n;
};

static void sshkey_wire_u32(struct sshkey_wire *w, uint32_t v)
{
	if (w->n + 4 > sizeof(w->b))
		return;
	w->b[w->n++] = (unsigned char)(v >> 24);
	w->b[w->n++] = (unsigned char)(v >> 16);
	w->b[w->n++] = (unsigned char)(v >> 8);
	w->b[w->n++] = (unsigned char)v;
}

static void sshkey_wire_bytes(struct sshkey_wire *w, const void *p, size_t len)
{
	sshkey_wire_u32(w, (uint32_t)len);
	if (w->n + len > sizeof(w->b))
		return;
	memcpy(w->b + w->n, p, len);
	w->n += len;
}

static void sshkey_wire_str(struct sshkey_wire *w, const char *s)
{
	sshkey_wire_bytes(w, s, strlen(s));
}

/* Write `data` to path through a temporary file: whole or not at all. */
static int sshkey_write_file(const char *path, const char *data, size_t len,
			     char *err, size_t errlen)
{
	char tmp[4200];
	int fd, rc = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		if (fchmod(fd, 0600) < 0 ||
		    write(fd, data, len) != (ssize_t)len || fsync(fd) < 0)
			rc = errno ? -errno : -EIO;
		if (close(fd) < 0 && !rc)
			rc = -errno;
		if (!rc && rename(tmp, path) < 0)
			rc = -errno;
		if (rc)
			unlink(tmp);
	}
	if (rc)
		snprintf(err, errlen, "cannot write the key file %s: %s", path,
			 strerror(-rc));
	return rc;
}

/* Base64 of the wire bytes into out (NUL-terminated). */
static int sshkey_b64(const unsigned char *in, size_t len, char *out,
		      size_t outlen)
{
	if (outlen < 4 * ((len + 2) / 3) + 1 || len > 0x3fffffff)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, in, (int)len);
	return 0;
}

int sshkey_base64(const void *in, size_t len, char *out, size_t outlen)
{
	return sshkey_b64(in, len, out, outlen);
}

int sshkey_make(const char *comment, char **pem_out, size_t *pem_len,
		char *line, size_t linelen, char *err, size_t errlen)
{
	unsigned char pub[32], priv[32];
	size_t publen = sizeof(pub), privlen = sizeof(priv);
	struct sshkey_wire blob = {0}, sec = {0}, all = {0};
	char *b64 = NULL, *pem = NULL;
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	uint32_t check;
	size_t pemlen = 0, b64cap;
	int rc = -EIO;

	if (!k || EVP_PKEY_get_raw_public_key(k, pub, &publen) != 1 ||
	    EVP_PKEY_get_raw_private_key(k, priv, &privlen) != 1 ||
	    publen != 32 || privlen != 32 ||
	    getrandom(&check, sizeof(check), 0) != (ssize_t)sizeof(check)) {
		snprintf(err, errlen, "OpenSSL cannot make an ed25519 key");
		goto out;
	}
	/* The public key blob. */
	sshkey_wire_str(&blob, SSHKEY_TYPE);
	sshkey_wire_bytes(&blob, pub, sizeof(pub));
	/* The private section: two equal check words, the key, the comment,
	 * then padding 1, 2, 3... to a multiple of 8. */
	sshkey_wire_u32(&sec, check);
	sshkey_wire_u32(&sec, check);
	sshkey_wire_str(&sec, SSHKEY_TYPE);
	sshkey_wire_bytes(&sec, pub, sizeof(pub));
	{
		unsigned char both[64];

		memcpy(both, priv, 32);
		memcpy(both + 32, pub, 32);
		sshkey_wire_bytes(&sec, both, sizeof(both));
		OPENSSL_cleanse(both, sizeof(both));
	}
	sshkey_wire_str(&sec, comment);
	for (unsigned char pad = 1; sec.n % 8; pad++)
		sec.b[sec.n++] = pad;
	/* The container. */
	memcpy(all.b, "openssh-key-v1", 15);
	all.n = 15;
	sshkey_wire_str(&all, "none");
	sshkey_wire_str(&all, "none");
	sshkey_wire_str(&all, "");
	sshkey_wire_u32(&all, 1);
	sshkey_wire_bytes(&all, blob.b, blob.n);
	sshkey_wire_bytes(&all, sec.b, sec.n);
	b64cap = 4 * ((all.n + 2) / 3) + 1;
	b64 = malloc(b64cap);
	pem = malloc(b64cap + b64cap / 70 + 128);
	if (!b64 || !pem || sshkey_b64(all.b, all.n, b64, b64cap)) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	pemlen = (size_t)sprintf(pem, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
	for (size_t i = 0, n = strlen(b64); i < n; i += 70)
		pemlen += (size_t)sprintf(pem + pemlen, "%.70s\n", b64 + i);
	pemlen += (size_t)sprintf(pem + pemlen,
				  "-----END OPENSSH PRIVATE KEY-----\n");
	memcpy(b64, SSHKEY_TYPE " ", 12);
	if (sshkey_b64(blob.b, blob.n, b64 + 12, b64cap - 12)) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	if ((size_t)snprintf(line, linelen, "%s %s\n", b64, comment) >=
	    linelen) {
		snprintf(err, errlen, "the key's comment is too long");
		rc = -ENAMETOOLONG;
		goto out;
	}
	*pem_out = pem;
	*pem_len = pemlen;
	pem = NULL;
	rc = 0;
out:
	OPENSSL_cleanse(priv, sizeof(priv));
	OPENSSL_cleanse(&sec, sizeof(sec));
	OPENSSL_cleanse(&all, sizeof(all));
	if (b64) {
		OPENSSL_cleanse(b64, b64cap);
		free(b64);
	}
	if (pem) {
		OPENSSL_cleanse(pem, pemlen);
		free(pem);
	}
	EVP_PKEY_free(k);
	return rc;
}

int sshkey_generate(const char *path, const char *comment, char *err,
		    size_t errlen)
{
	char line[SSHKEY_PUBKEY_MAX + 128], pubpath[4200], *pem = NULL;
	size_t pemlen = 0;
	int rc = sshkey_make(comment, &pem, &pemlen, line, sizeof(line), err,
			     errlen);

	if (rc)
		return rc;
	rc = sshkey_write_file(path, pem, pemlen, err, errlen);
	OPENSSL_cleanse(pem, pemlen);
	free(pem);
	if (rc)
		return rc;
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	return sshkey_write_file(pubpath, line, strlen(line), err, errlen);
}

int sshkey_public(const char *path, char *pub, size_t publen, char *err,
		  size_t errlen)
{
	char pubpath[4200];
	ssize_t n;
	int fd;

	if (access(path, R_OK) != 0) {
		snprintf(err, errlen, "no key file %s", path);
		return -ENOENT;
	}
	snprintf(pubpath, sizeof(pubpath), "%s.pub", path);
	fd = open(pubpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "no key file %s", pubpath);
		return -ENOENT;
	}
	n = read(fd, pub, publen - 1);
	close(fd);
	if (n <= 0 || strncmp(pub, SSHKEY_TYPE " ", 12) != 0) {
		snprintf(err, errlen, "%s is not an ed25519 public key",
			 pubpath);
		return -EINVAL;
	}
	pub[n] = '\0';
	pub[strcspn(pub, "\n")] = '\0';
	return 0;
}
