/* Unit tests of the [hosts] and [hosts.NAME] sections of cclfs.conf
 * (lifecycle/hostsconf) and of shell quoting for remote commands
 * (providers/ssh). */
#include "check.h"
#include "lifecycle/config.h"
#include "providers/hosts/hosts_conf.h"
#include "providers/ssh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One line of cclfs.conf. */
struct kv {
	const char *section, *key, *value;
};

/* A configuration of lines, ending with a NULL section. */
static void conf(struct config *cfg, struct config_entry *e,
		 const struct kv *kv)
{
	size_t n = 0;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "test.conf");
	for (; kv[n].section; n++) {
		e[n].section = (char *)kv[n].section;
		e[n].key = (char *)kv[n].key;
		e[n].value = (char *)kv[n].value;
	}
	cfg->entries = e;
	cfg->count = n;
}

static int read_conf(const struct kv *kv, struct hosts_host **hosts, size_t *n,
		     struct hosts_settings *s, char *err, size_t errlen)
{
	struct config cfg;
	struct config_entry e[32];

	conf(&cfg, e, kv);
	return hostsconf_read(&cfg, "/state", hosts, n, s, err, errlen);
}

static void check_bad(const struct kv *kv, const char *want)
{
	struct hosts_host *hosts = NULL;
	struct hosts_settings s;
	char err[1024] = "";
	size_t n = 0;

	CHECK(read_conf(kv, &hosts, &n, &s, err, sizeof(err)) == -1);
	CHECK(strstr(err, want) != NULL);
	if (!strstr(err, want))
		fprintf(stderr, "  wanted \"%s\" in \"%s\"\n", want, err);
	CHECK(hosts == NULL);
}

static void test_defaults(void)
{
	static const struct kv kv[] = {{NULL, NULL, NULL}};
	struct hosts_host *hosts = NULL;
	struct hosts_settings s;
	char err[256];
	size_t n = 1;

	CHECK(read_conf(kv, &hosts, &n, &s, err, sizeof(err)) == 0);
	CHECK(n == 0);
	CHECK(s.connect_timeout_ms == 10000);
	CHECK(s.command_timeout_ms == 86400000);
	CHECK(s.keepalive_s == 15);
	CHECK(s.record_new == 0);
	CHECK(strcmp(s.own_hosts, "/state/known_hosts") == 0);
	free(hosts);
}

static void test_hosts(void)
{
	static const struct kv kv[] = {
		{"hosts", "user", "alice"},
		{"hosts", "accept_new_host_keys", "yes"},
		{"hosts", "connect_timeout", "3"},
		{"hosts", "command_timeout", "0"},
		{"hosts.a", "address", "10.1.2.3"},
		{"hosts.a", "vcpus", "16"},
		{"hosts.a", "memory", "64G"},
		{"defaults", "user", "ignored"},
		{"hosts.b", "address", "b.example.org"},
		{"hosts.b", "port", "2200"},
		{"hosts.b", "type", "gpu"},
		{"hosts.b", "accelerator_count", "4"},
		{"hosts.b", "accelerator", "NVIDIA_A10G"},
		{"hosts.b", "user", "bob"},
		{"hosts.a", "keyfile", "/k"},
		{NULL, NULL, NULL}};
	struct hosts_host *h = NULL;
	struct hosts_settings s;
	char err[256] = "";
	size_t n = 0;

	CHECK(read_conf(kv, &h, &n, &s, err, sizeof(err)) == 0);
	CHECK(n == 2);
	if (n != 2) {
		fprintf(stderr, "  %s\n", err);
		free(h);
		return;
	}
	CHECK(strcmp(s.user, "alice") == 0);
	CHECK(s.record_new == 1);
	CHECK(s.connect_timeout_ms == 3000);
	CHECK(s.command_timeout_ms == 0);
	/* In file order, a host's keys gathered from everywhere. */
	CHECK(strcmp(h[0].name, "a") == 0);
	CHECK(strcmp(h[0].address, "10.1.2.3") == 0);
	CHECK(h[0].port == 22);
	CHECK(strcmp(h[0].type, "host") == 0);
	CHECK(h[0].vcpus == 16);
	CHECK(h[0].memory_bytes == 64.0 * 1024 * 1024 * 1024);
	CHECK(isnan(h[0].accelerators));
	CHECK(strcmp(h[0].keyfile, "/k") == 0);
	CHECK(*h[0].user == '\0');
	CHECK(strcmp(h[1].name, "b") == 0);
	CHECK(h[1].port == 2200);
	CHECK(strcmp(h[1].type, "gpu") == 0);
	CHECK(h[1].accelerators == 4);
	CHECK(strcmp(h[1].accelerator, "NVIDIA_A10G") == 0);
	CHECK(strcmp(h[1].user, "bob") == 0);
	CHECK(isnan(h[1].vcpus));
	free(h);
}

