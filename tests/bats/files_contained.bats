#!/usr/bin/env bats
# files/ of a local node is contained: every path under
# clusters/H/nodes/N/files/ is resolved beneath the node's directory, so
# the daemon never opens anything outside it for anyone, even when a node
# command swaps a directory for a symlink while another user reads through
# the mount (-o allow_other). A symlink that points out is shown as a
# symlink; the reader's own kernel follows it with the reader's rights.
# Paths are limited to PATH_MAX below the node, not with the node's
# directory in front. Runs as root (a second user is created and removed).

load helpers

setup() {
	if [ "$(id -u)" != 0 ]; then
		skip "needs root: creates a second user and mounts with allow_other"
	fi
	OTHER=
	SWAPPER=
	cclfs_setup -o allow_other
	STATE_REAL=$(cd "$STATE" && pwd -P)
	# Other users reach the mount point; the state directory stays 0700.
	chmod 0711 "$TESTDIR"
}

teardown() {
	[ -n "${TESTDIR:-}" ] || return 0
	if [ -n "${SWAPPER:-}" ]; then
		touch "$W/stop" 2>/dev/null || true
		kill "$SWAPPER" 2>/dev/null || true
		wait "$SWAPPER" 2>/dev/null || true
	fi
	cclfs_kill_node_processes
	if [ -n "${OTHER:-}" ]; then
		userdel "$OTHER" 2>/dev/null || true
	fi
	cclfs_teardown
}

# A second user, removed by name in teardown (also when the test fails).
add_other_user() {
	local name=cclfsfc$$
	if id "$name" >/dev/null 2>&1; then
		echo "user $name exists already" >&2
		return 1
	fi
	useradd -M -N -s /usr/sbin/nologin "$name"
	OTHER=$name
}

as_other() {
	runuser -u "$OTHER" -- "$@"
}

# deploy NAME: a 1-node local cluster NAME, running; W is its node's
# directory on disk and F its files/ through the mount.
deploy() {
	local s i
	mkdir "$MNT/contracts/c$1"
	echo local >"$MNT/contracts/c$1/node_provider"
	echo 1 >"$MNT/contracts/c$1/node_count"
	echo "$1" >"$MNT/contracts/c$1/deploy"
	for i in $(seq 1 200); do
		s=$(cat "$MNT/clusters/$1/state")
		[ "$s" = running ] && break
		sleep 0.05
	done
	[ "$s" = running ] || {
		echo "clusters/$1 is $s" >&2
		return 1
	}
	W=$STATE_REAL/nodes/$1/0
	F=$MNT/clusters/$1/nodes/0/files
	E=$MNT/clusters/$1/nodes/0/exec
}

# Fail with a message naming what differed.
expect_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s: expected [%.300s], got [%.300s]\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# outside: a directory out of every node, with s.txt readable by root only.
make_outside() {
	OUT=$TESTDIR/outside
	mkdir -m 0755 "$OUT"
	echo OUTSIDE-SECRET >"$OUT/s.txt"
	chmod 0600 "$OUT/s.txt"
}

@test "files/ of a local node: every ordinary operation works; what it shows is what the disk holds" {
	deploy h
	cd "$F"
	echo one >a
	echo two >>a
	expect_eq "$(cat a)" "$(printf 'one\ntwo')" "cat a"
	expect_eq "$(cat "$W/a")" "$(printf 'one\ntwo')" "a on disk"
	mkdir -p d/e
	mv a d/e/b
	expect_eq "$(cat d/e/b)" "$(printf 'one\ntwo')" "renamed"
	cp /etc/passwd d/p
	cmp d/p /etc/passwd
	# owners as on disk: a file a node command gave to another uid
	echo 'echo x >d/o && chown 12345:23456 d/o && chmod 0604 d/o' >"$E"
	expect_eq "$(stat -c '%u %g %a' d/o)" "12345 23456 604" "owner and mode of d/o"
	chmod 0640 d/e/b
	expect_eq "$(stat -c %a d/e/b)" 640 mode
	expect_eq "$(stat -c %a "$W/d/e/b")" 640 "mode on disk"
	touch -d '2001-02-03 04:05:06 UTC' d/e/b
	expect_eq "$(stat -c %Y d/e/b)" "$(stat -c %Y "$W/d/e/b")" mtime
	expect_eq "$(stat -c %Y d/e/b)" 981173106 mtime
	truncate -s 3 d/e/b
	expect_eq "$(cat d/e/b)" one truncated
	# symlinks inside: made, read, followed by the reader's kernel
	ln -s e/b d/l
	expect_eq "$(readlink d/l)" e/b readlink
	expect_eq "$(cat d/l)" one "through the link"
	expect_eq "$(stat -c %F d/l)" "symbolic link" "type of the link"
	# a node command's symlink to a directory inside the node
	echo 'ln -s d/e into' >"$E"
	expect_eq "$(cat into/b)" one "through a node's link"
	# sizes, types and modes as on disk
	expect_eq "$(stat -c '%s %F %a %u %g' d/p)" "$(stat -c '%s %F %a %u %g' "$W/d/p")" "stat d/p"
	# the I/O size cp takes its buffer from (cclfs(1): 256 KiB)
	expect_eq "$(stat -c %o d/p)" 262144 "st_blksize of d/p"
	expect_eq "$(ls d | tr '\n' ' ')" "e l o p " "ls d"
	rm d/l d/o d/p d/e/b into
	rmdir d/e d
	expect_eq "$(ls -A)" "" "empty again"
	# the node's directory itself: its mode changes, it is never removed
	chmod 0750 .
	expect_eq "$(stat -c %a "$W")" 750 "node directory mode"
	cd /
	run rmdir "$F"
	[ "$status" -ne 0 ]
	[ -d "$W" ]
}

