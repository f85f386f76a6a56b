/* Assumption values: the table of the 19 instance-assumption files, the
 * parser and normaliser of their values (quantities and type names), and the
 * test of a known feature value against a parsed quantity. */
#include "resolver/assumption.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct assumption_field assumption_fields[] = {
	{"node_provider", ASSUMPTION_TYPE},
	{"cluster_locale", ASSUMPTION_TYPE},
	{"node_machinetype", ASSUMPTION_TYPE},
	{"node_memory_size", ASSUMPTION_BYTES},
	{"node_ecu_count", ASSUMPTION_COUNT},
	{"node_vcpus_count", ASSUMPTION_COUNT},
	{"accelerator_count", ASSUMPTION_COUNT},
	{"accelerator_memory", ASSUMPTION_BYTES},
	{"accelerator_type", ASSUMPTION_TYPE},
	{"accelerator_manufacturer", ASSUMPTION_TYPE},
	{"accelerator_architecture", ASSUMPTION_TYPE},
	{"accelerator", ASSUMPTION_TYPE},
	{"processor_manufacturer", ASSUMPTION_TYPE},
	{"processor_microarchitecture", ASSUMPTION_TYPE},
	{"processor", ASSUMPTION_TYPE},
	{"storage_type", ASSUMPTION_TYPE},
	{"storage_size", ASSUMPTION_BYTES},
	{"network_performance", ASSUMPTION_BITRATE},
	{"node_architecture", ASSUMPTION_TYPE},
};

const size_t assumption_field_count =
	sizeof(assumption_fields) / sizeof(assumption_fields[0]);

/* What each kind expects, completing `"<value>" ...` in error messages. */
static const char *const kind_expects[] = {
	[ASSUMPTION_COUNT] = "is not a count: write a number without a suffix, "
			     "as in \"4\", \"atleast 2\", \"atmost 8\" or "
			     "\"2..8\"",
	[ASSUMPTION_BYTES] = "is not a size: write a number with an optional "
			     "suffix K, M, G, T or P, as in \"atleast 16G\", "
			     "\"just 4G\" or \"16G..32G\"",
	[ASSUMPTION_BITRATE] = "is not a bit rate: write a number of bits per "
			       "second with an optional suffix K, M, G, T or "
			       "P, as in \"atleast 10G\", \"just 25G\" or "
			       "\"10G..100G\"",
	[ASSUMPTION_TYPE] = "is not a type name: write one name of letters, "
			    "digits and the characters _ . : + -, starting "
			    "with a letter or digit, as in \"t3.xlarge\" or "
			    "\"Ada\"",
};

static const char suffixes[] = "KMGTP";

/* How much of a value error messages quote before cutting it short. */
#define QUOTE_MAX 40
#define ELLIPSIS  "\xe2\x80\xa6"

/* A text being built: writes what fits, counts everything. */
struct text {
	char *buf;
	size_t cap;
	size_t len; /* length of the whole text, even past cap */
};

/* The value being parsed, for quantities and error messages. */
struct ctx {
	enum assumption_kind kind;
	const char *s; /* the value without surrounding whitespace */
	size_t n;
	size_t pos;
	char *err;
	size_t errlen;
};

/* One number as written: the digits that matter, and the suffix. Integer
 * digits lose their leading zeros (and may be none), fraction digits their
 * trailing zeros. */
struct number {
	const char *ip; /* integer digits */
	size_t in;
	const char *fp; /* fraction digits */
	size_t fn;
	int suffix;   /* 0, or 1..5 for K..P */
	double value; /* in base units */
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_space(char c)
{
	return is_blank(c) || c == '\n' || c == '\r';
}

/* Drop surrounding whitespace from s[0..*n). */
static const char *trim(const char *s, size_t *n)
{
	while (*n > 0 && is_space(s[0])) {
		s++;
		(*n)--;
	}
	while (*n > 0 && is_space(s[*n - 1]))
		(*n)--;
	return s;
}

static void put(struct text *t, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++, t->len++)
		if (t->buf && t->len + 1 < t->cap)
			t->buf[t->len] = s[i];
	if (t->buf && t->cap)
		t->buf[t->len < t->cap ? t->len : t->cap - 1] = '\0';
}

static void puts_(struct text *t, const char *s)
{
	put(t, s, strlen(s));
}

/* Cut a UTF-8 sequence that a truncation left incomplete at the end of s. */
static void drop_partial_utf8(char *s)
{
	size_t n = strlen(s), j = n;

	while (j > 0 && n - j < 3 && ((unsigned char)s[j - 1] & 0xC0u) == 0x80u)
		j--;
	if (j == 0 || (unsigned char)s[j - 1] < 0xC0u)
		return;
	unsigned char lead = (unsigned char)s[j - 1];
	size_t need = lead >= 0xF0u ? 4 : lead >= 0xE0u ? 3 : 2;
	if (n - (j - 1) < need)
		s[j - 1] = '\0';
}

