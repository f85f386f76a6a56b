#!/usr/bin/env bash
# bench/resize.sh: how long does a resize of a local cluster take, grown
# from 16 to 256 nodes and shrunk from 256 to 16, against deploying a
# cluster of that size from scratch?
#
# It mounts cclfs in a fresh temporary directory with its own state
# directory and, through the mount as a user would, ROUNDS times:
#
#   grow     `echo 256 > clusters/H/node_count` on a running cluster of 16,
#            then `echo running > clusters/H/wait` (returns when the new
#            ranks run and the hostfile is written): the time of both
#            writes together
#   shrink   `echo 16 > clusters/H/node_count` on the cluster of 256, then
#            the same wait
#   deploy   (the reference) `echo NAME > contracts/C/deploy` of 256 nodes,
#            then the same wait; terminated and removed after
#
# Rounds interleave grow/shrink and deploy (which goes first alternates);
# medians are reported. No target is set by the issue for these times: the
# numbers and the ratio grow/deploy (what adding 240 ranks costs against
# making 256) go to bench/results/resize.txt (overwritten). The ec2 resize
# (8 to 64 against the fake: calls and time) is measured by
# bench/ec2_lifecycle.sh. Exit status is non-zero only when the benchmark
# could not run.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$REPO/build/cclfs}
OUT=${OUT:-$REPO/bench/results}
ROUNDS=${ROUNDS:-5}
SMALL=${SMALL:-16}
BIG=${BIG:-256}

[ -x "$BIN" ] || {
	echo "build cclfs first (cmake --build build), or set BIN" >&2
	exit 1
}
DIR=$(mktemp -d /tmp/cclfs-bench-resize.XXXXXX)
MNT=$DIR/mnt
mkdir -p "$MNT" "$DIR/home"
PID=

cleanup() {
	cd /
	if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" || true
	fi
	[ -z "$PID" ] || kill "$PID" 2>/dev/null || true
	[ -z "$PID" ] || wait "$PID" 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

HOME=$DIR/home "$BIN" "$MNT" -f -o statedir="$DIR/state" >"$DIR/daemon.log" 2>&1 &
PID=$!
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

# ms of: write $2 to $1, then wait for running.
timed() {
	local t0
	t0=$(now_us)
	echo "$2" >"$1"
	echo running >"clusters/$3/wait"
	echo $((($(now_us) - t0) / 1000))
}

mkdir contracts/r contracts/d
for c in r d; do
	echo local >"contracts/$c/node_provider"
done
echo "$SMALL" >contracts/r/node_count
echo "$BIG" >contracts/d/node_count
echo r >contracts/r/deploy
echo running >clusters/r/wait

grow=() shrink=() deploy=()
run_resize() {
	grow+=("$(timed clusters/r/node_count "$BIG" r)")
	[ "$(ls clusters/r/nodes | wc -l)" -eq "$BIG" ]
	shrink+=("$(timed clusters/r/node_count "$SMALL" r)")
	[ "$(ls clusters/r/nodes | wc -l)" -eq "$SMALL" ]
}
run_deploy() {
	deploy+=("$(timed contracts/d/deploy "d$1" "d$1")")
	echo terminated >"clusters/d$1/state"
	echo terminated >"clusters/d$1/wait"
	rmdir "clusters/d$1"
}
for ((i = 0; i < ROUNDS; i++)); do
	if ((i % 2)); then
		run_deploy "$i"
		run_resize
	else
		run_resize
		run_deploy "$i"
	fi
done

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mg=$(median "${grow[@]}")
ms=$(median "${shrink[@]}")
md=$(median "${deploy[@]}")
mkdir -p "$OUT"
{
	echo "# bench/resize.sh on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "# commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown); local provider; $ROUNDS rounds, medians; ms from the write to the wait's return"
	printf '%-28s %8s   %s\n' operation ms "every run"
	printf '%-28s %8s   %s\n' "grow $SMALL -> $BIG" "$mg" "${grow[*]}"
	printf '%-28s %8s   %s\n' "shrink $BIG -> $SMALL" "$ms" "${shrink[*]}"
	printf '%-28s %8s   %s\n' "deploy $BIG (reference)" "$md" "${deploy[*]}"
	awk -v g="$mg" -v d="$md" 'BEGIN { printf "# grow / deploy of the same size: %.2fx\n", g / d }'
} | tee "$OUT/resize.txt"
