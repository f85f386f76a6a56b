#!/usr/bin/env bash
# bench/exec_fanout.sh: how fast does cclfs run one command on every host of
# a hosts-provider cluster, next to the usual parallel-ssh tools?
#
# It starts real OpenSSH test hosts on this machine (tests/sshd/testhosts.bash:
# host k is an sshd on 127.0.1.k:22 with a generated key and known_hosts) and
# runs `hostname` on 8, 32 and 64 of them, in one run, through:
#
#   (a) cclfs     a cclfs.conf listing the hosts, a contract with
#                 node_provider hosts and node_count N, deployed and polled
#                 until `running`; then `echo hostname > clusters/H/exec`
#                 (returns when every host has run it). The cluster is
#                 deployed, cclfs unmounted and mounted again, and the
#                 first exec after that mount (cold: no session open, each
#                 connects, exchanges keys and logs in) is timed once and
#                 reported on its own; the timed runs come after it (warm
#                 sessions).
#   (b) pdsh      pdsh -R ssh -f N -w 127.0.1.[1-N] hostname, with
#                 PDSH_SSH_ARGS_APPEND giving the key, known_hosts,
#                 BatchMode and -o KexAlgorithms=curve25519-sha256.
#   (c) clush     clush -f N -w 127.0.1.[1-N] -o "<the same options>" hostname
#   (d) loop      for h in ...; do ssh -o ControlPath=... root@$h hostname &
#                 done; wait $pids -- through ControlMaster connections (one
#                 per host, ControlMaster=auto, ControlPersist) opened before
#                 any timing, with the same options.
#
# (In PDSH_SSH_ARGS_APPEND and clush -o a literal % would have to be written
# %%; these options have none.) The test hosts offer no post-quantum key
# exchange and have delayed ACKs off on 127.0.1.0/24 (see testhosts.bash), so
# a new connection costs the same with every client and no 40 ms ACK stalls;
# TESTHOSTS_QUICKACK=0 in the environment measures with the stalls (the
# report says whether the route was there).
#
# Every method's output is checked before its times count: N lines, the
# machine's hostname on each (every test host shares this machine's name),
# hosts 127.0.1.1..N once each for pdsh and clush, ranks 0..N-1 once each
# ("RANK: hostname") for cclfs, read back both on a read-write descriptor of
# exec and from exec after every timed run. Per size, R rounds, each running
# every method once; which method goes first rotates from round to round.
# Wall time of each run from EPOCHREALTIME; medians and minimums reported.
#
# Targets at 64 hosts: (a) at least 5x faster than (b) (median pdsh / median
# cclfs >= 5), and (a) not slower than (d) (median cclfs <= median loop).
# Results go to bench/results/exec_fanout.txt and bench/results/exec_fanout.csv
# (overwritten).
#
# A missed target is reported, not fatal, and so is cclfs being unavailable
# (the build missing, or mount, resolve or deploy failing): (b)-(d) still run
# and (a) is reported as unavailable with the reason. The exit status is
# non-zero only when the benchmark itself could not run (no test hosts, a
# tool missing, wrong output from (b)-(d)...).
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', plain sort order

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/build/cclfs
OUT=$REPO/bench/results
SIZES="8 32 64"
RUNS=${EXEC_FANOUT_RUNS:-11}
CCLFS=yes
TIMEOUT=120 # seconds to wait for a deploy or a terminate

# Targets.
TARGET_HOSTS=64
TARGET_PDSH_RATIO=5 # pdsh / cclfs, at least
TARGET_LOOP_RATIO=1 # cclfs / loop, at most

