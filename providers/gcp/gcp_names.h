/* What a cluster is called in Compute Engine: its handle as a label value
 * (reversibly encoded), the RFC 1035 names of its instances, firewall rules
 * and placement policy, its network tag, its requestIds, and the rank a name
 * carries. Pure: no I/O. */
#ifndef CCLFS_PROVIDERS_GCP_NAMES_H
#define CCLFS_PROVIDERS_GCP_NAMES_H

#include <stddef.h>

/* Label values are at most 63 of [a-z0-9_-]. */
#define GCP_LABEL_MAX 64
/* RFC 1035 names are at most 63 bytes. */
#define GCP_NAME_MAX 64
#define GCP_UUID_MAX 37

/* The handle ([A-Za-z0-9._-]{1,64}) as a label value: lowercase letters,
 * digits and '-' as they are, a capital X as "_x", '.' as "_-", '_' as
 * "__"; an encoding longer than 63 becomes "h-" and 16 hex digits of a hash
 * (not reversible). Returns 0, or -1 for a handle that is not one. */
int gcp_label_encode(const char *handle, char *out, size_t outlen);
/* The handle of a label value made by gcp_label_encode: 0, or -1 when it
 * is a hash or not an encoding. */
int gcp_label_decode(const char *label, char *out, size_t outlen);

/* The cluster's name prefix: "cclfs-SLUG-TOKEN8", SLUG the handle's
 * lowercase letters and digits (others as '-', at most 20): a valid start
 * of RFC 1035 names, the network tag and the firewall rules' names. */
void gcp_prefix(const char *handle, const char *token, char *out,
		size_t outlen);

/* A requestId (a UUID) derived from the cluster's token and what the call
 * does ("manager/us-central1-a"): the same call after a crash sends the
 * same one, so Compute Engine does it once. */
void gcp_request_id(const char *token, const char *what, char *out,
		    size_t outlen);

/* The rank an instance name of the cluster carries: PREFIX-m-N is the
 * manager (-1), PREFIX-w-N (optionally followed by "-SUFFIX") rank N - 1.
 * 0 with *rank, or -1 when the name is not one of the prefix's. */
int gcp_rank_of(const char *name, const char *prefix, int *rank);

/* The last element of a URL or path ("zones/us-central1-a" gives
 * "us-central1-a"). */
const char *gcp_short(const char *url);

#endif
