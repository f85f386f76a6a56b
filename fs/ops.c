/* The filesystem operations: every FUSE callback of the tree, mapping
 * paths to the model and enforcing how each kind of file behaves. */
#define FUSE_USE_VERSION 314
#include "fs/ops.h"

#include "fs/files.h"
#include "fs/inval.h"
#include "fs/listing.h"
#include "fs/opened.h"
#include "fs/passthrough.h"
#include "fs/path.h"
#include "fs/readme.h"
#include "fs/readpipe.h"
#include "fs/watch.h"
#include "lifecycle/model.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Largest buffer one descriptor collects before a value is refused: a
 * value plus generous surrounding whitespace. */
#define FS_WRITE_MAX (CONTRACT_VALUE_MAX + 1024)
/* Largest command written to an exec file. */
#define FS_EXEC_MAX ((size_t)128 * 1024) /* sh -c takes one argument */

/* One open file: what it names, the snapshot read from, and the bytes
 * written through it so far (validated again as a whole at each write). */
struct fshandle {
	struct opened open; /* given out to the kernel */
	struct fspath path;
	int flags;
	char *snap;
	size_t snaplen;
	char *buf;
	size_t len;
	int fd;		/* snapshot kept in a file (command output), or -1 */
	off_t exec_off; /* file offset where this descriptor's own command
			   output starts (reads after an exec) */
	char *prior;	/* the value before this descriptor's first write */
	bool changed;	/* a write through it was committed */
	bool wrote;	/* nodes/N/files/: written through it */
	size_t readto;	/* end of what was read of the snapshot */
	bool stale;	/* the file changed since its snapshot (a poll saw
			   it): the next read from offset 0 takes a new one */
	int refused;	/* -errno of a refused write: the rest is refused too */
	struct model_files *files;   /* nodes/N/files/: the open node file */
	uint64_t pfh;		     /* and the provider's handle of it */
	struct passthrough_file *pt; /* the kernel reads and writes it */
};

static struct fsctx *fs_ctx(void)
{
	return fuse_get_context()->private_data;
}

/*
 * End of a request that may have changed other files (an error file, a
 * resolution): their cached attributes are dropped before it returns, so
 * `stat` right after tells the truth. The file the request was made on is
 * refreshed by the kernel itself and is not waited for (inval_serve).
 * With one thread (-s) nothing is waited for: a drop may make the kernel
 * ask this very thread (a lookup of a name whose time ran out on the way
 * to it, the write-back of a page dirty through a shared mapping).
 */
static int fs_done(int rc)
{
	if (!fs_ctx()->singlethread)
		inval_flush(fs_ctx()->inval);
	inval_serve(NULL);
	return rc;
}

static void fs_time(struct timespec *ts, int64_t ns)
{
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
}

