/* A cluster's Open MPI hostfile: rendered from its nodes' addresses (one
 * line per address, with the slots of every node there), and written
 * whole where commands on this machine read it (CCLFS_HOSTFILE). */
#include "lifecycle/cluster_hostfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One address of the hostfile: where it first appears, its slots. */
struct cluster_host {
	const char *address;
	size_t first;
	int slots;
};

static int cluster_host_by_address(const void *a, const void *b)
{
	const struct cluster_host *x = a, *y = b;
	int c = strcmp(x->address, y->address);

	return c ? c : (x->first > y->first) - (x->first < y->first);
}

static int cluster_host_by_first(const void *a, const void *b)
{
	const struct cluster_host *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

void cluster_hostfile(const struct cluster *c, struct cluster_text *t)
{
	/* Open MPI refuses a host named twice: nodes that share an address
	 * (every local node is this machine) are one line with all their
	 * slots, where the address first appears. */
	struct cluster_host *h = calloc(c->nnodes ? c->nnodes : 1, sizeof(*h));
	size_t n = 0, m = 0;

	if (!h)
		return;
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].pn.rank >= 0)
			h[n++] = (struct cluster_host){
				.address = *c->nodes[i].pn.address
						   ? c->nodes[i].pn.address
						   : "localhost",
				.first = i,
				.slots = c->process_count,
			};
	qsort(h, n, sizeof(*h), cluster_host_by_address);
	for (size_t i = 0; i < n; i++) {
		if (m && strcmp(h[m - 1].address, h[i].address) == 0)
			h[m - 1].slots += h[i].slots;
		else
			h[m++] = h[i];
	}
	qsort(h, m, sizeof(*h), cluster_host_by_first);
	for (size_t i = 0; i < m; i++)
		cluster_printf(t, "%s slots=%d\n", h[i].address, h[i].slots);
	free(h);
}

int cluster_write_hostfile(struct model *m, struct cluster *c, const char *dir,
			   unsigned seq)
{
	struct cluster_text t = {0};
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
	FILE *f;
	int rc = -1;

	/* Replaced whole, so a command reading it never sees half. */
	(void)m;
	cluster_hostfile(c, &t);
	snprintf(path, sizeof(path), "%s/hostfile", dir);
	snprintf(tmp, sizeof(tmp), "%s/.hostfile.%u", dir, seq);
	f = fopen(tmp, "we");
	if (f) {
		if (t.buf)
			fwrite(t.buf, 1, t.len, f);
		if (fclose(f) == 0 && rename(tmp, path) == 0)
			rc = 0;
		else
			unlink(tmp);
	}
	free(t.buf);
	return rc;
}
