#!/usr/bin/env bash
# bench/ec2_lifecycle.sh: how many EC2 API calls, and how much wall time,
# do deploy, interrupt, resume and terminate take for clusters of 1, 8 and
# 64 nodes?
#
# It starts the fake EC2 endpoint of tests/fakeec2 (every request's SigV4
# checked with botocore; each instance a real sshd on 127.0.2.k) with a
# fixed latency added to every call (LATENCY_MS, default 50 ms, as a far
# region's round trip), mounts cclfs on a fresh state directory, and for
# each N: deploys a PeerWorkers contract of N t3.micro nodes, interrupts,
# resumes and terminates it, each time from the write to the state file to
# the read of the state it reaches (state polled every 5 ms). The fake
# counts the calls of each transition (its call counters are reset in
# between). The fake's instances turn running after one DescribeInstances
# and once their sshd listens, stop and terminate after one more. The
# cluster of RESIZE_FROM nodes (default 8) is also grown to RESIZE_TO
# (default 64) and shrunk back between resume and terminate (`echo 64 >
# clusters/H/node_count`, then `echo running > clusters/H/wait`).
#
# What the issues ask: the calls per operation do not grow with N (except
# for pagination, 1000 instances per page), and a grow is one launch call
# (RunInstances:1 in its detail); results go to
# bench/results/ec2_lifecycle.txt and .csv (overwritten). Exit status is
# non-zero only when the benchmark could not run.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/build/cclfs
OUT=$REPO/bench/results
SIZES=${SIZES:-"1 8 64"}
LATENCY_MS=${LATENCY_MS:-50}
RESIZE_FROM=${RESIZE_FROM:-8}
RESIZE_TO=${RESIZE_TO:-64}

[ -x "$BIN" ] || {
	echo "build cclfs first (cmake --build build)" >&2
	exit 1
}
# shellcheck source=tests/sshd/testhosts.bash
source "$REPO/tests/sshd/testhosts.bash"

DIR=$(mktemp -d /tmp/cclfs-bench-ec2.XXXXXX)
MNT=$DIR/mnt
FAKE=$DIR/fake
mkdir -p "$MNT" "$FAKE"
CCLFS_PID=
FAKE_PID=

cleanup() {
	cd /
	if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" || true
	fi
	[ -z "$CCLFS_PID" ] || kill "$CCLFS_PID" 2>/dev/null || true
	[ -z "$FAKE_PID" ] || kill "$FAKE_PID" 2>/dev/null || true
	[ -z "$FAKE_PID" ] || wait "$FAKE_PID" 2>/dev/null || true
	[ ! -d "$FAKE/testhosts" ] || testhosts_stop "$FAKE/testhosts" || true
	rm -rf "$DIR"
}
trap cleanup EXIT

python3 "$REPO/tests/fakeec2/fake_ec2.py" --dir "$FAKE" --net 127.0.2 \
	--first 10 --credentials AKIDBENCH:bench-secret >"$DIR/fake.log" 2>&1 &
FAKE_PID=$!
for _ in $(seq 1 200); do
	[ -s "$FAKE/port" ] && break
	sleep 0.05
done
URL=http://127.0.0.1:$(cat "$FAKE/port")

fake() { # method path [json] -> response body
	python3 -c '
import sys, urllib.request
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
r = urllib.request.Request(sys.argv[2], data=data, method=sys.argv[1])
print(urllib.request.urlopen(r).read().decode())' "$1" "$URL$2" "${3:-}"
}

fake POST /_fake/settings "{\"latency_ms\": $LATENCY_MS}" >/dev/null
cat >"$DIR/cclfs.conf" <<EOF
[ec2]
endpoint_url = "$URL"
region = "us-east-1"
imageid = "ami-0bench"
user = "root"
poll_interval = "0.1"
poll_max = "0.5"
boot_timeout = "120"
EOF
export AWS_ACCESS_KEY_ID=AKIDBENCH AWS_SECRET_ACCESS_KEY=bench-secret
unset AWS_PROFILE AWS_SESSION_TOKEN
"$BIN" "$MNT" -f -o statedir="$DIR/state" -o config="$DIR/cclfs.conf" \
	>"$DIR/daemon.log" 2>&1 &