static void fs_fill(struct stat *st, mode_t mode, nlink_t nlink, size_t size,
		    int64_t mtime_ns)
{
	struct fsctx *fs = fs_ctx();

	memset(st, 0, sizeof(*st));
	st->st_mode = mode;
	st->st_nlink = nlink;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	fs_time(&st->st_mtim, mtime_ns);
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static int64_t fs_mounted_ns(void)
{
	struct timespec *t = &fs_ctx()->mounted;

	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* The modes tell who may do what, and the kernel enforces them
 * (default_permissions): with allow_other, other users read what a
 * contract or cluster is, never what commands printed or secrets, and
 * write nothing. */
static mode_t fs_file_mode(int field)
{
	const struct contract_field *f = contract_field_at((size_t)field);
	mode_t mode = f->file == CONTRACT_FILE_GENERATED ? 0444 : 0644;

	return S_IFREG | (f->owner_only ? mode & 0700 : mode);
}

/* --- nodes/N/files/: the node's working directory, passed through --- */

static struct model_files *fs_files(const struct fspath *p, int *err)
{
	return fs_files_get(fs_ctx()->model, p->handle, p->node, err);
}

/* Run `call` on the node of p, as an expression using f; -errno. */
#define FS_FILES(p, call)                                                      \
	({                                                                     \
		int err_;                                                      \
		struct model_files *f = fs_files(p, &err_);                    \
		if (f) {                                                       \
			err_ = (call);                                         \
			model_files_put(f);                                    \
		}                                                              \
		err_;                                                          \
	})

/* The I/O size that cp and others take from st_blksize: twice the 128 KiB
 * cp moves at a time on a disk (of 4 KiB), which halves the write requests
 * of a copy into an SSH node (written-only files bypass the page cache, so
 * each write is a request through the daemon). Larger sizes, up to
 * FUSE's largest request (1 MiB), were measured no faster
 * (docs/performance.md, "I/O size"). */
#define FS_FILES_BLKSIZE (256 << 10)

static int fs_files_blksize(int rc, struct stat *st)
{
	if (rc == 0 && S_ISREG(st->st_mode))
		st->st_blksize = FS_FILES_BLKSIZE;
	return rc;
}

/* Owners and modes under files/ are the provider's: a local node's as they
 * are on disk (so that, with allow_other, the kernel lets another user do
 * there what the disk beneath allows), a remote node's as the mounting
 * user's. */
static int fs_files_stat(const struct fspath *p, struct stat *st)
{
	return fs_files_blksize(FS_FILES(p, model_files_getattr(f, p->rel, st)),
				st);
}

static bool fs_writable(const struct fspath *p)
{
	if (p->kind == FSPATH_CLUSTER_FILE)
		return model_cluster_file_writable(p->file);
	if (p->kind == FSPATH_NODE_FILE)
		return model_node_file_writable(p->file);
	if (p->kind == FSPATH_CATALOG_REFRESH)
		return true;
	return p->kind == FSPATH_CONTRACT_FILE &&
	       contract_field_at((size_t)p->field)->file !=
		       CONTRACT_FILE_GENERATED;
}

/* Where a path's refusals are explained: the contract or cluster it is in,
 * and the path below it ("nodes/0/exec", "config/user"); `leaf` is a name
 * below p that an operation wanted to create, or NULL. */
static const char *fs_refusal_place(const struct fspath *p, const char *leaf,
				    char *rel, size_t rellen)
{
	const char *sep = leaf ? "/" : "", *name = leaf ? leaf : "";

	switch (p->kind) {
	case FSPATH_CONTRACT:
		snprintf(rel, rellen, "%s", leaf ? leaf : ".");
		return p->contract;
	case FSPATH_CONTRACT_DIR:
		snprintf(rel, rellen, "%s%s%s", contract_dir_name(p->dir), sep,
			 name);
		return p->contract;
	case FSPATH_CONTRACT_FILE:
		snprintf(rel, rellen, "%s",
			 contract_field_at((size_t)p->field)->path);
		return p->contract;
	case FSPATH_CONTRACT_LINK:
		snprintf(rel, rellen, "clusters/%s", p->handle);
		return p->contract;
	case FSPATH_CLUSTER:
		snprintf(rel, rellen, "%s", name);
		return p->handle;
	case FSPATH_CLUSTER_CONTRACT:
		snprintf(rel, rellen, "contract");
		return p->handle;
	case FSPATH_CLUSTER_FILE:
		snprintf(rel, rellen, "%s", p->file);
		return p->handle;
	case FSPATH_CLUSTER_NODES:
		snprintf(rel, rellen, "nodes%s%s", sep, name);
		return p->handle;
	case FSPATH_NODE:
		snprintf(rel, rellen, "nodes/%s%s%s", p->node, sep, name);
		return p->handle;
	case FSPATH_NODE_FILE:
		snprintf(rel, rellen, "nodes/%s/%s", p->node, p->file);
		return p->handle;
	default:
		return NULL;
	}
}

/* Refuse an operation on p (or on `leaf` below it) with errnum, saying why
 * in the nearest error file and the log: the contract's or the cluster's.
 * The root, README and catalog/ have no error file; the errno alone tells. */
static int fs_refuse(const struct fspath *p, const char *leaf, int errnum,
		     const char *why)
{
	char rel[CONTRACT_NAME_MAX + 320];
	const char *owner = fs_refusal_place(p, leaf, rel, sizeof(rel));

	if (!owner)
		return -errnum;
	if ((p->kind >= FSPATH_CONTRACT && p->kind <= FSPATH_CONTRACT_FILE) ||
	    p->kind == FSPATH_CONTRACT_LINK)
		return fs_done(model_contract_refuse(fs_ctx()->model, owner,
						     rel, errnum, why));
	return fs_done(
		model_cluster_refuse(fs_ctx()->model, owner, rel, errnum, why));
}

/* fs_refuse for an operation given a path or an open file. */
static int fs_refuse_at(const char *path, struct fuse_file_info *fi, int errnum,
			const char *why)
{
	struct fspath p;

	if (fi && fi->fh) {
		p = ((struct fshandle *)(uintptr_t)fi->fh)->path;
	} else {
		int rc = fspath_parse(path, &p);

		if (rc)
			return rc;
	}
	return fs_refuse(&p, NULL, errnum, why);
}

/* The sentences of the refusals common to contracts and clusters. */
static const char fs_why_readonly[] = "this file is read-only; cclfs writes it";
static const char fs_why_rename[] =
	"nothing in cclfs can be renamed; copy the values into a new contract "
	"instead";
static const char fs_why_modes[] =
	"the modes and owners of cclfs's own files tell what can be done with "
	"them and do not change";

/* catalog/PROVIDER/refresh and catalog/regions/... */
static int fs_stat_catalog_more(struct model *m, const struct fspath *p,
				struct stat *st)
{
	char *buf = NULL;
	size_t len = 0;
	int64_t ns = 0;
	int rc = 0;

	switch (p->kind) {
	case FSPATH_CATALOG_REFRESH:
		rc = model_catalog_refresh_read(m, p->provider, &buf, &len,
						&ns);
		if (rc == 0)
			fs_fill(st, S_IFREG | 0644, 1, len, ns);
		break;
	case FSPATH_CATALOG_REGION_PROVIDER:
		if (!model_catalog_region(m, p->provider, 0))
			return -ENOENT;
		fs_fill(st, S_IFDIR | 0755, 2, 0, model_catalog_ns(m));
		break;
	case FSPATH_CATALOG_REGION:
		if (!model_catalog_offered(m, p->provider, p->region, NULL))
			return -ENOENT;
		fs_fill(st, S_IFDIR | 0755, 2, 0, model_catalog_ns(m));
		break;
	case FSPATH_CATALOG_REGION_TYPE:
		/* One look-up, not the region's list: ls -l stats every link.
		 */
		if (!model_catalog_offered(m, p->provider, p->region, p->type))
			return -ENOENT;
		fs_fill(st, S_IFLNK | 0777, 1,
			strlen("../../../") + strlen(p->provider) + 1 +
				strlen(p->type),
			model_catalog_ns(m));
		break;
	default:
		rc = -ENOENT;
		break;
	}
	free(buf);
	return rc;
}

static int fs_stat_path(const struct fspath *p, struct stat *st)
{
	struct model *m = fs_ctx()->model;
	struct model_attr a;
	int rc = 0;

	switch (p->kind) {
	case FSPATH_ROOT:
		fs_fill(st, S_IFDIR | 0755, 5, 0, fs_mounted_ns());
		break;
	case FSPATH_COSTS:
		rc = model_costs_stat(m, &a);
		if (rc == 0)
			fs_fill(st, S_IFREG | 0444, 1, a.size,
				a.mtime_ns ? a.mtime_ns : fs_mounted_ns());
		break;
	case FSPATH_README:
		fs_fill(st, S_IFREG | 0444, 1, fsreadme_size, fs_mounted_ns());
		break;
	case FSPATH_CLUSTERS:
		model_clusters_stat(m, &a);
		fs_fill(st, S_IFDIR | 0755, 2, 0, a.mtime_ns);
		break;
	case FSPATH_CATALOG:
	case FSPATH_CATALOG_REGIONS:
		fs_fill(st, S_IFDIR | 0755, 2, 0, model_catalog_ns(m));
		break;
	case FSPATH_CONTRACTS:
		model_contracts_stat(m, &a);
		fs_fill(st, S_IFDIR | 0755, 2, 0, a.mtime_ns);
		break;
	case FSPATH_CONTRACT:
		rc = model_contract_stat(m, p->contract, &a);
		if (rc == 0)
			fs_fill(st, S_IFDIR | 0755, 2 + CONTRACT_DIR_COUNT - 1,
				0, a.mtime_ns);
		break;
	case FSPATH_CONTRACT_DIR:
		rc = model_contract_stat(m, p->contract, &a);
		if (rc == 0)
			fs_fill(st, S_IFDIR | 0755, 2, 0, a.mtime_ns);
		break;
	case FSPATH_CONTRACT_FILE:
		rc = model_file_stat(m, p->contract, p->field, &a);
		if (rc == 0)
			fs_fill(st, fs_file_mode(p->field), 1, a.size,
				a.mtime_ns);
		break;
	case FSPATH_CONTRACT_LINK: {
		char contract[CONTRACT_NAME_MAX + 1];

		if (model_cluster_contract(m, p->handle, contract,
					   sizeof(contract)) ||
		    strcmp(contract, p->contract) != 0)
			return -ENOENT;
		rc = model_cluster_stat(m, p->handle, &a);
		if (rc == 0)
			fs_fill(st, S_IFLNK | 0777, 1,
				strlen("../../../clusters/") +
					strlen(p->handle),
				a.mtime_ns);
		break;
	}
	case FSPATH_CLUSTER:
		rc = model_cluster_stat(m, p->handle, &a);
		if (rc == 0)
			fs_fill(st, S_IFDIR | 0755, 3, 0, a.mtime_ns);
		break;
	case FSPATH_CLUSTER_CONTRACT: {
		char contract[CONTRACT_NAME_MAX + 1];

		rc = model_cluster_contract(m, p->handle, contract,
					    sizeof(contract));
		if (rc == 0)
			rc = model_cluster_stat(m, p->handle, &a);
		if (rc == 0)
			fs_fill(st, S_IFLNK | 0777, 1,
				strlen("../../contracts/") + strlen(contract),
				a.mtime_ns);
		break;
	}
	case FSPATH_CLUSTER_NODES:
		rc = model_cluster_stat(m, p->handle, &a);
		if (rc == 0)
			fs_fill(st, S_IFDIR | 0755, 2, 0, a.mtime_ns);
		break;
	case FSPATH_NODE:
		rc = model_node_stat(m, p->handle, p->node, &a);
		if (rc == 0)
			fs_fill(st, S_IFDIR | 0755, 3, 0, a.mtime_ns);
		break;
	case FSPATH_CLUSTER_FILE:
	case FSPATH_NODE_FILE:
		rc = model_cluster_file_stat(
			m, p->handle,
			p->kind == FSPATH_NODE_FILE ? p->node : NULL, p->file,
			&a);
		if (rc == 0)
			fs_fill(st,
				S_IFREG | model_cluster_file_mode(
						  p->kind == FSPATH_NODE_FILE
							  ? p->node
							  : NULL,
						  p->file),
				1, a.size, a.mtime_ns);
		break;
	case FSPATH_NODE_FILES:
		return fs_files_stat(p, st);
	case FSPATH_CATALOG_PROVIDER:
		if (!model_catalog_type(m, p->provider, 0))
			return -ENOENT;
		fs_fill(st, S_IFDIR | 0755, 2, 0, model_catalog_ns(m));
		break;
	case FSPATH_CATALOG_TYPE:
		if (!model_catalog_type_exists(m, p->provider, p->type))
			return -ENOENT;
		fs_fill(st, S_IFDIR | 0755, 2, 0, model_catalog_ns(m));
		break;
	case FSPATH_CATALOG_FILE: {
		char *buf = NULL;
		size_t len = 0;

		rc = model_catalog_feature(m, p->provider, p->type, p->feature,
					   &buf, &len);
		free(buf);
		if (rc == 0)
			fs_fill(st, S_IFREG | 0444, 1, len,
				model_catalog_ns(m));
		break;
	}
	default:
		rc = fs_stat_catalog_more(m, p, st);
		break;
	}
	return rc;
}

/*
 * Inode numbers (use_ino): a node's file shows the one its file system
 * gives, so that two names of one file show one number (as tar, cp -a and
 * rsync -H expect); a file of the tree, or a node's file whose provider
 * tells none (SFTP), a hash of its path with the top bit set (the tree) or
 * the next one (files/), apart from any file system's numbers.
 */
static uint64_t fs_hash(const char *s, uint64_t h)
{
	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static void fs_ino(const char *dir, const char *name, bool files,
		   struct stat *st)
{
	uint64_t h = fs_hash(dir, 0xcbf29ce484222325ULL);

	if (st->st_ino) /* a node's file system's (the tree leaves 0) */
		return;
	if (name)
		h = fs_hash(name, strcmp(dir, "/") ? fs_hash("/", h) : h);
	h &= ~(3ULL << 62);
	st->st_ino = (ino_t)(h | (files ? 1ULL << 62 : 1ULL << 63));
}

static int fs_getattr_path(const char *path, struct stat *st,
			   struct fuse_file_info *fi)
{
	struct fspath p;
	int rc;

	if (fi && fi->fh) {
		struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;

		if (!h->files)
			return fs_stat_path(&h->path, st);
		rc = fs_files_blksize(
			model_files_fgetattr(h->files, h->pfh, st), st);
		if (rc == 0 && path)
			inval_note(fs_ctx()->inval, path, S_ISDIR(st->st_mode));
		return rc;
	}
	if (!path)
		return -ENOENT;
	if (fs_files_is_hidden_name(path)) {
		rc = fs_files_hidden_stat(path, st);
		if (rc != -ENOENT)
			return rc;
	}
	rc = fspath_parse(path, &p);
	if (rc)
		return rc;
	rc = fs_stat_path(&p, st);
	if (rc == 0 && p.kind == FSPATH_NODE_FILES)
		inval_note(fs_ctx()->inval, path, S_ISDIR(st->st_mode));
	return rc;
}

static int fs_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	struct fspath p;
	int rc = fs_getattr_path(path, st, fi);

	if (rc == 0 && path)
		fs_ino(path, NULL,
		       fspath_parse(path, &p) == 0 &&
			       p.kind == FSPATH_NODE_FILES,
		       st);
	return rc;
}

/*
 * Directory listings give each entry its position as offset (1, 2, ...)
 * and start after `off`: with real offsets libfuse hands the attributes of
 * readdirplus to the kernel, which then needs no lookup per entry.
 */
struct fs_lister {
	void *buf;
	fuse_fill_dir_t fill;
	off_t skip; /* entries before this position were sent already */
	off_t pos;  /* position of the next entry */
	bool full;
	const char *dir; /* the directory's path */
	bool files;	 /* under nodes/N/files/ */
};

/* Add one entry (st NULL: no attributes). Returns non-zero when full. */
static int fs_list_add(struct fs_lister *l, const char *name,
		       const struct stat *st)
{
	off_t pos = ++l->pos;
	struct stat with;

	if (pos <= l->skip)
		return 0;
	if (st) {
		with = *st;
		fs_ino(l->dir, name, l->files, &with);
		st = &with;
	}
	if (l->fill(l->buf, name, st, pos, st ? FUSE_FILL_DIR_PLUS : 0)) {
		l->full = true;
		return 1;
	}
	/* The kernel now holds the entry's attributes, given without a
	 * getattr: a command on the node must drop them too. */
	if (st && l->files && strcmp(name, ".") != 0 &&
	    strcmp(name, "..") != 0) {
		char buf[PATH_MAX], *full = buf;
		size_t n = strlen(l->dir);
		const char *sep = n && l->dir[n - 1] == '/' ? "" : "/";

		/* On the stack but for paths past PATH_MAX (listings are
		 * a hot path). */
		if (snprintf(buf, sizeof(buf), "%s%s%s", l->dir, sep, name) >=
			    (int)sizeof(buf) &&
		    asprintf(&full, "%s%s%s", l->dir, sep, name) < 0)
			full = NULL;
		if (full)
			inval_note(fs_ctx()->inval, full, S_ISDIR(st->st_mode));
		if (full != buf)
			free(full);
	}
	return 0;
}

static int fs_list_contract(void *ctx, const char *name,
			    const struct model_attr *a)
{
	struct stat st;

	fs_fill(&st, S_IFDIR | 0755, 2 + CONTRACT_DIR_COUNT - 1, 0,
		a->mtime_ns);
	return fs_list_add(ctx, name, &st);
}

static int fs_list_entry(struct fs_lister *l, const struct fspath *p,
			 const char *name)
{
	struct stat st;

	if (fs_stat_path(p, &st))
		return 0; /* vanished meanwhile: leave it out */
	return fs_list_add(l, name, &st);
}

static void fs_list_contract_dir(struct fs_lister *l, const struct fspath *dirp)
{
	enum contract_dir dir =
		dirp->kind == FSPATH_CONTRACT ? CONTRACT_DIR_TOP : dirp->dir;
	struct fspath p = *dirp;

	for (size_t f = 0; f < contract_field_count(); f++) {
		const struct contract_field *field = contract_field_at(f);

		if (field->dir != dir)
			continue;
		p.kind = FSPATH_CONTRACT_FILE;
		p.field = (int)f;
		if (fs_list_entry(l, &p, field->name))
			return;
	}
	if (dir != CONTRACT_DIR_TOP)
		return;
	for (int d = CONTRACT_DIR_TOP + 1; d < CONTRACT_DIR_COUNT; d++) {
		p.kind = FSPATH_CONTRACT_DIR;
		p.dir = (enum contract_dir)d;
		if (fs_list_entry(l, &p,
				  contract_dir_name((enum contract_dir)d)))
			return;
	}
}

/* Names gathered under the model's lock, to be listed (and stat'ed, which
 * takes the lock again) after it is released. */
struct fs_names {
	char (*v)[CONTRACT_NAME_MAX + 1];
	size_t n, cap;
};

static int fs_names_add(struct fs_names *names, const char *name)
{
	if (names->n == names->cap) {
		size_t cap = names->cap ? names->cap * 2 : 64;
		char(*v)[CONTRACT_NAME_MAX + 1] =
			realloc(names->v, cap * sizeof(*v));

		if (!v)
			return 1;
		names->v = v;
		names->cap = cap;
	}
	snprintf(names->v[names->n++], sizeof(*names->v), "%s", name);
	return 0;
}

static int fs_names_handle(void *ctx, const char *handle,
			   const struct model_attr *a)
{
	(void)a;
	return fs_names_add(ctx, handle);
}

static int fs_names_node(void *ctx, const char *node)
{
	return fs_names_add(ctx, node);
}

/* List the gathered names as entries of kind `kind` under p. */
static void fs_list_names(struct fs_lister *l, struct fspath p,
			  enum fspath_kind kind, struct fs_names *names)
{
	p.kind = kind;
	for (size_t i = 0; i < names->n; i++) {
		if (kind == FSPATH_NODE)
			snprintf(p.node, sizeof(p.node), "%s", names->v[i]);
		else
			snprintf(p.handle, sizeof(p.handle), "%s", names->v[i]);
		if (fs_list_entry(l, &p, names->v[i]))
			break;
	}
	free(names->v);
}

/* clusters/, clusters/H/, clusters/H/nodes/, clusters/H/nodes/N/, and
 * contracts/NAME/clusters/. */
static void fs_list_clusters(struct fs_lister *l, const struct fspath *dirp)
{
	struct model *m = fs_ctx()->model;
	struct fs_names names = {0};
	struct fspath p = *dirp;
	const char *name;

	switch (dirp->kind) {
	case FSPATH_CLUSTERS:
		model_clusters_list(m, NULL, fs_names_handle, &names);
		fs_list_names(l, p, FSPATH_CLUSTER, &names);
		break;
	case FSPATH_CONTRACT_DIR:
		model_clusters_list(m, dirp->contract, fs_names_handle, &names);
		fs_list_names(l, p, FSPATH_CONTRACT_LINK, &names);
		break;
	case FSPATH_CLUSTER:
		p.kind = FSPATH_CLUSTER_CONTRACT;
		if (fs_list_entry(l, &p, "contract"))
			return;
		p.kind = FSPATH_CLUSTER_NODES;
		if (fs_list_entry(l, &p, "nodes"))
			return;
		p.kind = FSPATH_CLUSTER_FILE;
		for (size_t i = 0; (name = model_cluster_file_name(i)); i++) {
			snprintf(p.file, sizeof(p.file), "%s", name);
			if (fs_list_entry(l, &p, name))
				return;
		}
		break;
	case FSPATH_CLUSTER_NODES:
		model_cluster_nodes(m, dirp->handle, fs_names_node, &names);
		fs_list_names(l, p, FSPATH_NODE, &names);
		break;
	default:
		p.kind = FSPATH_NODE_FILES;
		p.rel = "";
		if (fs_list_entry(l, &p, "files"))
			return;
		p.kind = FSPATH_NODE_FILE;
		for (size_t i = 0; (name = model_node_file_name(i)); i++) {
			snprintf(p.file, sizeof(p.file), "%s", name);
			if (fs_list_entry(l, &p, name))
				return;
		}
		break;
	}
}

/* catalog/regions/PROVIDER/REGION/: a symlink per type offered there. */
static void fs_list_region(struct fs_lister *l, struct fspath *p)
{
	char *names = NULL;
	size_t len = 0;

	if (model_catalog_region_types(fs_ctx()->model, p->provider, p->region,
				       &names, &len))
		return;
	p->kind = FSPATH_CATALOG_REGION_TYPE;
	for (char *name = names; *name;) {
		char *nl = strchr(name, '\n');

		if (nl)
			*nl = '\0';
		snprintf(p->type, sizeof(p->type), "%s", name);
		if (fs_list_entry(l, p, name) || !nl)
			break;
		name = nl + 1;
	}
	free(names);
}

/* catalog/, catalog/PROVIDER/, catalog/PROVIDER/TYPE/ and
 * catalog/regions/... */
static void fs_list_catalog(struct fs_lister *l, const struct fspath *dirp)
{
	struct model *m = fs_ctx()->model;
	struct fspath p = *dirp;
	const char *name, *providers[16];
	size_t n;

	switch (dirp->kind) {
	case FSPATH_CATALOG:
	case FSPATH_CATALOG_REGIONS:
		n = model_catalog_providers(m, providers, 16);
		p.kind = dirp->kind == FSPATH_CATALOG
				 ? FSPATH_CATALOG_PROVIDER
				 : FSPATH_CATALOG_REGION_PROVIDER;
		for (size_t i = 0; i < n; i++) {
			snprintf(p.provider, sizeof(p.provider), "%s",
				 providers[i]);
			if (dirp->kind == FSPATH_CATALOG_REGIONS &&
			    !model_catalog_region(m, providers[i], 0))
				continue;
			if (fs_list_entry(l, &p, providers[i]))
				return;
		}
		if (dirp->kind == FSPATH_CATALOG) {
			p.kind = FSPATH_CATALOG_REGIONS;
			fs_list_entry(l, &p, "regions");
		}
		break;
	case FSPATH_CATALOG_REGION_PROVIDER:
		p.kind = FSPATH_CATALOG_REGION;
		for (size_t i = 0;
		     (name = model_catalog_region(m, dirp->provider, i)); i++) {
			snprintf(p.region, sizeof(p.region), "%s", name);
			if (fs_list_entry(l, &p, name))
				return;
		}
		break;
	case FSPATH_CATALOG_REGION:
		fs_list_region(l, &p);
		break;
	case FSPATH_CATALOG_PROVIDER:
		if (model_catalog_refresh_exists(m, dirp->provider)) {
			p.kind = FSPATH_CATALOG_REFRESH;
			if (fs_list_entry(l, &p, "refresh"))
				return;
		}
		p.kind = FSPATH_CATALOG_TYPE;
		for (size_t i = 0;
		     (name = model_catalog_type(m, dirp->provider, i)); i++) {
			snprintf(p.type, sizeof(p.type), "%s", name);
			if (fs_list_entry(l, &p, name))
				return;
		}
		break;
	default:
		p.kind = FSPATH_CATALOG_FILE;
		for (size_t i = 0; (name = model_catalog_feature_name(i));
		     i++) {
			snprintf(p.feature, sizeof(p.feature), "%s", name);
			if (fs_list_entry(l, &p, name))
				return;
		}
		break;
	}
}

static int fs_files_entry(void *ctx, const char *name, const struct stat *st)
{
	return fs_list_add(ctx, name, st);
}

/* An open directory of files/: the listing it keeps (fs/listing.c). */
struct fsdir {
	struct opened open; /* given out to the kernel */
	struct listing *ls;
};

static void fs_dir_free(struct fsdir *d)
{
	if (!d)
		return;
	opened_remove(&d->open);
	listing_free(d->ls);
	free(d);
}

static void fs_dir_release(struct opened *o)
{
	fs_dir_free((struct fsdir *)((char *)o - offsetof(struct fsdir, open)));
}

/* An open directory of files/ keeps its listing; others have none. */
static int fs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct fspath p;
	struct fsdir *d;

	fi->fh = 0;
	if (fspath_parse(path, &p) != 0 || p.kind != FSPATH_NODE_FILES)
		return 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ls = listing_new();
	if (!d->ls) {
		free(d);
		return -ENOMEM;
	}
	opened_add(&d->open, fs_dir_release);
	fi->fh = (uint64_t)(uintptr_t)d;
	return 0;
}

static int fs_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	fs_dir_free((struct fsdir *)(uintptr_t)fi->fh);
	return 0;
}

