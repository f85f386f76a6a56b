/* Matching: whether an instance type's features satisfy a set of instance
 * assumptions (type names match their subtypes in the platform-type
 * hierarchy), and which assumption rules a set of types out. Pure functions
 * over feature vectors; the catalog supplies the vectors. */
#include "resolver/match.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool resolver_match_field(const struct hierarchy *h,
			  const struct resolver_query *q, size_t field,
			  const struct resolver_instance *it)
{
	const struct assumption *a = &q->a[field];

	if (a->op == ASSUMPTION_ANY)
		return true;
	if (it->noffers && field == ASSUMPTION_FIELD_LOCALE) {
		for (size_t i = 0; i < it->noffers; i++)
			if (resolver_offer_allowed(h, q, &it->offers[i]))
				return true;
		return false;
	}
	if (a->op != ASSUMPTION_NAME)
		return assumption_holds(a, it->number[field]);
	return hierarchy_is_a(h, it->type[field], q->type[field]);
}

bool resolver_offer_allowed(const struct hierarchy *h,
			    const struct resolver_query *q,
			    const struct resolver_offer *o)
{
	return q->a[ASSUMPTION_FIELD_LOCALE].op == ASSUMPTION_ANY ||
	       hierarchy_is_a(h, o->locale, q->type[ASSUMPTION_FIELD_LOCALE]);
}

bool resolver_match(const struct hierarchy *h, const struct resolver_query *q,
		    const struct resolver_instance *it)
{
	/* cluster_locale last: it looks at every offer, the others at one
	 * number or type each. */
	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		if (f != ASSUMPTION_FIELD_LOCALE &&
		    !resolver_match_field(h, q, f, it))
			return false;
	return resolver_match_field(h, q, ASSUMPTION_FIELD_LOCALE, it);
}

bool resolver_match_features(const struct hierarchy *h,
			     const struct resolver_query *q,
			     const struct resolver_instance *it)
{
	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		if (f != ASSUMPTION_FIELD_LOCALE &&
		    !resolver_match_field(h, q, f, it))
			return false;
	return it->noffers ||
	       resolver_match_field(h, q, ASSUMPTION_FIELD_LOCALE, it);
}

void resolver_quantity_text(enum assumption_kind kind, double v, char *buf,
			    size_t len)
{
	static const char suffix[] = "KMGTP";
	double base = kind == ASSUMPTION_BYTES ? 1024.0 : 1000.0;
	double x = v;
	int s = -1, exact = -1;

	if (isnan(v)) {
		snprintf(buf, len, "%s", "");
		return;
	}
	if (kind != ASSUMPTION_COUNT) {
		while (s < 4 && x >= base) {
			x /= base;
			s++;
			if (x == floor(x))
				exact = s;
		}
	}
	if (exact >= 0) {
		snprintf(buf, len, "%.17g%c", v / pow(base, exact + 1),
			 suffix[exact]);
	} else if (s < 0 || v == floor(v)) {
		snprintf(buf, len, "%.15g", v);
	} else {
		snprintf(buf, len, "%.4g%c", x, suffix[s]);
	}
}

void resolver_feature_text(const struct hierarchy *h, size_t field,
			   const struct resolver_instance *it, char *buf,
			   size_t len)
{
	enum assumption_kind kind = assumption_fields[field].kind;

	int id = it->type[field];

	/* A region's type: the cheapest offer's, as resolution sees it. */
	if (it->noffers && field == ASSUMPTION_FIELD_LOCALE)
		id = it->offers[0].locale;
	if (kind == ASSUMPTION_TYPE)
		snprintf(buf, len, "%s", id >= 0 ? hierarchy_name(h, id) : "");
	else
		resolver_quantity_text(kind, it->number[field], buf, len);
}

/* How far a known quantity v is from satisfying a (0 when it does). */
static double resolver_distance(const struct assumption *a, double v)
{
	if (isnan(v))
		return INFINITY;
	if (v < a->lo)
		return (a->lo - v) / (a->lo > 0 ? a->lo : 1);
	if (v > a->hi)
		return (v - a->hi) / (a->hi > 0 ? a->hi : 1);
	return 0;
}

void resolver_explain_none(const struct hierarchy *h,
			   const struct resolver_query *q,
			   const struct resolver_instance *const *all, size_t n,
			   char *why, size_t len)
{
	const struct resolver_instance **left;
	size_t count = n;

	if (n == 0) {
		snprintf(why, len,
			 "no instance type satisfies the contract: "
			 "the catalog is empty");
		return;
	}
	left = malloc(n * sizeof(*left));
	if (!left) {
		snprintf(why, len, "no instance type satisfies the contract");
		return;
	}
	memcpy(left, all, n * sizeof(*left));
	for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
		size_t kept = 0, best = 0;
		double bestd = INFINITY;
		char value[128];

		if (q->a[f].op == ASSUMPTION_ANY)
			continue;
		for (size_t i = 0; i < count; i++)
			if (resolver_match_field(h, q, f, left[i]))
				left[kept++] = left[i];
		if (kept) {
			count = kept;
			continue;
		}
		/* Nothing kept: left[] still holds the count types before. */
		for (size_t i = 0; i < count; i++) {
			double d =
				q->a[f].op == ASSUMPTION_NAME
					? (left[i]->type[f] >= 0 ? 1 : 2)
					: resolver_distance(&q->a[f],
							    left[i]->number[f]);
			if (d < bestd) {
				bestd = d;
				best = i;
			}
		}
		resolver_feature_text(h, f, left[best], value, sizeof(value));
		snprintf(why, len,
			 "no instance type satisfies %s; of the %zu %s the "
			 "assumptions before it, the closest is %s %s with "
			 "%s %s",
			 assumption_fields[f].name, count,
			 count == 1 ? "type that satisfies"
				    : "types that satisfy",
			 left[best]->provider, left[best]->name,
			 assumption_fields[f].name, *value ? value : "unknown");
		free(left);
		return;
	}
	snprintf(why, len, "no instance type satisfies the contract");
	free(left);
}
