/* Paths of the mounted tree: what a path names (root, README, contracts/,
 * a contract, one of its folders or files, clusters/, catalog/), from its
 * shape alone; whether a named contract exists is the model's business. */
#include "fs/path.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define FSPATH_PARTS 5

/* Split path into at most FSPATH_PARTS components (copied into buf). */
static int fspath_split(const char *path, char *buf, size_t buflen, char **part)
{
	int n = 0;
	char *save = NULL, *tok;

	if (snprintf(buf, buflen, "%s", path) >= (int)buflen)
		return -ENOENT;
	for (tok = strtok_r(buf, "/", &save); tok;
	     tok = strtok_r(NULL, "/", &save)) {
		if (n == FSPATH_PARTS)
			return -ENOENT;
		part[n++] = tok;
	}
	return n;
}

/* clusters/HANDLE[/FILE | /contract | /nodes[/NODE[/FILE]]] (n >= 2). */
static int fspath_cluster(char **part, int n, struct fspath *out)
{
	if (snprintf(out->handle, sizeof(out->handle), "%s", part[1]) >=
	    (int)sizeof(out->handle))
		return -ENOENT;
	if (n == 2) {
		out->kind = FSPATH_CLUSTER;
		return 0;
	}
	if (strcmp(part[2], "nodes") != 0) {
		if (n != 3 || snprintf(out->file, sizeof(out->file), "%s",
				       part[2]) >= (int)sizeof(out->file))
			return -ENOENT;
		out->kind = strcmp(part[2], "contract") == 0
				    ? FSPATH_CLUSTER_CONTRACT
				    : FSPATH_CLUSTER_FILE;
		return 0;
	}
	if (n == 3) {
		out->kind = FSPATH_CLUSTER_NODES;
		return 0;
	}
	if (snprintf(out->node, sizeof(out->node), "%s", part[3]) >=
	    (int)sizeof(out->node))
		return -ENOENT;
	if (n == 4) {
		out->kind = FSPATH_NODE;
		return 0;
	}
	if (snprintf(out->file, sizeof(out->file), "%s", part[4]) >=
	    (int)sizeof(out->file))
		return -ENOENT;
	out->kind = FSPATH_NODE_FILE;
	return 0;
}

/* clusters/H/nodes/N/files[/REL]: returns 1 and fills out when path is
 * one, with REL of any depth. */
static int fspath_files(const char *path, struct fspath *out)
{
	const char *p = path, *part[6];
	size_t len[6];
	int n = 0;

	while (n < 6 && *p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		part[n] = p;
		len[n] = strcspn(p, "/");
		p += len[n];
		n++;
	}
	if (n < 5 || len[0] != 8 || strncmp(part[0], "clusters", 8) != 0 ||
	    len[2] != 5 || strncmp(part[2], "nodes", 5) != 0 || len[4] != 5 ||
	    strncmp(part[4], "files", 5) != 0 ||
	    len[1] >= sizeof(out->handle) || len[3] >= sizeof(out->node))
		return 0;
	memcpy(out->handle, part[1], len[1]);
	out->handle[len[1]] = '\0';
	memcpy(out->node, part[3], len[3]);
	out->node[len[3]] = '\0';
	p = part[4] + len[4];
	while (*p == '/')
		p++;
	out->rel = p;
	out->kind = FSPATH_NODE_FILES;
	return 1;
}

/* catalog/PROVIDER[/refresh | /TYPE[/FEATURE]] and
 * catalog/regions[/PROVIDER[/REGION[/TYPE]]] (n >= 2). No provider is
 * called "regions" and no type "refresh". */
