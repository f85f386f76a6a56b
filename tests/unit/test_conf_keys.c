/* Unit tests of the table every provider reads its sections of cclfs.conf
 * through (providers/conf_keys): each kind of value, the errors, settings
 * left alone by a bad value, and the [ec2], [gcp] and [local] tables. */
#include "check.h"
#include "providers/conf_keys.h"
#include "providers/ec2/ec2_conf.h"
#include "providers/gcp/gcp_conf.h"
#include "providers/provider.h"
#include "providers/provider_conf.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct demo {
	char word[8], text[8], url[32], choice[8];
	int flag, n, ms, s, attempts;
	double price, parsed;
};

static int demo_parse(const char *v, void *field, size_t size)
{
	(void)size;
	if (strcmp(v, "pi") != 0)
		return -1;
	*(double *)field = 3.14;
	return 0;
}

static const char *const demo_choices[] = {"red", "green", "blue", NULL};

#define DEMO(k, kind, f, lo, hi) CONFKEYS_KEY(k, kind, struct demo, f, lo, hi)

static const struct confkeys_key demo_keys[] = {
	DEMO("word", CONFKEYS_WORD, word, 0, 0),
	DEMO("name", CONFKEYS_NONEMPTY, word, 0, 0),
	DEMO("url", CONFKEYS_URL, url, 0, 0),
	DEMO("text", CONFKEYS_TEXT, text, 0, 0),
	CONFKEYS_CHOICE_KEY("colour", struct demo, choice, demo_choices),
	DEMO("flag", CONFKEYS_BOOL, flag, 0, 0),
	DEMO("n", CONFKEYS_INT, n, 1, 65535),
	DEMO("timeout", CONFKEYS_MS, ms, 0.1, 3600),
	DEMO("keepalive", CONFKEYS_WHOLE_S, s, 0, 3600),
	DEMO("retries", CONFKEYS_ATTEMPTS, attempts, 0, 100),
	DEMO("price", CONFKEYS_PRICE, price, 0, 0),
	CONFKEYS_PARSE_KEY("const", struct demo, parsed, demo_parse,
			   "the word pi"),
	{.name = "token",
	 .kind = CONFKEYS_WORD,
	 CONFKEYS_FIELD(struct demo, word),
	 .secret = true},
};
#define DEMO_N (sizeof(demo_keys) / sizeof(demo_keys[0]))

static char err[1024];

/* Apply key = v to d: its return. */
static int apply(struct demo *d, const char *key, const char *v)
{
	struct config_entry e = {"demo", (char *)key, (char *)v};

	*err = '\0';
	return confkeys_apply(demo_keys, DEMO_N, "t.conf", &e, d, err,
			      sizeof(err));
}

/* key = v is refused, with `want` in the error, and d is left as it was. */
static void check_refused(const char *key, const char *v, const char *want)
{
	unsigned char before[sizeof(struct demo)], after[sizeof(struct demo)];
	struct demo d;

	/* Every byte, padding too, is compared: none may change. */
	memset(&d, 0x5a, sizeof(d));
	memcpy(before, &d, sizeof(d));
	CHECK(apply(&d, key, v) == -1);
	memcpy(after, &d, sizeof(d));
	CHECK(memcmp(after, before, sizeof(d)) == 0);
	CHECK(strstr(err, want) != NULL);
	if (!strstr(err, want))
		fprintf(stderr, "  wanted \"%s\" in \"%s\"\n", want, err);
}

static void test_kinds(void)
{
	struct demo d;

	memset(&d, 0, sizeof(d));
	CHECK(apply(&d, "word", "abc-1") == 0 && strcmp(d.word, "abc-1") == 0);
	CHECK(apply(&d, "word", "") == 0 && strcmp(d.word, "") == 0);
	CHECK(apply(&d, "name", "x") == 0 && strcmp(d.word, "x") == 0);
	CHECK(apply(&d, "url", "https://e.test/") == 0 &&
	      strcmp(d.url, "https://e.test/") == 0);
	CHECK(apply(&d, "text", "a b 'c'") == 0 &&
	      strcmp(d.text, "a b 'c'") == 0);
	CHECK(apply(&d, "colour", "blue") == 0 &&
	      strcmp(d.choice, "blue") == 0);
	CHECK(apply(&d, "flag", "yes") == 0 && d.flag == 1);
	CHECK(apply(&d, "flag", "false") == 0 && d.flag == 0);
	CHECK(apply(&d, "flag", "true") == 0 && d.flag == 1);
	CHECK(apply(&d, "n", "65535") == 0 && d.n == 65535);
	CHECK(apply(&d, "timeout", "0.25") == 0 && d.ms == 250);
	CHECK(apply(&d, "timeout", "3600") == 0 && d.ms == 3600000);
	/* libssh2 counts keepalives in whole seconds: a half is one, not
	 * none. */
	CHECK(apply(&d, "keepalive", "0.5") == 0 && d.s == 1);
	CHECK(apply(&d, "keepalive", "0") == 0 && d.s == 0);
	CHECK(apply(&d, "keepalive", "15") == 0 && d.s == 15);
	CHECK(apply(&d, "retries", "0") == 0 && d.attempts == 1);
	CHECK(apply(&d, "retries", "7") == 0 && d.attempts == 8);
	CHECK(apply(&d, "price", "$3") == 0 && d.price == 3);
	CHECK(apply(&d, "price", "0.25") == 0 && d.price == 0.25);
	CHECK(apply(&d, "const", "pi") == 0 && d.parsed == 3.14);
}