/* Write s[0..n) in double quotes, escaped and cut to about QUOTE_MAX. */
static void quote(struct text *t, const char *s, size_t n)
{
	size_t end = n;

	if (end > QUOTE_MAX) {
		end = QUOTE_MAX;
		while (end > 0 && ((unsigned char)s[end] & 0xC0u) == 0x80u)
			end--;
	}
	puts_(t, "\"");
	for (size_t i = 0; i < end; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			esc[2] = '\0';
		} else if (c == '\n') {
			strcpy(esc, "\\n");
		} else if (c == '\r') {
			strcpy(esc, "\\r");
		} else if (c == '\t') {
			strcpy(esc, "\\t");
		} else if (c < 0x20 || c == 0x7F) {
			snprintf(esc, sizeof(esc), "\\x%02X", (unsigned)c);
		} else {
			esc[0] = (char)c;
			esc[1] = '\0';
		}
		puts_(t, esc);
	}
	if (end < n)
		puts_(t, ELLIPSIS);
	puts_(t, "\"");
}

static int fail(const struct ctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Write `"<value>" <fmt...>` into the error buffer; return -1. */
static int fail(const struct ctx *c, const char *fmt, ...)
{
	if (!c->err || !c->errlen)
		return -1;

	struct text t = {c->err, c->errlen, 0};

	quote(&t, c->s, c->n);
	puts_(&t, " ");
	if (t.len + 1 < t.cap) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(c->err + t.len, t.cap - t.len, fmt, ap);
		va_end(ap);
	}
	drop_partial_utf8(c->err);
	return -1;
}

static int fail_kind(const struct ctx *c)
{
	return fail(c, "%s", kind_expects[c->kind]);
}

static void skip_blanks(struct ctx *c)
{
	while (c->pos < c->n && is_blank(c->s[c->pos]))
		c->pos++;
}

/* Value of a number in base units; +inf when it does not fit a double. */
static double number_value(const struct number *num, enum assumption_kind kind)
{
	/* Digits and an exponent, without a point: no locale can misread it. */
	char tmp[ASSUMPTION_TEXT_MAX + 32];
	size_t k = 0;
	long e10 = -(long)num->fn;

	if (num->in + num->fn > ASSUMPTION_TEXT_MAX)
		return HUGE_VAL;
	memcpy(tmp, num->ip, num->in);
	k += num->in;
	if (num->fn)
		memcpy(tmp + k, num->fp, num->fn);
	k += num->fn;
	if (k == 0)
		tmp[k++] = '0';
	if (kind == ASSUMPTION_BITRATE)
		e10 += 3L * num->suffix;
	snprintf(tmp + k, sizeof(tmp) - k, "e%ld", e10);

	double v = strtod(tmp, NULL);

	if (kind == ASSUMPTION_BYTES)
		v = ldexp(v, 10 * num->suffix);
	return v;
}

/* Parse a number (and suffix) at c->pos. */
static int parse_number(struct ctx *c, struct number *num)
{
	const char *s = c->s;
	size_t p = c->pos, n = c->n;

	memset(num, 0, sizeof(*num));
	if (p == n)
		return fail(c,
			    "has no number after the keyword: write one, as "
			    "in \"atleast %s\"",
			    c->kind == ASSUMPTION_COUNT ? "2" : "16G");
	if (s[p] == '.' && p + 1 < n && is_digit(s[p + 1]))
		return fail(c, "has a number without a digit before its point: "
			       "write \"0.5\" rather than \".5\"");
	if (!is_digit(s[p]))
		return fail_kind(c);

	while (p < n && s[p] == '0')
		p++;
	num->ip = s + p;
	while (p < n && is_digit(s[p]))
		p++;
	num->in = (size_t)(s + p - num->ip);
	if (p < n && s[p] == '.' && !(p + 1 < n && s[p + 1] == '.')) {
		p++;
		if (p == n || !is_digit(s[p]))
			return fail(c, "has a number without a digit after its "
				       "point: write \"5\" or \"5.5\" rather "
				       "than \"5.\"");
		num->fp = s + p;
		while (p < n && is_digit(s[p]))
			p++;
		num->fn = (size_t)(s + p - num->fp);
		while (num->fn > 0 && num->fp[num->fn - 1] == '0')
			num->fn--;
	}
	if (p < n && is_alpha(s[p])) {
		if (c->kind == ASSUMPTION_COUNT)
			return fail(c,
				    "is not a count: counts take no suffix, so "
				    "write a plain number, as in \"4\", "
				    "\"atleast 2\" or \"2..8\"");
		const char *x = strchr(suffixes, s[p] & ~0x20);
		if (!x)
			return fail_kind(c);
		num->suffix = (int)(x - suffixes) + 1;
		p++;
	}
	/* The number must end here: at the end, a blank or a `..`. */
	if (p < n && !is_blank(s[p]) && s[p] != '.')
		return fail_kind(c);
	c->pos = p;

	num->value = number_value(num, c->kind);
	if (!isfinite(num->value))
		return fail(c,
			    "holds a number too large to use: its value must "
			    "be below about 1.8e308%s",
			    c->kind == ASSUMPTION_BYTES	    ? " bytes"
			    : c->kind == ASSUMPTION_BITRATE ? " bits per second"
							    : "");
	return 0;
}

