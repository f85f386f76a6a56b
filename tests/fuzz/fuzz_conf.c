/* libFuzzer target for cclfs.conf: arbitrary bytes as the file config_load
 * (lifecycle/config.c, inih) reads, then what the providers read of a file
 * it accepts: [hosts] and [hosts.NAME] (hostsconf_read and the hosts
 * provider's types), [ec2] (ec2conf_read) and the region and endpoint it
 * gives aws_config_load. Traps as soon as an invariant breaks. The file is
 * a memfd, read through /proc/self/fd: nothing is written to disk. */
#include "lifecycle/config.h"
#include "lifecycle/contract.h"
#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_conf.h"
#include "providers/hosts/hosts_conf.h"
#include "providers/provider.h"
#include "tests/fuzz/fuzz_check.h"

#include <ctype.h>
#include <ini.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Holds every message whole. */
#define ERR_BIG 8192
/* The state directory the providers are given. */
#define STATEDIR "/state"
/* What [hosts.NAME] names may hold (config.c's rule). */
#define NAME_CHARS                                                             \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

static int conf_fd = -1;
static char conf_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const unset[] = {
		"AWS_PROFILE",	     "AWS_DEFAULT_PROFILE",
		"AWS_REGION",	     "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL",  "AWS_ENDPOINT_URL_EC2",
		"AWS_SESSION_TOKEN", "CCLFS_CONFIG",
	};

	(void)argc;
	(void)argv;
	conf_fd = memfd_create("cclfs.conf", MFD_CLOEXEC);
	CHECK(conf_fd >= 0);
	snprintf(conf_path, sizeof(conf_path), "/proc/self/fd/%d", conf_fd);
	/* aws_config_load: credentials from the environment, no file read,
	 * region and endpoint from [ec2] alone. */
	for (size_t i = 0; i < sizeof(unset) / sizeof(unset[0]); i++)
		CHECK(unsetenv(unset[i]) == 0);
	CHECK(setenv("AWS_ACCESS_KEY_ID", "AKIDFUZZ", 1) == 0);
	CHECK(setenv("AWS_SECRET_ACCESS_KEY", "fuzz-secret", 1) == 0);
	CHECK(setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/cclfs", 1) ==
	      0);
	CHECK(setenv("AWS_CONFIG_FILE", "/nonexistent/cclfs", 1) == 0);
	return 0;
}

/* config_load on the first n bytes. */
static int conf_load(const uint8_t *data, size_t n, struct config *cfg,
		     char *err, size_t errlen)
{
	CHECK(ftruncate(conf_fd, 0) == 0);
	for (size_t o = 0; o < n;) {
		ssize_t w = pwrite(conf_fd, data + o, n - o, (off_t)o);

		CHECK(w > 0);
		o += (size_t)w;
	}
	return config_load(cfg, conf_path, err, errlen);
}

/* Where line `line` (from 1) starts: after line - 1 newlines. */
static size_t line_start(const uint8_t *data, size_t n, long line)
{
	size_t o = 0;

	for (long l = 1; l < line && o < n; l++) {
		const uint8_t *nl = memchr(data + o, '\n', n - o);

		o = nl ? (size_t)(nl - data) + 1 : n;
	}
	return o;
}

static long line_count(const uint8_t *data, size_t n)
{
	long lines = 0;

	for (size_t i = 0; i < n; i++)
		lines += data[i] == '\n';
	return lines + (n && data[n - 1] != '\n');
}

/* A section config.c may accept: [defaults], a provider's, or one item
 * of a provider that has items ([hosts.NAME]) with a valid name. */
static void check_section(const char *section)
{
	if (strcmp(section, "defaults") == 0)
		return;
	for (size_t i = 0; provider_registry[i]; i++) {
		const char *own = provider_registry[i]->section;
		size_t n = own ? strlen(own) : 0;
		const char *name;

		if (!own || strncmp(section, own, n) != 0)
			continue;
		if (section[n] == '\0')
			return;
		if (section[n] != '.')
			continue;
		CHECK(provider_registry[i]->has_items);
		name = section + n + 1;
		CHECK(strlen(name) >= 1 && strlen(name) <= CONTRACT_NAME_MAX);
		CHECK(strspn(name, NAME_CHARS) == strlen(name));
		return;
	}
	CHECK(!"an unknown section was accepted");
}

/* An accepted file: known sections, each key once, [defaults] values in
 * their normal form. */
