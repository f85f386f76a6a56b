#!/usr/bin/env bash
# bench/files.sh: how fast is files/ of a node for the copies users make,
# against what they would use without cclfs?
#
#   big in / big out      cp of one BIG_MB file (default 1 GiB) into the
#                         directory and back out
#   small in / small out  tar of SMALL_N small files (default 10,000, 0 to
#                         8 KiB, 100 per directory) into the directory and
#                         back out (tar -cf - | tar -xf -)
#
# Contenders, all in one run, interleaved (the order alternates from round
# to round; the big file is copied in and back out by each contender before
# the next one's turn), ROUNDS rounds, medians reported:
#
#   local   files/ of a local node (clusters/L/nodes/0/files)
#   plain   a plain directory on the same file system as that node's
#           directory (the disk beneath)                       -> local/plain
#   ssh     files/ of a hosts node on an sshd test host (127.0.1.HOST_K,
#           this machine: tests/sshd/testhosts.bash)
#   sshfs   sshfs to a directory of the same test host         -> ssh/sshfs
#   scp     scp (the SFTP protocol since OpenSSH 9) of the file, scp -r of
#           the tree, to the same test host                    -> ssh/scp
#
# Targets (docs/performance.md): local within 1.5x of plain for the big
# file; ssh at least as fast as sshfs (ratio <= 1) for big and small.
# Results go to OUT/files.txt and OUT/files.csv (overwritten). A missed
# target is reported, not fatal.
#
# Knobs (environment): BIN (the cclfs binary, default build/cclfs), BIG_MB,
# SMALL_N, ROUNDS (default 4: even, so that both orders count alike),
# HOST_K (default 171), OUT (default bench/results), COMMIT (the commit
# BIN was built from, when it is not this tree's HEAD), QUIET_MS (default
# 2500, see settle). Needs root (sshd on port 22, statedir), sshfs and
# fusermount3.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$REPO/build/cclfs}
BIG_MB=${BIG_MB:-1024}
SMALL_N=${SMALL_N:-10000}
ROUNDS=${ROUNDS:-4}
HOST_K=${HOST_K:-171}
OUT=${OUT:-$REPO/bench/results}
TARGET_LOCAL_BIG=1.5
TARGET_SSH_SSHFS=1

die() {
	echo "files.sh: $*" >&2
	exit 1
}

QUIET_MS=${QUIET_MS:-2500}
for v in BIG_MB SMALL_N ROUNDS HOST_K; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v: not a positive integer: ${!v}"
done
[[ $QUIET_MS =~ ^[0-9]+$ ]] || die "QUIET_MS: not a number of milliseconds: $QUIET_MS"
[ "$HOST_K" -le 254 ] || die "HOST_K: at most 254"
[ "$(id -u)" = 0 ] || die "run as root: the test host is an sshd on port 22"
[ -x "$BIN" ] || die "no cclfs binary at $BIN (set BIN)"
for tool in sshfs scp ssh fusermount3 tar python3; do
	command -v "$tool" >/dev/null || die "$tool not found (sshfs: apt-get install sshfs)"
done
# shellcheck source=tests/sshd/testhosts.bash
source "$REPO/tests/sshd/testhosts.bash"
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)

# ---------------------------------------------------------------- cleanup

WORK='' MNT='' HOSTS='' CCLFS_PID='' SSHFS_PID='' SSHFS_MNT=''
HNAME=fbench$$         # the hosts cluster: /root/.cclfs/$HNAME on the host
REMOTE=/root/.cclfs-fbench-$$ # sshfs and scp targets on the host

mounted() { # dir
	[ -n "$1" ] && grep -qs " $1 fuse" /proc/self/mounts
}

stop_pid() { # pid
	[ -n "$1" ] || return 0
	for _ in $(seq 1 50); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	cd /
	if mounted "$SSHFS_MNT"; then
		fusermount3 -u "$SSHFS_MNT" 2>/dev/null || umount -l "$SSHFS_MNT" 2>/dev/null || true
	fi
	stop_pid "$SSHFS_PID"
	if mounted "$MNT"; then
		# the clusters' node directories go with them
		for c in L "$HNAME"; do
			if [ -d "$MNT/clusters/$c" ]; then
				echo terminated >"$MNT/clusters/$c/state" 2>/dev/null || true
			fi
		done
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	stop_pid "$CCLFS_PID"
	if [ -n "$HOSTS" ]; then
		testhosts_stop "$HOSTS" || rc=1
	fi
	rm -rf "/root/.cclfs/$HNAME" "$REMOTE"
	if [ -n "$WORK" ] && ! mounted "$MNT" && ! mounted "$SSHFS_MNT"; then
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/cclfs-files.XXXXXX")
MNT=$WORK/mnt
STATE=$WORK/state
SSHFS_MNT=$WORK/sshfs
HOSTS=$WORK/hosts
SRC=$WORK/src
BACK=$WORK/back
PLAIN=$WORK/plain
mkdir -p "$MNT" "$SSHFS_MNT" "$SRC/small" "$BACK" "$PLAIN" "$WORK/home"
export HOME=$WORK/home
unset CCLFS_CONFIG XDG_STATE_HOME

# ---------------------------------------------------------------- data

echo "  writing the data: $BIG_MB MiB file, $SMALL_N small files" >&2
head -c $((BIG_MB * 1048576)) /dev/urandom >"$SRC/big"
python3 - "$SRC/small" "$SMALL_N" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(17)
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randrange(0, 8193)))
EOF
SMALL_BYTES=$(du -sb "$SRC/small" | cut -f1)

