#!/usr/bin/env bats
# MPI clusters: the ring and rank-sum programs of tests/mpi, compiled with
# mpicc, run through clusters/H/mpiexec on a local 4 x 2 cluster, on a
# 3-node PeerWorkersMPI cluster and on a 1+3 ManagerWorkers cluster of sshd
# test hosts in network namespaces; every line of their output is checked.
# Open MPI refuses root unless told: the allow-run-as-root variables are
# set here (and in the test hosts' sessions), never by cclfs.

load helpers
load mpiring
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TESTHOSTS_SETENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"

setup_file() {
	# The programs, where every test host sees them (one filesystem).
	MPIBIN=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-mpi.XXXXXX")
	export MPIBIN
	mpicc -Wall -Wextra -Werror -o "$MPIBIN/ring" "$BATS_TEST_DIRNAME/../mpi/ring.c"
	mpicc -Wall -Wextra -Werror -o "$MPIBIN/ranksum" "$BATS_TEST_DIRNAME/../mpi/ranksum.c"
	chmod 755 "$MPIBIN"
}

teardown_file() {
	rm -rf "$MPIBIN"
}

teardown() {
	if [ -n "${NETDIR:-}" ]; then
		testnet_stop "$NETDIR" || true
	fi
	cclfs_teardown
}

# deploy_local NAME TYPE NODES PROCS: a local cluster, running.
deploy_local() {
	local c=$MNT/contracts/$1
	[ -d "$c" ] || mkdir "$c"
	echo local >"$c/node_provider"
	echo "$2" >"$c/cluster_type"
	echo "$3" >"$c/node_count"
	echo "$4" >"$c/node_process_count"
	echo "$1" >"$c/deploy"
	wait_state "$1" running
}

