/* libFuzzer target for the EC2 response parser (providers/ec2/ec2_xml.c,
 * libxml2): arbitrary bytes as a response body to ec2_xml_error and
 * ec2_xml_instances, with room enough, tiny buffers and none; traps as soon
 * as an invariant breaks. */
#include "providers/ec2/ec2_xml.h"
#include "tests/fuzz/fuzz_check.h"

#include <libxml/parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Room enough for any text of the seeds (longer ones are cut). */
#define TEXT_BIG 4096

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	xmlInitParser();
	return 0;
}

static bool blank(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* A text read from the response: terminated within its size, trimmed (its
 * end only when it was not cut short). */
static void check_text(const char *s, size_t size)
{
	size_t len;

	CHECK(memchr(s, '\0', size) != NULL);
	len = strlen(s);
	if (len == 0)
		return;
	CHECK(!blank(s[0]));
	if (len < size - 1)
		CHECK(!blank(s[len - 1]));
}

#define CHECK_TEXT(field) check_text((field), sizeof(field))

static void check_instance(const struct ec2_instance *in)
{
	CHECK_TEXT(in->id);
	CHECK_TEXT(in->state);
	CHECK_TEXT(in->private_ip);
	CHECK_TEXT(in->public_ip);
	CHECK_TEXT(in->type);
	CHECK_TEXT(in->client_token);
	CHECK_TEXT(in->cluster);
	CHECK_TEXT(in->role);
	CHECK_TEXT(in->token);
	/* A rank, or -1 when the response gives none. */
	CHECK(in->launch_index >= -1);
}

#define SAME_FIELD(a, b, f) (memcmp((a)->f, (b)->f, sizeof((a)->f)) == 0)

/* Field by field, every byte of each (padding aside). */
static bool same_instance(const struct ec2_instance *a,
			  const struct ec2_instance *b)
{
	return SAME_FIELD(a, b, id) && SAME_FIELD(a, b, state) &&
	       SAME_FIELD(a, b, private_ip) && SAME_FIELD(a, b, public_ip) &&
	       SAME_FIELD(a, b, type) && SAME_FIELD(a, b, client_token) &&
	       a->launch_index == b->launch_index &&
	       SAME_FIELD(a, b, cluster) && SAME_FIELD(a, b, role) &&
	       SAME_FIELD(a, b, token);
}

/* ec2_xml_error: a code and a message, or -1 with both untouched; tiny
 * buffers get their prefixes. Returns what it returned. */
static int check_error(const char *body, size_t size)
{
	char code[TEXT_BIG], msg[TEXT_BIG];
	int rc;

	memset(code, FUZZ_SENTINEL, sizeof(code));
	memset(msg, FUZZ_SENTINEL, sizeof(msg));
	rc = ec2_xml_error(body, size, code, sizeof(code), msg, sizeof(msg));
	CHECK(rc == 0 || rc == -1);
	if (rc) {
		CHECK(code[0] == FUZZ_SENTINEL && msg[0] == FUZZ_SENTINEL);
	} else {
		CHECK_TEXT(code);
		CHECK_TEXT(msg);
	}
	for (size_t i = 0; i < FUZZ_TINY_COUNT; i++) {
		size_t len = fuzz_tiny_len[i];
		char *c = sentinel_buf(len), *m = sentinel_buf(len);

		CHECK(ec2_xml_error(body, size, c, len, m, len) == rc);
		if (rc) {
			CHECK(c[0] == FUZZ_SENTINEL && m[0] == FUZZ_SENTINEL);
		} else {
			check_truncated(c, len, code);
			check_truncated(m, len, msg);
		}
		free(c);
		free(m);
	}
	return rc;
}

/* ec2_xml_instances appending to a list that holds one instance already:
 * that one untouched, every new one well formed; the same instances again
 * without a nextToken buffer, and with tiny ones. Returns what it
 * returned. */
static int check_instances(const char *body, size_t size)
{
	struct ec2_instances l = {0}, again = {0};
	struct ec2_instance first;
	char next[TEXT_BIG];
	int rc;

	memset(&first, 'Q', sizeof(first));
	l.v = malloc(sizeof(*l.v));
	CHECK(l.v != NULL);
	l.v[0] = first;
	l.n = l.cap = 1;
	memset(next, FUZZ_SENTINEL, sizeof(next));
	rc = ec2_xml_instances(body, size, &l, next, sizeof(next));
	CHECK(rc == 0 || rc == -1);
	CHECK(l.n >= 1 && l.n <= l.cap);
	CHECK(same_instance(&l.v[0], &first));
	CHECK_TEXT(next);
	if (rc)
		CHECK(l.n == 1 && next[0] == '\0');
	for (size_t i = 1; i < l.n; i++)
		check_instance(&l.v[i]);

	CHECK(ec2_xml_instances(body, size, &again, NULL, 0) == rc);
	CHECK(again.n == l.n - 1);
	for (size_t i = 0; i < again.n; i++)
		CHECK(same_instance(&again.v[i], &l.v[i + 1]));
	ec2_instances_free(&again);
	CHECK(again.v == NULL && again.n == 0 && again.cap == 0);

	for (size_t i = 0; i < FUZZ_TINY_COUNT; i++) {
		size_t len = fuzz_tiny_len[i];
		char *n = sentinel_buf(len);

		CHECK(ec2_xml_instances(body, size, &again, n, len) == rc);
		CHECK(again.n == l.n - 1);
		check_truncated(n, len, next);
		ec2_instances_free(&again);
		free(n);
	}
	ec2_instances_free(&l);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Not NUL-terminated: libFuzzer's buffer ends right after it. */
	const char *body = (const char *)data;
	int error = check_error(body, size);
	int instances = check_instances(body, size);

	/* Both read the same document: an error document parses. */
	if (error == 0)
		CHECK(instances == 0);
	return 0;
}
