/* cclfs.conf: where it is found, its parsing (libinih, TOML-style
 * `[section]` / `key = "value"`), and the defaults it gives to contracts. */
#include "lifecycle/config.h"

#include "lifecycle/contract.h"
#include "providers/provider.h"

#include <errno.h>
#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sections cclfs knows: [defaults] takes the contract config/ keys; each
 * provider of the registry reads its own ([NAME], and [NAME.ITEM] for
 * items of it, such as [hosts.node1]). */
static const char *config_section_of(const char *section, bool *item)
{
	size_t dot = strcspn(section, ".");

	*item = section[dot] == '.';
	if (!*item && strcmp(section, "defaults") == 0)
		return section;
	for (size_t i = 0; provider_registry[i]; i++) {
		const char *own = provider_registry[i]->section;

		if (own && strlen(own) == dot &&
		    strncmp(own, section, dot) == 0 &&
		    (!*item || provider_registry[i]->has_items))
			return own;
	}
	return NULL;
}

/* "[defaults], [local], [hosts], [hosts.NAME] and [ec2]". */
static void config_known(char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "[defaults]");

	for (size_t i = 0; provider_registry[i] && o < len; i++) {
		const char *own = provider_registry[i]->section;

		if (own && provider_registry[i]->has_items)
			o += (size_t)snprintf(
				out + o, len - o, "%s[%s], [%s.NAME]",
				provider_registry[i + 1] ? ", " : " and ", own,
				own);
		else if (own)
			o += (size_t)snprintf(
				out + o, len - o, "%s[%s]",
				provider_registry[i + 1] ? ", " : " and ", own);
	}
}

struct config_parse {
	struct config *cfg;
	FILE *f;
	int line;   /* the lines read so far */
	int failed; /* the line of the first error of the handler or the
		       reader, which is in why; 0: none */
	char why[1024];
};

/* Strip one pair of TOML quotes: "..." (with \" and \\) or '...', and a
 * trailing "# comment" after the value. */
static int config_unquote(const char *in, char *out, size_t outlen)
{
	size_t n = strlen(in), o = 0, i = 1;
	char q = in[0];

	if (q != '"' && q != '\'') {
		/* A bare value ends where a " #" comment starts. */
		const char *hash = in;

		while ((hash = strchr(hash, '#')) &&
		       (hash == in || (hash[-1] != ' ' && hash[-1] != '\t')))
			hash++;
		if (hash)
			n = (size_t)(hash - in);
		while (n && (in[n - 1] == ' ' || in[n - 1] == '\t'))
			n--;
		if (n >= outlen)
			return -1;
		memcpy(out, in, n);
		out[n] = '\0';
		return 0;
	}
	for (; i < n && in[i] != q; i++) {
		char c = in[i];

		if (q == '"' && c == '\\' && i + 1 < n) {
			c = in[++i];
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
		}
		if (o + 1 >= outlen)
			return -1;
		out[o++] = c;
	}
	if (i >= n)
		return -1; /* no closing quote */
	out[o] = '\0';
	/* After the closing quote: blanks, then nothing or a comment. */
	for (i++; i < n && (in[i] == ' ' || in[i] == '\t'); i++)
		;
	return i == n || in[i] == '#' ? 0 : -1;
}

static int config_handler(void *user, const char *section, const char *key,
			  const char *raw)
{
	struct config_parse *p = user;
	struct config *cfg = p->cfg;
	char value[CONTRACT_VALUE_MAX + 1], norm[CONTRACT_VALUE_MAX + 1];
	char why[512];
	struct config_entry *e;
	const char *known;
	bool item;

	if (p->failed)
		return 0;
	known = config_section_of(section, &item);
	if (known && item) {
		/* [hosts.NAME]: one item of a provider (a machine). */
		const char *name = section + strlen(known) + 1;
		size_t n = strlen(name);

		if (n == 0 || n > CONTRACT_NAME_MAX ||
		    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrs"
				 "tuvwxyz0123456789._-") != n) {
			snprintf(p->why, sizeof(p->why),
				 "[%s]: a host name is 1 to %d letters, "
				 "digits, '.', '_' or '-'",
				 section, CONTRACT_NAME_MAX);
			goto fail;
		}
	} else if (!known) {
		char list[512];

		config_known(list, sizeof(list));
		snprintf(p->why, sizeof(p->why),
			 "unknown section [%s]; cclfs knows %s", section, list);
		goto fail;
	}
	if (config_unquote(raw, value, sizeof(value))) {
		snprintf(p->why, sizeof(p->why),
			 "[%s] %s: the value is badly quoted or longer "
			 "than %d bytes",
			 section, key, CONTRACT_VALUE_MAX);
		goto fail;
	}
	if (strcmp(section, "defaults") == 0) {
		int f = contract_field_find(CONTRACT_DIR_CONFIG, key);
		int rc;

		if (f < 0) {
			snprintf(p->why, sizeof(p->why),
				 "[defaults] has no key \"%s\"; it takes "
				 "the names of a contract's config/ files",
				 key);
			goto fail;
		}
		rc = contract_normalise(contract_field_at((size_t)f), value,
					strlen(value), norm, sizeof(norm), why,
					sizeof(why));
		if (rc) {
			snprintf(p->why, sizeof(p->why), "[defaults] %s: %s",
				 key, why);
			goto fail;
		}
		memcpy(value, norm, strlen(norm) + 1);
	}
	if (config_get(cfg, section, key)) {
		snprintf(p->why, sizeof(p->why), "[%s] sets %s twice", section,
			 key);
		goto fail;
	}
	e = realloc(cfg->entries, (cfg->count + 1) * sizeof(*e));
	if (!e) {
		snprintf(p->why, sizeof(p->why), "out of memory");
		goto fail;
	}
	cfg->entries = e;
	e = &cfg->entries[cfg->count];
	e->section = strdup(section);
	e->key = strdup(key);
	e->value = strdup(value);
	if (!e->section || !e->key || !e->value) {
		free(e->section);
		free(e->key);
		free(e->value);
		snprintf(p->why, sizeof(p->why), "out of memory");
		goto fail;
	}
	cfg->count++;
	return 1;
