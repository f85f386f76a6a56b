/* The model: every contract and its values, held in memory under one lock
 * and written through to the state store before any change is visible.
 * It is the only interface the filesystem layer uses. */
#include "lifecycle/model.h"

#include "lifecycle/cluster.h"
#include "lifecycle/config.h"
#include "lifecycle/contract.h"
#include "lifecycle/model_priv.h"
#include "lifecycle/refresh.h"
#include "lifecycle/resolution.h"
#include "lifecycle/statedir.h"
#include "lifecycle/store.h"
#include "lifecycle/text.h"
#include "providers/provider.h"
#include "resolver/assumption.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct model_value {
	char *text; /* NULL: the default */
	int64_t mtime_ns;
};

struct model_contract {
	char name[CONTRACT_NAME_MAX + 1];
	int64_t created_ns;
	char *error; /* "" when the last operation succeeded */
	int64_t error_ns;
	int64_t assumptions_ns; /* last change of what resolution reads */
	/* Size of the candidates file, kept for stat (the text is rendered
	 * at each open); SIZE_MAX when stale. */
	size_t candidates_size;
	struct model_value *values; /* one per schema field */
};

static int model_fail_path(struct model *m, struct model_contract *c,
			   const char *relpath, int rc, const char *why);
static const char *model_contract_config(const struct model *m,
					 const char *contract, const char *key);
static int model_contract_next(struct model *m, const char *contract,
			       const char *tried, char **text, char *why,
			       size_t whylen);

static void model_notify(struct model *m, const struct model_contract *c,
			 const char *file)
{
	char path[256];

	snprintf(path, sizeof(path), "contracts/%s/%s", c->name, file);
	model_notify_path(m, path);
}

static struct model_contract *model_contract_new(const char *name,
						 int64_t created_ns)
{
	struct model_contract *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->values = calloc(contract_field_count(), sizeof(*c->values));
	c->error = strdup("");
	if (!c->values || !c->error) {
		free(c->values);
		free(c->error);
		free(c);
		return NULL;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->created_ns = created_ns;
	c->error_ns = created_ns;
	c->assumptions_ns = created_ns;
	c->candidates_size = SIZE_MAX;
	for (size_t i = 0; i < contract_field_count(); i++)
		c->values[i].mtime_ns = created_ns;
	return c;
}

static void model_contract_free(struct model_contract *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < contract_field_count(); i++)
		free(c->values[i].text);
	free(c->values);
	free(c->error);
	free(c);
}

