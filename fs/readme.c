/* The README at the root of the mount: what the tree is and how to start. */
#include "fs/readme.h"

const char fsreadme_text[] =
	"cclfs: clusters of machines, driven with file operations.\n"
	"\n"
	"contracts/   one folder per cluster contract (mkdir to create one)\n"
	"clusters/    one folder per deployed cluster\n"
	"catalog/     the instance types resolution chooses from\n"
	"costs        what every cluster has cost so far\n"
	"\n"
	"Start here:\n"
	"  mkdir contracts/c1\n"
	"  echo 'atleast 1' > contracts/c1/node_vcpus_count\n"
	"  echo 4 > contracts/c1/node_count\n"
	"  touch contracts/c1/resolve && cat contracts/c1/resolution\n"
	"  cat contracts/c1/error      # why the last change was refused\n"
	"\n"
	"Each value file holds one value; an empty file means no assumption.\n"
	"Assumptions: 4 (or just 4), atleast 16G, atmost 256G, 16G..32G,\n"
	"or a type name such as t3.xlarge. rm resets a file to its default;\n"
	"rmdir contracts/NAME removes a contract. See cclfs(1).\n";

const size_t fsreadme_size = sizeof(fsreadme_text) - 1;
