/* Reading EC2 Query API responses (libxml2): error documents, the
 * instances of RunInstances and DescribeInstances, pagination tokens. Pure
 * functions over a response body. */
#ifndef CCLFS_PROVIDERS_EC2_XML_H
#define CCLFS_PROVIDERS_EC2_XML_H

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
	int launch_index; /* amiLaunchIndex: the rank within its launch */
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

#endif
