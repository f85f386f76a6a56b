/* AWS credentials, region and endpoints as the AWS CLI finds them:
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, the
 * profile (AWS_PROFILE, else "default") of the shared credentials and
 * config files, AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL(_EC2,
 * _PRICING, _SSM). */
#include "providers/ec2/aws_config.h"

#include <ini.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one profile section of one file holds. */
struct aws_profile {
	const char *want; /* section name looked for */
	const char *alt;  /* another accepted name, or NULL */
	bool found;	  /* the section exists */
	char access_key[128];
	char secret_key[256];
	char session_token[4096];
	char region[64];
	char endpoint[512];
};

/* The keys of a profile cclfs reads (others, such as output, are left to
 * the AWS CLI), and the fields they fill. */
#define AWS_PROFILE_KEY(k, f)                                                  \
	{                                                                      \
		k, offsetof(struct aws_profile, f),                            \
			sizeof(((struct aws_profile *)0)->f)                   \
	}
static const struct {
	const char *name;
	size_t offset, size;
} aws_profile_keys[] = {
	AWS_PROFILE_KEY("aws_access_key_id", access_key),
	AWS_PROFILE_KEY("aws_secret_access_key", secret_key),
	AWS_PROFILE_KEY("aws_session_token", session_token),
	AWS_PROFILE_KEY("region", region),
	AWS_PROFILE_KEY("endpoint_url", endpoint),
};

static const char *aws_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static void aws_copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src);
}

static int aws_profile_line(void *user, const char *section, const char *name,
			    const char *value)
{
	struct aws_profile *p = user;

	if (strcmp(section, p->want) != 0 &&
	    !(p->alt && strcmp(section, p->alt) == 0))
		return 1;
	p->found = true;
	if (!name)
		return 1;
	for (size_t i = 0;
	     i < sizeof(aws_profile_keys) / sizeof(aws_profile_keys[0]); i++)
		if (strcmp(name, aws_profile_keys[i].name) == 0)
			aws_copy((char *)p + aws_profile_keys[i].offset,
				 aws_profile_keys[i].size, value);
	return 1;
}

/* Read one file's profile section; a missing file holds nothing. 0, or
 * -1 when the file exists but does not parse. */
static int aws_read_profile(const char *path, struct aws_profile *p, char *err,
			    size_t errlen)
{
	int rc;

	if (access(path, F_OK) != 0)
		return 0;
	rc = ini_parse(path, aws_profile_line, p);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read %s", path);
		return -1;
	}
	if (rc > 0) {
		snprintf(err, errlen, "%s: line %d does not parse", path, rc);
		return -1;
	}
	return 0;
}

/* The file an environment variable names, else ~/.aws/NAME. */
static void aws_file(const char *var, const char *name, char *out, size_t len)
{
	const char *v = aws_env(var), *home = aws_env("HOME");

	if (v)
		snprintf(out, len, "%s", v);
	else
		snprintf(out, len, "%s/.aws/%s", home ? home : "", name);
}

static void aws_wipe(void *p, size_t n)
{
	volatile unsigned char *v = p;

	while (n--)
		*v++ = 0;
}

void aws_config_clear(struct aws_config *cfg)
{
	aws_wipe(cfg->secret_key, sizeof(cfg->secret_key));
	aws_wipe(cfg->session_token, sizeof(cfg->session_token));
	aws_wipe(cfg->access_key, sizeof(cfg->access_key));
}

static int aws_credentials(const struct aws_profile *creds,
			   const struct aws_profile *conf,
			   const char *creds_path, const char *conf_path,
			   struct aws_config *cfg, char *err, size_t errlen)
{
	const char *ak = aws_env("AWS_ACCESS_KEY_ID");
	const char *sk = aws_env("AWS_SECRET_ACCESS_KEY");

