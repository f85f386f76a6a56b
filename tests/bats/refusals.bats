#!/usr/bin/env bats
# Every refusal explains itself: an operation the tree does not allow on a
# cluster's files (write to a read-only file, rm, mv, chmod, mkdir, a new
# file) returns its errno and leaves one sentence naming the file in the
# cluster's error file and log, as contracts' refusals do. Bytes that are
# not printable UTF-8 show as \xNN in error files and logs alike. A
# descriptor whose command was refused reads nothing.

load helpers

setup() {
	cclfs_setup
}

teardown() {
	cclfs_kill_node_processes
	# The small disk of the full-disk test goes before the test's folder.
	if [ -n "${TMPFS:-}" ] && mountpoint -q "$TMPFS"; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
		kill -9 "${CCLFS_PIDS[@]}" 2>/dev/null || true
		umount -l "$TMPFS"
	fi
	cclfs_teardown
}

expect_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s: expected [%.400s], got [%.400s]\n' "${3:-value}" \
			"$2" "$1" >&2
		return 1
	fi
}

# local_cluster HANDLE: a one-node local cluster, running.
local_cluster() {
	mkdir "$MNT/contracts/c"
	echo local >"$MNT/contracts/c/node_provider"
	echo 1 >"$MNT/contracts/c/node_count"
	echo "$1" >"$MNT/contracts/c/deploy"
	wait_state "$1" running
}

# refused ERRNO_TEXT SENTENCE COMMAND: the shell command fails with that
# error, the cluster's error file holds exactly SENTENCE, and its log ends
# with it.
refused() {
	local want=$1 sentence=$2
	shift 2
	run_shell "$*"
	[ "$status" -ne 0 ] || {
		echo "[$*] succeeded" >&2
		return 1
	}
	[[ "$output" == *"$want"* ]] || {
		echo "[$*]: expected [$want], got [$output]" >&2
		return 1
	}
	expect_eq "$(cat "$MNT/clusters/h/error")" "$sentence" "error after [$*]"
	expect_eq "$(stat -c %s "$MNT/clusters/h/error")" \
		"$(wc -c <"$MNT/clusters/h/error")" "size of error after [$*]"
	expect_eq "$(tail -n 1 "$MNT/clusters/h/log" | cut -d ' ' -f 2-)" "$sentence" \
		"last log line after [$*]"
}

@test "refusals on a cluster's files: errno from the call, one sentence in error and log, nothing changed" {
	local_cluster h
	info=$(grep -v "^hours_billed" "$MNT/clusters/h/info")
	ro='this file is read-only; cclfs writes it'
	gone="the files of a cluster go with it: rmdir the cluster's folder once it is terminated"
	modes="the modes and owners of cclfs's own files tell what can be done with them and do not change"
	refused 'Permission denied' "clusters/h/info: $ro" 'echo x > clusters/h/info'
	refused 'Permission denied' "clusters/h/nodes/0/status: $ro" \
		'echo x >> clusters/h/nodes/0/status'
	refused 'Permission denied' "clusters/h/hostfile: $ro" \
		'truncate -s 0 clusters/h/hostfile'
	refused 'Operation not permitted' "clusters/h/state: $gone" \
		'rm -f clusters/h/state'
	refused 'Operation not permitted' "clusters/h/nodes/0/exit_status: $gone" \
		'rm -f clusters/h/nodes/0/exit_status'
	refused 'Operation not permitted' \
		"clusters/h/info: nothing in cclfs can be renamed; copy the values into a new contract instead" \
		'mv clusters/h/info clusters/h/info2'
	refused 'Operation not permitted' "clusters/h/state: $modes" \
		'chmod 600 clusters/h/state'
	refused 'Permission denied' \
		"clusters/h/notes: a cluster holds the files its deploy made; this one is not among them (see cclfs(1))" \
		'touch clusters/h/notes'
	refused 'Permission denied' \
		"clusters/h/nodes/0/scratch: a cluster holds the files and folders its deploy made; nothing can be created in it (files/ of a node can hold anything)" \
		'mkdir clusters/h/nodes/0/scratch'
	refused 'Permission denied' \
		"clusters/h/nodes/0: the folders of a cluster go with it: rmdir the cluster's folder once it is terminated" \
		'rmdir clusters/h/nodes/0'
	# nothing changed
	expect_eq "$(grep -v "^hours_billed" "$MNT/clusters/h/info")" "$info" info
	expect_eq "$(cat "$MNT/clusters/h/state")" running state
	[ -e "$MNT/clusters/h/nodes/0/exit_status" ]
	[ ! -e "$MNT/clusters/h/notes" ]
	[ ! -e "$MNT/clusters/h/nodes/0/scratch" ]
	# a change to what the mode is already is no change, and no refusal
	echo 'echo ok' >"$MNT/clusters/h/nodes/0/exec"
	mode=$(stat -c %a "$MNT/clusters/h/state")
	chmod "$mode" "$MNT/clusters/h/state"
	expect_eq "$(cat "$MNT/clusters/h/error")" "" "error after a chmod to the same mode"
}

