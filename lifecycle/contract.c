/* The contract schema: every file a contract directory holds (values,
 * triggers, generated files), where it sits, its default, and the
 * validation and normal form of the values written to it. */
#include "lifecycle/contract.h"

#include "lifecycle/text.h"

#include "providers/provider.h"
#include "resolver/assumption.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum contract_type {
	TYPE_NONE,
	TYPE_CLUSTER_TYPE,
	TYPE_POSITIVE,
	TYPE_ASSUMPTION,
	TYPE_USER,
	TYPE_LINE,
	TYPE_WORD,
	TYPE_BOOL,
	TYPE_THREADLEVEL,
	TYPE_POLICY,
	TYPE_ENVIRONMENT,
	TYPE_MARKET,
	TYPE_CIDR,
	TYPE_AMOUNT, /* a positive decimal: dollars, minutes, seconds */
	TYPE_ACTION, /* what the daemon does on its own: interrupt, terminate */
};

/* Largest node_count / node_process_count accepted. */
#define CONTRACT_POSITIVE_MAX 100000

static const char *const contract_dir_names[CONTRACT_DIR_COUNT] = {
	"", "manager", "worker", "config", "clusters"};

/* The configuration parameters of config/, with their validators; those
 * the cloud providers read go to them in the node options too. */
static const struct {
	const char *name;
	enum contract_type type;
	bool to_provider;
} contract_config[] = {
	{"user", TYPE_USER, false},
	{"sshflags", TYPE_LINE, false},
	{"tunneled", TYPE_BOOL, false},
	{"exename", TYPE_LINE, false},
	{"exeflags", TYPE_LINE, false},
	{"directory", TYPE_LINE, false},
	{"threadlevel", TYPE_THREADLEVEL, false},
	{"mpiflags", TYPE_LINE, false},
	{"resolve_policy", TYPE_POLICY, false},
	{"keyfile", TYPE_LINE, false},
	{"environment", TYPE_ENVIRONMENT, false},
	{"market", TYPE_MARKET, true},
	{"recover", TYPE_BOOL, true},
	{"failover", TYPE_POSITIVE, true},
	{"ssh_cidr", TYPE_CIDR, true},
	{"zone", TYPE_WORD, true},
	{"budget", TYPE_AMOUNT, false},
	{"budget_action", TYPE_ACTION, false},
	{"idle_minutes", TYPE_AMOUNT, false},
	{"idle_action", TYPE_ACTION, false},
	{"wait_timeout", TYPE_AMOUNT, false},
};
#define CONTRACT_CONFIG_COUNT                                                  \
	(sizeof(contract_config) / sizeof(contract_config[0]))

/* 3 + 18 + 2 triggers + 3 generated at the top, 18 per role, the config. */
#define CONTRACT_FIELDS_MAX 128

static struct contract_field contract_fields[CONTRACT_FIELDS_MAX];
static char contract_paths[CONTRACT_FIELDS_MAX][64];
static size_t contract_nfields;
static pthread_once_t contract_once = PTHREAD_ONCE_INIT;

static void contract_add_for(enum contract_dir dir, const char *name,
			     enum contract_file file, enum contract_role role,
			     enum contract_type type, int assumption,
			     const char *def, bool to_provider)
{
	size_t i = contract_nfields++;
	struct contract_field *f = &contract_fields[i];

	if (dir == CONTRACT_DIR_TOP)
		snprintf(contract_paths[i], sizeof(contract_paths[i]), "%s",
			 name);
	else
		snprintf(contract_paths[i], sizeof(contract_paths[i]), "%s/%s",
			 contract_dir_names[dir], name);
	*f = (struct contract_field){
		.dir = dir,
		.name = name,
		.path = contract_paths[i],
		.file = file,
		.role = role,
		.type = type,
		.assumption = assumption,
		.def = def,
		.owner_only =
			type == TYPE_ENVIRONMENT || role == CONTRACT_ROLE_ERROR,
		.to_provider = to_provider || role == CONTRACT_ROLE_PROVIDER,
	};
}

static void contract_add(enum contract_dir dir, const char *name,
			 enum contract_file file, enum contract_role role,
			 enum contract_type type, int assumption,
			 const char *def)
{
	contract_add_for(dir, name, file, role, type, assumption, def, false);
}