/* The entries of a listing (they follow "." and ".."), from l's
 * position on. */
static void fs_list_listing(struct fs_lister *l, const struct listing *ls)
{
	for (size_t i = 0; i < listing_count(ls); i++) {
		const struct stat *st;
		const char *name = listing_entry(ls, i, &st);

		if (fs_list_add(l, name, st))
			return;
	}
}

/* The entries of a directory of files/ (after "." and ".."): read from
 * the node at the start of a pass (or at each request, without a
 * listing), the kernel's later requests of the pass answered from what
 * it read. */
static int fs_readdir_files(struct fs_lister *l, struct fspath *p,
			    struct listing *ls)
{
	int rc;

	if (!ls) {
		rc = FS_FILES(
			p, model_files_readdir(f, p->rel, fs_files_entry, l));
		return rc < 0 ? rc : 0;
	}
	listing_clear(ls);
	rc = FS_FILES(p, model_files_readdir(f, p->rel, listing_add, ls));
	listing_done(ls, rc >= 0);
	if (rc < 0)
		return rc;
	fs_list_listing(l, ls);
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	struct fs_lister l = {buf, fill, off, 0, false, path, false};
	const struct fsdir *d =
		fi ? (const struct fsdir *)(uintptr_t)fi->fh : NULL;
	struct listing *ls = d ? d->ls : NULL;
	struct fspath p, q;
	struct stat st = {0};
	int rc = fspath_parse(path, &p);

