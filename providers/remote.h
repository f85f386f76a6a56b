/* Nodes reached over SSH, shared by the providers whose machines are SSH
 * hosts (hosts, ec2): one connection per node, commands in a marked session
 * of their own, signals to the marked processes, files/ over SFTP. */
#ifndef CCLFS_PROVIDERS_REMOTE_H
#define CCLFS_PROVIDERS_REMOTE_H

#include "providers/provider.h"
#include "providers/ssh.h"

#include <stdbool.h>
#include <stddef.h>

struct remote;
struct cancel;

/* How to reach node `rank` of the cluster of `pn` (pn's own rank, or -1
 * for its manager): fills sp, or returns -errno with err. Called with the
 * remote's lock held: it must not call back into the remote. */
typedef int (*remote_params_fn)(void *ctx, const struct provider_node *pn,
				int rank, struct ssh_params *sp, char *err,
				size_t errlen);

/* `owner` is notified (its notify hook) when a node's connection comes up
 * or goes down; command_timeout_ms <= 0: none. */
struct remote *remote_new(struct provider *owner, remote_params_fn params,
			  void *ctx, int command_timeout_ms);
/* Close every connection (workers before the managers they go through). */
void remote_free(struct remote *r);

/* Connect to every node at once and make its working directory. 0, or
 * -errno with err naming the first node that failed. */
int remote_mkdirs(struct remote *r, const struct provider_node *nodes, size_t n,
		  struct cancel *cancel, char *err, size_t errlen);
/* The prepare op of a provider whose `remote` is set: the cluster's hostfile on
 * every node, and with mpi a fresh key of the cluster's (authorized on every
 * node, its private half beside the hostfile) and the host keys the connections
 * verified. */
int remote_prepare(struct provider *p, struct provider_batch *b);
/* Send SIG (STOP, CONT, KILL) to every process the node started. */
/* PROVIDER_SIGNAL for node i of a batch: b->sig sent to every process
 * cclfs started there, or with sig 0 whether one runs (results[i].busy). */
int remote_sig_one(struct remote *r, struct provider_batch *b, size_t i);
int remote_signal(struct remote *r, const struct provider_node *node,
		  const char *sig, struct cancel *cancel, char *err,
		  size_t errlen);
/* Kill what the node started and remove its working directory. */
int remote_cleanup(struct remote *r, const struct provider_node *node,
		   struct cancel *cancel, char *err, size_t errlen);
/* The node is gone or moved: its connection closes once unused, and the
 * next use connects afresh. */
void remote_forget(struct remote *r, const char *handle, int rank);
/* remote_forget of every node, their connections told to close all at
 * once before each is waited for: one wake and wait after the other took
 * a scheduling round each. */
void remote_forget_all(struct remote *r, const struct provider_node *nodes,
		       size_t n);
/* Run a command in the node's working directory (provider run op). */
int remote_run(struct remote *r, const struct provider_node *node,
	       struct provider_run *run, char *err, size_t errlen);
/* The connection's status (provider reach op); -1 when not connected. */
int remote_reach(struct remote *r, const struct provider_node *node, char *buf,
		 size_t len);

/* A node's connection, made on first use: a reference that remote_put
 * drops (the node's files stay reachable while it is held). NULL with
 * err when the node cannot be reached. */
struct remote_node *remote_get(struct remote *r, const struct provider_node *pn,
			       char *err, size_t errlen);
void remote_put(struct remote_node *nd);
struct ssh_conn *remote_conn(const struct remote_node *nd);
/* files/: the login's uid and gid on the node, as remote_set_ids last
 * recorded them (false: not yet). */
bool remote_ids(struct remote_node *nd, unsigned long *uid, unsigned long *gid);
void remote_set_ids(struct remote_node *nd, unsigned long uid,
		    unsigned long gid);

/* files/ of the nodes of a provider whose `remote` is set
 * (remote_files.c). */
extern const struct provider_file_ops remote_file_ops;

#endif
