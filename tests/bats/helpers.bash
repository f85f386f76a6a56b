# Shared by the bats suites: mount cclfs in a fresh temporary directory,
# remember the daemon's pid, and always unmount and kill it by pid, even
# when a test fails. Also fails a test whose daemon printed a sanitizer
# report.

: "${CCLFS_BIN:?set CCLFS_BIN to the cclfs binary (ctest does)}"

# Start a test: a private directory with mnt/, state/ and home/, and a
# mounted cclfs (extra arguments go to cclfs).
cclfs_setup() {
	TESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-test.XXXXXX")
	MNT=$TESTDIR/mnt
	STATE=$TESTDIR/state
	mkdir -p "$MNT" "$TESTDIR/home"
	# No stray cclfs.conf from the developer's home or cwd.
	export HOME=$TESTDIR/home
	unset CCLFS_CONFIG XDG_STATE_HOME
	cd "$TESTDIR" || return 1
	CCLFS_PIDS=()
	if [ "${1:-}" != "--no-mount" ]; then
		cclfs_mount "$@"
	fi
}

# Mount in the foreground (as a background job of this shell), so the pid
# is ours and stderr is kept in daemon.log.
cclfs_mount() {
	"$CCLFS_BIN" "$MNT" -f -o statedir="$STATE" "$@" \
		>>"$TESTDIR/daemon.log" 2>&1 3>&- &
	CCLFS_PID=$!
	CCLFS_PIDS+=("$CCLFS_PID")
	cclfs_wait_mounted "$CCLFS_PID"
}

# Wait until MNT is a cclfs mount (or the daemon died: then fail).
cclfs_wait_mounted() {
	local pid=$1 i
	for i in $(seq 1 200); do
		if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "cclfs exited before mounting:" >&2
			cat "$TESTDIR/daemon.log" >&2
			return 1
		fi
		sleep 0.05
	done
	echo "cclfs did not mount within 10 s" >&2
	return 1
}

# A test with the namespace network of tests/sshd/testhosts.bash (sourced
# by the suite): NWORKERS workers behind a manager, in NETDIR, its
# addresses loaded (testnet.env); skipped where namespaces are not allowed.
# The suite's teardown runs testnet_stop "$NETDIR".
cclfs_netns_setup() {
	if ! testnet_supported 2>/dev/null; then
		skip "network namespaces are not available here"
	fi
	cclfs_setup --no-mount
	NETDIR=$TESTDIR/net
	testnet_start "$NETDIR" "$1"
	source "$NETDIR/testnet.env"
}

# Mount with the daemon inside network namespace $1 (only the network: its
# mount stays visible here); extra arguments go to cclfs.
cclfs_mount_in_netns() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$CCLFS_BIN" "$MNT" -f \
		-o statedir="$STATE" "$@" >>"$TESTDIR/daemon.log" 2>&1 3>&- &
	CCLFS_PID=$!
	CCLFS_PIDS+=("$CCLFS_PID")
	cclfs_wait_mounted "$CCLFS_PID"
}

cclfs_is_mounted() {
	grep -qs " $MNT fuse.cclfs " /proc/self/mounts
}

# Clean unmount; the daemon must exit 0.
cclfs_unmount() {
	fusermount3 -u "$MNT" || return 1
	wait "$CCLFS_PID"
}

# Kill the daemon hard (kill -9), as a crash would, and clear the dead mount.
cclfs_crash() {
	kill -9 "$CCLFS_PID"
	wait "$CCLFS_PID" 2>/dev/null || true
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
}

# Remember a daemon started some other way (e.g. gone to the background).
cclfs_track_pid() {
	CCLFS_PIDS+=("$1")
}

cclfs_teardown() {
	local pid status=0
	if cclfs_is_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for pid in "${CCLFS_PIDS[@]}"; do
		# Give a daemon that is unmounting a moment to exit by itself.
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -f "$TESTDIR/daemon.log" ] &&
		grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' \
			"$TESTDIR/daemon.log"; then
		echo "sanitizer report from cclfs:" >&2
		cat "$TESTDIR/daemon.log" >&2
		status=1
	fi
	cd / && rm -rf "$TESTDIR"
	return $status
}

