/* A cluster's resolution: its role lines read, and the move to the next
 * candidate (type, region) of its contract when the cloud has no capacity
 * for the one it resolved to. With the model locked. */
#ifndef CCLFS_LIFECYCLE_CLUSTER_RESOLUTION_H
#define CCLFS_LIFECYCLE_CLUSTER_RESOLUTION_H

#include <stddef.h>

struct model;
struct cluster;

/* Candidates a cheapest deploy moves on to after the resolved one. */
#define CLUSTER_FAILOVER_CANDIDATES 3

/* A role's line of a resolution: "ROLE\tPROVIDER\tTYPE\tPRICE\tREGION\t
 * ZONES\tMARKET" (a resolution stored before regions has the first four:
 * no region). 0, or -1 when it has no such line. */
int cluster_resolution_role(const char *resolution, const char *role,
			    char provider[16], char type[64], double *price,
			    char region[64]);

/* c found no capacity anywhere its provider looked (`why`): when its
 * contract resolves with cheapest and candidates are left, move it to the
 * next one of the same provider (types, region, price, nodes back to
 * creating), stored and logged; 0 then, the deploy goes on. -1 when there
 * is none to move to (the deploy fails as it would have). */
int cluster_failover(struct model *m, struct cluster *c, const char *why);

#endif