static int fspath_catalog(char **part, int n, struct fspath *out)
{
	bool regions = strcmp(part[1], "regions") == 0;
	char *plain[4] = {out->provider, out->type, out->feature, NULL};
	char *by_region[4] = {NULL, out->provider, out->region, out->type};
	static const enum fspath_kind plain_kind[] = {FSPATH_CATALOG_PROVIDER,
						      FSPATH_CATALOG_TYPE,
						      FSPATH_CATALOG_FILE};
	static const enum fspath_kind region_kind[] = {
		FSPATH_CATALOG_REGIONS, FSPATH_CATALOG_REGION_PROVIDER,
		FSPATH_CATALOG_REGION, FSPATH_CATALOG_REGION_TYPE};
	char **dst = regions ? by_region : plain;

	if (n - 1 > (regions ? 4 : 3))
		return -ENOENT;
	for (int i = 1; i < n; i++)
		if (dst[i - 1] &&
		    snprintf(dst[i - 1], FSPATH_CATALOG_NAME_MAX + 1, "%s",
			     part[i]) > FSPATH_CATALOG_NAME_MAX)
			return -ENOENT;
	out->kind = regions ? region_kind[n - 2] : plain_kind[n - 2];
	if (out->kind == FSPATH_CATALOG_TYPE &&
	    strcmp(out->type, "refresh") == 0)
		out->kind = FSPATH_CATALOG_REFRESH;
	return 0;
}

const struct fspath_root_entry fspath_root[] = {
	{"README", FSPATH_README},	 {"costs", FSPATH_COSTS},
	{"contracts", FSPATH_CONTRACTS}, {"clusters", FSPATH_CLUSTERS},
	{"catalog", FSPATH_CATALOG},
};
const size_t fspath_nroot = sizeof(fspath_root) / sizeof(fspath_root[0]);

int fspath_parse(const char *path, struct fspath *out)
{
	char buf[512];
	char *part[FSPATH_PARTS] = {0};
	int n = fspath_split(path, buf, sizeof(buf), part);
	int d, f;

	memset(out, 0, sizeof(*out));
	if (fspath_files(path, out))
		return 0;
	if (n < 0)
		return n;
	if (n == 0) {
		out->kind = FSPATH_ROOT;
		return 0;
	}
	if (n == 1) {
		for (size_t i = 0; i < fspath_nroot; i++) {
			if (strcmp(part[0], fspath_root[i].name) == 0) {
				out->kind = fspath_root[i].kind;
				return 0;
			}
		}
		return -ENOENT;
	}
	if (strcmp(part[0], "clusters") == 0)
		return fspath_cluster(part, n, out);
	if (strcmp(part[0], "catalog") == 0)
		return fspath_catalog(part, n, out);
	if (strcmp(part[0], "contracts") != 0 ||
	    strlen(part[1]) > CONTRACT_NAME_MAX)
		return -ENOENT;
	snprintf(out->contract, sizeof(out->contract), "%s", part[1]);
	if (n == 2) {
		out->kind = FSPATH_CONTRACT;
		return 0;
	}
	d = contract_dir_find(part[2]);
	if (d == CONTRACT_DIR_CLUSTERS && n == 4) {
		if (snprintf(out->handle, sizeof(out->handle), "%s", part[3]) >=
		    (int)sizeof(out->handle))
			return -ENOENT;
		out->kind = FSPATH_CONTRACT_LINK;
		return 0;
	}
	if (n == 5)
		return -ENOENT;
	if (n == 3) {
		if (d >= 0) {
			out->kind = FSPATH_CONTRACT_DIR;
			out->dir = (enum contract_dir)d;
			return 0;
		}
		f = contract_field_find(CONTRACT_DIR_TOP, part[2]);
	} else {
		if (d < 0)
			return -ENOENT;
		f = contract_field_find((enum contract_dir)d, part[3]);
	}
	if (f < 0)
		return -ENOENT;
	out->kind = FSPATH_CONTRACT_FILE;
	out->field = f;
	return 0;
}

int fspath_parse_parent(const char *path, struct fspath *parent,
			const char **leaf)
{
	char buf[4200];
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash || !slash[1])
		return -ENOENT;
	n = (size_t)(slash - path);
	if (n >= sizeof(buf))
		return -ENOENT;
	memcpy(buf, path, n);
	buf[n] = '\0';
	*leaf = slash + 1;
	return fspath_parse(n ? buf : "/", parent);
}
