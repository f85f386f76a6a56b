#!/usr/bin/env bash
# bench/fs_ops.sh: how much slower are ordinary file operations on a cclfs
# mount than on the same tree of plain files in tmpfs?
#
# It mounts cclfs in a fresh temporary directory with its own state
# directory, creates N contracts through the mount (mkdir, then a few values
# with echo), copies MOUNT/contracts into a tmpfs with `cp -r` so that both
# trees hold the same names and contents, and then times, in the same run
# and interleaved so both share the machine's noise:
#
#   ls -lR cold   `ls -lR DIR/contracts` with the kernel's dentry and
#                 attribute caches for the tree emptied first
#   ls -lR warm   the same command again, immediately
#   cat           `xargs -0 cat` over the list of every file (one list, made
#                 once before timing, so directory walking is not counted)
#   stat          `xargs -0 stat` over the same list
#
# and reports the median of each, the cclfs/tmpfs ratio, and whether the
# targets hold (cold ls -lR within 5x of tmpfs, warm within 2x). Results go
# to bench/results/fs_ops.txt and bench/results/fs_ops.csv (overwritten).
#
# A missed target is reported, not fatal: the exit status is non-zero only
# when the benchmark itself could not run (build missing, mount failed...).
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', plain sort order

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONTRACTS=200
RUNS=11
BIN=$REPO/build/cclfs
COLD=auto
OUT=$REPO/bench/results

# Targets: cclfs/tmpfs ratio a median must stay within.
TARGET_LS_COLD=5
TARGET_LS_WARM=2

usage() {
	cat <<EOF
usage: bench/fs_ops.sh [--contracts N] [--runs R] [--bin PATH]
                       [--cold auto|drop_caches|remount] [--out DIR]

Time ls -lR (cold and warm), cat and stat of every file of a cclfs mount
holding N contracts, against an identical tree of plain files in tmpfs.

  --contracts N   contracts to create (default $CONTRACTS)
  --runs R        timed runs of each command; the median is reported
                  (default $RUNS)
  --bin PATH      the cclfs binary (default build/cclfs of this repository)
  --cold MODE     how the caches are emptied before each cold ls -lR:
                  drop_caches  echo 2 > /proc/sys/vm/drop_caches (root only;
                               drops dentries and inodes of both trees)
                  remount      unmount and mount cclfs again (a fresh
                               daemon too); tmpfs gets drop_caches when
                               root can, else nothing
                  auto         drop_caches when writable, else remount
                  (default auto)
  --out DIR       where fs_ops.txt and fs_ops.csv go (default bench/results)
EOF
}

die() {
	echo "fs_ops.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--contracts) CONTRACTS=${2:?--contracts needs a number}; shift 2 ;;
	--contracts=*) CONTRACTS=${1#*=}; shift ;;
	--runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
	--runs=*) RUNS=${1#*=}; shift ;;
	--bin) BIN=${2:?--bin needs a path}; shift 2 ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--cold) COLD=${2:?--cold needs a mode}; shift 2 ;;
	--cold=*) COLD=${1#*=}; shift ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--out=*) OUT=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[[ $CONTRACTS =~ ^[1-9][0-9]*$ ]] || die "--contracts: not a positive integer: $CONTRACTS"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive integer: $RUNS"
case $COLD in auto | drop_caches | remount) ;; *) die "--cold: auto, drop_caches or remount, not $COLD" ;; esac
[ -x "$BIN" ] || die "$BIN: no such executable (build first: cmake -S $REPO -B $REPO/build && cmake --build $REPO/build)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
for tool in fusermount3 ls cat stat find xargs sort cp diff awk; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"

# ---------------------------------------------------------------- cleanup

