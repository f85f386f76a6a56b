/* How bytes a user gave (names, values, commands) appear in messages:
 * printable UTF-8 as it is, every other byte as \xNN, the same in every
 * `error` file, the log and stderr. */
#include "lifecycle/text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* First bytes of the multi-byte forms: how many bytes follow, and the
 * range of the second byte that makes the form neither overlong, nor a
 * UTF-16 surrogate, nor above U+10FFFF (RFC 3629, table 3-7 of Unicode). */
static const struct {
	unsigned char first_lo, first_hi, second_lo, second_hi;
	size_t len;
} text_forms[] = {
	{0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
	{0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3},
	{0xee, 0xef, 0x80, 0xbf, 3}, {0xf0, 0xf0, 0x90, 0xbf, 4},
	{0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4},
};

size_t text_char_len(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] < 0x7f ? 1 : 0;
	for (size_t f = 0; f < sizeof(text_forms) / sizeof(text_forms[0]);
	     f++) {
		size_t len = text_forms[f].len;

		if (s[0] < text_forms[f].first_lo ||
		    s[0] > text_forms[f].first_hi)
			continue;
		if (n < len || s[1] < text_forms[f].second_lo ||
		    s[1] > text_forms[f].second_hi)
			return 0;
		for (size_t i = 2; i < len; i++)
			if ((s[i] & 0xc0) != 0x80)
				return 0;
		/* C1 controls (U+0080..U+009F) are no more printable than
		 * their ASCII cousins. */
		if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0)
			return 0;
		return len;
	}
	return 0;
}

void text_escape(const char *in, char *out, size_t outlen)
{
	text_escape_n(in, strlen(in), out, outlen);
}

void text_escape_n(const char *in, size_t n, char *out, size_t outlen)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;

	if (outlen == 0)
		return;
	for (size_t i = 0; i < n;) {
		size_t len = text_char_len(s + i, n - i);

		if (len) {
			if (o + len >= outlen)
				break;
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
			continue;
		}
		if (o + 4 >= outlen)
			break;
		snprintf(out + o, 5, "\\x%02x", s[i]);
		o += 4;
		i++;
	}
	out[o] = '\0';
}
