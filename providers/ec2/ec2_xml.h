/* Reading EC2 Query API responses (libxml2): error documents, the
 * instances of RunInstances and DescribeInstances, pagination tokens. Pure
 * functions over a response body. */
#ifndef CCLFS_PROVIDERS_EC2_XML_H
#define CCLFS_PROVIDERS_EC2_XML_H

#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>

/* The tags cclfs puts on what it launches. */
#define EC2_TAG_CLUSTER "cclfs:cluster"
#define EC2_TAG_ROLE	"cclfs:role"
#define EC2_TAG_TOKEN	"cclfs:token"

struct ec2_instance {
	char id[32];
	char state[24]; /* pending running stopping stopped shutting-down
			   terminated */
	char private_ip[64];
	char public_ip[64];
	char type[64];
	char client_token[80];
	char zone[32];	    /* placement/availabilityZone */
	char lifecycle[16]; /* instanceLifecycle: "spot", or "" */
	char reason[64];    /* stateReason/code: Server.SpotInstance... */
	int launch_index;   /* amiLaunchIndex: the rank within its launch */
	/* Its cclfs tags ("" when absent). */
	char cluster[65];
	char role[16];
	char token[40];
};

struct ec2_instances {
	struct ec2_instance *v;
	size_t n, cap;
};

/* The code and message of an error document (<Errors><Error>...). 0, or -1
 * when the body is not one. */
int ec2_xml_error(const char *body, size_t len, char *code, size_t codelen,
		  char *msg, size_t msglen);

/* Append every instance of a RunInstances, DescribeInstances or
 * Start/Stop/TerminateInstances response to `out`; the nextToken (or "")
 * goes to `next` when not NULL. 0, or -1 when the body does not parse. */
int ec2_xml_instances(const char *body, size_t len, struct ec2_instances *out,
		      char *next, size_t nextlen);

void ec2_instances_free(struct ec2_instances *l);

/* The helpers of every reader of responses (elements matched by local
 * name): parse a body quietly (NULL when it does not parse; xmlFreeDoc
 * it); whether n is element `name`; its first child element `name`; the
 * first element `name` at or below n in document order (n's siblings
 * included); the trimmed text of child `name` of n (of n itself when name
 * is NULL), or "". */
xmlDoc *ec2_xml_read(const char *body, size_t len);
bool ec2_xml_is(const xmlNode *n, const char *name);
const xmlNode *ec2_xml_child(const xmlNode *n, const char *name);
const xmlNode *ec2_xml_find(const xmlNode *n, const char *name);
void ec2_xml_text(const xmlNode *n, const char *name, char *out, size_t len);
/* The <item>s of the set `set` of a response's root: fn(item, ctx) for
 * each (an empty answer may leave the set out); the nextToken (or "") to
 * next. 0, -1 when the body does not parse, -2 when fn failed. */
int ec2_xml_items(const char *body, size_t len, const char *set,
		  int (*fn)(const xmlNode *item, void *ctx), void *ctx,
		  char *next, size_t nextlen);

#endif