	l.files = rc == 0 && p.kind == FSPATH_NODE_FILES;
	(void)flags;
	/* A later request of a pass of files/: what its start read. */
	if (l.files && ls && off > 0 && listing_filled(ls)) {
		if (fs_list_add(&l, ".", NULL) == 0 &&
		    fs_list_add(&l, "..", NULL) == 0)
			fs_list_listing(&l, ls);
		return 0;
	}
	if (rc == 0)
		rc = fs_stat_path(&p, &st);
	if (rc)
		return rc;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (fs_list_add(&l, ".", NULL) || fs_list_add(&l, "..", NULL))
		return 0;
	switch (p.kind) {
	case FSPATH_ROOT:
		for (size_t i = 0; i < fspath_nroot; i++) {
			memset(&q, 0, sizeof(q));
			q.kind = fspath_root[i].kind;
			if (fs_list_entry(&l, &q, fspath_root[i].name))
				break;
		}
		break;
	case FSPATH_CONTRACTS:
		model_contracts_list(fs_ctx()->model, fs_list_contract, &l);
		break;
	case FSPATH_CONTRACT:
		fs_list_contract_dir(&l, &p);
		break;
	case FSPATH_CONTRACT_DIR:
		if (p.dir == CONTRACT_DIR_CLUSTERS)
			fs_list_clusters(&l, &p);
		else
			fs_list_contract_dir(&l, &p);
		break;
	case FSPATH_CATALOG:
	case FSPATH_CATALOG_PROVIDER:
	case FSPATH_CATALOG_TYPE:
	case FSPATH_CATALOG_REGIONS:
	case FSPATH_CATALOG_REGION_PROVIDER:
	case FSPATH_CATALOG_REGION:
		fs_list_catalog(&l, &p);
		break;
	case FSPATH_CLUSTERS:
	case FSPATH_CLUSTER:
	case FSPATH_CLUSTER_NODES:
	case FSPATH_NODE:
		fs_list_clusters(&l, &p);
		break;
	case FSPATH_NODE_FILES:
		return fs_readdir_files(&l, &p, ls);
	default:
		break;
	}
	return 0;
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	char contract[CONTRACT_NAME_MAX + 1];
	struct fspath p;
	struct stat st;
	int rc = fspath_parse(path, &p);

	if (rc == 0 && p.kind == FSPATH_NODE_FILES)
		return FS_FILES(&p, model_files_readlink(f, p.rel, buf, size));
	if (rc == 0)
		rc = fs_stat_path(&p, &st);
	if (rc)
		return rc;
	if (p.kind == FSPATH_CONTRACT_LINK) {
		snprintf(buf, size, "../../../clusters/%s", p.handle);
		return 0;
	}
	if (p.kind == FSPATH_CATALOG_REGION_TYPE) {
		snprintf(buf, size, "../../../%s/%s", p.provider, p.type);
		return 0;
	}
	if (p.kind == FSPATH_CLUSTER_CONTRACT &&
	    model_cluster_contract(fs_ctx()->model, p.handle, contract,
				   sizeof(contract)) == 0) {
		snprintf(buf, size, "../../contracts/%s", contract);
		return 0;
	}
	return -EINVAL;
}

static int fs_mkdir_tree(const char *path, mode_t mode)
{
	struct fspath parent;
	const char *leaf;
	int rc = fspath_parse_parent(path, &parent, &leaf);

	(void)mode;
	if (rc)
		return rc;
	switch (parent.kind) {
	case FSPATH_CONTRACTS:
		return model_contract_create(fs_ctx()->model, leaf);
	case FSPATH_CONTRACT:
		return fs_refuse(&parent, leaf, EACCES,
				 "a contract holds a fixed set of files and "
				 "folders; nothing can be created in it");
	case FSPATH_CONTRACT_DIR:
		return fs_refuse(&parent, leaf, EACCES,
				 "this folder holds a fixed set of files; "
				 "nothing can be created in it");
	default:
		/* Clusters' folders are made by deploy; the root, clusters/
		 * and catalog/ (file managers' trash folders at the root end
		 * here too) have no error file. */
		return fs_refuse(&parent, leaf, EACCES,
				 "a cluster holds the files and folders its "
				 "deploy made; nothing can be created in it "
				 "(files/ of a node can hold anything)");
	}
}