CCLFS_PID=$!
for _ in $(seq 1 200); do
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts && break
	sleep 0.05
done
cd "$MNT"

now_us() { echo "${EPOCHREALTIME/./}"; }

# Write $2 to $1, then wait for $1 to read $3; prints the milliseconds.
transition() {
	local file=$1 value=$2 want=$3 t0 s
	t0=$(now_us)
	echo "$value" >"$file"
	while :; do
		IFS= read -r s <"$file"
		[ "$s" = "$want" ] && break
		if [ "$s" = failed ]; then
			echo "failed: $(cat "${file%/*}/error")" >&2
			return 1
		fi
		sleep 0.005
	done
	echo $((($(now_us) - t0) / 1000))
}

calls() { # -> "total RunInstances:1 DescribeInstances:3 ..."
	fake GET /_fake/state | python3 -c '
import json, sys
c = json.load(sys.stdin)["calls"]
print(sum(c.values()), " ".join("%s:%d" % kv for kv in sorted(c.items())))'
}

printf 'N,operation,ms,calls,detail\n' >"$DIR/ec2_lifecycle.csv"
{
	echo "# bench/ec2_lifecycle.sh on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
	echo "# fake EC2 with ${LATENCY_MS} ms per call; times from the write to the state read"
	printf '%5s  %-10s %8s %6s  %s\n' N operation ms calls detail
} >"$DIR/ec2_lifecycle.txt"
for n in $SIZES; do
	mkdir "contracts/b$n"
	echo ec2 >"contracts/b$n/node_provider"
	echo t3.micro >"contracts/b$n/node_machinetype"
	echo "$n" >"contracts/b$n/node_count"
	ops="deploy interrupt resume terminate"
	[ "$n" != "$RESIZE_FROM" ] || ops="deploy interrupt resume grow shrink terminate"
	for op in $ops; do
		fake POST /_fake/reset-calls >/dev/null
		case $op in
		deploy)
			t0=$(now_us)
			echo "h$n" >"contracts/b$n/deploy"
			while [ ! -e "clusters/h$n/state" ]; do sleep 0.005; done
			while :; do
				IFS= read -r s <"clusters/h$n/state"
				[ "$s" = running ] && break
				[ "$s" != failed ] || {
					cat "clusters/h$n/error" >&2
					exit 1
				}
				sleep 0.005
			done
			ms=$((($(now_us) - t0) / 1000))
			;;
		interrupt) ms=$(transition "clusters/h$n/state" interrupted interrupted) ;;
		resume) ms=$(transition "clusters/h$n/state" resumed running) ;;
		terminate) ms=$(transition "clusters/h$n/state" terminated terminated) ;;
		grow | shrink)
			to=$RESIZE_TO
			[ "$op" = grow ] || to=$n
			t0=$(now_us)
			echo "$to" >"clusters/h$n/node_count"
			echo running >"clusters/h$n/wait"
			ms=$((($(now_us) - t0) / 1000))
			[ "$(ls "clusters/h$n/nodes" | wc -l)" = "$to" ] || {
				echo "$op: the cluster has $(ls "clusters/h$n/nodes" | wc -l) nodes, not $to" >&2
				exit 1
			}
			op="$op->$to"
			;;
		esac
		read -r total detail <<<"$(calls)"
		printf '%s,%s,%s,%s,%s\n' "$n" "$op" "$ms" "$total" "$detail" >>"$DIR/ec2_lifecycle.csv"
		printf '%5s  %-10s %8s %6s  %s\n' "$n" "$op" "$ms" "$total" "$detail" >>"$DIR/ec2_lifecycle.txt"
	done
	rmdir "clusters/h$n"
done
mkdir -p "$OUT"
cp "$DIR/ec2_lifecycle.csv" "$DIR/ec2_lifecycle.txt" "$OUT/"
cat "$OUT/ec2_lifecycle.txt"