@test "a node swapping files/pub/ for a symlink out of the node: another user never reads the outside file through the daemon" {
	deploy race
	add_other_user
	make_outside
	chmod 0755 "$F" # the node's directory, open to others
	# pub/ holds an inside s.txt; the node prepares the links that lead
	# out, an absolute one and one made of ".." components.
	up=$(realpath --relative-to="$W" "$OUT")
	echo "mkdir pub && echo inside >pub/s.txt && chmod 0644 pub/s.txt && ln -s '$OUT' abs && ln -s '$up' rel" >"$E"
	expect_eq "$(as_other cat "$F/pub/s.txt")" inside "inside, as the other user"
	# The outside file is the other user's to read with their own rights
	# only: they cannot.
	run as_other cat "$OUT/s.txt"
	[ "$status" -ne 0 ]

	# Once: the node makes pub/ a symlink out. The command's end drops
	# the attributes the reader's kernel held of files/: finding that
	# pub/ changed type, the kernel fails the read (EIO) and looks pub
	# up afresh the next time, then follows the symlink itself: the
	# absolute one is refused by the outside file's mode, the relative
	# one leads nowhere in the mount. Had it still known pub/ as a
	# directory, the read would reach the daemon as pub/s.txt, which
	# refuses it (EACCES): never the outside file.
	for link in abs rel; do
		# pub/ is a directory again: a kernel that held it as a
		# symlink finds out within the entry cache time
		wait_until 5 as_other cat "$F/pub/s.txt" >/dev/null
		expect_eq "$(as_other cat "$F/pub/s.txt")" inside "before the $link swap"
		echo "mv -T pub pub.dir && mv -T $link pub" >"$E"
		run as_other cat "$F/pub/s.txt"
		[[ "$output" != *OUTSIDE-SECRET* ]]
		[ "$status" -ne 0 ]
		[[ "$output" == *"Permission denied"* ||
			"$output" == *"Input/output error"* ]]
		# root asking the daemon through a stale entry is refused too
		run cat "$F/pub/s.txt"
		[[ "$output" != *OUTSIDE-SECRET* ]] || [ "$(stat -c %F "$F/pub")" = "symbolic link" ]
		echo "mv -T pub $link && mv -T pub.dir pub" >"$E"
	done

	# The race: the node swaps pub/ back and forth with both links until
	# told to stop, while the other user reads pub/s.txt again and again.
	echo 'while [ ! -e stop ]; do
	mv -T pub pub.dir; mv -T abs pub; mv -T pub abs; mv -T pub.dir pub
	mv -T pub pub.dir; mv -T rel pub; mv -T pub rel; mv -T pub.dir pub
done' >"$TESTDIR/swap.sh"
	cp "$TESTDIR/swap.sh" "$W/swap.sh"
	echo 'sh swap.sh' >"$E" &
	SWAPPER=$!
	# (read, a shell builtin: one open and read each, no process)
	# A short read is echoed too (the kernel caps a read at the size it
	# knows, here the inside file's).
	as_other bash -c 'for ((i = 0; i < 5000; i++)); do
		{ IFS= read -r line; echo "$line"; } <"$1"
	done 2>&1' _ "$F/pub/s.txt" >"$TESTDIR/reads" || true
	touch "$W/stop"
	wait "$SWAPPER"
	SWAPPER=
	# Every read gave the inside file or an error, never anything else.
	# (Invalid argument, Input/output error: the reader's kernel held pub
	# as a symlink, or a directory, that the node had just swapped.)
	errors='.*: (Permission denied|No such file or directory|Invalid argument|Input/output error)'
	inside=$(grep -cx inside "$TESTDIR/reads" || true)
	failed=$(grep -cxE "$errors" "$TESTDIR/reads" || true)
	other=$(grep -cvxE "inside|$errors" "$TESTDIR/reads" || true)
	echo "5000 reads: $inside inside, $failed failed, $other other" >&2
	grep -vxE "inside|$errors" "$TESTDIR/reads" | sort | uniq -c | head -5 >&2 || true
	expect_eq "$(grep -c OUT "$TESTDIR/reads")" 0 "reads of the outside file"
	expect_eq "$other" 0 "reads that were neither the inside file nor an error"
	expect_eq "$((inside + failed))" 5000 "reads made"
	# the node's directory is as it was: pub/ with the inside file
	expect_eq "$(cat "$W/pub/s.txt")" inside "pub/s.txt after the race"
}

