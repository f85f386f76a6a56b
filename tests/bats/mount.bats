#!/usr/bin/env bats
# The daemon: mounting in the foreground and background, unmounting,
# --help and --version, and the clear failures before anything is mounted.

load helpers

setup() {
	cclfs_setup --no-mount
}

teardown() {
	if [ -n "${CTL_MOUNTED:-}" ]; then
		umount /sys/fs/fuse/connections
	fi
	cclfs_teardown
}

@test "--help and --version print and exit 0" {
	run "$CCLFS_BIN" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"usage:"*"MOUNTPOINT"* ]]
	[[ "$output" == *"statedir=DIR"* ]]
	run "$CCLFS_BIN" --version
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^cclfs\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "foreground mount shows the tree; fusermount3 -u ends the daemon with 0" {
	cclfs_mount
	run ls "$MNT"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'README\ncatalog\nclusters\ncontracts\ncosts')" ]
	grep -q "cclfs: clusters of machines" "$MNT/README"
	cclfs_unmount
	! cclfs_is_mounted
}

@test "files still open when the connection ends are freed; the daemon exits 0" {
	cclfs_mount
	mkdir "$MNT/contracts/c1"
	echo local >"$MNT/contracts/c1/node_provider"
	echo c1 >"$MNT/contracts/c1/deploy"
	wait_state c1 running
	local files="$MNT/clusters/c1/nodes/0/files" ctl=/sys/fs/fuse/connections
	local i fds=()
	# The kernel drops the releases it has not sent when a connection
	# ends (at unmount, a release still queued): aborting it with
	# contract files, node files and cluster files open leaves them to
	# the daemon. (Not directories: libfuse then leaks its own handles
	# of them.) Several of each, so that no stray copy of a pointer
	# hides a leak from the sanitizer.
	for i in $(seq 1 8); do
		echo "$i" >"$files/f$i"
		exec {fd}<>"$MNT/contracts/c1/node_count"
		echo 1 >&"$fd"
		fds+=("$fd")
		exec {fd}<>"$files/f$i"
		head -c 1 <&"$fd" >/dev/null
		fds+=("$fd")
		exec {fd}<"$MNT/clusters/c1/state"
		fds+=("$fd")
	done
	if ! mountpoint -q "$ctl"; then
		mount -t fusectl fusectl "$ctl"
		CTL_MOUNTED=1
	fi
	echo 1 >"$ctl/$(stat -c %d "$MNT")/abort"
	wait "$CCLFS_PID"
	for fd in "${fds[@]}"; do
		exec {fd}>&-
	done
	umount -l "$MNT"
}

@test "without -f the daemon goes to the background, records its pid, and unmounts cleanly" {
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	[ "$status" -eq 0 ]
	cclfs_is_mounted
	pid=$(cat "$STATE/lock")
	cclfs_track_pid "$pid"
	kill -0 "$pid"
	mkdir "$MNT/contracts/bg"
	[ -d "$MNT/contracts/bg/manager" ]
	fusermount3 -u "$MNT"
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	! kill -0 "$pid" 2>/dev/null
}

@test "the state directory is created with mode 0700, parents included" {
	rm -rf "$STATE"
	STATE=$TESTDIR/deep/er/state
	cclfs_mount
	[ "$(stat -c %a "$STATE")" = 700 ]
	[ "$(stat -c %a "$STATE/state.db")" = 600 ]
}

@test "the default state directory is \$XDG_STATE_HOME/cclfs, else ~/.local/state/cclfs" {
	"$CCLFS_BIN" "$MNT" -f 3>&- &
	CCLFS_PID=$!
	cclfs_track_pid "$CCLFS_PID"
	cclfs_wait_mounted "$CCLFS_PID"
	[ "$(stat -c %a "$HOME/.local/state/cclfs")" = 700 ]
	cclfs_unmount
	export XDG_STATE_HOME=$TESTDIR/xdg
	"$CCLFS_BIN" "$MNT" -f 3>&- &
	CCLFS_PID=$!
	cclfs_track_pid "$CCLFS_PID"
	cclfs_wait_mounted "$CCLFS_PID"
	[ -f "$XDG_STATE_HOME/cclfs/state.db" ]
	cclfs_unmount
}

@test "a second daemon on the same state directory is refused with the first one's pid" {
	cclfs_mount
	mkdir "$TESTDIR/mnt2"
	run "$CCLFS_BIN" "$TESTDIR/mnt2" -f -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"in use by another cclfs (pid $CCLFS_PID)"* ]]
}