static int fs_rmdir_tree(const char *path)
{
	struct fspath p;
	int rc = fspath_parse(path, &p);

	if (rc)
		return rc;
	switch (p.kind) {
	case FSPATH_CONTRACT:
		return model_contract_remove(fs_ctx()->model, p.contract);
	case FSPATH_CONTRACT_DIR:
		return fs_done(model_dir_reset(fs_ctx()->model, p.contract,
					       (int)p.dir));
	case FSPATH_CLUSTER:
		return fs_done(model_cluster_remove(fs_ctx()->model, p.handle));
	case FSPATH_CONTRACT_FILE:
		return -ENOTDIR;
	default:
		return fs_refuse(&p, NULL, EACCES,
				 "the folders of a cluster go with it: rmdir "
				 "the cluster's folder once it is terminated");
	}
}

static int fs_unlink_tree(const char *path)
{
	struct fspath p;
	int rc = fspath_parse(path, &p);

	if (rc)
		return rc;
	if (p.kind == FSPATH_CONTRACT_FILE)
		return fs_done(
			model_file_reset(fs_ctx()->model, p.contract, p.field));
	if (p.kind == FSPATH_CONTRACT_LINK)
		return 0; /* rm -r of a contract: the cluster stays */
	if (p.kind == FSPATH_README || p.kind == FSPATH_COSTS ||
	    p.kind == FSPATH_CATALOG_FILE || p.kind == FSPATH_CLUSTER_FILE ||
	    p.kind == FSPATH_NODE_FILE || p.kind == FSPATH_CLUSTER_CONTRACT ||
	    p.kind == FSPATH_CATALOG_REFRESH ||
	    p.kind == FSPATH_CATALOG_REGION_TYPE)
		return fs_refuse(&p, NULL, EPERM,
				 "the files of a cluster go with it: rmdir "
				 "the cluster's folder once it is terminated");
	return -EISDIR;
}

/* Refuse to create `path` (touch, echo >, cp, mknod, ln -s of a new name). */
static int fs_refuse_new(const char *path)
{
	struct fspath parent;
	const char *leaf;

	if (fspath_parse_parent(path, &parent, &leaf))
		return -ENOENT;
	if (parent.kind == FSPATH_CONTRACT)
		return fs_refuse(&parent, leaf, EACCES,
				 "a contract holds a fixed set of files; this "
				 "one is not among them (see cclfs(1))");
	if (parent.kind == FSPATH_CONTRACT_DIR)
		return fs_refuse(&parent, leaf, EACCES,
				 "this folder holds a fixed set of files; this "
				 "one is not among them (see cclfs(1))");
	return fs_refuse(&parent, leaf, EACCES,
			 "a cluster holds the files its deploy made; this one "
			 "is not among them (see cclfs(1))");
}

static int fs_create_tree(const char *path, mode_t mode,
			  struct fuse_file_info *fi)
{
	(void)mode;
	(void)fi;
	return fs_refuse_new(path);
}

static int fs_mknod_tree(const char *path, mode_t mode, dev_t dev)
{
	(void)mode;
	(void)dev;
	return fs_refuse_new(path);
}

static int fs_symlink_tree(const char *target, const char *path)
{
	(void)target;
	return fs_refuse_new(path);
}

static int fs_link_tree(const char *from, const char *to)
{
	(void)from;
	return fs_refuse_new(to);
}

static int fs_rename_tree(const char *from, const char *to, unsigned int flags)
{
	struct fspath p;
	int rc = fspath_parse(from, &p);

	(void)to;
	(void)flags;
	return rc ? rc : fs_refuse(&p, NULL, EPERM, fs_why_rename);
}

/* The modes and owners of the tree tell the truth and do not change; a
 * change to what they are already (cp -p, tar, cp -a) is no change. */
static int fs_chmod_tree(const char *path, mode_t mode,
			 struct fuse_file_info *fi)
{
	struct stat st = {0};
	int rc = fs_getattr(path, &st, fi);

	if (rc)
		return rc;
	return (st.st_mode & 07777) == (mode & 07777)
		       ? 0
		       : fs_refuse_at(path, fi, EPERM, fs_why_modes);
}

static int fs_chown_tree(const char *path, uid_t uid, gid_t gid,
			 struct fuse_file_info *fi)
{
	struct stat st = {0};
	int rc = fs_getattr(path, &st, fi);

	if (rc)
		return rc;
	if ((uid == (uid_t)-1 || uid == st.st_uid) &&
	    (gid == (gid_t)-1 || gid == st.st_gid))
		return 0;
	return fs_refuse_at(path, fi, EPERM, fs_why_modes);
}

static int fs_truncate_tree(const char *path, off_t size,
			    struct fuse_file_info *fi)
{
	struct fspath p;
	int rc;

	(void)size;
	if (fi && fi->fh) {
		p = ((struct fshandle *)fi->fh)->path;
	} else {
		rc = fspath_parse(path, &p);
		if (rc)
			return rc;
	}
	/* O_TRUNC and truncate are no-ops on value files, so that a write
	 * that is then refused never leaves the old value erased. */
	return fs_writable(&p) ? 0
			       : fs_refuse(&p, NULL, EACCES, fs_why_readonly);
}

static int fs_utimens_tree(const char *path, const struct timespec tv[2],
			   struct fuse_file_info *fi)
{
	struct fspath p;
	int rc;

	if (fi && fi->fh) {
		p = ((struct fshandle *)fi->fh)->path;
	} else {
		rc = fspath_parse(path, &p);
		if (rc)
			return rc;
	}
	if (p.kind == FSPATH_README || p.kind == FSPATH_COSTS ||
	    p.kind == FSPATH_CATALOG_FILE ||
	    ((p.kind == FSPATH_CONTRACT_FILE || p.kind == FSPATH_CLUSTER_FILE ||
	      p.kind == FSPATH_NODE_FILE) &&
	     !fs_writable(&p)))
		return fs_refuse(&p, NULL, EACCES, fs_why_readonly);
	if (p.kind == FSPATH_CATALOG_REFRESH) {
		if (tv[0].tv_nsec != UTIME_NOW || tv[1].tv_nsec != UTIME_NOW)
			return 0;
		inval_serve(path);
		return fs_done(model_catalog_refresh_write(fs_ctx()->model,
							   p.provider, "", 0));
	}
	if (p.kind == FSPATH_CLUSTER_FILE) {
		if (tv[0].tv_nsec != UTIME_NOW || tv[1].tv_nsec != UTIME_NOW)
			return 0;
		inval_serve(path);
		return fs_done(model_cluster_file_touch(fs_ctx()->model,
							p.handle, p.file));
	}
	if (p.kind != FSPATH_CONTRACT_FILE)
		return 0;
	/* Only a plain touch (both times now) fires a trigger; touch -d,
	 * touch -m and cp -p restore times and do not. */
	if (tv[0].tv_nsec == UTIME_NOW && tv[1].tv_nsec == UTIME_NOW) {
		inval_serve(path);
		return fs_done(
			model_file_touch(fs_ctx()->model, p.contract, p.field));
	}
	return 0;
}

static void fs_handle_free(struct fshandle *h)
{
	if (!h)
		return;
	opened_remove(&h->open);
	if (h->fd >= 0)
		close(h->fd);
	passthrough_close(h->pt);
	if (h->files) {
		model_files_close(h->files, h->pfh);
		model_files_put(h->files);
	}
	free(h->snap);
	free(h->buf);
	free(h->prior);
	free(h);
}

static void fs_handle_release(struct opened *o)
{
	fs_handle_free((struct fshandle *)((char *)o -
					   offsetof(struct fshandle, open)));
}

static int fs_snapshot(struct fshandle *h)
{
	char *snap = NULL;
	size_t len = 0;

	if (h->path.kind == FSPATH_COSTS) {
		int rc = model_costs_render(fs_ctx()->model, &snap, &len);

		if (rc)
			return rc;
	} else if (h->path.kind == FSPATH_README) {
		snap = malloc(fsreadme_size + 1);
		if (!snap)
			return -ENOMEM;
		memcpy(snap, fsreadme_text, fsreadme_size + 1);
		len = fsreadme_size;
	} else if (h->path.kind == FSPATH_CLUSTER_FILE ||
		   h->path.kind == FSPATH_NODE_FILE) {
		int fd = -1;
		int rc = model_cluster_file_open(
			fs_ctx()->model, h->path.handle,
			h->path.kind == FSPATH_NODE_FILE ? h->path.node : NULL,
			h->path.file, &snap, &len, &fd);

		if (rc)
			return rc;
		if (fd >= 0) {
			if (h->fd >= 0)
				close(h->fd);
			h->fd = fd;
		}
	} else if (h->path.kind == FSPATH_CATALOG_REFRESH) {
		int rc = model_catalog_refresh_read(
			fs_ctx()->model, h->path.provider, &snap, &len, NULL);

		if (rc)
			return rc;
	} else if (h->path.kind == FSPATH_CATALOG_FILE) {
		int rc = model_catalog_feature(fs_ctx()->model,
					       h->path.provider, h->path.type,
					       h->path.feature, &snap, &len);

		if (rc)
			return rc;
	} else {
		int rc = model_file_read(fs_ctx()->model, h->path.contract,
					 h->path.field, &snap, &len);

		if (rc)
			return rc;
	}
	free(h->snap);
	h->snap = snap;
	h->snaplen = len;
	return 0;
}

