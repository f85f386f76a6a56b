/* The gcp provider. A deploy makes the cluster's two firewall rules (SSH from
 * ssh_cidr, everything among its nodes) and, for MPI, a compact placement
 * policy, then calls instances.bulkInsert once per role with a requestId
 * derived from the cluster's token and the zone (so a retry or a restart
 * never launches twice), moving to the next zone when one has no capacity;
 * it waits for the instances and reaches them over SSH (remote.c). Stop,
 * start and delete go to every instance at once (one curl multi). */
#include "providers/cancel.h"
#include "providers/cloud.h"
#include "providers/gcp/gcp_api.h"
#include "providers/gcp/gcp_auth.h"
#include "providers/gcp/gcp_catalog.h"
#include "providers/gcp/gcp_conf.h"
#include "providers/gcp/gcp_names.h"
#include "providers/provider.h"
#include "providers/remote.h"
#include "providers/ssh.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GCP_ERR_MAX 1024
#define GCP_SCOPES                                                             \
	GCP_SCOPE_COMPUTE                                                      \
	" https://www.googleapis.com/auth/cloud-billing.readonly"
#define GCP_ZONES_MAX 16

extern const struct provider_entry provider_gcp;

struct gcp_provider {
	struct provider base;
	struct gcp_settings s;
	pthread_mutex_t lock;
	/* The credentials and the client, made at first use (finding the
	 * credentials may ask the metadata server). */
	struct gcp_auth *auth;
	struct gcp_api *api;
	struct cloud_nodes known;
};

/* A job's calls: the client and the job's cancellation token. */
struct gcp_ctx {
	struct gcp_api *api;
	struct cancel *cancel;
	const char *project;
	struct cloud_poll poll; /* how long and how often to poll */
};

/* A cluster's names and settings, from its handle, token and options. */
struct gcp_names {
	char handle[65];
	char token[40];
	char prefix[GCP_NAME_MAX]; /* instances, firewall rules, tag, policy */
	char label[GCP_LABEL_MAX]; /* the handle as a label value */
	char keypath[PATH_MAX];
	bool key_own; /* the key is cclfs's, made at deploy */
	char imageid[512], network[256], subnet[256], ssh_cidr[64];
	char region[64], zone[64], cluster_type[32];
	char gpu[128];	/* config/gpu: TYPE[:COUNT] attached to N1 types */
	int failover;	/* zones tried at most (0: every zone) */
	bool spot[2];	/* per role (manager, worker) */
	bool placement; /* an MPI cluster: nodes close together */
};

static struct gcp_provider *gcp_of(struct provider *p)
{
	return (struct gcp_provider *)p;
}

/* Compact placement is offered for these series only (Compute Engine's
 * placement policy documentation). */
static const char *const gcp_compact_series[] = {
	"a2",  "a3", "c2", "c2d", "c3",	 "c3d", "c4",
	"c4d", "g2", "h3", "n2",  "n2d", "t2d",
};

/* The series whose machine types come with GPUs. */
static const char *const gcp_gpu_series[] = {"a2",  "a3", "a4",
					     "a4x", "g2", "g4"};

/* The series of Arm machine types. */
static const char *const gcp_arm_series[] = {"t2a", "c4a", "n4a", "a4x"};

static bool gcp_series_in(const char *type, const char *const *v, size_t n)
{
	size_t l = strcspn(type, "-");

	for (size_t i = 0; i < n; i++)
		if (strlen(v[i]) == l && strncmp(type, v[i], l) == 0)
			return true;
	return false;
}

static bool gcp_has_gpu(const char *type)
{
	return gcp_series_in(type, gcp_gpu_series,
			     sizeof(gcp_gpu_series) /
				     sizeof(gcp_gpu_series[0]));
}

static bool gcp_is_arm(const char *type)
{
	return gcp_series_in(type, gcp_arm_series,
			     sizeof(gcp_arm_series) /
				     sizeof(gcp_arm_series[0]));
}

static void gcp_names(const struct gcp_provider *gp,
		      const struct provider_node *pn, struct gcp_names *nm)
{
	char word[128];

	memset(nm, 0, sizeof(*nm));
	snprintf(nm->handle, sizeof(nm->handle), "%s", pn->handle);
	snprintf(nm->token, sizeof(nm->token), "%s", pn->token);
	gcp_prefix(pn->handle, pn->token, nm->prefix, sizeof(nm->prefix));
	if (gcp_label_encode(pn->handle, nm->label, sizeof(nm->label)))
		snprintf(nm->label, sizeof(nm->label), "invalid");
	nm->key_own = !*pn->keyfile;
	if (nm->key_own)
		snprintf(nm->keypath, sizeof(nm->keypath), "%.3000s/%s-%.8s",
			 gp->s.keydir, pn->handle, pn->token);
	else
		snprintf(nm->keypath, sizeof(nm->keypath), "%s", pn->keyfile);
	provider_option(pn->options, "imageid", gp->s.imageid, nm->imageid,
			sizeof(nm->imageid));
	provider_option(pn->options, "network", gp->s.network, nm->network,
			sizeof(nm->network));
	provider_option(pn->options, "subnet_id", gp->s.subnet_id, nm->subnet,
			sizeof(nm->subnet));
	provider_option(pn->options, "ssh_cidr", gp->s.ssh_cidr, nm->ssh_cidr,
			sizeof(nm->ssh_cidr));
	provider_option(pn->options, "region", gp->s.region, nm->region,
			sizeof(nm->region));
	provider_option(pn->options, "zone", gp->s.zone, nm->zone,
			sizeof(nm->zone));
	provider_option(pn->options, "cluster_type", "", nm->cluster_type,
			sizeof(nm->cluster_type));
	provider_option(pn->options, "gpu", "", nm->gpu, sizeof(nm->gpu));
	provider_option(pn->options, "failover", "0", word, sizeof(word));
	nm->failover = atoi(word);
	provider_option(pn->options, "market", "", word, sizeof(word));
	provider_market(word, nm->spot);
	nm->placement = strcmp(nm->cluster_type, "PeerWorkersMPI") == 0 &&
			gcp_series_in(pn->instance_type, gcp_compact_series,
				      sizeof(gcp_compact_series) /
					      sizeof(gcp_compact_series[0]));
}

/* --- the client --- */

/* The job's context: the client (made at first use) and its token. */
static int gcp_ctx_get(struct gcp_provider *gp, struct provider_batch *b,
		       struct gcp_ctx *c)
{
	int rc = 0;

	c->cancel = b->cancel;
	c->poll = (struct cloud_poll){gp->s.boot_timeout_ms,
				      gp->s.poll_first_ms, gp->s.poll_max_ms};
	pthread_mutex_lock(&gp->lock);
	if (!gp->auth) {
		char why[GCP_AUTH_ERR_MAX];

		/* Compute for the clusters, and reading the Billing
		 * Catalog for a catalog refresh without an API key. */
		gp->auth = gcp_auth_open(gp->s.project, GCP_SCOPES, why,
					 sizeof(why));
		if (!gp->auth) {
			snprintf(b->err, sizeof(b->err), "gcp: %.900s", why);
			rc = -EACCES;
		}
	}
	if (rc == 0 && !gp->api) {
		const char *ep =
			getenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE");

		if (!ep || !*ep)
			ep = *gp->s.endpoint ? gp->s.endpoint
					     : GCP_COMPUTE_DEFAULT;
		gp->api = gcp_api_new(gp->auth, ep, &gp->s.retry, b->err,
				      sizeof(b->err));
		if (!gp->api)
			rc = -ENOMEM;
	}
	if (rc == 0 && !*gcp_api_project(gp->api)) {
		snprintf(b->err, sizeof(b->err),
			 "gcp: no project is known for %.600s; set [gcp] "
			 "project in cclfs.conf or CLOUDSDK_CORE_PROJECT",
			 gcp_auth_source(gp->auth));
		rc = -EINVAL;
	}
	c->api = gp->api;
	c->project = rc == 0 ? gcp_api_project(gp->api) : "";
	pthread_mutex_unlock(&gp->lock);
	return rc;
}

/* Whether the credentials give a token, before anything is asked of
 * Compute Engine: a refusal then reads as what it is. */
static int gcp_ctx_check(struct gcp_provider *gp, struct gcp_ctx *c, char *err,
			 size_t errlen)
{
	char token[GCP_AUTH_TOKEN_MAX];
	int rc = gcp_auth_token(gp->auth, c->cancel, token, sizeof(token), err,
				errlen);

	explicit_bzero(token, sizeof(token));
	return rc;
}

/* One call: 0, or its -errno with err. */
static int gcp_one(struct gcp_ctx *c, struct gcp_call *call, char *err,
		   size_t errlen)
{
	int rc = gcp_api_do(c->api, call, 1, c->cancel);

	if (rc)
		snprintf(err, errlen, "%s", call->err);
	return rc;
}

