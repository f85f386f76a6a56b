/* An open directory's listing of files/: the entries of one pass, with
 * their attributes, in one growing array; a failed add marks the pass
 * incomplete, so that it is read again rather than shown short. */
#include "fs/listing.h"

#include <stdlib.h>
#include <string.h>

struct listing_entry {
	char *name;
	bool has_st;
	struct stat st;
};

struct listing {
	struct listing_entry *e;
	size_t n, cap;
	bool filled, broken;
};

struct listing *listing_new(void)
{
	return calloc(1, sizeof(struct listing));
}

void listing_clear(struct listing *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->e[i].name);
	ls->n = 0;
	ls->filled = ls->broken = false;
}

void listing_free(struct listing *ls)
{
	if (!ls)
		return;
	listing_clear(ls);
	free(ls->e);
	free(ls);
}

int listing_add(void *ctx, const char *name, const struct stat *st)
{
	struct listing *ls = ctx;
	struct listing_entry *e;

	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 64;
		struct listing_entry *ne = realloc(ls->e, cap * sizeof(*ne));

		if (!ne) {
			ls->broken = true;
			return 1;
		}
		ls->e = ne;
		ls->cap = cap;
	}
	e = &ls->e[ls->n];
	e->name = strdup(name);
	if (!e->name) {
		ls->broken = true;
		return 1;
	}
	e->has_st = st != NULL;
	if (st)
		e->st = *st;
	ls->n++;
	return 0;
}

void listing_done(struct listing *ls, bool ok)
{
	ls->filled = ok && !ls->broken;
}

bool listing_filled(const struct listing *ls)
{
	return ls->filled;
}

size_t listing_count(const struct listing *ls)
{
	return ls->n;
}

const char *listing_entry(const struct listing *ls, size_t i,
			  const struct stat **st)
{
	*st = ls->e[i].has_st ? &ls->e[i].st : NULL;
	return ls->e[i].name;
}
