/* The image of a deploy: an alias is looked up in AWS's public SSM
 * parameters of the deploy's region for the type's architecture, and an AMI
 * id is checked (DescribeImages) against the type's architecture
 * (DescribeInstanceTypes), so a Graviton type never boots an x86_64 image. */
#include "providers/ec2/ec2_image.h"

#include "providers/ec2/aws_json.h"
#include "providers/ec2/ec2_types.h"
#include "providers/ec2/ec2_xml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The aliases: the parameter (its head, the architecture's word, its
 * tail), the words for x86_64 and arm64, and the distribution's login. */
static const struct ec2_image_alias {
	const char *name;
	const char *head, *tail;
	const char *x86_64, *arm64;
	const char *user;
} ec2_image_aliases[] = {
	{"al2023",
	 "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-", "",
	 "x86_64", "arm64", "ec2-user"},
	{"ubuntu-24.04",
	 "/aws/service/canonical/ubuntu/server/24.04/stable/current/",
	 "/hvm/ebs-gp3/ami-id", "amd64", "arm64", "ubuntu"},
	{"ubuntu-22.04",
	 "/aws/service/canonical/ubuntu/server/22.04/stable/current/",
	 "/hvm/ebs-gp3/ami-id", "amd64", "arm64", "ubuntu"},
	{"debian-12", "/aws/service/debian/release/12/latest/", "", "amd64",
	 "arm64", "admin"},
};
#define EC2_IMAGE_ALIASES                                                      \
	(sizeof(ec2_image_aliases) / sizeof(ec2_image_aliases[0]))

static const struct ec2_image_alias *ec2_image_alias(const char *image)
{
	for (size_t i = 0; i < EC2_IMAGE_ALIASES; i++)
		if (strcmp(ec2_image_aliases[i].name, image) == 0)
			return &ec2_image_aliases[i];
	return NULL;
}

const char *ec2_image_user(const char *image)
{
	const struct ec2_image_alias *a =
		ec2_image_alias(image && *image ? image : EC2_IMAGE_DEFAULT);

	return a ? a->user : "ec2-user";
}

int ec2_image_is_alias(const char *image)
{
	return strncmp(image, "ami-", 4) != 0;
}

/* The type's architecture: x86_64 or arm64 (what an AMI can be). */
static int ec2_image_type_arch(const struct ec2_image_calls *k,
			       const char *type, char *arch, size_t archlen,
			       char *err, size_t errlen)
{
	struct ec2_types types = {0};
	struct ec2_notes notes = {0};
	struct ec2_types_page page = {&types, &notes};
	char code[EC2_CODE_MAX], *body = NULL;
	struct ec2_query q;
	size_t len = 0;
	int rc;

	ec2_query_init(&q, "DescribeInstanceTypes");
	ec2_query_add(&q, "InstanceType.1", type);
	rc = ec2_call(k->ec2, &q, k->cancel, &body, &len, code, sizeof(code),
		      err, errlen);
	ec2_query_free(&q);
	if (rc == 0 && ec2_xml_items(body, len, "instanceTypeSet",
				     ec2_types_item, &page, NULL, 0)) {
		snprintf(err, errlen,
			 "DescribeInstanceTypes: the response does not parse");
		rc = -EIO;
	}
	free(body);
	if (rc == 0 && (types.n == 0 || !types.v[0].t.architecture)) {
		snprintf(err, errlen,
			 "DescribeInstanceTypes does not say the architecture "
			 "of %s in %s",
			 type, k->cfg->region);
		rc = -EIO;
	}
	if (rc == 0)
		snprintf(arch, archlen, "%s", types.v[0].t.architecture);
	ec2_types_free(&types);
	ec2_notes_free(&notes);
	return rc;
}