/* Wait for the operations the n calls answered with (calls that failed
 * with one of `ok`'s errnos, e.g. -ENOENT for a delete, are done). 0, or the
 * first failure with err. */
static int gcp_wait_calls(struct gcp_ctx *c, struct gcp_call *calls, size_t n,
			  int ok, char *err, size_t errlen)
{
	struct gcp_op *ops = calloc(n ? n : 1, sizeof(*ops));
	size_t k = 0;
	int rc = 0;

	if (!ops) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (calls[i].rc == 0 &&
		    gcp_op_from(&ops[k], calls[i].answer) == 0)
			k++;
		else if (calls[i].rc && calls[i].rc != ok) {
			snprintf(err, errlen, "%s", calls[i].err);
			rc = calls[i].rc;
		}
	}
	if (rc == 0 && k)
		rc = gcp_api_wait(c->api, ops, k, c->cancel, err, errlen);
	for (size_t i = 0; rc == 0 && i < k; i++)
		if (ops[i].rc) {
			snprintf(err, errlen, "%s", ops[i].err);
			rc = ops[i].rc;
		}
	free(ops);
	return rc;
}

/* --- the cluster's instances --- */

struct gcp_instance {
	char zone[64];
	char name[GCP_NAME_MAX];
	char status[32];
	char address[64]; /* natIP */
	char internal[64];
	char role[16];
	int rank;
};

struct gcp_list {
	struct gcp_instance *v;
	size_t n, cap;
	const char *prefix;
};

static void gcp_copy_string(const cJSON *o, const char *key, char *out,
			    size_t len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static int gcp_list_item(void *ctx, const cJSON *item, const char *scope)
{
	struct gcp_list *l = ctx;
	const cJSON *nic = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(item, "networkInterfaces"), 0);
	const cJSON *ac = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(nic, "accessConfigs"), 0);
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(item, "labels");
	struct gcp_instance *in;
	char zone[256];

	(void)scope;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct gcp_instance *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	in = &l->v[l->n];
	memset(in, 0, sizeof(*in));
	gcp_copy_string(item, "zone", zone, sizeof(zone));
	snprintf(in->zone, sizeof(in->zone), "%s", gcp_short(zone));
	gcp_copy_string(item, "name", in->name, sizeof(in->name));
	gcp_copy_string(item, "status", in->status, sizeof(in->status));
	gcp_copy_string(ac, "natIP", in->address, sizeof(in->address));
	gcp_copy_string(nic, "networkIP", in->internal, sizeof(in->internal));
	gcp_copy_string(labels, "cclfs-role", in->role, sizeof(in->role));
	if (!l->prefix || gcp_rank_of(in->name, l->prefix, &in->rank))
		in->rank = INT32_MIN;
	l->n++;
	return 0;
}

/* Every instance labelled with the cluster's token, in every zone. */
static int gcp_instances(struct gcp_ctx *c, const struct gcp_names *nm,
			 struct gcp_list *l, char *err, size_t errlen)
{
	char url[512], filter[128];

	l->prefix = nm->prefix;
	snprintf(url, sizeof(url), "projects/%s/aggregated/instances",
		 c->project);
	snprintf(filter, sizeof(filter), "labels.cclfs-token=%s", nm->token);
	return gcp_api_list(c->api, url, filter, gcp_list_item, l, c->cancel,
			    err, errlen);
}

static const struct gcp_instance *gcp_find(const struct gcp_list *l,
					   const char *id)
{
	const char *slash = strchr(id, '/');

	if (!slash)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->v[i].zone) == (size_t)(slash - id) &&
		    strncmp(l->v[i].zone, id, (size_t)(slash - id)) == 0 &&
		    strcmp(l->v[i].name, slash + 1) == 0)
			return &l->v[i];
	return NULL;
}

static const char *gcp_address(const struct gcp_provider *gp,
			       const struct gcp_instance *in, int tunneled)
{
	bool priv = tunneled || strcmp(gp->s.address, "private") == 0;
	const char *a = priv ? in->internal : in->address;

	return *a ? a : priv ? in->address : in->internal;
}

/* Give each node the instance of its rank and role (in `zone`, or any when
 * NULL); 0 when every node has one. */
static size_t gcp_assign(const struct gcp_list *l, const char *zone,
			 struct provider_node *nodes, size_t n)
{
	size_t got = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < l->n; j++) {
			const struct gcp_instance *in = &l->v[j];

			if (in->rank != nodes[i].rank ||
			    (zone && strcmp(in->zone, zone) != 0) ||
			    strcmp(in->status, "STOPPING") == 0 ||
			    strcmp(in->status, "TERMINATED") == 0)
				continue;
			snprintf(nodes[i].instance_id,
				 sizeof(nodes[i].instance_id), "%s/%s",
				 in->zone, in->name);
			got++;
			break;
		}
	}
	return got;
}

/* Wait until every node's instance is in `want` (RUNNING with an address,
 * TERMINATED, or gone), listing the cluster's instances with backoff. */
static int gcp_wait(struct gcp_provider *gp, struct gcp_ctx *c,
		    const struct gcp_names *nm, struct provider_node *nodes,
		    size_t n, const char *want, char *err, size_t errlen)
{
	int64_t deadline = cloud_now_ms() + gp->s.boot_timeout_ms;
	long delay = gp->s.poll_first_ms > 0 ? gp->s.poll_first_ms : 1000;
	bool running = strcmp(want, "RUNNING") == 0;
	bool gone = strcmp(want, "gone") == 0;

	for (;;) {
		struct gcp_list l = {0};
		char late[256] = "";
		size_t ready = 0;
		int rc = gcp_instances(c, nm, &l, err, errlen);

		for (size_t i = 0; rc == 0 && i < n; i++) {
			const struct gcp_instance *in =
				gcp_find(&l, nodes[i].instance_id);
			bool ok;

			if (gone)
				ok = !in;
			else
				ok = in && strcmp(in->status, want) == 0 &&
				     (!running ||
				      *gcp_address(gp, in, nodes[i].tunneled));
			if (running && !in && *nodes[i].instance_id) {
				snprintf(err, errlen,
					 "instance %s (node %s%d) is gone",
					 nodes[i].instance_id,
					 nodes[i].rank < 0 ? "manager " : "",
					 nodes[i].rank);
				rc = -EIO;
				break;
			}
			if (ok && running)
				snprintf(
					nodes[i].address,
					sizeof(nodes[i].address), "%s",
					gcp_address(gp, in, nodes[i].tunneled));
			if (ok)
				ready++;
			else if (!*late)
				snprintf(late, sizeof(late), "%.127s is %.31s",
					 nodes[i].instance_id,
					 in ? in->status : "not listed yet");
		}
		free(l.v);
		if (rc)
			return rc;
		if (ready == n)
			return 0;
		if (cloud_now_ms() > deadline) {
			snprintf(err, errlen,
				 "%zu of %zu instances are not %s after %d s "
				 "(%s)",
				 n - ready, n, gone ? "deleted" : want,
				 gp->s.boot_timeout_ms / 1000, late);
			return -ETIMEDOUT;
		}
		rc = cloud_sleep_ms(c->cancel, cloud_jitter(delay), err,
				    errlen);
		if (rc)
			return rc;
		delay = delay * 2 > gp->s.poll_max_ms ? gp->s.poll_max_ms
						      : delay * 2;
	}
}

/* Delete every instance of the list (in `zone` only, when not NULL) at
 * once and wait until they are gone. */
/* Whether the list holds ZONE/NAME. */
static bool gcp_listed(const struct gcp_list *l, const char *zone,
		       const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].zone, zone) == 0 &&
		    strcmp(l->v[i].name, name) == 0)
			return true;
	return false;
}

/* Poll the cluster's instances until none of l's (in `zone`, or any when
 * NULL) is listed: one call whatever their number, where waiting on each
 * deletion's operation would be one per instance. */
static int gcp_gone(struct gcp_ctx *c, const struct gcp_names *nm,
		    const struct gcp_list *l, const char *zone, char *err,
		    size_t errlen)
{
	int64_t deadline = cloud_now_ms() + c->poll.boot_ms;
	long delay = c->poll.first_ms > 0 ? c->poll.first_ms : 1000;

	for (;;) {
		struct gcp_list now = {0};
		size_t left = 0;
		int rc = cloud_sleep_ms(c->cancel, cloud_jitter(delay), err,
					errlen);

		if (rc == 0)
			rc = gcp_instances(c, nm, &now, err, errlen);
		for (size_t i = 0; rc == 0 && i < l->n; i++)
			if ((!zone || strcmp(l->v[i].zone, zone) == 0) &&
			    gcp_listed(&now, l->v[i].zone, l->v[i].name))
				left++;
		free(now.v);
		if (rc || left == 0)
			return rc;
		if (cloud_now_ms() > deadline) {
			snprintf(err, errlen,
				 "%zu instances of the cluster are still there "
				 "%d s after their deletion",
				 left, c->poll.boot_ms / 1000);
			return -ETIMEDOUT;
		}
		delay = delay * 2 > c->poll.max_ms ? c->poll.max_ms : delay * 2;
	}
}

