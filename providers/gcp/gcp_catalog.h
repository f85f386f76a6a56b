/* The gcp provider's catalog refresh: the machine types and accelerator
 * types of every zone (Compute's aggregatedLists) and their on-demand and
 * spot prices from the Cloud Billing Catalog's Compute SKUs, handed to the
 * catalog's sink. */
#ifndef CCLFS_PROVIDERS_GCP_CATALOG_H
#define CCLFS_PROVIDERS_GCP_CATALOG_H

#include "providers/gcp/gcp_api.h"
#include "providers/provider.h"

#include <stddef.h>

struct cancel;

#define GCP_BILLING_DEFAULT "https://cloudbilling.googleapis.com/v1/"

/* Refresh with api's project and credentials. billing_url: the Cloud
 * Billing API's base (GCP_BILLING_DEFAULT, or a test's); billing_key: an
 * API key, sent as ?key= without the Bearer token, or "" (or NULL) for the
 * token of api's credentials. The prices failing is a note (the catalog's
 * are kept), the machine types failing fails the refresh; nothing reaches
 * the sink unless the refresh succeeds. 0, or -errno with err (one
 * sentence, never the key); see provider_ops.catalog_refresh. */
int gcp_catalog_refresh(struct gcp_api *api, const char *billing_url,
			const char *billing_key,
			const struct provider_catalog_sink *sink,
			struct cancel *cancel, char *err, size_t errlen);

#endif
