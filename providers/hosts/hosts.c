/* The hosts provider: machines you already have, reached over SSH. A deploy
 * takes free hosts of the resolved type (never one another live cluster
 * holds); commands run in their own session (setsid) marked with the node,
 * so interrupt, resume, restart and terminate find them on the host. */
#include "providers/hosts/hosts.h"

#include "providers/hosts/hosts_conf.h"
#include "providers/provider_conf.h"
#include "providers/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOSTS_KEY_MAX 96

extern const struct provider_entry provider_hosts;

struct hosts_provider {
	struct provider base;
	pthread_mutex_t lock;
	struct hosts_host *hosts;
	char (*held)[HOSTS_KEY_MAX]; /* per host: "HANDLE/RANK" or "" */
	size_t n;
	struct hosts_settings s;
};

static void hosts_key(const char *handle, int rank, char *out)
{
	snprintf(out, HOSTS_KEY_MAX, "%s/%d", handle, rank);
}

static struct hosts_provider *hosts_of(struct provider *p)
{
	return (struct hosts_provider *)p;
}

/* The host a node holds (lock held); -1 when none. */
static long hosts_held_by(const struct hosts_provider *hp, const char *handle,
			  int rank)
{
	char key[HOSTS_KEY_MAX];

	hosts_key(handle, rank, key);
	for (size_t i = 0; i < hp->n; i++)
		if (strcmp(hp->held[i], key) == 0)
			return (long)i;
	return -1;
}

static long hosts_by_name(const struct hosts_provider *hp, const char *name)
{
	for (size_t i = 0; i < hp->n; i++)
		if (strcmp(hp->hosts[i].name, name) == 0)
			return (long)i;
	return -1;
}

static void hosts_default_user(char *out, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
		snprintf(out, len, "%s", pw.pw_name);
	else
		snprintf(out, len, "root");
}

/* The node's connection parameters, from the node (the contract's
 * config), the host's entry, then [hosts]. */
static int hosts_params(void *ctx, const struct provider_node *pn, int rank,
			struct ssh_params *sp, char *err, size_t errlen)
{
	struct hosts_provider *hp = ctx;
	const struct hosts_host *h;
	long host;

	pthread_mutex_lock(&hp->lock);
	host = hosts_held_by(hp, pn->handle, rank);
	pthread_mutex_unlock(&hp->lock);
	if (host < 0) {
		snprintf(err, errlen, "node %d of cluster %s holds no host",
			 rank, pn->handle);
		return -ENOENT;
	}
	h = &hp->hosts[host];
	snprintf(sp->host, sizeof(sp->host), "%s", h->address);
	sp->port = h->port > 0 ? h->port : 22;
	if (*pn->user)
		snprintf(sp->user, sizeof(sp->user), "%s", pn->user);
	else if (*h->user)
		snprintf(sp->user, sizeof(sp->user), "%s", h->user);
	else if (*hp->s.user)
		snprintf(sp->user, sizeof(sp->user), "%s", hp->s.user);
	else
		hosts_default_user(sp->user, sizeof(sp->user));
	if (*pn->keyfile)
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", pn->keyfile);
	else if (*h->keyfile)
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", h->keyfile);
	else
		snprintf(sp->keyfile, sizeof(sp->keyfile), "%s", hp->s.keyfile);
	snprintf(sp->known_hosts, sizeof(sp->known_hosts), "%s",
		 hp->s.known_hosts);
	snprintf(sp->own_hosts, sizeof(sp->own_hosts), "%s", hp->s.own_hosts);
	sp->record_new = hp->s.record_new != 0;
	sp->connect_timeout_ms = hp->s.connect_timeout_ms;
	sp->keepalive_s = hp->s.keepalive_s;
	return 0;
}

/* A signal to what node i started; a node never created has nothing. */
static int hosts_signal_one(struct provider *p, struct provider_batch *b,
			    size_t i, const char *sig)
{
	if (!*b->nodes[i].instance_id)
		return 0;
	return remote_signal(p->remote, &b->nodes[i], sig, b->cancel,
			     b->results[i].msg, sizeof(b->results[i].msg));
}

static int hosts_stop_one(struct provider *p, struct provider_batch *b,
			  size_t i)
{
	return hosts_signal_one(p, b, i, "STOP");
}

static int hosts_start_one(struct provider *p, struct provider_batch *b,
			   size_t i)
{
	return hosts_signal_one(p, b, i, "CONT");
}

static int hosts_sig_one(struct provider *p, struct provider_batch *b, size_t i)
{
	return remote_sig_one(p->remote, b, i);
}