static void put_number(struct text *t, const struct number *num)
{
	if (num->in)
		put(t, num->ip, num->in);
	else
		puts_(t, "0");
	if (num->fn) {
		puts_(t, ".");
		put(t, num->fp, num->fn);
	}
	if (num->suffix)
		put(t, &suffixes[num->suffix - 1], 1);
}

/* Whether s[0..n) is `word`, ignoring case. */
static bool keyword_is(const char *s, size_t n, const char *word)
{
	if (strlen(word) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((char)(s[i] | 0x20) != word[i])
			return false;
	return true;
}

static int parse_quantity(struct ctx *c, struct assumption *a, struct text *t)
{
	static const char *const words[] = {"just", "atleast", "atmost"};
	static const enum assumption_op ops[] = {
		ASSUMPTION_JUST, ASSUMPTION_ATLEAST, ASSUMPTION_ATMOST};
	const char *s = c->s;
	struct number lo, hi;
	int kw = -1;

	if (s[0] == '@' || is_alpha(s[0])) {
		size_t w = s[0] == '@' ? 1 : 0;

		c->pos = w;
		while (c->pos < c->n && is_alpha(s[c->pos]))
			c->pos++;
		for (int i = 0; i < 3; i++)
			if (keyword_is(s + w, c->pos - w, words[i]))
				kw = i;
		if (kw < 0)
			return fail_kind(c);
		if (c->pos < c->n && !is_blank(s[c->pos]))
			return fail(c,
				    "has no blank after its keyword: "
				    "write one, as in \"atleast %s\"",
				    c->kind == ASSUMPTION_COUNT ? "2" : "16G");
		skip_blanks(c);
	}
	if (kw < 0 && c->n >= 2 && s[0] == '.' && s[1] == '.')
		return fail(c,
			    "has no lower bound: write both bounds of a "
			    "range, as in \"%s\"",
			    c->kind == ASSUMPTION_COUNT ? "2..8" : "16G..32G");
	if (parse_number(c, &lo))
		return -1;
	skip_blanks(c);
	if (c->pos + 1 < c->n && s[c->pos] == '.' && s[c->pos + 1] == '.') {
		if (kw >= 0)
			return fail(c,
				    "puts a keyword before a range: write "
				    "a range alone, as in \"%s\"",
				    c->kind == ASSUMPTION_COUNT ? "2..8"
								: "16G..32G");
		c->pos += 2;
		skip_blanks(c);
		if (c->pos == c->n)
			return fail(c,
				    "has no upper bound: write both bounds "
				    "of a range, as in \"%s\"",
				    c->kind == ASSUMPTION_COUNT ? "2..8"
								: "16G..32G");
		if (parse_number(c, &hi))
			return -1;
		if (c->pos != c->n)
			return fail_kind(c);
		if (lo.value > hi.value)
			return fail(c,
				    "is an empty range: write the lower "
				    "bound first, as in \"%s\"",
				    c->kind == ASSUMPTION_COUNT ? "2..8"
								: "16G..32G");
		a->op = ASSUMPTION_RANGE;
		a->lo = lo.value;
		a->hi = hi.value;
		put_number(t, &lo);
		puts_(t, "..");
		put_number(t, &hi);
		return 0;
	}
	if (c->pos != c->n)
		return fail_kind(c);

	a->op = kw < 0 ? ASSUMPTION_JUST : ops[kw];
	a->lo = a->op == ASSUMPTION_ATMOST ? 0 : lo.value;
	a->hi = a->op == ASSUMPTION_ATLEAST ? INFINITY : lo.value;
	puts_(t, kw < 0 ? "just" : words[kw]);
	puts_(t, " ");
	put_number(t, &lo);
	return 0;
}

static int parse_name(struct ctx *c, struct assumption *a, struct text *t)
{
	for (size_t i = 0; i < c->n; i++)
		if (is_blank(c->s[i]))
			return fail(c,
				    "is not a type name: write a single name "
				    "without blanks or keywords, as in "
				    "\"t3.xlarge\" or \"Ada\"");
	if (!is_alpha(c->s[0]) && !is_digit(c->s[0]))
		return fail_kind(c);
	for (size_t i = 1; i < c->n; i++)
		if (!is_alpha(c->s[i]) && !is_digit(c->s[i]) &&
		    !strchr("_.:+-", c->s[i]))
			return fail_kind(c);
	if (c->n > ASSUMPTION_NAME_MAX)
		return fail(c,
			    "is too long for a type name: write at most %d "
			    "characters",
			    ASSUMPTION_NAME_MAX);
	a->op = ASSUMPTION_NAME;
	memcpy(a->name, c->s, c->n);
	a->name[c->n] = '\0';
	put(t, c->s, c->n);
	return 0;
}

/* Parse text into *a and its normalised form into *t. */
static int parse_value(enum assumption_kind kind, const char *text, size_t len,
		       struct assumption *a, struct text *t, char *err,
		       size_t errlen)
{
	struct ctx c = {kind, "", 0, 0, err, errlen};

	if (err && errlen)
		err[0] = '\0';
	memset(a, 0, sizeof(*a));
	if (!text && len)
		return fail(&c, "is not a value: no text was given");
	if ((unsigned)kind > ASSUMPTION_TYPE)
		return fail(&c,
			    "cannot be checked: the assumption kind %u is "
			    "unknown",
			    (unsigned)kind);
	text = trim(text, &len);
	c.s = text;
	c.n = len;

	if (len == 0) {
		a->op = ASSUMPTION_ANY;
		a->hi = INFINITY;
		put(t, "", 0);
		return 0;
	}
	if (memchr(text, '\0', len))
		return fail(&c, "contains a NUL byte: write the value as plain "
				"text");
	if (memchr(text, '\n', len) || memchr(text, '\r', len))
		return fail(&c, "has more than one line: an assumption file "
				"holds one value on one line");
	if (len > ASSUMPTION_TEXT_MAX)
		return fail(&c,
			    "is too long: an assumption holds at most %d "
			    "bytes",
			    ASSUMPTION_TEXT_MAX);

	int r = kind == ASSUMPTION_TYPE ? parse_name(&c, a, t)
					: parse_quantity(&c, a, t);
	if (r)
		return r;
	if (t->len > ASSUMPTION_TEXT_MAX)
		return fail(&c,
			    "is too long: once normalised it would exceed "
			    "%d bytes",
			    ASSUMPTION_TEXT_MAX);
	return 0;
}

int assumption_field_find(const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < assumption_field_count; i++)
		if (!strcmp(assumption_fields[i].name, name))
			return (int)i;
	return -1;
}