static void test_mistakes(void)
{
	static const struct kv no_address[] = {{"hosts.a", "port", "22"},
					       {NULL, NULL, NULL}};
	static const struct kv bad_port[] = {{"hosts.a", "address", "h"},
					     {"hosts.a", "port", "0"},
					     {NULL, NULL, NULL}};
	static const struct kv bad_key[] = {{"hosts.a", "address", "h"},
					    {"hosts.a", "colour", "red"},
					    {NULL, NULL, NULL}};
	static const struct kv bad_setting[] = {{"hosts", "keepalive", "-1"},
						{NULL, NULL, NULL}};
	static const struct kv unknown_setting[] = {{"hosts", "port", "22"},
						    {NULL, NULL, NULL}};
	static const struct kv bad_memory[] = {
		{"hosts.a", "address", "h"},
		{"hosts.a", "memory", "atleast 4G"},
		{NULL, NULL, NULL}};
	static const struct kv bad_address[] = {{"hosts.a", "address", "a b"},
						{NULL, NULL, NULL}};
	static const struct kv bad_type[] = {{"hosts.a", "address", "h"},
					     {"hosts.a", "type", "x/y"},
					     {NULL, NULL, NULL}};
	static const struct kv bad_bool[] = {
		{"hosts", "accept_new_host_keys", "maybe"}, {NULL, NULL, NULL}};

	check_bad(no_address, "test.conf: [hosts.a] has no address");
	check_bad(bad_port, "test.conf: [hosts.a] port: \"0\" is not valid");
	check_bad(bad_key, "[hosts.a] has no key \"colour\"; it takes address, "
			   "port, user,");
	check_bad(bad_setting, "[hosts] keepalive: \"-1\" is not valid");
	check_bad(unknown_setting,
		  "[hosts] has no key \"port\"; it takes user, "
		  "keyfile,");
	check_bad(bad_memory, "[hosts.a] memory: \"atleast 4G\"");
	check_bad(bad_address, "[hosts.a] address: \"a b\"");
	check_bad(bad_type, "[hosts.a] type: \"x/y\"");
	check_bad(bad_bool, "accept_new_host_keys: \"maybe\"");
}

static void test_quote(void)
{
	char out[64];

	CHECK(ssh_quote("plain", out, sizeof(out)) == 0);
	CHECK(strcmp(out, "'plain'") == 0);
	CHECK(ssh_quote("it's $HOME `x`", out, sizeof(out)) == 0);
	CHECK(strcmp(out, "'it'\\''s $HOME `x`'") == 0);
	CHECK(ssh_quote("", out, sizeof(out)) == 0);
	CHECK(strcmp(out, "''") == 0);
	CHECK(ssh_quote("abcdef", out, 8) == -1);
	CHECK(ssh_quote("abcde", out, 8) == 0);
	CHECK(ssh_quote("'", out, 5) == -1);
}

int main(void)
{
	test_defaults();
	test_hosts();
	test_mistakes();
	test_quote();
	return check_summary("test_hostsconf");
}
