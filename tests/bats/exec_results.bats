#!/usr/bin/env bats
# exec results are never wrong: a command holding a NUL byte is refused and
# nothing runs; a command (exec of a node, of the cluster, mpiexec) cut off
# by kill -9 of the daemon is recorded at the next mount as lost, with what
# it wrote, its processes ended and nothing left in the state directory;
# rmdir of a cluster leaves nothing of it under the state directory.

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

FIRST=141 # host k of a test listens on 127.0.1.(FIRST + k)
# Each host has a login directory of its own (see tests/sshd/testhosts.bash).
export TESTHOSTS_OWN_LOGIN=1

# mpirun refuses root unless told (tests only).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

setup() {
	cclfs_setup
	cd "$MNT"
}

teardown() {
	if [ -n "${HOSTS:-}" ]; then
		testhosts_stop "$HOSTS" || true
	fi
	cclfs_teardown
}

# deploy NAME NODES [CLUSTER_TYPE]: a local cluster of contract NAME, running.
deploy() {
	mkdir "contracts/$1"
	echo local >"contracts/$1/node_provider"
	echo "$2" >"contracts/$1/node_count"
	[ -z "${3:-}" ] || echo "$3" >"contracts/$1/cluster_type"
	echo "$1" >"contracts/$1/deploy"
	wait_state "$1" running
}