usage() {
	cat <<EOF
usage: bench/exec_fanout.sh [--sizes "N ..."] [--runs R] [--bin PATH]
                            [--out DIR] [--no-cclfs] [--timeout S]

Time \`hostname\` on N sshd test hosts through cclfs exec (hosts provider),
pdsh -R ssh, clush and a bash loop of ssh over ControlMaster connections.

  --sizes "N ..."   host counts, each at most 254 (default "$SIZES"; the
                    targets apply to $TARGET_HOSTS)
  --runs R          timed runs per method and size; medians are reported
                    (default $RUNS, or \$EXEC_FANOUT_RUNS)
  --bin PATH        the cclfs binary (default build/cclfs of this repository)
  --out DIR         where exec_fanout.txt and exec_fanout.csv go
                    (default bench/results)
  --no-cclfs        leave out (a)
  --timeout S       seconds to wait for a deploy or terminate (default $TIMEOUT)
EOF
}

die() {
	echo "exec_fanout.sh: $*" >&2
	exit 1
}

posint() { # option value
	[[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: not a positive integer: $2"
}

while [ $# -gt 0 ]; do
	case $1 in
	--sizes | --runs | --bin | --out | --timeout)
		[ $# -ge 2 ] || die "$1 needs a value"
		set -- "$1=$2" "${@:3}"
		;;
	--sizes=*) SIZES=${1#*=}; shift ;;
	--runs=*) RUNS=${1#*=}; shift ;;
	--bin=*) BIN=${1#*=}; shift ;;
	--out=*) OUT=${1#*=}; shift ;;
	--timeout=*) TIMEOUT=${1#*=}; shift ;;
	--no-cclfs) CCLFS=no; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

read -r -a SIZES <<<"$SIZES"
[ ${#SIZES[@]} -gt 0 ] || die "--sizes: no host count given"
MAXN=0
for n in "${SIZES[@]}"; do
	posint --sizes "$n"
	[ "$n" -le 254 ] || die "--sizes: $n hosts: at most 254 (127.0.1.1..254)"
	[ "$n" -gt "$MAXN" ] && MAXN=$n
done
posint --runs "$RUNS"
posint --timeout "$TIMEOUT"
[ "$(id -u)" = 0 ] || die "run as root: the test hosts are sshd daemons on port 22"
for tool in ssh ssh-keygen pdsh clush fusermount3 awk sort ip hostname; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
[ -x /usr/sbin/sshd ] || die "/usr/sbin/sshd not found (apt-get install openssh-server)"
[ -n "${EPOCHREALTIME:-}" ] || die "bash 5 or later is needed (EPOCHREALTIME)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# shellcheck source=tests/sshd/testhosts.bash
source "$REPO/tests/sshd/testhosts.bash"

# ---------------------------------------------------------------- cleanup

WORK=
MNT=
HOSTS=
CCLFS_PID=
CM_PIDS=()

cclfs_mounted() {
	[ -n "$MNT" ] && grep -qs " $MNT fuse.cclfs " /proc/self/mounts
}

# Every daemon by its pid: the cclfs mount, the ControlMaster clients, the
# test hosts (testhosts_stop). Runs on any exit, Ctrl-C included.
cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	cd /
	if cclfs_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	if [ -n "$CCLFS_PID" ]; then
		for _ in $(seq 1 50); do
			kill -0 "$CCLFS_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$CCLFS_PID" 2>/dev/null || true
		wait "$CCLFS_PID" 2>/dev/null || true
	fi
	for pid in "${CM_PIDS[@]+"${CM_PIDS[@]}"}"; do
		kill "$pid" 2>/dev/null || true
	done
	if [ -n "$HOSTS" ]; then
		testhosts_stop "$HOSTS" || rc=1
	fi
	if [ -n "$WORK" ] && ! cclfs_mounted; then
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-fanout.XXXXXX")
HOSTS=$WORK/hosts
MNT=$WORK/mnt
LOG=$WORK/daemon.log
CM=$WORK/cm
mkdir -p "$MNT" "$WORK/home" "$CM"
HN=$(hostname)

# ---------------------------------------------------------------- hosts

t0=${EPOCHREALTIME/./}
testhosts_start "$HOSTS" "$MAXN" || die "the test hosts did not start"
t1=${EPOCHREALTIME/./}
HOSTS_START_MS=$(((t1 - t0) / 1000))
echo "  $MAXN test hosts started in $HOSTS_START_MS ms" >&2
QUICKACK=no
[[ $(ip route show table local 127.0.1.0/24 2>/dev/null) == *"quickack 1"* ]] && QUICKACK=yes

KEY=$HOSTS/id_ed25519
KNOWN=$HOSTS/known_hosts
SSH_OPTS="-F /dev/null -i $KEY -o UserKnownHostsFile=$KNOWN -o StrictHostKeyChecking=yes -o BatchMode=yes -o KexAlgorithms=curve25519-sha256"
read -r -a SSH_ARGS <<<"$SSH_OPTS"
SSH_ARGS+=(-l root)

# (d)'s ControlMaster connections, one per host, opened now; their pids
# (ssh -O check says them) for the cleanup.
pids=()
for ((h = 1; h <= MAXN; h++)); do
	ssh "${SSH_ARGS[@]}" -o ControlMaster=auto -o "ControlPath=$CM/%h" -o ControlPersist=600 \
		-N -f "127.0.1.$h" </dev/null 2>>"$WORK/cm.err" &
	pids+=($!)
done
for pid in "${pids[@]}"; do
	wait "$pid" || die "a ControlMaster connection failed: $(tail -3 "$WORK/cm.err")"
done
for ((h = 1; h <= MAXN; h++)); do
	msg=$(ssh -o "ControlPath=$CM/%h" -O check "127.0.1.$h" 2>&1) ||
		die "no ControlMaster for 127.0.1.$h: $msg"
	[[ $msg =~ pid=([0-9]+) ]] && CM_PIDS+=("${BASH_REMATCH[1]}")
done

# ---------------------------------------------------------------- checks

# The output of one method is right: N lines of this machine's hostname,
# each host or rank exactly once. Sets CHECK_MSG when it is not.
check_output() { # kind file n
	local kind=$1 file=$2 n=$3
	CHECK_MSG=$(awk -v kind="$kind" -v n="$n" -v hn="$HN" '
		function bad(m) { if (!msg) msg = "line " NR ": " m; }
		{
			if (kind == "loop") {
				if ($0 != hn) bad("\"" $0 "\" is not \"" hn "\"")
				next
			}
			i = index($0, ": ")
			if (!i) { bad("no \"KEY: \" prefix in \"" $0 "\""); next }
			key = substr($0, 1, i - 1); val = substr($0, i + 2)
			if (val != hn) bad("\"" val "\" is not \"" hn "\"")
			if (kind == "rank") {
				lo = 0; hi = n - 1
			} else {
				lo = 1; hi = n
				if (key !~ /^127\.0\.1\.[0-9]+$/) { bad("host " key " is no test host"); next }
				sub(/^127\.0\.1\./, "", key)
			}
			if (key !~ /^[0-9]+$/ || key + 0 < lo || key + 0 > hi) bad("\"" key "\" is out of " lo ".." hi)
			else if (seen[key + 0]++) bad("\"" key "\" twice")
		}
		END {
			if (!msg && NR != n) msg = NR " lines, not " n
			print msg
		}' "$file")
	[ -z "$CHECK_MSG" ]
}

declare -A SAMPLES=()  # [method.n] = "us us ..."
declare -A BADRUNS=()  # [method.n] = runs with a wrong output or a failure
declare -A A_REASON=() # [n] = why (a) has no numbers for n

# ---------------------------------------------------------------- (b)-(d)

run_pdsh() { # n -> 0 when the output was right
	local n=$1 t0 t1 st=0
	t0=${EPOCHREALTIME/./}
	PDSH_SSH_ARGS_APPEND=$SSH_OPTS pdsh -R ssh -f "$n" -w "127.0.1.[1-$n]" hostname \
		>"$WORK/out" 2>"$WORK/err" || st=$?
	t1=${EPOCHREALTIME/./}
	RUN_US=$((t1 - t0))
	[ "$st" = 0 ] || { CHECK_MSG="pdsh exited with $st: $(head -3 "$WORK/err")"; return 1; }
	check_output host "$WORK/out" "$n"
}

run_clush() { # n
	local n=$1 t0 t1 st=0
	t0=${EPOCHREALTIME/./}
	clush -f "$n" -w "127.0.1.[1-$n]" -o "$SSH_OPTS" hostname >"$WORK/out" 2>"$WORK/err" || st=$?
	t1=${EPOCHREALTIME/./}
	RUN_US=$((t1 - t0))
	[ "$st" = 0 ] || { CHECK_MSG="clush exited with $st: $(head -3 "$WORK/err")"; return 1; }
	check_output host "$WORK/out" "$n"
}

run_loop() { # n
	local n=$1 t0 t1 h pid st=0 pids=()
	t0=${EPOCHREALTIME/./}
	{
		for ((h = 1; h <= n; h++)); do
			ssh "${SSH_ARGS[@]}" -o ControlMaster=no -o "ControlPath=$CM/%h" "127.0.1.$h" hostname &
			pids+=($!)
		done
		# These pids only: the cclfs daemon is a child of this shell too.
		for pid in "${pids[@]}"; do
			wait "$pid" || st=$?
		done
	} >"$WORK/out" 2>"$WORK/err"
	t1=${EPOCHREALTIME/./}
	RUN_US=$((t1 - t0))
	[ "$st" = 0 ] || { CHECK_MSG="an ssh exited with $st: $(head -3 "$WORK/err")"; return 1; }
	check_output loop "$WORK/out" "$n"
}

# ---------------------------------------------------------------- (a) cclfs

CCLFS_VERSION=unavailable
CCLFS_STATE=    # why (a) cannot run at all, if so
if [ "$CCLFS" = no ]; then
	CCLFS_STATE="left out (--no-cclfs)"
elif [ ! -x "$BIN" ]; then
	CCLFS_STATE="$BIN: no such executable (cmake -S . -B build && cmake --build build -j)"
else
	BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
	VERSION=$("$BIN" --version 2>&1 | head -1 || true)
	VERSION=${VERSION#cclfs }
	CCLFS_VERSION=${VERSION%% *}
fi

CONF=$WORK/cclfs.conf
{
	echo "[hosts]"
	echo "user = \"root\""
	echo "keyfile = \"$KEY\""
	echo "known_hosts = \"$KNOWN\""
	for ((h = 1; h <= MAXN; h++)); do
		echo
		echo "[hosts.h$h]"
		echo "address = \"127.0.1.$h\""
		echo "port = \"22\""
	done
} >"$CONF"

cclfs_mount() { # -> 0, or 1 with CCLFS_STATE
	local i
	(cd "$WORK" && exec env -u CCLFS_CONFIG -u XDG_STATE_HOME HOME="$WORK/home" \
		"$BIN" "$MNT" -f -o "config=$CONF,statedir=$WORK/state") >>"$LOG" 2>&1 </dev/null &
	CCLFS_PID=$!
	for i in $(seq 1 200); do
		cclfs_mounted && return 0
		if ! kill -0 "$CCLFS_PID" 2>/dev/null; then
			wait "$CCLFS_PID" 2>/dev/null || true
			CCLFS_PID=
			CCLFS_STATE="cclfs exited before mounting: $(tail -2 "$LOG" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.05
	done
	CCLFS_STATE="cclfs did not mount within 10 s"
	return 1
}

# Unmount and mount again on the same state: the clusters stay, and no
# session is open until a command needs one (cold).
cclfs_remount() { # -> 0, or 1 with CCLFS_STATE
	fusermount3 -u "$MNT" || { CCLFS_STATE="cannot unmount $MNT"; return 1; }
	wait "$CCLFS_PID" 2>/dev/null || true
	CCLFS_PID=
	cclfs_mount
}

first_line() { # file -> its first line, or nothing
	local l=
	{ IFS= read -r l <"$1"; } 2>/dev/null || true
	printf '%s' "$l"
}

# Poll clusters/H/state until it reads `want`. Sets WAIT_MSG on failure.
wait_state() { # handle want
	local h=$1 want=$2 line deadline
	deadline=$((${EPOCHREALTIME/./} + TIMEOUT * 1000000))
	while :; do
		line=$(first_line "$MNT/clusters/$h/state")
		[ "${line%% *}" = "$want" ] && return 0
		if [ "${line%% *}" = failed ]; then
			WAIT_MSG="clusters/$h failed: $(first_line "$MNT/clusters/$h/error")"
			return 1
		fi
		if [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
			WAIT_MSG="clusters/$h is still '$line' after $TIMEOUT s, not $want: $(first_line "$MNT/clusters/$h/error")"
			return 1
		fi
		sleep 0.02
	done
}

# A contract for n hosts, deployed as fanN, running. Sets A_REASON[n] on
# failure.
a_deploy() { # n
	local n=$1 c=$MNT/contracts/f$1 h=fan$1
	if ! mkdir "$c" 2>>"$WORK/a.err"; then
		A_REASON[$n]="mkdir contracts/f$n failed: $(tail -1 "$WORK/a.err")"
		return 1
	fi
	if ! { echo hosts >"$c/node_provider" && echo "$n" >"$c/node_count"; } 2>>"$WORK/a.err"; then
		A_REASON[$n]="contracts/f$n refuses node_provider hosts or node_count $n: $(first_line "$c/error")"
		return 1
	fi
	if ! touch "$c/resolve" 2>>"$WORK/a.err" || [ -s "$c/error" ]; then
		A_REASON[$n]="contracts/f$n does not resolve: $(first_line "$c/error")"
		return 1
	fi
	if ! echo "$h" >"$c/deploy" 2>>"$WORK/a.err"; then
		A_REASON[$n]="echo $h > contracts/f$n/deploy failed: $(first_line "$c/error")"
		return 1
	fi
	if ! wait_state "$h" running; then
		A_REASON[$n]="deploy: $WAIT_MSG"
		return 1
	fi
}

# Terminate fanN (waited for) and remove it and its contract; best effort.
a_terminate() { # n
	local n=$1 h=fan$1
	if [ -d "$MNT/clusters/$h" ]; then
		if echo terminated >"$MNT/clusters/$h/state" 2>>"$WORK/a.err" &&
			wait_state "$h" terminated; then
			rmdir "$MNT/clusters/$h" 2>>"$WORK/a.err" || true
		else
			echo "  warning: clusters/$h did not terminate: ${WAIT_MSG:-$(first_line "$MNT/clusters/$h/error")}" >&2
		fi
	fi
	rmdir "$MNT/contracts/f$n" 2>>"$WORK/a.err" || true
}

# One exec, timed; the output (clusters/H/exec reads the last one) checked
# after the clock stopped.
run_cclfs() { # n
	local n=$1 h=$MNT/clusters/fan$1 t0 t1 st=0
	t0=${EPOCHREALTIME/./}
	if ! echo hostname >"$h/exec" 2>>"$WORK/a.err"; then st=1; fi
	t1=${EPOCHREALTIME/./}
	RUN_US=$((t1 - t0))
	[ "$st" = 0 ] || { CHECK_MSG="echo hostname > clusters/fan$n/exec failed: $(first_line "$h/error")"; return 1; }
	cat "$h/exec" >"$WORK/out" 2>>"$WORK/a.err" || { CHECK_MSG="cat clusters/fan$n/exec failed"; return 1; }
	check_output rank "$WORK/out" "$n"
}

# The exec output on a read-write descriptor (a command's own output).
a_check_rw() { # n
	local n=$1 h=$MNT/clusters/fan$1
	if ! (
		exec 5<>"$h/exec"
		echo hostname >&5
		cat <&5
	) >"$WORK/out" 2>>"$WORK/a.err"; then
		CHECK_MSG="exec on a read-write descriptor of clusters/fan$n/exec failed: $(first_line "$h/error")"
		return 1
	fi
	check_output rank "$WORK/out" "$n"
}

if [ -z "$CCLFS_STATE" ]; then
	cclfs_mount || true
fi

# ---------------------------------------------------------------- runs

METHODS_ALL=(cclfs pdsh clush loop)

for n in "${SIZES[@]}"; do
	methods=(pdsh clush loop)
	if [ -n "$CCLFS_STATE" ]; then
		A_REASON[$n]=$CCLFS_STATE
	elif ! kill -0 "$CCLFS_PID" 2>/dev/null; then
		CCLFS_STATE="the cclfs daemon died: $(tail -2 "$LOG" | tr '\n' ' ')"
		A_REASON[$n]=$CCLFS_STATE
	elif a_deploy "$n" && cclfs_remount; then
		# The first exec after a mount: cold sessions (each connects,
		# exchanges keys and logs in), one sample.
		if run_cclfs "$n"; then
			SAMPLES[cold.$n]=$RUN_US
			if a_check_rw "$n"; then
				methods=(cclfs pdsh clush loop)
			else
				A_REASON[$n]="wrong output: $CHECK_MSG"
			fi
		else
			A_REASON[$n]="first exec: $CHECK_MSG"
		fi
	else
		A_REASON[$n]=${A_REASON[$n]:-$CCLFS_STATE}
	fi
	[ -z "${A_REASON[$n]:-}" ] || echo "  (a) cclfs, $n hosts: unavailable: ${A_REASON[$n]}" >&2

	# An untimed run of each: outputs checked, caches warm.
	for m in "${methods[@]}"; do
		[ "$m" = cclfs ] && continue
		"run_$m" "$n" || die "($m) $n hosts: wrong output: $CHECK_MSG"
	done

	for ((r = 0; r < RUNS; r++)); do
		k=${#methods[@]}
		for ((i = 0; i < k; i++)); do
			m=${methods[(i + r) % k]}
			if "run_$m" "$n"; then
				SAMPLES[$m.$n]+="$RUN_US "
			else
				BADRUNS[$m.$n]=$((${BADRUNS[$m.$n]:-0} + 1))
				echo "  ($m) $n hosts, round $((r + 1)): $CHECK_MSG" >&2
			fi
		done
	done
	for m in pdsh clush loop; do
		[ -z "${BADRUNS[$m.$n]:-}" ] || die "($m) $n hosts: ${BADRUNS[$m.$n]} runs went wrong"
	done
	if [ -z "$CCLFS_STATE" ]; then
		a_terminate "$n"
	fi
	echo "  $n hosts: $RUNS rounds done" >&2
done

kill -0 "${CM_PIDS[0]}" 2>/dev/null || die "the ControlMaster connections died during the benchmark"

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
ratio() { # a b -> a/b, 2 decimals, or -
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b <= 0) print "-"; else printf "%.2f", a / b }'
}
times_x() { # ratio -> "1.23x", or -
	if [ "$1" = - ]; then echo -; else echo "${1}x"; fi
}
verdict() { # awk condition on a, b; "-" when a is -
	if [ "$2" = - ]; then echo "n/a"; elif awk -v a="$2" -v b="$3" "BEGIN { exit !($1) }"; then echo PASS; else echo FAIL; fi
}

for n in "${!A_REASON[@]}"; do
	A_REASON[$n]=${A_REASON[$n]//$WORK/DIR}
done
declare -A MED=() MIN=() MAX=() NRUNS=()
for n in "${SIZES[@]}"; do
	for m in cold "${METHODS_ALL[@]}"; do
		key=$m.$n
		if [ -n "${SAMPLES[$key]:-}" ]; then
			read -r "MED[$key]" "MIN[$key]" "MAX[$key]" <<<"$(stat_us "${SAMPLES[$key]}")"
			NRUNS[$key]=$(wc -w <<<"${SAMPLES[$key]}")
		else
			MED[$key]=- MIN[$key]=- MAX[$key]=- NRUNS[$key]=0
		fi
	done
done
declare -A PDSH_RATIO=() LOOP_RATIO=() PDSH_RESULT=() LOOP_RESULT=()
for n in "${SIZES[@]}"; do
	PDSH_RATIO[$n]=$(ratio "${MED[pdsh.$n]}" "${MED[cclfs.$n]}")
	LOOP_RATIO[$n]=$(ratio "${MED[cclfs.$n]}" "${MED[loop.$n]}")
	if [ "$n" = "$TARGET_HOSTS" ]; then
		PDSH_RESULT[$n]=$(verdict 'a >= b' "${PDSH_RATIO[$n]}" "$TARGET_PDSH_RATIO")
		LOOP_RESULT[$n]=$(verdict 'a <= b' "${LOOP_RATIO[$n]}" "$TARGET_LOOP_RATIO")
	else
		PDSH_RESULT[$n]=- LOOP_RESULT[$n]=-
	fi
done

DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
KERNEL=$(uname -r)
NPROC=$(nproc)
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$COMMIT" != unknown ] && ! git -C "$REPO" diff --quiet HEAD -- 2>/dev/null; then
	COMMIT="$COMMIT (with uncommitted changes)"
fi
SSH_VERSION=$(ssh -V 2>&1 | cut -d, -f1)
PDSH_VERSION=$(pdsh -V 2>&1 | head -1 | cut -d' ' -f1)
CLUSH_VERSION=$(clush --version 2>&1 | head -1)

TXT=$OUT/exec_fanout.txt
CSV=$OUT/exec_fanout.csv
label() { # method n
	case $1 in
	cclfs) echo "(a) cclfs exec, warm" ;;
	cold) echo "(a) cclfs exec, first (cold)" ;;
	pdsh) echo "(b) pdsh -R ssh -f $2" ;;
	clush) echo "(c) clush -f $2" ;;
	loop) echo "(d) ssh & loop, ControlMaster" ;;
	esac
}
{
	echo "cclfs benchmark: exec fan-out on sshd hosts (bench/exec_fanout.sh)"
	echo
	echo "date:        $DATE"
	echo "machine:     $NPROC cores${CPU:+ ($CPU)}, Linux $KERNEL"
	echo "cclfs:       $CCLFS_VERSION, commit $COMMIT"
	echo "hosts:       $MAXN sshd test hosts ($SSH_VERSION) on 127.0.1.1..$MAXN:22, one machine,"
	echo "             started in $HOSTS_START_MS ms (tests/sshd/testhosts.bash); ed25519 keys; key"
	echo "             exchanges without sntrup761; quickack route on 127.0.1.0/24: $QUICKACK"
	echo "command:     hostname; $RUNS timed runs per method and size, in rounds (one run of"
	echo "             each method per round, the first method rotating); wall time per run"
	echo "(a) cclfs:   echo hostname > clusters/fanN/exec (hosts provider, N hosts); cold = the"
	echo "             first exec after cclfs was mounted again (every session opened); warm = after it"
	echo "(b) pdsh:    $PDSH_VERSION: PDSH_SSH_ARGS_APPEND='<opts>' pdsh -R ssh -f N -w 127.0.1.[1-N] hostname"
	echo "(c) clush:   $CLUSH_VERSION: clush -f N -w 127.0.1.[1-N] -o '<opts>' hostname"
	echo "(d) loop:    for h in ...; do ssh <opts> -o ControlPath=DIR/%h root@\$h hostname & done;"
	echo "             wait \$pids -- ControlMaster=auto, ControlPersist=600, opened before timing"
	echo "<opts>:      $SSH_OPTS" | sed "s|$WORK|DIR|g"
	echo "checked:     every run's output: N lines of '$HN', each host (b, c) or rank (a) once"
	echo
	for n in "${SIZES[@]}"; do
		echo "$n hosts"
		printf '  %-34s %5s %12s %10s %10s\n' method runs median min max
		for m in cclfs cold pdsh clush loop; do
			key=$m.$n
			if [ "${NRUNS[$key]}" = 0 ]; then
				# Only (a) can have no runs; its reason goes on the warm line.
				if [ "$m" = cclfs ]; then
					printf '  %-34s %5s %12s   %s\n' "$(label "$m" "$n")" 0 unavailable "${A_REASON[$n]:-}"
				fi
				continue
			fi
			printf '  %-34s %5s %9s ms %10s %10s\n' "$(label "$m" "$n")" "${NRUNS[$key]}" \
				"${MED[$key]}" "${MIN[$key]}" "${MAX[$key]}"
		done
		tgt1=- tgt2=-
		if [ "$n" = "$TARGET_HOSTS" ]; then
			tgt1=">= ${TARGET_PDSH_RATIO}x"
			tgt2="<= ${TARGET_LOOP_RATIO}x"
		fi
		printf '  %-34s %12s %21s %s\n' "ratio pdsh / cclfs (medians)" "$(times_x "${PDSH_RATIO[$n]}")" \
			"target $tgt1" "${PDSH_RESULT[$n]}"
		printf '  %-34s %12s %21s %s\n' "ratio cclfs / loop (medians)" "$(times_x "${LOOP_RATIO[$n]}")" \
			"target $tgt2" "${LOOP_RESULT[$n]}"
		printf '  %-34s %12s\n' "ratio clush / loop (medians)" "$(times_x "$(ratio "${MED[clush.$n]}" "${MED[loop.$n]}")")"
		printf '  %-34s %12s\n' "ratio pdsh / loop (medians)" "$(times_x "$(ratio "${MED[pdsh.$n]}" "${MED[loop.$n]}")")"
		echo
	done
	echo "targets at $TARGET_HOSTS hosts:"
	if [ -n "${PDSH_RESULT[$TARGET_HOSTS]:-}" ]; then
		echo "  (a) >= ${TARGET_PDSH_RATIO}x faster than (b):  ${PDSH_RESULT[$TARGET_HOSTS]} (${PDSH_RATIO[$TARGET_HOSTS]}x)"
		echo "  (a) not slower than (d):      ${LOOP_RESULT[$TARGET_HOSTS]} (${LOOP_RATIO[$TARGET_HOSTS]}x)"
		[ -z "${A_REASON[$TARGET_HOSTS]:-}" ] || echo "  (a) unavailable: ${A_REASON[$TARGET_HOSTS]}"
	else
		echo "  not measured (--sizes has no $TARGET_HOSTS)"
	fi
	echo
	echo "every run (ms, in run order):"
	for n in "${SIZES[@]}"; do
		for m in cold "${METHODS_ALL[@]}"; do
			[ -n "${SAMPLES[$m.$n]:-}" ] || continue
			printf '  %-4s %-6s %s\n' "$n" "$m:" "$(list_ms "${SAMPLES[$m.$n]}")"
		done
	done
} >"$TXT"

{
	echo "date,nproc,kernel,cclfs_version,hosts,method,runs,median,min,max,unit,target,result,note"
	for n in "${SIZES[@]}"; do
		for m in cclfs cold pdsh clush loop; do
			key=$m.$n
			note=
			if [ "$m" = cclfs ] || [ "$m" = cold ]; then note=${A_REASON[$n]:-}; fi
			note=${note//,/;}
			note=${note//$'\n'/ }
			echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,$n,$m,${NRUNS[$key]},${MED[$key]},${MIN[$key]},${MAX[$key]},ms,,-,$note"
		done
		tgt1='' tgt2=''
		if [ "$n" = "$TARGET_HOSTS" ]; then tgt1=">=$TARGET_PDSH_RATIO" tgt2="<=$TARGET_LOOP_RATIO"; fi
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,$n,ratio pdsh/cclfs,$RUNS,${PDSH_RATIO[$n]},,,x,$tgt1,${PDSH_RESULT[$n]},"
		echo "$DATE,$NPROC,$KERNEL,$CCLFS_VERSION,$n,ratio cclfs/loop,$RUNS,${LOOP_RATIO[$n]},,,x,$tgt2,${LOOP_RESULT[$n]},"
	done
} >"$CSV"

cat "$TXT"
echo
echo "written: $TXT, $CSV"