/* Take a free host of the node's type (lock held). */
static int hosts_take(struct hosts_provider *hp, struct provider_node *pn,
		      char *err, size_t errlen)
{
	char key[HOSTS_KEY_MAX], name[16];
	size_t total = 0;
	long h = -1;

	hosts_key(pn->handle, pn->rank, key);
	if (*pn->instance_id) {
		h = hosts_by_name(hp, pn->instance_id);
		if (h < 0) {
			snprintf(err, errlen,
				 "host %s is no longer in cclfs.conf",
				 pn->instance_id);
			return -ENOENT;
		}
		if (*hp->held[h] && strcmp(hp->held[h], key) != 0) {
			snprintf(err, errlen, "host %s is held by %s",
				 pn->instance_id, hp->held[h]);
			return -EBUSY;
		}
	} else {
		for (size_t i = 0; i < hp->n; i++) {
			if (strcmp(hp->hosts[i].type, pn->instance_type) != 0)
				continue;
			total++;
			if (!*hp->held[i] && h < 0)
				h = (long)i;
		}
		if (h < 0) {
			snprintf(err, errlen,
				 "no free host of type %s: all %zu hosts of "
				 "that type in cclfs.conf are held by other "
				 "clusters",
				 pn->instance_type, total);
			return -EBUSY;
		}
	}
	snprintf(hp->held[h], HOSTS_KEY_MAX, "%s", key);
	snprintf(pn->instance_id, sizeof(pn->instance_id), "%s",
		 hp->hosts[h].name);
	snprintf(pn->address, sizeof(pn->address), "%.*s",
		 (int)sizeof(pn->address) - 1, hp->hosts[h].address);
	if (pn->rank < 0)
		snprintf(name, sizeof(name), "manager");
	else
		snprintf(name, sizeof(name), "%d", pn->rank);
	snprintf(pn->workdir, sizeof(pn->workdir), ".cclfs/%s/%s", pn->handle,
		 name);
	return 0;
}

static int hosts_create(struct provider *p, struct provider_batch *b)
{
	struct hosts_provider *hp = hosts_of(p);
	int rc = 0;

	pthread_mutex_lock(&hp->lock);
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		rc = hosts_take(hp, &b->nodes[i], b->err, sizeof(b->err));
		b->results[i].rc = rc;
	}
	pthread_mutex_unlock(&hp->lock);
	/* Connect to every host at once and make the working directory. */
	if (rc == 0)
		rc = remote_mkdirs(p->remote, b->nodes, b->n, b->cancel, b->err,
				   sizeof(b->err));
	return rc;
}

static int hosts_terminate_one(struct provider *p, struct provider_batch *b,
			       size_t i)
{
	struct hosts_provider *hp = hosts_of(p);
	const struct provider_node *node = &b->nodes[i];
	char *err = b->results[i].msg;
	size_t errlen = sizeof(b->results[i].msg);
	long h;

	pthread_mutex_lock(&hp->lock);
	h = hosts_held_by(hp, node->handle, node->rank);
	pthread_mutex_unlock(&hp->lock);
	if (h < 0)
		return 0; /* never took a host, or freed already */
	if (remote_cleanup(p->remote, node, b->cancel, err, errlen)) {
		/* The host is freed all the same: what cclfs started there
		 * cannot run on if the host is unreachable; the log tells
		 * what was left undone. */
		char why[SSH_ERR_MAX];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen,
			 "host %.64s was freed without cleaning up its "
			 "working directory %.160s: %.200s",
			 node->instance_id, node->workdir, why);
	}
	remote_forget(p->remote, node->handle, node->rank);
	pthread_mutex_lock(&hp->lock);
	hp->held[h][0] = '\0';
	pthread_mutex_unlock(&hp->lock);
	return 0;
}

static int hosts_describe_one(struct provider *p, struct provider_batch *b,
			      size_t i)
{
	struct hosts_provider *hp = hosts_of(p);
	const struct provider_node *node = &b->nodes[i];
	enum provider_state *state = &b->results[i].state;

	pthread_mutex_lock(&hp->lock);
	*state = hosts_held_by(hp, node->handle, node->rank) >= 0
			 ? PROVIDER_NODE_RUNNING
			 : PROVIDER_NODE_GONE;
	pthread_mutex_unlock(&hp->lock);
	return 0;
}

static int hosts_run(struct provider *p, const struct provider_node *node,
		     struct provider_run *run, char *err, size_t errlen)
{
	return remote_run(p->remote, node, run, err, errlen);
}

static void hosts_attach(struct provider *p, const struct provider_node *node)
{
	struct hosts_provider *hp = hosts_of(p);
	long h;

	pthread_mutex_lock(&hp->lock);
	h = hosts_by_name(hp, node->instance_id);
	if (h >= 0 && !*hp->held[h])
		hosts_key(node->handle, node->rank, hp->held[h]);
	pthread_mutex_unlock(&hp->lock);
}

static int hosts_reach(struct provider *p, const struct provider_node *node,
		       char *buf, size_t len)
{
	return remote_reach(p->remote, node, buf, len);
}

static void hosts_close(struct provider *p)
{
	struct hosts_provider *hp = hosts_of(p);

	remote_free(p->remote);
	pthread_mutex_destroy(&hp->lock);
	free(hp->hosts);
	free(hp->held);
	free(hp);
}

