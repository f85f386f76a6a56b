/* Unit tests of the contract schema and value validation (lifecycle/contract).
 */
#include "check.h"
#include "lifecycle/contract.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int norm(const char *path, const char *in, char *out, size_t outlen,
		char *err, size_t errlen)
{
	int f = contract_field_by_path(path);

	if (f < 0)
		return -ENOENT;
	return contract_normalise(contract_field_at((size_t)f), in, strlen(in),
				  out, outlen, err, errlen);
}

static void check_ok(const char *path, const char *in, const char *want)
{
	char out[8192], err[512] = "";
	int rc = norm(path, in, out, sizeof(out), err, sizeof(err));

	CHECK(rc == 0);
	if (rc == 0)
		CHECK(strcmp(out, want) == 0);
	if (rc != 0 || strcmp(out, want) != 0)
		fprintf(stderr, "  %s <- \"%s\": rc %d, \"%s\" (%s)\n", path,
			in, rc, rc ? "" : out, err);
}

static void check_bad(const char *path, const char *in, int want_rc,
		      const char *want_in_msg)
{
	char out[8192], err[512] = "";
	int rc = norm(path, in, out, sizeof(out), err, sizeof(err));

	CHECK(rc == want_rc);
	CHECK(err[0] != '\0');
	CHECK(!want_in_msg || strstr(err, want_in_msg));
	if (rc != want_rc || (want_in_msg && !strstr(err, want_in_msg)))
		fprintf(stderr, "  %s <- \"%s\": rc %d, message \"%s\"\n", path,
			in, rc, err);
}

