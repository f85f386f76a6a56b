/* A gcp cluster's resources: its names and the job's client, its instances
 * (listed by token label, waited for, deleted together), its firewall rules
 * and placement policy, and everything of it deleted at once. */
#include "providers/gcp/gcp_priv.h"

#include "providers/cancel.h"
#include "providers/remote.h"
#include "providers/ssh.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool gcp_has_gpu(const char *type)
{
	return gcp_series_in(type, gcp_gpu_series,
			     sizeof(gcp_gpu_series) /
				     sizeof(gcp_gpu_series[0]));
}

bool gcp_is_arm(const char *type)
{
	return gcp_series_in(type, gcp_arm_series,
			     sizeof(gcp_arm_series) /
				     sizeof(gcp_arm_series[0]));
}

void gcp_names_fill(const struct gcp_provider *gp,
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
	/* A placement policy is regional: without a region, none. */
	nm->placement = *nm->region &&
			strcmp(nm->cluster_type, "PeerWorkersMPI") == 0 &&
			gcp_series_in(pn->instance_type, gcp_compact_series,
				      sizeof(gcp_compact_series) /
					      sizeof(gcp_compact_series[0]));
}

/* --- the client --- */

int gcp_ctx_get(struct gcp_provider *gp, struct provider_batch *b,
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

int gcp_ctx_check(struct gcp_provider *gp, struct gcp_ctx *c, char *err,
		  size_t errlen)
{
	char token[GCP_AUTH_TOKEN_MAX];
	int rc = gcp_auth_token(gp->auth, c->cancel, token, sizeof(token), err,
				errlen);

	explicit_bzero(token, sizeof(token));
	return rc;
}

int gcp_one(struct gcp_ctx *c, struct gcp_call *call, char *err, size_t errlen)
{
	int rc = gcp_api_do(c->api, call, 1, c->cancel);

	if (rc)
		snprintf(err, errlen, "%s", call->err);
	return rc;
}

int gcp_wait_calls(struct gcp_ctx *c, struct gcp_call *calls, size_t n, int ok,
		   char *err, size_t errlen)
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

void gcp_copy_string(const cJSON *o, const char *key, char *out, size_t len)
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

int gcp_instances(struct gcp_ctx *c, const struct gcp_names *nm,
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

const struct gcp_instance *gcp_find(const struct gcp_list *l, const char *id)
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

size_t gcp_assign(const struct gcp_list *l, const char *zone,
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

int gcp_wait(struct gcp_provider *gp, struct gcp_ctx *c,
	     const struct gcp_names *nm, struct provider_node *nodes, size_t n,
	     const char *want, char *err, size_t errlen)
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
			if (ok && running && in)
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

int gcp_delete_instances(struct gcp_ctx *c, const struct gcp_names *nm,
			 const struct gcp_list *l, const char *zone, char *err,
			 size_t errlen)
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

void gcp_network_path(const struct gcp_ctx *c, const struct gcp_names *nm,
		      char *out, size_t len)
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

int gcp_firewalls(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		  size_t errlen)
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

int gcp_placement(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
		  size_t errlen)
{
	cJSON *body, *gpp;
	struct gcp_call call;
	char rid[GCP_UUID_MAX], desc[256];
	int rc;

	if (!nm->placement)
		return 0;
	body = cJSON_CreateObject();
	gpp = cJSON_AddObjectToObject(body, "groupPlacementPolicy");
	cJSON_AddStringToObject(body, "name", nm->prefix);
	/* As the firewall rules': what the strays check reads. */
	snprintf(desc, sizeof(desc), "cclfs cluster %s token %s", nm->label,
		 nm->token);
	cJSON_AddStringToObject(body, "description", desc);
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

int gcp_destroy(struct gcp_ctx *c, const struct gcp_names *nm, char *err,
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

const char *gcp_user(const struct gcp_provider *gp,
		     const struct provider_node *pn)
{
	return *pn->user ? pn->user : gp->s.user;
}

int gcp_reach_all(struct gcp_provider *gp, struct provider_node *nodes,
		  size_t n, struct cancel *cancel, char *err, size_t errlen)
{
	struct cloud_poll poll = {gp->s.boot_timeout_ms, gp->s.poll_first_ms,
				  gp->s.poll_max_ms};

	return cloud_reach_all(gp->base.remote, nodes, n, &poll, cancel, err,
			       errlen);
}

static void *gcp_forget_run(void *arg)
{
	const struct gcp_forget *f = arg;

	remote_forget_all(f->r, f->nodes, f->n);
	return NULL;
}

void gcp_forget_begin(struct gcp_forget *f, struct remote *r,
		      const struct provider_node *nodes, size_t n)
{
	*f = (struct gcp_forget){.r = r, .nodes = nodes, .n = n};
	f->started = n > 0 &&
		     pthread_create(&f->thread, NULL, gcp_forget_run, f) == 0;
	if (!f->started)
		gcp_forget_run(f);
}

void gcp_forget_end(struct gcp_forget *f)
{
	if (f->started)
		pthread_join(f->thread, NULL);
	f->started = false;
}
