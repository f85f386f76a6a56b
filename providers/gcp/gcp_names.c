/* Names and labels of a cluster's Compute Engine resources: the handle's
 * reversible label encoding, RFC 1035 names from a prefix, requestIds hashed
 * from the cluster's token, and ranks read back from instance names. */
#include "providers/gcp/gcp_names.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gcp_label_encode(const char *handle, char *out, size_t outlen)
{
	size_t o = 0, n = strlen(handle);
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	if (n == 0 || n > 64 || outlen < GCP_LABEL_MAX)
		return -1;
	for (const char *p = handle; *p; p++) {
		unsigned char c = (unsigned char)*p;
		char two[3] = {0};

		if (islower(c) || isdigit(c) || c == '-')
			two[0] = (char)c;
		else if (isupper(c))
			two[0] = '_', two[1] = (char)tolower(c);
		else if (c == '.')
			two[0] = '_', two[1] = '-';
		else if (c == '_')
			two[0] = '_', two[1] = '_';
		else
			return -1;
		for (const char *t = two; *t; t++) {
			if (o < GCP_LABEL_MAX - 1)
				out[o] = *t;
			o++;
		}
		h = (h ^ c) * 1099511628211ULL;
	}
	if (o > GCP_LABEL_MAX - 1)
		snprintf(out, outlen, "h-%016llx", (unsigned long long)h);
	else
		out[o] = '\0';
	return 0;
}

int gcp_label_decode(const char *label, char *out, size_t outlen)
{
	size_t o = 0;

	if (strncmp(label, "h-", 2) == 0 && strlen(label) == 18)
		return -1;
	for (const char *p = label; *p; p++) {
		char c = *p;

		if (c == '_') {
			char e = *++p;

			if (e == '-')
				c = '.';
			else if (e == '_')
				c = '_';
			else if (islower((unsigned char)e))
				c = (char)toupper((unsigned char)e);
			else
				return -1;
		} else if (!islower((unsigned char)c) &&
			   !isdigit((unsigned char)c) && c != '-') {
			return -1;
		}
		if (o + 1 >= outlen)
			return -1;
		out[o++] = c;
	}
	if (o == 0)
		return -1;
	out[o] = '\0';
	return 0;
}

void gcp_prefix(const char *handle, const char *token, char *out, size_t outlen)
{
	char slug[21];
	size_t o = 0;

	for (const char *p = handle; *p && o < sizeof(slug) - 1; p++) {
		unsigned char c = (unsigned char)tolower((unsigned char)*p);

		if (islower(c) || isdigit(c))
			slug[o++] = (char)c;
		else if (o && slug[o - 1] != '-')
			slug[o++] = '-';
	}
	while (o && slug[o - 1] == '-')
		o--;
	slug[o] = '\0';
	snprintf(out, outlen, "cclfs-%s%s%.8s", slug, o ? "-" : "", token);
}

void gcp_request_id(const char *token, const char *what, char *out,
		    size_t outlen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char in[256];
	int n = snprintf(in, sizeof(in), "cclfs-request %s %s", token, what);

	if (n < 0 || (size_t)n >= sizeof(in))
		n = (int)sizeof(in) - 1;
	if (EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen < 16)
		memset(md, 0x5a, 16);
	/* A version-5-style UUID: Google checks the form only. */
	md[6] = (unsigned char)((md[6] & 0x0f) | 0x50);
	md[8] = (unsigned char)((md[8] & 0x3f) | 0x80);
	snprintf(out, outlen,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7], md[8],
		 md[9], md[10], md[11], md[12], md[13], md[14], md[15]);
}

int gcp_rank_of(const char *name, const char *prefix, int *rank)
{
	size_t n = strlen(prefix);
	char *end;
	long v;

	if (strncmp(name, prefix, n) != 0 || name[n] != '-' ||
	    (name[n + 1] != 'm' && name[n + 1] != 'w') || name[n + 2] != '-')
		return -1;
	v = strtol(name + n + 3, &end, 10);
	if (end == name + n + 3 || (*end && *end != '-') || v < 1 ||
	    v > 1000000)
		return -1;
	*rank = name[n + 1] == 'm' ? -1 : (int)v - 1;
	return 0;
}

const char *gcp_short(const char *url)
{
	const char *s = strrchr(url, '/');

	return s ? s + 1 : url;
}