static void check_accepted(const struct config *cfg)
{
	CHECK(strcmp(cfg->path, conf_path) == 0);
	CHECK(cfg->count == 0 || cfg->entries != NULL);
	for (size_t i = 0; i < cfg->count; i++) {
		const struct config_entry *e = &cfg->entries[i];
		char norm[CONTRACT_VALUE_MAX + 1], why[512];
		int f;

		CHECK(e->section && e->key && e->value);
		CHECK(strlen(e->value) <= CONTRACT_VALUE_MAX);
		check_section(e->section);
		/* The first entry of its section and key is itself. */
		CHECK(config_get(cfg, e->section, e->key) == e->value);
		if (strcmp(e->section, "defaults") != 0)
			continue;
		f = contract_field_find(CONTRACT_DIR_CONFIG, e->key);
		CHECK(f >= 0);
		CHECK(contract_normalise(contract_field_at((size_t)f), e->value,
					 strlen(e->value), norm, sizeof(norm),
					 why, sizeof(why)) == 0);
		CHECK(strcmp(norm, e->value) == 0);
	}
}

/* A refused file: nothing kept, "PATH:LINE: why" with LINE one of the
 * file's. Returns LINE. */
static long check_refused(const struct config *cfg, const char *err, long lines)
{
	size_t n = strlen(conf_path);
	char *end;
	long line;

	CHECK(cfg->count == 0 && cfg->entries == NULL);
	CHECK(memchr(err, '\0', ERR_BIG) != NULL);
	CHECK(strncmp(err, conf_path, n) == 0 && err[n] == ':');
	CHECK(isdigit((unsigned char)err[n + 1]));
	line = strtol(err + n + 1, &end, 10);
	CHECK(end[0] == ':' && end[1] == ' ' && end[2] != '\0');
	CHECK(line >= 1 && line <= lines);
	return line;
}

/* The error is that of its line: the lines before it are accepted, and
 * they with it are refused the same way. */
static void check_error_line(const uint8_t *data, size_t size, long line,
			     const char *err)
{
	size_t before = line_start(data, size, line);
	size_t through = line_start(data, size, line + 1);
	char e[ERR_BIG];
	struct config c;

	CHECK(conf_load(data, before, &c, e, sizeof(e)) == 0);
	config_free(&c);
	CHECK(conf_load(data, through, &c, e, sizeof(e)) == -1);
	CHECK(strcmp(e, err) == 0);
}

static bool same_entries(const struct config *a, const struct config *b)
{
	if (a->count != b->count)
		return false;
	for (size_t i = 0; i < a->count; i++)
		if (strcmp(a->entries[i].section, b->entries[i].section) != 0 ||
		    strcmp(a->entries[i].key, b->entries[i].key) != 0 ||
		    strcmp(a->entries[i].value, b->entries[i].value) != 0)
			return false;
	return true;
}

/* Lines whose first non-blank is '#' or ';' are comments: without them
 * the file is accepted or refused alike, with the same entries. Kept: the
 * first line, where a byte-order mark may be, and the lines refused even
 * as comments, those with a NUL byte or longer than inih reads at once. */
static void check_comments(const uint8_t *data, size_t size, int rc,
			   const struct config *cfg)
{
	uint8_t *copy = malloc(size ? size : 1);
	size_t o = 0, kept = 0;
	struct config c;
	char e[ERR_BIG];

	CHECK(copy != NULL);
	while (o < size) {
		const uint8_t *nl = memchr(data + o, '\n', size - o);
		size_t next = nl ? (size_t)(nl - data) + 1 : size, s = o;

		while (s < next && isspace(data[s]))
			s++;
		if (o == 0 || s == next || (data[s] != '#' && data[s] != ';') ||
		    memchr(data + o, '\0', next - o) ||
		    next - o - (nl != NULL) >= INI_MAX_LINE) {
			memcpy(copy + kept, data + o, next - o);
			kept += next - o;
		}
		o = next;
	}
	if (kept < size) {
		CHECK(conf_load(copy, kept, &c, e, sizeof(e)) == rc);
		if (rc == 0) {
			CHECK(same_entries(&c, cfg));
			config_free(&c);
		}
	}
	free(copy);
}

/* Tiny error buffers: the same outcome, the message cut short. */
static void check_tiny(const uint8_t *data, size_t size, int rc,
		       const struct config *cfg, const char *err)
{
	for (size_t i = 0; i < FUZZ_TINY_COUNT; i++) {
		char *e = sentinel_buf(fuzz_tiny_len[i]);
		struct config c;

		CHECK(conf_load(data, size, &c, e, fuzz_tiny_len[i]) == rc);
		if (rc == 0) {
			CHECK(e[0] == FUZZ_SENTINEL);
			CHECK(same_entries(&c, cfg));
			config_free(&c);
		} else {
			check_truncated(e, fuzz_tiny_len[i], err);
		}
		free(e);
	}
}

/* A value kept as given, never cut short. */
static void check_kept(const struct config *cfg, const char *section,
		       const char *key, const char *field)
{
	const char *v = config_get(cfg, section, key);

	if (v)
		CHECK(strcmp(field, v) == 0);
}

