#!/usr/bin/env bats
# Everything survives: unmount and mount again, and a kill -9 of the daemon
# followed by fusermount3 -u and a new mount, show the same tree.

load helpers

setup() {
	cclfs_setup
}

teardown() {
	cclfs_teardown
}

# A few contracts with values at both levels, an error and a resolution.
populate() {
	mkdir "$MNT/contracts/alpha" "$MNT/contracts/beta.2" "$MNT/contracts/gamma_3"
	echo 'atleast 16G' >"$MNT/contracts/alpha/node_memory_size"
	echo 4 >"$MNT/contracts/alpha/node_count"
	echo managerworkers >"$MNT/contracts/beta.2/cluster_type"
	echo 'atmost 64G' >"$MNT/contracts/beta.2/worker/node_memory_size"
	echo 'ubuntu' >"$MNT/contracts/beta.2/config/user"
	echo cheapest >"$MNT/contracts/beta.2/config/resolve_policy"
	echo 'atleast 1' >"$MNT/contracts/gamma_3/node_vcpus_count"
	echo local >"$MNT/contracts/gamma_3/node_provider"
	touch "$MNT/contracts/gamma_3/resolve"
	! echo nonsense >"$MNT/contracts/alpha/node_count"
}

# Everything a user can read, with sizes and modification times.
snapshot() {
	(cd "$MNT" && find contracts -print0 | sort -z |
		xargs -0 stat -c '%n %F %a %s %Y' &&
		find contracts -type f -print0 | sort -z | xargs -0 tail -v -n +1)
}

@test "unmount and mount again shows the same tree, values, errors and times" {
	populate
	before=$(snapshot)
	[ -n "$before" ]
	[[ "$before" == *"atleast 16G"* ]]
	cclfs_unmount
	cclfs_mount
	after=$(snapshot)
	diff <(echo "$before") <(echo "$after")
	[ "$(cat "$MNT/contracts/alpha/node_count")" = 4 ]
	[[ "$(cat "$MNT/contracts/alpha/error")" == "contracts/alpha/node_count: \"nonsense\""* ]]
	[ "$(cut -f1-3 "$MNT/contracts/gamma_3/resolution")" = "$(printf 'node\tlocal\tlocal')" ]
}

@test "kill -9, fusermount3 -u and mount again shows the same tree" {
	populate
	before=$(snapshot)
	cclfs_crash
	! cclfs_is_mounted
	cclfs_mount
	after=$(snapshot)
	diff <(echo "$before") <(echo "$after")
}

@test "a value is durable as soon as the write returns, even across kill -9" {
	mkdir "$MNT/contracts/c"
	for i in $(seq 1 20); do
		echo "$i" >"$MNT/contracts/c/node_count"
	done
	echo 'just 6' >"$MNT/contracts/c/node_vcpus_count"
	cclfs_crash
	cclfs_mount
	[ "$(cat "$MNT/contracts/c/node_count")" = 20 ]
	[ "$(cat "$MNT/contracts/c/node_vcpus_count")" = "just 6" ]
}

@test "removed contracts and reset values stay removed after a crash" {
	populate
	rm -r "$MNT/contracts/alpha"
	rm "$MNT/contracts/beta.2/worker/node_memory_size"
	cclfs_crash
	cclfs_mount
	[ ! -e "$MNT/contracts/alpha" ]
	[ "$(ls "$MNT/contracts")" = "$(printf 'beta.2\ngamma_3')" ]
	[ ! -s "$MNT/contracts/beta.2/worker/node_memory_size" ]
	[ "$(cat "$MNT/contracts/beta.2/cluster_type")" = ManagerWorkers ]
}

@test "changing an assumption clears the stored resolution, across a remount too" {
	populate
	[ -s "$MNT/contracts/gamma_3/resolution" ]
	echo 'atleast 1G' >"$MNT/contracts/gamma_3/node_memory_size"
	[ ! -s "$MNT/contracts/gamma_3/resolution" ]
	cclfs_unmount
	cclfs_mount
	[ ! -s "$MNT/contracts/gamma_3/resolution" ]
}