WORK=
MNT=
TMPFS_ROOT=     # directory holding the plain tree
TMPFS_MOUNTED=0 # 1 when TMPFS_ROOT is our own tmpfs mount
SHM_DIR=        # our directory under /dev/shm when we could not mount
CCLFS_PID=
CCLFS_PIDS=()

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
	if [ "$TMPFS_MOUNTED" = 1 ]; then
		umount "$TMPFS_ROOT" 2>/dev/null || umount -l "$TMPFS_ROOT" 2>/dev/null || true
	fi
	[ -n "$SHM_DIR" ] && rm -rf --one-file-system "$SHM_DIR"
	# --one-file-system: never recurse into a mount that is still there
	# (rm in a cclfs mount resets values).
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
STATE=$WORK/state
LOG=$WORK/daemon.log
mkdir -p "$MNT" "$WORK/home"

cclfs_mount() {
	local i
	# HOME, cwd and the environment carry no stray cclfs.conf; exec keeps
	# the background job's pid the daemon's.
	(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME HOME="$WORK/home" \
		"$BIN" "$MNT" -f -o statedir="$STATE") >>"$LOG" 2>&1 3>&- &
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

cclfs_mount

# Contracts, each with a few values, written through the mount as a user
# would. Values vary so that files differ in size.
types=(PeerWorkers PeerWorkersMPI ManagerWorkers)
t0=${EPOCHREALTIME/./}
for ((i = 0; i < CONTRACTS; i++)); do
	c=$MNT/contracts/$(printf 'bench%04d' "$i")
	mkdir "$c" || die "mkdir $c failed"
	echo $((1 + i % 16)) >"$c/node_count"
	echo "atleast $((1 << (i % 6)))G" >"$c/node_memory_size"
	echo "${types[i % 3]}" >"$c/cluster_type"
done
t1=${EPOCHREALTIME/./}
SETUP_MS=$(awk -v us=$((t1 - t0)) 'BEGIN { printf "%.0f", us / 1000 }')

# ---------------------------------------------------------------- tmpfs

if [ "$(id -u)" = 0 ] && mkdir -p "$WORK/tmpfs" &&
	mount -t tmpfs -o size=1g,mode=0700 cclfs-bench "$WORK/tmpfs" 2>/dev/null; then
	TMPFS_ROOT=$WORK/tmpfs
	TMPFS_MOUNTED=1
	TMPFS_KIND="private tmpfs mount"
else
	[ -d /dev/shm ] || die "not root and no /dev/shm: no tmpfs to compare with"
	SHM_DIR=$(mktemp -d /dev/shm/cclfs-bench.XXXXXX)
	TMPFS_ROOT=$SHM_DIR
	TMPFS_KIND="/dev/shm"
fi
[ "$(stat -f -c %T "$TMPFS_ROOT")" = tmpfs ] || die "$TMPFS_ROOT is not on tmpfs"

cp -r "$MNT/contracts" "$TMPFS_ROOT/contracts"
diff -r "$MNT/contracts" "$TMPFS_ROOT/contracts" >/dev/null ||
	die "the tmpfs copy differs from the mount"

# The file lists for cat and stat, made once, in the same (sorted) order.
find "$MNT/contracts" -type f -print0 | sort -z >"$WORK/files.cclfs"
find "$TMPFS_ROOT/contracts" -type f -print0 | sort -z >"$WORK/files.tmpfs"
NFILES=$(tr -cd '\0' <"$WORK/files.tmpfs" | wc -c)
NDIRS=$(find "$TMPFS_ROOT/contracts" -type d | wc -l)
[ "$(tr -cd '\0' <"$WORK/files.cclfs" | wc -c)" = "$NFILES" ] ||
	die "the mount and the tmpfs copy do not hold the same number of files"

# ---------------------------------------------------------------- cold

can_drop_caches() {
	[ "$(id -u)" = 0 ] && { echo 2 >/proc/sys/vm/drop_caches; } 2>/dev/null
}
if [ "$COLD" = auto ]; then
	if can_drop_caches; then COLD=drop_caches; else COLD=remount; fi
fi
TMPFS_DROP=0
case $COLD in
drop_caches)
	can_drop_caches || die "--cold drop_caches: /proc/sys/vm/drop_caches is not writable (not root?)"
	TMPFS_DROP=1
	COLD_DESC="echo 2 > /proc/sys/vm/drop_caches before each cold ls -lR (cclfs and tmpfs)"
	;;
