/* GCP credentials as Google's tools find them, the project they go with,
 * and the OAuth access tokens they give (cached in memory until shortly
 * before they expire). */
#ifndef CCLFS_PROVIDERS_GCP_AUTH_H
#define CCLFS_PROVIDERS_GCP_AUTH_H

#include <stddef.h>

struct cancel;

#define GCP_AUTH_ERR_MAX   1024
#define GCP_AUTH_TOKEN_MAX 4096
/* The scope asked for unless the caller names others. */
#define GCP_SCOPE_COMPUTE "https://www.googleapis.com/auth/compute"

/* Opaque: the credentials (the private key or refresh token are wiped
 * when it is closed) and the cached token; one mutex makes it safe to
 * share between threads. */
struct gcp_auth;

/* Find the credentials, in Google's order:
 *   1. GOOGLE_APPLICATION_CREDENTIALS, a key file (it must exist);
 *   2. $CLOUDSDK_CONFIG/application_default_credentials.json, else
 *      $HOME/.config/gcloud/application_default_credentials.json;
 *   3. the metadata server at GCE_METADATA_HOST (host[:port]), else at
 *      metadata.google.internal (asked once for the project id, with a short
 *      timeout).
 * A file is a "service_account" key or "authorized_user" credentials.
 * The project: project_conf (cclfs.conf's [gcp] project) when not empty,
 * else CLOUDSDK_CORE_PROJECT, else GOOGLE_CLOUD_PROJECT, else the file's
 * project_id, else (for the metadata server) its project-id. scopes:
 * space-separated OAuth scopes, NULL or "" for GCP_SCOPE_COMPUTE. NULL with err
 * saying where it looked when nothing is found or what is found is not usable.
 * No network call but the metadata server's. */
struct gcp_auth *gcp_auth_open(const char *project_conf, const char *scopes,
			       char *err, size_t errlen);

/* The project, "" when none is known. */
const char *gcp_auth_project(const struct gcp_auth *a);

/* Where the credentials come from, for messages: "the service account key
 * PATH", "the authorized user credentials PATH" or "the metadata server at
 * HOST". Never a secret. */
const char *gcp_auth_source(const struct gcp_auth *a);

/* An access token (the token alone, for "Authorization: Bearer TOKEN") in
 * out: the cached one while it has more than 5 minutes left, else a new one
 * from the token endpoint or the metadata server. 0, or -errno with err:
 * -EACCES when the endpoint refuses the credentials (Google's error and
 * description, not retried); -ECANCELED when cancel fires (it is checked
 * throughout, a wait never outlasts it); -ETIMEDOUT, -ECONNREFUSED,
 * -EHOSTUNREACH when the endpoint stays unreachable after a few tries;
 * -EPROTO for an answer that is not a token; -ENOBUFS when out is too
 * small. */
int gcp_auth_token(struct gcp_auth *a, struct cancel *cancel, char *out,
		   size_t outlen, char *err, size_t errlen);

/* Forget the cached token (the API answered 401 with it). */
void gcp_auth_forget_token(struct gcp_auth *a);

/* Wipe the secrets and free a (NULL: nothing). */
void gcp_auth_close(struct gcp_auth *a);

#endif
