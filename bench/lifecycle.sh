#!/usr/bin/env bash
# bench/lifecycle.sh: how fast does cclfs deploy clusters on the local
# provider, how fast does it run a command on every node, and how much
# memory does the daemon need for many clusters?
#
# It mounts cclfs in a fresh temporary directory with its own state
# directory and, through the mount as a user would:
#
#   deploy       for 1, 16, 64 and 256 nodes: a contract with
#                node_provider local and node_count N; R times
#                `echo NAME > contracts/C/deploy`, then `state` read every
#                5 ms (a builtin read and a builtin 5 ms wait, no fork)
#                until it says `running`; the time from just before the
#                write to the read that saw `running` (it overstates by
#                up to one poll interval, which is reported). Between runs
#                the cluster is terminated (waited for) and removed with
#                rmdir.
#   exec fan-out on a 64-node cluster, R runs of each, interleaved (which
#                goes first alternates): `echo true > clusters/H/exec`
#                (returns when `true` has run on every node) against
#                `for i in $(seq 64); do sh -c true & done; wait` run by
#                this script; the ratio of the medians.
#   RSS          a fresh daemon (new state directory) with a few
#                contracts of 16 nodes; VmRSS and VmHWM of the daemon
#                (/proc/PID/status) before the first deploy, then 100
#                clusters deployed from those contracts, VmRSS and VmHWM
#                once every one is `running`, and again after all are
#                terminated and removed.
#   concurrent   a fresh daemon (new state directory) whose cclfs.conf
#                points [ec2] at the fake EC2 endpoint of tests/fakeec2
#                (python3 tests/fakeec2/fake_ec2.py, started and stopped
#                by this script); 100 clusters of 4 local nodes deployed
#                at once (100 writes to deploy back to back, then the time
#                until every one reads `running`), R runs alone and R runs
#                while one 4-node ec2 deploy on the same mount is stuck
#                waiting for SSH (the fake's ssh_silent setting: its
#                instances accept on port 22 and never answer), interleaved
#                (which goes first alternates); the ratio of the medians.
#                The ec2 cluster is deployed before each stuck run, waited
#                for until its instances run in the fake, and terminated and
#                removed after it; between runs the local clusters are
#                terminated and removed.
#
# Targets (from the issue): 256 nodes deploy in under 2 s (median); exec
# fan-out within 2x of the bash loop; RSS under 64 MiB with 100 clusters of
# 16 nodes; deploying many clusters at once while an ec2 deploy is stuck
# takes at most 1.2x as long as without it. Results go to
# bench/results/lifecycle.txt and bench/results/lifecycle.csv (overwritten).
#
# A missed target is reported, not fatal: the exit status is non-zero only
# when the benchmark itself could not run (build missing, mount failed, a
# deploy failed...).
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', plain sort order

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/build/cclfs
OUT=$REPO/bench/results
SIZES="1 16 64 256"
DEPLOY_RUNS=7
EXEC_NODES=64
EXEC_RUNS=31
RSS_CLUSTERS=100
RSS_NODES=16
RSS_CONTRACTS=4
CONC_CLUSTERS=100
CONC_NODES=4
CONC_RUNS=5
STUCK_NODES=4
STUCK_TIMEOUT=60 # [ec2] boot_timeout of the stuck deploy, seconds
FAKE_NET=127.0.6 # the /24 of the fake EC2's instances
POLL_MS=5
TIMEOUT=120 # seconds to wait for any one transition

# Targets.
TARGET_DEPLOY_NODES=256
TARGET_DEPLOY_MS=2000
TARGET_EXEC_RATIO=2
TARGET_RSS_KB=65536 # 64 MiB
TARGET_CONC_RATIO=1.2

usage() {
	cat <<EOF
usage: bench/lifecycle.sh [--sizes "N ..."] [--deploy-runs R] [--exec-nodes N]
                          [--exec-runs R] [--rss-clusters N] [--rss-nodes N]
                          [--rss-contracts N] [--concurrent-clusters N]
                          [--concurrent-nodes N] [--concurrent-runs R]
                          [--stuck-timeout S] [--fake-net A.B.C]
                          [--poll-ms MS] [--bin PATH] [--out DIR]

Time deploying clusters of the local provider, exec on every node of a
cluster against a bash loop, measure the daemon's memory with many
clusters, and time many deploys at once with and without an ec2 deploy
stuck in the fake EC2 endpoint, all through a cclfs mount.

  --sizes "N ..."     node counts whose deploy is timed (default "$SIZES";
                      the target applies to $TARGET_DEPLOY_NODES)
  --deploy-runs R     deploys timed per size; the median is reported
                      (default $DEPLOY_RUNS)
  --exec-nodes N      nodes of the exec cluster and processes of the bash
                      loop (default $EXEC_NODES)
  --exec-runs R       timed runs of each; the medians are reported
                      (default $EXEC_RUNS)
  --rss-clusters N    clusters deployed for the memory measurement
                      (default $RSS_CLUSTERS)
  --rss-nodes N       nodes per cluster there (default $RSS_NODES)
  --rss-contracts N   contracts they are deployed from (default $RSS_CONTRACTS)
  --concurrent-clusters N
                      clusters deployed at once (default $CONC_CLUSTERS)
  --concurrent-nodes N
                      local nodes per cluster there (default $CONC_NODES)
  --concurrent-runs R timed runs alone and with a stuck ec2 deploy each;
                      the medians are reported (default $CONC_RUNS; 0 skips
                      the measurement and the fake EC2)
  --stuck-timeout S   [ec2] boot_timeout of the stuck deploy, in seconds
                      (default $STUCK_TIMEOUT): an engine that makes the
                      local deploys wait for it shows about that long
  --fake-net A.B.C    the /24 of 127/8 the fake's instances listen on
                      (default $FAKE_NET; port 22, so root is needed)
  --poll-ms MS        wait between two reads of a state file (default $POLL_MS)
  --bin PATH          the cclfs binary (default build/cclfs of this repository)
  --out DIR           where lifecycle.txt and lifecycle.csv go
                      (default bench/results)
EOF
}