static int fs_open_tree(const char *path, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	struct fshandle *h;
	struct fspath p;
	int rc = fspath_parse(path, &p);

	if (rc)
		return rc;
	if (p.kind != FSPATH_README && p.kind != FSPATH_COSTS &&
	    p.kind != FSPATH_CONTRACT_FILE && p.kind != FSPATH_CATALOG_FILE &&
	    p.kind != FSPATH_CLUSTER_FILE && p.kind != FSPATH_NODE_FILE &&
	    p.kind != FSPATH_CATALOG_REFRESH)
		return -EISDIR;
	if (acc != O_RDONLY && !fs_writable(&p)) {
		/* The kernel checks modes, but root passes that check. */
		return fs_refuse(&p, NULL, EACCES, fs_why_readonly);
	}
	{
		struct stat st;

		rc = fs_stat_path(&p, &st);
		if (rc)
			return rc;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = -1;
	h->path = p;
	h->flags = fi->flags;
	if (acc != O_WRONLY) {
		rc = fs_snapshot(h);
		if (rc) {
			fs_handle_free(h);
			return rc;
		}
	}
	/* Every read goes to the snapshot, so the size the kernel caches
	 * never cuts a value short. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	opened_add(&h->open, fs_handle_release);
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

/* clusters/H/log only grows: a reader at its end (tail -f) reads on
 * into what was added since its snapshot. */
static bool fs_append_only(const struct fshandle *h)
{
	return h->path.kind == FSPATH_CLUSTER_FILE &&
	       strcmp(h->path.file, "log") == 0;
}

/* Whether a read at off takes a new snapshot first: a read from the start
 * again (a reader that polled, then went back with lseek), or a read at
 * the end of a file that only grows. The first read after open uses the
 * snapshot taken at open. */
static bool fs_read_refreshes(const struct fshandle *h, off_t off)
{
	if (off == 0)
		return h->readto > 0 || h->stale;
	return fs_append_only(h) && (size_t)off >= h->snaplen &&
	       h->readto >= h->snaplen;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;
	size_t n;

	(void)path;
	if (off < 0)
		return -EINVAL;
	if (h->files)
		return model_files_read(h->files, h->pfh, buf, size, off);
	if (!h->snap && h->fd >= 0) {
		ssize_t got;

		/* After `echo cmd >&3`, `cat <&3` reads on from where the
		 * command was written: that is where its output starts. */
		if (h->exec_off && off >= h->exec_off)
			off -= h->exec_off;
		got = pread(h->fd, buf, size, off);
		return got < 0 ? -errno : (int)got;
	}
	if (h->snap && fs_read_refreshes(h, off))
		fs_snapshot(h); /* on failure the old one is kept */
	if (off == 0)
		h->stale = false;
	if (!h->snap || (size_t)off >= h->snaplen) {
		if (h->snap)
			h->readto = h->snaplen;
		return 0;
	}
	n = h->snaplen - (size_t)off;
	if (n > size)
		n = size;
	memcpy(buf, h->snap + off, n);
	if ((size_t)off + n > h->readto)
		h->readto = (size_t)off + n;
	return (int)n;
}

static int fs_exec_cancelled(void *ctx)
{
	(void)ctx;
	return fuse_interrupted();
}

/* Run what was written to an exec file, and keep its output for reads on
 * this descriptor. */
static int fs_exec_run(struct fshandle *h)
{
	int fd = -1;
	int rc = model_cluster_command(
		fs_ctx()->model, h->path.handle,
		h->path.kind == FSPATH_NODE_FILE ? h->path.node : NULL,
		h->path.file, h->buf, h->len, fs_exec_cancelled, NULL, &fd);

	h->len = 0;
	if (fd >= 0) {
		if (h->fd >= 0)
			close(h->fd);
		h->fd = fd;
		free(h->snap);
		h->snap = NULL;
		h->snaplen = 0;
	}
	return rc;
}

/* Once a command is written through a descriptor, it reads that command's
 * output only: nothing if the command is refused, never what another
 * command left in the file when it was opened. */
static void fs_exec_forget(struct fshandle *h)
{
	free(h->snap);
	h->snap = NULL;
	h->snaplen = 0;
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

/* A command runs when a newline ends what was written; the rest waits for
 * the next write or the close. */
static int fs_exec_write(struct fshandle *h, const char *data, size_t size,
			 off_t off)
{
	char *grown;
	int rc;

	if (h->refused)
		return h->refused;
	if (h->len + size > FS_EXEC_MAX) {
		char rel[64];

		/* Nothing of it runs, not even at close. */
		h->len = 0;
		h->refused = -E2BIG;
		fs_exec_forget(h);
		snprintf(rel, sizeof(rel), "%s%s%s%s",
			 h->path.kind == FSPATH_NODE_FILE ? "nodes/" : "",
			 h->path.kind == FSPATH_NODE_FILE ? h->path.node : "",
			 h->path.kind == FSPATH_NODE_FILE ? "/" : "",
			 h->path.file);
		return model_cluster_refuse(
			fs_ctx()->model, h->path.handle, rel, E2BIG,
			"the command is longer than 128 KiB; "
			"copy a script into files/ and run "
			"that");
	}
	grown = realloc(h->buf, h->len + size + 1);
	if (!grown)
		return -ENOMEM;
	h->buf = grown;
	memcpy(h->buf + h->len, data, size);
	h->len += size;
	if (h->buf[h->len - 1] != '\n')
		return (int)size;
	h->exec_off = off + (off_t)size;
	fs_exec_forget(h);
	rc = fs_exec_run(h);
	return rc ? rc : (int)size;
}

static int fs_write_handle(struct fshandle *h, const char *data, size_t size,
			   off_t off)
{
	struct model *m = fs_ctx()->model;
	const struct contract_field *f;
	char *grown;
	int rc;

	if (!fs_writable(&h->path))
		return fs_refuse(&h->path, NULL, EACCES, fs_why_readonly);
	if (h->path.kind == FSPATH_CATALOG_REFRESH) {
		rc = model_catalog_refresh_write(m, h->path.provider, data,
						 size);
		return rc ? rc : (int)size;
	}
	if (h->path.kind == FSPATH_CLUSTER_FILE ||
	    h->path.kind == FSPATH_NODE_FILE) {
		if (model_cluster_file_is_command(
			    h->path.kind == FSPATH_NODE_FILE ? h->path.node
							     : NULL,
			    h->path.file))
			return fs_exec_write(h, data, size, off);
		rc = model_cluster_file_write(m, h->path.handle, h->path.file,
					      data, size);
		return rc ? rc : (int)size;
	}
	f = contract_field_at((size_t)h->path.field);
	if (f->file == CONTRACT_FILE_TRIGGER) {
		rc = model_file_write(m, h->path.contract, h->path.field, data,
				      size);
		return rc ? rc : (int)size;
	}
	/* The bytes written through one descriptor form one value: once a
	 * write is refused, what earlier writes committed is put back, and
	 * later writes are refused too ("printf 'x\n7\n'" must not store 7). */
	if (h->refused)
		return h->refused;
	if (!h->prior) {
		rc = model_file_value(m, h->path.contract, h->path.field,
				      &h->prior);
		if (rc)
			return rc;
	}
	if (h->len + size > FS_WRITE_MAX) {
		rc = model_file_refuse(m, h->path.contract, h->path.field,
				       EFBIG,
				       "the value written is longer than "
				       "4096 bytes");
		goto refused;
	}
	grown = realloc(h->buf, h->len + size + 1);
	if (!grown)
		return -ENOMEM;
	h->buf = grown;
	memcpy(h->buf + h->len, data, size);
	h->len += size;
	rc = model_file_write(m, h->path.contract, h->path.field, h->buf,
			      h->len);
	if (rc)
		goto refused;
	h->changed = true;
	if ((h->flags & O_ACCMODE) == O_RDWR)
		fs_snapshot(h);
	return (int)size;
refused:
	if (h->changed)
		model_file_restore(m, h->path.contract, h->path.field,
				   h->prior);
	h->refused = rc;
	return rc;
}

static int fs_write(const char *path, const char *data, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fshandle *fh = (struct fshandle *)(uintptr_t)fi->fh;

	if (fh->files) {
		fh->wrote = true;
		return model_files_write(fh->files, fh->pfh, data, size, off);
	}
	/* Offsets are ignored: a value is replaced, not edited. */
	inval_serve(path);
	return fs_done(fs_write_handle((struct fshandle *)(uintptr_t)fi->fh,
				       data, size, off));
}

/*
 * Reads and writes as buffers libfuse moves itself: a node file with a
 * descriptor on this machine (a local node's) is spliced between the
 * kernel's request and that file, without a copy through the daemon's
 * memory; the rest goes through fs_read and fs_write. A read's bytes in
 * memory go to libfuse by a pipe of the thread's (fs/readpipe.c) when they
 * are enough for libfuse to splice them (two pages, as libfuse counts), so
 * that they are copied once on their way to the kernel, not twice. A file
 * opened with O_APPEND is written by pwrite (splice refuses it).
 */
static int fs_files_fd(const struct fshandle *h)
{
	return h->files ? model_files_fd(h->files, h->pfh) : -1;
}

#define FS_SPLICE_MIN 8192

/* The n bytes at mem (the thread's read buffer) as v's one buffer. Where
 * libfuse does not splice, it would read a pipe back into memory: a copy
 * of the bytes is given instead. */
static int fs_read_reply(struct fuse_bufvec *v, const char *mem, size_t n)
{
	int fd = n >= FS_SPLICE_MIN && fs_ctx()->splice_write ? readpipe_fill(n)
							      : -1;

	v->buf[0].size = n;
	if (fd >= 0) {
		v->buf[0].flags = FUSE_BUF_IS_FD;
		v->buf[0].fd = fd;
		return 0;
	}
	/* libfuse frees what it is given in memory: a copy */
	v->buf[0].mem = malloc(n ? n : 1);
	if (!v->buf[0].mem)
		return -ENOMEM;
	memcpy(v->buf[0].mem, mem, n);
	return 0;
}

static int fs_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;
	struct fuse_bufvec *v = malloc(sizeof(*v));
	int fd = fs_files_fd(h), rc;
	char *mem;

	if (!v)
		return -ENOMEM;
	*v = (struct fuse_bufvec)FUSE_BUFVEC_INIT(size);
	if (fd >= 0 && off >= 0) {
		v->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		v->buf[0].fd = fd;
		v->buf[0].pos = off;
		*bufp = v;
		return 0;
	}
	mem = readpipe_buf(size);
	rc = mem ? fs_read(path, mem, size, off, fi) : -ENOMEM;
	if (rc >= 0)
		rc = fs_read_reply(v, mem, (size_t)rc);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*bufp = v;
	return 0;
}

static int fs_write_buf(const char *path, struct fuse_bufvec *buf, off_t off,
			struct fuse_file_info *fi)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;
	size_t size = fuse_buf_size(buf);
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
	int fd = fs_files_fd(h);
	ssize_t n;

	if (fd >= 0 && !(h->flags & O_APPEND)) {
		dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		dst.buf[0].fd = fd;
		dst.buf[0].pos = off;
		h->wrote = true;
		n = fuse_buf_copy(&dst, buf, 0);
		return (int)n;
	}
	/* The bytes in one piece of memory already (the usual case, no
	 * splice): written from there, without a copy. */
	if (buf->count == 1 && buf->idx == 0 && buf->off == 0 &&
	    !(buf->buf[0].flags & FUSE_BUF_IS_FD))
		return fs_write(path, buf->buf[0].mem, size, off, fi);
	dst.buf[0].mem = malloc(size ? size : 1);
	if (!dst.buf[0].mem)
		return -ENOMEM;
	n = fuse_buf_copy(&dst, buf, 0);
	n = n < 0 ? n : fs_write(path, dst.buf[0].mem, (size_t)n, off, fi);
	free(dst.buf[0].mem);
	return (int)n;
}

/* The node's files/ dropped from the kernel's caches, before the request
 * returns: libfuse knows the names of one file (hard links) as files of
 * their own, and only the one used heard of a change. */
static int fs_files_changed_all(const struct fspath *p)
{
	char below[160];

	snprintf(below, sizeof(below), "clusters/%s/nodes/%s/files/", p->handle,
		 p->node);
	inval_attrs_below(fs_ctx()->inval, below);
	return fs_done(0);
}

static int fs_flush(const char *path, struct fuse_file_info *fi)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;

	(void)path;
	if (h && h->files) {
		/* close(2) reports what write-behind could not */
		int rc = model_files_flush(h->files, h->pfh);

		if (h->wrote && model_files_shared(h->files, h->pfh) > 0) {
			h->wrote = false;
			fs_files_changed_all(&h->path);
		}
		return rc;
	}
	/* A command written without a final newline runs at the close. */
	if (h && h->len && !h->refused &&
	    (h->path.kind == FSPATH_CLUSTER_FILE ||
	     h->path.kind == FSPATH_NODE_FILE)) {
		fs_exec_forget(h);
		return fs_done(fs_exec_run(h));
	}
	return 0;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct fshandle *h = fi ? (struct fshandle *)(uintptr_t)fi->fh : NULL;

	if (h && h->files)
		return model_files_fsync(h->files, h->pfh);
	/* Values are durable when write() returns. */
	(void)path;
	(void)datasync;
	(void)fi;
	return 0;
}