# The pids whose environment holds entry $1.
marked() {
	grep -lzxF "$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

# The live processes of node $2 of cluster $1 (what cclfs started there).
node_procs() {
	local id pid
	id=$(sed -n 's/^instance_id: //p' "$MNT/clusters/$1/nodes/$2/status")
	for pid in $(marked "CCLFS_INSTANCE=$id"); do
		pid_exited "$pid" || echo "$pid"
	done
}

# Hidden files in the cluster's directory under the state directory, but
# the spare output files exec recycles.
stranded() {
	ls -A "$STATE/clusters/$1" | grep '^\.' | grep -v '^\.[^.]*\.spare\.std\(out\|err\)$' || true
}

# Whether a temporary output of cluster $1 named like $2 (a glob) holds $3.
tmp_has() {
	local f
	for f in "$STATE/clusters/$1"/$2; do
		grep -qs -- "$3" "$f" && return 0
	done
	return 1
}

# Remount after a crash (kill -9) of the daemon.
crash_and_remount() {
	cd "$TESTDIR"
	cclfs_crash
	cclfs_mount
	cd "$MNT"
}

# Crash while the command written by background job $3 runs on node $2 of
# cluster $1, remount, and see its processes ended by the mount.
crash_during() {
	local procs pid
	procs=$(node_procs "$1" "$2")
	[ -n "$procs" ]
	crash_and_remount
	wait "$3" || true
	for pid in $procs; do
		wait_until 10 pid_exited "$pid"
	done
	[ -z "$(node_procs "$1" "$2")" ]
}

@test "a command with a NUL byte is refused with a sentence; nothing runs" {
	deploy h 2 PeerWorkersMPI
	echo 'echo first' >clusters/h/nodes/0/exec
	run_shell "printf 'echo A\\0; touch marker\\n' > clusters/h/nodes/0/exec"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	[ "$(cat clusters/h/error)" = "clusters/h/nodes/0/exec: the command contains a NUL byte (byte 7 of 22), which no shell command can hold; nothing was run" ]
	grep -q 'nodes/0/exec: the command contains a NUL byte' clusters/h/log
	[ ! -e clusters/h/nodes/0/files/marker ]
	[ ! -e "$STATE/nodes/h/0/marker" ]
	# The previous results stand.
	[ "$(cat clusters/h/nodes/0/stdout)" = first ]
	[ "$(cat clusters/h/nodes/0/exit_status)" = 0 ]
	# The same for the whole cluster and for mpiexec.
	run_shell "printf 'touch marker\\0\\n' > clusters/h/exec"
	[[ "$output" == *"Invalid argument"* ]]
	grep -q '^clusters/h/exec: the command contains a NUL byte' clusters/h/error
	run_shell "printf 'touch\\0 marker\\n' > clusters/h/mpiexec"
	[[ "$output" == *"Invalid argument"* ]]
	grep -q '^clusters/h/mpiexec: the command contains a NUL byte' clusters/h/error
	[ -z "$(ls -A clusters/h/nodes/0/files)" ]
	[ -z "$(ls -A clusters/h/nodes/1/files)" ]
	[ -z "$(cat clusters/h/mpi_exit_status)" ]
	echo true >clusters/h/exec
	[ -z "$(cat clusters/h/error)" ]
}

@test "kill -9 during a node's exec: lost at the next mount, its output kept, its processes ended" {
	deploy h 1
	echo 'echo first' >clusters/h/nodes/0/exec
	echo 'echo before; echo err-before >&2; sleep 30; echo done; exit 4' \
		>clusters/h/nodes/0/exec 2>/dev/null &
	writer=$!
	# Wait for what it writes before its sleep.
	wait_until 10 tmp_has h '.0.*.stdout' before
	wait_until 10 tmp_has h '.0.*.stderr' err-before
	crash_during h 0 "$writer"
	[ "$(cat clusters/h/nodes/0/exit_status)" = lost ]
	[ "$(cat clusters/h/nodes/0/stdout)" = before ]
	[ "$(cat clusters/h/nodes/0/stderr)" = err-before ]
	want='clusters/h/nodes/0/exec: "echo before; echo err-before >&2; sleep 30; echo done; exit..." was cut off by a restart of cclfs: exit_status reads lost, and stdout and stderr hold what it wrote before'
	[ "$(cat clusters/h/error)" = "$want" ]
	grep -qF "$want" clusters/h/log
	[ -z "$(stranded h)" ]
	# The next command works as always.
	echo 'echo after' >clusters/h/nodes/0/exec
	[ "$(cat clusters/h/nodes/0/stdout)" = after ]
	[ "$(cat clusters/h/nodes/0/exit_status)" = 0 ]
	[ -z "$(cat clusters/h/error)" ]
	# A clean remount changes nothing.
	cd "$TESTDIR"
	cclfs_unmount
	cclfs_mount
	cd "$MNT"
	[ "$(cat clusters/h/nodes/0/exit_status)" = 0 ]
	[ "$(cat clusters/h/nodes/0/stdout)" = after ]
	[ -z "$(stranded h)" ]
}

@test "kill -9 during the cluster's exec: every node's result lost, exec holds what they wrote" {
	deploy h 2
	echo 'echo first' >clusters/h/exec
	echo 'echo "before $CCLFS_NODE"; sleep 30' >clusters/h/exec 2>/dev/null &
	writer=$!
	wait_until 10 tmp_has h '.0.*.stdout' 'before 0'
	wait_until 10 tmp_has h '.1.*.stdout' 'before 1'
	crash_and_remount
	wait "$writer" || true
	[ -z "$(node_procs h 0)" ]
	[ -z "$(node_procs h 1)" ]
	[ "$(cat clusters/h/nodes/0/exit_status)" = lost ]
	[ "$(cat clusters/h/nodes/1/exit_status)" = lost ]
	[ "$(cat clusters/h/nodes/1/stdout)" = "before 1" ]
	[ "$(cat clusters/h/exec)" = "$(printf '0: before 0\n1: before 1')" ]
	grep -qF 'clusters/h/exec: "echo "before $CCLFS_NODE"; sleep 30" was cut off by a restart of cclfs on 2 of 2 nodes (0, 1): their exit_status reads lost' clusters/h/error
	[ -z "$(stranded h)" ]
	echo 'echo "after $CCLFS_NODE"' >clusters/h/exec
	[ "$(cat clusters/h/exec)" = "$(printf '0: after 0\n1: after 1')" ]
	[ "$(cat clusters/h/nodes/1/exit_status)" = 0 ]
}

@test "kill -9 during an exec on an sshd test host: lost at the next mount, what arrived kept" {
	HOSTS=$TESTDIR/hosts
	testhosts_start "$HOSTS" 1 "$FIRST"
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$HOSTS/id_ed25519\""
		echo "known_hosts = \"$HOSTS/known_hosts\""
		echo '[hosts.h0]'
		echo "address = \"127.0.1.$FIRST\""
	} >"$TESTDIR/cclfs.conf"
	cd "$TESTDIR"
	cclfs_unmount
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	mkdir contracts/r
	echo hosts >contracts/r/node_provider
	echo r >contracts/r/deploy
	wait_state r running
	echo 'echo first' >clusters/r/nodes/0/exec
	echo 'echo before; sleep 30; echo done' >clusters/r/nodes/0/exec 2>/dev/null &
	writer=$!
	wait_until 10 tmp_has r '.0.*.stdout' before
	cd "$TESTDIR"
	cclfs_crash
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	wait "$writer" || true
	[ "$(cat clusters/r/nodes/0/exit_status)" = lost ]
	[ "$(cat clusters/r/nodes/0/stdout)" = before ]
	grep -qF 'clusters/r/nodes/0/exec: "echo before; sleep 30; echo done" was cut off by a restart of cclfs' clusters/r/error
	[ -z "$(stranded r)" ]
	echo 'echo after' >clusters/r/nodes/0/exec
	[ "$(cat clusters/r/nodes/0/stdout)" = after ]
	[ "$(cat clusters/r/nodes/0/exit_status)" = 0 ]
	# What the lost command left running ends with the terminate.
	echo terminated >clusters/r/state
	wait_state r terminated
	[ -z "$(grep -lzxF CCLFS_INSTANCE=r/0 /proc/[0-9]*/environ 2>/dev/null)" ]
}