/* Index where name is or would be inserted; *found tells which. */
static size_t model_search(const struct model *m, const char *name, int *found)
{
	size_t lo = 0, hi = m->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(m->contracts[mid]->name, name);

		if (cmp == 0) {
			*found = 1;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

static struct model_contract *model_find(const struct model *m,
					 const char *name)
{
	int found;
	size_t i = model_search(m, name, &found);

	return found ? m->contracts[i] : NULL;
}

static int model_insert(struct model *m, struct model_contract *c)
{
	int found;
	size_t i = model_search(m, c->name, &found);

	if (found)
		return -EEXIST;
	if (m->count == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct model_contract **v =
			realloc(m->contracts, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->contracts = v;
		m->cap = cap;
	}
	memmove(m->contracts + i + 1, m->contracts + i,
		(m->count - i) * sizeof(*m->contracts));
	m->contracts[i] = c;
	m->count++;
	return 0;
}

/* Whether a change of f makes the candidates file stale (the market
 * orders them by its price). */
static bool model_feeds_candidates(const struct contract_field *f)
{
	return f->role == CONTRACT_ROLE_ASSUMPTION ||
	       f->role == CONTRACT_ROLE_CLUSTER_TYPE ||
	       (f->dir == CONTRACT_DIR_CONFIG &&
		strcmp(f->name, "market") == 0);
}

/* Whether a change of f makes a stored resolution stale. */
static bool model_feeds_resolution(const struct contract_field *f)
{
	return model_feeds_candidates(f) || f->role == CONTRACT_ROLE_POLICY;
}

/* --- loading --- */

static int model_load_contract(void *ctx, const char *name, int64_t created_ns,
			       const char *error, int64_t error_ns)
{
	struct model *m = ctx;
	struct model_contract *c = model_contract_new(name, created_ns);

	if (!c)
		return -1;
	free(c->error);
	c->error = strdup(error);
	c->error_ns = error_ns;
	if (!c->error || model_insert(m, c)) {
		model_contract_free(c);
		return -1;
	}
	if (created_ns > m->contracts_ns)
		m->contracts_ns = created_ns;
	return 0;
}

static int model_load_value(void *ctx, const char *contract, const char *file,
			    const char *value, int64_t changed_ns)
{
	struct model *m = ctx;
	struct model_contract *c = model_find(m, contract);
	int f = contract_field_by_path(file);
	const struct contract_field *field;

	if (!c)
		return -1;
	if (f < 0)
		return 0; /* a file this version does not know: keep it stored
			   */
	field = contract_field_at((size_t)f);
	free(c->values[f].text);
	c->values[f].text = strdup(value);
	if (!c->values[f].text)
		return -1;
	c->values[f].mtime_ns = changed_ns;
	if (model_feeds_candidates(field) && changed_ns > c->assumptions_ns)
		c->assumptions_ns = changed_ns;
	return 0;
}

/* --- the state store at mount --- */

/* How often at most the last-good copy is taken while values change. */
#define MODEL_COPY_INTERVAL_S 300

/* What model_store_open found and did, for the report. */
struct model_opening {
	const struct model_options *opt;
	char path[PATH_MAX];	   /* STATEDIR/state.db */
	char copy[PATH_MAX + 16];  /* STATEDIR/state.db.last-good */
	char aside[PATH_MAX + 64]; /* where the old store went, "" none */
	char found[MODEL_ERR_MAX]; /* what was wrong with it */
	int64_t copied_ns;	   /* when the copy was taken (0 unknown) */
	int copy_rc;		   /* store_copy_info: 0 usable */
	bool restored;		   /* the copy became the store */
	size_t remains;		   /* clusters with remains, unknown */
};

/* Tell the user (opt->report) and, once it is open, the store's log. */
__attribute__((format(printf, 3, 4))) static void
model_report(struct model *m, const struct model_options *opt, const char *fmt,
	     ...)
{
	char line[2 * MODEL_ERR_MAX], err[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (opt->report)
		opt->report(opt->report_ctx, line);
	if (m->store)
		store_log(m->store, "store", model_now(), line, err,
			  sizeof(err));
}

/* A local date and time for messages. */
static void model_date(int64_t ns, char *out, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns <= 0 || !localtime_r(&t, &tm) ||
	    !strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(out, len, "an unknown time");
}

/* Append to the text in buf (len bytes), cutting what does not fit. */
__attribute__((format(printf, 3, 4))) static void
model_append(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strnlen(buf, len);
	va_list ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

struct model_remains_ctx {
	struct model *m;
	struct model_opening *o;
	bool quiet; /* count them only */
};

/* Report one cluster the state directory holds remains of, unless the
 * store knows it. */
static int model_remains_one(void *ctx, const struct statedir_remains *r)
{
	struct model_remains_ctx *x = ctx;
	const char *dir = x->o->opt->statedir;
	char what[MODEL_ERR_MAX] = "", procs[MODEL_ERR_MAX] = "";

	if (!r->node_dirs && !r->outputs && !r->keys && !r->nprocs &&
	    !r->hosts[0])
		return 0; /* empty directories only */
	if (x->m->store && store_cluster_known(x->m->store, r->handle) == 1)
		return 0;
	x->o->remains++;
	if (x->quiet)
		return 0;
	if (r->node_dirs)
		model_append(what, sizeof(what),
			     "%d local node director%s in %s/nodes/%s",
			     r->node_dirs, r->node_dirs == 1 ? "y" : "ies", dir,
			     r->handle);
	if (r->outputs)
		model_append(what, sizeof(what),
			     "%s%d file%s of command output in %s/clusters/%s",
			     what[0] ? ", " : "", r->outputs,
			     r->outputs == 1 ? "" : "s", dir, r->handle);
	if (r->hosts[0])
		model_append(what, sizeof(what), "%sits hostfile names %s",
			     what[0] ? ", " : "", r->hosts);
	if (r->keys)
		model_append(what, sizeof(what),
			     "%s%d SSH key file%s of an EC2 cluster in %s/keys "
			     "(its instances are tagged cclfs-%s-...)",
			     what[0] ? ", " : "", r->keys,
			     r->keys == 1 ? "" : "s", dir, r->handle);
	for (size_t i = 0; i < r->nprocs && i < STATEDIR_PROCS_MAX; i++)
		model_append(procs, sizeof(procs), "%s%d (%s, %s)",
			     procs[0] ? ", " : "", (int)r->procs[i].pid,
			     r->procs[i].comm, r->procs[i].instance);
	if (r->nprocs > STATEDIR_PROCS_MAX)
		model_append(procs, sizeof(procs), " and %zu more",
			     r->nprocs - STATEDIR_PROCS_MAX);
	model_report(x->m, x->o->opt,
		     "cluster %s is not in the state database, but %s holds "
		     "what it left: %s%s%s",
		     r->handle, dir, what[0] ? what : "no files",
		     r->nprocs ? "; processes of its local nodes still run: "
			       : "",
		     procs);
	return 0;
}

/* Report the clusters of the state directory the store does not know
 * (all of them when there is no store yet). */
static void model_remains(struct model *m, struct model_opening *o, bool quiet)
{
	struct model_remains_ctx x = {m, o, quiet};

	o->remains = 0;
	statedir_remains(o->opt->statedir, model_remains_one, &x);
}

/* Refuse a damaged store: what is wrong, and what -o recover would do. */
static void model_refuse_damaged(struct model_opening *o, char *err,
				 size_t errlen)
{
	char date[64];

	model_date(o->copied_ns, date, sizeof(date));
	if (o->copy_rc == 0)
		snprintf(err, errlen,
			 "%s. cclfs will not mount it: values would read as "
			 "their defaults. Mount with -o recover to move it "
			 "aside (it is kept) and mount from the last-good copy "
			 "%s of %s (changes made after it will be missing)",
			 o->found, o->copy, date);
	else
		snprintf(err, errlen,
			 "%s. cclfs will not mount it: values would read as "
			 "their defaults. There is no usable last-good copy "
			 "(%s); mount with -o recover to move it aside (it is "
			 "kept) and start with an empty store",
			 o->found,
			 o->copy_rc == -ENOENT ? "none was taken yet"
					       : "it is damaged too");
}

/* Refuse a missing or empty store beside what an earlier one left. */
static void model_refuse_missing(struct model_opening *o, bool wal, char *err,
				 size_t errlen)
{
	char date[64], what[2 * MODEL_ERR_MAX] = "";

	model_date(o->copied_ns, date, sizeof(date));
	if (o->remains)
		model_append(what, sizeof(what),
			     "the remains of %zu cluster%s (above)", o->remains,
			     o->remains == 1 ? "" : "s");
	if (wal)
		model_append(what, sizeof(what), "%sits write-ahead log %s-wal",
			     what[0] ? ", " : "", o->path);
	if (o->copy_rc == 0)
		model_append(what, sizeof(what),
			     "%sa last-good copy of it (%s, of %s)",
			     what[0] ? ", " : "", o->copy, date);
	err[0] = '\0';
	model_append(err, errlen,
		     "%s. cclfs will not start from an empty store beside what "
		     "an earlier one left (%s): that would leave it untracked. "
		     "Mount with -o recover ",
		     o->found, what);
	if (o->copy_rc == 0)
		model_append(err, errlen,
			     "to mount from the last-good copy (changes made "
			     "after %s will be missing)",
			     date);
	else
		model_append(err, errlen, "to start with an empty store");
	model_append(err, errlen,
		     " and have every cluster it does not know reported");
}

/* Load every contract and value of the store. */
static int model_store_load(struct model *m, char *err, size_t errlen)
{
	struct store_loader loader = {m, model_load_contract, model_load_value};

	return store_load(m->store, &loader, err, errlen);
}

/* Forget what model_store_load loaded, and close the store. */
static void model_store_unload(struct model *m)
{
	for (size_t i = 0; i < m->count; i++)
		model_contract_free(m->contracts[i]);
	m->count = 0;
	m->contracts_ns = 0;
	store_close(m->store);
	m->store = NULL;
}

/* Open the store of the state directory, refusing a damaged, missing or
 * empty one as the options say, and recovering it with -o recover. */
static int model_store_open(struct model *m, struct model_opening *o, char *err,
			    size_t errlen)
{
	const struct model_options *opt = o->opt;
	char wal[PATH_MAX + 8];
	struct stat sw;
	bool damaged, has_wal;
	int rc;

	if (opt->checked) {
		m->store = store_open(o->path, err, errlen);
		return m->store ? model_store_load(m, err, errlen) : -EIO;
	}
	snprintf(wal, sizeof(wal), "%s-wal", o->path);
	rc = statedir_check_writable(o->path, err, errlen);
	if (rc == 0 && access(wal, F_OK) == 0)
		rc = statedir_check_writable(wal, err, errlen);
	if (rc)
		return rc;
	m->store = store_open_checked(o->path, false, &rc, err, errlen);
	/* Every row must read back too: none may pass for a missing one. */
	if (m->store && (rc = model_store_load(m, err, errlen)) == 0)
		return 0;
	model_store_unload(m);
	if (rc != -EUCLEAN && rc != -ENOENT && rc != -ENODATA)
		return rc;
	damaged = rc == -EUCLEAN;
	o->found[0] = '\0';
	if (damaged)
		model_append(o->found, sizeof(o->found), "%s", err);
	else
		model_append(o->found, sizeof(o->found),
			     "state database %s is %s", o->path,
			     rc == -ENOENT ? "missing" : "empty");
	o->copy_rc = store_copy_info(o->copy, &o->copied_ns, err, errlen);
	has_wal = stat(wal, &sw) == 0 && sw.st_size > 0;
	if (damaged && !opt->recover) {
		model_refuse_damaged(o, err, errlen);
		return -EUCLEAN;
	}
	if (!damaged) {
		/* Listed now for a refusal, after the recovery else. */
		model_remains(m, o, opt->recover);
		if (!opt->recover &&
		    (o->remains || has_wal || o->copy_rc == 0)) {
			model_refuse_missing(o, has_wal, err, errlen);
			return -ENODATA;
		}
	}
	if (opt->recover) {
		if (o->copy_rc && o->copy_rc != -ENOENT) {
			char why[MODEL_ERR_MAX];

			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen,
				 "%s, and the last-good copy cannot be used "
				 "either: %s. Move both aside to start with an "
				 "empty store",
				 o->found, why);
			return -EUCLEAN;
		}
		if ((access(o->path, F_OK) == 0 || access(wal, F_OK) == 0) &&
		    (rc = statedir_move_aside(
			     o->path, damaged ? "damaged" : "empty", o->aside,
			     sizeof(o->aside), err, errlen)))
			return rc;
		if (o->copy_rc == 0) {
			rc = statedir_copy_file(o->copy, o->path, err, errlen);
			if (rc)
				return rc;
			o->restored = true;
		}
	}
	m->store = store_open_checked(o->path, true, &rc, err, errlen);
	return m->store ? model_store_load(m, err, errlen) : rc;
}

/* Say what a recovery did and what the state directory holds that the
 * store does not know. */
static void model_store_report(struct model *m, struct model_opening *o)
{
	char date[64];

	if (!o->opt->recover)
		return;
	model_date(o->copied_ns, date, sizeof(date));
	if (o->aside[0])
		model_report(m, o->opt, "recover: %s; it was moved aside to %s",
			     o->found, o->aside);
	if (o->restored)
		model_report(m, o->opt,
			     "recover: mounted from the last-good copy taken "
			     "%s: changes made after it (contracts, values, "
			     "resolutions, clusters deployed or changed) may "
			     "be missing",
			     date);
	else if (o->found[0])
		model_report(m, o->opt,
			     "recover: there was no last-good copy: mounted "
			     "with an empty store");
	model_remains(m, o, false);
	if (o->remains)
		model_report(m, o->opt,
			     "recover: %zu cluster%s above %s not tracked by "
			     "cclfs: stop %s processes and remove %s files "
			     "when you no longer need them",
			     o->remains, o->remains == 1 ? "" : "s",
			     o->remains == 1 ? "is" : "are",
			     o->remains == 1 ? "its" : "their",
			     o->remains == 1 ? "its" : "their");
}

/* From the copy keeper's thread: a copy could not be taken. */
static void model_copy_failed(void *ctx, const char *why)
{
	struct model *m = ctx;

	pthread_mutex_lock(&m->lock);
	model_log(m, "store", "the last-good copy was not taken: %s", why);
	pthread_mutex_unlock(&m->lock);
}

struct model *model_open(const struct model_options *opt, char *err,
			 size_t errlen)
{
	struct model *m = calloc(1, sizeof(*m));
	struct model_opening *o = calloc(1, sizeof(*o));

	if (!m || !o) {
		snprintf(err, errlen, "out of memory");
		free(m);
		free(o);
		return NULL;
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->changed_cond, NULL);
	m->config = opt->config;
	m->registry = opt->providers ? opt->providers : provider_registry;
	m->contract_config = model_contract_config;
	m->contract_next = model_contract_next;
	m->verbose = opt->verbose;
	m->changed = opt->changed;
	m->changed_ctx = opt->changed_ctx;
	m->contracts_ns = 0; /* the newest contract's, once loaded */
	o->opt = opt;
	o->copy_rc = -ENOENT;
	if (snprintf(o->path, sizeof(o->path), "%s/state.db", opt->statedir) >=
	    (int)sizeof(o->path)) {
		snprintf(err, errlen, "state directory name is too long");
		goto fail;
	}
	snprintf(o->copy, sizeof(o->copy), "%s.last-good", o->path);
	if (model_store_open(m, o, err, errlen))
		goto fail;
	if (m->contracts_ns == 0)
		m->contracts_ns = model_now();
	m->resolution =
		resolution_env_open(opt->config, m->registry, err, errlen);
	if (!m->resolution)
		goto fail;
	snprintf(m->statedir, sizeof(m->statedir), "%s", opt->statedir);
	if (cluster_open(m, err, errlen))
		goto fail;
	if (refresh_open(m, err, errlen))
		goto fail;
	if (!opt->checked) {
		char why[MODEL_ERR_MAX];

		model_store_report(m, o);
		/* Everything read back: this store is a good one to keep. */
		if (store_copy(o->path, o->copy, why, sizeof(why)))
			model_report(m, opt,
				     "the last-good copy was not taken: %s",
				     why);
	}
	store_keep_copy(m->store, o->copy, MODEL_COPY_INTERVAL_S,
			model_copy_failed, m);
	free(o);
	return m;
fail:
	free(o);
	model_close(m);
	return NULL;
}

void model_close(struct model *m)
{
	if (!m)
		return;
	refresh_close(m);
	cluster_close(m);
	for (size_t i = 0; i < m->count; i++)
		model_contract_free(m->contracts[i]);
	free(m->contracts);
	resolution_env_close(m->resolution);
	store_close(m->store);
	pthread_cond_destroy(&m->changed_cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void model_set_changed(struct model *m, void (*changed)(void *, const char *),
		       void *ctx)
{
	pthread_mutex_lock(&m->lock);
	m->changed = changed;
	m->changed_ctx = ctx;
	pthread_mutex_unlock(&m->lock);
}

/* --- contracts/ --- */

int model_contracts_stat(struct model *m, struct model_attr *attr)
{
	pthread_mutex_lock(&m->lock);
	attr->size = 0;
	attr->mtime_ns = m->contracts_ns;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int model_contracts_list(struct model *m,
			 int (*fn)(void *ctx, const char *name,
				   const struct model_attr *attr),
			 void *ctx)
{
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->count; i++) {
		struct model_attr a = {0, m->contracts[i]->created_ns};

		if (fn(ctx, m->contracts[i]->name, &a))
			break;
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

int model_contract_stat(struct model *m, const char *name,
			struct model_attr *attr)
{
	struct model_contract *c;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = model_find(m, name);
	if (c) {
		attr->size = 0;
		attr->mtime_ns = c->created_ns;
	} else {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_contract_create(struct model *m, const char *name)
{
	char err[MODEL_ERR_MAX];
	struct model_contract *c;
	int64_t now = model_now();
	int rc;

	if (!contract_name_valid(name)) {
		pthread_mutex_lock(&m->lock);
		model_log(m, "contracts",
			  "refused mkdir contracts/%.80s: a contract name is 1 "
			  "to 64 letters, digits, '.', '_' or '-'",
			  name);
		pthread_mutex_unlock(&m->lock);
		return -EINVAL;
	}
	c = model_contract_new(name, now);
	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	if (model_find(m, name)) {
		rc = -EEXIST;
	} else if ((rc = store_contract_add(m->store, name, now, err,
					    sizeof(err)))) {
		model_log(m, "contracts", "mkdir contracts/%s failed: %s", name,
			  err);
	} else {
		rc = model_insert(m, c);
		if (rc == 0) {
			c = NULL;
			m->contracts_ns = now;
			model_log(m, "contracts", "created contracts/%s", name);
		}
	}
	pthread_mutex_unlock(&m->lock);
	model_contract_free(c);
	return rc;
}

int model_contract_remove(struct model *m, const char *name)
{
	char err[MODEL_ERR_MAX];
	int found, rc = 0;
	size_t i;

	pthread_mutex_lock(&m->lock);
	i = model_search(m, name, &found);
	if (!found) {
		rc = -ENOENT;
	} else if (cluster_contract_busy(m, name, err, sizeof(err))) {
		model_fail_path(m, m->contracts[i], "", -EBUSY, err);
		rc = -EBUSY;
	} else if ((rc = store_contract_remove(m->store, name, err,
					       sizeof(err)))) {
		model_fail_path(m, m->contracts[i], "", rc, err);
	} else {
		model_contract_free(m->contracts[i]);
		memmove(m->contracts + i, m->contracts + i + 1,
			(m->count - i - 1) * sizeof(*m->contracts));
		m->count--;
		m->contracts_ns = model_now();
		model_log(m, "contracts", "removed contracts/%s", name);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* --- files of a contract --- */

/* The current value of a value field: its text, or the default. */
static const char *model_value(const struct model_contract *c, size_t f)
{
	const char *t = c->values[f].text;

	return t ? t : contract_field_at(f)->def;
}

/* Values of the contract, as the resolution reads them. */
static const char *model_value_cb(void *ctx, int field)
{
	return model_value(ctx, (size_t)field);
}

/* The content of a file now, malloc'd, or NULL when out of memory. */
static char *model_render(struct model *m, struct model_contract *c, size_t f,
			  size_t *len)
{
	const struct contract_field *field = contract_field_at(f);
	const char *v = "";
	char *out;
	size_t n;

	switch (field->role) {
	case CONTRACT_ROLE_ERROR:
		v = c->error;
		break;
	case CONTRACT_ROLE_RESOLUTION:
		v = model_value(c, f); /* stored whole, newlines included */
		n = strlen(v);
		out = malloc(n + 1);
		if (out)
			memcpy(out, v, n + 1);
		*len = n;
		return out;
	case CONTRACT_ROLE_CANDIDATES:
		out = resolution_candidates(m->resolution, model_value_cb, c);
		*len = out ? strlen(out) : 0;
		if (out)
			c->candidates_size = *len;
		return out;
	case CONTRACT_ROLE_RESOLVE:
	case CONTRACT_ROLE_DEPLOY:
		v = "";
		break;
	default:
		v = model_value(c, f);
		break;
	}
	n = strlen(v);
	out = malloc(n + 2);
	if (!out)
		return NULL;
	memcpy(out, v, n);
	if (n)
		out[n++] = '\n';
	out[n] = '\0';
	*len = n;
	return out;
}

static int64_t model_mtime(const struct model_contract *c, size_t f)
{
	switch (contract_field_at(f)->role) {
	case CONTRACT_ROLE_ERROR:
		return c->error_ns;
	case CONTRACT_ROLE_CANDIDATES:
		return c->assumptions_ns;
	default:
		return c->values[f].mtime_ns;
	}
}

static int model_lookup(struct model *m, const char *contract, int field,
			struct model_contract **c)
{
	if (field < 0 || (size_t)field >= contract_field_count())
		return -ENOENT;
	*c = model_find(m, contract);
	return *c ? 0 : -ENOENT;
}

int model_file_stat(struct model *m, const char *contract, int field,
		    struct model_attr *attr)
{
	struct model_contract *c;
	const struct contract_field *f;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0) {
		f = contract_field_at((size_t)field);
		attr->mtime_ns = model_mtime(c, (size_t)field);
		if (f->role == CONTRACT_ROLE_ERROR) {
			attr->size = *c->error ? strlen(c->error) + 1 : 0;
		} else if (f->role == CONTRACT_ROLE_RESOLUTION) {
			attr->size = strlen(model_value(c, (size_t)field));
		} else if (f->file == CONTRACT_FILE_TRIGGER) {
			attr->size = 0;
		} else if (f->role == CONTRACT_ROLE_CANDIDATES) {
			if (c->candidates_size == SIZE_MAX)
				free(model_render(m, c, (size_t)field,
						  &c->candidates_size));
			attr->size = c->candidates_size;
		} else {
			size_t n = strlen(model_value(c, (size_t)field));

			attr->size = n ? n + 1 : 0;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_file_read(struct model *m, const char *contract, int field,
		    char **buf, size_t *len)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0) {
		*buf = model_render(m, c, (size_t)field, len);
		if (!*buf)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* Record why an operation on relpath of c failed: error file, log. */
static int model_fail_path(struct model *m, struct model_contract *c,
			   const char *relpath, int rc, const char *why)
{
	char raw[MODEL_ERR_MAX], msg[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	int64_t now = model_now();
	char *copy;

	snprintf(raw, sizeof(raw), "contracts/%s%s%s: %s", c->name,
		 *relpath ? "/" : "", relpath, why);
	text_escape(raw, msg, sizeof(msg));
	/* The error file tells why even when the store cannot keep it (a
	 * full disk, a read-only store): then it lasts until the next
	 * success or unmount. */
	copy = strdup(msg);
	if (copy) {
		free(c->error);
		c->error = copy;
		c->error_ns = now;
		model_notify(m, c, "error");
	}
	store_contract_error(m->store, c->name, msg, now, err, sizeof(err));
	model_log(m, "contracts", "%s", msg);
	return rc;
}

static int model_fail(struct model *m, struct model_contract *c, size_t f,
		      int rc, const char *why)
{
	return model_fail_path(m, c, contract_field_at(f)->path, rc, why);
}

/* Clear the error inside the current transaction (no memory change yet). */
static int model_clear_error_stored(struct model *m, struct model_contract *c,
				    int64_t now, char *err, size_t errlen)
{
	if (!*c->error)
		return 0;
	return store_contract_error(m->store, c->name, "", now, err, errlen);
}

static void model_clear_error(struct model *m, struct model_contract *c,
			      int64_t now)
{
	if (!*c->error)
		return;
	c->error[0] = '\0';
	c->error_ns = now;
	model_notify(m, c, "error");
}

/*
 * Commit new values of fields f (value `text`) and, when it changes what
 * resolution reads, clear the stale resolution; clear the error. One
 * transaction; memory changes only once it is durable.
 */
static int model_commit(struct model *m, struct model_contract *c, size_t f,
			const char *text, int64_t now, bool clear_error)
{
	const struct contract_field *field = contract_field_at(f);
	int res = contract_field_find(CONTRACT_DIR_TOP, "resolution");
	bool clear_res =
		model_feeds_resolution(field) && *model_value(c, (size_t)res);
	char err[MODEL_ERR_MAX];
	char *copy = strdup(text);
	int rc;

	if (!copy)
		return model_fail(m, c, f, -ENOMEM, "out of memory");
	if ((rc = store_begin(m->store, err, sizeof(err))) ||
	    (rc = store_value_put(m->store, c->name, field->path, text, now,
				  err, sizeof(err))) ||
	    (clear_res && (rc = store_value_put(m->store, c->name, "resolution",
						"", now, err, sizeof(err)))) ||
	    (clear_error &&
	     (rc = model_clear_error_stored(m, c, now, err, sizeof(err)))) ||
	    (rc = store_commit(m->store, err, sizeof(err)))) {
		store_rollback(m->store);
		free(copy);
		return model_fail(m, c, f, rc, err);
	}
	free(c->values[f].text);
	c->values[f].text = copy;
	c->values[f].mtime_ns = now;
	if (model_feeds_candidates(field)) {
		c->assumptions_ns = now;
		c->candidates_size = SIZE_MAX;
		model_notify(m, c, "candidates");
	}
	if (clear_res) {
		free(c->values[res].text);
		c->values[res].text = NULL;
		c->values[res].mtime_ns = now;
		model_notify(m, c, "resolution");
	}
	if (clear_error)
		model_clear_error(m, c, now);
	return 0;
}

/* Run resolution now and store its result. */
static int model_resolve(struct model *m, struct model_contract *c, size_t f,
			 int64_t now)
{
	char why[MODEL_ERR_MAX], err[MODEL_ERR_MAX];
	int res = contract_field_find(CONTRACT_DIR_TOP, "resolution");
	char *text = NULL;
	int rc;

	rc = resolution_run(m->resolution, model_value_cb, c, &text, why,
			    sizeof(why));
	if (rc)
		return model_fail(m, c, f, rc, why);
	if ((rc = store_begin(m->store, err, sizeof(err))) ||
	    (rc = store_value_put(m->store, c->name, "resolution", text, now,
				  err, sizeof(err))) ||
	    (rc = store_value_put(m->store, c->name, contract_field_at(f)->path,
				  "", now, err, sizeof(err))) ||
	    (rc = model_clear_error_stored(m, c, now, err, sizeof(err))) ||
	    (rc = store_commit(m->store, err, sizeof(err)))) {
		store_rollback(m->store);
		free(text);
		return model_fail(m, c, f, rc, err);
	}
	if (strcmp(model_value(c, (size_t)res), text) != 0)
		model_notify(m, c, "resolution");
	free(c->values[res].text);
	c->values[res].text = text;
	c->values[res].mtime_ns = now;
	c->values[f].mtime_ns = now;
	model_clear_error(m, c, now);
	model_log(m, "contracts", "contracts/%s resolved", c->name);
	return 0;
}

/* The next candidate of a cluster that found no capacity: the contract
 * resolved without the offers tried, kept as its resolution (what was
 * launched is what it says). */
static int model_contract_next(struct model *m, const char *contract,
			       const char *tried, char **text, char *why,
			       size_t whylen)
{
	struct model_contract *c = model_find(m, contract);
	int res = contract_field_find(CONTRACT_DIR_TOP, "resolution");
	int64_t now = model_now();
	char err[MODEL_ERR_MAX];
	char *copy;
	int rc;

	if (!c) {
		snprintf(why, whylen, "contracts/%s is gone", contract);
		return -ENOENT;
	}
	rc = resolution_run_except(m->resolution, model_value_cb, c, tried,
				   text, why, whylen);
	if (rc)
		return rc;
	copy = strdup(*text);
	if (!copy || (rc = store_value_put(m->store, c->name, "resolution",
					   *text, now, err, sizeof(err)))) {
		free(copy);
		free(*text);
		*text = NULL;
		snprintf(why, whylen, "%s", copy ? err : "out of memory");
		return rc ? rc : -ENOMEM;
	}
	free(c->values[res].text);
	c->values[res].text = copy;
	c->values[res].mtime_ns = now;
	model_notify(m, c, "resolution");
	return 0;
}

/* A config/ parameter: the contract's value, else cclfs.conf's [defaults]
 * one, else "". */
static const char *model_config(const struct model *m,
				const struct model_contract *c, const char *key)
{
	int f = contract_field_find(CONTRACT_DIR_CONFIG, key);
	const char *v = f >= 0 ? model_value(c, (size_t)f) : "";
	const char *d = config_get(m->config, "defaults", key);

	return *v ? v : d ? d : "";
}

static const char *model_contract_config(const struct model *m,
					 const char *contract, const char *key)
{
	const struct model_contract *c = model_find(m, contract);

	return c ? model_config(m, c, key) : "";
}

/* The key file for SSH logins: config/keyfile, else the -i of sshflags. */
static void model_keyfile(const struct model *m, const struct model_contract *c,
			  char *out, size_t len)
{
	const char *flags = model_config(m, c, "sshflags");
	const char *k = model_config(m, c, "keyfile");

	snprintf(out, len, "%s", k);
	for (const char *p = flags; !*k && (p = strstr(p, "-i"));) {
		size_t n;

		if (p != flags && p[-1] != ' ' && p[-1] != '\t') {
			p += 2;
			continue;
		}
		p += 2;
		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		snprintf(out, len, "%.*s", (int)n, p);
		break;
	}
}

static int model_fire(struct model *m, struct model_contract *c, size_t f,
		      const char *arg, size_t len)
{
	const struct contract_field *field = contract_field_at(f);
	int64_t now = model_now();
	int rc;

	char name[CONTRACT_NAME_MAX + 1], why[MODEL_ERR_MAX];

	if (field->role == CONTRACT_ROLE_RESOLVE)
		return model_resolve(m, c, f, now);
	/* deploy: check the name, resolve, then record the cluster and hand
	 * its creation to the background jobs. */
	rc = contract_cluster_name(arg, len, name, sizeof(name), why,
				   sizeof(why));
	if (rc)
		return model_fail(m, c, f, rc, why);
	rc = model_resolve(m, c, f, now);
	if (rc)
		return rc;
	{
		char keyfile[PATH_MAX];
		struct cluster_request req = {
			.contract = c->name,
			.user = model_config(m, c, "user"),
			.keyfile = keyfile,
			.name = name,
			.cluster_type = model_value_cb(
				c, contract_field_find(CONTRACT_DIR_TOP,
						       "cluster_type")),
			.node_count = atoi(model_value_cb(
				c, contract_field_find(CONTRACT_DIR_TOP,
						       "node_count"))),
			.process_count = atoi(model_value_cb(
				c, contract_field_find(CONTRACT_DIR_TOP,
						       "node_process_count"))),
			.resolution = model_value_cb(
				c, contract_field_find(CONTRACT_DIR_TOP,
						       "resolution")),
		};

		char options[1024];
		size_t o = 0;

		/* The config/ files providers read, as NAME=VALUE lines. */
		options[0] = '\0';
		for (size_t i = 0; i < contract_field_count(); i++) {
			const struct contract_field *cf = contract_field_at(i);
			const char *v;

			if (!cf->to_provider)
				continue;
			v = model_config(m, c, cf->name);
			if (*v && o < sizeof(options))
				o += (size_t)snprintf(options + o,
						      sizeof(options) - o,
						      "%s=%s\n", cf->name, v);
		}
		/* The cloud providers place MPI clusters' nodes close. */
		if (req.cluster_type && *req.cluster_type &&
		    o < sizeof(options))
			snprintf(options + o, sizeof(options) - o,
				 "cluster_type=%s\n", req.cluster_type);
		req.options = options;
		model_keyfile(m, c, keyfile, sizeof(keyfile));
		rc = cluster_deploy(m, &req, why, sizeof(why));
	}
	if (rc)
		return model_fail(m, c, f, rc, why);
	return 0;
}

int model_file_write(struct model *m, const char *contract, int field,
		     const char *text, size_t len)
{
	char norm[CONTRACT_VALUE_MAX + 1], why[MODEL_ERR_MAX];
	const struct contract_field *f;
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc)
		goto out;
	f = contract_field_at((size_t)field);
	if (f->file == CONTRACT_FILE_GENERATED) {
		rc = model_fail(m, c, (size_t)field, -EACCES,
				"this file is read-only; cclfs writes it");
	} else if (f->file == CONTRACT_FILE_TRIGGER) {
		rc = model_fire(m, c, (size_t)field, text, len);
	} else {
		rc = contract_normalise(f, text, len, norm, sizeof(norm), why,
					sizeof(why));
		/* A type name must be one the catalog knows; it is kept in the
		 * catalog's spelling. */
		if (rc == 0 && f->role == CONTRACT_ROLE_ASSUMPTION &&
		    assumption_fields[f->assumption].kind == ASSUMPTION_TYPE &&
		    *norm) {
			char name[CONTRACT_VALUE_MAX + 1];

			rc = resolution_check_name(m->resolution, f->assumption,
						   norm, name, sizeof(name),
						   why, sizeof(why));
			if (rc == 0)
				memcpy(norm, name, strlen(name) + 1);
		}
		if (rc)
			rc = model_fail(m, c, (size_t)field, rc, why);
		else if (strcmp(norm, model_value(c, (size_t)field)) == 0)
			model_clear_error(m, c, model_now());
		else
			rc = model_commit(m, c, (size_t)field, norm,
					  model_now(), true);
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_file_value(struct model *m, const char *contract, int field,
		     char **value)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0) {
		*value = strdup(model_value(c, (size_t)field));
		if (!*value)
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_file_restore(struct model *m, const char *contract, int field,
		       const char *value)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0 &&
	    contract_field_at((size_t)field)->file == CONTRACT_FILE_VALUE &&
	    strcmp(model_value(c, (size_t)field), value) != 0)
		rc = model_commit(m, c, (size_t)field, value, model_now(),
				  false);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_file_touch(struct model *m, const char *contract, int field)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0 &&
	    contract_field_at((size_t)field)->file == CONTRACT_FILE_TRIGGER)
		rc = model_fire(m, c, (size_t)field, "", 0);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* Reset field f to its default; 0 when there was nothing to do. */
static int model_reset_locked(struct model *m, struct model_contract *c,
			      size_t f, int64_t now)
{
	const struct contract_field *field = contract_field_at(f);
	char err[MODEL_ERR_MAX];

	if (field->role == CONTRACT_ROLE_ERROR) {
		int rc;

		if (!*c->error)
			return 0;
		rc = store_contract_error(m->store, c->name, "", now, err,
					  sizeof(err));
		if (rc)
			return model_fail(m, c, f, rc, err);
		model_clear_error(m, c, now);
		return 0;
	}
	if (field->file != CONTRACT_FILE_VALUE ||
	    strcmp(model_value(c, f), field->def) == 0)
		return 0;
	return model_commit(m, c, f, field->def, now, true);
}

int model_file_reset(struct model *m, const char *contract, int field)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0)
		rc = model_reset_locked(m, c, (size_t)field, model_now());
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_dir_reset(struct model *m, const char *contract, int dir)
{
	struct model_contract *c;
	int64_t now = model_now();
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	c = model_find(m, contract);
	if (!c)
		rc = -ENOENT;
	for (size_t f = 0; c && rc == 0 && f < contract_field_count(); f++)
		if ((int)contract_field_at(f)->dir == dir)
			rc = model_reset_locked(m, c, f, now);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_file_refuse(struct model *m, const char *contract, int field,
		      int errnum, const char *reason)
{
	struct model_contract *c;
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = model_lookup(m, contract, field, &c);
	if (rc == 0)
		rc = model_fail(m, c, (size_t)field, -errnum, reason);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int model_contract_refuse(struct model *m, const char *contract,
			  const char *relpath, int errnum, const char *reason)
{
	struct model_contract *c;
	int rc = -errnum;

	pthread_mutex_lock(&m->lock);
	c = model_find(m, contract);
	if (c)
		model_fail_path(m, c, relpath, rc, reason);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* --- catalog/ --- */

size_t model_catalog_providers(struct model *m, const char **out, size_t max)
{
	return resolution_providers(m->resolution, out, max);
}

const char *model_catalog_type(struct model *m, const char *provider, size_t i)
{
	return resolution_provider_type(m->resolution, provider, i);
}

int model_catalog_type_exists(struct model *m, const char *provider,
			      const char *type)
{
	return resolution_type_exists(m->resolution, provider, type);
}

const char *model_catalog_feature_name(size_t i)
{
	return resolution_feature_name(i);
}

int model_catalog_feature(struct model *m, const char *provider,
			  const char *type, const char *feature, char **buf,
			  size_t *len)
{
	return resolution_feature(m->resolution, provider, type, feature, buf,
				  len);
}

int64_t model_catalog_ns(struct model *m)
{
	return refresh_catalog_ns(m);
}

const char *model_catalog_region(struct model *m, const char *provider,
				 size_t i)
{
	return resolution_provider_region(m->resolution, provider, i);
}

int model_catalog_region_types(struct model *m, const char *provider,
			       const char *region, char **names, size_t *len)
{
	return resolution_region_types(m->resolution, provider, region, names,
				       len);
}

bool model_catalog_offered(struct model *m, const char *provider,
			   const char *region, const char *type)
{
	return resolution_offered(m->resolution, provider, region, type);
}

bool model_catalog_refresh_exists(struct model *m, const char *provider)
{
	return refresh_offered(m, provider);
}

int model_catalog_refresh_read(struct model *m, const char *provider,
			       char **buf, size_t *len, int64_t *mtime_ns)
{
	return refresh_state(m, provider, buf, len, mtime_ns);
}

int model_catalog_refresh_write(struct model *m, const char *provider,
				const char *data, size_t len)
{
	return refresh_request(m, provider, data, len);
}