remount)
	if can_drop_caches; then
		TMPFS_DROP=1
		COLD_DESC="cclfs unmounted and mounted again before each cold ls -lR; tmpfs: echo 2 > /proc/sys/vm/drop_caches"
	else
		COLD_DESC="cclfs unmounted and mounted again before each cold ls -lR; tmpfs: nothing (not root, its dentries stay cached)"
	fi
	;;
esac

make_cold() { # cclfs|tmpfs
	if [ "$1" = cclfs ] && [ "$COLD" = remount ]; then
		cclfs_unmount
		cclfs_mount
	elif [ "$1" = cclfs ] || [ "$TMPFS_DROP" = 1 ]; then
		echo 2 >/proc/sys/vm/drop_caches
	fi
}

# ---------------------------------------------------------------- timing

OPS=(ls_cold ls_warm cat stat)
declare -A OP_NAME=([ls_cold]="ls -lR cold" [ls_warm]="ls -lR warm"
	[cat]="cat every file" [stat]="stat every file")
declare -A TARGET=([ls_cold]=$TARGET_LS_COLD [ls_warm]=$TARGET_LS_WARM)
declare -A SAMPLES=() # [fs.op] = "us us us ..."

# Run a command with its output discarded and add its wall time (us) to
# SAMPLES[key]. No subshell around it: the timer sees fork+exec of the
# command itself only, the same for both trees.
timed() { # key command...
	local key=$1 t0 t1
	shift
	t0=${EPOCHREALTIME/./}
	"$@" >/dev/null
	t1=${EPOCHREALTIME/./}
	SAMPLES[$key]+="$((t1 - t0)) "
}

run_fs() { # cclfs|tmpfs
	local fs=$1 dir list
	if [ "$fs" = cclfs ]; then dir=$MNT/contracts; else dir=$TMPFS_ROOT/contracts; fi
	list=$WORK/files.$fs
	make_cold "$fs"
	timed "$fs.ls_cold" ls -lR "$dir"
	timed "$fs.ls_warm" ls -lR "$dir"
	timed "$fs.cat" xargs -0 -a "$list" cat
	timed "$fs.stat" xargs -0 -a "$list" stat
}

echo "fs_ops: $CONTRACTS contracts, $NFILES files, $RUNS runs; cold: $COLD" >&2
# One untimed round first, so that both trees, the binaries and the
# daemon's lazily built values (candidates) start from the same state.
run_fs cclfs
run_fs tmpfs
SAMPLES=()
for ((r = 1; r <= RUNS; r++)); do
	# Alternate which goes first, so neither always follows the other.
	if ((r % 2)); then run_fs cclfs; run_fs tmpfs; else run_fs tmpfs; run_fs cclfs; fi
	echo "  run $r/$RUNS done" >&2
done
if [ "$COLD" = remount ]; then cclfs_mounted || die "cclfs is not mounted any more"; fi
kill -0 "$CCLFS_PID" 2>/dev/null || die "the cclfs daemon died during the benchmark"

# ---------------------------------------------------------------- report

median_ms() { # "us us us ..." -> median in ms, 2 decimals
	tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '
		{ v[NR] = $1 }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%.2f", m / 1000 }'
}
list_ms() { # "us us ..." -> "1.23 4.56 ..." in run order
	tr ' ' '\n' <<<"$1" | grep . | awk '{ printf "%s%.1f", (NR > 1 ? " " : ""), $1 / 1000 }'
}

