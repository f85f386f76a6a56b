/* Keys of cclfs.conf read through a provider's table: the check of each kind
 * of value, its store into the settings, and the errors that name the file,
 * the section, the key and the value, with what would be valid. */
#include "providers/conf_keys.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A word goes into URLs, queries and command lines as it is. */
#define CONFKEYS_NOT_IN_WORD " \t\n'\"&=?"

static const struct confkeys_key *confkeys_find(const struct confkeys_key *t,
						size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	return NULL;
}

static int confkeys_text(const char *v, char *field, size_t size)
{
	if (strlen(v) >= size) /* cut short, it would name something else */
		return -1;
	snprintf(field, size, "%s", v);
	return 0;
}

static int confkeys_number(const struct confkeys_key *k, const char *v,
			   double *out)
{
	char *end;
	double d;

	if (k->kind == CONFKEYS_INT || k->kind == CONFKEYS_ATTEMPTS) {
		long l = strtol(v, &end, 10);

		d = (double)l;
	} else {
		d = strtod(v, &end);
	}
	if (end == v || *end || !isfinite(d) || d < k->min || d > k->max)
		return -1;
	*out = d;
	return 0;
}

/* A price in US dollars per hour, "$" allowed before it. */
static int confkeys_price(const char *v, double *out)
{
	char *end;
	double d;

	if (*v == '$')
		v++;
	if (!isdigit((unsigned char)*v) && *v != '.')
		return -1;
	d = strtod(v, &end);
	if (*end || !(d >= 0) || d > 1e9)
		return -1;
	*out = d;
	return 0;
}

/* Store v into the field k names: 0, or -1 when v is not valid. */
static int confkeys_store(const struct confkeys_key *k, const char *v,
			  void *base)
{
	char *field = (char *)base + k->offset;
	int *num = (int *)(void *)field;
	double d;

	switch (k->kind) {
	case CONFKEYS_URL:
		if (strncmp(v, "http://", 7) != 0 &&
		    strncmp(v, "https://", 8) != 0)
			return -1;
		/* fall through */
	case CONFKEYS_NONEMPTY:
		if (!*v)
			return -1;
		/* fall through */
	case CONFKEYS_WORD:
		if (strpbrk(v, CONFKEYS_NOT_IN_WORD))
			return -1;
		/* fall through */
	case CONFKEYS_TEXT:
		return confkeys_text(v, field, k->size);
	case CONFKEYS_CHOICE:
		for (size_t i = 0; k->choices[i]; i++)
			if (strcmp(k->choices[i], v) == 0)
				return confkeys_text(v, field, k->size);
		return -1;
	case CONFKEYS_BOOL:
		if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0)
			*num = 1;
		else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0)
			*num = 0;
		else
			return -1;
		return 0;
	case CONFKEYS_INT:
	case CONFKEYS_MS:
	case CONFKEYS_WHOLE_S:
	case CONFKEYS_ATTEMPTS:
		if (confkeys_number(k, v, &d))
			return -1;
		/* libssh2 counts keepalives in whole seconds: 0.5 is 1, not 0
		 * (none). */
		*num = k->kind == CONFKEYS_MS	      ? (int)lround(d * 1000)
		       : k->kind == CONFKEYS_WHOLE_S  ? (int)ceil(d)
		       : k->kind == CONFKEYS_ATTEMPTS ? (int)d + 1
						      : (int)d;
		return 0;
	case CONFKEYS_PRICE:
		return confkeys_price(v, (double *)(void *)field);
	case CONFKEYS_PARSE:
		return k->parse(v, field, k->size);
	}
	return -1;
}

/* What a valid value of k is, for the error. */
static void confkeys_takes(const struct confkeys_key *k, char *out, size_t len)
{
	size_t o = 0;

	switch (k->kind) {
	case CONFKEYS_WORD:
	case CONFKEYS_NONEMPTY:
		snprintf(out, len,
			 "%sat most %zu bytes without blanks, quotes, "
			 "'&', '=' or '?'",
			 k->kind == CONFKEYS_NONEMPTY ? "1 to " : "",
			 k->size - 1);
		return;
	case CONFKEYS_URL:
		snprintf(out, len,
			 "an http:// or https:// URL of at most %zu bytes "
			 "without blanks or quotes",
			 k->size - 1);
		return;
	case CONFKEYS_TEXT:
		snprintf(out, len, "at most %zu bytes", k->size - 1);
		return;
	case CONFKEYS_CHOICE:
		for (size_t i = 0; k->choices[i] && o < len; i++)
			o += (size_t)snprintf(out + o, len - o, "%s%s",
					      i == 0		  ? ""
					      : k->choices[i + 1] ? ", "
								  : " or ",
					      k->choices[i]);
		return;
	case CONFKEYS_BOOL:
		snprintf(out, len, "yes or no");
		return;
	case CONFKEYS_INT:
	case CONFKEYS_ATTEMPTS:
		snprintf(out, len, "a whole number from %g to %g", k->min,
			 k->max);
		return;
	case CONFKEYS_MS:
	case CONFKEYS_WHOLE_S:
		snprintf(out, len, "seconds from %g to %g", k->min, k->max);
		return;
	case CONFKEYS_PRICE:
		snprintf(out, len,
			 "a price in US dollars per hour, such as 0.25");
		return;
	case CONFKEYS_PARSE:
		snprintf(out, len, "%s", k->takes);
		return;
	}
	*out = '\0';
}

int confkeys_apply(const struct confkeys_key *t, size_t n, const char *path,
		   const struct config_entry *e, void *base, char *err,
		   size_t errlen)
{
	const struct confkeys_key *k = confkeys_find(t, n, e->key);
	char takes[256];

	if (!k) {
		size_t o = (size_t)snprintf(
			err, errlen, "%s: [%s] has no key \"%.100s\"; it takes",
			path, e->section, e->key);

		for (size_t j = 0; j < n && o < errlen; j++)
			o += (size_t)snprintf(err + o, errlen - o, "%s %s",
					      j == 0	   ? ""
					      : j + 1 == n ? " and"
							   : ",",
					      t[j].name);
		return -1;
	}
	if (confkeys_store(k, e->value, base) == 0)
		return 0;
	confkeys_takes(k, takes, sizeof(takes));
	snprintf(err, errlen,
		 "%s: [%s] %s: \"%.200s\" is not valid; it takes %s", path,
		 e->section, k->name, k->secret ? "(not shown)" : e->value,
		 takes);
	return -1;
}
