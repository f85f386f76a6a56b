#!/usr/bin/env bash
# bench/resolve.sh: how long does resolving a contract take, inside the
# daemon and through a mounted cclfs?
#
# 1. Runs BUILD/bench/resolve_bench (bench/resolve_bench.c), which times
#    resolution_run and resolution_candidates in one process, on the real
#    catalog (1,815 types, 32,993 offers in 73 regions) and on a synthetic
#    catalog of 100,000 types offered in 30 regions each, checks the
#    targets (median of a resolve under 1 ms on the real catalog, under
#    50 ms on the synthetic one) and writes bench/results/resolve.txt and
#    resolve.csv.
# 2. Mounts BUILD/cclfs in a fresh temporary directory with its own state
#    directory and no configured AWS region (every region is considered),
#    creates contracts through the mount, and times with EPOCHREALTIME,
#    R runs each, interleaved:
#
#      touch resolve          `touch contracts/unique/resolve`
#                             (node_machinetype t3.xlarge, cluster_locale
#                             us-east-1)
#      cat candidates         `cat contracts/broad/candidates`
#                             (accelerator_count atleast 1: every offer of
#                             a type with an accelerator, in every region),
#                             the contract unchanged since the previous
#                             read; target: median under 20 ms
#      cat candidates changed the same right after accelerator_count was
#                             rewritten (untimed), alternately `atleast 1`
#                             and `1..1000`, which select the same types:
#                             whatever the daemon kept of candidates (its
#                             size for stat, at the time of writing) is
#                             dropped and computed again
#
#    and the same commands on plain files beside the mount (touch of an
#    empty file, cat of a copy of candidates), which is what starting the
#    command costs. It appends these rows to the results files.
#
# A missed target is reported, not fatal:
# the exit status is non-zero only when the benchmark could not run.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', plain sort order

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$REPO/build
RUNS=101
TARGET_CAT_US=20000 # cat candidates of contracts/broad, median
OUT=$REPO/bench/results
HARNESS_ARGS=()

usage() {
	cat <<EOF
usage: bench/resolve.sh [--build DIR] [--runs R] [--reps N] [--budget S]
                        [--types N] [--out DIR]

Time resolution inside one process (BUILD/bench/resolve_bench: real
catalog and a synthetic one of 100,000 types x 30 regions), then touch
resolve and cat candidates through a cclfs mount (BUILD/cclfs) on the real
catalog.

  --build DIR   the build directory holding cclfs and bench/resolve_bench
                (default build/ of this repository; nothing is built)
  --runs R      timed runs of each command through the mount; the median
                is reported (default $RUNS)
  --reps N      resolve_bench: most timed calls per line (default 2000)
  --budget S    resolve_bench: seconds per line, once it has 11 calls
                (default 3)
  --types N     resolve_bench: types in the synthetic catalog, each in
                30 regions (default 100000)
  --out DIR     where resolve.txt and resolve.csv go (default
                bench/results)
EOF
}

