/* The hosts provider: machines you already have, reached over SSH, listed
 * in cclfs.conf ([hosts] defaults and one [hosts.NAME] per machine). A
 * deploy takes free hosts; no two live clusters ever hold the same one. */
#ifndef CCLFS_PROVIDERS_HOSTS_H
#define CCLFS_PROVIDERS_HOSTS_H

#include "providers/provider.h"

#include <limits.h>
#include <stddef.h>

struct hosts_host {
	char name[65];
	char address[256];
	int port;
	char user[64];		/* "": the [hosts] user, else the caller's */
	char keyfile[PATH_MAX]; /* "": the [hosts] keyfile, else agent/~/.ssh */
	char type[64];		/* instance type name ("host" by default) */
	double vcpus, memory_bytes, accelerators; /* NAN when not given */
	char accelerator[64]; /* accelerator type name, or "" */
	double price;	      /* USD per hour, for chargeback (0) */
};

struct hosts_settings {
	char user[64];
	char keyfile[PATH_MAX];
	char known_hosts[PATH_MAX]; /* another known-hosts file, or "" */
	char own_hosts[PATH_MAX];   /* STATEDIR/known_hosts */
	int record_new;		    /* accept and record unknown host keys */
	int connect_timeout_ms;
	int command_timeout_ms; /* <= 0: none */
	int keepalive_s;
};

/* Open the provider over `n` hosts (copied). */
struct provider *hosts_provider_open(const struct hosts_host *hosts, size_t n,
				     const struct hosts_settings *s, char *err,
				     size_t errlen);

#endif
