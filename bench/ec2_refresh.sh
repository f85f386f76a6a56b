#!/usr/bin/env bash
# bench/ec2_refresh.sh: how long does the ec2 provider's catalog refresh
# take, and how many API calls does it make, for 30 regions?
#
# It starts the fake EC2 endpoint of tests/fakeec2 (every request's SigV4
# checked with botocore; the fixture made from catalog/data: 1264 types,
# some 19,000 offers, their zones' spot history and the Price List's
# entries) with REGIONS regions enabled (default 30) and DELAY_MS added to
# every call (default "50 0": a far region's round trip, then none), and
# runs the refresh in-process (the driver mode of the unit test binary,
# tests/unit/test_ec2_catalog.c --refresh URL) RUNS times (default 3)
# after one warm-up run that is not counted (the fake renders its answers
# once, at their first request). Between runs the fake's call counters are
# reset; each run's calls are read back from the fake.
#
# Results go to bench/results/ec2_refresh.txt (overwritten). Exit status
# is non-zero only when the benchmark could not run.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BUILD:-$REPO/build}/tests/test_ec2_catalog
OUT=$REPO/bench/results/ec2_refresh.txt
REGIONS=${REGIONS:-30}
RUNS=${RUNS:-3}
DELAYS=${DELAY_MS:-"50 0"}

[ -x "$BIN" ] || {
	echo "build the tests first (cmake --build build): no $BIN" >&2
	exit 1
}

DIR=$(mktemp -d /tmp/cclfs-bench-ec2cat.XXXXXX)
FAKE_PID=

cleanup() {
	[ -z "$FAKE_PID" ] || kill "$FAKE_PID" 2>/dev/null || true
	[ -z "$FAKE_PID" ] || wait "$FAKE_PID" 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

# Start the fake with DELAY ms per call; sets URL.
fake_start() {
	rm -rf "$DIR/fake"
	python3 "$REPO/tests/fakeec2/fake_ec2.py" --dir "$DIR/fake" \
		--net 127.0.12 --regions "$REGIONS" --delay-ms "$1" \
		>"$DIR/fake.log" 2>&1 &
	FAKE_PID=$!
	for _ in $(seq 1 400); do
		[ -s "$DIR/fake/port" ] && break
		sleep 0.05
	done
	[ -s "$DIR/fake/port" ] || {
		cat "$DIR/fake.log" >&2
		exit 1
	}
	URL=http://127.0.0.1:$(cat "$DIR/fake/port")
}

fake_stop() {
	kill "$FAKE_PID" 2>/dev/null || true
	wait "$FAKE_PID" 2>/dev/null || true
	FAKE_PID=
}

control() { # method path
	python3 -c '
import sys, urllib.request
r = urllib.request.Request(sys.argv[1], data=b"{}" if sys.argv[2] != "GET"
                           else None, method=sys.argv[2])
print(urllib.request.urlopen(r, timeout=60).read().decode())' "$URL$2" "$1"
}

# The calls of the last run: "TOTAL (ACTION=N ...)".
calls() {
	control GET /_fake/state | python3 -c '
import json, sys
c = json.load(sys.stdin)["calls"]
print(sum(c.values()), " ".join("%s=%d" % kv for kv in sorted(c.items())))'
}

{
	echo "# ec2 catalog refresh against the fake EC2 endpoint"
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -m), $(nproc) CPUs;" \
		"$REGIONS regions, $RUNS runs per delay after a warm-up"
	printf '%-9s %-4s %9s %7s %7s %6s  %s\n' delay_ms run wall_ms types \
		offers calls "calls by action"
} >"$DIR/out"

for delay in $DELAYS; do
	fake_start "$delay"
	"$BIN" --refresh "$URL" >/dev/null
	for run in $(seq 1 "$RUNS"); do
		control POST /_fake/reset-calls >/dev/null
		line=$("$BIN" --refresh "$URL")
		read -r total by < <(calls)
		wall=${line#wall_ms=}
		wall=${wall%% *}
		types=${line#*types=}
		types=${types%% *}
		offers=${line#*offers=}
		offers=${offers%% *}
		printf '%-9s %-4s %9s %7s %7s %6s  %s\n' "$delay" "$run" \
			"$wall" "$types" "$offers" "$total" "$by" >>"$DIR/out"
	done
	fake_stop
done
mkdir -p "$(dirname "$OUT")"
cp "$DIR/out" "$OUT"
cat "$OUT"