/* Delete every instance of the list (in `zone` only, when not NULL) at
 * once and wait until they are gone. */
static int gcp_delete_instances(struct gcp_ctx *c, const struct gcp_names *nm,
				const struct gcp_list *l, const char *zone,
				char *err, size_t errlen)
{
	struct gcp_call *calls = calloc(l->n ? l->n : 1, sizeof(*calls));
	size_t k = 0;
	int rc = 0;

	if (!calls) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < l->n; i++)
		if (!zone || strcmp(l->v[i].zone, zone) == 0)
			gcp_call_init(&calls[k++], "DELETE",
				      "projects/%s/zones/%s/instances/%s",
				      c->project, l->v[i].zone, l->v[i].name);
	gcp_api_do(c->api, calls, k, c->cancel);
	/* Deleted already (a retry, a crash): gone is what is wanted. */
	for (size_t i = 0; i < k && rc == 0; i++)
		if (calls[i].rc && calls[i].rc != -ENOENT) {
			snprintf(err, errlen, "%s", calls[i].err);
			rc = calls[i].rc;
		}
	for (size_t i = 0; i < k; i++)
		gcp_call_clear(&calls[i]);
	free(calls);
	return rc == 0 && k ? gcp_gone(c, nm, l, zone, err, errlen) : rc;
}

/* --- firewall rules and the placement policy --- */

static void gcp_fw_name(const struct gcp_names *nm, const char *what, char *out,
			size_t len)
{
	snprintf(out, len, "%s-%s", nm->prefix, what);
}

static void gcp_network_path(const struct gcp_ctx *c,
			     const struct gcp_names *nm, char *out, size_t len)
{
	if (strchr(nm->network, '/'))
		snprintf(out, len, "%s", nm->network);
	else
		snprintf(out, len, "projects/%s/global/networks/%s", c->project,
			 nm->network);
}

static cJSON *gcp_fw_body(const struct gcp_ctx *c, const struct gcp_names *nm,
			  bool ssh)
{
	cJSON *b = cJSON_CreateObject(), *allowed = cJSON_CreateObject();
	cJSON *list = cJSON_CreateArray(), *tags = cJSON_CreateArray();
	char name[GCP_NAME_MAX + 16], net[512], desc[256];
	cJSON *src = cJSON_CreateArray();

	gcp_fw_name(nm, ssh ? "ssh" : "internal", name, sizeof(name));
	gcp_network_path(c, nm, net, sizeof(net));
	snprintf(desc, sizeof(desc), "cclfs cluster %s token %s", nm->label,
		 nm->token);
	cJSON_AddStringToObject(b, "name", name);
	cJSON_AddStringToObject(b, "description", desc);
	cJSON_AddStringToObject(b, "network", net);
	cJSON_AddStringToObject(b, "direction", "INGRESS");
	cJSON_AddItemToArray(tags, cJSON_CreateString(nm->prefix));
	cJSON_AddItemToObject(b, "targetTags", tags);
	if (ssh) {
		cJSON *ports = cJSON_CreateArray();

		cJSON_AddStringToObject(allowed, "IPProtocol", "tcp");
		cJSON_AddItemToArray(ports, cJSON_CreateString("22"));
		cJSON_AddItemToObject(allowed, "ports", ports);
		cJSON_AddItemToArray(src, cJSON_CreateString(nm->ssh_cidr));
		cJSON_AddItemToObject(b, "sourceRanges", src);
	} else {
		/* Among the cluster's nodes only: MPI's ports are many. */
		cJSON_AddStringToObject(allowed, "IPProtocol", "all");
		cJSON_AddItemToArray(src, cJSON_CreateString(nm->prefix));
		cJSON_AddItemToObject(b, "sourceTags", src);
	}
	cJSON_AddItemToArray(list, allowed);
	cJSON_AddItemToObject(b, "allowed", list);
	return b;
}

/* Make the two firewall rules (made before a crash: already there). */
static int gcp_firewalls(struct gcp_ctx *c, const struct gcp_names *nm,
			 char *err, size_t errlen)
{
	struct gcp_call calls[2];
	int rc;

	for (int i = 0; i < 2; i++) {
		cJSON *body = gcp_fw_body(c, nm, i == 0);
		char rid[GCP_UUID_MAX];

		gcp_request_id(nm->token,
			       i == 0 ? "firewall/ssh" : "firewall/internal",
			       rid, sizeof(rid));
		gcp_call_init(&calls[i], "POST",
			      "projects/%s/global/firewalls?requestId=%s",
			      c->project, rid);
		gcp_call_body(&calls[i], body);
		cJSON_Delete(body);
	}
	gcp_api_do(c->api, calls, 2, c->cancel);
	rc = gcp_wait_calls(c, calls, 2, -EEXIST, err, errlen);
	for (int i = 0; i < 2; i++)
		gcp_call_clear(&calls[i]);
	return rc;
}

static int gcp_placement(struct gcp_ctx *c, const struct gcp_names *nm,
			 char *err, size_t errlen)
{
	cJSON *body, *gpp;
	struct gcp_call call;
	char rid[GCP_UUID_MAX];
	int rc;

	if (!nm->placement)
		return 0;
	body = cJSON_CreateObject();
	gpp = cJSON_AddObjectToObject(body, "groupPlacementPolicy");
	cJSON_AddStringToObject(body, "name", nm->prefix);
	cJSON_AddStringToObject(gpp, "collocation", "COLLOCATED");
	gcp_request_id(nm->token, "placement", rid, sizeof(rid));
	gcp_call_init(&call, "POST",
		      "projects/%s/regions/%s/resourcePolicies?requestId=%s",
		      c->project, nm->region, rid);
	gcp_call_body(&call, body);
	cJSON_Delete(body);
	gcp_api_do(c->api, &call, 1, c->cancel);
	rc = gcp_wait_calls(c, &call, 1, -EEXIST, err, errlen);
	gcp_call_clear(&call);
	return rc;
}

/* Delete the firewall rules and the placement policy (gone: done). */
static int gcp_delete_rules(struct gcp_ctx *c, const struct gcp_names *nm,
			    char *err, size_t errlen)
{
	struct gcp_call calls[3];
	char name[GCP_NAME_MAX + 16];
	size_t k = 0;
	int rc;

	gcp_fw_name(nm, "ssh", name, sizeof(name));
	gcp_call_init(&calls[k++], "DELETE", "projects/%s/global/firewalls/%s",
		      c->project, name);
	gcp_fw_name(nm, "internal", name, sizeof(name));
	gcp_call_init(&calls[k++], "DELETE", "projects/%s/global/firewalls/%s",
		      c->project, name);
	if (*nm->region)
		gcp_call_init(&calls[k++], "DELETE",
			      "projects/%s/regions/%s/resourcePolicies/%s",
			      c->project, nm->region, nm->prefix);
	gcp_api_do(c->api, calls, k, c->cancel);
	rc = gcp_wait_calls(c, calls, k, -ENOENT, err, errlen);
	for (size_t i = 0; i < k; i++)
		gcp_call_clear(&calls[i]);
	return rc;
}

/* Everything the cluster has: its instances (by label, in every zone),
 * then its rules and policy. */
static int gcp_destroy(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		       size_t errlen)
{
	struct gcp_list l = {0};
	int rc = gcp_instances(c, nm, &l, err, errlen);

	if (rc == 0 && l.n)
		rc = gcp_delete_instances(c, nm, &l, NULL, err, errlen);
	free(l.v);
	if (rc == 0)
		rc = gcp_delete_rules(c, nm, err, errlen);
	return rc;
}

/* --- images --- */

/* Public image families of the aliases, per architecture (x86_64, arm64). */
static const struct {
	const char *alias, *project, *family[2];
} gcp_images[] = {
	{"debian-12", "debian-cloud", {"debian-12", "debian-12-arm64"}},
	{"ubuntu-24.04",
	 "ubuntu-os-cloud",
	 {"ubuntu-2404-lts-amd64", "ubuntu-2404-lts-arm64"}},
	{"ubuntu-22.04",
	 "ubuntu-os-cloud",
	 {"ubuntu-2204-lts", "ubuntu-2204-lts-arm64"}},
};

/* The boot image of `type`: an alias resolved through its family, or the
 * image named, whose architecture must be the type's. */
