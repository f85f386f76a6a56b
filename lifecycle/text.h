/* How bytes a user gave (names, values, commands) appear in messages:
 * printable UTF-8 as it is, every other byte as \xNN, the same in every
 * `error` file, the log and stderr. */
#ifndef CCLFS_LIFECYCLE_TEXT_H
#define CCLFS_LIFECYCLE_TEXT_H

#include <stddef.h>

/* Copy the NUL-terminated `in` to `out` (outlen > 0), escaping what is not
 * printable UTF-8. Never cuts an escape or a character in two; idempotent
 * (an escaped text is printable, so escaping it again changes nothing). */
void text_escape(const char *in, char *out, size_t outlen);
/* The same for the n bytes at in, NUL bytes included (as \x00). */
void text_escape_n(const char *in, size_t n, char *out, size_t outlen);

/* The length of the valid, printable UTF-8 character at s (n bytes
 * available), or 0 when the byte at s must be escaped. */
size_t text_char_len(const unsigned char *s, size_t n);

#endif