die() {
	echo "resolve.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=${2:?--build needs a directory}; shift 2 ;;
	--build=*) BUILD=${1#*=}; shift ;;
	--runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
	--runs=*) RUNS=${1#*=}; shift ;;
	--reps | --budget | --types)
		HARNESS_ARGS+=("$1" "${2:?$1 needs a number}"); shift 2 ;;
	--reps=* | --budget=* | --types=*)
		HARNESS_ARGS+=("${1%%=*}" "${1#*=}"); shift ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--out=*) OUT=${1#*=}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive integer: $RUNS"
[ -d "$BUILD" ] || die "$BUILD: no such build directory"
BUILD=$(cd "$BUILD" && pwd)
BIN=$BUILD/cclfs
HARNESS=$BUILD/bench/resolve_bench
HINT="build first: cmake -S $REPO -B $BUILD && cmake --build $BUILD"
[ -x "$BIN" ] || die "$BIN: no such executable ($HINT)"
[ -x "$HARNESS" ] || die "$HARNESS: no such executable ($HINT; the top-level CMakeLists.txt needs add_subdirectory(bench))"
for tool in fusermount3 touch cat cmp awk sort; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---------------------------------------------------------------- in one process

echo "resolve: in one process ($HARNESS)" >&2
"$HARNESS" "${HARNESS_ARGS[@]}" "$OUT" >/dev/null ||
	die "resolve_bench failed (status $?)"

# ---------------------------------------------------------------- cleanup

WORK=
MNT=
CCLFS_PID=

cclfs_mounted() {
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	cd /
	if [ -n "$MNT" ] && cclfs_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	if [ -n "$CCLFS_PID" ]; then
		# A daemon that is unmounting gets a moment to exit by itself.
		for _ in $(seq 1 50); do
			kill -0 "$CCLFS_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$CCLFS_PID" 2>/dev/null || true
		wait "$CCLFS_PID" 2>/dev/null || true
	fi
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

# ---------------------------------------------------------------- mount

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-bench.XXXXXX")
MNT=$WORK/mnt
STATE=$WORK/state
LOG=$WORK/daemon.log
PLAIN=$WORK/plain
mkdir -p "$MNT" "$WORK/home" "$PLAIN"

# HOME, cwd and the environment carry no stray cclfs.conf and no AWS
# region (ec2's configured region would restrict the contracts without
# cluster_locale to it); exec keeps the background job's pid the daemon's.
(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME -u AWS_REGION \
	-u AWS_DEFAULT_REGION -u AWS_PROFILE -u AWS_DEFAULT_PROFILE \
	AWS_CONFIG_FILE=/dev/null HOME="$WORK/home" \
	"$BIN" "$MNT" -f -o statedir="$STATE") >>"$LOG" 2>&1 3>&- &
CCLFS_PID=$!
for i in $(seq 1 200); do
	cclfs_mounted && break
	if ! kill -0 "$CCLFS_PID" 2>/dev/null; then
		cat "$LOG" >&2
		die "cclfs exited before mounting"
	fi
	[ "$i" = 200 ] && die "cclfs did not mount within 10 s"
	sleep 0.05
done

C=$MNT/contracts
mkdir "$C/unique" "$C/broad" "$C/all"
echo t3.xlarge >"$C/unique/node_machinetype"
echo us-east-1 >"$C/unique/cluster_locale"
echo "atleast 1" >"$C/broad/accelerator_count"

touch "$C/unique/resolve"
[ -z "$(cat "$C/unique/error")" ] || die "resolve failed: $(cat "$C/unique/error")"
RESOLUTION=$(cat "$C/unique/resolution")
[[ $RESOLUTION == *t3.xlarge*us-east-1* ]] || die "unexpected resolution: $RESOLUTION"
# Offers in the catalog: what an empty contract lists (minus the header;
# a type without regions, such as local, is one line too).
OFFERS=$(($(wc -l <"$C/all/candidates") - 1))
BROAD=$(($(wc -l <"$C/broad/candidates") - 1))

# The plain files: an empty one to touch, a copy of candidates to cat.
: >"$PLAIN/resolve"
cat "$C/broad/candidates" >"$PLAIN/candidates"
CAND_BYTES=$(wc -c <"$PLAIN/candidates")

# ---------------------------------------------------------------- timing

OPS=(touch cat cat_changed)
declare -A OP_NAME=([touch]="touch resolve" [cat]="cat candidates"
	[cat_changed]="cat candidates changed")
declare -A OP_CONTRACT=([touch]=unique [cat]=broad [cat_changed]=broad)
declare -A OP_BASE=([touch]=touch [cat]=cat [cat_changed]=cat)
declare -A SAMPLES=() # [cclfs.op or plain.touch/plain.cat] = "us us ..."

# Run a command with its output discarded and add its wall time (us) to
# SAMPLES[key]. No subshell around it: the timer sees fork+exec of the
# command itself only, the same for the mount and the plain files.
timed() { # key command...
	local key=$1 t0 t1
	shift
	t0=${EPOCHREALTIME/./}
	"$@" >/dev/null
	t1=${EPOCHREALTIME/./}
	SAMPLES[$key]+="$((t1 - t0)) "
}

ALT=("1..1000" "atleast 1")
run_once() { # run number
	timed cclfs.touch touch "$C/unique/resolve"
	timed plain.touch touch "$PLAIN/resolve"
	# Untimed: a new value that selects the same types.
	echo "${ALT[$1 % 2]}" >"$C/broad/accelerator_count"
	timed cclfs.cat_changed cat "$C/broad/candidates"
	timed cclfs.cat cat "$C/broad/candidates"
	timed plain.cat cat "$PLAIN/candidates"
}

echo "resolve: through the mount, $RUNS runs" >&2
run_once 0 # untimed round: binaries and caches warm
SAMPLES=()
for ((r = 1; r <= RUNS; r++)); do
	run_once "$r"
done
kill -0 "$CCLFS_PID" 2>/dev/null || die "the cclfs daemon died during the benchmark"
[ -z "$(cat "$C/unique/error" "$C/broad/error")" ] ||
	die "a contract has an error: $(cat "$C/unique/error" "$C/broad/error")"
cmp -s "$C/broad/candidates" "$PLAIN/candidates" ||
	die "candidates changed with the rewritten accelerator_count"
[ "$(cat "$C/unique/resolution")" = "$RESOLUTION" ] || die "the resolution changed"

# ---------------------------------------------------------------- report

stat_us() { # "us us ..." -> "median p90" (p90: nearest rank)
	tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '
		{ v[NR] = $1 }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      k = int(0.9 * NR); if (k < 0.9 * NR) k++
		      printf "%.1f %.1f", m, v[k] }'
}

DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KERNEL=$(uname -r)
NPROC=$(nproc)
VERSION=$("$BIN" --version 2>&1 | head -1)
VERSION=${VERSION#cclfs } # "0.1.0 (libfuse 3.14.0)"
CCLFS_VERSION=${VERSION%% *}
fstype() { # the file system a path is on: ext4, tmpfs...
	local t
	t=$(findmnt -n -o FSTYPE -T "$1" 2>/dev/null | head -1) || true
	[ -n "$t" ] || t=$(stat -f -c %T "$1")
	echo "$t"
}
STATE_FS=$(fstype "$STATE")
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && ! git -C "$REPO" diff --quiet HEAD -- 2>/dev/null; then
	COMMIT="$COMMIT (with uncommitted changes)"
fi

declare -A MED=() P90=()
for key in cclfs.touch cclfs.cat cclfs.cat_changed plain.touch plain.cat; do
	read -r MED[$key] P90[$key] <<<"$(stat_us "${SAMPLES[$key]}")"
done

# The target applies to `cat candidates` (unchanged) only.
target_us() { [ "$1" = cat ] && echo "$TARGET_CAT_US" || true; }
target_text() { [ "$1" = cat ] && echo "< $((TARGET_CAT_US / 1000)) ms" || echo -; }
ratio() {
	[ "$1" = cat ] || return 0
	awk -v a="${MED[cclfs.$1]}" -v t="$TARGET_CAT_US" 'BEGIN { printf "%.4f", a / t }'
}
result() {
	if [ "$1" != cat ]; then
		echo -
	elif awk -v a="${MED[cclfs.$1]}" -v t="$TARGET_CAT_US" 'BEGIN { exit !(a < t) }'; then
		echo PASS
	else
		echo FAIL
	fi
}

TXT=$OUT/resolve.txt
CSV=$OUT/resolve.csv
# The types of the real catalog, as resolve_bench counted them.
REAL_TYPES=$(awk -F, '$5 == "in-process" && $6 == "real" { print $7; exit }' "$CSV")
{
	echo
	echo "through the mount (bench/resolve.sh), real catalog:"
	echo
	echo "cclfs:       $VERSION, commit $COMMIT"
	echo "mount:       $BIN, fresh statedir on $STATE_FS (state.db: SQLite, WAL, synchronous=FULL)"
	echo "catalog:     contracts/all/candidates lists $OFFERS lines (offers, and the local type);"
	echo "             contracts/broad lists $BROAD ($CAND_BYTES bytes)"
	echo "runs:        $RUNS of each command (after one untimed round), interleaved;"
	echo "             EPOCHREALTIME around each command, output to /dev/null; median and p90"
	echo "plain:       the same command on a plain file in the same temporary directory"
	echo "             ($STATE_FS): touch of an empty file, cat of a copy of candidates"
	echo "target:      cat candidates (contracts/broad): median < $((TARGET_CAT_US / 1000)) ms, the whole command"
	echo
	printf '%-24s %-8s %6s %11s %11s %11s %11s %11s %8s %6s\n' operation contract runs \
		"median us" "p90 us" "plain us" "cclfs-plain" "cclfs/plain" target result
	for op in "${OPS[@]}"; do
		base=plain.${OP_BASE[$op]}
		printf '%-24s %-8s %6s %11s %11s %11s %11s %11s %8s %6s\n' "${OP_NAME[$op]}" \
			"${OP_CONTRACT[$op]}" "$RUNS" "${MED[cclfs.$op]}" "${P90[cclfs.$op]}" \
			"${MED[$base]}" "$(awk -v a="${MED[cclfs.$op]}" -v b="${MED[$base]}" \
				'BEGIN { printf "%.1f", a - b }')" \
			"$(awk -v a="${MED[cclfs.$op]}" -v b="${MED[$base]}" \
				'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" \
			"$(target_text "$op")" "$(result "$op")"
	done
	echo
	echo "resolution:  $(tr '\t' ' ' <<<"$RESOLUTION")" # one role: one line
} >>"$TXT"

{
	for op in "${OPS[@]}"; do
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,mount,real,$REAL_TYPES,${OP_NAME[$op]},${OP_CONTRACT[$op]},$RUNS,${MED[cclfs.$op]},${P90[cclfs.$op]},$(target_us "$op"),$(ratio "$op"),$(result "$op")"
	done
	for b in touch cat; do
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,plain-file,-,-,$b plain file,-,$RUNS,${MED[plain.$b]},${P90[plain.$b]},,,-"
	done
} >>"$CSV"

cat "$TXT"
echo
echo "written: $TXT, $CSV"
