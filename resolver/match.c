/* Matching: whether an instance type's features satisfy a set of instance
 * assumptions, and which assumption rules a set of types out. Pure
 * functions over feature vectors; the catalog supplies the vectors. */
#include "resolver/match.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool resolver_match_field(const struct assumption *a, size_t field,
			  const struct resolver_instance *it)
{
	const char *t;

	if (a->op == ASSUMPTION_ANY)
		return true;
	if (a->op != ASSUMPTION_NAME)
		return assumption_holds(a, it->number[field]);
	t = it->type[field];
	if (t && strcasecmp(t, a->name) == 0)
		return true;
	/* The provider's own spellings of provider and type name. */
	if (strcmp(assumption_fields[field].name, "node_provider") == 0)
		return strcasecmp(it->provider, a->name) == 0;
	if (strcmp(assumption_fields[field].name, "node_machinetype") == 0)
		return strcasecmp(it->name, a->name) == 0;
	return false;
}

bool resolver_match(const struct assumption *a,
		    const struct resolver_instance *it)
{
	for (size_t f = 0; f < RESOLVER_FIELDS; f++)
		if (!resolver_match_field(&a[f], f, it))
			return false;
	return true;
}

void resolver_quantity_text(enum assumption_kind kind, double v, char *buf,
			    size_t len)
{
	static const char suffix[] = "KMGTP";
	double base = kind == ASSUMPTION_BYTES ? 1024.0 : 1000.0;
	int s = -1;

	if (isnan(v)) {
		snprintf(buf, len, "unknown");
		return;
	}
	if (kind != ASSUMPTION_COUNT)
		while (s < 4 && v >= base) {
			v /= base;
			s++;
		}
	if (s < 0)
		snprintf(buf, len, "%.6g", v);
	else
		snprintf(buf, len, "%.4g%c", v, suffix[s]);
}

void resolver_feature_text(size_t field, const struct resolver_instance *it,
			   char *buf, size_t len)
{
	enum assumption_kind kind = assumption_fields[field].kind;

	if (kind == ASSUMPTION_TYPE)
		snprintf(buf, len, "%s",
			 it->type[field] ? it->type[field] : "unknown");
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

void resolver_explain_none(const struct assumption *a,
			   const struct resolver_instance *const *all, size_t n,
			   char *why, size_t len)
{
	const struct resolver_instance **left =
		malloc((n ? n : 1) * sizeof(*left));
	size_t count = n;

	if (!left) {
		snprintf(why, len, "no instance type satisfies the contract");
		return;
	}
	memcpy(left, all, n * sizeof(*left));
	if (n == 0) {
		snprintf(why, len,
			 "no instance type satisfies the contract: "
			 "the catalog is empty");
		free(left);
		return;
	}
	for (size_t f = 0; f < RESOLVER_FIELDS; f++) {
		size_t kept = 0, best = 0;
		double bestd = INFINITY;
		char value[64];

		if (a[f].op == ASSUMPTION_ANY)
			continue;
		for (size_t i = 0; i < count; i++)
			if (resolver_match_field(&a[f], f, left[i]))
				kept++;
		if (kept) {
			size_t k = 0;

			for (size_t i = 0; i < count; i++)
				if (resolver_match_field(&a[f], f, left[i]))
					left[k++] = left[i];
			count = k;
			continue;
		}
		for (size_t i = 0; i < count; i++) {
			double d = a[f].op == ASSUMPTION_NAME
					   ? (left[i]->type[f] ? 1 : 2)
					   : resolver_distance(
						     &a[f], left[i]->number[f]);
			if (d < bestd) {
				bestd = d;
				best = i;
			}
		}
		resolver_feature_text(f, left[best], value, sizeof(value));
		snprintf(why, len,
			 "no instance type satisfies %s; of the %zu type%s "
			 "that satisfy the assumptions before it, the "
			 "closest is %s %s with %s %s",
			 assumption_fields[f].name, count,
			 count == 1 ? "" : "s", left[best]->provider,
			 left[best]->name, assumption_fields[f].name, value);
		free(left);
		return;
	}
	snprintf(why, len, "no instance type satisfies the contract");
	free(left);
}
