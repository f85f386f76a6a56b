/* A gcp deploy: the image per role, one bulkInsert per role with a
 * requestId derived from the token and zone (recorded by the token itself, so
 * a restart sends the same), zone after zone while capacity lacks, the host
 * keys of the guest attributes, spot relaunches, and the ranks a resize adds
 * (one bulkInsert, named after the grow). */
#include "providers/gcp/gcp_priv.h"

#include "providers/cancel.h"
#include "providers/remote.h"
#include "providers/ssh.h"
#include "providers/sshkey.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * verifies them; an instance that publishes none is trusted on first use,
 * which the cluster's log says (one line for all of them, with the first
 * one's reason). */
static void gcp_hostkeys(struct gcp_provider *gp, struct gcp_ctx *c,
			 struct provider_batch *b,
			 const struct provider_node *nodes, size_t n)
{
	struct gcp_call *calls = calloc(n ? n : 1, sizeof(*calls));
	char first[600] = "";
	size_t unpinned = 0;

	if (!calls) {
		gcp_say(b,
			"host keys not read (out of memory): the %zu "
			"instances are trusted on first use",
			n);
		return;
	}
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
		size_t pinned = 0;

		snprintf(alias, sizeof(alias), "gce:%s", nodes[i].instance_id);
		snprintf(e, sizeof(e), "%s",
			 calls[i].rc ? calls[i].err
				     : "its guest attributes have no host key");
		if (calls[i].rc)
			v = NULL;
		cJSON_ArrayForEach(item, v)
		{
			gcp_copy_string(item, "key", type, sizeof(type));
			gcp_copy_string(item, "value", key, sizeof(key));
			if (*type && *key &&
			    ssh_hosts_pin(gp->s.own_hosts, alias, type, key, e,
					  sizeof(e)) == 0)
				pinned++;
		}
		if (!pinned && unpinned++ == 0)
			snprintf(first, sizeof(first), "%.200s: %.380s",
				 nodes[i].instance_id, e);
		gcp_call_clear(&calls[i]);
	}
	free(calls);
	if (unpinned)
		gcp_say(b,
			"host keys of %zu of %zu instances not recorded (%s): "
			"they are trusted on first use",
			unpinned, n, first);
}

/* Delete the instances a failed relaunch or grow made (by name). */
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

/* The zone the cluster's instances are in ("" when none is listed): ranks
 * added to it go there (its placement policy is of one zone). */
static void gcp_zone_of_cluster(struct gcp_ctx *c, struct gcp_names *nm)
{
	struct gcp_list l = {0};
	char err[GCP_ERR_MAX];

	if (gcp_instances(c, nm, &l, err, sizeof(err)) == 0)
		for (size_t i = 0; i < l.n && !*nm->zone; i++)
			if (strcmp(l.v[i].status, "STOPPING") != 0 &&
			    strcmp(l.v[i].status, "TERMINATED") != 0)
				snprintf(nm->zone, sizeof(nm->zone), "%s",
					 l.v[i].zone);
	free(l.v);
}

/* A grow: the new ranks (workers) named after the grow, in one bulkInsert
 * whose requestId derives from the grow's launch word, in the zone of the
 * cluster; the nodes have no instance yet (*old all ""). */
static int gcp_grow_names(struct gcp_ctx *c, struct gcp_names *nm,
			  struct provider_batch *b, struct gcp_role *roles,
			  size_t nroles, const char *grow,
			  char (**names)[GCP_NAME_MAX],
			  char (**old)[PROVIDER_ID_MAX + 1])
{
	char rid[GCP_UUID_MAX];

	if (!*b->launch || nroles != 1 || roles[0].manager) {
		snprintf(b->err, sizeof(b->err),
			 "a grow adds workers, under a launch word");
		return -EINVAL;
	}
	*names = calloc(b->n, sizeof(**names));
	*old = calloc(b->n, sizeof(**old));
	if (!*names || !*old) {
		snprintf(b->err, sizeof(b->err), "out of memory");
		return -ENOMEM;
	}
	gcp_request_id(nm->token, grow, rid, sizeof(rid));
	for (size_t i = 0; i < b->n; i++)
		snprintf((*names)[i], sizeof((*names)[i]), "%.40s-w-%04d-%.8s",
			 nm->prefix, b->nodes[i].rank + 1, rid);
	if (!*nm->zone)
		gcp_zone_of_cluster(c, nm);
	roles[0].names = *names;
	roles[0].replaces = grow;
	return 0;
}

int gcp_create(struct provider *p, struct provider_batch *b)
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
	char(*old)[PROVIDER_ID_MAX + 1] = NULL, grow[32];
	int rc;

	if (n == 0 || !roles) {
		free(roles);
		snprintf(err, errlen, "out of memory");
		return n ? -ENOMEM : 0;
	}
	gcp_names_fill(gp, &nodes[0], &nm);
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
	if (rc == 0 && b->resize) {
		snprintf(grow, sizeof(grow), "grow-%.16s", b->launch);
		rc = gcp_grow_names(&c, &nm, b, roles, nroles, grow, &names,
				    &old);
	} else if (rc == 0 && b->relaunch) {
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
		gcp_hostkeys(gp, &c, b, nodes, n);
		cloud_workdirs(nodes, n);
		for (size_t i = 0; i < n; i++)
			cloud_know(&gp->known, &nodes[i]);
		rc = gcp_reach_all(gp, nodes, n, c.cancel, err, errlen);
	}
	if (rc && rc != -ECANCELED && old) {
		/* A relaunch or grow that failed takes back only what it
		 * launched: the nodes keep their old ids. */
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