static bool nan_or_count(double d)
{
	return isnan(d) || (isfinite(d) && d >= 0);
}

static void check_host(const struct config *cfg, const struct hosts_host *h)
{
	char section[sizeof(h->name) + 8];
	size_t len;

	CHECK_STR(h->name);
	CHECK_STR(h->address);
	CHECK_STR(h->user);
	CHECK_STR(h->keyfile);
	CHECK_STR(h->type);
	CHECK_STR(h->accelerator);
	snprintf(section, sizeof(section), "hosts.%s", h->name);
	len = strlen(h->name);
	CHECK(len >= 1 && strspn(h->name, NAME_CHARS) == len);
	CHECK(h->address[0] != '\0' && !strpbrk(h->address, " \t'\"[]"));
	CHECK(h->port >= 1 && h->port <= 65535);
	len = strlen(h->type);
	CHECK(len >= 1 && strspn(h->type, NAME_CHARS) == len);
	CHECK(nan_or_count(h->vcpus) && nan_or_count(h->memory_bytes) &&
	      nan_or_count(h->accelerators));
	check_kept(cfg, section, "address", h->address);
	check_kept(cfg, section, "user", h->user);
	check_kept(cfg, section, "keyfile", h->keyfile);
	check_kept(cfg, section, "type", h->type);
	check_kept(cfg, section, "accelerator", h->accelerator);
}

/* The hosts of an accepted file, and the types the provider makes of
 * them; both refuse the same files with the same message. */
static void check_hosts(const struct config *cfg)
{
	const struct provider_entry *pe = provider_entry_find("hosts");
	struct hosts_host *hosts = NULL;
	struct provider_type *types = NULL;
	struct hosts_settings s;
	size_t n = 0, ntypes = 0, sections = 0;
	char err[ERR_BIG], err2[ERR_BIG];
	int rc, rt;

	CHECK(pe && pe->types);
	rc = hostsconf_read(cfg, STATEDIR, &hosts, &n, &s, err, sizeof(err));
	rt = pe->types(cfg, &types, &ntypes, err2, sizeof(err2));
	CHECK(rc == 0 || rc == -1);
	CHECK(rt == rc);
	if (rc) {
		CHECK(hosts == NULL && n == 0);
		CHECK(strncmp(err, cfg->path, strlen(cfg->path)) == 0);
		CHECK(strcmp(err, err2) == 0);
		free(types);
		return;
	}
	/* One host per [hosts.NAME] section that has a key. */
	for (size_t i = 0; i < cfg->count; i++) {
		const char *sec = cfg->entries[i].section;
		size_t k = 0;

		while (k < i && strcmp(cfg->entries[k].section, sec) != 0)
			k++;
		sections += k == i && strncmp(sec, "hosts.", 6) == 0;
	}
	CHECK(n == sections);
	CHECK(ntypes <= n && (n == 0) == (ntypes == 0));
	CHECK(s.connect_timeout_ms >= 1000 && s.connect_timeout_ms <= 3600000);
	CHECK(s.command_timeout_ms >= 0 && s.command_timeout_ms <= 2000000000);
	CHECK(s.keepalive_s >= 0 && s.keepalive_s <= 3600);
	CHECK(s.record_new == 0 || s.record_new == 1);
	CHECK_STR(s.user);
	CHECK_STR(s.keyfile);
	CHECK_STR(s.known_hosts);
	CHECK(strcmp(s.own_hosts, STATEDIR "/known_hosts") == 0);
	check_kept(cfg, "hosts", "user", s.user);
	check_kept(cfg, "hosts", "keyfile", s.keyfile);
	check_kept(cfg, "hosts", "known_hosts", s.known_hosts);
	for (size_t i = 0; i < n; i++) {
		check_host(cfg, &hosts[i]);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(hosts[k].name, hosts[i].name) != 0);
	}
	for (size_t i = 0; i < ntypes; i++) {
		CHECK_STR(types[i].name);
		CHECK_STR(types[i].accelerator);
		CHECK_STR(types[i].origin);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(types[k].name, types[i].name) != 0);
	}
	free(hosts);
	free(types);
}

/* What aws_config_load makes of [ec2]'s region and endpoint, with
 * credentials in the environment and no AWS file. */