@test "bytes that are not printable UTF-8 show as \\xNN in error and log alike; printable UTF-8 as it is" {
	local_cluster h
	refused 'Permission denied' \
		'clusters/h/caf\xff\x01\xc3: a cluster holds the files its deploy made; this one is not among them (see cclfs(1))' \
		"touch \$'clusters/h/caf\\xff\\x01\\xc3'"
	refused 'Permission denied' \
		"clusters/h/été…: a cluster holds the files its deploy made; this one is not among them (see cclfs(1))" \
		'touch clusters/h/été…'
	run_shell "printf 'resum\\xe9\\n' > clusters/h/state"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Invalid argument"* ]]
	grep -qF 'resum\xe9' "$MNT/clusters/h/error"
	grep -qF 'resum\xe9' "$MNT/clusters/h/log"
	# contracts quote values and names the same way
	run_shell "printf 'two\\xff\\x01\\n' > contracts/c/node_count"
	[ "$status" -eq 1 ]
	grep -qF '"two\xff\x01"' "$MNT/contracts/c/error"
	run_shell "touch \$'contracts/c/n\\xfe'"
	[ "$status" -eq 1 ]
	grep -qF 'contracts/c/n\xfe: ' "$MNT/contracts/c/error"
	# no raw byte above 0x7e that is not UTF-8, nor a control, anywhere
	run bash -c "iconv -f UTF-8 -t UTF-8 '$MNT/clusters/h/log' >/dev/null"
	[ "$status" -eq 0 ]
	! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n\t' <"$MNT/clusters/h/log")
}

@test "a read-write descriptor whose command was refused reads nothing, not another command's output" {
	local_cluster h
	echo 'echo another-process-output-0123456789' >"$MNT/clusters/h/exec"
	echo interrupt >"$MNT/clusters/h/state"
	wait_state h interrupted
	run bash -c "exec 3<>'$MNT/clusters/h/exec' && { echo 'echo mine' >&3 2>/dev/null; echo \"write=\$?\"; cat <&3; }"
	[[ "$output" == "write=1"* ]] || {
		echo "output: [$output]" >&2
		false
	}
	[[ "$output" != *another-process-output* ]]
	[[ "$output" != *mine* ]]
	expect_eq "${output##*$'\n'}" "write=1" "what the descriptor read after the refusal"
	# the node file's descriptor too
	run bash -c "exec 3<>'$MNT/clusters/h/nodes/0/exec' && { echo 'echo mine' >&3 2>/dev/null; echo \"write=\$?\"; cat <&3; }"
	[[ "$output" != *another-process-output* ]]
	# the refusal explains itself
	grep -q 'clusters/h/exec: ' "$MNT/clusters/h/error" ||
		grep -q 'clusters/h/nodes/0/exec: ' "$MNT/clusters/h/error"
	# a later command through a new descriptor reads its own output only
	echo resume >"$MNT/clusters/h/state"
	wait_state h running
	run bash -c "exec 3<>'$MNT/clusters/h/nodes/0/exec' && { echo 'echo mine' >&3; cat <&3; }"
	expect_eq "$output" mine "output after resume"
}

@test "a full disk: a state write, a command and a deploy are ENOSPC with a sentence; after space is freed they work and nothing is lost" {
	cclfs_unmount
	TMPFS=$TESTDIR/small
	mkdir "$TMPFS"
	mount -t tmpfs -o size=2m,mode=0700 cclfs-test-small "$TMPFS" ||
		skip "cannot mount a tmpfs here"
	STATE=$TMPFS/state
	cclfs_mount
	local_cluster h
	echo 'echo before-full' >"$MNT/clusters/h/nodes/0/exec"
	# fill the disk (root sees the reserved blocks too)
	dd if=/dev/zero of="$TMPFS/filler" bs=64k 2>/dev/null || true
	run_shell 'echo interrupted > clusters/h/state'
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[[ "$(cat "$MNT/clusters/h/error")" == "clusters/h/state: "*"no space is left on its disk"* ]] || {
		echo "error: [$(cat "$MNT/clusters/h/error")]" >&2
		false
	}
	expect_eq "$(cat "$MNT/clusters/h/state")" running "state on a full disk"
	# a command whose outputs have no room, and a deploy that cannot be
	# recorded: the same errno, nothing run, nothing made
	run_shell "echo 'touch ran' > clusters/h/nodes/0/exec"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[ ! -e "$STATE/nodes/h/0/ran" ]
	run_shell 'echo h2 > contracts/c/deploy'
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[ ! -e "$MNT/clusters/h2" ]
	# space again: the same write works, and everything is still there
	rm -f "$TMPFS/filler"
	echo interrupted >"$MNT/clusters/h/state"
	wait_state h interrupted
	cclfs_unmount
	cclfs_mount
	expect_eq "$(cat "$MNT/clusters/h/state")" interrupted "state after a remount"
	expect_eq "$(cat "$MNT/clusters/h/nodes/0/stdout")" before-full "stdout after a remount"
	cclfs_unmount
	umount "$TMPFS"
}