# [hosts] of the namespace network: NAME=ADDRESS=TYPE words.
hosts_conf() {
	local spec name rest
	echo '[hosts]'
	echo 'user = "root"'
	echo "keyfile = \"$NETDIR/id_ed25519\""
	echo "known_hosts = \"$NETDIR/known_hosts\""
	for spec in "$@"; do
		name=${spec%%=*} rest=${spec#*=}
		echo "[hosts.$name]"
		echo "address = \"${rest%%=*}\""
		echo "type = \"${rest#*=}\""
	done
}

# hosts_contract NAME TYPE: a contract of 3 hosts nodes x 2 slots.
hosts_contract() {
	mkdir "contracts/$1"
	echo hosts >"contracts/$1/node_provider"
	echo "$2" >"contracts/$1/cluster_type"
	echo 3 >"contracts/$1/node_count"
	echo 2 >"contracts/$1/node_process_count"
}

# The ring and the rank sum on cluster $1 of 3 nodes x 2 slots, the
# ranks of node k on the test host named worker(k+1).
three_nodes_jobs() {
	echo "$MPIBIN/ring" >"clusters/$1/mpiexec"
	[ "$(sort -k2n "clusters/$1/mpi_stdout")" = "$(ring_expected 6)" ]
	echo "$MPIBIN/ranksum hosts" >"clusters/$1/mpiexec"
	[ "$(grep '^rank' "clusters/$1/mpi_stdout" | sort -k2n)" = "$(printf 'rank %d on worker%d\n' 0 1 1 1 2 2 3 2 4 3 5 3)" ]
	grep -qx 'sum of ranks 0..5 is 15' "clusters/$1/mpi_stdout"
	[ "$(wc -l <"clusters/$1/mpi_stdout")" -eq 7 ]
	[ "$(cat "clusters/$1/mpi_exit_status")" = 0 ]
}

@test "local 4 x 2: hostfile, the ring and the rank sum through mpiexec" {
	cclfs_setup
	cd "$MNT"
	deploy_local m PeerWorkersMPI 4 2
	# Every local node is this machine: one line with all 8 slots.
	[ "$(cat clusters/m/hostfile)" = "localhost slots=8" ]
	echo "$MPIBIN/ring" >clusters/m/mpiexec
	[ "$(sort -k2n clusters/m/mpi_stdout)" = "$(ring_expected 8)" ]
	[ "$(wc -l <clusters/m/mpi_stdout)" -eq 8 ]
	[ "$(cat clusters/m/mpi_exit_status)" = 0 ]
	[ "$(cat clusters/m/error)" = "" ]
	# mpiexec read on a fresh descriptor: the last job's output.
	[ "$(sort -k2n clusters/m/mpiexec)" = "$(ring_expected 8)" ]
	echo "$MPIBIN/ranksum" >clusters/m/mpiexec
	[ "$(cat clusters/m/mpi_stdout)" = "sum of ranks 0..7 is 28" ]
	[ "$(cat clusters/m/mpi_exit_status)" = 0 ]
	# The command's arguments reach every rank.
	echo "$MPIBIN/ranksum hosts" >clusters/m/mpiexec
	[ "$(grep -c '^rank [0-7] on ' clusters/m/mpi_stdout)" -eq 8 ]
	grep -qx 'sum of ranks 0..7 is 28' clusters/m/mpi_stdout
}

@test "mpiexec on a read-write descriptor reads its own job's output" {
	cclfs_setup
	cd "$MNT"
	deploy_local rw PeerWorkersMPI 2 2
	exec 4<>clusters/rw/mpiexec
	echo "$MPIBIN/ranksum" >&4
	# Another job in between does not change what this descriptor reads.
	echo "$MPIBIN/ring" >clusters/rw/mpiexec
	out=$(cat <&4)
	exec 4>&-
	[ "$out" = "sum of ranks 0..3 is 6" ]
	[ "$(sort -k2n clusters/rw/mpi_stdout)" = "$(ring_expected 4)" ]
}

@test "a failing job: EIO, its status, stderr and the error name mpiexec" {
	cclfs_setup
	cd "$MNT"
	deploy_local f PeerWorkersMPI 2 1
	# A program that exits 3 on every rank: mpirun reports 3.
	run_shell "echo 'sh -c \"echo oops >&2; exit 3\"' > clusters/f/mpiexec"
	[ "$status" -ne 0 ]
	[[ $output == *"Input/output error"* ]]
	[ "$(cat clusters/f/mpi_exit_status)" = 3 ]
	grep -q oops clusters/f/mpi_stderr
	grep -q '^clusters/f/mpiexec: "sh -c .*" exited with status 3; see mpi_stderr$' clusters/f/error
	grep -q 'exited with status 3' clusters/f/log
	# A program that does not exist.
	run_shell "echo '$MPIBIN/nonexistent' > clusters/f/mpiexec"
	[ "$status" -ne 0 ]
	[ "$(cat clusters/f/mpi_exit_status)" -ne 0 ]
	grep -q nonexistent clusters/f/mpi_stderr
	# An empty line and several lines are refused before anything runs.
	run_shell "echo '' > clusters/f/mpiexec"
	[ "$status" -ne 0 ]
	[[ $output == *"Invalid argument"* ]]
	grep -q 'is not one command line' clusters/f/error
	run_shell "printf 'a\nb\n' > clusters/f/mpiexec"
	[ "$status" -ne 0 ]
	# A success clears the error.
	echo "$MPIBIN/ranksum" >clusters/f/mpiexec
	[ "$(cat clusters/f/error)" = "" ]
	[ "$(cat clusters/f/mpi_stdout)" = "sum of ranks 0..1 is 1" ]
}

@test "PeerWorkers has no MPI: EBUSY with an explanation; so has a cluster not running" {
	cclfs_setup
	cd "$MNT"
	deploy_local p PeerWorkers 2 1
	run_shell "echo '$MPIBIN/ring' > clusters/p/mpiexec"
	[ "$status" -ne 0 ]
	[[ $output == *"Device or resource busy"* ]]
	grep -q '^clusters/p/mpiexec: this is a PeerWorkers cluster, which has no MPI; deploy one from a contract whose cluster_type is PeerWorkersMPI or ManagerWorkers' clusters/p/error
	[ "$(cat clusters/p/mpi_exit_status)" = "" ]
	[ "$(cat clusters/p/mpi_stdout)" = "" ]
	deploy_local q PeerWorkersMPI 2 1
	echo interrupted >clusters/q/state
	wait_state q interrupted
	run_shell "echo '$MPIBIN/ring' > clusters/q/mpiexec"
	[ "$status" -ne 0 ]
	[[ $output == *"Device or resource busy"* ]]
	grep -q 'the cluster is interrupted; MPI programs run only on a running cluster' clusters/q/error
}

@test "what an MPI job changed in files/ shows as soon as mpiexec returns" {
	cclfs_setup
	cd "$MNT"
	deploy_local w PeerWorkersMPI 1 2
	echo old >clusters/w/nodes/0/files/f
	# The kernel holds f's attributes and its name from a listing.
	[ "$(stat -c %s clusters/w/nodes/0/files/f)" = 4 ]
	ls -l clusters/w/nodes/0/files >/dev/null
	# Both ranks start in node 0's working directory: its files/.
	echo 'sh -c "echo new and longer >f; echo made >g"' >clusters/w/mpiexec
	[ "$(stat -c %s clusters/w/nodes/0/files/f)" = 15 ]
	[ "$(cat clusters/w/nodes/0/files/f)" = "new and longer" ]
	[ "$(cat clusters/w/nodes/0/files/g)" = made ]
}

@test "mpiflags and directory from the contract's config apply" {
	cclfs_setup
	cd "$MNT"
	mkdir contracts/d
	echo "$MPIBIN" >contracts/d/config/directory
	echo '--tag-output' >contracts/d/config/mpiflags
	deploy_local d PeerWorkersMPI 3 1
	# A path relative to the directory; every line tagged by Open MPI.
	echo './ranksum' >clusters/d/mpiexec
	[ "$(cat clusters/d/mpi_stdout)" = "[1,0]<stdout>:sum of ranks 0..2 is 3" ]
	# Every rank starts in the directory.
	echo 'pwd' >clusters/d/mpiexec
	[ "$(sort clusters/d/mpi_stdout | uniq)" = "$(printf '[1,0]<stdout>:%s\n[1,1]<stdout>:%s\n[1,2]<stdout>:%s' "$MPIBIN" "$MPIBIN" "$MPIBIN")" ]
	# The flags are read when mpiexec runs: a change applies at once.
	echo '' >contracts/d/config/mpiflags
	echo './ranksum' >clusters/d/mpiexec
	[ "$(cat clusters/d/mpi_stdout)" = "sum of ranks 0..2 is 3" ]
	# A directory that does not exist fails the job, saying where.
	echo /nonexistent/dir >contracts/d/config/directory
	run_shell "echo ./ranksum > clusters/d/mpiexec"
	[ "$status" -ne 0 ]
	grep -q /nonexistent/dir clusters/d/mpi_stderr
}

@test "Ctrl-C stops an MPI job: EINTR, its processes gone" {
	cclfs_setup
	cd "$MNT"
	deploy_local c PeerWorkersMPI 2 1
	timeout -s INT 2 sh -c 'echo "sleep 321" > clusters/c/mpiexec' && false
	grep -q 'the MPI program was interrupted' clusters/c/error
	for i in $(seq 50); do
		pgrep -f 'sleep 321' >/dev/null || break
		sleep 0.1
	done
	! pgrep -f 'sleep 321'
	# The cluster works on.
	echo "$MPIBIN/ranksum" >clusters/c/mpiexec
	[ "$(cat clusters/c/mpi_stdout)" = "sum of ranks 0..1 is 1" ]
}

@test "the last mpiexec's results survive a remount" {
	cclfs_setup
	cd "$MNT"
	deploy_local r PeerWorkersMPI 2 1
	run_shell "echo 'sh -c \"exit 5\"' > clusters/r/mpiexec"
	[ "$(cat clusters/r/mpi_exit_status)" = 5 ]
	echo "$MPIBIN/ranksum" >clusters/r/mpiexec
	cd "$TESTDIR"
	cclfs_unmount
	cclfs_mount
	cd "$MNT"
	[ "$(cat clusters/r/mpi_exit_status)" = 0 ]
	[ "$(cat clusters/r/mpi_stdout)" = "sum of ranks 0..1 is 1" ]
}

@test "PeerWorkersMPI on 3 namespace hosts: mpirun from node 0 reaches the others" {
	cclfs_netns_setup 3
	# The daemon in the manager's namespace reaches the three workers.
	hosts_conf "w1=${TESTNET_WORKERS[0]}=peer" "w2=${TESTNET_WORKERS[1]}=peer" \
		"w3=${TESTNET_WORKERS[2]}=peer" >"$TESTDIR/cclfs.conf"
	cclfs_mount_in_netns "$TESTNET_MANAGER_NS" -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	hosts_contract p PeerWorkersMPI
	echo p >contracts/p/deploy
	wait_state p running
	[ "$(cat clusters/p/hostfile)" = "$(printf '%s slots=2\n' "${TESTNET_WORKERS[@]}")" ]
	# Each node's own home has the cluster's key, marked with the cluster.
	for k in 1 2 3; do
		[ "$(grep -c ' cclfs:p:' "$NETDIR/netns/worker$k/home/.ssh/authorized_keys")" -eq 1 ]
	done
	# Commands on the nodes see the node's copy of the hostfile.
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/p/nodes/1/exec
	[ "$(cat clusters/p/nodes/1/stdout)" = "$(cat clusters/p/hostfile)" ]
	three_nodes_jobs p
	# mpirun by hand on node 0 with what cclfs installed works too.
	echo "mpirun --hostfile \"\$CCLFS_HOSTFILE\" -np 6 $MPIBIN/ranksum" >clusters/p/nodes/0/exec
	[ "$(cat clusters/p/nodes/0/stdout)" = "sum of ranks 0..5 is 15" ]
	echo terminated >clusters/p/state
	wait_state p terminated
	# The key is gone from every node; nothing of the cluster is left.
	for k in 1 2 3; do
		! grep -q ' cclfs:p:' "$NETDIR/netns/worker$k/home/.ssh/authorized_keys"
	done
	[ ! -e /root/.cclfs/p ]
}

@test "ManagerWorkers 1+3 in namespaces: mpirun on the manager, ranks on the workers" {
	cclfs_netns_setup 3
	hosts_conf "m=$TESTNET_MANAGER=manager" "w1=${TESTNET_WORKERS[0]}=worker" \
		"w2=${TESTNET_WORKERS[1]}=worker" "w3=${TESTNET_WORKERS[2]}=worker" \
		>"$TESTDIR/cclfs.conf"
	cclfs_mount_in_netns "$TESTNET_CLIENT_NS" -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	hosts_contract mw ManagerWorkers
	echo manager >contracts/mw/manager/node_machinetype
	echo worker >contracts/mw/worker/node_machinetype
	echo mw >contracts/mw/deploy
	wait_state mw running
	# The hostfile: the workers, by the addresses the manager reaches.
	[ "$(cat clusters/mw/hostfile)" = "$(printf '%s slots=2\n' "${TESTNET_WORKERS[@]}")" ]
	three_nodes_jobs mw
	# The client namespace cannot reach the workers: mpirun ran on the
	# manager (its daemons started by the cluster's ssh).
	echo 'echo $OMPI_MCA_plm_rsh_agent' >clusters/mw/nodes/manager/exec
	[[ $(cat clusters/mw/nodes/manager/stdout) == */.cclfs/mw/mpi/ssh ]]
	echo terminated >clusters/mw/state
	wait_state mw terminated
	for k in 1 2 3; do
		! grep -q ' cclfs:mw:' "$NETDIR/netns/worker$k/home/.ssh/authorized_keys"
	done
	! grep -q ' cclfs:mw:' "$NETDIR/netns/manager/home/.ssh/authorized_keys"
}

@test "a state database of schema 4 gains the mpiexec results when mounted" {
	cclfs_setup
	cd "$MNT"
	deploy_local s PeerWorkersMPI 2 1
	cd "$TESTDIR"
	cclfs_unmount
	# What cclfs before MPI wrote: no mpi columns, schema 4.
	python3 - "$STATE/state.db" <<-'PY'
		import sqlite3, sys
		db = sqlite3.connect(sys.argv[1])
		db.execute("ALTER TABLE clusters DROP COLUMN mpi_exit_status")
		db.execute("ALTER TABLE clusters DROP COLUMN mpi_ns")
		db.execute("ALTER TABLE nodes DROP COLUMN billed_ns")
		db.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
		db.commit()
	PY
	cclfs_mount
	cd "$MNT"
	[ "$(cat clusters/s/state)" = running ]
	[ "$(cat clusters/s/mpi_exit_status)" = "" ]
	echo "$MPIBIN/ranksum" >clusters/s/mpiexec
	[ "$(cat clusters/s/mpi_exit_status)" = 0 ]
	[ "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT value FROM meta WHERE key = '"'schema'"'").fetchone()[0])' "$STATE/state.db")" = 7 ]
	# Schema 7's billable time of nodes, and schema 6's tables (a
	# refreshed catalog), are there too.
	python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("SELECT billed_ns FROM nodes").fetchall()' "$STATE/state.db"
	[ "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '"'catalog_%'"'").fetchone()[0])' "$STATE/state.db")" = 3 ]
}
