/* Unit tests of the EC2 provider's pure parts: request bodies (encoding,
 * parameters), retry decisions, response and error parsing, the AWS
 * settings search (environment and profile files), and key pairs. */
#include "check.h"
#include "providers/ec2/aws_config.h"
#include "providers/ec2/ec2_image.h"
#include "providers/ec2/ec2_query.h"
#include "providers/ec2/ec2_xml.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static void test_query(void)
{
	struct ec2_query q;
	char enc[64];

	ec2_query_init(&q, "RunInstances");
	ec2_query_add(&q, "ImageId", "ami-0123");
	ec2_query_addf(&q, "MinCount", "%d", 4);
	ec2_query_add(&q, "TagSpecification.1.Tag.1.Key", "cclfs:cluster");
	ec2_query_add(&q, "Weird", "a b&c=d/é~");
	CHECK(!q.failed);
	CHECK(strcmp(q.body,
		     "Action=RunInstances&Version=2016-11-15&ImageId=ami-0123"
		     "&MinCount=4&TagSpecification.1.Tag.1.Key=cclfs%3Acluster"
		     "&Weird=a%20b%26c%3Dd%2F%C3%A9~") == 0);
	CHECK(q.len == strlen(q.body));
	ec2_query_free(&q);

	CHECK(ec2_query_encode("A-z_0.9~", enc, sizeof(enc)) == 0 &&
	      strcmp(enc, "A-z_0.9~") == 0);
	CHECK(ec2_query_encode("+ *", enc, sizeof(enc)) == 0 &&
	      strcmp(enc, "%2B%20%2A") == 0);
	CHECK(ec2_query_encode("abcdef", enc, 4) == -1);
}

static void test_retryable(void)
{
	CHECK(ec2_retryable("RequestLimitExceeded", 503));
	CHECK(ec2_retryable("RequestLimitExceeded", 400));
	CHECK(ec2_retryable("Unavailable", 503));
	CHECK(ec2_retryable("InternalError", 500));
	CHECK(ec2_retryable("", 502));
	CHECK(ec2_retryable("", 429));
	CHECK(!ec2_retryable("InsufficientInstanceCapacity", 500));
	CHECK(!ec2_retryable("InvalidAMIID.NotFound", 400));
	CHECK(!ec2_retryable("UnauthorizedOperation", 403));
	CHECK(!ec2_retryable("", 400));
}

static const char run_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<RunInstancesResponse "
	"xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	"<requestId>r1</requestId><reservationId>r-1</reservationId>"
	"<instancesSet>"
	"<item><instanceId>i-0a</instanceId><imageId>ami-1</imageId>"
	"<instanceState><code>0</code><name>pending</name></instanceState>"
	"<privateIpAddress>10.0.0.5</privateIpAddress>"
	"<amiLaunchIndex>1</amiLaunchIndex>"
	"<instanceType>t3.micro</instanceType>"
	"<clientToken>tok-w</clientToken>"
	"<tagSet><item><key>cclfs:cluster</key><value>c1</value></item>"
	"<item><key>cclfs:role</key><value>worker</value></item>"
	"<item><key>cclfs:token</key><value>abc</value></item>"
	"<item><key>Name</key><value>x</value></item></tagSet>"
	"<groupSet><item><groupId>sg-1</groupId></item></groupSet>"
	"</item>"
	"<item><instanceId>i-0b</instanceId>"
	"<instanceState><code>0</code><name>pending</name></instanceState>"
	"<amiLaunchIndex>0</amiLaunchIndex></item>"
	"</instancesSet></RunInstancesResponse>";

static const char describe_xml[] =
	"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/"
	"2016-11-15/\"><requestId>r2</requestId><reservationSet>"
	"<item><reservationId>r-1</reservationId><instancesSet>"
	"<item><instanceId>i-1</instanceId><instanceState><code>16</code>"
	"<name>running</name></instanceState>"
	"<privateIpAddress>10.0.0.1</privateIpAddress>"
	"<ipAddress>3.3.3.3</ipAddress></item>"
	"</instancesSet></item>"
	"<item><reservationId>r-2</reservationId><instancesSet>"
	"<item><instanceId>i-2</instanceId><instanceState><code>48</code>"
	"<name>terminated</name></instanceState>"
	"<placement><availabilityZone>us-east-1c</availabilityZone>"
	"</placement><instanceLifecycle>spot</instanceLifecycle>"
	"<stateReason><code>Server.SpotInstanceTermination</code><message>"
	"Server.SpotInstanceTermination: Spot instance termination</message>"
	"</stateReason></item>"
	"</instancesSet></item></reservationSet>"
	"<nextToken>page2</nextToken></DescribeInstancesResponse>";