int assumption_parse(enum assumption_kind kind, const char *text, size_t len,
		     struct assumption *out, char *err, size_t errlen)
{
	struct assumption a;
	struct text t = {NULL, 0, 0};

	if (parse_value(kind, text, len, &a, &t, err, errlen))
		return -1;
	if (out)
		*out = a;
	return 0;
}

int assumption_normalise(enum assumption_kind kind, const char *text,
			 size_t len, char *buf, size_t buflen, char *err,
			 size_t errlen)
{
	struct assumption a;
	struct text t = {buf, buflen, 0};

	if (buf && buflen)
		buf[0] = '\0';
	if (parse_value(kind, text, len, &a, &t, err, errlen)) {
		if (buf && buflen)
			buf[0] = '\0';
		return -1;
	}
	if (!buf || t.len >= buflen) {
		struct ctx c = {kind, NULL, len, 0, err, errlen};

		c.s = trim(text, &c.n);
		if (buf && buflen)
			buf[0] = '\0';
		return fail(&c,
			    "does not fit: its normalised form needs %zu "
			    "bytes but the buffer holds %zu",
			    t.len + 1, buf ? buflen : 0);
	}
	return 0;
}

bool assumption_holds(const struct assumption *a, double value)
{
	if (!a)
		return false;
	switch (a->op) {
	case ASSUMPTION_ANY:
		return true;
	case ASSUMPTION_JUST:
	case ASSUMPTION_ATLEAST:
	case ASSUMPTION_ATMOST:
	case ASSUMPTION_RANGE:
		return value >= a->lo && value <= a->hi;
	case ASSUMPTION_NAME:
		return false;
	}
	return false;
}
