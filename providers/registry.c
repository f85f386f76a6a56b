/* The provider registry: the one list of providers, how an action is carried
 * out through a provider's batch ops and capability flags, and how a node's
 * options read. */
#include "providers/provider.h"

#include "providers/cancel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct provider_entry provider_local;
extern const struct provider_entry provider_hosts;
extern const struct provider_entry provider_ec2;
extern const struct provider_entry provider_gcp;

_Thread_local const struct provider_caller *provider_caller_now;

const struct provider_entry *const provider_registry[] = {
	&provider_local, &provider_hosts, &provider_ec2, &provider_gcp, NULL,
};

const struct provider_entry *provider_entry_find(const char *name)
{
	for (size_t i = 0; provider_registry[i]; i++)
		if (strcmp(provider_registry[i]->name, name) == 0)
			return provider_registry[i];
	return NULL;
}

int provider_can(const struct provider *p, unsigned caps)
{
	return p && (p->ops->caps & caps) == caps;
}

/* What an action needs of a provider; 0: every provider does it. */
static const struct {
	unsigned caps;
	int without; /* the answer when the provider lacks them */
} provider_needs[PROVIDER_ACTIONS] = {
	[PROVIDER_STOP] = {PROVIDER_CAN_STOP, -EOPNOTSUPP},
	[PROVIDER_START] = {PROVIDER_CAN_STOP, -EOPNOTSUPP},
	[PROVIDER_PREPARE] = {PROVIDER_NEEDS_PREPARE, 0},
};

int provider_act(struct provider *p, enum provider_action a,
		 struct provider_batch *b)
{
	memset(b->results, 0, b->n * sizeof(*b->results));
	b->err[0] = '\0';
	if (!provider_can(p, provider_needs[a].caps)) {
		if (provider_needs[a].without)
			snprintf(b->err, sizeof(b->err),
				 "the %s provider cannot do that",
				 p ? p->entry->name : "(missing)");
		return provider_needs[a].without;
	}
	if (cancel_requested(b->cancel)) {
		snprintf(b->err, sizeof(b->err), "cancelled");
		return -ECANCELED;
	}
	return p->ops->act[a](p, b);
}

int provider_each(struct provider *p, struct provider_batch *b,
		  int (*fn)(struct provider *p, struct provider_batch *b,
			    size_t i))
{
	int first = 0;

	for (size_t i = 0; i < b->n; i++) {
		int rc;

		if (cancel_requested(b->cancel)) {
			/* The nodes not reached say so: a zero result would
			 * read as done. */
			for (size_t k = i; k < b->n; k++)
				b->results[k].rc = -ECANCELED;
			if (!first) {
				first = -ECANCELED;
				snprintf(b->err, sizeof(b->err), "cancelled");
			}
			break;
		}
		rc = fn(p, b, i);
		b->results[i].rc = rc;
		if (rc && !first) {
			first = rc;
			snprintf(b->err, sizeof(b->err), "%s",
				 b->results[i].msg);
		}
	}
	return first;
}

void provider_option(const char *options, const char *name, const char *def,
		     char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *p = options; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t l = end ? (size_t)(end - p) : strlen(p);

		if (l > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			snprintf(out, len, "%.*s", (int)(l - nl - 1),
				 p + nl + 1);
			if (*out)
				return;
		}
		p = end ? end + 1 : NULL;
	}
	snprintf(out, len, "%s", def);
}

void provider_market(const char *v, bool spot[2])
{
	spot[0] = spot[1] = false;
	while (v && *v) {
		size_t l = strcspn(v, " ,\t");
		const char *eq = memchr(v, '=', l);
		bool is_spot = l >= 4 && strncmp(v + l - 4, "spot", 4) == 0;

		if (!eq)
			spot[0] = spot[1] = is_spot;
		else if (strncmp(v, "manager=", 8) == 0)
			spot[0] = is_spot;
		else if (strncmp(v, "worker=", 7) == 0)
			spot[1] = is_spot;
		v += l;
		v += strspn(v, " ,\t");
	}
}
