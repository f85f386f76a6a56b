/* The local provider: nodes are working directories and process groups on
 * this machine. This part detects the machine's features, which make up
 * the one instance type, `local`, that the provider offers. */
#include "providers/local/local.h"

#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The model named in one GPU's information file, as a type name. */
static void local_gpu_model(const char *dir, const char *gpu, char *out,
			    size_t outlen)
{
	char path[4096], line[256];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s/information", dir, gpu);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *v = line + 6;
		size_t n = 0;

		if (strncmp(line, "Model:", 6) != 0)
			continue;
		while (*v == ' ' || *v == '\t')
			v++;
		for (; *v && *v != '\n' && n + 1 < outlen; v++)
			out[n++] = isalnum((unsigned char)*v) ? *v : '_';
		while (n && out[n - 1] == '_')
			n--;
		out[n] = '\0';
		break;
	}
	fclose(f);
}

void local_detect_gpus(const char *dir, struct local_features *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool mixed = false;

	out->gpus = 0;
	out->gpu[0] = '\0';
	if (!d)
		return;
	while ((e = readdir(d))) {
		char model[sizeof(out->gpu)];

		if (e->d_name[0] == '.')
			continue;
		local_gpu_model(dir, e->d_name, model, sizeof(model));
		if (out->gpus == 0)
			memcpy(out->gpu, model, sizeof(model));
		else if (strcmp(out->gpu, model) != 0)
			mixed = true;
		out->gpus++;
	}
	closedir(d);
	if (mixed)
		out->gpu[0] = '\0';
}

int local_detect(struct local_features *out)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);

	out->vcpus = cpus > 0 ? (double)cpus : 1;
	out->memory_bytes =
		pages > 0 && page > 0 ? (double)pages * (double)page : 0;
	local_detect_gpus("/proc/driver/nvidia/gpus", out);
	return 0;
}