# Kill (by pid) what a test started on local nodes: every process whose
# working directory is under the nodes/ of this test's state directory.
cclfs_kill_node_processes() {
	local link pid real
	real=$(cd "$STATE" 2>/dev/null && pwd -P) || return 0
	# One find for every process (a readlink per process takes seconds).
	while IFS= read -r link; do
		pid=${link#/proc/}
		kill -9 "${pid%/cwd}" 2>/dev/null || true
	done < <(find /proc/[0-9]*/cwd -maxdepth 0 -lname "$real/nodes/*" \
		2>/dev/null)
}

# Run a command and capture stderr into $output too (bats' run merges).
# Usage: run_shell 'echo 5 > f' — runs in bash with cwd MNT.
run_shell() {
	run bash -c "cd '$MNT' && $1"
}

# Wait until clusters/$1/state reads $2 (fail at once on failed), for up
# to 30 s.
wait_state() {
	local s i
	for i in $(seq 1 600); do
		s=$(cat "$MNT/clusters/$1/state")
		[ "$s" = "$2" ] && return 0
		if [ "$s" = failed ] && [ "$2" != failed ]; then
			echo "cluster $1 failed: $(cat "$MNT/clusters/$1/error")" >&2
			return 1
		fi
		sleep 0.05
	done
	echo "cluster $1 is $s, not $2" >&2
	return 1
}

# Poll a command every 50 ms until it succeeds, for at most $1 seconds
# (whole seconds): wait_until 10 test -e "$f". When the time is up, says
# what it waited for and fails.
wait_until() {
	local secs=$1 deadline
	shift
	deadline=$((${EPOCHREALTIME/./} + secs * 1000000))
	until "$@"; do
		if [ "${EPOCHREALTIME/./}" -ge "$deadline" ]; then
			echo "still not true after $secs s: $*" >&2
			return 1
		fi
		sleep 0.05
	done
}

# 0 when process $1 has exited (gone, or a zombie nobody waited for yet).
pid_exited() {
	local line
	{ IFS= read -r line <"/proc/$1/stat"; } 2>/dev/null || return 0
	line=${line##*) }
	[ "${line:0:1}" = Z ] || [ "${line:0:1}" = X ]
}

# The instance ids of a cluster's nodes (their status files), in rank order,
# on one line; sorted_ids: the same, sorted.
node_ids() {
	local n
	for n in $(ls "$MNT/clusters/$1/nodes" | sort -n); do
		sed -n 's/^instance_id: //p' "$MNT/clusters/$1/nodes/$n/status"
	done | paste -sd' '
}

sorted_ids() {
	node_ids "$1" | tr ' ' '\n' | sort | paste -sd' '
}

# A random delay from 0 to $1 seconds (three decimals): a crash point.
random_delay() {
	python3 -c "import random; print(round(random.uniform(0, $1), 3))"
}

# Wait (20 s at most) until cluster $1 is running or failed, as a deploy
# the next mount finished or rolled back ends; print its state then.
wait_settled() {
	local s
	for _ in $(seq 1 400); do
		s=$(cat "$MNT/clusters/$1/state")
		[ "$s" = running ] || [ "$s" = failed ] && break
		sleep 0.05
	done
	echo "$s"
}

# Fail, saying what ($2), unless the Python list $1 is empty.
expect_none() {
	[ "$1" = "[]" ] || {
		echo "$2: $1" >&2
		return 1
	}
}

# The crash test of a cloud's deploy and terminate: clusters k1..k20 of
# contract c, the daemon killed at a random point of each one's deploy
# (1-10) or terminate (11-20), then mounted again by $1. After each, the
# command $2 checks that nothing leaked, and $3 NAME prints how many of
# cluster NAME's instances are live: none once it is terminated.
crash_deploys_and_terminates() {
	local mount=$1 check=$2 live=$3 i h s delay
	for i in $(seq 1 20); do
		h=k$i
		delay=$(random_delay 0.8)
		echo $h >contracts/c/deploy
		if [ "$i" -le 10 ]; then
			sleep "$delay"
			cd "$TESTDIR" && cclfs_crash && $mount
			s=$(wait_settled $h)
			echo "# crash $i during deploy after ${delay}s: $s" >&3
			# Finished or rolled back, never stuck.
			[ "$s" = running ] || [ "$s" = failed ]
		else
			wait_state $h running
			echo terminated >clusters/$h/state
			sleep "$delay"
			cd "$TESTDIR" && cclfs_crash && $mount
			wait_state $h terminated
			echo "# crash $i during terminate after ${delay}s" >&3
		fi
		$check
		if [ "$(cat clusters/$h/state)" != terminated ]; then
			echo terminated >clusters/$h/state
			wait_state $h terminated
		fi
		[ "$($live $h)" = 0 ]
	done
}