static void contract_add_assumptions(enum contract_dir dir)
{
	for (size_t i = 0; i < assumption_field_count; i++)
		contract_add(dir, assumption_fields[i].name,
			     CONTRACT_FILE_VALUE, CONTRACT_ROLE_ASSUMPTION,
			     TYPE_ASSUMPTION, (int)i, "");
}

/* While the schema is being built (contract_field_find would wait for
 * the build itself). */
static bool contract_has_config(const char *name)
{
	for (size_t i = 0; i < contract_nfields; i++)
		if (contract_fields[i].dir == CONTRACT_DIR_CONFIG &&
		    strcmp(contract_fields[i].name, name) == 0)
			return true;
	return false;
}

static void contract_build(void)
{
	contract_add(CONTRACT_DIR_TOP, "cluster_type", CONTRACT_FILE_VALUE,
		     CONTRACT_ROLE_CLUSTER_TYPE, TYPE_CLUSTER_TYPE, -1,
		     "PeerWorkers");
	contract_add(CONTRACT_DIR_TOP, "node_count", CONTRACT_FILE_VALUE,
		     CONTRACT_ROLE_PLAIN, TYPE_POSITIVE, -1, "1");
	contract_add(CONTRACT_DIR_TOP, "node_process_count",
		     CONTRACT_FILE_VALUE, CONTRACT_ROLE_PLAIN, TYPE_POSITIVE,
		     -1, "1");
	contract_add_assumptions(CONTRACT_DIR_TOP);
	contract_add(CONTRACT_DIR_TOP, "resolve", CONTRACT_FILE_TRIGGER,
		     CONTRACT_ROLE_RESOLVE, TYPE_NONE, -1, "");
	contract_add(CONTRACT_DIR_TOP, "resolution", CONTRACT_FILE_GENERATED,
		     CONTRACT_ROLE_RESOLUTION, TYPE_NONE, -1, "");
	contract_add(CONTRACT_DIR_TOP, "candidates", CONTRACT_FILE_GENERATED,
		     CONTRACT_ROLE_CANDIDATES, TYPE_NONE, -1, "");
	contract_add(CONTRACT_DIR_TOP, "deploy", CONTRACT_FILE_TRIGGER,
		     CONTRACT_ROLE_DEPLOY, TYPE_NONE, -1, "");
	contract_add(CONTRACT_DIR_TOP, "error", CONTRACT_FILE_GENERATED,
		     CONTRACT_ROLE_ERROR, TYPE_NONE, -1, "");
	contract_add_assumptions(CONTRACT_DIR_MANAGER);
	contract_add_assumptions(CONTRACT_DIR_WORKER);
	for (size_t i = 0; i < CONTRACT_CONFIG_COUNT; i++)
		contract_add_for(CONTRACT_DIR_CONFIG, contract_config[i].name,
				 CONTRACT_FILE_VALUE,
				 contract_config[i].type == TYPE_POLICY
					 ? CONTRACT_ROLE_POLICY
					 : CONTRACT_ROLE_PLAIN,
				 contract_config[i].type, -1, "",
				 contract_config[i].to_provider);
	/* Then what the providers read, each name once. */
	for (size_t p = 0; provider_registry[p]; p++)
		for (const char *const *k = provider_registry[p]->config_keys;
		     k && *k; k++)
			if (!contract_has_config(*k) &&
			    contract_nfields < CONTRACT_FIELDS_MAX)
				contract_add(CONTRACT_DIR_CONFIG, *k,
					     CONTRACT_FILE_VALUE,
					     CONTRACT_ROLE_PROVIDER, TYPE_WORD,
					     -1, "");
}

size_t contract_field_count(void)
{
	pthread_once(&contract_once, contract_build);
	return contract_nfields;
}

const struct contract_field *contract_field_at(size_t i)
{
	pthread_once(&contract_once, contract_build);
	return i < contract_nfields ? &contract_fields[i] : NULL;
}

int contract_field_find(enum contract_dir dir, const char *name)
{
	pthread_once(&contract_once, contract_build);
	for (size_t i = 0; i < contract_nfields; i++)
		if (contract_fields[i].dir == dir &&
		    strcmp(contract_fields[i].name, name) == 0)
			return (int)i;
	return -1;
}