fail:
	p->failed = p->line;
	return 0;
}

/* inih's reader: the next line of the file, whole, without its newline.
 * inih would read a line longer than its buffer as several (the rest of a
 * comment or of a value then parsed as lines of their own), and a NUL byte
 * would hide the rest of its line: either is an error of that line.
 * Nothing is read after the first error. */
static char *config_reader(char *str, int num, void *stream)
{
	struct config_parse *p = stream;
	size_t n = 0;
	bool nul = false, full = false;
	int c;

	if (p->failed)
		return NULL;
	while ((c = getc(p->f)) != EOF && c != '\n') {
		nul = nul || c == '\0';
		if (n + 1 < (size_t)num)
			str[n++] = (char)c;
		else
			full = true;
	}
	if (c == EOF && n == 0)
		return NULL;
	str[n] = '\0';
	p->line++;
	if (full || nul) {
		if (full)
			snprintf(p->why, sizeof(p->why),
				 "the line is longer than %d bytes", num - 1);
		else
			snprintf(p->why, sizeof(p->why),
				 "the line holds a NUL byte");
		p->failed = p->line;
		return NULL;
	}
	return str;
}

/* The file to read, or "" when none is named and none exists. */
static int config_find(struct config *cfg, const char *explicit_path,
		       int *required)
{
	const char *env = getenv("CCLFS_CONFIG"), *home = getenv("HOME");
	char cwd[PATH_MAX];

	*required = 1;
	if (explicit_path && *explicit_path)
		return snprintf(cfg->path, sizeof(cfg->path), "%s",
				explicit_path) >= (int)sizeof(cfg->path);
	if (env && *env)
		return snprintf(cfg->path, sizeof(cfg->path), "%s", env) >=
		       (int)sizeof(cfg->path);
	*required = 0;
	if (access("cclfs.conf", F_OK) == 0 && getcwd(cwd, sizeof(cwd))) {
		*required = 1;
		return snprintf(cfg->path, sizeof(cfg->path), "%s/cclfs.conf",
				cwd) >= (int)sizeof(cfg->path);
	}
	if (home && *home) {
		snprintf(cfg->path, sizeof(cfg->path),
			 "%s/.config/cclfs/cclfs.conf", home);
		if (access(cfg->path, F_OK) == 0) {
			*required = 1;
			return 0;
		}
	}
	cfg->path[0] = '\0';
	return 0;
}

int config_load(struct config *cfg, const char *explicit_path, char *err,
		size_t errlen)
{
	struct config_parse p = {.cfg = cfg};
	int required, line;
	FILE *f;

	memset(cfg, 0, sizeof(*cfg));
	if (config_find(cfg, explicit_path, &required)) {
		snprintf(err, errlen, "configuration file name is too long");
		return -1;
	}
	if (!cfg->path[0])
		return 0;
	f = fopen(cfg->path, "re");
	if (!f) {
		snprintf(err, errlen, "cannot read configuration file %s: %s",
			 cfg->path, strerror(errno));
		return -1;
	}
	p.f = f;
	line = ini_parse_stream(config_reader, &p, config_handler, &p);
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read configuration file %s: %s",
			 cfg->path, strerror(errno));
		line = -1;
	} else if (line > 0 && (!p.failed || line < p.failed)) {
		/* inih's own error came first. */
		snprintf(err, errlen,
			 "%s:%d: not a [section] or key = \"value\" line",
			 cfg->path, line);
	} else if (p.failed) {
		snprintf(err, errlen, "%s:%d: %s", cfg->path, p.failed, p.why);
		line = p.failed;
	} else if (line < 0) {
		snprintf(err, errlen, "%s: out of memory", cfg->path);
	}
	fclose(f);
	if (line != 0) {
		config_free(cfg);
		return -1;
	}
	return 0;
}

void config_free(struct config *cfg)
{
	for (size_t i = 0; i < cfg->count; i++) {
		free(cfg->entries[i].section);
		free(cfg->entries[i].key);
		free(cfg->entries[i].value);
	}
	free(cfg->entries);
	cfg->entries = NULL;
	cfg->count = 0;
}

const char *config_get(const struct config *cfg, const char *section,
		       const char *key)
{
	for (size_t i = 0; i < cfg->count; i++)
		if (strcmp(cfg->entries[i].section, section) == 0 &&
		    strcmp(cfg->entries[i].key, key) == 0)
			return cfg->entries[i].value;
	return NULL;
}