/*
 * poll/select/epoll on a file of the tree: readable while what was read of
 * it is not all of it, or once it changed since (the model's notice wakes
 * the poller: fs_changed). A reader polls, reads from the start again (or
 * on from its offset in a log) and polls again: no sleep. Files under
 * files/ and command outputs are always ready, as files on a disk are.
 */
static int fs_poll(const char *path, struct fuse_file_info *fi,
		   struct fuse_pollhandle *ph, unsigned *reventsp)
{
	struct fshandle *h = fi ? (struct fshandle *)(uintptr_t)fi->fh : NULL;
	unsigned out = POLLOUT | POLLWRNORM;

	if (!h || h->files || !h->snap) {
		*reventsp = POLLIN | POLLRDNORM | out;
		if (ph)
			fuse_pollhandle_destroy(ph);
		return 0;
	}
	/* Kept before the look, so that a change right after it still
	 * wakes the poller. */
	if (ph)
		watch_add(fs_ctx()->watch, h, path, ph);
	if (h->readto >= h->snaplen && !h->stale) {
		char *old = h->snap;
		size_t oldlen = h->snaplen;

		h->snap = NULL;
		if (fs_snapshot(h) == 0) {
			h->stale = oldlen != h->snaplen ||
				   memcmp(old, h->snap, oldlen) != 0;
			free(old);
		} else {
			h->snap = old;
			h->snaplen = oldlen;
		}
	}
	*reventsp = (h->readto < h->snaplen || h->stale)
			    ? POLLIN | POLLRDNORM | out
			    : out;
	return 0;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	watch_forget(fs_ctx()->watch, (const void *)(uintptr_t)fi->fh);
	fs_handle_free((struct fshandle *)(uintptr_t)fi->fh);
	return 0;
}

/* --- entry points: nodes/N/files/ goes to the node, the rest to the tree */

/* Whether path is under nodes/N/files/. libfuse passes a NULL path for an
 * open file whose name is gone (hard_remove): such calls go by handle. */
static bool fs_in_files(const char *path, struct fspath *p)
{
	return path && fspath_parse(path, p) == 0 &&
	       p->kind == FSPATH_NODE_FILES;
}

/* Open (or create) a node file: a handle that reads and writes through. */
static int fs_files_open(const struct fspath *p, int flags, mode_t mode,
			 struct fuse_file_info *fi)
{
	struct fshandle *h;
	int rc;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = -1;
	h->path = *p;
	h->flags = flags;
	h->files = fs_files(p, &rc);
	if (!h->files) {
		free(h);
		return rc;
	}
	rc = model_files_open(h->files, p->rel, flags, mode, &h->pfh);
	if (rc) {
		model_files_put(h->files);
		free(h);
		return rc;
	}
	/* Commands on the node change these files behind the kernel's back:
	 * each open starts with an empty page cache (keep_cache off), which
	 * also refreshes the size; not direct I/O, so mmap works. A file
	 * opened for writing only cannot be mapped: its writes go straight
	 * to the daemon, without a copy into the page cache on the way. */
	fi->direct_io = (flags & O_ACCMODE) == O_WRONLY;
	fi->keep_cache = 0;
	h->path.rel = ""; /* it pointed into this request's path */
	opened_add(&h->open, fs_handle_release);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* A file on this machine (a local node's): the kernel reads and
	 * writes it itself, in the node's page cache, so nothing is stale
	 * and mmap is the node file's; writes are not seen here, so a
	 * writable open counts as written (see fs_flush). */
	h->pt = passthrough_open(fs_files_fd(h));
	if (h->pt) {
		fi->direct_io = 0;
		h->wrote = (flags & O_ACCMODE) != O_RDONLY;
	}
	return 0;
}

static int fs_mkdir(const char *path, mode_t mode)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_mkdir(f, p.rel, mode));
	return fs_mkdir_tree(path, mode);
}

static int fs_rmdir(const char *path)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_rmdir(f, p.rel));
	return fs_rmdir_tree(path);
}

/* A file with other names (hard links): what the kernel holds of the
 * node's files is dropped, since libfuse cannot tell which names share
 * the link count. */
