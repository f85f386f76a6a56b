/* Assumption values: the grammar shared by every instance-assumption file
 * (`just 4`, `atleast 16G`, `atmost 256G`, `16G..32G`, type names), its
 * parser, its normalised text form, and the test of a feature against it. */
#ifndef CCLFS_RESOLVER_ASSUMPTION_H
#define CCLFS_RESOLVER_ASSUMPTION_H

#include <stdbool.h>
#include <stddef.h>

/* Longest assumption text accepted (DESIGN §2: values are at most 4096 bytes).
 */
#define ASSUMPTION_TEXT_MAX 4096
/* Longest type name (platform type or provider spelling). */
#define ASSUMPTION_NAME_MAX 127

/* What an assumption file constrains. */
enum assumption_kind {
	ASSUMPTION_COUNT,   /* plain numbers: vCPUs, ECUs, accelerators (no
			       suffix) */
	ASSUMPTION_BYTES,   /* sizes: K/M/G/T/P are powers of 1024 */
	ASSUMPTION_BITRATE, /* bits per second: K/M/G/T/P are powers of 1000 */
	ASSUMPTION_TYPE,    /* a type name: `Ada`, `t3.xlarge`, `EC2Type_T3` */
};

enum assumption_op {
	ASSUMPTION_ANY,	    /* empty value: no assumption */
	ASSUMPTION_JUST,    /* `4`, `just 4`: exactly lo */
	ASSUMPTION_ATLEAST, /* `atleast 16G`: >= lo */
	ASSUMPTION_ATMOST,  /* `atmost 256G`: <= hi */
	ASSUMPTION_RANGE,   /* `16G..32G`: lo <= v <= hi */
	ASSUMPTION_NAME,    /* a type name, in `name` */
};

struct assumption {
	enum assumption_op op;
	double lo; /* in base units (count, bytes, bits/s) */
	double hi;
	char name[ASSUMPTION_NAME_MAX + 1];
};

/* One instance-assumption file: its name and what it constrains. */
struct assumption_field {
	const char *name;
	enum assumption_kind kind;
};

/* The 19 instance-assumption files, in DESIGN §1 order. */
extern const struct assumption_field assumption_fields[];
extern const size_t assumption_field_count;

/* The index of cluster_locale in assumption_fields (the table is in DESIGN
 * order; unit.assumption checks it), for the matching of offers, which
 * must not look it up per offer. */
#define ASSUMPTION_FIELD_LOCALE 1

/* Index into assumption_fields of the file called `name`, or -1. */
int assumption_field_find(const char *name);

/*
 * Parse `len` bytes of `text` as a value of `kind`. Leading and trailing
 * whitespace (and so one trailing newline) are ignored; an empty or
 * all-blank text is ASSUMPTION_ANY. Keywords are case-insensitive and may
 * carry CloudClusters' `@` (`@atleast 16G`); suffixes may be lower case.
 * Returns 0 and fills *out, or -1 and writes one plain sentence about the
 * value (without the file name, which the caller adds) into err.
 */
int assumption_parse(enum assumption_kind kind, const char *text, size_t len,
		     struct assumption *out, char *err, size_t errlen);

/*
 * Write the normalised form of `text` (which must parse) into buf: keywords
 * lower case (`just`, `atleast`, `atmost`), `lo..hi` for ranges, numbers
 * without leading zeros or trailing fractional zeros, suffixes upper case,
 * type names as written. Empty for ASSUMPTION_ANY. The normalised form
 * parses to the same assumption and normalises to itself.
 * Returns 0, or -1 (with err filled) when text does not parse or buf is
 * too small.
 */
int assumption_normalise(enum assumption_kind kind, const char *text,
			 size_t len, char *buf, size_t buflen, char *err,
			 size_t errlen);

/* Whether a known feature value satisfies a quantity assumption. */
bool assumption_holds(const struct assumption *a, double value);

#endif