int main(void)
{
	char big[6000];

	/* The schema has every file of DESIGN §1. */
	static const char *const files[] = {"cluster_type",
					    "node_count",
					    "node_process_count",
					    "node_provider",
					    "cluster_locale",
					    "node_machinetype",
					    "node_memory_size",
					    "node_ecu_count",
					    "node_vcpus_count",
					    "accelerator_count",
					    "accelerator_memory",
					    "accelerator_type",
					    "accelerator_manufacturer",
					    "accelerator_architecture",
					    "accelerator",
					    "processor_manufacturer",
					    "processor_microarchitecture",
					    "processor",
					    "storage_type",
					    "storage_size",
					    "network_performance",
					    "resolve",
					    "resolution",
					    "candidates",
					    "deploy",
					    "error",
					    "manager/node_memory_size",
					    "worker/accelerator",
					    "config/user",
					    "config/sshflags",
					    "config/tunneled",
					    "config/exename",
					    "config/exeflags",
					    "config/directory",
					    "config/threadlevel",
					    "config/mpiflags",
					    "config/imageid",
					    "config/subnet_id",
					    "config/placement_group",
					    "config/security_group_id",
					    "config/resolve_policy",
					    "config/environment",
					    "config/network",
					    "config/gpu",
					    "config/budget",
					    "config/budget_action",
					    "config/idle_minutes",
					    "config/idle_action",
					    "config/wait_timeout"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		CHECK(contract_field_by_path(files[i]) >= 0);
		if (contract_field_by_path(files[i]) < 0)
			fprintf(stderr, "  missing %s\n", files[i]);
	}
	CHECK(contract_field_by_path("manager/resolve") < 0);
	CHECK(contract_field_by_path("nonsense") < 0);
	CHECK(contract_field_count() == 27 + 19 + 19 + 27);
	CHECK(contract_dir_find("manager") == CONTRACT_DIR_MANAGER);
	CHECK(contract_dir_find("clusters") == CONTRACT_DIR_CLUSTERS);
	CHECK(contract_dir_find("bogus") < 0);

	/* Names. */
	CHECK(contract_name_valid("c1"));
	CHECK(contract_name_valid("my.contract-2_x"));
	CHECK(!contract_name_valid(""));
	CHECK(!contract_name_valid("."));
	CHECK(!contract_name_valid(".."));
	CHECK(!contract_name_valid("a b"));
	CHECK(!contract_name_valid("a/b"));
	CHECK(!contract_name_valid("é"));
	memset(big, 'a', 64);
	big[64] = '\0';
	CHECK(contract_name_valid(big));
	big[64] = 'a';
	big[65] = '\0';
	CHECK(!contract_name_valid(big));

	/* cluster_type. */
	check_ok("cluster_type", "peerworkersmpi\n", "PeerWorkersMPI");
	check_ok("cluster_type", "  ManagerWorkers  ", "ManagerWorkers");
	check_ok("cluster_type", "\n", "PeerWorkers");
	check_bad("cluster_type", "Workers", -EINVAL, "\"Workers\"");

	/* Counts. */
	check_ok("node_count", "4\n", "4");
	check_ok("node_count", "007", "7");
	check_ok("node_count", "", "1");
	check_ok("node_process_count", "100000", "100000");
	check_bad("node_count", "0", -EINVAL, "at least 1");
	check_bad("node_count", "-3", -EINVAL, "\"-3\"");
	check_bad("node_count", "4.5", -EINVAL, "whole number");
	check_bad("node_count", "four", -EINVAL, "\"four\"");
	check_bad("node_count", "100001", -EINVAL, "100000");
	check_bad("node_count", "99999999999999999999999", -EINVAL, NULL);
	check_bad("node_count", "4\n5\n", -EINVAL, "several lines");

	/* Assumptions are normalised by the resolver's grammar. */
	check_ok("node_memory_size", "AtLeast 16g\n", "atleast 16G");
	check_ok("worker/node_vcpus_count", "8", "just 8");
	check_ok("network_performance", "10G..25G", "10G..25G");
	check_ok("accelerator_architecture", "Ada", "Ada");
	check_bad("node_memory_size", "lots", -EINVAL, "\"lots\"");

	/* config/. */
	check_ok("config/user", "ubuntu\n", "ubuntu");
	check_bad("config/user", "no body", -EINVAL, "\"no body\"");
	check_bad("config/user", "-x", -EINVAL, "user name");
	check_ok("config/tunneled", "Yes", "true");
	check_ok("config/tunneled", "0", "false");
	check_bad("config/tunneled", "maybe", -EINVAL, "true or false");
	check_ok("config/threadlevel", "MULTIPLE", "multiple");
	check_bad("config/threadlevel", "many", -EINVAL, "thread level");
	check_ok("config/resolve_policy", "Cheapest", "cheapest");
	check_bad("config/resolve_policy", "random", -EINVAL, "unique");
	check_ok("config/mpiflags", "--map-by node --bind-to core",
		 "--map-by node --bind-to core");
	check_bad("config/mpiflags", "a\x01z", -EINVAL, "control");
	check_ok("config/imageid", "ami-0abc123", "ami-0abc123");
	check_bad("config/imageid", "ami 1", -EINVAL, "identifier");
	/* The market, for every node or per role; the cloud's settings. */
	check_ok("config/market", "Spot\n", "spot");
	check_ok("config/market", "on-demand", "on-demand");
	check_ok("config/market", "Manager=on-demand,  worker=SPOT",
		 "manager=on-demand worker=spot");
	check_ok("config/market", "worker=spot", "worker=spot");
	check_bad("config/market", "cheap", -EINVAL,
		  "\"cheap\" is not a market");
	check_bad("config/market", "spot worker=spot", -EINVAL, "per role");
	check_bad("config/market", "spot on-demand", -EINVAL, "market");
	check_bad("config/market", "boss=spot", -EINVAL, "market");
	check_ok("config/ssh_cidr", "203.0.113.0/24", "203.0.113.0/24");
	/* Limits and waits: positive amounts, written back shortest. */
	check_ok("config/budget", "$7.50\n", "7.5");
	check_ok("config/budget", "25", "25");
	check_ok("config/budget", ".25", "0.25");
	check_ok("config/budget", "0.00001", "0.00001");
	check_ok("config/budget", "1e3", "1000");
	check_bad("config/budget", "0", -EINVAL, "US dollars");
	check_bad("config/budget", "-3", -EINVAL, "\"-3\"");
	check_bad("config/budget", "ten", -EINVAL, "US dollars");
	check_bad("config/budget", "5 USD", -EINVAL, "greater than 0");
	check_ok("config/idle_minutes", "30", "30");
	check_bad("config/idle_minutes", "nan", -EINVAL, "minutes");
	check_bad("config/idle_minutes", "inf", -EINVAL, "minutes");
	check_ok("config/wait_timeout", "600.0", "600");
	check_bad("config/wait_timeout", "1e400", -EINVAL, "seconds");
	check_bad("config/budget", "1e11", -EINVAL, "US dollars");
	check_bad("config/wait_timeout", "$5", -EINVAL, "seconds");
	check_ok("config/budget_action", "Terminated", "terminate");
	check_ok("config/idle_action", "interrupt", "interrupt");
	check_ok("config/idle_action", "", "");
	check_bad("config/idle_action", "stop", -EINVAL,
		  "write interrupt or terminate");
	check_ok("config/ssh_cidr", "0.0.0.0/0", "0.0.0.0/0");
	check_bad("config/ssh_cidr", "203.0.113.0", -EINVAL, "IPv4 network");
	check_bad("config/ssh_cidr", "300.0.0.0/8", -EINVAL, "IPv4 network");
	check_bad("config/ssh_cidr", "10.0.0.0/33", -EINVAL, "IPv4 network");
	check_ok("config/failover", "3", "3");
	check_bad("config/failover", "0", -EINVAL, "");
	check_ok("config/recover", "no", "false");
	check_ok("config/zone", "us-east-1c", "us-east-1c");
	CHECK(contract_field_at((size_t)contract_field_by_path("config/market"))
		      ->to_provider);
	CHECK(contract_field_at(
		      (size_t)contract_field_by_path("config/imageid"))
		      ->to_provider);
	CHECK(!contract_field_at(
		       (size_t)contract_field_by_path("config/environment"))
		       ->to_provider);

	/* config/environment: NAME=VALUE lines, each refusal naming its
	 * line. */
	check_ok("config/environment", "A=1\nB=two words\n",
		 "A=1\nB=two words");
	check_ok("config/environment",
		 "  # threads\n\n\tOMP_NUM_THREADS=4\r\n_X=a=b\nE=\n",
		 "OMP_NUM_THREADS=4\n_X=a=b\nE=");
	check_ok("config/environment", "\n", "");
	check_bad("config/environment", "A=1\nnovalue\n", -EINVAL,
		  "line 2, \"novalue\", is not NAME=VALUE");
	check_bad("config/environment", "1A=x", -EINVAL,
		  "line 1, \"1A=x\", does not start with a variable name");
	check_bad("config/environment", "A-B=x", -EINVAL, "line 1");
	check_bad("config/environment", "=x", -EINVAL, "variable name");
	check_bad("config/environment", "A=1\nCCLFS_NODE=3", -EINVAL,
		  "line 2, \"CCLFS_NODE=3\", sets a CCLFS_ variable");
	check_bad("config/environment", "A=\x01", -EINVAL, "control");
	{
		char out[64], err[256] = "";
		int f = contract_field_by_path("config/environment");

		CHECK(contract_normalise(contract_field_at((size_t)f),
					 "A=1\nB\0=2", 7, out, sizeof(out), err,
					 sizeof(err)) == -EINVAL);
		CHECK(strcmp(err, "line 2 contains a NUL byte") == 0);
	}
	CHECK(contract_env_name_valid("PATH", 4));
	CHECK(contract_env_name_valid("_a1", 3));
	CHECK(!contract_env_name_valid("1a", 2));
	CHECK(!contract_env_name_valid("", 0));

	/* Size limit and NUL bytes. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	check_bad("config/sshflags", big, -EFBIG, "4096");
	{
		char out[64], err[256];
		int f = contract_field_by_path("config/user");

		CHECK(contract_normalise(contract_field_at((size_t)f), "a\0b",
					 3, out, sizeof(out), err,
					 sizeof(err)) == -EINVAL);
	}

	return check_summary("contract");
}