int contract_field_by_path(const char *path)
{
	pthread_once(&contract_once, contract_build);
	for (size_t i = 0; i < contract_nfields; i++)
		if (strcmp(contract_fields[i].path, path) == 0)
			return (int)i;
	return -1;
}

const char *contract_dir_name(enum contract_dir dir)
{
	return contract_dir_names[dir];
}

int contract_dir_find(const char *name)
{
	for (int d = CONTRACT_DIR_TOP + 1; d < CONTRACT_DIR_COUNT; d++)
		if (strcmp(contract_dir_names[d], name) == 0)
			return d;
	return -1;
}

bool contract_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > CONTRACT_NAME_MAX || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '.' &&
		    name[i] != '_' && name[i] != '-')
			return false;
	return true;
}

/* Quote a value for a message: its first 40 bytes or so (never half a
 * character), what is not printable UTF-8 as \xNN (lifecycle/text.h). */
#define CONTRACT_QUOTE_MAX (40 * 4 + 8)
static void contract_quote(const char *s, size_t n, char *out, size_t outlen)
{
	const unsigned char *u = (const unsigned char *)s;
	char shown[40 * 4 + 1];
	size_t cut = 0;

	while (cut < n) {
		size_t len = text_char_len(u + cut, n - cut);

		if (cut + (len ? len : 1) > 40)
			break;
		cut += len ? len : 1;
	}
	text_escape_n(s, cut, shown, sizeof(shown));
	snprintf(out, outlen, "\"%s%s\"", shown, n > cut ? "\xe2\x80\xa6" : "");
}

static bool contract_is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Match s (n bytes) case-insensitively against a NULL-ended list; returns
 * the canonical spelling or NULL. */
static const char *contract_pick(const char *s, size_t n,
				 const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == n && strncasecmp(s, *words, n) == 0)
			return *words;
	return NULL;
}

