/* A reader of the catalog's CSV files: comma-separated rows of plain
 * fields (no quoting), over a buffer in memory. */
#include "catalog/csv.h"

#include <string.h>

void csv_open(struct csv *c, const char *data, size_t size)
{
	memset(c, 0, sizeof(*c));
	c->p = data;
	c->end = data + size;
}

int csv_next(struct csv *c)
{
	for (;;) {
		const char *nl;
		size_t n;
		char *s;

		if (c->p >= c->end)
			return 0;
		nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
		n = (size_t)((nl ? nl : c->end) - c->p);
		c->lineno++;
		if (n >= sizeof(c->line))
			return -1;
		memcpy(c->line, c->p, n);
		c->line[n] = '\0';
		c->p = nl ? nl + 1 : c->end;
		c->line[strcspn(c->line, "\r")] = '\0';
		n = strlen(c->line);
		if (n == 0)
			continue;
		if (memchr(c->line, '"', n))
			return -1;
		c->count = 0;
		s = c->line;
		for (;;) {
			char *comma = strchr(s, ',');

			if (c->count == CSV_FIELDS_MAX)
				return -1;
			c->field[c->count++] = s;
			if (!comma)
				break;
			*comma = '\0';
			s = comma + 1;
		}
		return 1;
	}
}

int csv_column(const struct csv *c, const char *name)
{
	for (size_t i = 0; i < c->count; i++)
		if (strcmp(c->field[i], name) == 0)
			return (int)i;
	return -1;
}
