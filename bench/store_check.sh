#!/usr/bin/env bash
# bench/store_check.sh: what does the state store's check at mount cost?
#
# It mounts cclfs with a fresh state directory, creates N contracts through
# the mount (mkdir, then node_count, node_memory_size and node_provider with
# echo), deploys K local clusters of 2 nodes from K of them, waits until
# every one is running, runs one exec on each, and unmounts. On the state.db
# this leaves it then times, R runs each, and reports the median:
#
#   quick_check      PRAGMA quick_check, what cclfs runs at every mount
#                    (Python's sqlite3 module, on the same libsqlite3)
#   integrity_check  the full check (indexes against their tables too), for
#                    comparison
#   copy             the online backup of the store into a new file: the
#                    last-good copy taken after each good check
#   mount            `cclfs MOUNT` from start until it returns (mounted and
#                    gone to the background): the check, loading every
#                    contract and cluster, the copy and the mount itself
#
# Results go to bench/results/store_check.txt (overwritten). The exit status
# is non-zero only when the benchmark itself could not run.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', plain sort order

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONTRACTS=1000
CLUSTERS=100
RUNS=11
BIN=$REPO/build/cclfs
OUT=$REPO/bench/results

usage() {
	cat <<EOF
usage: bench/store_check.sh [--contracts N] [--clusters K] [--runs R]
                            [--bin PATH] [--out DIR]

Time the state store's check at mount (PRAGMA quick_check), the full
integrity_check, the last-good copy, and a whole mount, on a store of N
contracts and K local clusters made through a cclfs mount.

  --contracts N   contracts to create (default $CONTRACTS)
  --clusters K    local clusters of 2 nodes to deploy (default $CLUSTERS,
                  at most N)
  --runs R        timed runs of each; the median is reported (default $RUNS)
  --bin PATH      the cclfs binary (default build/cclfs of this repository)
  --out DIR       where store_check.txt goes (default bench/results)
EOF
}

die() {
	echo "store_check.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--contracts) CONTRACTS=${2:?--contracts needs a number}; shift 2 ;;
	--contracts=*) CONTRACTS=${1#*=}; shift ;;
	--clusters) CLUSTERS=${2:?--clusters needs a number}; shift 2 ;;
	--clusters=*) CLUSTERS=${1#*=}; shift ;;
	--runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
	--runs=*) RUNS=${1#*=}; shift ;;
	--bin) BIN=${2:?--bin needs a path}; shift 2 ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--out=*) OUT=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[[ $CONTRACTS =~ ^[1-9][0-9]*$ ]] || die "--contracts: not a positive integer: $CONTRACTS"
[[ $CLUSTERS =~ ^[0-9]+$ ]] || die "--clusters: not a number: $CLUSTERS"
[ "$CLUSTERS" -le "$CONTRACTS" ] || die "--clusters: at most --contracts ($CONTRACTS)"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive integer: $RUNS"
[ -x "$BIN" ] || die "$BIN: no such executable (build first: cmake -S $REPO -B $REPO/build && cmake --build $REPO/build)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
for tool in fusermount3 flock python3 awk sort; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
python3 -c 'import sqlite3' 2>/dev/null || die "python3 has no sqlite3 module"
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"

# ---------------------------------------------------------------- cleanup

WORK=
MNT=
CCLFS_PIDS=()

cclfs_mounted() {
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts
}

# The foreground daemon is killed by pid if it does not exit; those the
# timed mounts sent to the background exit when unmounted.
cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	cd /
	if [ -n "$MNT" ] && cclfs_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	for pid in "${CCLFS_PIDS[@]}"; do
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$WORK" ] && ! { [ -n "$MNT" ] && cclfs_mounted; }; then
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-bench.XXXXXX")
MNT=$WORK/mnt
STATE=$WORK/state
LOG=$WORK/daemon.log
mkdir -p "$MNT" "$WORK/home"

run_cclfs() {
	(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME HOME="$WORK/home" \
		"$BIN" "$MNT" -o statedir="$STATE" "$@") >>"$LOG" 2>&1 3>&-
}

cclfs_mount_fg() {
	local pid i
	run_cclfs -f &
	pid=$!
	CCLFS_PIDS+=("$pid")
	for i in $(seq 1 400); do
		cclfs_mounted && { CCLFS_PID=$pid; return 0; }
		kill -0 "$pid" 2>/dev/null || { cat "$LOG" >&2; die "cclfs exited before mounting"; }
		sleep 0.05
	done
	die "cclfs did not mount within 20 s"
}

# ---------------------------------------------------------------- the store

