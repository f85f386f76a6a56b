#!/usr/bin/env bats
# Clusters that grow and shrink, on the local provider: clusters/H/node_count
# reads the size and takes a new one while the cluster runs (2 -> 5 -> 3,
# every node answering after each, the hostfile and info following, the MPI
# ring over the grown cluster); a write while another change is under way,
# or to a cluster that is not running, is EBUSY; a bad size EINVAL; the
# daemon killed during a resize finishes it at the next mount.

load helpers
load mpiring

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

setup() {
	cclfs_setup
	cd "$MNT"
}

teardown() {
	cclfs_kill_node_processes
	[ -z "${MPIBIN:-}" ] || rm -rf "$MPIBIN"
	cclfs_teardown
}

# deployed NAME COUNT [TYPE [PROCS]]: a running local cluster.
deployed() {
	mkdir "contracts/$1"
	echo local >"contracts/$1/node_provider"
	echo "$2" >"contracts/$1/node_count"
	[ -z "${3:-}" ] || echo "$3" >"contracts/$1/cluster_type"
	[ -z "${4:-}" ] || echo "$4" >"contracts/$1/node_process_count"
	echo "$1" >"contracts/$1/deploy"
	echo running >"clusters/$1/wait"
}

# Every node of cluster $1 answers an exec with its rank and the size.
all_answer() {
	local h=$1 n=$2 r expected=""
	echo 'echo $CCLFS_NODE/$CCLFS_NODE_COUNT' >"clusters/$h/exec"
	for ((r = 0; r < n; r++)); do
		expected+="$r: $r/$n"$'\n'
	done
	[ "$(cat "clusters/$h/exec")" = "${expected%$'\n'}" ]
}

@test "resize 2 -> 5 -> 3: nodes, exec on all, hostfile, info, log" {
	deployed r 2 PeerWorkers 2
	[ "$(cat clusters/r/node_count)" = 2 ]
	[ "$(stat -c %a clusters/r/node_count)" = 644 ]
	echo 5 >clusters/r/node_count
	[[ "$(cat clusters/r/state)" == resizing* || "$(cat clusters/r/state)" == running ]]
	echo running >clusters/r/wait
	[ "$(cat clusters/r/node_count)" = 5 ]
	[ "$(ls clusters/r/nodes | sort -n | tr '\n' ' ')" = "0 1 2 3 4 " ]
	all_answer r 5
	[ "$(cat clusters/r/hostfile)" = "localhost slots=10" ]
	grep -qx 'node_count: 5' clusters/r/info
	[ "$(ls "$STATE/nodes/r" | wc -l)" -eq 5 ]
	echo 3 >clusters/r/node_count
	echo running >clusters/r/wait
	[ "$(ls clusters/r/nodes | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	all_answer r 3
	[ "$(cat clusters/r/hostfile)" = "localhost slots=6" ]
	grep -qx 'node_count: 3' clusters/r/info
	# The removed nodes' directories and processes are gone.
	[ "$(ls "$STATE/nodes/r" | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	grep -q 'resize: from 2 to 5 nodes' clusters/r/log
	grep -q 'resized: 5 nodes' clusters/r/log
	grep -q 'resize: from 5 to 3 nodes' clusters/r/log
	grep -q 'resized: 3 nodes' clusters/r/log
	# The same size again changes nothing.
	echo 3 >clusters/r/node_count
	[ "$(cat clusters/r/state)" = running ]
	[ "$(grep -c 'resize:' clusters/r/log)" -eq 2 ]
	# A removed node's costs stop; the cluster's go on.
	[ "$(awk -F'\t' '$1 == "r" { print $5 }' "$MNT/costs")" = 3 ]
	echo terminated >clusters/r/state
	echo terminated >clusters/r/wait
}

@test "the MPI ring runs over a grown cluster" {
	ring_build
	deployed m 2 PeerWorkersMPI 1
	echo 4 >clusters/m/node_count
	echo running >clusters/m/wait
	[ "$(cat clusters/m/hostfile)" = "localhost slots=4" ]
	echo "$MPIBIN/ring" >clusters/m/mpiexec
	[ "$(sort -k2n clusters/m/mpi_stdout)" = "$(ring_expected 4)" ]
	[ "$(cat clusters/m/mpi_exit_status)" = 0 ]
}

@test "ManagerWorkers: node_count counts the workers" {
	deployed w 2 ManagerWorkers
	[ "$(ls clusters/w/nodes | sort | tr '\n' ' ')" = "0 1 manager " ]
	echo 3 >clusters/w/node_count
	echo running >clusters/w/wait
	[ "$(ls clusters/w/nodes | sort | tr '\n' ' ')" = "0 1 2 manager " ]
	grep -q 'resize: from 2 to 3 workers' clusters/w/log
	echo 1 >clusters/w/node_count
	echo running >clusters/w/wait
	[ "$(ls clusters/w/nodes | sort | tr '\n' ' ')" = "0 manager " ]
}

@test "refused: a bad size (EINVAL), a cluster not running or already resizing (EBUSY); nothing changes" {
	deployed b 2
	run_shell 'echo zero > clusters/b/node_count'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	[ "$(cat clusters/b/error)" = 'clusters/b/node_count: "zero" is not a whole number of at least 1; write one such as 4' ]
	run_shell 'echo 0 > clusters/b/node_count'
	[ "$status" -ne 0 ]
	[ "$(cat clusters/b/node_count)" = 2 ]
	echo interrupted >clusters/b/state
	echo interrupted >clusters/b/wait
	run_shell 'echo 4 > clusters/b/node_count'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[ "$(cat clusters/b/error)" = "clusters/b/node_count: the cluster is interrupted; it can be resized only when running" ]
	[ "$(cat clusters/b/node_count)" = 2 ]
	echo resumed >clusters/b/state
	echo running >clusters/b/wait
	# Two writes back to back: the second finds the first under way (a
	# grow of 62 local nodes takes a good part of a second, the second
	# write comes within a millisecond).
	run_shell 'echo 64 > clusters/b/node_count; echo 3 > clusters/b/node_count'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[ "$(cat clusters/b/error)" = "clusters/b/node_count: the cluster is resizing; it can be resized only when running" ]
	echo running >clusters/b/wait
	[ "$(cat clusters/b/node_count)" = 64 ]
	[ "$(ls clusters/b/nodes | wc -l)" -eq 64 ]
}

@test "the daemon killed during a resize: the next mount finishes it, no rank twice" {
	deployed k 2
	echo 40 >clusters/k/node_count
	cclfs_crash
	cclfs_mount
	cd "$MNT"
	echo running >clusters/k/wait
	[ "$(ls clusters/k/nodes | wc -l)" -eq 40 ]
	[ "$(ls "$STATE/nodes/k" | wc -l)" -eq 40 ]
	all_answer k 40
	echo 5 >clusters/k/node_count
	sleep 0.05
	cclfs_crash
	cclfs_mount
	cd "$MNT"
	echo running >clusters/k/wait
	[ "$(ls clusters/k/nodes | sort -n | tr '\n' ' ')" = "0 1 2 3 4 " ]
	[ "$(ls "$STATE/nodes/k" | wc -l)" -eq 5 ]
	all_answer k 5
}