/* The AMI of an alias's parameter in the region. */
static int ec2_image_parameter(const struct ec2_image_calls *k,
			       const struct ec2_image_alias *a,
			       const char *arch, char *ami, size_t amilen,
			       char *err, size_t errlen)
{
	char name[256], code[EC2_CODE_MAX];
	struct ec2_client *ssm;
	cJSON *req, *out = NULL;
	const cJSON *v;
	int rc;

	snprintf(name, sizeof(name), "%s%s%s", a->head,
		 strcmp(arch, "arm64") == 0 ? a->arm64 : a->x86_64, a->tail);
	ssm = aws_json_client_new(k->cfg, k->cfg->ssm_endpoint, "ssm",
				  k->cfg->region, k->retry, err, errlen);
	if (!ssm)
		return -EIO;
	req = cJSON_CreateObject();
	if (!req || !cJSON_AddStringToObject(req, "Name", name)) {
		cJSON_Delete(req);
		ec2_client_free(ssm);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = aws_json_call(ssm, "AmazonSSM.GetParameter", req, k->cancel, &out,
			   code, sizeof(code), err, errlen);
	cJSON_Delete(req);
	ec2_client_free(ssm);
	if (rc) {
		char why[512];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen,
			 "the image alias %s (%s) could not be looked up in "
			 "%s: %.400s",
			 a->name, name, k->cfg->region, why);
		return rc;
	}
	v = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(out, "Parameter"), "Value");
	if (!cJSON_IsString(v) || strncmp(v->valuestring, "ami-", 4) != 0) {
		snprintf(err, errlen,
			 "the SSM parameter %s of %s holds no AMI id", name,
			 k->cfg->region);
		rc = -EIO;
	} else {
		snprintf(ami, amilen, "%s", v->valuestring);
	}
	cJSON_Delete(out);
	return rc;
}

/* The architecture DescribeImages gives `ami` ("" when it says none). */
static int ec2_image_arch(const struct ec2_image_calls *k, const char *ami,
			  char *arch, size_t archlen, char *err, size_t errlen)
{
	char code[EC2_CODE_MAX], *body = NULL, action[] = "DescribeImages";
	struct ec2_query q;
	size_t len = 0;
	int rc;

	ec2_query_init(&q, action);
	ec2_query_add(&q, "ImageId.1", ami);
	rc = ec2_call(k->ec2, &q, k->cancel, &body, &len, code, sizeof(code),
		      err, errlen);
	ec2_query_free(&q);
	arch[0] = '\0';
	if (rc == 0) {
		xmlDoc *doc = ec2_xml_read(body, len);
		const xmlNode *n = doc ? ec2_xml_find(xmlDocGetRootElement(doc),
						      "architecture")
				       : NULL;

		if (!doc) {
			snprintf(err, errlen, "%s: the response does not parse",
				 action);
			rc = -EIO;
		} else if (!n) {
			snprintf(err, errlen,
				 "the image %s does not exist in %s (%s lists "
				 "nothing)",
				 ami, k->cfg->region, action);
			rc = -EINVAL;
		} else {
			ec2_xml_text(n, NULL, arch, archlen);
		}
		xmlFreeDoc(doc);
	} else if (strncmp(code, "InvalidAMIID", 12) == 0) {
		rc = -EINVAL;
	}
	free(body);
	return rc;
}

static void ec2_image_names(char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < EC2_IMAGE_ALIASES && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? ", " : "",
				      ec2_image_aliases[i].name);
}

int ec2_image_pick(const struct ec2_image_calls *k, const char *type,
		   const char *image, char *ami, size_t amilen, char *err,
		   size_t errlen)
{
	const struct ec2_image_alias *a;
	char arch[32], img_arch[32], names[128];
	int rc;

	if (!image || !*image)
		image = EC2_IMAGE_DEFAULT;
	a = ec2_image_alias(image);
	if (!a && ec2_image_is_alias(image)) {
		ec2_image_names(names, sizeof(names));
		snprintf(err, errlen,
			 "config/imageid: %.128s is neither an AMI id "
			 "(ami-...) nor an image alias (%s)",
			 image, names);
		return -EINVAL;
	}
	rc = ec2_image_type_arch(k, type, arch, sizeof(arch), err, errlen);
	if (rc)
		return rc;
	if (a)
		return ec2_image_parameter(k, a, arch, ami, amilen, err,
					   errlen);
	rc = ec2_image_arch(k, image, img_arch, sizeof(img_arch), err, errlen);
	if (rc)
		return rc;
	if (*img_arch && strcmp(img_arch, arch) != 0) {
		ec2_image_names(names, sizeof(names));
		snprintf(err, errlen,
			 "config/imageid: the image %.128s is %s but the "
			 "instance type %s is %s; write an %s image or an "
			 "alias (%s) to config/imageid",
			 image, img_arch, type, arch, arch, names);
		return -EINVAL;
	}
	snprintf(ami, amilen, "%s", image);
	return 0;
}