static int contract_copy(const char *s, size_t n, char *out, size_t outlen,
			 char *err, size_t errlen)
{
	if (n + 1 > outlen) {
		snprintf(err, errlen, "the value is longer than %zu bytes",
			 outlen - 1);
		return -EFBIG;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

static int contract_positive(const char *s, size_t n, char *out, size_t outlen,
			     const char *q, char *err, size_t errlen)
{
	unsigned long v = 0;
	size_t i = 0;

	for (; i < n && isdigit((unsigned char)s[i]); i++) {
		if (v <= CONTRACT_POSITIVE_MAX)
			v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (n == 0 || i != n || v < 1) {
		snprintf(err, errlen,
			 "%s is not a whole number of at least 1; write one "
			 "such as 4",
			 q);
		return -EINVAL;
	}
	if (v > CONTRACT_POSITIVE_MAX) {
		snprintf(err, errlen, "%s is more than the %d cclfs accepts", q,
			 CONTRACT_POSITIVE_MAX);
		return -EINVAL;
	}
	snprintf(out, outlen, "%lu", v);
	return 0;
}

static int contract_word(const char *s, size_t n, const char *q,
			 const char *what, const char *extra, char *err,
			 size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && !strchr(extra, c)) {
			snprintf(err, errlen,
				 "%s is not %s: use letters, digits and "
				 "\"%s\" only",
				 q, what, extra);
			return -EINVAL;
		}
	}
	return 0;
}

int contract_cluster_name(const char *text, size_t len, char *out,
			  size_t outlen, char *err, size_t errlen)
{
	const char *s = text;
	size_t n = len;
	char q[CONTRACT_QUOTE_MAX];

	while (n && contract_is_blank(*s))
		s++, n--;
	while (n && contract_is_blank(s[n - 1]))
		n--;
	contract_quote(s, n, q, sizeof(q));
	if (n > CONTRACT_NAME_MAX || n + 1 > outlen || memchr(s, '\0', n))
		goto bad;
	memcpy(out, s, n);
	out[n] = '\0';
	if (n == 0 || contract_name_valid(out))
		return 0;
bad:
	snprintf(err, errlen,
		 "%s is not a cluster name: use 1 to 64 letters, digits, "
		 "'.', '_' or '-'",
		 q);
	return -EINVAL;
}

/* A value of n bytes is longer than values may be: why, in err. */
static bool contract_too_long(size_t n, char *err, size_t errlen)
{
	if (n <= CONTRACT_VALUE_MAX)
		return false;
	snprintf(err, errlen,
		 "the value is %zu bytes long; values are at most %d bytes", n,
		 CONTRACT_VALUE_MAX);
	return true;
}

bool contract_env_name_valid(const char *s, size_t n)
{
	if (n == 0 || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

/* config/environment: NAME=VALUE lines for node commands. Each line loses
 * its leading blanks and a trailing CR; blank lines and lines starting with
 * '#' are dropped. A line that is not NAME=VALUE, a NUL byte or a control
 * character refuses the whole value, naming the line. */
static int contract_environment(const char *text, size_t len, char *out,
				size_t outlen, char *err, size_t errlen)
{
	size_t o = 0, line = 0;

	if (contract_too_long(len, err, errlen))
		return -EFBIG;
	for (const char *s = text, *end = text + len; s < end;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
		const char *eq;
		char q[CONTRACT_QUOTE_MAX];

		line++;
		if (memchr(s, '\0', n)) {
			snprintf(err, errlen, "line %zu contains a NUL byte",
				 line);
			return -EINVAL;
		}
		while (n && (*s == ' ' || *s == '\t'))
			s++, n--;
		if (n && s[n - 1] == '\r')
			n--;
		contract_quote(s, n, q, sizeof(q));
		eq = memchr(s, '=', n);
		if (n == 0 || s[0] == '#') {
			/* blank or a comment: dropped */
		} else if (!eq) {
			snprintf(err, errlen,
				 "line %zu, %s, is not NAME=VALUE; write one "
				 "variable per line, as in OMP_NUM_THREADS=4",
				 line, q);
			return -EINVAL;
		} else if (!contract_env_name_valid(s, (size_t)(eq - s))) {
			snprintf(err, errlen,
				 "line %zu, %s, does not start with a variable "
				 "name: use letters, digits and '_', not "
				 "starting with a digit, then '='",
				 line, q);
			return -EINVAL;
		} else if (strncmp(s, "CCLFS_", 6) == 0) {
			snprintf(err, errlen,
				 "line %zu, %s, sets a CCLFS_ variable; cclfs "
				 "sets those itself, use another name",
				 line, q);
			return -EINVAL;
		} else {
			for (size_t i = 0; i < n; i++)
				if (iscntrl((unsigned char)s[i]) &&
				    s[i] != '\t') {
					snprintf(err, errlen,
						 "line %zu, %s, contains a "
						 "control character",
						 line, q);
					return -EINVAL;
				}
			if (o + n + 2 > outlen) {
				snprintf(err, errlen,
					 "the value is longer than %zu bytes",
					 outlen - 1);
				return -EFBIG;
			}
			if (o)
				out[o++] = '\n';
			memcpy(out + o, s, n);
			o += n;
		}
		s = nl ? nl + 1 : end;
	}
	if (outlen)
		out[o < outlen ? o : outlen - 1] = '\0';
	return 0;
}

/* config/market: "spot" or "on-demand" for every role, or ROLE=MARKET
 * words for the manager and the workers ("manager=on-demand worker=spot"),
 * normalised to words separated by one space. */
static int contract_market(const char *s, size_t n, char *out, size_t outlen,
			   const char *q, char *err, size_t errlen)
{
	static const char *const markets[] = {"on-demand", "spot", NULL};
	static const char *const roles[] = {"manager", "worker", NULL};
	size_t o = 0, words = 0;
	bool bare = false;

	for (size_t i = 0; i < n;) {
		size_t l = 0, r = 0;
		const char *w = s + i, *eq, *m, *role;

		while (i + l < n && !contract_is_blank(s[i + l]) &&
		       s[i + l] != ',')
			l++;
		eq = memchr(w, '=', l);
		if (eq)
			r = (size_t)(eq - w);
		m = contract_pick(eq ? eq + 1 : w, eq ? l - r - 1 : l, markets);
		role = eq ? contract_pick(w, r, roles) : NULL;
		if (!m || (eq && !role) || (eq ? bare : words > 0)) {
			snprintf(err, errlen,
				 "%s is not a market; write on-demand or spot "
				 "(every node), or per role, e.g. "
				 "manager=on-demand worker=spot",
				 q);
			return -EINVAL;
		}
		bare |= !eq;
		if (o + l + 2 > outlen) {
			snprintf(err, errlen,
				 "the value is longer than %zu bytes",
				 outlen - 1);
			return -EFBIG;
		}
		if (o)
			out[o++] = ' ';
		if (role) {
			memcpy(out + o, role, strlen(role));
			o += strlen(role);
			out[o++] = '=';
		}
		memcpy(out + o, m, strlen(m));
		o += strlen(m);
		words++;
		i += l;
		while (i < n && (contract_is_blank(s[i]) || s[i] == ','))
			i++;
	}
	out[o] = '\0';
	return 0;
}

/* An IPv4 network A.B.C.D/N: 0 when s is one. */
static int contract_cidr(const char *s, size_t n)
{
	unsigned a[5];
	char buf[32], tail;

	if (n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (sscanf(buf, "%3u.%3u.%3u.%3u/%2u%c", &a[0], &a[1], &a[2], &a[3],
		   &a[4], &tail) != 5)
		return -1;
	for (int i = 0; i < 4; i++)
		if (a[i] > 255)
			return -1;
	return a[4] > 32 ? -1 : 0;
}

/* A positive decimal (budget in USD, idle_minutes, wait_timeout in
 * seconds), written back in its shortest form. */
static int contract_amount(const struct contract_field *f, const char *s,
			   size_t n, char *out, size_t outlen, const char *q,
			   char *err, size_t errlen)
{
	static const struct {
		const char *name, *what;
	} units[] = {
		{"budget", "an amount in US dollars, such as 25 or 7.50"},
		{"idle_minutes", "a number of minutes, such as 30"},
		{"wait_timeout", "a number of seconds, such as 600"},
	};
	const char *what = "a positive number";
	char buf[64], *end;
	double v;

	for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++)
		if (strcmp(f->name, units[i].name) == 0)
			what = units[i].what;
	if (n && *s == '$' && strcmp(f->name, "budget") == 0)
		s++, n--;
	if (n == 0 || n >= sizeof(buf) ||
	    !(isdigit((unsigned char)*s) || *s == '.'))
		goto bad;
	memcpy(buf, s, n);
	buf[n] = '\0';
	v = strtod(buf, &end);
	if (*end || !(v > 0) || v > 1e9)
		goto bad;
	/* Plain decimals, never an exponent (a budget of 0.00001). */
	snprintf(buf, sizeof(buf), "%.10f", v);
	if (strchr(buf, '.')) {
		char *z = buf + strlen(buf) - 1;

		while (*z == '0')
			*z-- = '\0';
		if (*z == '.')
			*z = '\0';
	}
	if (strlen(buf) >= outlen)
		goto bad;
	snprintf(out, outlen, "%s", buf);
	return 0;
bad:
	snprintf(err, errlen, "%s is not %s greater than 0", q, what);
	return -EINVAL;
}

int contract_normalise(const struct contract_field *f, const char *text,
		       size_t len, char *out, size_t outlen, char *err,
		       size_t errlen)
{
	static const char *const cluster_types[] = {
		"PeerWorkers", "PeerWorkersMPI", "ManagerWorkers", NULL};
	static const char *const levels[] = {"single", "funneled", "serialized",
					     "multiple", NULL};
	static const char *const policies[] = {"unique", "cheapest", NULL};
	static const char *const yes[] = {"true", "yes", "on", "1", NULL};
	static const char *const no[] = {"false", "no", "off", "0", NULL};
	const char *s = text, *pick;
	size_t n = len;
	char q[CONTRACT_QUOTE_MAX];

	if (f->type == TYPE_ENVIRONMENT)
		return contract_environment(text, len, out, outlen, err,
					    errlen);
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "the value contains a NUL byte");
		return -EINVAL;
	}
	while (n && contract_is_blank(*s))
		s++, n--;
	while (n && contract_is_blank(s[n - 1]))
		n--;
	if (contract_too_long(n, err, errlen))
		return -EFBIG;
	contract_quote(s, n, q, sizeof(q));
	if (f->type != TYPE_ASSUMPTION && memchr(s, '\n', n)) {
		snprintf(err, errlen,
			 "%s spans several lines; this file holds one value "
			 "on one line",
			 q);
		return -EINVAL;
	}
	if (n == 0) {
		/* Empty resets to the default. */
		return contract_copy(f->def, strlen(f->def), out, outlen, err,
				     errlen);
	}
	switch ((enum contract_type)f->type) {
	case TYPE_CLUSTER_TYPE:
		pick = contract_pick(s, n, cluster_types);
		if (!pick) {
			snprintf(err, errlen,
				 "%s is not a cluster type; write "
				 "PeerWorkers, PeerWorkersMPI or "
				 "ManagerWorkers",
				 q);
			return -EINVAL;
		}
		return contract_copy(pick, strlen(pick), out, outlen, err,
				     errlen);
	case TYPE_POSITIVE:
		return contract_positive(s, n, out, outlen, q, err, errlen);
	case TYPE_ASSUMPTION: {
		enum assumption_kind k = assumption_fields[f->assumption].kind;

		if (assumption_normalise(k, s, n, out, outlen, err, errlen))
			return -EINVAL;
		return 0;
	}
	case TYPE_USER:
		if (n > 32 || s[0] == '-' ||
		    contract_word(s, n, q, "a user name", "._-", err, errlen)) {
			if (n > 32 || s[0] == '-')
				snprintf(err, errlen,
					 "%s is not a user name: at most 32 "
					 "letters, digits, '.', '_' or '-', "
					 "not starting with '-'",
					 q);
			return -EINVAL;
		}
		break;
	case TYPE_WORD:
		if (contract_word(s, n, q, "an identifier", "._:/-", err,
				  errlen))
			return -EINVAL;
		break;
	case TYPE_BOOL:
		if (contract_pick(s, n, yes))
			return contract_copy("true", 4, out, outlen, err,
					     errlen);
		if (contract_pick(s, n, no))
			return contract_copy("false", 5, out, outlen, err,
					     errlen);
		snprintf(err, errlen, "%s is not true or false", q);
		return -EINVAL;
	case TYPE_THREADLEVEL:
		pick = contract_pick(s, n, levels);
		if (!pick) {
			snprintf(err, errlen,
				 "%s is not an MPI thread level; write "
				 "single, funneled, serialized or multiple",
				 q);
			return -EINVAL;
		}
		return contract_copy(pick, strlen(pick), out, outlen, err,
				     errlen);
	case TYPE_POLICY:
		pick = contract_pick(s, n, policies);
		if (!pick) {
			snprintf(err, errlen,
				 "%s is not a resolve policy; write unique "
				 "(fail when several types fit) or cheapest",
				 q);
			return -EINVAL;
		}
		return contract_copy(pick, strlen(pick), out, outlen, err,
				     errlen);
	case TYPE_LINE:
		for (size_t i = 0; i < n; i++) {
			if (iscntrl((unsigned char)s[i]) && s[i] != '\t') {
				snprintf(err, errlen,
					 "%s contains a control character", q);
				return -EINVAL;
			}
		}
		break;
	case TYPE_MARKET:
		return contract_market(s, n, out, outlen, q, err, errlen);
	case TYPE_CIDR:
		if (contract_cidr(s, n)) {
			snprintf(err, errlen,
				 "%s is not an IPv4 network; write one such as "
				 "0.0.0.0/0 or 203.0.113.0/24",
				 q);
			return -EINVAL;
		}
		break;
	case TYPE_AMOUNT:
		return contract_amount(f, s, n, out, outlen, q, err, errlen);
	case TYPE_ACTION: {
		static const char *const interrupt[] = {"interrupt",
							"interrupted", NULL};
		static const char *const terminate[] = {"terminate",
							"terminated", NULL};

		if (contract_pick(s, n, interrupt))
			return contract_copy("interrupt", 9, out, outlen, err,
					     errlen);
		if (contract_pick(s, n, terminate))
			return contract_copy("terminate", 9, out, outlen, err,
					     errlen);
		snprintf(err, errlen,
			 "%s is not an action; write interrupt or "
			 "terminate",
			 q);
		return -EINVAL;
	}
	case TYPE_ENVIRONMENT: /* contract_environment, above */
	case TYPE_NONE:
		snprintf(err, errlen, "this file takes no value");
		return -EACCES;
	}
	return contract_copy(s, n, out, outlen, err, errlen);
}
