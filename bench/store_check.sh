#!/usr/bin/env bash
# bench/store_check.sh: what does the state store's check at mount cost?
#
# It mounts cclfs with a fresh state directory, creates N contracts through
# the mount (mkdir, then node_count, node_memory_size and node_provider with
# echo), deploys K local clusters of 2 nodes from K of them, waits until
# every one is running, runs one exec on each, and unmounts. On the state.db
# this leaves it then times, R runs each, and reports the median and the
# fastest run:
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

for arg in "$@"; do
	case $arg in -h | --help) usage; exit 0 ;; esac
done
# --NAME VALUE or --NAME=VALUE.
while [ $# -gt 0 ]; do
	case $1 in
	--*=*) opt=${1%%=*} val=${1#*=}; shift ;;
	--*) opt=$1 val=${2:?$1 needs a value}; shift 2 ;;
	*) usage >&2; exit 2 ;;
	esac
	case $opt in
	--contracts) CONTRACTS=$val ;;
	--clusters) CLUSTERS=$val ;;
	--runs) RUNS=$val ;;
	--bin) BIN=$val ;;
	--out) OUT=$val ;;
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

# Everything of this run: mnt/, state/, home/, the daemon's log.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-store-check.XXXXXX")
MNT=$WORK/mnt STATE=$WORK/state LOG=$WORK/daemon.log
mkdir -p "$MNT" "$WORK/home"

# Every mount goes to the background; unmounted, its daemon exits, and it
# holds the state directory's lock until it has.
unmount() {
	if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	[ ! -e "$STATE/lock" ] || flock -w 10 "$STATE/lock" true
}
on_exit() {
	local rc=$?
	trap - EXIT
	cd /
	unmount
	rm -rf --one-file-system "$WORK"
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_cclfs() {
	(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME HOME="$WORK/home" \
		"$BIN" "$MNT" -o statedir="$STATE") >>"$LOG" 2>&1 3>&- ||
		die "cclfs did not mount: $(tail -3 "$LOG")"
}

# ---------------------------------------------------------------- the store

mount_cclfs
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
unmount

DB=$STATE/state.db
DB_BYTES=$(stat -c %s "$DB")

# ---------------------------------------------------------------- timing

# Median of R runs of each SQLite operation, in ms.
read -r QUICK_MS QUICK_MIN FULL_MS FULL_MIN COPY_MS COPY_MIN PAGES ROWS < <(python3 - "$DB" "$RUNS" "$WORK/copy.db" <<'EOF'
import os, sqlite3, statistics, sys, time

db, runs, copy = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def timed(fn):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return "%.2f %.2f" % (statistics.median(out), min(out))

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
print("%s %s %s %d %d" % (timed(check("quick_check")),
                                timed(check("integrity_check")),
                                timed(backup), pages, rows))
EOF
)

# Whole mounts: cclfs returns once it is mounted and in the background.
mounts=()
for ((r = 0; r < RUNS; r++)); do
	t0=${EPOCHREALTIME/./}
	mount_cclfs
	t1=${EPOCHREALTIME/./}
	mounts+=($((t1 - t0)))
	unmount
done
read -r MOUNT_MS MOUNT_MIN < <(printf '%s\n' "${mounts[@]}" | sort -n |
	awk '{ v[NR] = $1 } END { printf "%.1f %.1f\n", v[int((NR + 1) / 2)] / 1000, v[1] / 1000 }')

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
	echo "runs:        $RUNS; the median, and the fastest (what it costs on"
	echo "             an idle machine: other jobs only ever add time)"
	echo
	printf '%-16s %10s %10s\n' operation "median ms" "min ms"
	printf '%-16s %10s %10s\n' quick_check "$QUICK_MS" "$QUICK_MIN"
	printf '%-16s %10s %10s\n' integrity_check "$FULL_MS" "$FULL_MIN"
	printf '%-16s %10s %10s\n' copy "$COPY_MS" "$COPY_MIN"
	printf '%-16s %10s %10s\n' mount "$MOUNT_MS" "$MOUNT_MIN"
	echo
	echo "quick_check is ${SHARE}% of a whole mount (medians)."
} >"$OUT/store_check.txt"
cat "$OUT/store_check.txt"
