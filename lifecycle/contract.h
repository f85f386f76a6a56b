/* The contract schema: every file a contract directory holds (values,
 * triggers, generated files), where it sits, its default, and the
 * validation and normal form of the values written to it. */
#ifndef CCLFS_LIFECYCLE_CONTRACT_H
#define CCLFS_LIFECYCLE_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

#define CONTRACT_NAME_MAX  64
#define CONTRACT_VALUE_MAX 4096

/* The folders of a contract; CONTRACT_DIR_TOP is the contract itself. */
enum contract_dir {
	CONTRACT_DIR_TOP,
	CONTRACT_DIR_MANAGER,
	CONTRACT_DIR_WORKER,
	CONTRACT_DIR_CONFIG,
	CONTRACT_DIR_CLUSTERS,
	CONTRACT_DIR_COUNT,
};

enum contract_file {
	CONTRACT_FILE_VALUE,	 /* 0644, holds a value */
	CONTRACT_FILE_TRIGGER,	 /* 0644, fires on touch or write */
	CONTRACT_FILE_GENERATED, /* 0444, built by cclfs */
};

/* What a file does, for the few files the model treats specially. */
enum contract_role {
	CONTRACT_ROLE_PLAIN,
	CONTRACT_ROLE_CLUSTER_TYPE,
	CONTRACT_ROLE_ASSUMPTION, /* an instance assumption, at any level */
	CONTRACT_ROLE_RESOLVE,
	CONTRACT_ROLE_DEPLOY,
	CONTRACT_ROLE_RESOLUTION,
	CONTRACT_ROLE_CANDIDATES,
	CONTRACT_ROLE_ERROR,
	CONTRACT_ROLE_POLICY,	/* config/resolve_policy */
	CONTRACT_ROLE_PROVIDER, /* config/ read by a provider (imageid...) */
};

struct contract_field {
	const char *name; /* file name */
	const char *path; /* path inside the contract: "manager/storage_size" */
	const char *def;  /* default value ("" = none) */
	enum contract_dir dir;
	enum contract_file file;
	enum contract_role role;
	int type;	/* validator, private to contract.c */
	int assumption; /* index into assumption_fields, or -1 */
	/* For the mounting user only (no group or other bits): values that
	 * may hold secrets (config/environment) and the error that may quote
	 * them. */
	bool owner_only;
	/* Handed to the providers in the node options at deploy (their own
	 * config/ keys, and cclfs's that clouds read: market, zone...). */
	bool to_provider;
};

/* The schema, in the order readdir lists it. Subfolders are entries of
 * their own (see contract_dir_name), not fields. */
size_t contract_field_count(void);
const struct contract_field *contract_field_at(size_t i);
/* Index of the field `name` in folder `dir`, or -1. */
int contract_field_find(enum contract_dir dir, const char *name);
/* Index of the field at path "node_count" / "config/user", or -1. */
int contract_field_by_path(const char *path);

/* "" for the top, then "manager", "worker", "config", "clusters". */
const char *contract_dir_name(enum contract_dir dir);
/* The folder called `name` inside a contract, or -1. */
int contract_dir_find(const char *name);

/* Whether a user-given name (contract or cluster) is acceptable:
 * [A-Za-z0-9._-]{1,64}, and not "." or "..". */
bool contract_name_valid(const char *name);

/* Check a name written to deploy (surrounding blanks ignored): 0 with the
 * name in out ("" when none was given), or -EINVAL with why in err. */
int contract_cluster_name(const char *text, size_t len, char *out,
			  size_t outlen, char *err, size_t errlen);

/* Whether the n bytes at s are an environment variable's name:
 * [A-Za-z_][A-Za-z0-9_]*. */
bool contract_env_name_valid(const char *s, size_t n);

/*
 * Validate `len` bytes written to value field f and write its normal form
 * into out (surrounding whitespace and one trailing newline dropped;
 * empty = the default; config/environment keeps one NAME=VALUE per line).
 * Returns 0, or -errno (EINVAL, EFBIG) with one plain
 * sentence about the value in err (the caller prefixes the file).
 */
int contract_normalise(const struct contract_field *f, const char *text,
		       size_t len, char *out, size_t outlen, char *err,
		       size_t errlen);

#endif