die() {
	echo "lifecycle.sh: $*" >&2
	exit 1
}

posint() { # option value
	[[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: not a positive integer: $2"
}

while [ $# -gt 0 ]; do
	case $1 in
	--sizes | --deploy-runs | --exec-nodes | --exec-runs | --rss-clusters | \
		--rss-nodes | --rss-contracts | --concurrent-clusters | \
		--concurrent-nodes | --concurrent-runs | --stuck-timeout | --fake-net | \
		--poll-ms | --bin | --out)
		[ $# -ge 2 ] || die "$1 needs a value"
		set -- "$1=$2" "${@:3}"
		;;
	--sizes=*) SIZES=${1#*=}; shift ;;
	--deploy-runs=*) DEPLOY_RUNS=${1#*=}; shift ;;
	--exec-nodes=*) EXEC_NODES=${1#*=}; shift ;;
	--exec-runs=*) EXEC_RUNS=${1#*=}; shift ;;
	--rss-clusters=*) RSS_CLUSTERS=${1#*=}; shift ;;
	--rss-nodes=*) RSS_NODES=${1#*=}; shift ;;
	--rss-contracts=*) RSS_CONTRACTS=${1#*=}; shift ;;
	--concurrent-clusters=*) CONC_CLUSTERS=${1#*=}; shift ;;
	--concurrent-nodes=*) CONC_NODES=${1#*=}; shift ;;
	--concurrent-runs=*) CONC_RUNS=${1#*=}; shift ;;
	--stuck-timeout=*) STUCK_TIMEOUT=${1#*=}; shift ;;
	--fake-net=*) FAKE_NET=${1#*=}; shift ;;
	--poll-ms=*) POLL_MS=${1#*=}; shift ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--out=*) OUT=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

read -r -a SIZES <<<"$SIZES"
[ ${#SIZES[@]} -gt 0 ] || die "--sizes: no node count given"
for n in "${SIZES[@]}"; do posint --sizes "$n"; done
posint --deploy-runs "$DEPLOY_RUNS"
posint --exec-nodes "$EXEC_NODES"
posint --exec-runs "$EXEC_RUNS"
posint --rss-clusters "$RSS_CLUSTERS"
posint --rss-nodes "$RSS_NODES"
posint --rss-contracts "$RSS_CONTRACTS"
posint --concurrent-clusters "$CONC_CLUSTERS"
posint --concurrent-nodes "$CONC_NODES"
[[ $CONC_RUNS =~ ^[0-9]+$ ]] || die "--concurrent-runs: not a number: $CONC_RUNS"
posint --stuck-timeout "$STUCK_TIMEOUT"
[[ $FAKE_NET =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "--fake-net: not a /24 of 127/8: $FAKE_NET"
posint --poll-ms "$POLL_MS"
[ "$RSS_CONTRACTS" -le "$RSS_CLUSTERS" ] || die "--rss-contracts: more contracts than clusters"
[ -x "$BIN" ] || die "$BIN: no such executable (build first: cmake -S $REPO -B $REPO/build && cmake --build $REPO/build)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
for tool in fusermount3 mkfifo seq sh sort awk findmnt; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
FAKE_PY=$REPO/tests/fakeec2/fake_ec2.py
if [ "$CONC_RUNS" -gt 0 ]; then
	command -v python3 >/dev/null || die "python3 not found (the fake EC2 endpoint needs it)"
	[ -f "$FAKE_PY" ] || die "$FAKE_PY not found"
	# shellcheck source=tests/sshd/testhosts.bash
	source "$REPO/tests/sshd/testhosts.bash"
fi
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
POLL_S=$(awk -v ms="$POLL_MS" 'BEGIN { printf "%.3f", ms / 1000 }')

# ---------------------------------------------------------------- cleanup

WORK=
MNT=
CCLFS_PID=
CCLFS_PIDS=()
FAKE=
FAKE_PID=

cclfs_mounted() {
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts
}

cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	cd /
	if [ -n "$MNT" ] && cclfs_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	for pid in "${CCLFS_PIDS[@]}"; do
		# A daemon that is unmounting gets a moment to exit by itself.
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	# The fake EC2 endpoint closes its listeners and stops its hosts on
	# SIGTERM; whatever it could not stop, testhosts_stop does.
	if [ -n "$FAKE_PID" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	if [ -n "$FAKE" ] && [ -d "$FAKE/testhosts" ]; then
		testhosts_stop "$FAKE/testhosts" || true
	fi
	# --one-file-system: never recurse into a mount that is still there
	# (rm in a cclfs mount resets values). The nodes' working directories
	# are under the state directories; `true` leaves no process behind.
	if [ -n "$WORK" ] && ! { [ -n "$MNT" ] && cclfs_mounted; }; then
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- cclfs

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-bench.XXXXXX")
MNT=$WORK/mnt
LOG=$WORK/daemon.log
mkdir -p "$MNT" "$WORK/home"

# A wait of POLL_MS without forking sleep(1): a read with a timeout on a
# FIFO that nobody writes to.
mkfifo "$WORK/tick"
exec {TICK}<>"$WORK/tick"
tick() {
	read -r -t "$POLL_S" -u "$TICK" _ || true
}

cclfs_mount() { # statedir [more cclfs options]
	local i
	# HOME, cwd and the environment carry no stray cclfs.conf; exec keeps
	# the background job's pid the daemon's.
	(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME HOME="$WORK/home" \
		"$BIN" "$MNT" -f -o statedir="$1" "${@:2}") >>"$LOG" 2>&1 3>&- {TICK}>&- &
	CCLFS_PID=$!
	CCLFS_PIDS+=("$CCLFS_PID")
	for i in $(seq 1 200); do
		cclfs_mounted && return 0
		if ! kill -0 "$CCLFS_PID" 2>/dev/null; then
			cat "$LOG" >&2
			die "cclfs exited before mounting"
		fi
		sleep 0.05
	done
	die "cclfs did not mount within 10 s"
}

cclfs_unmount() {
	fusermount3 -u "$MNT" || die "fusermount3 -u $MNT failed"
	wait "$CCLFS_PID" || die "cclfs exited with status $? on unmount (log: $(tail -3 "$LOG"))"
}


# The first word of clusters/H/state into STATE_WORD (builtin read: no fork).
read_state() { # handle
	local line
	IFS= read -r line <"$MNT/clusters/$1/state" || true
	STATE_WORD=${line%% *}
}

cluster_error() { # handle
	cat "$MNT/clusters/$1/error" "$MNT/clusters/$1/log" 2>/dev/null | tail -5
}

# Poll clusters/H/state until it reads `want`. Sets POLLS (reads made) and
# adds to POLL_INTERVALS the mean time from one read to the next.
# Dies on `failed` or after TIMEOUT seconds. No fork inside the loop.
wait_state() { # handle want
	local h=$1 want=$2 first last deadline
	first=${EPOCHREALTIME/./}
	deadline=$((first + TIMEOUT * 1000000))
	POLLS=0
	for (( ; ; )); do
		read_state "$h"
		last=${EPOCHREALTIME/./}
		POLLS=$((POLLS + 1))
		[ "$STATE_WORD" = "$want" ] && break
		[ "$STATE_WORD" = failed ] && die "clusters/$h failed: $(cluster_error "$h")"
		[ "$last" -lt "$deadline" ] ||
			die "clusters/$h is still '$STATE_WORD' after $TIMEOUT s, not $want"
		tick
	done
	# Every wait that needed more than one read gives a poll interval.
	if [ "$POLLS" -gt 1 ]; then POLL_INTERVALS+="$(((last - first) / (POLLS - 1))) "; fi
}

new_contract() { # name nodes
	local c=$MNT/contracts/$1
	mkdir "$c" || die "mkdir $c failed"
	echo local >"$c/node_provider"
	echo "$2" >"$c/node_count"
	touch "$c/resolve"
	[ -z "$(cat "$c/error")" ] || die "contracts/$1 does not resolve: $(cat "$c/error")"
}

deploy() { # contract handle
	echo "$2" >"$MNT/contracts/$1/deploy" ||
		die "echo $2 > contracts/$1/deploy failed: $(cat "$MNT/contracts/$1/error")"
}

terminate_remove() { # handle
	echo terminated >"$MNT/clusters/$1/state" || die "cannot terminate clusters/$1: $(cluster_error "$1")"
	wait_state "$1" terminated
	rmdir "$MNT/clusters/$1" || die "rmdir clusters/$1 failed: $(cluster_error "$1")"
}

daemon_mem() { # -> "VmRSS VmHWM" in kB
	awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r, h }' \
		"/proc/$CCLFS_PID/status"
}

declare -A SAMPLES=() # [key] = "us us us ..."
POLL_INTERVALS=""     # "us us ...": mean read-to-read time of each wait

# ---------------------------------------------------------------- deploy

cclfs_mount "$WORK/state"
STATE_DIR_FS=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null | head -1 || true)
[ -n "$STATE_DIR_FS" ] || STATE_DIR_FS=$(stat -f -c %T "$WORK")
if [ "$STATE_DIR_FS" = ext4 ]; then
	# Whether it has a journal matters: without one, ext4 skips recently
	# deleted inodes when it allocates one, which costs exec (new output
	# files every time) a lot.
	dev=$(findmnt -n -o SOURCE -T "$WORK" 2>/dev/null | head -1 || true)
	dev=${dev##*/}
	if [ -n "$dev" ] && [ -d /proc/fs/jbd2 ]; then
		if compgen -G "/proc/fs/jbd2/$dev-*" >/dev/null; then
			STATE_DIR_FS="ext4 with a journal"
		else
			STATE_DIR_FS="ext4 without a journal"
		fi
	fi
fi

for n in "${SIZES[@]}"; do
	new_contract "d$n" "$n"
done
# One untimed deploy first: binaries, the daemon's threads and the state
# store warm.
deploy "d${SIZES[0]}" warmup
wait_state warmup running
terminate_remove warmup

for n in "${SIZES[@]}"; do
	for ((r = 1; r <= DEPLOY_RUNS; r++)); do
		h=d${n}r$r
		t0=${EPOCHREALTIME/./}
		deploy "d$n" "$h"
		t1=${EPOCHREALTIME/./}
		wait_state "$h" running
		t2=${EPOCHREALTIME/./}
		SAMPLES[deploy.$n]+="$((t2 - t0)) "
		SAMPLES[deploy_write.$n]+="$((t1 - t0)) "
		SAMPLES[deploy_polls.$n]+="$((POLLS * 1000)) " # shown as a count
		terminate_remove "$h"
		t3=${EPOCHREALTIME/./}
		SAMPLES[terminate.$n]+="$((t3 - t2)) "
	done
	echo "  deploy of $n nodes: $DEPLOY_RUNS runs done" >&2
done

# ---------------------------------------------------------------- exec

new_contract exec "$EXEC_NODES"
deploy exec H
wait_state H running
H=$MNT/clusters/H

run_exec() {
	local t0 t1
	t0=${EPOCHREALTIME/./}
	echo true >"$H/exec" || die "echo true > clusters/H/exec failed: $(cluster_error H)"
	t1=${EPOCHREALTIME/./}
	SAMPLES[exec.cclfs]+="$((t1 - t0)) "
}

run_loop() {
	local t0 t1 i pids=()
	t0=${EPOCHREALTIME/./}
	# `for i in $(seq N); do sh -c true & done; wait`, waiting for these
	# N only: a plain `wait` would also wait for the daemon, a child of
	# this shell.
	for i in $(seq "$EXEC_NODES"); do
		sh -c true &
		pids+=($!)
	done
	wait "${pids[@]}"
	t1=${EPOCHREALTIME/./}
	SAMPLES[exec.loop]+="$((t1 - t0)) "
}

run_exec # untimed round
run_loop
SAMPLES[exec.cclfs]=""
SAMPLES[exec.loop]=""
for ((r = 1; r <= EXEC_RUNS; r++)); do
	if ((r % 2)); then run_exec; run_loop; else run_loop; run_exec; fi
done
# Every node ran the command: its exit_status reads 0.
EXEC_OK=0
for d in "$H"/nodes/*/; do
	IFS= read -r st <"$d/exit_status" || true
	[ "$st" = 0 ] && EXEC_OK=$((EXEC_OK + 1))
done
[ "$EXEC_OK" = "$EXEC_NODES" ] || die "exit_status is 0 on $EXEC_OK nodes of $EXEC_NODES after exec"
echo "  exec fan-out: $EXEC_RUNS runs done" >&2
terminate_remove H
kill -0 "$CCLFS_PID" 2>/dev/null || die "the cclfs daemon died during the benchmark"
cclfs_unmount

# ---------------------------------------------------------------- RSS

# A fresh daemon and state directory: what the earlier phases left in
# the heap does not count.
cclfs_mount "$WORK/state-rss"
read -r RSS_MOUNT HWM_MOUNT <<<"$(daemon_mem)"
for ((k = 0; k < RSS_CONTRACTS; k++)); do
	new_contract "rss$k" "$RSS_NODES"
done
read -r RSS_BEFORE HWM_BEFORE <<<"$(daemon_mem)"
handles=()
t0=${EPOCHREALTIME/./}
for ((i = 0; i < RSS_CLUSTERS; i++)); do
	printf -v h 'rss%03d' "$i"
	deploy "rss$((i % RSS_CONTRACTS))" "$h"
	handles+=("$h")
done
for h in "${handles[@]}"; do
	wait_state "$h" running
done
t1=${EPOCHREALTIME/./}
RSS_DEPLOY_ALL_MS=$(awk -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", us / 1000 }')
RUNNING=$(find "$MNT/clusters" -mindepth 1 -maxdepth 1 | wc -l)
[ "$RUNNING" = "$RSS_CLUSTERS" ] || die "$RUNNING clusters under clusters/, not $RSS_CLUSTERS"
NODE_DIRS=$(find "$MNT/clusters" -mindepth 3 -maxdepth 3 -path '*/nodes/*' -type d | wc -l)
read -r RSS_AFTER HWM_AFTER <<<"$(daemon_mem)"
t0=${EPOCHREALTIME/./}
for h in "${handles[@]}"; do
	echo terminated >"$MNT/clusters/$h/state" || die "cannot terminate clusters/$h"
done
for h in "${handles[@]}"; do
	wait_state "$h" terminated
	rmdir "$MNT/clusters/$h" || die "rmdir clusters/$h failed"
done
t1=${EPOCHREALTIME/./}
RSS_TERMINATE_ALL_MS=$(awk -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", us / 1000 }')
read -r RSS_CLEAN HWM_CLEAN <<<"$(daemon_mem)"
kill -0 "$CCLFS_PID" 2>/dev/null || die "the cclfs daemon died during the benchmark"
cclfs_unmount
echo "  RSS: $RSS_CLUSTERS clusters of $RSS_NODES nodes done" >&2

# ---------------------------------------------------------------- concurrent

# The fake EC2 endpoint: started by pid, its instances on FAKE_NET.
fake_start() {
	FAKE=$WORK/fake
	mkdir -p "$FAKE"
	python3 "$FAKE_PY" --dir "$FAKE" --net "$FAKE_NET" --first 10 \
		--credentials AKIDBENCHLIFE:bench-lifecycle-secret \
		>>"$WORK/fake.log" 2>&1 3>&- {TICK}>&- &
	FAKE_PID=$!
	for _ in $(seq 1 400); do
		[ -s "$FAKE/port" ] && break
		kill -0 "$FAKE_PID" 2>/dev/null || die "the fake EC2 endpoint exited: $(tail -5 "$WORK/fake.log")"
		sleep 0.05
	done
	[ -s "$FAKE/port" ] || die "the fake EC2 endpoint did not start within 20 s"
	FAKE_URL=http://127.0.0.1:$(cat "$FAKE/port")
}

# fake_py 'PYTHON EXPRESSION over s (the fake's state JSON)' prints it;
# fake_post PATH JSON makes a control request.
fake_py() {
	python3 -c '
import json, sys, urllib.request
print(eval(sys.argv[2], {"s": json.load(urllib.request.urlopen(sys.argv[1] + "/_fake/state"))}))' \
		"$FAKE_URL" "$1"
}
fake_post() { # path json
	python3 -c '
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST")).read()' \
		"$FAKE_URL$1" "$2" || die "POST $1 to the fake EC2 endpoint failed"
}

# Deploy the ec2 cluster $1 and wait until its instances run in the fake
# (cclfs then waits for SSH that never answers) and it reads deploying.
stuck_deploy() { # handle
	local i
	deploy ec2stuck "$1"
	for i in $(seq 1 300); do
		[ "$(fake_py "len([i for i in s['instances'] if i['tags'].get('cclfs:cluster') == '$1' and i['state'] == 'running'])")" = "$STUCK_NODES" ] && break
		read_state "$1"
		[ "$STATE_WORD" != failed ] || die "the stuck ec2 deploy $1 failed: $(cluster_error "$1")"
		sleep 0.1
	done
	read_state "$1"
	[ "$STATE_WORD" = deploying ] || die "the ec2 deploy $1 is '$STATE_WORD', not stuck in deploying"
	[ "$i" -lt 300 ] || die "the ec2 deploy $1 launched no $STUCK_NODES running instances within 30 s"
}

# Deploy CONC_CLUSTERS clusters at once; the time from the first write to
# the read that saw the last one running goes to SAMPLES[concurrent.$1].
deploy_many() { # key prefix
	local i h t0 t1 handles=()
	t0=${EPOCHREALTIME/./}
	for ((i = 0; i < CONC_CLUSTERS; i++)); do
		printf -v h '%s%03d' "$2" "$i"
		deploy conc "$h"
		handles+=("$h")
	done
	for h in "${handles[@]}"; do
		wait_state "$h" running
	done
	t1=${EPOCHREALTIME/./}
	[ -z "$1" ] || SAMPLES[concurrent.$1]+="$((t1 - t0)) "
	for h in "${handles[@]}"; do
		echo terminated >"$MNT/clusters/$h/state" || die "cannot terminate clusters/$h"
	done
	for h in "${handles[@]}"; do
		wait_state "$h" terminated
		rmdir "$MNT/clusters/$h" || die "rmdir clusters/$h failed"
	done
}

run_alone() { # run
	deploy_many alone "a$1x"
}

run_stuck() { # run
	local e=stuck$1
	stuck_deploy "$e"
	deploy_many stuck "s$1x"
	# Still stuck at the end? (An engine whose other jobs waited for it
	# has seen its boot_timeout end it by then.)
	read_state "$e"
	[ "$STATE_WORD" != deploying ] || STUCK_HELD=$((STUCK_HELD + 1))
	terminate_remove "$e"
}

STUCK_HELD=0
if [ "$CONC_RUNS" -gt 0 ]; then
	fake_start
	cat >"$WORK/cclfs.conf" <<-EOF
		[ec2]
		endpoint_url = "$FAKE_URL"
		region = "us-east-1"
		imageid = "ami-0bench"
		user = "root"
		poll_interval = "0.05"
		poll_max = "0.2"
		boot_timeout = "$STUCK_TIMEOUT"
	EOF
	export AWS_ACCESS_KEY_ID=AKIDBENCHLIFE AWS_SECRET_ACCESS_KEY=bench-lifecycle-secret
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION \
		AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2
	cclfs_mount "$WORK/state-conc" -o config="$WORK/cclfs.conf"
	new_contract conc "$CONC_NODES"
	mkdir "$MNT/contracts/ec2stuck" || die "mkdir contracts/ec2stuck failed"
	echo ec2 >"$MNT/contracts/ec2stuck/node_provider"
	echo t3.micro >"$MNT/contracts/ec2stuck/node_machinetype"
	echo "$STUCK_NODES" >"$MNT/contracts/ec2stuck/node_count"
	fake_post /_fake/settings '{"ssh_silent": 1}'
	# Local deploys wait for a stuck one for up to its boot_timeout on an
	# engine that runs one job at a time: wait that long before dying.
	SAVED_TIMEOUT=$TIMEOUT
	[ "$TIMEOUT" -ge $((STUCK_TIMEOUT + 60)) ] || TIMEOUT=$((STUCK_TIMEOUT + 60))
	deploy_many "" w # untimed round
	for ((r = 1; r <= CONC_RUNS; r++)); do
		if ((r % 2)); then run_alone "$r"; run_stuck "$r"; else run_stuck "$r"; run_alone "$r"; fi
	done
	TIMEOUT=$SAVED_TIMEOUT
	[ "$(fake_py "len([i for i in s['instances'] if i['state'] != 'terminated']) + len(s['key_pairs']) + len(s['placement_groups'])")" = 0 ] ||
		die "the fake EC2 endpoint still has instances, key pairs or placement groups of the stuck deploys"
	kill -0 "$CCLFS_PID" 2>/dev/null || die "the cclfs daemon died during the benchmark"
	cclfs_unmount
	echo "  concurrent deploys: $CONC_RUNS runs of each done" >&2
fi

# ---------------------------------------------------------------- report

stat_us() { # "us us ..." -> "median min max" in ms, 1 decimal
	tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '
		{ v[NR] = $1 }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%.1f %.1f %.1f", m / 1000, v[1] / 1000, v[NR] / 1000 }'
}
list_ms() { # "us us ..." -> "1.2 4.5 ..." in run order
	tr ' ' '\n' <<<"$1" | grep . | awk '{ printf "%s%.1f", (NR > 1 ? " " : ""), $1 / 1000 }'
}
mib() { # kB -> MiB, 1 decimal
	awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'
}
pass_if() { # awk condition on a, b
	if awk -v a="$2" -v b="$3" "BEGIN { exit !($1) }"; then echo PASS; else echo FAIL; fi
}

DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KERNEL=$(uname -r)
NPROC=$(nproc)
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
VERSION=$("$BIN" --version 2>&1 | head -1)
VERSION=${VERSION#cclfs } # "0.1.0 (libfuse 3.14.0)"
CCLFS_VERSION=${VERSION%% *}
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && ! git -C "$REPO" diff --quiet HEAD -- 2>/dev/null; then
	COMMIT="$COMMIT (with uncommitted changes, git diff HEAD sha256 $(git -C "$REPO" diff HEAD -- | sha256sum | cut -c1-12))"
fi
POLL_WAITS=$(wc -w <<<"$POLL_INTERVALS")
if [ "$POLL_WAITS" -gt 0 ]; then
	read -r POLL_MED POLL_MIN POLL_MAX <<<"$(stat_us "$POLL_INTERVALS")"
else
	POLL_MED=- POLL_MIN=- POLL_MAX=-
fi

declare -A MED=() MIN=() MAX=()
for key in "${!SAMPLES[@]}"; do
	read -r "MED[$key]" "MIN[$key]" "MAX[$key]" <<<"$(stat_us "${SAMPLES[$key]}")"
done
EXEC_RATIO=$(awk -v c="${MED[exec.cclfs]}" -v l="${MED[exec.loop]}" \
	'BEGIN { if (l > 0) printf "%.2f", c / l; else print "inf" }')
EXEC_RESULT=$(pass_if 'a != "inf" && a <= b' "$EXEC_RATIO" "$TARGET_EXEC_RATIO")
RSS_RESULT=$(pass_if 'a < b' "$RSS_AFTER" "$TARGET_RSS_KB")
if [ "$CONC_RUNS" -gt 0 ]; then
	CONC_RATIO=$(awk -v s="${MED[concurrent.stuck]}" -v a="${MED[concurrent.alone]}" \
		'BEGIN { if (a > 0) printf "%.2f", s / a; else print "inf" }')
	CONC_RESULT=$(pass_if 'a != "inf" && a <= b' "$CONC_RATIO" "$TARGET_CONC_RATIO")
fi
declare -A DEPLOY_RESULT=()
for n in "${SIZES[@]}"; do
	if [ "$n" = "$TARGET_DEPLOY_NODES" ]; then
		DEPLOY_RESULT[$n]=$(pass_if 'a < b' "${MED[deploy.$n]}" "$TARGET_DEPLOY_MS")
	else
		DEPLOY_RESULT[$n]=-
	fi
done

TXT=$OUT/lifecycle.txt
CSV=$OUT/lifecycle.csv
{
	echo "cclfs benchmark: lifecycle (bench/lifecycle.sh)"
	echo
	echo "date:        $DATE"
	echo "machine:     $NPROC cores${CPU:+ ($CPU)}, Linux $KERNEL"
	echo "cclfs:       $VERSION, commit $COMMIT"
	echo "state:       fresh statedir on $STATE_DIR_FS (state.db: SQLite, WAL, synchronous=FULL);"
	echo "             provider local (nodes: directories under the statedir)"
	echo "deploy:      $DEPLOY_RUNS runs per size after one untimed deploy; time from just before"
	echo "             \`echo NAME > contracts/C/deploy\` to the read of clusters/NAME/state that"
	echo "             saw \`running\`. State is read with a builtin read at once after the write,"
	echo "             then every $POLL_MS ms (builtin wait, no fork): read to read took a median"
	echo "             $POLL_MED ms (min $POLL_MIN, max $POLL_MAX) over the $POLL_WAITS waits (deploy or"
	echo "             terminate) that needed more than one read; that is the resolution."
	echo "             Terminate (waited for) and rmdir between runs"
	echo "exec:        $EXEC_RUNS runs of each after one untimed round, interleaved (order alternates):"
	echo "             cclfs: echo true > clusters/H/exec ($EXEC_NODES nodes; exit_status 0 on each after)"
	echo "             loop:  for i in \$(seq $EXEC_NODES); do sh -c true & done; wait (in this shell)"
	echo "memory:      a fresh daemon; VmRSS/VmHWM from /proc/PID/status; $RSS_CLUSTERS clusters of"
	echo "             $RSS_NODES nodes deployed from $RSS_CONTRACTS contracts, read once all are running"
	if [ "$CONC_RUNS" -gt 0 ]; then
		echo "concurrent:  $CONC_RUNS runs of each after one untimed round, interleaved (order alternates), on"
		echo "             a fresh daemon: $CONC_CLUSTERS writes to deploy back to back (contract of $CONC_NODES local"
		echo "             nodes), time from the first write to the read that saw the last one running;"
		echo "             alone, and while a $STUCK_NODES-node ec2 deploy on the same mount waits for SSH that"
		echo "             never answers (fake EC2 endpoint, ssh_silent; boot_timeout $STUCK_TIMEOUT s)"
	else
		echo "concurrent:  skipped (--concurrent-runs 0)"
	fi
	echo
	printf '%-34s %6s %12s %10s %10s %12s %6s\n' measurement runs "median" min max target result
	for n in "${SIZES[@]}"; do
		tgt=-
		[ "$n" = "$TARGET_DEPLOY_NODES" ] && tgt="< $TARGET_DEPLOY_MS ms"
		printf '%-34s %6s %9s ms %10s %10s %12s %6s\n' "deploy $n nodes" "$DEPLOY_RUNS" \
			"${MED[deploy.$n]}" "${MIN[deploy.$n]}" "${MAX[deploy.$n]}" "$tgt" "${DEPLOY_RESULT[$n]}"
	done
	printf '%-34s %6s %9s ms %10s %10s %12s %6s\n' "exec true, $EXEC_NODES nodes (cclfs)" "$EXEC_RUNS" \
		"${MED[exec.cclfs]}" "${MIN[exec.cclfs]}" "${MAX[exec.cclfs]}" - -
	printf '%-34s %6s %9s ms %10s %10s %12s %6s\n' "bash loop, $EXEC_NODES x sh -c true" "$EXEC_RUNS" \
		"${MED[exec.loop]}" "${MIN[exec.loop]}" "${MAX[exec.loop]}" - -
	printf '%-34s %6s %11sx %10s %10s %12s %6s\n' "exec fan-out ratio cclfs/loop" "$EXEC_RUNS" \
		"$EXEC_RATIO" - - "<= ${TARGET_EXEC_RATIO}x" "$EXEC_RESULT"
	printf '%-34s %6s %8s MiB %10s %10s %12s %6s\n' "VmRSS, $RSS_CLUSTERS x $RSS_NODES nodes running" 1 \
		"$(mib "$RSS_AFTER")" - - "< $((TARGET_RSS_KB / 1024)) MiB" "$RSS_RESULT"
	if [ "$CONC_RUNS" -gt 0 ]; then
		printf '%-34s %6s %9s ms %10s %10s %12s %6s\n' "deploy $CONC_CLUSTERS x $CONC_NODES nodes at once" "$CONC_RUNS" \
			"${MED[concurrent.alone]}" "${MIN[concurrent.alone]}" "${MAX[concurrent.alone]}" - -
		printf '%-34s %6s %9s ms %10s %10s %12s %6s\n' "  the same, an ec2 deploy stuck" "$CONC_RUNS" \
			"${MED[concurrent.stuck]}" "${MIN[concurrent.stuck]}" "${MAX[concurrent.stuck]}" - -
		printf '%-34s %6s %11sx %10s %10s %12s %6s\n' "ratio stuck/alone" "$CONC_RUNS" \
			"$CONC_RATIO" - - "<= ${TARGET_CONC_RATIO}x" "$CONC_RESULT"
	fi
	echo
	echo "memory of the daemon (kB; MiB):"
	printf '  %-44s VmRSS %7s (%5s)   VmHWM %7s (%5s)\n' \
		"just mounted" "$RSS_MOUNT" "$(mib "$RSS_MOUNT")" "$HWM_MOUNT" "$(mib "$HWM_MOUNT")" \
		"$RSS_CONTRACTS contracts, before deploying" "$RSS_BEFORE" "$(mib "$RSS_BEFORE")" "$HWM_BEFORE" "$(mib "$HWM_BEFORE")" \
		"$RSS_CLUSTERS x $RSS_NODES nodes running" "$RSS_AFTER" "$(mib "$RSS_AFTER")" "$HWM_AFTER" "$(mib "$HWM_AFTER")" \
		"all terminated and removed" "$RSS_CLEAN" "$(mib "$RSS_CLEAN")" "$HWM_CLEAN" "$(mib "$HWM_CLEAN")"
	echo "  ($NODE_DIRS node directories under clusters/; $RSS_DEPLOY_ALL_MS ms from the first deploy"
	echo "   write to all $RSS_CLUSTERS running, $RSS_TERMINATE_ALL_MS ms to terminate and remove them all)"
	if [ "$CONC_RUNS" -gt 0 ]; then
		echo
		echo "the stuck ec2 deploy still read deploying after the timed deploys in $STUCK_HELD of $CONC_RUNS runs"
	fi
	echo
	echo "not targets (ms, median of the deploy runs):"
	for n in "${SIZES[@]}"; do
		printf '  %-10s echo NAME > deploy returned after %6s; reads of state until running: %5s;\n' \
			"$n nodes:" "${MED[deploy_write.$n]}" "${MED[deploy_polls.$n]%.*}"
		printf '  %-10s terminate until state read terminated, then rmdir: %8s\n' "" "${MED[terminate.$n]}"
	done
	echo
	echo "every run (ms, in run order):"
	for n in "${SIZES[@]}"; do
		printf '  %-22s %s\n' "deploy $n nodes:" "$(list_ms "${SAMPLES[deploy.$n]}")"
	done
	printf '  %-22s %s\n' "exec (cclfs):" "$(list_ms "${SAMPLES[exec.cclfs]}")"
	printf '  %-22s %s\n' "bash loop:" "$(list_ms "${SAMPLES[exec.loop]}")"
	if [ "$CONC_RUNS" -gt 0 ]; then
		printf '  %-22s %s\n' "at once, alone:" "$(list_ms "${SAMPLES[concurrent.alone]}")"
		printf '  %-22s %s\n' "at once, ec2 stuck:" "$(list_ms "${SAMPLES[concurrent.stuck]}")"
	fi
} >"$TXT"

{
	echo "date,nproc,kernel,cclfs_version,measurement,nodes,clusters,runs,median,min,max,unit,target,result"
	for n in "${SIZES[@]}"; do
		tgt=
		[ "$n" = "$TARGET_DEPLOY_NODES" ] && tgt=$TARGET_DEPLOY_MS
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,deploy,$n,1,$DEPLOY_RUNS,${MED[deploy.$n]},${MIN[deploy.$n]},${MAX[deploy.$n]},ms,$tgt,${DEPLOY_RESULT[$n]}"
	done
	for n in "${SIZES[@]}"; do
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,terminate and rmdir,$n,1,$DEPLOY_RUNS,${MED[terminate.$n]},${MIN[terminate.$n]},${MAX[terminate.$n]},ms,,-"
	done
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,state poll interval,,,$POLL_WAITS,$POLL_MED,$POLL_MIN,$POLL_MAX,ms,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,exec true (cclfs),$EXEC_NODES,1,$EXEC_RUNS,${MED[exec.cclfs]},${MIN[exec.cclfs]},${MAX[exec.cclfs]},ms,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,bash loop sh -c true,$EXEC_NODES,,$EXEC_RUNS,${MED[exec.loop]},${MIN[exec.loop]},${MAX[exec.loop]},ms,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,exec fan-out ratio,$EXEC_NODES,1,$EXEC_RUNS,$EXEC_RATIO,,,x,$TARGET_EXEC_RATIO,$EXEC_RESULT"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,VmRSS just mounted,,0,1,$RSS_MOUNT,,,kB,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,VmRSS before deploying,,0,1,$RSS_BEFORE,,,kB,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,VmRSS all running,$RSS_NODES,$RSS_CLUSTERS,1,$RSS_AFTER,,,kB,$TARGET_RSS_KB,$RSS_RESULT"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,VmHWM all running,$RSS_NODES,$RSS_CLUSTERS,1,$HWM_AFTER,,,kB,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,VmRSS all removed,$RSS_NODES,0,1,$RSS_CLEAN,,,kB,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,deploy all until running,$RSS_NODES,$RSS_CLUSTERS,1,$RSS_DEPLOY_ALL_MS,,,ms,,-"
	echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,terminate and rmdir all,$RSS_NODES,$RSS_CLUSTERS,1,$RSS_TERMINATE_ALL_MS,,,ms,,-"
	if [ "$CONC_RUNS" -gt 0 ]; then
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,deploy at once until all running,$CONC_NODES,$CONC_CLUSTERS,$CONC_RUNS,${MED[concurrent.alone]},${MIN[concurrent.alone]},${MAX[concurrent.alone]},ms,,-"
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,deploy at once with an ec2 deploy stuck,$CONC_NODES,$CONC_CLUSTERS,$CONC_RUNS,${MED[concurrent.stuck]},${MIN[concurrent.stuck]},${MAX[concurrent.stuck]},ms,,-"
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,deploy at once ratio stuck/alone,$CONC_NODES,$CONC_CLUSTERS,$CONC_RUNS,$CONC_RATIO,,,x,$TARGET_CONC_RATIO,$CONC_RESULT"
	fi
} >"$CSV"

cat "$TXT"
echo
echo "written: $TXT, $CSV"