static const char stop_xml[] =
	"<StopInstancesResponse><instancesSet><item>"
	"<instanceId>i-1</instanceId><currentState><code>64</code>"
	"<name>stopping</name></currentState><previousState><code>16</code>"
	"<name>running</name></previousState></item></instancesSet>"
	"</StopInstancesResponse>";

static const char error_xml[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors>"
	"<Error><Code>InsufficientInstanceCapacity</Code><Message>We "
	"currently do not have sufficient capacity.</Message></Error>"
	"</Errors><RequestID>u</RequestID></Response>";

static void test_xml(void)
{
	struct ec2_instances l = {0};
	char next[64], code[64], msg[128];

	CHECK(ec2_xml_instances(run_xml, strlen(run_xml), &l, next,
				sizeof(next)) == 0);
	CHECK(l.n == 2 && *next == '\0');
	if (l.n == 2) {
		CHECK(strcmp(l.v[0].id, "i-0a") == 0);
		CHECK(strcmp(l.v[0].state, "pending") == 0);
		CHECK(strcmp(l.v[0].private_ip, "10.0.0.5") == 0);
		CHECK(*l.v[0].public_ip == '\0');
		CHECK(l.v[0].launch_index == 1 && l.v[1].launch_index == 0);
		CHECK(strcmp(l.v[0].cluster, "c1") == 0);
		CHECK(strcmp(l.v[0].role, "worker") == 0);
		CHECK(strcmp(l.v[0].token, "abc") == 0);
		CHECK(strcmp(l.v[0].client_token, "tok-w") == 0);
		CHECK(strcmp(l.v[0].type, "t3.micro") == 0);
		CHECK(*l.v[1].cluster == '\0');
	}
	ec2_instances_free(&l);

	CHECK(ec2_xml_instances(describe_xml, strlen(describe_xml), &l, next,
				sizeof(next)) == 0);
	CHECK(l.n == 2 && strcmp(next, "page2") == 0);
	if (l.n == 2) {
		CHECK(strcmp(l.v[0].state, "running") == 0);
		CHECK(strcmp(l.v[0].public_ip, "3.3.3.3") == 0);
		CHECK(strcmp(l.v[1].id, "i-2") == 0 &&
		      strcmp(l.v[1].state, "terminated") == 0);
		CHECK(l.v[1].launch_index == -1);
		/* Where it ran, its market, and why it ended. */
		CHECK(*l.v[0].zone == '\0' && *l.v[0].lifecycle == '\0' &&
		      *l.v[0].reason == '\0');
		CHECK(strcmp(l.v[1].zone, "us-east-1c") == 0);
		CHECK(strcmp(l.v[1].lifecycle, "spot") == 0);
		CHECK(strcmp(l.v[1].reason, "Server.SpotInstanceTermination") ==
		      0);
	}
	/* Appending: a second page adds to the first. */
	CHECK(ec2_xml_instances(stop_xml, strlen(stop_xml), &l, NULL, 0) == 0);
	CHECK(l.n == 3 && strcmp(l.v[2].state, "stopping") == 0);
	ec2_instances_free(&l);

	CHECK(ec2_xml_instances("<not xml", 9, &l, next, sizeof(next)) == -1);
	ec2_instances_free(&l);

	CHECK(ec2_xml_error(error_xml, strlen(error_xml), code, sizeof(code),
			    msg, sizeof(msg)) == 0);
	CHECK(strcmp(code, "InsufficientInstanceCapacity") == 0);
	CHECK(strcmp(msg, "We currently do not have sufficient capacity.") ==
	      0);
	CHECK(ec2_xml_error(run_xml, strlen(run_xml), code, sizeof(code), msg,
			    sizeof(msg)) == -1);
	CHECK(ec2_xml_error("", 0, code, sizeof(code), msg, sizeof(msg)) == -1);
}

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void clear_env(void)
{
	static const char *const vars[] = {
		"AWS_ACCESS_KEY_ID",	"AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",	"AWS_PROFILE",
		"AWS_DEFAULT_PROFILE",	"AWS_REGION",
		"AWS_DEFAULT_REGION",	"AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_EC2", "AWS_SHARED_CREDENTIALS_FILE",
		"AWS_CONFIG_FILE",	"AWS_ENDPOINT_URL_SSM",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_aws_config(void)
{
	struct aws_defaults d = {"", ""},
			    conf_d = {"eu-west-3", "http://127.0.0.1:9"};
	struct aws_config c;
	char err[1024], path[256];

	clear_env();
	setenv("HOME", tmpdir, 1);
	/* Nothing anywhere: the message says where it looked. */
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "no AWS credentials") != NULL);
	CHECK(strstr(err, "AWS_ACCESS_KEY_ID") != NULL);
	CHECK(strstr(err, "/.aws/credentials") != NULL);
	CHECK(strstr(err, "profile default") != NULL);

	/* The environment. */
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "AWS_SECRET_ACCESS_KEY is not") != NULL);
	setenv("AWS_SECRET_ACCESS_KEY", "secretenv", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "no AWS region") != NULL);
	CHECK(strstr(err, "AWS_DEFAULT_REGION") != NULL);
	CHECK(aws_config_load(&conf_d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.region, "eu-west-3") == 0);
	CHECK(strcmp(c.endpoint, "http://127.0.0.1:9") == 0);
	setenv("AWS_DEFAULT_REGION", "us-west-2", 1);
	setenv("AWS_SESSION_TOKEN", "tok", 1);
	CHECK(aws_config_load(&conf_d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKIDENV") == 0);
	CHECK(strcmp(c.secret_key, "secretenv") == 0);
	CHECK(strcmp(c.session_token, "tok") == 0);
	CHECK(strcmp(c.region, "us-west-2") == 0);
	CHECK(strcmp(c.endpoint, "http://127.0.0.1:9") == 0);
	CHECK(strstr(c.source, "environment") != NULL);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.endpoint, "https://ec2.us-west-2.amazonaws.com") == 0);
	/* SSM: the region's own endpoint, following the region asked for. */
	CHECK(strcmp(c.ssm_endpoint, "https://ssm.us-west-2.amazonaws.com") ==
	      0);
	CHECK(!c.ssm_endpoint_given);
	{
		struct aws_config r;

		aws_config_in_region(&c, "eu-north-1", &r);
		CHECK(strcmp(r.ssm_endpoint,
			     "https://ssm.eu-north-1.amazonaws.com") == 0);
		aws_config_clear(&r);
		setenv("AWS_ENDPOINT_URL_SSM", "http://ssm:4", 1);
		CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
		CHECK(c.ssm_endpoint_given &&
		      strcmp(c.ssm_endpoint, "http://ssm:4") == 0);
		aws_config_in_region(&c, "eu-north-1", &r);
		CHECK(strcmp(r.ssm_endpoint, "http://ssm:4") == 0);
		aws_config_clear(&r);
		unsetenv("AWS_ENDPOINT_URL_SSM");
	}
	setenv("AWS_REGION", "cn-north-1", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.region, "cn-north-1") == 0);
	CHECK(strcmp(c.endpoint, "https://ec2.cn-north-1.amazonaws.com.cn") ==
	      0);
	setenv("AWS_ENDPOINT_URL", "http://all:1", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.endpoint, "http://all:1") == 0);
	setenv("AWS_ENDPOINT_URL_EC2", "http://ec2only:2", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.endpoint, "http://ec2only:2") == 0);
	setenv("AWS_REGION", "us east", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "\"us east\" is not a region") != NULL);
	aws_config_clear(&c);
	CHECK(c.secret_key[0] == '\0' && c.session_token[0] == '\0');

	/* The profile files. */
	clear_env();
	snprintf(path, sizeof(path), "%s/.aws", tmpdir);
	mkdir(path, 0700);
	write_file(".aws/credentials",
		   "[default]\naws_access_key_id = AKIDDEF\n"
		   "aws_secret_access_key = secretdef\n"
		   "[work]\naws_access_key_id=AKIDWORK\n"
		   "aws_secret_access_key=secretwork\n"
		   "aws_session_token=worktoken\n"
		   "[half]\naws_access_key_id=AKIDHALF\n");
	write_file(".aws/config",
		   "[default]\nregion = ap-south-1\n"
		   "[profile work]\nregion = eu-central-1\n"
		   "endpoint_url = http://work:3\n"
		   "[profile conf-only]\naws_access_key_id = AKIDCONF\n"
		   "aws_secret_access_key = secretconf\nregion = sa-east-1\n");
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKIDDEF") == 0);
	CHECK(strcmp(c.region, "ap-south-1") == 0);
	CHECK(*c.session_token == '\0');
	CHECK(strstr(c.source, "profile default of") != NULL);
	setenv("AWS_PROFILE", "work", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKIDWORK") == 0);
	CHECK(strcmp(c.session_token, "worktoken") == 0);
	CHECK(strcmp(c.region, "eu-central-1") == 0);
	CHECK(strcmp(c.endpoint, "http://work:3") == 0);
	setenv("AWS_PROFILE", "conf-only", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKIDCONF") == 0);
	CHECK(strcmp(c.region, "sa-east-1") == 0);
	setenv("AWS_PROFILE", "half", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "has aws_access_key_id but not "
			  "aws_secret_access_key") != NULL);
	setenv("AWS_PROFILE", "nosuch", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "AWS profile nosuch is in neither") != NULL);
	/* The environment's keys win over the profile's. */
	setenv("AWS_PROFILE", "work", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secretenv", 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKIDENV") == 0);
	CHECK(strcmp(c.region, "eu-central-1") == 0);
	/* Other files, named by the environment. */
	clear_env();
	write_file("creds2", "[default]\naws_access_key_id=AKID2\n"
			     "aws_secret_access_key=s2\n");
	snprintf(path, sizeof(path), "%s/creds2", tmpdir);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(c.access_key, "AKID2") == 0);
	write_file("bad", "[default\nx\n");
	snprintf(path, sizeof(path), "%s/bad", tmpdir);
	setenv("AWS_CONFIG_FILE", path, 1);
	CHECK(aws_config_load(&d, &c, err, sizeof(err)) == -1);
	CHECK(strstr(err, "does not parse") != NULL);
	clear_env();
}

