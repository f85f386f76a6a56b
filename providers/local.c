/* The local provider: nodes are working directories and process groups on
 * this machine. This part detects the machine's features, which make up
 * the one instance type, `local`, that the provider offers. */
#include "providers/local.h"

#include <unistd.h>

int local_detect(struct local_features *out)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);

	out->vcpus = cpus > 0 ? (double)cpus : 1;
	out->memory_bytes =
		pages > 0 && page > 0 ? (double)pages * (double)page : 0;
	return 0;
}