# ---------------------------------------------------------------- mounts

wait_mounted() { # dir pid log: 10 s for the daemon PID to mount DIR
	for _ in $(seq 1 200); do
		mounted "$1" && return 0
		kill -0 "$2" 2>/dev/null || die "the daemon of $1 exited: $(cat "$3")"
		sleep 0.05
	done
	die "$1 was not mounted within 10 s"
}

ADDR=127.0.1.$HOST_K
testhosts_start "$HOSTS" 1 "$HOST_K" >&2 || die "the test host did not start"
SSH_CFG=$HOSTS/ssh_config
ssh -F "$SSH_CFG" "root@$ADDR" "mkdir -p $REMOTE/sshfs $REMOTE/scp" || die "ssh to $ADDR failed"

cat >"$WORK/cclfs.conf" <<EOF
[hosts]
user = "root"
keyfile = "$HOSTS/id_ed25519"
known_hosts = "$HOSTS/known_hosts"
[hosts.h0]
address = "$ADDR"
EOF
"$BIN" "$MNT" -f -o statedir="$STATE" -o config="$WORK/cclfs.conf" \
	>>"$WORK/daemon.log" 2>&1 3>&- &
CCLFS_PID=$!
wait_mounted "$MNT" "$CCLFS_PID" "$WORK/daemon.log"

deploy() { # name provider
	local c=$MNT/contracts/c$1 s
	mkdir "$c"
	echo "$2" >"$c/node_provider"
	echo 1 >"$c/node_count"
	echo "$1" >"$c/deploy"
	for _ in $(seq 1 600); do
		s=$(cat "$MNT/clusters/$1/state")
		[ "$s" = running ] && return 0
		[ "$s" = failed ] && die "cluster $1 failed: $(cat "$MNT/clusters/$1/error")"
		sleep 0.05
	done
	die "cluster $1 is $s after 30 s"
}
deploy L local
deploy "$HNAME" hosts
LOCAL=$MNT/clusters/L/nodes/0/files
SSHN=$MNT/clusters/$HNAME/nodes/0/files
# the plain directory is on the local node's file system
[ "$(stat -c %d "$PLAIN")" = "$(stat -c %d "$STATE")" ] || die "$PLAIN and $STATE are on different file systems"

sshfs -f -F "$SSH_CFG" "root@$ADDR:$REMOTE/sshfs" "$SSHFS_MNT" >>"$WORK/sshfs.log" 2>&1 3>&- &
SSHFS_PID=$!
wait_mounted "$SSHFS_MNT" "$SSHFS_PID" "$WORK/sshfs.log"

# ---------------------------------------------------------------- timing

declare -A DIR=([local]=$LOCAL [plain]=$PLAIN [ssh]=$SSHN [sshfs]=$SSHFS_MNT)
declare -A TIMES=() # "op contender" -> "ms ms ms"

