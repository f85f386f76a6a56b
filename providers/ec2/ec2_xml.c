/* Reading EC2 Query API responses with libxml2: error documents, instance
 * items wherever an instancesSet holds them (RunInstances, the reservations
 * of DescribeInstances, state changes), and nextToken. Elements are matched
 * by local name, whatever their namespace. */
#include "providers/ec2/ec2_xml.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ec2_xml_is(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE &&
	       strcmp((const char *)n->name, name) == 0;
}

const xmlNode *ec2_xml_child(const xmlNode *n, const char *name)
{
	for (const xmlNode *c = n ? n->children : NULL; c; c = c->next)
		if (ec2_xml_is(c, name))
			return c;
	return NULL;
}

void ec2_xml_text(const xmlNode *n, const char *name, char *out, size_t len)
{
	const xmlNode *c = name ? ec2_xml_child(n, name) : n;
	xmlChar *t = c ? xmlNodeGetContent(c) : NULL;
	const char *s = t ? (const char *)t : "";
	size_t a = 0, b = strlen(s);

	while (a < b &&
	       (s[a] == ' ' || s[a] == '\n' || s[a] == '\t' || s[a] == '\r'))
		a++;
	while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\n' ||
			 s[b - 1] == '\t' || s[b - 1] == '\r'))
		b--;
	snprintf(out, len, "%.*s", (int)(b - a), s + a);
	xmlFree(t);
}

/* libxml2 reports some errors (bytes the declared encoding cannot convert)
 * through its generic handler whatever XML_PARSE_NOERROR says: silenced,
 * so that no response writes to cclfs's stderr. */
static void ec2_xml_quiet(void *ctx, const char *msg, ...)
{
	(void)ctx;
	(void)msg;
}

/* libxml2 2.9 makes its global mutex on a thread's first call unless the
 * parser was initialised: two first calls at once (responses read side by
 * side) each made one, and one was lost. */
static pthread_once_t ec2_xml_once = PTHREAD_ONCE_INIT;

