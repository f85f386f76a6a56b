/* The parts the cloud providers share: a table of known nodes under its own
 * lock, jittered and cancellable sleeps, the SSH wait after boot, working
 * directories, and removing generated keys. */
#include "providers/cloud.h"

#include "providers/cancel.h"
#include "providers/remote.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void cloud_nodes_init(struct cloud_nodes *k)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
}

void cloud_nodes_free(struct cloud_nodes *k)
{
	pthread_mutex_destroy(&k->lock);
	free(k->v);
	k->v = NULL;
	k->n = k->cap = 0;
}

void cloud_know(struct cloud_nodes *k, const struct provider_node *pn)
{
	struct cloud_known *e = NULL;

	pthread_mutex_lock(&k->lock);
	for (size_t i = 0; i < k->n; i++)
		if (k->v[i].rank == pn->rank &&
		    strcmp(k->v[i].handle, pn->handle) == 0)
			e = &k->v[i];
	if (!e && k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct cloud_known *v = realloc(k->v, cap * sizeof(*v));

		if (v) {
			k->v = v;
			k->cap = cap;
		}
	}
	if (!e && k->n < k->cap)
		e = &k->v[k->n++];
	if (e) {
		snprintf(e->handle, sizeof(e->handle), "%s", pn->handle);
		e->rank = pn->rank;
		snprintf(e->id, sizeof(e->id), "%s", pn->instance_id);
		snprintf(e->address, sizeof(e->address), "%s", pn->address);
		provider_option(pn->options, "region", "", e->region,
				sizeof(e->region));
	}
	pthread_mutex_unlock(&k->lock);
}

int cloud_node_at(struct cloud_nodes *k, const struct provider_node *pn,
		  int rank, char *address, char *id, size_t len, char *err,
		  size_t errlen)
{
	address[0] = id[0] = '\0';
	if (rank == pn->rank) {
		snprintf(address, len, "%s", pn->address);
		snprintf(id, len, "%s", pn->instance_id);
	} else {
		pthread_mutex_lock(&k->lock);
		for (size_t i = 0; i < k->n; i++)
			if (k->v[i].rank == rank &&
			    strcmp(k->v[i].handle, pn->handle) == 0) {
				snprintf(address, len, "%s", k->v[i].address);
				snprintf(id, len, "%s", k->v[i].id);
			}
		pthread_mutex_unlock(&k->lock);
	}
	if (*address && *id)
		return 0;
	snprintf(err, errlen,
		 "node %d of cluster %s has no instance with an address", rank,
		 pn->handle);
	return -ENOENT;
}

int64_t cloud_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long cloud_jitter(long ms)
{
	uint32_t r = 0;

	if (ms <= 1 || getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return ms;
	return ms / 2 + (long)(r % (uint32_t)(ms / 2 + 1));
}

int cloud_sleep_ms(struct cancel *cancel, long ms, char *err, size_t errlen)
{
	if (cancel_sleep_ms(cancel, ms) == 0)
		return 0;
	snprintf(err, errlen, "cancelled");
	return -ECANCELED;
}

int cloud_reach_all(struct remote *r, struct provider_node *nodes, size_t n,
		    const struct cloud_poll *poll, struct cancel *cancel,
		    char *err, size_t errlen)
{
	int64_t deadline = cloud_now_ms() + poll->boot_ms;
	long delay = poll->first_ms > 0 ? poll->first_ms : 1000;

	for (;;) {
		int rc = remote_mkdirs(r, nodes, n, cancel, err, errlen);

		if (rc == 0 || cloud_now_ms() > deadline)
			return rc;
		if (cancel_requested(cancel)) {
			snprintf(err, errlen, "cancelled");
			return -ECANCELED;
		}
		for (size_t i = 0; i < n; i++)
			remote_forget(r, nodes[i].handle, nodes[i].rank);
		rc = cloud_sleep_ms(cancel, cloud_jitter(delay), err, errlen);
		if (rc)
			return rc;
		delay = delay * 2 > poll->max_ms ? poll->max_ms : delay * 2;
	}
}

void cloud_workdirs(struct provider_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (nodes[i].rank < 0)
			snprintf(nodes[i].workdir, sizeof(nodes[i].workdir),
				 ".cclfs/%s/manager", nodes[i].handle);
		else
			snprintf(nodes[i].workdir, sizeof(nodes[i].workdir),
				 ".cclfs/%s/%d", nodes[i].handle,
				 nodes[i].rank);
}

void cloud_key_remove(const char *path)
{
	char pub[PATH_MAX + 8];

	snprintf(pub, sizeof(pub), "%s.pub", path);
	unlink(path);
	unlink(pub);
}