# Memory this machine frees goes back to its host (virtio-balloon free
# page reporting), in passes about 2 s after it was freed, and memory taken
# back after that costs: writing 1 GiB into new pages of the page cache took
# 2.5-3.2 s with such pages and 0.3-0.5 s with pages just freed, and a copy
# that overlapped a pass took up to 5x longer. Where the kernel shows it,
# each operation waits until no pass has run for QUIET_MS (at most 20 s).
REPORTED=/sys/module/page_reporting/parameters/reported_kib
[ -r "$REPORTED" ] || REPORTED=''
reported() { # KiB handed back so far (0 without page reporting)
	if [ -n "$REPORTED" ]; then cat "$REPORTED"; else echo 0; fi
}
settle() {
	local last now start quiet_since
	sync
	[ -n "$REPORTED" ] && [ "$QUIET_MS" -gt 0 ] || return 0
	last=$(reported)
	start=${EPOCHREALTIME/./}
	quiet_since=$start
	while :; do
		sleep 0.1
		now=$(reported)
		if [ "$now" != "$last" ]; then
			last=$now
			quiet_since=${EPOCHREALTIME/./}
		fi
		((${EPOCHREALTIME/./} - quiet_since >= QUIET_MS * 1000)) && break
		((${EPOCHREALTIME/./} - start >= 20000000)) && break
	done
}
# An untimed write and removal of a file of the big file's size, right
# before each timed big copy, so that the copy takes pages just freed
# rather than pages the host took back. Written 4 MiB at a time: the page
# cache then holds it in large folios, whose pages serve a later write of
# any size. With cp (copy_file_range, small folios) before it, a write of
# 256 KiB or 1 MiB at a time still took pages the host had (1.0 and 1.8 s
# for 1 GiB against 0.45 s with 32 KiB writes); after this one, 0.4-0.5 s
# with each.
warm() {
	dd if="$SRC/big" of="$BACK/warm" bs=4M status=none && rm -f "$BACK/warm"
}
REPORT_HITS=0 # timed operations during which a pass ran