xmlDoc *ec2_xml_read(const char *body, size_t len)
{
	if (!body || len == 0 || len > (size_t)0x7fffffff)
		return NULL;
	pthread_once(&ec2_xml_once, xmlInitParser);
	/* The handler is the calling thread's. */
	xmlSetGenericErrorFunc(NULL, ec2_xml_quiet);
	return xmlReadMemory(body, (int)len, "response.xml", NULL,
			     XML_PARSE_NONET | XML_PARSE_NOBLANKS |
				     XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

const xmlNode *ec2_xml_find(const xmlNode *n, const char *name)
{
	for (const xmlNode *c = n; c; c = c->next) {
		const xmlNode *f;

		if (ec2_xml_is(c, name))
			return c;
		f = ec2_xml_find(c->children, name);
		if (f)
			return f;
	}
	return NULL;
}

int ec2_xml_error(const char *body, size_t len, char *code, size_t codelen,
		  char *msg, size_t msglen)
{
	xmlDoc *doc = ec2_xml_read(body, len);
	const xmlNode *err;
	int rc = -1;

	if (!doc)
		return -1;
	err = ec2_xml_find(xmlDocGetRootElement(doc), "Error");
	if (err && ec2_xml_child(err, "Code")) {
		ec2_xml_text(err, "Code", code, codelen);
		ec2_xml_text(err, "Message", msg, msglen);
		rc = 0;
	}
	xmlFreeDoc(doc);
	return rc;
}

static void ec2_xml_tags(const xmlNode *item, struct ec2_instance *in)
{
	const xmlNode *set = ec2_xml_child(item, "tagSet");

	for (const xmlNode *t = set ? set->children : NULL; t; t = t->next) {
		char key[128];

		if (!ec2_xml_is(t, "item"))
			continue;
		ec2_xml_text(t, "key", key, sizeof(key));
		if (strcmp(key, EC2_TAG_CLUSTER) == 0)
			ec2_xml_text(t, "value", in->cluster,
				     sizeof(in->cluster));
		else if (strcmp(key, EC2_TAG_ROLE) == 0)
			ec2_xml_text(t, "value", in->role, sizeof(in->role));
		else if (strcmp(key, EC2_TAG_TOKEN) == 0)
			ec2_xml_text(t, "value", in->token, sizeof(in->token));
	}
}

/* amiLaunchIndex: a rank, 0 to INT_MAX, else -1 (atoi would take "-3",
 * "3x", and a number out of range is undefined behaviour for it). */
static int ec2_xml_index(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	return *end || errno || v > INT_MAX ? -1 : (int)v;
}

static int ec2_xml_push(struct ec2_instances *out, const xmlNode *item)
{
	struct ec2_instance *in;
	const xmlNode *st;
	char idx[16];

	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 16;
		struct ec2_instance *v = realloc(out->v, cap * sizeof(*v));

		if (!v)
			return -1;
		out->v = v;
		out->cap = cap;
	}
	in = &out->v[out->n++];
	memset(in, 0, sizeof(*in));
	ec2_xml_text(item, "instanceId", in->id, sizeof(in->id));
	st = ec2_xml_child(item, "instanceState");
	if (!st)
		st = ec2_xml_child(item, "currentState");
	ec2_xml_text(st, "name", in->state, sizeof(in->state));
	ec2_xml_text(item, "privateIpAddress", in->private_ip,
		     sizeof(in->private_ip));
	ec2_xml_text(item, "ipAddress", in->public_ip, sizeof(in->public_ip));
	ec2_xml_text(item, "instanceType", in->type, sizeof(in->type));
	ec2_xml_text(item, "clientToken", in->client_token,
		     sizeof(in->client_token));
	ec2_xml_text(ec2_xml_child(item, "placement"), "availabilityZone",
		     in->zone, sizeof(in->zone));
	ec2_xml_text(item, "instanceLifecycle", in->lifecycle,
		     sizeof(in->lifecycle));
	ec2_xml_text(ec2_xml_child(item, "stateReason"), "code", in->reason,
		     sizeof(in->reason));
	ec2_xml_text(item, "amiLaunchIndex", idx, sizeof(idx));
	in->launch_index = ec2_xml_index(idx);
	ec2_xml_tags(item, in);
	return 0;
}

/* Every item of every instancesSet below n. */
static int ec2_xml_walk(const xmlNode *n, struct ec2_instances *out)
{
	for (const xmlNode *c = n; c; c = c->next) {
		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (ec2_xml_is(c, "instancesSet")) {
			for (const xmlNode *i = c->children; i; i = i->next)
				if (ec2_xml_is(i, "item") &&
				    ec2_xml_push(out, i))
					return -1;
			continue;
		}
		if (ec2_xml_walk(c->children, out))
			return -1;
	}
	return 0;
}

int ec2_xml_instances(const char *body, size_t len, struct ec2_instances *out,
		      char *next, size_t nextlen)
{
	xmlDoc *doc = ec2_xml_read(body, len);
	const xmlNode *root;
	int rc;

	if (next && nextlen)
		next[0] = '\0';
	if (!doc)
		return -1;
	root = xmlDocGetRootElement(doc);
	rc = ec2_xml_walk(root, out);
	if (rc == 0 && next && root)
		ec2_xml_text(root, "nextToken", next, nextlen);
	xmlFreeDoc(doc);
	return rc;
}

void ec2_instances_free(struct ec2_instances *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

int ec2_xml_items(const char *body, size_t len, const char *set,
		  int (*fn)(const xmlNode *item, void *ctx), void *ctx,
		  char *next, size_t nextlen)
{
	xmlDoc *doc = ec2_xml_read(body, len);
	const xmlNode *root, *s;
	int rc = 0;

	if (nextlen)
		next[0] = '\0';
	if (!doc)
		return -1;
	root = xmlDocGetRootElement(doc);
	s = ec2_xml_child(root, set);
	/* An empty answer may leave the set out. */
	for (const xmlNode *i = s ? s->children : NULL; i && rc == 0;
	     i = i->next)
		if (ec2_xml_is(i, "item") && fn(i, ctx))
			rc = -2;
	if (rc == 0)
		ec2_xml_text(root, "nextToken", next, nextlen);
	xmlFreeDoc(doc);
	return rc;
}