mkdir -p "$OUT"
DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KERNEL=$(uname -r)
NPROC=$(nproc)
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
VERSION=$("$BIN" --version 2>&1 | head -1)
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && ! git -C "$REPO" diff --quiet HEAD -- 2>/dev/null; then
	COMMIT="$COMMIT (with uncommitted changes)"
fi

declare -A MED_C=() MED_T=() RATIO=() RESULT=()
for op in "${OPS[@]}"; do
	MED_C[$op]=$(median_ms "${SAMPLES[cclfs.$op]}")
	MED_T[$op]=$(median_ms "${SAMPLES[tmpfs.$op]}")
	RATIO[$op]=$(awk -v c="${MED_C[$op]}" -v t="${MED_T[$op]}" \
		'BEGIN { if (t > 0) printf "%.2f", c / t; else print "inf" }')
	if [ -n "${TARGET[$op]:-}" ]; then
		if awk -v r="${RATIO[$op]}" -v t="${TARGET[$op]}" 'BEGIN { exit !(r != "inf" && r <= t) }'; then
			RESULT[$op]=PASS
		else
			RESULT[$op]=FAIL
		fi
	else
		RESULT[$op]=-
	fi
done

TXT=$OUT/fs_ops.txt
CSV=$OUT/fs_ops.csv
{
	echo "cclfs benchmark: fs_ops (bench/fs_ops.sh)"
	echo
	echo "date:        $DATE"
	echo "machine:     $NPROC cores${CPU:+ ($CPU)}, Linux $KERNEL"
	echo "cclfs:       $VERSION, commit $COMMIT"
	echo "tree:        $CONTRACTS contracts, $NFILES files, $NDIRS directories under contracts/"
	echo "tmpfs:       $TMPFS_KIND, filled with cp -r MOUNT/contracts"
	echo "runs:        $RUNS per command (after one untimed round), cclfs and tmpfs interleaved; median"
	echo "cold:        $COLD_DESC"
	echo "commands:    ls -lR DIR/contracts >/dev/null (cold, then warm: again at once);"
	echo "             xargs -0 -a LIST cat >/dev/null; xargs -0 -a LIST stat >/dev/null"
	echo "             (LIST: every file of the tree, made once with find before timing)"
	echo "setup:       ${SETUP_MS} ms to create the $CONTRACTS contracts through the mount (mkdir + 3 echo each; not compared)"
	echo
	printf '%-16s %12s %12s %8s %8s %6s\n' operation "cclfs ms" "tmpfs ms" ratio target result
	for op in "${OPS[@]}"; do
		tgt=-
		[ -n "${TARGET[$op]:-}" ] && tgt="<= ${TARGET[$op]}x"
		printf '%-16s %12s %12s %7sx %8s %6s\n' "${OP_NAME[$op]}" "${MED_C[$op]}" \
			"${MED_T[$op]}" "${RATIO[$op]}" "$tgt" "${RESULT[$op]}"
	done
	echo
	echo "every run (ms, in run order):"
	for op in "${OPS[@]}"; do
		printf '  %-16s cclfs: %s\n' "${OP_NAME[$op]}" "$(list_ms "${SAMPLES[cclfs.$op]}")"
		printf '  %-16s tmpfs: %s\n' "" "$(list_ms "${SAMPLES[tmpfs.$op]}")"
	done
} >"$TXT"

{
	echo "date,nproc,kernel,cclfs_version,contracts,files,runs,cold_method,operation,cclfs_median_ms,tmpfs_median_ms,ratio,target_ratio,result"
	for op in "${OPS[@]}"; do
		echo "$DATE,$NPROC,$KERNEL,\"$VERSION\",$CONTRACTS,$NFILES,$RUNS,$COLD,$op,${MED_C[$op]},${MED_T[$op]},${RATIO[$op]},${TARGET[$op]:-},${RESULT[$op]}"
	done
} >"$CSV"

cat "$TXT"
echo
echo "written: $TXT, $CSV"