@test "a symlink pointing out of the node is shown as a symlink with its target, never followed by the daemon" {
	deploy s
	add_other_user
	make_outside
	chmod 0755 "$F"
	echo "ln -s '$OUT' out && ln -s ../../../../outside/s.txt up && ln -s / root" >"$E"
	expect_eq "$(stat -c %F "$F/out")" "symbolic link" "type of out"
	expect_eq "$(readlink "$F/out")" "$OUT" "target of out"
	expect_eq "$(as_other readlink "$F/out")" "$OUT" "target of out, as the other user"
	expect_eq "$(readlink "$F/up")" ../../../../outside/s.txt "target of up"
	expect_eq "$(ls "$F" | tr '\n' ' ')" "out root up " "ls"
	# The other user's kernel follows the links with their rights: the
	# outside file stays theirs to read only by its mode.
	run as_other cat "$F/out/s.txt"
	[ "$status" -ne 0 ]
	[[ "$output" != *OUTSIDE-SECRET* ]]
	run as_other cat "$F/root$OUT/s.txt"
	[ "$status" -ne 0 ]
	[[ "$output" != *OUTSIDE-SECRET* ]]
	# One made through the mount is stored as given.
	ln -s /etc/hostname "$F/host"
	expect_eq "$(readlink "$W/host")" /etc/hostname "on disk"
	expect_eq "$(stat -c %F "$F/host")" "symbolic link" "type of host"
	# Operations on a link act on the link itself.
	touch -h -d '2001-02-03 04:05:06 UTC' "$F/out"
	expect_eq "$(stat -c %Y "$W/out")" 981173106 "mtime of the link"
	[ "$(stat -c %Y "$OUT")" != 981173106 ]
	mv "$F/out" "$F/out2"
	[ -L "$W/out2" ]
	rm "$F/out2" "$F/host"
	[ -f "$OUT/s.txt" ]
	[ ! -e "$W/out2" ]
}

@test "\"..\" never leads out: a node's symlink made of .. is refused by the daemon, .. in a path stays in the tree" {
	deploy dots
	add_other_user
	make_outside
	chmod 0755 "$F"
	up=$(realpath --relative-to="$W/pub" "$OUT")
	echo "mkdir -p pub/in && echo inside >pub/in/s.txt && chmod -R a+rX pub" >"$E"
	# .. in a path through the mount is the mount's: files/pub/.. is files/
	expect_eq "$(as_other cat "$F/pub/in/../in/s.txt")" inside "pub/in/../in"
	expect_eq "$(stat -c %i "$F/pub/..")" "$(stat -c %i "$F")" "pub/.. is files/"
	# pub/in/ known to the reader's kernel as a directory, then made a
	# symlink of .. components out of the node: refused by the daemon.
	echo "mv -T pub/in pub/in.dir && ln -s '$up' pub/in" >"$E"
	for p in in/s.txt in; do
		run as_other cat "$F/pub/$p"
		[[ "$output" != *OUTSIDE-SECRET* ]]
	done
	run ls "$F/pub/in/"
	[[ "$output" != *s.txt* ]] || [ "$(stat -c %F "$F/pub/in")" = "symbolic link" ]
	# ..s that stay inside the node are followed
	echo "rm pub/in && ln -s ../pub/in.dir pub/in" >"$E"
	expect_eq "$(as_other cat "$F/pub/in/s.txt")" inside "through ../pub/in.dir"
}

@test "a path of 4,000 bytes below the node works, longer than PATH_MAX with the node's directory in front" {
	deploy deep
	seg=$(printf 'd%.0s' $(seq 1 200))
	name=$(printf 'f%.0s' $(seq 1 70))
	rel=
	cd "$F"
	for i in $(seq 1 20); do
		mkdir "$seg"
		cd "$seg"
		rel=$rel$seg/
	done
	rel=$rel$name
	echo deep >"$name"
	echo deeper >>"$name"
	echo "${#rel} bytes below the node, ${#W} for the node's directory" >&2
	[ "${#rel}" -ge 4000 ]
	[ "${#rel}" -lt 4096 ]
	[ $((${#W} + 1 + ${#rel})) -gt 4095 ]
	expect_eq "$(cat "$name")" "$(printf 'deep\ndeeper')" "read back"
	expect_eq "$(stat -c %s "$name")" 12 size
	# as the node's commands see it
	echo "cat '$rel'" >"$E"
	expect_eq "$(cat "$MNT/clusters/deep/nodes/0/stdout")" "$(printf 'deep\ndeeper')" "seen by a node command"
	# every operation at that depth
	mv "$name" g
	ln -s g "$name"
	expect_eq "$(readlink "$name")" g readlink
	chmod 0600 g
	truncate -s 4 g
	touch -d '2001-02-03 04:05:06 UTC' g
	expect_eq "$(stat -c '%a %Y %s' g)" "600 981173106 4" "chmod, touch, truncate"
	mkdir sub
	rmdir sub
	rm g "$name"
	expect_eq "$(ls -A)" "" "empty"
	cd "$F"
	rm -r "$seg"
	expect_eq "$(ls -A "$W")" "" "node directory empty"
}