static int gcp_image(struct gcp_ctx *c, const struct gcp_names *nm,
		     const char *type, char *out, size_t outlen, char *err,
		     size_t errlen)
{
	bool arm = gcp_is_arm(type);
	struct gcp_call call;
	const cJSON *v;
	int rc;

	for (size_t i = 0; i < sizeof(gcp_images) / sizeof(gcp_images[0]); i++)
		if (strcmp(nm->imageid, gcp_images[i].alias) == 0) {
			gcp_call_init(&call, "GET",
				      "projects/%s/global/images/family/%s",
				      gcp_images[i].project,
				      gcp_images[i].family[arm]);
			rc = gcp_one(c, &call, err, errlen);
			v = cJSON_GetObjectItemCaseSensitive(call.answer,
							     "selfLink");
			if (rc == 0 && !cJSON_IsString(v))
				rc = -EPROTO;
			if (rc == 0)
				snprintf(out, outlen, "%s", v->valuestring);
			else
				snprintf(err, errlen,
					 "config/imageid: the %.60s image for "
					 "%.60s "
					 "cannot be found: %.400s",
					 nm->imageid, type, call.err);
			gcp_call_clear(&call);
			return rc;
		}
	if (!strchr(nm->imageid, '/')) {
		snprintf(err, errlen,
			 "config/imageid: \"%.200s\" is neither an alias "
			 "(debian-12, ubuntu-24.04, ubuntu-22.04) nor an image "
			 "(projects/PROJECT/global/images/NAME)",
			 nm->imageid);
		return -EINVAL;
	}
	snprintf(out, outlen, "%s", nm->imageid);
	gcp_call_init(&call, "GET", "%s", nm->imageid);
	rc = gcp_one(c, &call, err, errlen);
	v = cJSON_GetObjectItemCaseSensitive(call.answer, "architecture");
	if (rc == 0 && cJSON_IsString(v) &&
	    (strcmp(v->valuestring, "ARM64") == 0) != arm) {
		snprintf(err, errlen,
			 "config/imageid: the image %.300s is %s but the "
			 "machine "
			 "type %s is %s; write an image of %s or an alias "
			 "(debian-12, ubuntu-24.04)",
			 nm->imageid, v->valuestring, type,
			 arm ? "ARM64" : "X86_64", arm ? "ARM64" : "X86_64");
		rc = -EINVAL;
	} else if (rc) {
		snprintf(err, errlen, "config/imageid: %.900s", call.err);
	}
	gcp_call_clear(&call);
	return rc;
}

/* --- deploy --- */

static bool gcp_capacity_code(const char *code)
{
	static const char *const codes[] = {
		"ZONE_RESOURCE_POOL_EXHAUSTED",
		"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
		"QUOTA_EXCEEDED",
		"UNSUPPORTED_OPERATION",
		"RESOURCE_NOT_FOUND_IN_ZONE",
	};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return true;
	return false;
}

static void gcp_say(struct provider_batch *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void gcp_say(struct provider_batch *b, const char *fmt, ...)
{
	char line[600];
	va_list ap;

	if (!b->say)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	b->say(b->say_ctx, line);
}

/* One role's launch: what bulkInsert gets. */
struct gcp_role {
	bool manager;
	const char *type;
	size_t count;
	char image[1024];
	/* A relaunch: the names to make (else a namePattern of the role). */
	char (*names)[GCP_NAME_MAX];
	const char *replaces; /* what the requestId derives from */
};

static cJSON *gcp_insert_body(const struct gcp_ctx *c,
			      const struct gcp_names *nm,
			      const struct gcp_role *r, const char *zone,
			      const char *user, const char *pub)
{
	cJSON *b = cJSON_CreateObject();
	cJSON *p = cJSON_AddObjectToObject(b, "instanceProperties");
	cJSON *disks = cJSON_AddArrayToObject(p, "disks");
	cJSON *disk = cJSON_CreateObject();
	cJSON *nics = cJSON_AddArrayToObject(p, "networkInterfaces");
	cJSON *nic = cJSON_CreateObject(), *acs, *ac = cJSON_CreateObject();
	cJSON *labels = cJSON_AddObjectToObject(p, "labels");
	cJSON *tags = cJSON_AddObjectToObject(p, "tags");
	cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
	cJSON *items = cJSON_AddArrayToObject(meta, "items");
	cJSON *kv = cJSON_CreateObject();
	cJSON *sched = cJSON_AddObjectToObject(p, "scheduling");
	cJSON *init = cJSON_AddObjectToObject(disk, "initializeParams");
	char net[512], keyline[SSHKEY_PUBKEY_MAX + 80], pattern[GCP_NAME_MAX];
	bool spot = nm->spot[!r->manager];

	cJSON_AddNumberToObject(b, "count", (double)r->count);
	if (r->names) {
		cJSON *per =
			cJSON_AddObjectToObject(b, "perInstanceProperties");

		for (size_t i = 0; i < r->count; i++)
			cJSON_AddObjectToObject(per, r->names[i]);
	} else {
		snprintf(pattern, sizeof(pattern), "%.50s-%s", nm->prefix,
			 r->manager ? "m-#" : "w-####");
		cJSON_AddStringToObject(b, "namePattern", pattern);
	}
	cJSON_AddStringToObject(p, "machineType", r->type);
	cJSON_AddBoolToObject(disk, "boot", 1);
	cJSON_AddBoolToObject(disk, "autoDelete", 1);
	cJSON_AddStringToObject(init, "sourceImage", r->image);
	cJSON_AddItemToArray(disks, disk);
	gcp_network_path(c, nm, net, sizeof(net));
	cJSON_AddStringToObject(nic, "network", net);
	if (*nm->subnet)
		cJSON_AddStringToObject(nic, "subnetwork", nm->subnet);
	acs = cJSON_AddArrayToObject(nic, "accessConfigs");
	cJSON_AddStringToObject(ac, "type", "ONE_TO_ONE_NAT");
	cJSON_AddStringToObject(ac, "name", "External NAT");
	cJSON_AddItemToArray(acs, ac);
	cJSON_AddItemToArray(nics, nic);
	cJSON_AddStringToObject(labels, "cclfs-cluster", nm->label);
	cJSON_AddStringToObject(labels, "cclfs-role",
				r->manager ? "manager" : "worker");
	cJSON_AddStringToObject(labels, "cclfs-token", nm->token);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(tags, "items"),
			     cJSON_CreateString(nm->prefix));
	snprintf(keyline, sizeof(keyline), "%s:%.*s", user,
		 (int)strcspn(pub, "\n"), pub);
	cJSON_AddStringToObject(kv, "key", "ssh-keys");
	cJSON_AddStringToObject(kv, "value", keyline);
	cJSON_AddItemToArray(items, kv);
	if (spot) {
		/* Taken back: deleted, as EC2's one-time spot requests. */
		cJSON_AddStringToObject(sched, "provisioningModel", "SPOT");
		cJSON_AddStringToObject(sched, "instanceTerminationAction",
					"DELETE");
	}
	/* GPUs cannot move to another host while running. */
	if (gcp_has_gpu(r->type) || *nm->gpu || spot)
		cJSON_AddStringToObject(sched, "onHostMaintenance",
					"TERMINATE");
	if (*nm->gpu) {
		/* GPUs attached to an N1 machine type: TYPE[:COUNT]. */
		cJSON *accs = cJSON_AddArrayToObject(p, "guestAccelerators");
		cJSON *acc = cJSON_CreateObject();
		char gtype[256];
		int count = 1;
		const char *colon = strchr(nm->gpu, ':');

		if (colon)
			count = atoi(colon + 1);
		snprintf(gtype, sizeof(gtype),
			 "projects/%s/zones/%s/acceleratorTypes/%.*s",
			 c->project, zone,
			 colon ? (int)(colon - nm->gpu) : (int)strlen(nm->gpu),
			 nm->gpu);
		cJSON_AddStringToObject(acc, "acceleratorType", gtype);
		cJSON_AddNumberToObject(acc, "acceleratorCount", count);
		cJSON_AddItemToArray(accs, acc);
	}
	if (nm->placement && !r->manager) {
		char pol[512];

		snprintf(pol, sizeof(pol),
			 "projects/%s/regions/%s/resourcePolicies/%s",
			 c->project, nm->region, nm->prefix);
		cJSON_AddItemToArray(
			cJSON_AddArrayToObject(p, "resourcePolicies"),
			cJSON_CreateString(pol));
	}
	return b;
}

/* The zones to try: config/zone, [gcp] zone or CLOUDSDK_COMPUTE_ZONE (of
 * the region), else the region's zones in order. */