cclfs_mount_fg
t0=${EPOCHREALTIME/./}
for ((i = 0; i < CONTRACTS; i++)); do
	c=$MNT/contracts/$(printf 'bench%04d' "$i")
	mkdir "$c" || die "mkdir $c failed"
	echo 2 >"$c/node_count"
	echo "atleast $((1 << (i % 6)))M" >"$c/node_memory_size"
	echo local >"$c/node_provider"
done
for ((i = 0; i < CLUSTERS; i++)); do
	printf 'h%04d\n' "$i" >"$MNT/contracts/$(printf 'bench%04d' "$i")/deploy" ||
		die "deploy $i failed: $(cat "$MNT/contracts/$(printf 'bench%04d' "$i")/error")"
done
for ((i = 0; i < CLUSTERS; i++)); do
	h=$(printf 'h%04d' "$i")
	for _ in $(seq 1 1200); do
		s=$(cat "$MNT/clusters/$h/state")
		[ "$s" = running ] && break
		[ "$s" = failed ] && die "cluster $h failed: $(cat "$MNT/clusters/$h/error")"
		sleep 0.05
	done
	[ "$s" = running ] || die "cluster $h is $s after 60 s"
	echo true >"$MNT/clusters/$h/exec" || die "exec on $h failed"
done
t1=${EPOCHREALTIME/./}
SETUP_S=$(awk -v us=$((t1 - t0)) 'BEGIN { printf "%.1f", us / 1e6 }')
fusermount3 -u "$MNT"
wait "$CCLFS_PID" || die "cclfs exited with status $? on unmount"

DB=$STATE/state.db
DB_BYTES=$(stat -c %s "$DB")

# ---------------------------------------------------------------- timing

# Median of R runs of each SQLite operation, in ms.
read -r QUICK_MS FULL_MS COPY_MS PAGES ROWS < <(python3 - "$DB" "$RUNS" "$WORK/copy.db" <<'EOF'
import os, sqlite3, statistics, sys, time

db, runs, copy = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def timed(fn):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)

def check(pragma):
    def run():
        c = sqlite3.connect(db)
        r = c.execute("PRAGMA %s" % pragma).fetchall()
        c.close()
        if r != [("ok",)]:
            sys.exit("%s: %r" % (pragma, r[:3]))
    return run

def backup():
    if os.path.exists(copy):
        os.unlink(copy)
    src = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    dst = sqlite3.connect(copy)
    src.backup(dst)
    dst.close()
    src.close()

c = sqlite3.connect(db)
pages = c.execute("PRAGMA page_count").fetchone()[0]
rows = sum(c.execute("SELECT count(*) FROM %s" % t).fetchone()[0]
           for t in ("contracts", "contract_values", "clusters", "nodes", "log"))
c.close()
print("%.2f %.2f %.2f %d %d" % (timed(check("quick_check")),
                                timed(check("integrity_check")),
                                timed(backup), pages, rows))
EOF
)

# Whole mounts: cclfs returns once it is mounted and in the background.
mounts=()
for ((r = 0; r < RUNS; r++)); do
	t0=${EPOCHREALTIME/./}
	run_cclfs || die "cclfs refused to mount (log: $(tail -3 "$LOG"))"
	t1=${EPOCHREALTIME/./}
	mounts+=($((t1 - t0)))
	fusermount3 -u "$MNT" || die "fusermount3 -u $MNT failed"
	# The daemon holds the lock of the state directory until it exits.
	for _ in $(seq 1 200); do
		flock -n "$STATE/lock" true && break
		sleep 0.05
	done
done
MOUNT_MS=$(printf '%s\n' "${mounts[@]}" | sort -n |
	awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] / 1000 }')

# ---------------------------------------------------------------- report

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
FS=$(stat -f -c %T "$STATE")
SHARE=$(awk -v q="$QUICK_MS" -v m="$MOUNT_MS" 'BEGIN { printf "%.1f", 100 * q / m }')
mkdir -p "$OUT"
{
	echo "store_check: the state store's check at mount"
	echo
	echo "date:        $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine:     $CPU, $(nproc) CPUs; state directory on $FS"
	echo "sqlite:      $(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)')"
	echo "store:       $CONTRACTS contracts, $CLUSTERS local clusters of 2 nodes" \
		"(one exec each): $DB_BYTES bytes, $PAGES pages, $ROWS rows"
	echo "setup:       ${SETUP_S} s through the mount"
	echo "runs:        $RUNS, median reported"
	echo
	printf '%-16s %10s\n' operation "median ms"
	printf '%-16s %10s\n' quick_check "$QUICK_MS"
	printf '%-16s %10s\n' integrity_check "$FULL_MS"
	printf '%-16s %10s\n' copy "$COPY_MS"
	printf '%-16s %10s\n' mount "$MOUNT_MS"
	echo
	echo "quick_check is ${SHARE}% of a whole mount."
} >"$OUT/store_check.txt"
cat "$OUT/store_check.txt"
