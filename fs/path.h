/* Paths of the mounted tree: what a path names (root, README, contracts/,
 * a contract, one of its folders or files, clusters/, catalog/), from its
 * shape alone; whether a named contract exists is the model's business. */
#ifndef CCLFS_FS_PATH_H
#define CCLFS_FS_PATH_H

#include "lifecycle/contract.h"

enum fspath_kind {
	FSPATH_ROOT,
	FSPATH_README,
	FSPATH_COSTS, /* costs: what every cluster has cost */
	FSPATH_CONTRACTS,
	FSPATH_CONTRACT,      /* contracts/NAME */
	FSPATH_CONTRACT_DIR,  /* contracts/NAME/{manager,worker,...} */
	FSPATH_CONTRACT_FILE, /* a file of the contract schema */
	FSPATH_CLUSTERS,
	FSPATH_CATALOG,
	FSPATH_CATALOG_PROVIDER,	/* catalog/PROVIDER */
	FSPATH_CATALOG_TYPE,		/* catalog/PROVIDER/TYPE */
	FSPATH_CATALOG_FILE,		/* catalog/PROVIDER/TYPE/FEATURE */
	FSPATH_CATALOG_REFRESH,		/* catalog/PROVIDER/refresh */
	FSPATH_CATALOG_REGIONS,		/* catalog/regions */
	FSPATH_CATALOG_REGION_PROVIDER, /* catalog/regions/PROVIDER */
	FSPATH_CATALOG_REGION,		/* catalog/regions/PROVIDER/REGION */
	FSPATH_CATALOG_REGION_TYPE,	/* .../REGION/TYPE (symlink) */
	FSPATH_CONTRACT_LINK,		/* contracts/NAME/clusters/HANDLE */
	FSPATH_CLUSTER,			/* clusters/HANDLE */
	FSPATH_CLUSTER_CONTRACT,	/* clusters/HANDLE/contract (symlink) */
	FSPATH_CLUSTER_FILE,		/* clusters/HANDLE/FILE */
	FSPATH_CLUSTER_NODES,		/* clusters/HANDLE/nodes */
	FSPATH_NODE,			/* clusters/HANDLE/nodes/NODE */
	FSPATH_NODE_FILE,		/* clusters/HANDLE/nodes/NODE/FILE */
	FSPATH_NODE_FILES, /* clusters/HANDLE/nodes/NODE/files[/REL] */
};

#define FSPATH_CATALOG_NAME_MAX 127

struct fspath {
	enum fspath_kind kind;
	char contract[CONTRACT_NAME_MAX + 1];
	enum contract_dir dir; /* FSPATH_CONTRACT_DIR */
	int field;	       /* FSPATH_CONTRACT_FILE */
	/* FSPATH_CATALOG_*: the parts of the path below catalog/ */
	char provider[FSPATH_CATALOG_NAME_MAX + 1];
	char type[FSPATH_CATALOG_NAME_MAX + 1];
	char feature[FSPATH_CATALOG_NAME_MAX + 1];
	char region[FSPATH_CATALOG_NAME_MAX + 1];
	/* clusters: the handle, the node folder and the file */
	char handle[CONTRACT_NAME_MAX + 1];
	char node[16];
	char file[32];
	/* FSPATH_NODE_FILES: the path below files/, pointing into the parsed
	 * path (any length: the provider resolves it step by step). */
	const char *rel;
};

/* The entries of the mount's root, in the order a listing shows them. */
struct fspath_root_entry {
	const char *name;
	enum fspath_kind kind;
};
extern const struct fspath_root_entry fspath_root[];
extern const size_t fspath_nroot;

/* Parse an absolute path of the mount. Returns 0, or -ENOENT when no
 * entry of the tree can have this path. */
int fspath_parse(const char *path, struct fspath *out);

/* Split "/a/b/leaf" into a parsed parent and the leaf name. Returns 0, or
 * -ENOENT when the parent cannot exist. */
int fspath_parse_parent(const char *path, struct fspath *parent,
			const char **leaf);

#endif