@test "a missing mount point is refused with a clear message" {
	run "$CCLFS_BIN" "$TESTDIR/nowhere" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"mount point"*"$TESTDIR/nowhere"*"No such file or directory"* ]]
	run "$CCLFS_BIN" "$TESTDIR/home/../daemon.missing" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	touch "$TESTDIR/afile"
	run "$CCLFS_BIN" "$TESTDIR/afile" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"is not a directory"* ]]
	run "$CCLFS_BIN"
	[ "$status" -ne 0 ]
	[[ "$output" == *"no mount point given"* ]]
}

@test "a missing /dev/fuse is refused with a clear message" {
	command -v unshare >/dev/null || skip "unshare is not installed"
	# A private mount namespace whose /dev has no fuse device.
	run unshare -m sh -c 'mount -t tmpfs none /dev && "$0" "$1" -o statedir="$2"' \
		"$CCLFS_BIN" "$MNT" "$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"/dev/fuse does not exist"* ]]
}

@test "an unreadable or malformed configuration file is refused with file and line" {
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/none.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *"cannot read configuration file $TESTDIR/none.conf: No such file or directory"* ]]

	printf '[defaults]\nresolve_policy = "cheapest"\n[bogus]\nx = 1\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/bad.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf:4: unknown section [bogus]"* ]]
	# items are sections of the hosts provider only
	printf '[ec2]\nregion = "eu-west-1"\n[ec2.extra]\nregion = "x"\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/bad.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf:4: unknown section [ec2.extra]; cclfs knows [defaults], [local], [hosts], [hosts.NAME], [ec2] and [gcp]"* ]]

	printf '[defaults]\nresolve_policy = "random"\n' >"$TESTDIR/bad.conf"
	CCLFS_CONFIG=$TESTDIR/bad.conf run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf:2: [defaults] resolve_policy: \"random\" is not a resolve policy"* ]]

	printf '[defaults]\nresolve_policy = "cheapest" trailing\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/bad.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf:2: [defaults] resolve_policy: the value is badly quoted"* ]]

	printf '[defaults]\nthis is not a key value line\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/bad.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf:2:"* ]]

	if [ "$(id -u)" -ne 0 ]; then
		printf '[defaults]\n' >"$TESTDIR/secret.conf"
		chmod 000 "$TESTDIR/secret.conf"
		run "$CCLFS_BIN" "$MNT" -o statedir="$STATE",config="$TESTDIR/secret.conf"
		[ "$status" -ne 0 ]
		[[ "$output" == *"Permission denied"* ]]
	fi
	! cclfs_is_mounted
}

@test "a configuration with comments, quotes and every [defaults] key mounts" {
	cat >"$TESTDIR/good.conf" <<-'CONF'
	# cclfs configuration
	[defaults]
	resolve_policy = "cheapest"   # take the lowest price
	user = 'ubuntu'
	tunneled = yes # normalised to true
	mpiflags = "--map-by node"
	; an ini-style comment
	[local]
	[ec2]
	region = "us-east-1"
	CONF
	cclfs_mount -o config="$TESTDIR/good.conf"
	mkdir "$MNT/contracts/c"
	# The only instance type fits: with either policy the contract resolves.
	touch "$MNT/contracts/c/resolve"
	[ -s "$MNT/contracts/c/resolution" ]
}

@test "the configuration is found in \$CCLFS_CONFIG, ./cclfs.conf and ~/.config/cclfs" {
	printf '[defaults]\nresolve_policy = "cheapest"\n[nonsense]\nkey = 1\n' >"$TESTDIR/cclfs.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"$TESTDIR/cclfs.conf:4: unknown section [nonsense]"* ]]
	rm "$TESTDIR/cclfs.conf"
	mkdir -p "$HOME/.config/cclfs"
	printf '[nonsense]\nkey = 1\n' >"$HOME/.config/cclfs/cclfs.conf"
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"$HOME/.config/cclfs/cclfs.conf:2: unknown section [nonsense]"* ]]
	printf '[nonsense]\nkey = 1\n' >"$TESTDIR/env.conf"
	CCLFS_CONFIG=$TESTDIR/env.conf run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	[[ "$output" == *"env.conf:2: unknown section"* ]]
}

@test "-d stays in the foreground and prints every request" {
	"$CCLFS_BIN" "$MNT" -d -o statedir="$STATE" >"$TESTDIR/debug.log" 2>&1 3>&- &
	CCLFS_PID=$!
	cclfs_track_pid "$CCLFS_PID"
	cclfs_wait_mounted "$CCLFS_PID"
	mkdir "$MNT/contracts/dbg"
	cclfs_unmount
	grep -q "MKDIR" "$TESTDIR/debug.log"
	grep -q "created contracts/dbg" "$TESTDIR/debug.log"
}
