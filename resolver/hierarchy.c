/* The platform-type hierarchy: type names per assumption file (`Ada`,
 * `NVIDIA`, `EC2Type_T3_xLarge`, `t3.xlarge` as an alias), each with its
 * parent, and the subtype test that matching uses. Pure data structure; the
 * catalog fills it. */
#include "resolver/hierarchy.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Fields are indices into assumption_fields; only a bound is needed here. */
#define FIELD_MAX 64
/* Longest name, parent or alias (ASSUMPTION_NAME_MAX). */
#define NAME_MAX_LEN 127
/* Initial number of hash slots (a power of two). */
#define TABLE_MIN 64

/* One spelling of a type: its declared name or an alias. Owns `text`. */
struct spelling {
	char *text;
	uint32_t hash; /* of field and lower-cased text */
	unsigned field;
	int id; /* the type spelled */
};

struct type {
	const char *name;  /* the spelling's text, owned by it */
	char *parent_name; /* as declared; NULL for a root */
	int parent;	   /* id once known, else -1 */
	unsigned field;
};

struct hierarchy {
	struct type *types;
	size_t ntypes, captypes;
	struct spelling *spell;
	size_t nspell, capspell;
	/* Open addressing, linear probing: indices into spell, or -1. Kept at
	 * most half full; nothing is ever removed. */
	int *slots;
	size_t capslots;
};

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* ASCII case-insensitive comparison, like strcasecmp in the C locale. */
static int casecmp(const char *a, const char *b)
{
	const unsigned char *p = (const unsigned char *)a;
	const unsigned char *q = (const unsigned char *)b;

	while (*p && lower(*p) == lower(*q)) {
		p++;
		q++;
	}
	return lower(*p) - lower(*q);
}

/* Whether `needle` occurs in `hay`, ignoring ASCII case. */
static bool casecontains(const char *hay, size_t hlen, const char *needle,
			 size_t nlen)
{
	for (size_t i = 0; i + nlen <= hlen; i++) {
		size_t j = 0;

		while (j < nlen && lower((unsigned char)hay[i + j]) ==
					   lower((unsigned char)needle[j]))
			j++;
		if (j == nlen)
			return true;
	}
	return false;
}

/* FNV-1a over the field and the lower-cased name. */
static uint32_t hash_name(unsigned field, const char *name)
{
	uint32_t x = 2166136261u;

	x = (x ^ (field & 0xff)) * 16777619u;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		x = (x ^ (uint32_t)lower(*p)) * 16777619u;
	return x;
}

/* A name is usable when present, non-empty and at most NAME_MAX_LEN. */
static bool name_ok(const char *name)
{
	size_t n = 0;

	if (!name)
		return false;
	while (n <= NAME_MAX_LEN && name[n])
		n++;
	return n > 0 && n <= NAME_MAX_LEN;
}

static char *copy(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);

	if (p)
		memcpy(p, s, n);
	return p;
}

/* Index into h->spell of the spelling `name` of `field`, or -1. */
static int lookup(const struct hierarchy *h, unsigned field, const char *name)
{
	uint32_t x;
	size_t mask, i;

	if (!h->capslots)
		return -1;
	x = hash_name(field, name);
	mask = h->capslots - 1;
	for (i = x & mask; h->slots[i] >= 0; i = (i + 1) & mask) {
		const struct spelling *s = &h->spell[h->slots[i]];

		if (s->hash == x && s->field == field &&
		    casecmp(s->text, name) == 0)
			return h->slots[i];
	}
	return -1;
}

static void table_put(int *slots, size_t cap, uint32_t x, int idx)
{
	size_t mask = cap - 1, i;

	for (i = x & mask; slots[i] >= 0; i = (i + 1) & mask)
		;
	slots[i] = idx;
}

/* Make room for one more spelling (and, when `type`, one more type). */
static int reserve(struct hierarchy *h, bool type)
{
	if (h->nspell >= (size_t)INT_MAX - 1)
		return -1;
	if (type && h->ntypes == h->captypes) {
		size_t n = h->captypes ? h->captypes * 2 : 64;
		struct type *t = realloc(h->types, n * sizeof(*t));

		if (!t)
			return -1;
		h->types = t;
		h->captypes = n;
	}
	if (h->nspell == h->capspell) {
		size_t n = h->capspell ? h->capspell * 2 : 64;
		struct spelling *s = realloc(h->spell, n * sizeof(*s));

		if (!s)
			return -1;
		h->spell = s;
		h->capspell = n;
	}
	if ((h->nspell + 1) * 2 > h->capslots) {
		size_t n = h->capslots ? h->capslots * 2 : TABLE_MIN;
		int *slots = malloc(n * sizeof(*slots));

		if (!slots)
			return -1;
		for (size_t i = 0; i < n; i++)
			slots[i] = -1;
		for (size_t i = 0; i < h->nspell; i++)
			table_put(slots, n, h->spell[i].hash, (int)i);
		free(h->slots);
		h->slots = slots;
		h->capslots = n;
	}
	return 0;
}