static void test_keys(void)
{
	char path[256], pub[SSHKEY_PUBKEY_MAX], err[512], cmd[600], line[512];
	struct stat st;
	FILE *f;

	CHECK(sshkey_base64("ssh", 3, err, sizeof(err)) == 0 &&
	      strcmp(err, "c3No") == 0);
	CHECK(sshkey_base64("ab", 2, err, sizeof(err)) == 0 &&
	      strcmp(err, "YWI=") == 0);
	CHECK(sshkey_base64("abcdef", 6, err, 8) == -1);
	snprintf(path, sizeof(path), "%s/key", tmpdir);
	CHECK(sshkey_public(path, pub, sizeof(pub), err, sizeof(err)) ==
	      -ENOENT);
	CHECK(sshkey_generate(path, "cclfs-test", err, sizeof(err)) == 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK(sshkey_public(path, pub, sizeof(pub), err, sizeof(err)) == 0);
	CHECK(strncmp(pub, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", 37) == 0);
	CHECK(strstr(pub, " cclfs-test") != NULL);
	/* OpenSSH reads the private key and derives the same public key. */
	snprintf(cmd, sizeof(cmd), "ssh-keygen -y -f %s 2>&1", path);
	f = popen(cmd, "r");
	CHECK(f && fgets(line, sizeof(line), f));
	if (f)
		pclose(f);
	line[strcspn(line, "\n")] = '\0';
	CHECK(strncmp(line, pub, strlen(line)) == 0 && strlen(line) > 60);
	if (strncmp(line, pub, strlen(line)) != 0)
		fprintf(stderr, "  ssh-keygen: %s\n  ours: %s\n", line, pub);
	snprintf(cmd, sizeof(cmd), "%s.tmp", path);
	CHECK(access(cmd, F_OK) != 0);
}

/* The login of an image: its alias's distribution, else ec2-user. */
static void test_image(void)
{
	CHECK(strcmp(ec2_image_user(""), "ec2-user") == 0); /* al2023 */
	CHECK(strcmp(ec2_image_user("al2023"), "ec2-user") == 0);
	CHECK(strcmp(ec2_image_user("ubuntu-24.04"), "ubuntu") == 0);
	CHECK(strcmp(ec2_image_user("ubuntu-22.04"), "ubuntu") == 0);
	CHECK(strcmp(ec2_image_user("debian-12"), "admin") == 0);
	CHECK(strcmp(ec2_image_user("ami-0123456789abcdef0"), "ec2-user") == 0);
	CHECK(ec2_image_is_alias("debian-12"));
	CHECK(ec2_image_is_alias("centos-7"));
	CHECK(!ec2_image_is_alias("ami-0abc"));
}

int main(void)
{
	char cmd[128];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/cclfs-test-ec2-XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	test_query();
	test_retryable();
	test_xml();
	test_image();
	test_aws_config();
	test_keys();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return check_summary("ec2");
}