static int gcp_zones(struct gcp_ctx *c, const struct gcp_names *nm,
		     char (*zones)[64], size_t *nz, char *err, size_t errlen)
{
	const char *env = getenv("CLOUDSDK_COMPUTE_ZONE");
	struct gcp_call call;
	const cJSON *list, *z;
	int rc;

	*nz = 0;
	if (!*nm->zone && env && *env &&
	    (!*nm->region || strncmp(env, nm->region, strlen(nm->region)) == 0))
		snprintf(zones[(*nz)++], 64, "%.63s", env);
	else if (*nm->zone)
		snprintf(zones[(*nz)++], 64, "%.63s", nm->zone);
	if (*nz)
		return 0;
	if (!*nm->region) {
		snprintf(err, errlen,
			 "no region: the resolution names none and neither "
			 "[gcp] region nor config/zone is set");
		return -EINVAL;
	}
	gcp_call_init(&call, "GET", "projects/%s/regions/%s", c->project,
		      nm->region);
	rc = gcp_one(c, &call, err, errlen);
	list = cJSON_GetObjectItemCaseSensitive(call.answer, "zones");
	cJSON_ArrayForEach(z, list)
	{
		if (cJSON_IsString(z) && *nz < GCP_ZONES_MAX)
			snprintf(zones[(*nz)++], 64, "%.63s",
				 gcp_short(z->valuestring));
	}
	gcp_call_clear(&call);
	if (rc == 0 && *nz == 0) {
		snprintf(err, errlen, "region %s has no zones", nm->region);
		rc = -ENOENT;
	}
	/* In name order: a, b, c... as gcloud lists them. */
	for (size_t i = 1; i < *nz; i++)
		for (size_t j = i; j > 0 && strcmp(zones[j - 1], zones[j]) > 0;
		     j--) {
			char t[64];

			memcpy(t, zones[j], sizeof(t));
			memcpy(zones[j], zones[j - 1], sizeof(t));
			memcpy(zones[j - 1], t, sizeof(t));
		}
	return rc;
}

/* The login user: config/user, else [gcp] user. */
static const char *gcp_user(const struct gcp_provider *gp,
			    const struct provider_node *pn)
{
	return *pn->user ? pn->user : gp->s.user;
}

/* Launch the roles in one zone: one bulkInsert each (at once), then their
 * operations. 0; -ENOSPC when the zone had no capacity (code in cap); or
 * another failure. */
static int gcp_launch_zone(struct gcp_provider *gp, struct gcp_ctx *c,
			   const struct gcp_names *nm, struct gcp_role *roles,
			   size_t nroles, const char *zone, const char *user,
			   const char *pub, char *cap, size_t caplen, char *err,
			   size_t errlen)
{
	struct gcp_call *calls = calloc(nroles ? nroles : 1, sizeof(*calls));
	struct gcp_op *ops = calloc(nroles ? nroles : 1, sizeof(*ops));
	size_t nops = 0;
	int rc = 0;

	(void)gp;
	if (!calls || !ops) {
		free(calls);
		free(ops);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < nroles; i++) {
		cJSON *body =
			gcp_insert_body(c, nm, &roles[i], zone, user, pub);
		char what[256], rid[GCP_UUID_MAX];

		snprintf(what, sizeof(what), "%s/%s%s%.127s",
			 roles[i].manager ? "manager" : "worker", zone,
			 roles[i].replaces ? "/replacing " : "",
			 roles[i].replaces ? roles[i].replaces : "");
		gcp_request_id(nm->token, what, rid, sizeof(rid));
		gcp_call_init(&calls[i], "POST",
			      "projects/%s/zones/%s/instances/"
			      "bulkInsert?requestId=%s",
			      c->project, zone, rid);
		gcp_call_body(&calls[i], body);
		cJSON_Delete(body);
	}
	gcp_api_do(c->api, calls, nroles, c->cancel);
	for (size_t i = 0; i < nroles && rc == 0; i++) {
		if (calls[i].rc) {
			snprintf(err, errlen, "%s", calls[i].err);
			rc = calls[i].rc;
		} else if (gcp_op_from(&ops[nops], calls[i].answer) == 0) {
			nops++;
		}
	}
	if (rc == 0 && nops)
		rc = gcp_api_wait(c->api, ops, nops, c->cancel, err, errlen);
	for (size_t i = 0; rc == 0 && i < nops; i++)
		if (ops[i].rc) {
			snprintf(err, errlen, "bulkInsert in %s: %.400s", zone,
				 ops[i].err);
			rc = gcp_capacity_code(ops[i].code) ? -ENOSPC
							    : ops[i].rc;
			snprintf(cap, caplen, "%s", ops[i].code);
		}
	for (size_t i = 0; i < nroles; i++)
		gcp_call_clear(&calls[i]);
	free(calls);
	free(ops);
	return rc;
}

static int gcp_rank_cmp(const void *a, const void *b)
{
	const struct provider_node *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Launch every role, zone after zone while a zone has no capacity. The
 * zone that worked goes to *where. */
static int gcp_launch(struct gcp_provider *gp, struct gcp_ctx *c,
		      const struct gcp_names *nm, struct provider_batch *b,
		      struct gcp_role *roles, size_t nroles, const char *user,
		      const char *pub, char *where, size_t wherelen,
		      bool *no_capacity)
{
	char zones[GCP_ZONES_MAX][64], cap[GCP_REASON_MAX];
	size_t nz = 0, tries;
	char *err = b->err;
	size_t errlen = sizeof(b->err);
	int rc = gcp_zones(c, nm, zones, &nz, err, errlen);

	if (rc)
		return rc;
	tries = nm->failover > 0 && (size_t)nm->failover < nz
			? (size_t)nm->failover
			: nz;
	for (size_t z = 0; z < tries; z++) {
		rc = gcp_launch_zone(gp, c, nm, roles, nroles, zones[z], user,
				     pub, cap, sizeof(cap), err, errlen);
		if (rc == 0) {
			snprintf(where, wherelen, "%s", zones[z]);
			if (z > 0 || nz > 1)
				gcp_say(b, "launched in zone %s", zones[z]);
			return 0;
		}
		if (rc != -ENOSPC)
			return rc;
		*no_capacity = true;
		gcp_say(b, "zone %s: %s; %s", zones[z], cap,
			z + 1 < tries ? "trying the next zone"
				      : "no zone is left to try");
		/* What a role launched there goes before the next zone. */
		{
			struct gcp_list l = {0};
			char e2[GCP_ERR_MAX];
			int drc = gcp_instances(c, nm, &l, e2, sizeof(e2));

			if (drc == 0 && l.n)
				drc = gcp_delete_instances(c, nm, &l, zones[z],
							   e2, sizeof(e2));
			free(l.v);
			if (drc) {
				snprintf(err, errlen,
					 "zone %s had no capacity, and "
					 "deleting what was launched there "
					 "failed: %.600s",
					 zones[z], e2);
				return drc;
			}
		}
	}
	snprintf(err, errlen,
		 "no capacity for the cluster in %s%s (%zu zone%s tried; the "
		 "last said %s)",
		 *nm->region ? "region " : "zone ",
		 *nm->region ? nm->region : zones[0], tries,
		 tries == 1 ? "" : "s", cap);
	return -ENOSPC;
}

/* The cluster's key pair (made when cclfs owns it) and its public line. */
static int gcp_key(const struct gcp_names *nm, char *pub, size_t publen,
		   char *err, size_t errlen)
{
	int rc = sshkey_public(nm->keypath, pub, publen, err, errlen);

	if (rc == -ENOENT && nm->key_own) {
		rc = sshkey_generate(nm->keypath, nm->prefix, err, errlen);
		if (rc == 0)
			rc = sshkey_public(nm->keypath, pub, publen, err,
					   errlen);
	}
	return rc;
}

static int gcp_reach_all(struct gcp_provider *gp, struct provider_node *nodes,
			 size_t n, struct cancel *cancel, char *err,
			 size_t errlen)
{
	struct cloud_poll poll = {gp->s.boot_timeout_ms, gp->s.poll_first_ms,
				  gp->s.poll_max_ms};

	return cloud_reach_all(gp->base.remote, nodes, n, &poll, cancel, err,
			       errlen);
}

/* The roles of the batch: the manager (rank -1) and the workers, or for a
 * relaunch the replacement names of the nodes. */
static int gcp_roles(struct gcp_ctx *c, const struct gcp_names *nm,
		     struct provider_batch *b, struct gcp_role *roles,
		     size_t *nroles)
{
	struct provider_node *nodes = b->nodes;
	size_t n = b->n;

	*nroles = 0;
	for (size_t i = 0; i < n; i++) {
		bool mgr = nodes[i].rank < 0;
		struct gcp_role *r = NULL;

		for (size_t k = 0; k < *nroles; k++)
			if (roles[k].manager == mgr)
				r = &roles[k];
		if (!r && *nm->gpu &&
		    strncmp(nodes[i].instance_type, "n1-", 3) != 0) {
			snprintf(b->err, sizeof(b->err),
				 "config/gpu: only N1 machine types take "
				 "attached GPUs, and %.60s is not one; leave "
				 "config/gpu empty or resolve to an N1 type",
				 nodes[i].instance_type);
			return -EINVAL;
		}
		if (!r) {
			int rc;

			r = &roles[(*nroles)++];
			memset(r, 0, sizeof(*r));
			r->manager = mgr;
			r->type = nodes[i].instance_type;
			rc = gcp_image(c, nm, r->type, r->image,
				       sizeof(r->image), b->err,
				       sizeof(b->err));
			if (rc)
				return rc;
		}
		r->count++;
	}
	return 0;
}

/* The host keys the instances publish in their guest attributes (Google's
 * guest environment does), recorded before the first connection so that it
 * verifies them; an instance that publishes none is trusted on first use. */
static void gcp_hostkeys(struct gcp_provider *gp, struct gcp_ctx *c,
			 const struct provider_node *nodes, size_t n)
{
	struct gcp_call *calls = calloc(n ? n : 1, sizeof(*calls));

	if (!calls)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *id = nodes[i].instance_id;
		const char *slash = strchr(id, '/');

		gcp_call_init(&calls[i], "GET",
			      "projects/%s/zones/%.*s/instances/%s/"
			      "getGuestAttributes?queryPath=hostkeys%%2F",
			      c->project, slash ? (int)(slash - id) : 0, id,
			      slash ? slash + 1 : id);
	}
	gcp_api_do(c->api, calls, n, c->cancel);
	for (size_t i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(calls[i].answer,
							 "queryValue"),
			"items");
		const cJSON *item;
		char alias[PROVIDER_ID_MAX + 8], type[64], key[2048], e[512];

		snprintf(alias, sizeof(alias), "gce:%s", nodes[i].instance_id);
		if (calls[i].rc)
			v = NULL;
		cJSON_ArrayForEach(item, v)
		{
			gcp_copy_string(item, "key", type, sizeof(type));
			gcp_copy_string(item, "value", key, sizeof(key));
			if (*type && *key)
				ssh_hosts_pin(gp->s.own_hosts, alias, type, key,
					      e, sizeof(e));
		}
		gcp_call_clear(&calls[i]);
	}
	free(calls);
}