/* Record spelling `text` (already copied) of type `id`; room is reserved. */
static void add_spelling(struct hierarchy *h, unsigned field, char *text,
			 int id)
{
	struct spelling *s = &h->spell[h->nspell];

	s->text = text;
	s->hash = hash_name(field, text);
	s->field = field;
	s->id = id;
	table_put(h->slots, h->capslots, s->hash, (int)h->nspell);
	h->nspell++;
}

struct hierarchy *hierarchy_new(void)
{
	return calloc(1, sizeof(struct hierarchy));
}

void hierarchy_free(struct hierarchy *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nspell; i++)
		free(h->spell[i].text);
	for (size_t i = 0; i < h->ntypes; i++)
		free(h->types[i].parent_name);
	free(h->spell);
	free(h->types);
	free(h->slots);
	free(h);
}

/* The type a parent name denotes now, or -1 (not declared yet). */
static int resolve(const struct hierarchy *h, unsigned field,
		   const char *parent)
{
	int s = lookup(h, field, parent);

	return s < 0 ? -1 : h->spell[s].id;
}

/* Whether type t was declared with parent `parent` (NULL for a root). */
static bool same_parent(const struct hierarchy *h, const struct type *t,
			const char *parent)
{
	int a, b;

	if (!t->parent_name || !parent)
		return !t->parent_name && !parent;
	if (casecmp(t->parent_name, parent) == 0)
		return true;
	a = t->parent >= 0 ? t->parent : resolve(h, t->field, t->parent_name);
	b = resolve(h, t->field, parent);
	return a >= 0 && a == b;
}

int hierarchy_add(struct hierarchy *h, size_t field, const char *name,
		  const char *parent)
{
	unsigned f = (unsigned)field;
	struct type *t;
	char *n, *p = NULL;
	int s, id;

	if (!h || field >= FIELD_MAX || !name_ok(name))
		return -1;
	if (parent && !parent[0])
		parent = NULL;
	if (parent && (!name_ok(parent) || casecmp(name, parent) == 0))
		return -1;
	s = lookup(h, f, name);
	if (s >= 0) {
		id = h->spell[s].id;
		/* Taken by an alias, or declared with another parent. */
		if (h->types[id].name != h->spell[s].text ||
		    !same_parent(h, &h->types[id], parent))
			return -1;
		return id;
	}
	if (reserve(h, true) < 0)
		return -1;
	n = copy(name);
	if (parent)
		p = copy(parent);
	if (!n || (parent && !p)) {
		free(n);
		free(p);
		return -1;
	}
	id = (int)h->ntypes;
	t = &h->types[h->ntypes++];
	t->name = n;
	t->parent_name = p;
	t->field = f;
	t->parent = p ? resolve(h, f, p) : -1;
	add_spelling(h, f, n, id);
	return id;
}

int hierarchy_alias(struct hierarchy *h, size_t field, const char *alias,
		    const char *target)
{
	unsigned f = (unsigned)field;
	int id, s;
	char *a;

	if (!h || field >= FIELD_MAX || !name_ok(alias) || !target)
		return -1;
	id = hierarchy_find(h, field, target);
	if (id < 0)
		return -1;
	s = lookup(h, f, alias);
	if (s >= 0)
		return h->spell[s].id == id ? 0 : -1;
	if (reserve(h, false) < 0)
		return -1;
	a = copy(alias);
	if (!a)
		return -1;
	add_spelling(h, f, a, id);
	return 0;
}

int hierarchy_check(const struct hierarchy *h, const char **missing)
{
	if (!h)
		return 0;
	for (size_t i = 0; i < h->ntypes; i++) {
		const struct type *t = &h->types[i];

		if (t->parent_name && t->parent < 0 &&
		    resolve(h, t->field, t->parent_name) < 0) {
			if (missing)
				*missing = t->parent_name;
			return -1;
		}
	}
	return 0;
}

