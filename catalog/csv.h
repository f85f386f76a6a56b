/* A reader of the catalog's CSV files: comma-separated rows of plain
 * fields (no quoting), over a buffer in memory. */
#ifndef CCLFS_CATALOG_CSV_H
#define CCLFS_CATALOG_CSV_H

#include <stddef.h>

#define CSV_FIELDS_MAX 32
#define CSV_LINE_MAX   1024

struct csv {
	const char *p, *end;
	size_t lineno;
	char line[CSV_LINE_MAX];
	const char *field[CSV_FIELDS_MAX];
	size_t count; /* fields of the current row */
};

void csv_open(struct csv *c, const char *data, size_t size);

/* Read the next row: 1, 0 at the end, or -1 for a line that is too long,
 * quoted or has too many fields. Empty lines are skipped. */
int csv_next(struct csv *c);

/* The index of column `name` in the current row (the header), or -1. */
int csv_column(const struct csv *c, const char *name);

#endif