	if (ak || sk) {
		if (!ak || !sk) {
			snprintf(err, errlen,
				 "AWS_%s is set but AWS_%s is not: set both",
				 ak ? "ACCESS_KEY_ID" : "SECRET_ACCESS_KEY",
				 ak ? "SECRET_ACCESS_KEY" : "ACCESS_KEY_ID");
			return -1;
		}
		aws_copy(cfg->access_key, sizeof(cfg->access_key), ak);
		aws_copy(cfg->secret_key, sizeof(cfg->secret_key), sk);
		if (aws_env("AWS_SESSION_TOKEN"))
			aws_copy(cfg->session_token, sizeof(cfg->session_token),
				 aws_env("AWS_SESSION_TOKEN"));
		snprintf(cfg->source, sizeof(cfg->source),
			 "the environment (AWS_ACCESS_KEY_ID)");
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		const struct aws_profile *p = i == 0 ? creds : conf;

		if (!*p->access_key && !*p->secret_key)
			continue;
		if (!*p->access_key || !*p->secret_key) {
			snprintf(err, errlen,
				 "profile %s of %s has aws_%s but not aws_%s",
				 cfg->profile, i == 0 ? creds_path : conf_path,
				 *p->access_key ? "access_key_id"
						: "secret_access_key",
				 *p->access_key ? "secret_access_key"
						: "access_key_id");
			return -1;
		}
		aws_copy(cfg->access_key, sizeof(cfg->access_key),
			 p->access_key);
		aws_copy(cfg->secret_key, sizeof(cfg->secret_key),
			 p->secret_key);
		aws_copy(cfg->session_token, sizeof(cfg->session_token),
			 p->session_token);
		snprintf(cfg->source, sizeof(cfg->source),
			 "profile %.100s of %.3000s", cfg->profile,
			 i == 0 ? creds_path : conf_path);
		return 0;
	}
	snprintf(err, errlen,
		 "no AWS credentials: looked in the environment "
		 "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), in profile "
		 "%s of %s and of %s",
		 cfg->profile, creds_path, conf_path);
	return -1;
}

/* A region name: lower-case letters, digits and hyphens. */
static bool aws_region_ok(const char *r)
{
	if (!*r)
		return false;
	for (const char *c = r; *c; c++)
		if (!(*c >= 'a' && *c <= 'z') && !(*c >= '0' && *c <= '9') &&
		    *c != '-')
			return false;
	return true;
}

static void aws_default_endpoint(const char *region, char *out, size_t len)
{
	snprintf(out, len, "https://ec2.%s.amazonaws.com%s", region,
		 strncmp(region, "cn-", 3) == 0 ? ".cn" : "");
}

static void aws_default_ssm(const char *region, char *out, size_t len)
{
	snprintf(out, len, "https://ssm.%s.amazonaws.com%s", region,
		 strncmp(region, "cn-", 3) == 0 ? ".cn" : "");
}

void aws_config_in_region(const struct aws_config *base, const char *region,
			  struct aws_config *out)
{
	*out = *base;
	aws_copy(out->region, sizeof(out->region), region);
	if (!base->endpoint_given)
		aws_default_endpoint(out->region, out->endpoint,
				     sizeof(out->endpoint));
	if (!base->ssm_endpoint_given)
		aws_default_ssm(out->region, out->ssm_endpoint,
				sizeof(out->ssm_endpoint));
}

int aws_config_region(const struct aws_defaults *d, char *buf, size_t len)
{
	struct aws_profile *conf = calloc(1, sizeof(*conf));
	const char *profile = aws_env("AWS_PROFILE"), *v;
	char conf_path[PATH_MAX], section[160], err[PATH_MAX + 64];
	int found = 0;

	if ((v = aws_env("AWS_REGION")) ||
	    (v = aws_env("AWS_DEFAULT_REGION"))) {
		aws_copy(buf, len, v);
		found = 1;
	} else if (conf) {
		if (!profile)
			profile = aws_env("AWS_DEFAULT_PROFILE");
		if (!profile)
			profile = "default";
		aws_file("AWS_CONFIG_FILE", "config", conf_path,
			 sizeof(conf_path));
		snprintf(section, sizeof(section), "profile %s", profile);
		conf->want = section;
		conf->alt = strcmp(profile, "default") == 0 ? "default" : NULL;
		/* A file that does not parse names no region here; the
		 * calls say what is wrong with it. */
		if (aws_read_profile(conf_path, conf, err, sizeof(err)) == 0 &&
		    *conf->region) {
			aws_copy(buf, len, conf->region);
			found = 1;
		}
	}
	if (!found && d && d->region && *d->region) {
		aws_copy(buf, len, d->region);
		found = 1;
	}
	if (conf)
		aws_wipe(conf, sizeof(*conf));
	free(conf);
	return found && aws_region_ok(buf);
}

/* A service's endpoint, as the AWS CLI finds it: the service's variable
 * (AWS_ENDPOINT_URL_PRICING), the general one, the profile's endpoint_url,
 * then cclfs.conf's `given`. 1 with it in out, 0 when none is set. */
static int aws_service_endpoint(const char *var, const char *given,
				const struct aws_profile *conf, char *out,
				size_t len)
{
	const char *v;

	if ((v = aws_env(var)) || (v = aws_env("AWS_ENDPOINT_URL")))
		aws_copy(out, len, v);
	else if (*conf->endpoint)
		aws_copy(out, len, conf->endpoint);
	else if (given && *given)
		aws_copy(out, len, given);
	else
		return 0;
	return 1;
}

/* The Price List API's endpoint, else AWS's own; SSM's, else the
 * region's own (aws_config_in_region). */