static void check_aws(const struct ec2_settings *s)
{
	struct aws_defaults d = {s->region, s->endpoint_url};
	struct aws_config *ac = calloc(1, sizeof(*ac));
	char err[ERR_BIG], want[sizeof(ac->endpoint)];
	bool good =
		s->region[0] != '\0' &&
		strspn(s->region, "abcdefghijklmnopqrstuvwxyz0123456789-") ==
			strlen(s->region);
	int rc;

	CHECK(ac != NULL);
	rc = aws_config_load(&d, ac, err, sizeof(err));
	CHECK(rc == (good ? 0 : -1));
	if (rc == 0) {
		CHECK_STR(ac->region);
		CHECK_STR(ac->endpoint);
		CHECK_STR(ac->source);
		CHECK(strcmp(ac->region, s->region) == 0);
		if (s->endpoint_url[0])
			snprintf(want, sizeof(want), "%s", s->endpoint_url);
		else
			snprintf(want, sizeof(want),
				 "https://ec2.%s.amazonaws.com%s", s->region,
				 strncmp(s->region, "cn-", 3) == 0 ? ".cn"
								   : "");
		CHECK(strcmp(ac->endpoint, want) == 0);
	} else {
		CHECK(err[0] != '\0');
	}
	aws_config_clear(ac);
	free(ac);
}

/* [ec2] of an accepted file: every setting in its range, every word kept
 * whole. */
static void check_ec2(const struct config *cfg)
{
	struct ec2_settings s;
	char err[ERR_BIG];
	int rc;

	memset(&s, FUZZ_SENTINEL, sizeof(s));
	rc = ec2conf_read(cfg, STATEDIR, &s, err, sizeof(err));
	CHECK(rc == 0 || rc == -1);
	if (rc) {
		CHECK(strncmp(err, cfg->path, strlen(cfg->path)) == 0);
		return;
	}
	CHECK_STR(s.region);
	CHECK_STR(s.endpoint_url);
	CHECK_STR(s.imageid);
	CHECK_STR(s.subnet_id);
	CHECK_STR(s.security_group_id);
	CHECK_STR(s.placement_group);
	CHECK_STR(s.key_name);
	CHECK_STR(s.user);
	CHECK_STR(s.known_hosts);
	CHECK(strcmp(s.keydir, STATEDIR "/keys") == 0);
	CHECK(strcmp(s.own_hosts, STATEDIR "/known_hosts") == 0);
	CHECK(strcmp(s.address, "public") == 0 ||
	      strcmp(s.address, "private") == 0);
	CHECK(s.endpoint_url[0] == '\0' ||
	      strncmp(s.endpoint_url, "http://", 7) == 0 ||
	      strncmp(s.endpoint_url, "https://", 8) == 0);
	check_kept(cfg, "ec2", "region", s.region);
	check_kept(cfg, "ec2", "endpoint_url", s.endpoint_url);
	check_kept(cfg, "ec2", "imageid", s.imageid);
	check_kept(cfg, "ec2", "subnet_id", s.subnet_id);
	check_kept(cfg, "ec2", "security_group_id", s.security_group_id);
	check_kept(cfg, "ec2", "placement_group", s.placement_group);
	check_kept(cfg, "ec2", "key_name", s.key_name);
	check_kept(cfg, "ec2", "user", s.user);
	check_kept(cfg, "ec2", "known_hosts", s.known_hosts);
	CHECK(s.connect_timeout_ms >= 100 && s.connect_timeout_ms <= 3600000);
	CHECK(s.command_timeout_ms >= 0 && s.command_timeout_ms <= 2000000000);
	CHECK(s.keepalive_s >= 0 && s.keepalive_s <= 3600);
	CHECK(s.boot_timeout_ms >= 1000 && s.boot_timeout_ms <= 86400000);
	CHECK(s.poll_first_ms >= 10 && s.poll_first_ms <= 600000);
	CHECK(s.poll_max_ms >= s.poll_first_ms && s.poll_max_ms <= 600000);
	CHECK(s.retry.attempts >= 1 && s.retry.attempts <= 101);
	CHECK(s.retry.base_ms >= 1 && s.retry.base_ms <= 600000);
	CHECK(s.retry.max_ms >= s.retry.base_ms && s.retry.max_ms <= 3600000);
	CHECK(s.retry.request_timeout_ms >= 100 &&
	      s.retry.request_timeout_ms <= 3600000);
	check_aws(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config cfg;
	char err[ERR_BIG];
	int rc;

	memset(err, FUZZ_SENTINEL, sizeof(err));
	rc = conf_load(data, size, &cfg, err, sizeof(err));
	CHECK(rc == 0 || rc == -1);
	check_tiny(data, size, rc, &cfg, err);
	check_comments(data, size, rc, &cfg);
	if (rc) {
		long line = check_refused(&cfg, err, line_count(data, size));

		check_error_line(data, size, line, err);
		return 0;
	}
	CHECK(err[0] == FUZZ_SENTINEL);
	check_accepted(&cfg);
	check_hosts(&cfg);
	check_ec2(&cfg);
	config_free(&cfg);
	return 0;
}