int hierarchy_find(const struct hierarchy *h, size_t field, const char *name)
{
	if (!h || field >= FIELD_MAX || !name_ok(name))
		return -1;
	return resolve(h, (unsigned)field, name);
}

const char *hierarchy_spelling(const struct hierarchy *h, size_t field,
			       const char *name)
{
	int s;

	if (!h || field >= FIELD_MAX || !name_ok(name))
		return NULL;
	s = lookup(h, (unsigned)field, name);
	return s < 0 ? NULL : h->spell[s].text;
}

const char *hierarchy_name(const struct hierarchy *h, int id)
{
	if (!h || id < 0 || (size_t)id >= h->ntypes)
		return NULL;
	return h->types[id].name;
}

/* The parent of type id, resolving a parent declared after it; -1 for a
 * root or a parent still unknown. */
static int parent_of(const struct hierarchy *h, int id)
{
	const struct type *t = &h->types[id];

	if (t->parent >= 0 || !t->parent_name)
		return t->parent;
	return resolve(h, t->field, t->parent_name);
}

bool hierarchy_is_a(const struct hierarchy *h, int id, int ancestor)
{
	if (!h || id < 0 || ancestor < 0 || (size_t)id >= h->ntypes ||
	    (size_t)ancestor >= h->ntypes)
		return false;
	/* An acyclic chain has at most ntypes members: stop there on cycles. */
	for (size_t steps = 0; steps < h->ntypes && id >= 0; steps++) {
		if (id == ancestor)
			return true;
		id = parent_of(h, id);
	}
	return false;
}

/*
 * Case-insensitive Levenshtein distance between a (any length) and b (at
 * most NAME_MAX_LEN bytes). Gives up and returns bound + 1 as soon as the
 * distance is known to exceed bound.
 */
static unsigned distance(const char *a, const char *b, size_t blen,
			 unsigned bound)
{
	unsigned row[NAME_MAX_LEN + 1];

	for (size_t j = 0; j <= blen; j++)
		row[j] = (unsigned)j;
	for (size_t i = 0; a[i]; i++) {
		unsigned diag = row[0], least;
		int ca = lower((unsigned char)a[i]);

		row[0] = (unsigned)i + 1;
		least = row[0];
		for (size_t j = 1; j <= blen; j++) {
			unsigned up = row[j];
			unsigned best =
				diag + (ca != lower((unsigned char)b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
			if (best < least)
				least = best;
		}
		if (least > bound)
			return bound + 1;
	}
	return row[blen];
}

struct candidate {
	unsigned dist;
	bool sub; /* one contains the other */
	const char *text;
};

/* Whether candidate x ranks before y. */
static bool before(const struct candidate *x, const struct candidate *y)
{
	int c;

	if (x->dist != y->dist)
		return x->dist < y->dist;
	if (x->sub != y->sub)
		return x->sub;
	c = casecmp(x->text, y->text);
	return c ? c < 0 : strcmp(x->text, y->text) < 0;
}

size_t hierarchy_suggest(const struct hierarchy *h, size_t field,
			 const char *name, const char **out, size_t max)
{
	struct candidate *best;
	size_t n = 0, qlen;

	if (!h || field >= FIELD_MAX || !name || !out || !max || !h->nspell)
		return 0;
	if (max > h->nspell)
		max = h->nspell;
	best = malloc(max * sizeof(*best));
	if (!best)
		return 0;
	qlen = strlen(name);
	for (size_t i = 0; i < h->nspell; i++) {
		const struct spelling *s = &h->spell[i];
		struct candidate c;
		size_t slen, k;

		if (s->field != (unsigned)field)
			continue;
		slen = strlen(s->text);
		c.dist = distance(name, s->text, slen,
				  n == max ? best[n - 1].dist : UINT_MAX - 1);
		c.sub = casecontains(s->text, slen, name, qlen) ||
			casecontains(name, qlen, s->text, slen);
		c.text = s->text;
		if (n == max && !before(&c, &best[n - 1]))
			continue;
		/* Insert in order, dropping the last when full. */
		k = n < max ? n++ : n - 1;
		while (k > 0 && before(&c, &best[k - 1])) {
			best[k] = best[k - 1];
			k--;
		}
		best[k] = c;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = best[i].text;
	free(best);
	return n;
}

size_t hierarchy_count(const struct hierarchy *h)
{
	return h ? h->ntypes : 0;
}