static int fs_files_unlink(const struct fspath *p)
{
	struct stat st = {0};
	int rc, shared;

	rc = FS_FILES(p, model_files_getattr(f, p->rel, &st));
	shared = rc == 0 && !S_ISDIR(st.st_mode) && st.st_nlink > 1;
	rc = FS_FILES(p, model_files_unlink(f, p->rel));
	return rc || !shared ? rc : fs_files_changed_all(p);
}

static int fs_unlink(const char *path)
{
	struct fspath p;

	if (fs_files_is_hidden_name(path) && fs_files_hidden_unlink(path) == 0)
		return 0;
	if (fs_in_files(path, &p))
		return fs_files_unlink(&p);
	return fs_unlink_tree(path);
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return fs_files_open(&p, fi->flags | O_CREAT, mode, fi);
	return fs_create_tree(path, mode, fi);
}

static int fs_mknod(const char *path, mode_t mode, dev_t dev)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_mknod(f, p.rel, mode, dev));
	return fs_mknod_tree(path, mode, dev);
}

/* Both names on the same node, as for rename. libfuse knows the two
 * names as two files: the first one's link count is dropped from the
 * kernel's cache before link() returns. */
static int fs_link(const char *from, const char *to)
{
	struct fspath p, q;
	int rc;

	if (fs_in_files(from, &p)) {
		if (!fs_in_files(to, &q) || strcmp(p.handle, q.handle) != 0 ||
		    strcmp(p.node, q.node) != 0)
			return -EXDEV;
		rc = FS_FILES(&p, model_files_link(f, p.rel, q.rel));
		if (rc == 0)
			inval_push(fs_ctx()->inval, from + 1);
		return fs_done(rc);
	}
	return fs_link_tree(from, to);
}

static int fs_chown(const char *path, uid_t uid, gid_t gid,
		    struct fuse_file_info *fi)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_chown(f, p.rel, uid, gid));
	return fs_chown_tree(path, uid, gid, fi);
}

/* The tree holds no data of its own: libfuse's answer for it (nothing
 * used, names up to 255 bytes); files/ tells its node's file system. */
static int fs_statfs(const char *path, struct statvfs *st)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_statfs(f, p.rel, st));
	memset(st, 0, sizeof(*st));
	st->f_bsize = 512;
	st->f_namemax = 255;
	return 0;
}

/* A lock just taken through the mount: what the node wrote under its own
 * lock before must be what is read now, but the kernel keeps the pages
 * read through an open file (unless passed through) until the attributes
 * expire. They are dropped before the lock is granted, as NFS does. Safe
 * here, unlike in a write's handler: the locker holds no page. Only for
 * a file of this machine (a local node's), whose locks the node's own
 * processes share: on an SSH node they exclude only the mount's, which
 * share the pages anyway. Not with one thread (-s): a page dirty through
 * a shared mapping is written back as it is dropped, by a request that
 * thread would have to serve. */
static int fs_files_locked(const char *path, const struct fshandle *h, int rc)
{
	if (rc == 0 && path && !h->pt && fs_files_fd(h) >= 0 &&
	    !fs_ctx()->singlethread)
		fuse_invalidate_path(fuse_get_context()->fuse, path);
	return rc;
}

static int fs_lock(const char *path, struct fuse_file_info *fi, int cmd,
		   struct flock *fl)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;
	int rc;

	if (!h || !h->files)
		return -ENOLCK; /* values are replaced whole: nothing to lock */
	rc = fs_files_lock(h->files, h->pfh, fi->lock_owner, cmd, fl,
			   !fs_ctx()->singlethread);
	return cmd == F_GETLK || fl->l_type == F_UNLCK
		       ? rc
		       : fs_files_locked(path, h, rc);
}

static int fs_flock(const char *path, struct fuse_file_info *fi, int op)
{
	struct fshandle *h = (struct fshandle *)(uintptr_t)fi->fh;
	int rc;

	if (!h || !h->files)
		return -ENOLCK;
	rc = fs_files_flock(h->files, h->pfh, op, !fs_ctx()->singlethread);
	return (op & LOCK_UN) ? rc : fs_files_locked(path, h, rc);
}

static int fs_symlink(const char *target, const char *path)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_symlink(f, target, p.rel));
	return fs_symlink_tree(target, path);
}

/* libfuse hides a file removed while open under a new name: see
 * fs_files_hide. A value of the tree is reset (rm) at once. */
static int fs_hide(const char *from, const char *to)
{
	struct model_files *f;
	struct fspath p;
	int rc;

	if (!fs_in_files(from, &p)) {
		rc = fs_unlink_tree(from);
		return rc ? rc : fs_files_hide(NULL, NULL, to);
	}
	f = fs_files(&p, &rc);
	if (!f)
		return rc;
	rc = fs_files_hide(f, p.rel, to);
	if (rc)
		model_files_put(f);
	return rc;
}

static int fs_rename(const char *from, const char *to, unsigned int flags)
{
	struct fspath p, q;

	if (flags == 0 && fs_files_is_hidden_name(to))
		return fs_hide(from, to);
	if (fs_in_files(from, &p)) {
		if (!fs_in_files(to, &q) || strcmp(p.handle, q.handle) != 0 ||
		    strcmp(p.node, q.node) != 0)
			return -EXDEV; /* another node: copy, then remove */
		return FS_FILES(&p, model_files_rename(f, p.rel, q.rel, flags));
	}
	return fs_rename_tree(from, to, flags);
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_chmod(f, p.rel, mode));
	return fs_chmod_tree(path, mode, fi);
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct fshandle *h = fi ? (struct fshandle *)(uintptr_t)fi->fh : NULL;
	struct fspath p;

	if (h && h->files)
		return model_files_ftruncate(h->files, h->pfh, size);
	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_truncate(f, p.rel, size));
	return fs_truncate_tree(path, size, fi);
}

static int fs_utimens(const char *path, const struct timespec tv[2],
		      struct fuse_file_info *fi)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return FS_FILES(&p, model_files_utimens(f, p.rel, tv));
	return fs_utimens_tree(path, tv, fi);
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	struct fspath p;

	if (fs_in_files(path, &p))
		return fs_files_open(&p, fi->flags, 0, fi);
	return fs_open_tree(path, fi);
}

/* The model changed a path on its own: the kernel's caches of it are
 * dropped, and whoever polls it is woken. */
static void fs_changed(void *ctx, const char *path)
{
	struct fsctx *fs = ctx;

	inval_push(fs->inval, path);
	watch_changed(fs->watch, path);
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	struct fsctx *fs = fs_ctx();

	/* libfuse splices a local node's file to and from the kernel (see
	 * fs_read_buf); it reads requests with splice already. */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	fs->splice_write = conn->want & FUSE_CAP_SPLICE_WRITE;
	cfg->use_ino = 1; /* see fs_ino */
	/* A file removed while open is renamed by libfuse to a hidden name,
	 * which keeps it reachable by path (fstat asks by path) until the
	 * last close; fs_files_hide removes it for real and keeps it open. */
	cfg->hard_remove = 0;
	/* Every change the daemon makes on its own is invalidated (fs_done,
	 * inval), and so is all of a node's files/ after a command ran there;
	 * what processes left running on a node change in its files/ is seen
	 * when what the kernel learnt expires: within a second. */
	cfg->entry_timeout = 0.9;
	cfg->attr_timeout = 0.9;
	cfg->negative_timeout = 0;
	fs->inval = inval_start(fuse_get_context()->fuse, fs->mountpoint);
	fs->watch = watch_new();
	model_set_changed(fs->model, fs_changed, fs);
	return fs;
}

static void fs_destroy(void *data)
{
	struct fsctx *fs = data;

	if (fs->model)
		model_set_changed(fs->model, NULL, NULL);
	/* Releases still queued in the kernel at unmount never come. */
	opened_release_all();
	inval_stop(fs->inval);
	fs->inval = NULL;
	watch_free(fs->watch);
	fs->watch = NULL;
}

/*
 * getxattr/listxattr are left out on purpose: the kernel then answers
 * "not supported" itself after the first request, instead of asking for
 * security.selinux and posix ACLs on every entry of every `ls -l`.
 */
const struct fuse_operations fsops = {
	.getattr = fs_getattr,
	.readlink = fs_readlink,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.releasedir = fs_releasedir,
	.mkdir = fs_mkdir,
	.rmdir = fs_rmdir,
	.unlink = fs_unlink,
	.create = fs_create,
	.mknod = fs_mknod,
	.symlink = fs_symlink,
	.link = fs_link,
	.rename = fs_rename,
	.chmod = fs_chmod,
	.chown = fs_chown,
	.truncate = fs_truncate,
	.utimens = fs_utimens,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.read_buf = fs_read_buf,
	.write_buf = fs_write_buf,
	.flush = fs_flush,
	.fsync = fs_fsync,
	.release = fs_release,
	.statfs = fs_statfs,
	.lock = fs_lock,
	.flock = fs_flock,
	.poll = fs_poll,
	.init = fs_init,
	.destroy = fs_destroy,
};
