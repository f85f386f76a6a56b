/* The gcp provider: its operations table and registry entry, stop, start
 * and delete of every instance at once (of the ranks a shrink removes), the
 * spot watch, how SSH reaches a node, what no cluster owns, and the catalog
 * refresh's entry; the deploy is gcp_deploy.c's. */
#include "providers/gcp/gcp_priv.h"

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

extern const struct provider_entry provider_gcp;

static int gcp_switch(struct provider *p, struct provider_batch *b, bool start)
{
	struct gcp_provider *gp = gcp_of(p);
	struct provider_node *nodes = b->nodes, *w;
	size_t n = b->n, k = 0;
	struct gcp_call *calls;
	struct gcp_forget f;
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
	gcp_names_fill(gp, &nodes[0], &nm);
	gcp_forget_begin(&f, p->remote, nodes, n);
	rc = gcp_ctx_get(gp, b, &c);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *id = nodes[i].instance_id;
		const char *slash = strchr(id, '/');

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
	gcp_forget_end(&f);
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

/* Delete the instances of nodes (by their ids, "ZONE/NAME") and wait until
 * they are gone. */
static int gcp_delete_nodes(struct gcp_ctx *c, const struct gcp_names *nm,
			    const struct provider_node *nodes, size_t n,
			    char *err, size_t errlen)
{
	struct gcp_list l = {.v = calloc(n ? n : 1, sizeof(*l.v))};
	int rc;

	if (!l.v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const char *id = nodes[i].instance_id, *slash = strchr(id, '/');

		if (!slash)
			continue;
		snprintf(l.v[l.n].zone, sizeof(l.v[l.n].zone), "%.*s",
			 (int)(slash - id), id);
		snprintf(l.v[l.n].name, sizeof(l.v[l.n].name), "%s", slash + 1);
		l.n++;
	}
	rc = gcp_delete_instances(c, nm, &l, NULL, err, errlen);
	free(l.v);
	return rc;
}

static int gcp_terminate(struct provider *p, struct provider_batch *b)
{
	struct gcp_provider *gp = gcp_of(p);
	struct gcp_forget f;
	bool recorded = false;
	struct gcp_names nm;
	struct gcp_ctx c;
	int rc;

	if (b->n == 0)
		return 0;
	gcp_forget_begin(&f, p->remote, b->nodes, b->n);
	for (size_t i = 0; i < b->n; i++)
		recorded |= *b->nodes[i].instance_id != '\0';
	gcp_names_fill(gp, &b->nodes[0], &nm);
	rc = gcp_ctx_get(gp, b, &c);
	/* A shrink: these ranks' instances only (a grow's are recorded
	 * before their ranks can be asked to go); the rules, the policy and
	 * the key stay with the cluster. */
	if (rc == 0 && b->resize) {
		rc = gcp_delete_nodes(&c, &nm, b->nodes, b->n, b->err,
				      sizeof(b->err));
		gcp_forget_end(&f);
		for (size_t i = 0; i < b->n; i++)
			b->results[i].rc = rc;
		return rc;
	}
	/* By label: also instances a crash left unrecorded. */
	if (rc == 0)
		rc = gcp_destroy(&c, &nm, b->err, sizeof(b->err));
	gcp_forget_end(&f);
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
	return remote_sig_one(p->remote, b, i);
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
 * lists a compute.instances.preempted operation for it. A list that fails
 * says no, which the cluster's log says. */
static bool gcp_preempted(struct gcp_ctx *c, struct provider_batch *b,
			  const char *id)
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
	if (gcp_api_list(c->api, url,
			 "operationType=\"compute.instances.preempted\"",
			 gcp_preempt_item, &pr, c->cancel, err,
			 sizeof(err)) < 0 &&
	    !pr.found && b->say) {
		char line[PROVIDER_ERR_MAX];

		snprintf(line, sizeof(line),
			 "%.200s: its zone's preemptions could not be listed "
			 "(%.500s): it is taken as stopped, not preempted",
			 id, err);
		b->say(b->say_ctx, line);
	}
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
	gcp_names_fill(gp, &b->nodes[0], &nm);
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
				spot && gcp_preempted(&c, b,
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
	gcp_names_fill(gp, pn, &nm);
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

/* A firewall rule or placement policy whose description names a cluster
 * ("cclfs cluster LABEL token TOKEN") that is not one of this directory's:
 * reported as `what` (in `scope`'s region when given). */
static int gcp_stray_described(struct gcp_strays *s, const cJSON *item,
			       const char *what, const char *scope)
{
	char desc[256], name[GCP_NAME_MAX + 16], label[GCP_LABEL_MAX],
		token[48], handle[72], line[600], where[128] = "";

	gcp_copy_string(item, "description", desc, sizeof(desc));
	gcp_copy_string(item, "name", name, sizeof(name));
	if (sscanf(desc, "cclfs cluster %63s token %47s", label, token) != 2)
		return 0;
	if (gcp_label_decode(label, handle, sizeof(handle)))
		snprintf(handle, sizeof(handle), "%s", label);
	if (s->known(s->ctx, handle, token))
		return 0;
	if (scope)
		snprintf(where, sizeof(where), " (%.100s)", gcp_short(scope));
	snprintf(line, sizeof(line),
		 "gcp: %s %.80s%s is of cluster %.64s (token %.40s) but "
		 "belongs to no cluster of this state directory; it was left "
		 "alone",
		 what, name, where, handle, token);
	s->report(s->ctx, line);
	return 0;
}

static int gcp_stray_rule(void *ctx, const cJSON *item, const char *scope)
{
	(void)scope;
	return gcp_stray_described(ctx, item, "firewall rule", NULL);
}

static int gcp_stray_policy(void *ctx, const cJSON *item, const char *scope)
{
	return gcp_stray_described(ctx, item, "placement policy", scope);
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
	snprintf(url, sizeof(url), "projects/%s/aggregated/resourcePolicies",
		 c.project);
	if (rc == 0)
		rc = gcp_api_list(c.api, url, "name:cclfs-*", gcp_stray_policy,
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
		PROVIDER_HAS_CONNECTIONS | PROVIDER_FINDS_STRAYS |
		PROVIDER_CAN_RESIZE,
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
