#!/usr/bin/env bats
# Other users see what the modes say. Mounted by root with -o allow_other,
# a second user (made by the test, removed by name in teardown) reads the
# tree and what a cluster is (info, state, a node's status) but not its
# outputs (stdout, stderr, exec, log, error) or secrets (config/environment
# and the contract's error that may quote it), runs no command and changes
# no state; under files/ owners and modes are the disk's, so they can do
# there exactly what the disk beneath allows.

load helpers

setup() {
	OTHER=cclfs-other-$$
	useradd -M -N -d / -s /bin/sh "$OTHER" ||
		skip "cannot create a user here"
	cclfs_setup -o allow_other
	# The test's directory is private; let the other user reach the mount.
	chmod 755 "$TESTDIR" "$MNT"
}

teardown() {
	cclfs_kill_node_processes
	cclfs_teardown
	userdel "$OTHER" 2>/dev/null || true
}

# as_other COMMAND: run a shell command as the other user, in the mount.
as_other() {
	run runuser -u "$OTHER" -- sh -c "cd '$MNT' && $1"
}

# other_can / other_cannot COMMAND: it succeeds / fails with EACCES.
other_can() {
	as_other "$1"
	[ "$status" -eq 0 ] || {
		echo "as $OTHER: [$1] failed: $output" >&2
		return 1
	}
}

other_cannot() {
	as_other "$1"
	[ "$status" -ne 0 ] && [[ "$output" == *"Permission denied"* ]] || {
		echo "as $OTHER: [$1] gave status $status: $output" >&2
		return 1
	}
}

mode_of() {
	stat -c %a "$MNT/$1"
}

@test "another user reads what a cluster is, not its outputs, and changes nothing" {
	mkdir "$MNT/contracts/c"
	echo local >"$MNT/contracts/c/node_provider"
	echo 1 >"$MNT/contracts/c/node_count"
	echo 'SECRET_TOKEN=marker-7f3a' >"$MNT/contracts/c/config/environment"
	echo h >"$MNT/contracts/c/deploy"
	wait_state h running
	echo 'echo private-output; echo private-err >&2' >"$MNT/clusters/h/nodes/0/exec"
	echo 'echo all-output' >"$MNT/clusters/h/exec"

	# the modes say it
	for f in clusters/h/exec clusters/h/nodes/0/exec; do
		[ "$(mode_of "$f")" = 600 ] || {
			echo "$f: mode $(mode_of "$f")" >&2
			false
		}
	done
	for f in clusters/h/log clusters/h/error clusters/h/nodes/0/stdout \
		clusters/h/nodes/0/stderr contracts/c/error; do
		[ "$(mode_of "$f")" = 400 ] || {
			echo "$f: mode $(mode_of "$f")" >&2
			false
		}
	done
	[ "$(mode_of contracts/c/config/environment)" = 600 ]

	# what a cluster is: readable
	other_can 'ls contracts clusters clusters/h clusters/h/nodes/0 catalog'
	other_can 'cat README clusters/h/info clusters/h/state clusters/h/nodes/0/status clusters/h/hostfile contracts/c/node_count >/dev/null'
	# its outputs and secrets: not
	for f in clusters/h/log clusters/h/error clusters/h/exec \
		clusters/h/nodes/0/exec clusters/h/nodes/0/stdout \
		clusters/h/nodes/0/stderr contracts/c/error \
		contracts/c/config/environment; do
		other_cannot "cat $f"
		[[ "$output" != *private-* && "$output" != *marker-7f3a* ]]
	done
	# no command, no state change, no new contract, no value
	other_cannot "echo 'touch /tmp/$OTHER-ran' > clusters/h/nodes/0/exec"
	other_cannot "echo 'touch /tmp/$OTHER-ran' > clusters/h/exec"
	[ ! -e "/tmp/$OTHER-ran" ]
	other_cannot 'echo interrupted > clusters/h/state'
	other_cannot 'touch clusters/h/restart'
	other_cannot 'mkdir contracts/mine'
	other_cannot 'echo 3 > contracts/c/node_count'
	other_cannot 'touch contracts/c/deploy'
	other_cannot 'rmdir contracts/c'
	[ "$(cat "$MNT/clusters/h/state")" = running ]
	[ "$(cat "$MNT/contracts/c/node_count")" = 1 ]
	[ ! -e "$MNT/contracts/mine" ]
	# the mounting user still reads everything
	grep -q all-output "$MNT/clusters/h/exec"
	grep -q marker-7f3a "$MNT/contracts/c/config/environment"
}

@test "under files/ another user does what the disk beneath allows" {
	mkdir "$MNT/contracts/c"
	echo local >"$MNT/contracts/c/node_provider"
	echo 2 >"$MNT/contracts/c/node_count"
	echo h >"$MNT/contracts/c/deploy"
	wait_state h running
	# a node directory is 0700 until a node command opens it (node 1)
	echo 'echo in-private >private.txt' >"$MNT/clusters/h/nodes/1/exec"
	[ "$(mode_of clusters/h/nodes/1/files)" = 700 ]
	other_cannot "ls clusters/h/nodes/1/files"
	other_cannot "cat clusters/h/nodes/1/files/private.txt"
	# node 0 opens its directory and one file before anyone looks
	F=clusters/h/nodes/0/files
	echo 'chmod 755 . && echo shared >pub.txt && chmod 644 pub.txt && echo in-private >private.txt && chmod 600 private.txt && mkdir -m 1777 drop' \
		>"$MNT/clusters/h/nodes/0/exec"
	# owners and modes as on disk
	[ "$(stat -c '%a %u' "$MNT/$F")" = "$(stat -c '%a %u' "$STATE/nodes/h/0")" ]
	[ "$(stat -c '%a %U' "$MNT/$F/pub.txt")" = "644 root" ]
	[ "$(stat -c '%a %U' "$MNT/$F/private.txt")" = "600 root" ]
	other_can "ls $F"
	as_other "cat $F/pub.txt"
	[ "$output" = shared ]
	other_cannot "cat $F/private.txt"
	other_cannot "echo x >> $F/pub.txt"
	other_cannot "touch $F/new.txt"
	other_cannot "rm -f $F/pub.txt"
	[ "$(cat "$MNT/$F/pub.txt")" = shared ]
	[ ! -e "$MNT/$F/new.txt" ]
	# a folder the node gives them is theirs to write in
	other_can "echo mine > $F/drop/theirs.txt && cat $F/drop/theirs.txt"
	[ "$(cat "$STATE/nodes/h/0/drop/theirs.txt")" = mine ]
}