/* Delete the instances a failed relaunch made (by name). */
static void gcp_relaunch_undo(struct gcp_ctx *c, const struct gcp_names *nm,
			      char (*names)[GCP_NAME_MAX], size_t n)
{
	struct gcp_list l = {0}, mine = {0};
	char err[GCP_ERR_MAX];

	if (gcp_instances(c, nm, &l, err, sizeof(err)) == 0) {
		mine.v = l.v;
		for (size_t j = 0; j < l.n; j++)
			for (size_t i = 0; i < n; i++)
				if (strcmp(l.v[j].name, names[i]) == 0)
					l.v[mine.n++] = l.v[j];
		if (mine.n)
			gcp_delete_instances(c, nm, &mine, NULL, err,
					     sizeof(err));
	}
	free(l.v);
}

static int gcp_create(struct provider *p, struct provider_batch *b)
{
	struct gcp_provider *gp = gcp_of(p);
	struct provider_node *nodes = b->nodes;
	size_t n = b->n, nroles = 0;
	char pub[SSHKEY_PUBKEY_MAX], zone[64] = "", *err = b->err;
	size_t errlen = sizeof(b->err);
	struct gcp_role *roles = calloc(n + 2, sizeof(*roles)), *launch = roles;
	struct gcp_names nm;
	struct gcp_ctx c = {0};
	bool made = false, no_capacity = false;
	char(*names)[GCP_NAME_MAX] = NULL;
	char(*old)[PROVIDER_ID_MAX + 1] = NULL;
	int rc;

	if (n == 0 || !roles) {
		free(roles);
		snprintf(err, errlen, "out of memory");
		return n ? -ENOMEM : 0;
	}
	gcp_names(gp, &nodes[0], &nm);
	if (!*nm.token) {
		snprintf(err, errlen, "the cluster has no token");
		rc = -EINVAL;
		goto out;
	}
	qsort(nodes, n, sizeof(*nodes), gcp_rank_cmp);
	rc = gcp_ctx_get(gp, b, &c);
	if (rc == 0)
		rc = gcp_ctx_check(gp, &c, err, errlen);
	if (rc == 0)
		rc = gcp_key(&nm, pub, sizeof(pub), err, errlen);
	if (rc == 0)
		rc = gcp_roles(&c, &nm, b, roles, &nroles);
	if (rc == 0 && b->relaunch) {
		/* New names for the ranks, in the zone of the instances
		 * they replace; the requestId names the one replaced. */
		names = calloc(n, sizeof(*names));
		old = calloc(n, sizeof(*old));
		if (!names || !old) {
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		}
		for (size_t i = 0; rc == 0 && i < n; i++) {
			char rid[GCP_UUID_MAX];

			memcpy(old[i], nodes[i].instance_id, sizeof(old[i]));
			remote_forget(p->remote, nodes[i].handle,
				      nodes[i].rank);
			gcp_request_id(nm.token, old[i], rid, sizeof(rid));
			if (nodes[i].rank < 0)
				snprintf(names[i], sizeof(names[i]),
					 "%.40s-m-1-%.8s", nm.prefix, rid);
			else
				snprintf(names[i], sizeof(names[i]),
					 "%.40s-w-%04d-%.8s", nm.prefix,
					 nodes[i].rank + 1, rid);
		}
		if (rc == 0) {
			const char *slash = strchr(old[0], '/');

			snprintf(nm.zone, sizeof(nm.zone), "%.*s",
				 slash ? (int)(slash - old[0]) : 0, old[0]);
			/* One call per node: each its own name, and a
			 * requestId naming the instance it replaces. */
			for (size_t i = 0; i < n; i++) {
				bool mgr = nodes[i].rank < 0;
				const struct gcp_role *t =
					roles[0].manager == mgr ? &roles[0]
								: &roles[1];

				roles[2 + i] = *t;
				roles[2 + i].count = 1;
				roles[2 + i].names = &names[i];
				roles[2 + i].replaces = old[i];
			}
			launch = roles + 2;
			nroles = n;
		}
	}
	if (rc)
		goto out;
	made = true;
	rc = gcp_firewalls(&c, &nm, err, errlen);
	if (rc == 0)
		rc = gcp_placement(&c, &nm, err, errlen);
	if (rc == 0)
		rc = gcp_launch(gp, &c, &nm, b, launch, nroles,
				gcp_user(gp, nodes), pub, zone, sizeof(zone),
				&no_capacity);
	if (rc == 0) {
		struct gcp_list l = {0};

		rc = gcp_instances(&c, &nm, &l, err, errlen);
		if (rc == 0 && names) {
			for (size_t i = 0; i < n; i++)
				for (size_t j = 0; j < l.n; j++)
					if (strcmp(l.v[j].name, names[i]) == 0)
						snprintf(
							nodes[i].instance_id,
							sizeof(nodes[i].instance_id),
							"%s/%s", l.v[j].zone,
							l.v[j].name);
		} else if (rc == 0 && gcp_assign(&l, zone, nodes, n) < n) {
			snprintf(err, errlen,
				 "bulkInsert in %s ended, but not every node's "
				 "instance is listed",
				 zone);
			rc = -EIO;
		}
		free(l.v);
	}
	if (rc == 0)
		rc = gcp_wait(gp, &c, &nm, nodes, n, "RUNNING", err, errlen);
	if (rc == 0) {
		gcp_hostkeys(gp, &c, nodes, n);
		cloud_workdirs(nodes, n);
		for (size_t i = 0; i < n; i++)
			cloud_know(&gp->known, &nodes[i]);
		rc = gcp_reach_all(gp, nodes, n, c.cancel, err, errlen);
	}
	if (rc && rc != -ECANCELED && old) {
		/* A relaunch that failed takes back only what it launched:
		 * the nodes keep their old ids. */
		gcp_relaunch_undo(&c, &nm, names, n);
		for (size_t i = 0; i < n; i++)
			memcpy(nodes[i].instance_id, old[i],
			       sizeof(nodes[i].instance_id));
	} else if (rc && rc != -ECANCELED && made) {
		/* Nothing of a failed deploy is left to cost money;
		 * cancelled, it is the terminate's to find by label. */
		char why[GCP_ERR_MAX], e2[GCP_ERR_MAX];
		int drc = gcp_destroy(&c, &nm, e2, sizeof(e2));

		snprintf(why, sizeof(why), "%s", err);
		if (drc)
			snprintf(err, errlen,
				 "%.500s; cleaning up what was launched failed "
				 "too: %.400s",
				 why, e2);
		else
			snprintf(err, errlen,
				 "%.900s; everything made for the cluster was "
				 "deleted",
				 why);
		if (drc == 0 && no_capacity && rc == -ENOSPC)
			rc = -ENOSPC;
		else if (rc == -ENOSPC)
			rc = -EIO;
		for (size_t i = 0; i < n; i++) {
			remote_forget(p->remote, nodes[i].handle,
				      nodes[i].rank);
			if (drc == 0)
				nodes[i].instance_id[0] = '\0';
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		b->results[i].rc =
			*nodes[i].instance_id && !(old && rc) ? 0 : rc;
	free(names);
	free(old);
	free(roles);
	return rc;
}

/* --- stop, start, terminate --- */

static int gcp_switch(struct provider *p, struct provider_batch *b, bool start)
{
	struct gcp_provider *gp = gcp_of(p);
	struct provider_node *nodes = b->nodes, *w;
	size_t n = b->n, k = 0;
	struct gcp_call *calls;
	struct gcp_names nm;
	struct gcp_ctx c;
	int rc = 0;

	if (n == 0)
		return 0;
	calls = calloc(n, sizeof(*calls));
	w = calloc(n, sizeof(*w));
	if (!calls || !w) {
		free(calls);
		free(w);
		snprintf(b->err, sizeof(b->err), "out of memory");
		return -ENOMEM;
	}
	gcp_names(gp, &nodes[0], &nm);
	rc = gcp_ctx_get(gp, b, &c);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *id = nodes[i].instance_id;
		const char *slash = strchr(id, '/');

		remote_forget(p->remote, nodes[i].handle, nodes[i].rank);
		if (!slash)
			continue;
		gcp_call_init(&calls[k], "POST",
			      "projects/%s/zones/%.*s/instances/%s/%s",
			      c.project, (int)(slash - id), id, slash + 1,
			      start ? "start" : "stop");
		w[k++] = nodes[i];
	}
	if (rc == 0) {
		gcp_api_do(c.api, calls, k, c.cancel);
		/* A start can fail after it was accepted (no capacity in the
		 * zone): its operation says so. A stop's end is seen by the
		 * list the wait below reads, one call for every instance. */
		if (start)
			rc = gcp_wait_calls(&c, calls, k, 0, b->err,
					    sizeof(b->err));
		for (size_t i = 0; !start && i < k && rc == 0; i++)
			if (calls[i].rc) {
				snprintf(b->err, sizeof(b->err), "%s",
					 calls[i].err);
				rc = calls[i].rc;
			}
	}
	if (rc == 0)
		rc = gcp_wait(gp, &c, &nm, w, k,
			      start ? "RUNNING" : "TERMINATED", b->err,
			      sizeof(b->err));
	/* Started instances have new addresses: the nodes follow, and are
	 * reachable before the cluster says running. */
	for (size_t i = 0, j = 0; rc == 0 && i < n; i++)
		if (strchr(nodes[i].instance_id, '/')) {
			if (start)
				snprintf(nodes[i].address,
					 sizeof(nodes[i].address), "%s",
					 w[j].address);
			j++;
			cloud_know(&gp->known, &nodes[i]);
		}
	if (rc == 0 && start)
		rc = gcp_reach_all(gp, nodes, n, b->cancel, b->err,
				   sizeof(b->err));
	for (size_t i = 0; i < n; i++)
		b->results[i].rc = rc;
	for (size_t i = 0; i < k; i++)
		gcp_call_clear(&calls[i]);
	free(calls);
	free(w);
	return rc;
}

static int gcp_stop(struct provider *p, struct provider_batch *b)
{
	return gcp_switch(p, b, false);
}

static int gcp_start(struct provider *p, struct provider_batch *b)
{
	return gcp_switch(p, b, true);
}

static int gcp_terminate(struct provider *p, struct provider_batch *b)
{
	struct gcp_provider *gp = gcp_of(p);
	bool recorded = false;
	struct gcp_names nm;
	struct gcp_ctx c;
	int rc;

	if (b->n == 0)
		return 0;
	for (size_t i = 0; i < b->n; i++) {
		remote_forget(p->remote, b->nodes[i].handle, b->nodes[i].rank);
		recorded |= *b->nodes[i].instance_id != '\0';
	}
	gcp_names(gp, &b->nodes[0], &nm);
	rc = gcp_ctx_get(gp, b, &c);
	/* By label: also instances a crash left unrecorded. */
	if (rc == 0)
		rc = gcp_destroy(&c, &nm, b->err, sizeof(b->err));
	/* Nothing recorded and nobody to ask (the endpoint unreachable, the
	 * credentials refused): nothing is known to exist, so the cluster may
	 * go; what a launch that got through made carries its label, and the
	 * next mount's check reports it. */
	if ((rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -EACCES) &&
	    !recorded) {
		char why[PROVIDER_ERR_MAX];

		snprintf(why, sizeof(why), "%s", b->err);
		snprintf(b->results[0].msg, sizeof(b->results[0].msg),
			 "no instance was ever recorded and Compute Engine "
			 "cannot be asked (%.200s); anything launched carries "
			 "the label cclfs-token=%s and is reported at the next "
			 "mount",
			 why, nm.token);
		b->err[0] = '\0';
		rc = 0;
	}
	/* The private key goes with the cluster, reached or not. */
	if (rc == 0 && nm.key_own)
		cloud_key_remove(nm.keypath);
	for (size_t i = 0; i < b->n; i++)
		b->results[i].rc = rc;
	return rc;
}

static int gcp_sig_one(struct provider *p, struct provider_batch *b, size_t i)
{
	if (!*b->nodes[i].instance_id)
		return 0;
	return remote_signal(p->remote, &b->nodes[i], sigabbrev_np(b->sig),
			     b->cancel, b->results[i].msg,
			     sizeof(b->results[i].msg));
}

static int gcp_sig(struct provider *p, struct provider_batch *b)
{
	return provider_each(p, b, gcp_sig_one);
}

struct gcp_preempt {
	const char *suffix; /* "/zones/Z/instances/NAME" */
	bool found;
};

static int gcp_preempt_item(void *ctx, const cJSON *item, const char *scope)
{
	struct gcp_preempt *pr = ctx;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(item, "targetLink");
	size_t n = strlen(pr->suffix), l;

	(void)scope;
	if (!cJSON_IsString(t))
		return 0;
	l = strlen(t->valuestring);
	pr->found |= l >= n && strcmp(t->valuestring + l - n, pr->suffix) == 0;
	return pr->found;
}

/* Whether Compute Engine took the spot instance ZONE/NAME back: its zone
 * lists a compute.instances.preempted operation for it. */
static bool gcp_preempted(struct gcp_ctx *c, const char *id)
{
	const char *slash = strchr(id, '/');
	char suffix[256], url[256], err[GCP_ERR_MAX];
	struct gcp_preempt pr = {suffix, false};

	if (!slash)
		return false;
	snprintf(suffix, sizeof(suffix), "/zones/%.*s/instances/%.100s",
		 (int)(slash - id), id, slash + 1);
	snprintf(url, sizeof(url), "projects/%.100s/zones/%.*s/operations",
		 c->project, (int)(slash - id), id);
	gcp_api_list(c->api, url,
		     "operationType=\"compute.instances.preempted\"",
		     gcp_preempt_item, &pr, c->cancel, err, sizeof(err));
	return pr.found;
}

static int gcp_describe(struct provider *p, struct provider_batch *b)
{
	struct gcp_provider *gp = gcp_of(p);
	struct gcp_list l = {0};
	struct gcp_names nm;
	struct gcp_ctx c;
	int rc;

	if (b->n == 0)
		return 0;
	gcp_names(gp, &b->nodes[0], &nm);
	rc = gcp_ctx_get(gp, b, &c);
	if (rc == 0)
		rc = gcp_instances(&c, &nm, &l, b->err, sizeof(b->err));
	for (size_t i = 0; rc == 0 && i < b->n; i++) {
		const struct gcp_instance *in =
			gcp_find(&l, b->nodes[i].instance_id);
		bool spot = nm.spot[b->nodes[i].rank >= 0];

		if (!in || strcmp(in->status, "TERMINATED") == 0 ||
		    strcmp(in->status, "STOPPING") == 0)
			b->results[i].state =
				spot && gcp_preempted(&c,
						      b->nodes[i].instance_id)
					? PROVIDER_NODE_PREEMPTED
				: in ? PROVIDER_NODE_STOPPED
				     : PROVIDER_NODE_GONE;
		else
			b->results[i].state =
				strcmp(in->status, "SUSPENDED") == 0
					? PROVIDER_NODE_STOPPED
					: PROVIDER_NODE_RUNNING;
	}
	free(l.v);
	return rc;
}

static int gcp_run(struct provider *p, const struct provider_node *node,
		   struct provider_run *run, char *err, size_t errlen)
{
	return remote_run(p->remote, node, run, err, errlen);
}

static void gcp_attach(struct provider *p, const struct provider_node *node)
{
	cloud_know(&gcp_of(p)->known, node);
}

static int gcp_reach(struct provider *p, const struct provider_node *node,
		     char *buf, size_t len)
{
	return remote_reach(p->remote, node, buf, len);
}

/* How remote.c reaches node `rank` of pn's cluster. */
static int gcp_params(void *ctx, const struct provider_node *pn, int rank,
		      struct ssh_params *sp, char *err, size_t errlen)
{
	struct gcp_provider *gp = ctx;
	char address[PROVIDER_ID_MAX + 1], id[PROVIDER_ID_MAX + 1];
	struct gcp_names nm;
	int rc = cloud_node_at(&gp->known, pn, rank, address, id,
			       sizeof(address), err, errlen);

	if (rc)
		return rc;
	gcp_names(gp, pn, &nm);
	snprintf(sp->host, sizeof(sp->host), "%s", address);
	sp->port = 22;
	snprintf(sp->user, sizeof(sp->user), "%s", gcp_user(gp, pn));
	snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", nm.keypath);
	snprintf(sp->known_hosts, sizeof(sp->known_hosts), "%s",
		 gp->s.known_hosts);
	snprintf(sp->own_hosts, sizeof(sp->own_hosts), "%s", gp->s.own_hosts);
	/* The key an instance shows first is kept under its zone and name:
	 * it stays when a start gives the instance a new address. */
	sp->record_new = true;
	snprintf(sp->key_alias, sizeof(sp->key_alias), "gce:%.120s", id);
	sp->connect_timeout_ms = gp->s.connect_timeout_ms;
	sp->keepalive_s = gp->s.keepalive_s;
	return 0;
}

/* --- what no cluster owns --- */

struct gcp_strays {
	int (*known)(void *ctx, const char *handle, const char *token);
	void (*report)(void *ctx, const char *sentence);
	void *ctx;
};

static int gcp_stray_item(void *ctx, const cJSON *item, const char *scope)
{
	struct gcp_strays *s = ctx;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(item, "labels");
	char label[GCP_LABEL_MAX], token[48], handle[72], name[GCP_NAME_MAX],
		status[32], zone[256], line[600];

	(void)scope;
	gcp_copy_string(labels, "cclfs-cluster", label, sizeof(label));
	gcp_copy_string(labels, "cclfs-token", token, sizeof(token));
	gcp_copy_string(item, "name", name, sizeof(name));
	gcp_copy_string(item, "status", status, sizeof(status));
	gcp_copy_string(item, "zone", zone, sizeof(zone));
	if (gcp_label_decode(label, handle, sizeof(handle)))
		snprintf(handle, sizeof(handle), "%s", label);
	if (s->known(s->ctx, handle, token))
		return 0;
	snprintf(line, sizeof(line),
		 "gcp: instance %.63s (%.31s, %.63s) is labelled "
		 "cclfs-cluster=%.63s (handle %.64s, token %.40s) but belongs "
		 "to no cluster of this state directory; it was left alone",
		 name, status, gcp_short(zone), label, handle, token);
	s->report(s->ctx, line);
	return 0;
}

static int gcp_stray_rule(void *ctx, const cJSON *item, const char *scope)
{
	struct gcp_strays *s = ctx;
	char desc[256], name[GCP_NAME_MAX + 16], label[GCP_LABEL_MAX],
		token[48], handle[72], line[600];

	(void)scope;
	gcp_copy_string(item, "description", desc, sizeof(desc));
	gcp_copy_string(item, "name", name, sizeof(name));
	if (sscanf(desc, "cclfs cluster %63s token %47s", label, token) != 2)
		return 0;
	if (gcp_label_decode(label, handle, sizeof(handle)))
		snprintf(handle, sizeof(handle), "%s", label);
	if (s->known(s->ctx, handle, token))
		return 0;
	snprintf(line, sizeof(line),
		 "gcp: firewall rule %.80s is of cluster %.64s (token %.40s) "
		 "but belongs to no cluster of this state directory; it was "
		 "left alone",
		 name, handle, token);
	s->report(s->ctx, line);
	return 0;
}

static int
gcp_strays(struct provider *p,
	   int (*known)(void *ctx, const char *handle, const char *token),
	   void (*report)(void *ctx, const char *sentence), void *ctx,
	   struct cancel *cancel, char *err, size_t errlen)
{
	struct gcp_provider *gp = gcp_of(p);
	struct gcp_strays s = {known, report, ctx};
	struct provider_batch b = {.cancel = cancel};
	struct gcp_ctx c;
	char url[512];
	int rc = gcp_ctx_get(gp, &b, &c);

	if (rc) {
		snprintf(err, errlen, "%s", b.err);
		return rc;
	}
	snprintf(url, sizeof(url), "projects/%s/aggregated/instances",
		 c.project);
	rc = gcp_api_list(c.api, url, "labels.cclfs-token:*", gcp_stray_item,
			  &s, cancel, err, errlen);
	snprintf(url, sizeof(url), "projects/%s/global/firewalls", c.project);
	if (rc == 0)
		rc = gcp_api_list(c.api, url, "name:cclfs-*", gcp_stray_rule,
				  &s, cancel, err, errlen);
	return rc;
}

static int gcp_catalog(struct provider *p,
		       const struct provider_catalog_sink *sink,
		       struct cancel *cancel, char *err, size_t errlen)
{
	struct gcp_provider *gp = gcp_of(p);
	struct provider_batch b = {.cancel = cancel};
	const char *billing =
		getenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING");
	struct gcp_ctx c;
	int rc = gcp_ctx_get(gp, &b, &c);

	if (rc) {
		snprintf(err, errlen, "%s", b.err);
		return rc;
	}
	if (!billing || !*billing)
		billing = *gp->s.billing_endpoint
				  ? gp->s.billing_endpoint
				  : "https://cloudbilling.googleapis.com/v1/";
	return gcp_catalog_refresh(c.api, billing, gp->s.billing_api_key, sink,
				   cancel, err, errlen);
}

static void gcp_close(struct provider *p)
{
	struct gcp_provider *gp = gcp_of(p);

	remote_free(p->remote);
	gcp_api_free(gp->api);
	gcp_auth_close(gp->auth);
	pthread_mutex_destroy(&gp->lock);
	cloud_nodes_free(&gp->known);
	free(gp);
}

static const struct provider_ops gcp_ops = {
	.caps = PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE |
		PROVIDER_CREATES_WHOLE | PROVIDER_HAS_FILES |
		PROVIDER_HAS_CONNECTIONS | PROVIDER_FINDS_STRAYS,
	.files = &remote_file_ops,
	.act =
		{
			[PROVIDER_CREATE] = gcp_create,
			[PROVIDER_STOP] = gcp_stop,
			[PROVIDER_START] = gcp_start,
			[PROVIDER_TERMINATE] = gcp_terminate,
			[PROVIDER_SIGNAL] = gcp_sig,
			[PROVIDER_PREPARE] = remote_prepare,
			[PROVIDER_DESCRIBE] = gcp_describe,
		},
	.run = gcp_run,
	.attach = gcp_attach,
	.reach = gcp_reach,
	.strays = gcp_strays,
	.catalog_refresh = gcp_catalog,
	.close = gcp_close,
};

static struct provider *gcp_open(const struct config *conf,
				 const char *statedir, char *err, size_t errlen)
{
	struct gcp_provider *gp;
	struct gcp_settings s;

	if (gcpconf_read(conf, statedir, &s, err, errlen))
		return NULL;
	if (mkdir(s.keydir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", s.keydir,
			 strerror(errno));
		return NULL;
	}
	gp = calloc(1, sizeof(*gp));
	if (!gp) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	gp->s = s;
	gp->base.ops = &gcp_ops;
	gp->base.entry = &provider_gcp;
	/* Spot instances are taken back: looked for as often as a wait
	 * polls at most. */
	gp->base.watch_ms = gp->s.poll_max_ms;
	pthread_mutex_init(&gp->lock, NULL);
	cloud_nodes_init(&gp->known);
	gp->base.remote =
		remote_new(&gp->base, gcp_params, gp, gp->s.command_timeout_ms);
	if (!gp->base.remote) {
		pthread_mutex_destroy(&gp->lock);
		cloud_nodes_free(&gp->known);
		free(gp);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return &gp->base;
}

/* [gcp] region, never a network call. */
static int gcp_default_region(const struct config *conf, char *buf, size_t len)
{
	struct gcp_settings *s = calloc(1, sizeof(*s));
	char err[512];
	int found = 0;

	if (s && gcpconf_read(conf, "", s, err, sizeof(err)) == 0 &&
	    *s->region) {
		snprintf(buf, len, "%s", s->region);
		found = 1;
	}
	free(s);
	return found;
}

static const char *const gcp_config_keys[] = {"network", "gpu", NULL};

const struct provider_entry provider_gcp = {
	.name = "gcp",
	.platform_type = "GoogleCloud",
	.section = "gcp",
	.config_keys = gcp_config_keys,
	.open = gcp_open,
	.default_region = gcp_default_region,
};