@test "kill -9 during mpiexec: mpi_exit_status lost, mpi_stdout kept, mpirun ended" {
	command -v mpirun >/dev/null || skip "Open MPI is not installed"
	deploy m 1 PeerWorkersMPI
	echo "sh -c 'echo before; sleep 30'" >clusters/m/mpiexec 2>/dev/null &
	writer=$!
	wait_until 20 tmp_has m '.mpi.*.stdout' before
	crash_during m 0 "$writer"
	[ "$(cat clusters/m/mpi_exit_status)" = lost ]
	[ "$(cat clusters/m/mpi_stdout)" = before ]
	grep -qF "clusters/m/mpiexec: \"sh -c 'echo before; sleep 30'\" was cut off by a restart of cclfs: mpi_exit_status reads lost" clusters/m/error
	grep -qF 'was cut off by a restart of cclfs' clusters/m/log
	[ -z "$(stranded m)" ]
	echo "sh -c 'echo after'" >clusters/m/mpiexec
	[ "$(cat clusters/m/mpi_stdout)" = after ]
	[ "$(cat clusters/m/mpi_exit_status)" = 0 ]
}

@test "rmdir of a cluster leaves nothing of it under the state directory" {
	listing() {
		find "$STATE" -mindepth 1 | grep -v -e '/state\.db' -e '^'"$STATE"'/clusters$' | sort
	}
	before=$(listing)
	deploy rmtest 2 PeerWorkersMPI
	for i in 1 2 3; do
		echo "echo run $i" >clusters/rmtest/nodes/0/exec
		echo "echo all $i" >clusters/rmtest/exec
	done
	exec 5<>clusters/rmtest/nodes/1/exec
	echo 'echo mine' >&5
	[ "$(cat <&5)" = mine ]
	exec 5>&-
	if command -v mpirun >/dev/null; then
		echo 'echo mpi' >clusters/rmtest/mpiexec
		[ "$(sort -u clusters/rmtest/mpi_stdout)" = mpi ]
	fi
	# Outputs are recycled through spare files: there is something to
	# remove.
	ls -A "$STATE/clusters/rmtest" | grep -q '^\.1\.spare\.stdout$'
	echo terminated >clusters/rmtest/state
	wait_state rmtest terminated
	rmdir clusters/rmtest
	[ ! -e "$STATE/clusters/rmtest" ]
	[ -z "$(find "$STATE" -name '*rmtest*')" ]
	[ "$(listing)" = "$before" ]
}