static void test_refused(void)
{
	check_refused("word", "a b",
		      "t.conf: [demo] word: \"a b\" is not valid; it takes at "
		      "most 7 bytes without blanks, quotes, '&', '=' or '?'");
	check_refused("word", "a=b", "word: \"a=b\" is not valid");
	check_refused("word", "12345678", "word: \"12345678\" is not valid");
	check_refused("name", "", "it takes 1 to at most 7 bytes");
	check_refused("url", "ftp://e.test/", "an http:// or https:// URL");
	check_refused("text", "12345678", "it takes at most 7 bytes");
	check_refused("colour", "pink",
		      "colour: \"pink\" is not valid; it takes red, green or "
		      "blue");
	check_refused("flag", "maybe", "it takes yes or no");
	check_refused("n", "0", "it takes a whole number from 1 to 65535");
	check_refused("n", "1.5", "n: \"1.5\" is not valid");
	check_refused("n", "99999999999999999999", "is not valid");
	check_refused("timeout", "0.01", "it takes seconds from 0.1 to 3600");
	check_refused("timeout", "nan", "is not valid");
	check_refused("timeout", "inf", "is not valid");
	check_refused("timeout", "", "is not valid");
	check_refused("timeout", "5s", "is not valid");
	check_refused("keepalive", "-1", "seconds from 0 to 3600");
	check_refused("retries", "101", "a whole number from 0 to 100");
	check_refused("price", "cheap",
		      "price: \"cheap\" is not valid; it takes a price in US "
		      "dollars per hour, such as 0.25");
	check_refused("price", "-1", "price: \"-1\" is not valid");
	check_refused("const", "e",
		      "const: \"e\" is not valid; it takes the "
		      "word pi");
	/* A secret never shows in an error (nor in the log it goes to). */
	check_refused("token", "s3cr3t 'x'", "token: \"(not shown)\"");
	CHECK(strstr(err, "s3cr3t") == NULL);
	check_refused("colour_", "red",
		      "t.conf: [demo] has no key \"colour_\"; it takes word, "
		      "name, url, text, colour, flag, n, timeout, keepalive, "
		      "retries, price, const and token");
}

/* One line of cclfs.conf in its own configuration. */
static void one_line(struct config *cfg, struct config_entry *e,
		     const char *section, const char *key, const char *value)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "c.conf");
	e->section = (char *)section;
	e->key = (char *)key;
	e->value = (char *)value;
	cfg->entries = e;
	cfg->count = 1;
}

static void test_ec2(void)
{
	struct ec2_settings s;
	struct config cfg;
	struct config_entry e;

	one_line(&cfg, &e, "ec2", "keepalive", "0.5");
	CHECK(ec2conf_read(&cfg, "/st", &s, err, sizeof(err)) == 0);
	CHECK(s.keepalive_s == 1);
	CHECK(strcmp(s.address, "public") == 0 && s.retry.attempts == 8);
	one_line(&cfg, &e, "ec2", "retries", "2");
	CHECK(ec2conf_read(&cfg, "/st", &s, err, sizeof(err)) == 0);
	CHECK(s.retry.attempts == 3);
	one_line(&cfg, &e, "ec2", "address", "private");
	CHECK(ec2conf_read(&cfg, "/st", &s, err, sizeof(err)) == 0);
	CHECK(strcmp(s.address, "private") == 0);
	one_line(&cfg, &e, "ec2", "address", "elastic");
	CHECK(ec2conf_read(&cfg, "/st", &s, err, sizeof(err)) == -1);
	CHECK(strstr(err, "c.conf: [ec2] address: \"elastic\" is not valid; "
			  "it takes public or private") != NULL);
	one_line(&cfg, &e, "ec2", "endpoint", "http://e.test");
	CHECK(ec2conf_read(&cfg, "/st", &s, err, sizeof(err)) == -1);
	CHECK(strstr(err, "[ec2] has no key \"endpoint\"; it takes region, "
			  "endpoint_url,") != NULL);
	CHECK(strstr(err, " retry_backoff_max and request_timeout") != NULL);
}

static void test_gcp(void)
{
	struct gcp_settings s;
	struct config cfg;
	struct config_entry e;

	one_line(&cfg, &e, "gcp", "billing_api_key", "AIza secret");
	CHECK(gcpconf_read(&cfg, "/st", &s, err, sizeof(err)) == -1);
	CHECK(strstr(err, "billing_api_key: \"(not shown)\"") != NULL);
	CHECK(strstr(err, "secret") == NULL);
	one_line(&cfg, &e, "gcp", "command_timeout", "1.5");
	CHECK(gcpconf_read(&cfg, "/st", &s, err, sizeof(err)) == 0);
	CHECK(s.command_timeout_ms == 1500 && s.keepalive_s == 15);
	CHECK(strcmp(s.user, "cclfs") == 0);
}

static void test_local(void)
{
	const struct provider_entry *local = provider_entry_find("local");
	struct provider_type *t = NULL;
	struct config cfg;
	struct config_entry e;
	size_t n = 0;

	CHECK(local != NULL);
	if (!local)
		return;
	one_line(&cfg, &e, "local", "price", "0.5");
	CHECK(local->types(&cfg, &t, &n, err, sizeof(err)) == 0);
	CHECK(n == 1 && t && t->price == 0.5);
	free(t);
	t = NULL;
	one_line(&cfg, &e, "local", "cost", "1");
	CHECK(local->types(&cfg, &t, &n, err, sizeof(err)) == -1);
	CHECK(strstr(err, "[local] has no key \"cost\"; it takes price") !=
	      NULL);
	CHECK(t == NULL);
}

int main(void)
{
	test_kinds();
	test_refused();
	test_ec2();
	test_gcp();
	test_local();
	return check_summary("test_conf_keys");
}
