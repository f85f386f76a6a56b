#!/usr/bin/env bash
# bench/gcp_lifecycle.sh: how many Compute Engine API calls, and how much
# wall time, do deploy, interrupt, resume and terminate take for clusters of
# 1, 8 and 64 nodes?
#
# It starts the fake Google endpoint of tests/fakegce (every JWT's signature
# and every Bearer token checked; each instance a real sshd on 127.0.7.k)
# trusting a service account key it writes, adds a fixed latency to every
# Compute call (LATENCY_MS, default 50 ms, as a far region's round trip: a
# fault with delay_ms and no reason on every path, for ever), mounts cclfs
# on a fresh state directory, and for each N: deploys a PeerWorkers contract
# of N e2-standard-2 nodes, interrupts, resumes and terminates it, each time
# from the write to the state file to the read of the state it reaches
# (state polled every 5 ms). The fake counts the calls of each transition
# (its call counters are reset in between); the token endpoint is not
# delayed, its tokens are counted apart. The fake's operations end OP_MS
# (default 300, the fake's own) after they are made and once what they wait
# for is over (an sshd started or killed); its instances turn RUNNING once
# their sshd listens and two reads or OP_MS have passed. It listens with a
# backlog of 128 (64 calls at once never wait for TCP's retransmissions).
#
# What the issue asks: the calls that act (bulkInsert, stop, start, delete)
# are issued in parallel, and the wall time of interrupt and terminate at 64
# nodes is within 2x of that at 1. "serial ms" is calls x LATENCY_MS, what
# the calls alone would take one after the other; "load" is the 1-minute
# load average as the operation starts (other work on the machine slows it,
# runs at different loads do not compare). Results go to
# bench/results/gcp_lifecycle.txt and .csv (overwritten). Exit status is
# non-zero only when the benchmark could not run.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$REPO/build/cclfs}
OUT=$REPO/bench/results
SIZES=${SIZES:-"1 8 64"}
LATENCY_MS=${LATENCY_MS:-50}
OP_MS=${OP_MS:-300}
PROJECT=cclfs-bench

[ -x "$BIN" ] || {
	echo "build cclfs first (cmake --build build), or set BIN" >&2
	exit 1
}
# shellcheck source=tests/sshd/testhosts.bash
source "$REPO/tests/sshd/testhosts.bash"

DIR=$(mktemp -d /tmp/cclfs-bench-gcp.XXXXXX)
MNT=$DIR/mnt
FAKE=$DIR/fake
KEY=$DIR/key.json
mkdir -p "$MNT" "$FAKE"
CCLFS_PID=
FAKE_PID=

cleanup() {
	cd /
	if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" || true
	fi
	[ -z "$CCLFS_PID" ] || kill "$CCLFS_PID" 2>/dev/null || true
	[ -z "$CCLFS_PID" ] || wait "$CCLFS_PID" 2>/dev/null || true
	[ -z "$FAKE_PID" ] || kill "$FAKE_PID" 2>/dev/null || true
	[ -z "$FAKE_PID" ] || wait "$FAKE_PID" 2>/dev/null || true
	[ ! -d "$FAKE/testhosts" ] || testhosts_stop "$FAKE/testhosts" || true
	rm -rf "$DIR"
}
trap cleanup EXIT

GCE_PY=$REPO/tests/fakegce/fake_gce.py
python3 "$GCE_PY" --dir "$FAKE" --net 127.0.7 --first 10 --project "$PROJECT" \
	--service-account "$KEY" >"$DIR/fake.log" 2>&1 &
FAKE_PID=$!
for _ in $(seq 1 200); do
	[ -s "$FAKE/port" ] && break
	sleep 0.05
done
[ -s "$FAKE/port" ] || {
	cat "$DIR/fake.log" >&2
	exit 1
}
URL=http://127.0.0.1:$(cat "$FAKE/port")
python3 "$GCE_PY" --make-key "$KEY" \
	--email "cclfs@$PROJECT.iam.gserviceaccount.com" \
	--project "$PROJECT" --token-uri "$URL/token"

fake() { # method path [json] -> response body
	python3 -c '
import sys, urllib.request
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
r = urllib.request.Request(sys.argv[2], data=data, method=sys.argv[1])
print(urllib.request.urlopen(r).read().decode())' "$1" "$URL$2" "${3:-}"
}

fake POST /_fake/settings "{\"op_ms\": $OP_MS}" >/dev/null
fake POST /_fake/faults \
	"{\"path_re\": \".*\", \"count\": -1, \"delay_ms\": $LATENCY_MS}" >/dev/null
cat >"$DIR/cclfs.conf" <<EOF
[gcp]
endpoint = "$URL/compute/v1/"
region = "us-central1"
user = "root"
poll_interval = "0.1"
poll_max = "0.5"
boot_timeout = "120"
EOF
unset CLOUDSDK_CORE_PROJECT GOOGLE_CLOUD_PROJECT CLOUDSDK_COMPUTE_ZONE \
	CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE CLOUDSDK_CONFIG \
	CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING
export GOOGLE_APPLICATION_CREDENTIALS=$KEY
# No metadata server is asked.
export GCE_METADATA_HOST=127.0.0.1:9
"$BIN" "$MNT" -f -o statedir="$DIR/state" -o config="$DIR/cclfs.conf" \
	>"$DIR/daemon.log" 2>&1 &