#define HOSTS_EACH(name)                                                       \
	static int name(struct provider *p, struct provider_batch *b)          \
	{                                                                      \
		return provider_each(p, b, name##_one);                        \
	}
HOSTS_EACH(hosts_stop)
HOSTS_EACH(hosts_start)
HOSTS_EACH(hosts_sig)
HOSTS_EACH(hosts_terminate)
HOSTS_EACH(hosts_describe)

static const struct provider_ops hosts_ops = {
	.caps = PROVIDER_CAN_STOP | PROVIDER_NEEDS_PREPARE |
		PROVIDER_HAS_FILES | PROVIDER_HAS_CONNECTIONS |
		PROVIDER_CAN_RESIZE,
	.files = &remote_file_ops,
	.act =
		{
			[PROVIDER_CREATE] = hosts_create,
			[PROVIDER_STOP] = hosts_stop,
			[PROVIDER_START] = hosts_start,
			[PROVIDER_TERMINATE] = hosts_terminate,
			[PROVIDER_SIGNAL] = hosts_sig,
			[PROVIDER_PREPARE] = remote_prepare,
			[PROVIDER_DESCRIBE] = hosts_describe,
		},
	.run = hosts_run,
	.attach = hosts_attach,
	.reach = hosts_reach,
	.close = hosts_close,
};

struct provider *hosts_provider_open(const struct hosts_host *hosts, size_t n,
				     const struct hosts_settings *s, char *err,
				     size_t errlen)
{
	struct hosts_provider *hp = calloc(1, sizeof(*hp));

	if (hp) {
		hp->hosts = calloc(n ? n : 1, sizeof(*hp->hosts));
		hp->held = calloc(n ? n : 1, sizeof(*hp->held));
	}
	if (!hp || !hp->hosts || !hp->held) {
		if (hp) {
			free(hp->hosts);
			free(hp->held);
		}
		free(hp);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (n)
		memcpy(hp->hosts, hosts, n * sizeof(*hosts));
	hp->n = n;
	hp->s = *s;
	hp->base.ops = &hosts_ops;
	hp->base.entry = &provider_hosts;
	pthread_mutex_init(&hp->lock, NULL);
	hp->base.remote = remote_new(&hp->base, hosts_params, hp,
				     hp->s.command_timeout_ms);
	if (!hp->base.remote) {
		pthread_mutex_destroy(&hp->lock);
		free(hp->hosts);
		free(hp->held);
		free(hp);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return &hp->base;
}

/* Only when cclfs.conf lists hosts. */
static struct provider *hosts_open(const struct config *conf,
				   const char *statedir, char *err,
				   size_t errlen)
{
	struct hosts_host *hosts;
	struct hosts_settings s;
	struct provider *p;
	size_t n;

	err[0] = '\0';
	if (hostsconf_read(conf, statedir, &hosts, &n, &s, err, errlen))
		return NULL;
	if (n == 0) {
		free(hosts);
		return NULL;
	}
	p = hosts_provider_open(hosts, n, &s, err, errlen);
	free(hosts);
	return p;
}

/* One type per host type of cclfs.conf: what every host of that type has
 * at least (so a resolution never promises more). */
static double hosts_min(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}

static int hosts_types(const struct config *conf, struct provider_type **out,
		       size_t *count, char *err, size_t errlen)
{
	struct hosts_host *hosts;
	struct hosts_settings s;
	struct provider_type *v;
	size_t n, m = 0;

	*out = NULL;
	*count = 0;
	if (hostsconf_read(conf, "", &hosts, &n, &s, err, errlen))
		return -1;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		free(hosts);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct provider_type *t = NULL;

		for (size_t k = 0; k < m && !t; k++)
			if (strcmp(v[k].name, hosts[i].type) == 0)
				t = &v[k];
		if (!t) {
			t = &v[m++];
			snprintf(t->name, sizeof(t->name), "%s", hosts[i].type);
			t->vcpus = hosts[i].vcpus;
			t->memory_bytes = hosts[i].memory_bytes;
			t->accelerators = hosts[i].accelerators;
			snprintf(t->accelerator, sizeof(t->accelerator), "%s",
				 hosts[i].accelerator);
			snprintf(t->origin, sizeof(t->origin),
				 "%.4000s: [hosts.%s] accelerator", conf->path,
				 hosts[i].name);
			t->price = hosts[i].price;
			continue;
		}
		/* A type is priced at its dearest machine: a cluster never
		 * costs more than its price says. */
		if (hosts[i].price > t->price)
			t->price = hosts[i].price;
		t->vcpus = hosts_min(t->vcpus, hosts[i].vcpus);
		t->memory_bytes =
			hosts_min(t->memory_bytes, hosts[i].memory_bytes);
		t->accelerators =
			hosts_min(t->accelerators, hosts[i].accelerators);
		if (strcmp(t->accelerator, hosts[i].accelerator) != 0)
			t->accelerator[0] = '\0';
	}
	free(hosts);
	*out = v;
	*count = m;
	return 0;
}

const struct provider_entry provider_hosts = {
	.name = "hosts",
	.platform_type = "OnPremises",
	.section = "hosts",
	.has_items = true,
	.open = hosts_open,
	.types = hosts_types,
};
