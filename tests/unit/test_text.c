/* How bytes appear in messages: printable UTF-8 kept, every other byte
 * \xNN, never cut in two, idempotent. */
#include "lifecycle/text.h"
#include "tests/unit/check.h"

#include <string.h>

static void expect(const char *in, size_t outlen, const char *want)
{
	char out[256], again[256];

	text_escape(in, out, outlen);
	CHECK(strcmp(out, want) == 0);
	text_escape(out, again, sizeof(again));
	CHECK(strcmp(out, again) == 0);
}

int main(void)
{
	expect("plain text", 256, "plain text");
	expect("caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x99\x82", 256,
	       "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x99\x82");
	expect("a\xff"
	       "b",
	       256, "a\\xffb");
	expect("tab\there\nnl", 256, "tab\\x09here\\x0anl");
	expect("\x7f", 256, "\\x7f");
	/* overlong, surrogate, above U+10FFFF, C1 control, truncated */
	expect("\xc0\xaf", 256, "\\xc0\\xaf");
	expect("\xed\xa0\x80", 256, "\\xed\\xa0\\x80");
	expect("\xf4\x90\x80\x80", 256, "\\xf4\\x90\\x80\\x80");
	expect("\xc2\x85", 256, "\\xc2\\x85");
	expect("\xe2\x80", 256, "\\xe2\\x80");
	/* backslashes are printable: an escaped text escapes to itself */
	expect("C:\\x41", 256, "C:\\x41");
	/* a short buffer never holds half an escape or half a character */
	expect("ab\xff", 6, "ab");
	expect("ab\xff", 7, "ab\\xff");
	expect("a\xe2\x80\xa6", 4, "a");
	expect("", 1, "");
	{
		char out[32];

		text_escape_n("a\0b\xff", 4, out, sizeof(out));
		CHECK(strcmp(out, "a\\x00b\\xff") == 0);
	}
	return check_summary("text");
}