static void aws_more_endpoints(const struct aws_extra *x,
			       const struct aws_profile *conf,
			       struct aws_config *cfg)
{
	if (!aws_service_endpoint(
		    "AWS_ENDPOINT_URL_PRICING", x ? x->pricing_endpoint : NULL,
		    conf, cfg->pricing_endpoint, sizeof(cfg->pricing_endpoint)))
		aws_copy(cfg->pricing_endpoint, sizeof(cfg->pricing_endpoint),
			 "https://api.pricing.us-east-1.amazonaws.com");
	cfg->ssm_endpoint_given = aws_service_endpoint(
		"AWS_ENDPOINT_URL_SSM", x ? x->ssm_endpoint : NULL, conf,
		cfg->ssm_endpoint, sizeof(cfg->ssm_endpoint));
	if (!cfg->ssm_endpoint_given && *cfg->region)
		aws_default_ssm(cfg->region, cfg->ssm_endpoint,
				sizeof(cfg->ssm_endpoint));
}

int aws_config_load(const struct aws_defaults *d, struct aws_config *cfg,
		    char *err, size_t errlen)
{
	return aws_config_load_with(d, NULL, cfg, err, errlen);
}

int aws_config_load_with(const struct aws_defaults *d,
			 const struct aws_extra *x, struct aws_config *cfg,
			 char *err, size_t errlen)
{
	char creds_path[PATH_MAX], conf_path[PATH_MAX], section[160];
	struct aws_profile *creds = calloc(1, sizeof(*creds));
	struct aws_profile *conf = calloc(1, sizeof(*conf));
	const char *profile = aws_env("AWS_PROFILE");
	const char *v;
	int rc = -1;

	memset(cfg, 0, sizeof(*cfg));
	if (!creds || !conf) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (!profile)
		profile = aws_env("AWS_DEFAULT_PROFILE");
	aws_copy(cfg->profile, sizeof(cfg->profile),
		 profile ? profile : "default");
	aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", creds_path,
		 sizeof(creds_path));
	aws_file("AWS_CONFIG_FILE", "config", conf_path, sizeof(conf_path));
	creds->want = cfg->profile;
	snprintf(section, sizeof(section), "profile %s", cfg->profile);
	conf->want = section;
	conf->alt = strcmp(cfg->profile, "default") == 0 ? "default" : NULL;
	if (aws_read_profile(creds_path, creds, err, errlen) ||
	    aws_read_profile(conf_path, conf, err, errlen))
		goto out;
	if (profile && !creds->found && !conf->found) {
		snprintf(err, errlen,
			 "AWS profile %s is in neither %s nor %s (set by "
			 "AWS_PROFILE)",
			 cfg->profile, creds_path, conf_path);
		goto out;
	}
	if (aws_credentials(creds, conf, creds_path, conf_path, cfg, err,
			    errlen))
		goto out;

	if ((v = aws_env("AWS_REGION")) || (v = aws_env("AWS_DEFAULT_REGION")))
		aws_copy(cfg->region, sizeof(cfg->region), v);
	else if (*conf->region)
		aws_copy(cfg->region, sizeof(cfg->region), conf->region);
	else if (d && d->region && *d->region)
		aws_copy(cfg->region, sizeof(cfg->region), d->region);
	if (!*cfg->region && !(x && x->region_optional)) {
		snprintf(err, errlen,
			 "no AWS region: looked in AWS_REGION, "
			 "AWS_DEFAULT_REGION, profile %s of %s and region in "
			 "the [ec2] section of cclfs.conf",
			 cfg->profile, conf_path);
		aws_config_clear(cfg);
		goto out;
	}
	if (*cfg->region && !aws_region_ok(cfg->region)) {
		snprintf(err, errlen,
			 "the AWS region \"%s\" is not a region name (such as "
			 "us-east-1)",
			 cfg->region);
		aws_config_clear(cfg);
		goto out;
	}

	if ((v = aws_env("AWS_ENDPOINT_URL_EC2")) ||
	    (v = aws_env("AWS_ENDPOINT_URL")))
		aws_copy(cfg->endpoint, sizeof(cfg->endpoint), v);
	else if (*conf->endpoint)
		aws_copy(cfg->endpoint, sizeof(cfg->endpoint), conf->endpoint);
	else if (d && d->endpoint && *d->endpoint)
		aws_copy(cfg->endpoint, sizeof(cfg->endpoint), d->endpoint);
	cfg->endpoint_given = *cfg->endpoint != '\0';
	if (!cfg->endpoint_given && *cfg->region)
		aws_default_endpoint(cfg->region, cfg->endpoint,
				     sizeof(cfg->endpoint));
	aws_more_endpoints(x, conf, cfg);
	rc = 0;
out:
	if (creds)
		aws_wipe(creds, sizeof(*creds));
	if (conf)
		aws_wipe(conf, sizeof(*conf));
	free(creds);
	free(conf);
	return rc;
}