# Run one operation of one contender in round R, timed; what it leaves
# behind for the next operation stays, the rest is removed untimed.
run_op() { # op contender round
	local op=$1 who=$2 r=$3 d=${DIR[$2]:-} t0 t1 k0 k1 note=''
	settle
	[[ $op == big* ]] && warm
	k0=$(reported)
	t0=${EPOCHREALTIME/./}
	case $op/$who in
	big_in/scp) scp -q -F "$SSH_CFG" "$SRC/big" "root@$ADDR:$REMOTE/scp/big" ;;
	big_out/scp) scp -q -F "$SSH_CFG" "root@$ADDR:$REMOTE/scp/big" "$BACK/big" ;;
	small_in/scp) scp -q -r -F "$SSH_CFG" "$SRC/small" "root@$ADDR:$REMOTE/scp/small.$r" ;;
	small_out/scp) scp -q -r -F "$SSH_CFG" "root@$ADDR:$REMOTE/scp/small.$r" "$BACK/small" ;;
	big_in/*) cp "$SRC/big" "$d/big" ;;
	big_out/*) cp "$d/big" "$BACK/big" ;;
	small_in/*) mkdir "$d/small.$r" && tar -C "$SRC/small" -cf - . | tar -C "$d/small.$r" -xf - ;;
	small_out/*) mkdir "$BACK/small" && tar -C "$d/small.$r" -cf - . | tar -C "$BACK/small" -xf - ;;
	esac
	t1=${EPOCHREALTIME/./}
	k1=$(reported)
	if [ "$k1" != "$k0" ]; then
		REPORT_HITS=$((REPORT_HITS + 1))
		note=" ($(((k1 - k0) / 1024)) MiB handed back to the host meanwhile)"
	fi
	TIMES["$op $who"]+="$(((t1 - t0) / 1000)) "
	# checks, untimed
	case $op in
	big_out)
		cmp -s "$SRC/big" "$BACK/big" || die "$who: the big file came back different"
		rm -f "$BACK/big"
		if [ "$who" = scp ]; then
			ssh -F "$SSH_CFG" "root@$ADDR" "rm -f $REMOTE/scp/big"
		else
			rm -f "$d/big"
		fi
		;;
	small_out)
		[ "$(du -sb "$BACK/small" | cut -f1)" = "$SMALL_BYTES" ] ||
			die "$who: the small files came back with $(du -sb "$BACK/small" | cut -f1) bytes, not $SMALL_BYTES"
		rm -rf "$BACK/small"
		;;
	esac
	echo "  round $r $op $who: $(((t1 - t0) / 1000)) ms$note" >&2
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
CONTENDERS=(local plain ssh sshfs scp)
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${CONTENDERS[@]}")
	if ((r % 2 == 0)); then
		order=(scp sshfs ssh plain local)
	fi
	# The big file: each contender copies it in and back out (which
	# removes it) before the next one starts. Left in place for a later
	# phase, the copies in filled memory a gigabyte each, and a copy in
	# took up to 8x longer in the third place of a round than in the
	# first two, whoever made it (this machine's memory is handed back to
	# its host when freed and costs again when taken).
	for who in "${order[@]}"; do
		run_op big_in "$who" "$r"
		run_op big_out "$who" "$r"
	done
	for op in small_in small_out; do
		for who in "${order[@]}"; do
			run_op "$op" "$who" "$r"
		done
	done
done

median() { # numbers...
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END {
		if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---------------------------------------------------------------- report

DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KERNEL=$(uname -r)
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
VERSION=$("$BIN" --version 2>/dev/null | head -n 1 || echo unknown)
if [ -n "${COMMIT:-}" ]; then
	BUILT="commit $COMMIT"
else
	COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	BUILT="commit $COMMIT, $(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null | wc -l) files of the tree modified"
fi
SSHFS_VERSION=$(sshfs --version 2>&1 | grep -i '^sshfs version' || echo sshfs)
SSH_VERSION=$(ssh -V 2>&1 | cut -d, -f1)
declare -A MED=()
for key in "${!TIMES[@]}"; do
	read -r -a t <<<"${TIMES[$key]}"
	MED[$key]=$(median "${t[@]}")
done

mbps() { # op ms
	local bytes=$((BIG_MB * 1048576))
	[[ $1 == small* ]] && bytes=$SMALL_BYTES
	awk -v b="$bytes" -v ms="$2" 'BEGIN { printf "%.1f", b / 1048576 / (ms / 1000) }'
}

{
	echo "cclfs benchmark: files (bench/files.sh)"
	echo
	echo "date:        $DATE"
	echo "machine:     $(nproc) cores ($CPU), Linux $KERNEL"
	echo "cclfs:       $VERSION, $BUILT, $BIN"
	echo "data:        big: one $BIG_MB MiB file (random); small: $SMALL_N files of 0-8 KiB in $(((SMALL_N + 99) / 100)) directories, $SMALL_BYTES bytes"
	echo "commands:    big: cp SRC DIR/big, cp DIR/big BACK; small: tar -cf - . | tar -xf - into DIR/small.R and back"
	echo "             scp: scp FILE / scp -r TREE ($SSH_VERSION, SFTP protocol), each way"
	echo "contenders:  local = files/ of a local node; plain = a directory on the same file system"
	echo "             ssh = files/ of a hosts node on an sshd test host at $ADDR (this machine);"
	echo "             sshfs ($SSHFS_VERSION, default options) and scp to the same host"
	echo "rounds:      $ROUNDS, contenders interleaved (order reversed every other round), each contender's big copy in then out before the next's; before each operation sync and a wait for the host's memory reporting to be quiet for $QUIET_MS ms, before each big copy an untimed write (4 MiB at a time) and removal of a file of its size; median ms"
	if [ -n "$REPORTED" ]; then
		echo "memory:      freed memory is handed back to the host (free page reporting); a pass ran during $REPORT_HITS of $((ROUNDS * 20)) timed operations"
	else
		echo "memory:      no free page reporting"
	fi
	echo "load:        $LOAD_BEFORE before the rounds, $(cut -d' ' -f1-3 /proc/loadavg) after (1, 5, 15 min; others share the machine)"
	echo
	printf '%-10s %-8s %10s %9s   %-8s %10s %8s %8s %s\n' operation who ms MiB/s vs "their ms" ratio target result
} >"$OUT/files.txt"
echo "date,nproc,kernel,commit,big_mb,small_n,small_bytes,rounds,operation,contender,median_ms,mib_per_s,baseline,baseline_ms,ratio,target,result" >"$OUT/files.csv"

compare() { # op who baseline target
	local op=$1 who=$2 base=$3 target=$4 ms bms ratio result=-
	ms=${MED["$op $who"]}
	bms=${MED["$op $base"]}
	ratio=$(awk -v a="$ms" -v b="$bms" 'BEGIN { printf "%.2f", a / b }')
	if [ "$target" != - ]; then
		result=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r <= t) ? "PASS" : "FAIL" }')
	fi
	printf '%-10s %-8s %10s %9s   %-8s %10s %7sx %8s %s\n' "$op" "$who" "$ms" "$(mbps "$op" "$ms")" \
		"$base" "$bms" "$ratio" "$([ "$target" = - ] && echo - || echo "<= ${target}x")" "$result" >>"$OUT/files.txt"
	echo "$DATE,$(nproc),$KERNEL,$COMMIT,$BIG_MB,$SMALL_N,$SMALL_BYTES,$ROUNDS,$op,$who,$ms,$(mbps "$op" "$ms"),$base,$bms,$ratio,$target,$result" >>"$OUT/files.csv"
}

for op in big_in big_out small_in small_out; do
	target=-
	[[ $op == big* ]] && target=$TARGET_LOCAL_BIG
	compare "$op" local plain "$target"
	compare "$op" ssh sshfs "$TARGET_SSH_SSHFS"
	compare "$op" ssh scp -
	compare "$op" sshfs scp -
done
{
	echo
	echo "every run (ms, in round order):"
	for key in $(printf '%s\n' "${!TIMES[@]}" | tr ' ' ':' | sort); do
		printf '  %-18s %s\n' "${key/:/ }" "${TIMES[${key/:/ }]}"
	done
} >>"$OUT/files.txt"
cat "$OUT/files.txt"