CCLFS_PID=$!
for _ in $(seq 1 200); do
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts && break
	sleep 0.05
done
grep -qs " $MNT fuse.cclfs " /proc/self/mounts || {
	cat "$DIR/daemon.log" >&2
	exit 1
}
cd "$MNT"

now_us() { echo "${EPOCHREALTIME/./}"; }

fail() { # cluster: say why it failed, then stop
	echo "clusters/$1 failed: $(cat "clusters/$1/error")" >&2
	exit 1
}

# Write $2 to $1, then wait for $1 to read $3; prints the milliseconds.
transition() {
	local file=$1 value=$2 want=$3 t0 s
	t0=$(now_us)
	echo "$value" >"$file"
	while :; do
		IFS= read -r s <"$file"
		[ "$s" = "$want" ] && break
		[ "$s" != failed ] || return 1
		sleep 0.005
	done
	echo $((($(now_us) - t0) / 1000))
}

# The Compute calls since the last reset and the tokens issued since
# $1: "total tokens POST stop:64 ..." (a template's space as "_").
calls() {
	fake GET /_fake/state | python3 -c '
import json, sys
s = json.load(sys.stdin)
c = s["compute"]["calls"]
print(sum(c.values()), s["tokens_issued"] - int(sys.argv[1]),
      " ".join("%s:%d" % (k.replace(" ", "_"), v) for k, v in sorted(c.items())))' "$1"
}

tokens() {
	fake GET /_fake/state | python3 -c '
import json, sys
print(json.load(sys.stdin)["tokens_issued"])'
}

printf 'N,operation,ms,calls,serial_ms,tokens,load,detail\n' >"$DIR/gcp_lifecycle.csv"
{
	echo "# bench/gcp_lifecycle.sh on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
		"load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# fake Compute Engine with ${LATENCY_MS} ms per call, operations ${OP_MS} ms;" \
		"times from the write to the state read"
	echo "# serial ms: calls x ${LATENCY_MS} ms; tokens: tokens issued (not delayed);" \
		"load: 1-minute load average at the start"
	printf '%5s  %-10s %8s %6s %9s %6s %5s  %s\n' N operation ms calls 'serial ms' tokens \
		load detail
} >"$DIR/gcp_lifecycle.txt"
for n in $SIZES; do
	mkdir "contracts/b$n"
	echo gcp >"contracts/b$n/node_provider"
	echo e2-standard-2 >"contracts/b$n/node_machinetype"
	echo "$n" >"contracts/b$n/node_count"
	for op in deploy interrupt resume terminate; do
		fake POST /_fake/reset-calls >/dev/null
		t=$(tokens)
		load=$(cut -d' ' -f1 /proc/loadavg)
		case $op in
		deploy)
			t0=$(now_us)
			echo "h$n" >"contracts/b$n/deploy"
			while [ ! -e "clusters/h$n/state" ]; do sleep 0.005; done
			while :; do
				IFS= read -r s <"clusters/h$n/state"
				[ "$s" = running ] && break
				[ "$s" != failed ] || fail "h$n"
				sleep 0.005
			done
			ms=$((($(now_us) - t0) / 1000))
			;;
		interrupt) ms=$(transition "clusters/h$n/state" interrupted interrupted) || fail "h$n" ;;
		resume) ms=$(transition "clusters/h$n/state" resumed running) || fail "h$n" ;;
		terminate) ms=$(transition "clusters/h$n/state" terminated terminated) || fail "h$n" ;;
		esac
		read -r total tok detail <<<"$(calls "$t")"
		serial=$((total * LATENCY_MS))
		printf '%s,%s,%s,%s,%s,%s,%s,%s\n' "$n" "$op" "$ms" "$total" "$serial" "$tok" \
			"$load" "$detail" >>"$DIR/gcp_lifecycle.csv"
		printf '%5s  %-10s %8s %6s %9s %6s %5s  %s\n' "$n" "$op" "$ms" "$total" "$serial" \
			"$tok" "$load" "$detail" >>"$DIR/gcp_lifecycle.txt"
	done
	rmdir "clusters/h$n"
done

# The goal: interrupt and terminate at the largest N within 2x of the
# smallest.
{
	read -r first _ <<<"$SIZES"
	last=${SIZES##* }
	for op in interrupt terminate; do
		a=$(awk -F, -v n="$first" -v o="$op" '$1 == n && $2 == o { print $3 }' \
			"$DIR/gcp_lifecycle.csv")
		b=$(awk -F, -v n="$last" -v o="$op" '$1 == n && $2 == o { print $3 }' \
			"$DIR/gcp_lifecycle.csv")
		awk -v a="$a" -v b="$b" -v o="$op" -v f="$first" -v l="$last" 'BEGIN {
			r = a > 0 ? b / a : 0
			printf "# %s: %d ms at N = %s, %d ms at N = %s: %.2fx (goal <= 2x): %s\n",
				o, a, f, b, l, r, r <= 2 ? "PASS" : "FAIL" }'
	done
	echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$DIR/gcp_lifecycle.txt"
mkdir -p "$OUT"
cp "$DIR/gcp_lifecycle.csv" "$DIR/gcp_lifecycle.txt" "$OUT/"
cat "$OUT/gcp_lifecycle.txt"
