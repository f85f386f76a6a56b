#!/usr/bin/env bats
# What shell tools and file managers see: touch on triggers, ls -l sizes and
# times, gio (GNOME file managers), cat, grep -r, cp -r, find, stat, and
# concurrent writers.

load helpers

setup() {
	cclfs_setup
	C=$MNT/contracts/c1
	mkdir "$C"
	# The local type is the one type of the local provider: this contract
	# resolves to it (the cloud catalog is the business of resolve.bats).
	echo local >"$C/node_provider"
}

teardown() {
	cclfs_teardown
}

@test "touch on a trigger fires it; a failure shows as 'touch: setting times of'" {
	run touch "$C/resolve"
	[ "$status" -eq 0 ]
	[ "$(cut -f1-3 "$C/resolution")" = "$(printf 'node\tlocal\tlocal')" ]
	[ ! -s "$C/error" ]
	echo 'atleast 1P' >"$C/node_memory_size"
	[ ! -s "$C/resolution" ]
	run touch "$C/resolve"
	[ "$status" -eq 1 ]
	[[ "$output" == "touch: setting times of '$C/resolve': Invalid argument" ]]
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: no instance type satisfies node_memory_size"*"closest is local local"* ]]
	[ ! -s "$C/resolution" ]
	grep -q "contracts/c1/resolve: no instance type satisfies node_memory_size" "$TESTDIR/daemon.log"
}

@test "writing anything to a trigger fires it too" {
	echo go >"$C/resolve"
	[ -s "$C/resolution" ]
	[ ! -s "$C/resolve" ]
}

@test "touch -d, touch -m and cp -p do not fire a trigger" {
	touch -d '2020-01-02 03:04:05' "$C/resolve"
	[ ! -s "$C/resolution" ]
	touch -m "$C/resolve"
	[ ! -s "$C/resolution" ]
	touch -a "$C/resolve"
	[ ! -s "$C/resolution" ]
	: >"$TESTDIR/empty"
	run cp -p "$TESTDIR/empty" "$C/resolve"
	[ ! -s "$C/resolution" ]
	touch "$C/resolve"
	[ -s "$C/resolution" ]
}

@test "touch on value files, folders and the contract succeeds and changes nothing" {
	echo 4 >"$C/node_count"
	before=$(stat -c %Y "$C/node_count")
	sleep 1.1
	touch "$C/node_count" "$C" "$C/manager" "$C/config/user"
	[ "$(cat "$C/node_count")" = 4 ]
	[ "$(stat -c %Y "$C/node_count")" = "$before" ]
	[ ! -s "$C/error" ]
}

@test "deploy checks the name, resolves the contract, and reports failures against deploy" {
	run_shell "echo 'my cluster' > contracts/c1/deploy"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Invalid argument"* ]]
	[ "$(cat "$C/error")" = "contracts/c1/deploy: \"my cluster\" is not a cluster name: use 1 to 64 letters, digits, '.', '_' or '-'" ]
	[ -z "$(ls "$MNT/clusters")" ]
	# A failed resolution is reported against deploy, which failed.
	echo 'atleast 1P' >"$C/node_memory_size"
	run touch "$C/deploy"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Invalid argument"* ]]
	[[ "$(cat "$C/error")" == "contracts/c1/deploy: no instance type satisfies node_memory_size"* ]]
	# On the local provider it deploys, under a name or 15 letters.
	rm "$C/node_memory_size"
	echo local >"$C/node_provider"
	echo named >"$C/deploy"
	touch "$C/deploy"
	[ ! -s "$C/error" ]
	[ -d "$MNT/clusters/named" ]
	[ "$(ls "$MNT/clusters" | grep -cE '^[A-Za-z]{15}$')" = 1 ]
	run_shell "echo named > contracts/c1/deploy"
	[ "$status" -eq 1 ]
	[[ "$output" == *"File exists"* ]]
}

@test "changing the resolve policy clears a stored resolution; node_count does not" {
	touch "$C/resolve"
	[ -s "$C/resolution" ]
	echo 5 >"$C/node_count"
	[ -s "$C/resolution" ]
	echo cheapest >"$C/config/resolve_policy"
	[ ! -s "$C/resolution" ]
	touch "$C/resolve"
	[ -s "$C/resolution" ]
}

@test "ls -l shows true sizes and the time each value last changed" {
	echo 'atleast 16g' >"$C/node_memory_size"
	sleep 1.1
	echo 7 >"$C/node_count"
	for f in "$C"/* "$C"/manager/* "$C"/config/*; do
		[ -f "$f" ] || continue
		[ "$(stat -c %s "$f")" = "$(wc -c <"$f")" ]
	done
	[ "$(stat -c %s "$C/node_memory_size")" = 12 ]
	ls -l --time-style=+%s "$C" >"$TESTDIR/ls"
	mem=$(awk '$NF == "node_memory_size" {print $6}' "$TESTDIR/ls")
	cnt=$(awk '$NF == "node_count" {print $6}' "$TESTDIR/ls")
	[ $((cnt - mem)) -ge 1 ]
	[ "$(awk '$NF == "node_count" {print $5}' "$TESTDIR/ls")" = 2 ]
	# A refused write changes neither the value nor its time.
	! echo bad >"$C/node_count"
	[ "$(stat -c %Y "$C/node_count")" = "$cnt" ]
	# The error file's size is true at once after a refusal elsewhere.
	[ "$(stat -c %s "$C/error")" = "$(wc -c <"$C/error")" ]
	[ "$(stat -c %s "$C/error")" -gt 0 ]
}

@test "gio list -a '*' (GNOME file managers) lists every file with its real size and type" {
	command -v gio >/dev/null || skip "gio (libglib2.0-bin) is not installed"
	echo 'atleast 16G' >"$C/node_memory_size"
	run gio list -a '*' "$C"
	[ "$status" -eq 0 ]
	# One line per entry of ls -A.
	[ "$(printf '%s\n' "$output" | wc -l)" = "$(ls -A "$C" | wc -l)" ]
	while IFS=$'\t' read -r name size type attrs; do
		if [ -d "$C/$name" ]; then
			[ "$type" = "(directory)" ]
		else
			[ "$type" = "(regular)" ]
			[ "$size" = "$(wc -c <"$C/$name")" ]
			[[ "$attrs" == *"standard::content-type=text/plain"* || "$size" = 0 ]]
		fi
	done <<<"$output"
	# Modes as the file manager sees them (0100444, 0100400 and 0100644).
	line=$(printf '%s\n' "$output" | grep -P '^resolution\t')
	[[ "$line" == *"unix::mode=33060"* ]]
	line=$(printf '%s\n' "$output" | grep -P '^error\t')
	[[ "$line" == *"unix::mode=33024"* ]]
	line=$(printf '%s\n' "$output" | grep -P '^node_memory_size\t12\t')
	[[ "$line" == *"unix::mode=33188"* ]]
}

@test "cat, grep -r, find and stat behave on the whole tree" {
	echo 'atleast 24G' >"$C/node_memory_size"
	echo 'just 6' >"$C/worker/node_vcpus_count"
	[ "$(cat "$C/node_memory_size" "$C/worker/node_vcpus_count")" = "$(printf 'atleast 24G\njust 6')" ]
	run grep -r 'just 6' "$MNT/contracts"
	[ "$status" -eq 0 ]
	[ "$output" = "$MNT/contracts/c1/worker/node_vcpus_count:just 6" ]
	run grep -rl atleast "$MNT/contracts"
	[ "$output" = "$MNT/contracts/c1/node_memory_size" ]
	# 27 files and 4 folders in a contract, 19 in manager/ and worker/,
	# 20 in config/.
	[ "$(find "$C" -type f | wc -l)" = $((27 + 19 + 19 + 27)) ]
	[ "$(find "$C" -mindepth 1 -type d | wc -l)" = 4 ]
	[ "$(find "$MNT" -name node_count)" = "$C/node_count" ]
	[ "$(stat -c '%F %a %s' "$C/node_memory_size")" = "regular file 644 12" ]
	[ -f "$C/error" ] && [ "$(stat -c '%a' "$C/error")" = 400 ]
	[ "$(stat -c '%F %a' "$C/manager")" = "directory 755" ]
	[ "$(stat -c '%U' "$C/node_count")" = "$(id -un)" ]
}

@test "cp -r copies a contract out with every value" {
	echo 'atleast 16G' >"$C/node_memory_size"
	echo 3 >"$C/node_count"
	echo ubuntu >"$C/config/user"
	cp -r "$C" "$TESTDIR/copy"
	diff -r "$C" "$TESTDIR/copy"
	[ "$(cat "$TESTDIR/copy/node_memory_size")" = "atleast 16G" ]
	[ "$(cat "$TESTDIR/copy/config/user")" = ubuntu ]
	[ "$(find "$TESTDIR/copy" -type f | wc -l)" = 92 ]
}

@test "eight concurrent shell loops leave a consistent tree; last write wins" {
	for i in 1 2 3 4 5 6 7 8; do mkdir "$MNT/contracts/w$i"; done
	pids=()
	for i in 1 2 3 4 5 6 7 8; do
		(
			for n in $(seq 1 40); do
				echo "$n" >"$MNT/contracts/w$i/node_count"
				echo "$i" >"$C/node_count"
				echo "atleast ${n}G" >"$MNT/contracts/w$i/node_memory_size"
				echo "just $i" >"$C/node_vcpus_count"
			done
		) 3>&- &
		pids+=($!)
	done
	# Not a bare wait: the daemon is a background job of this shell too.
	wait "${pids[@]}"
	for i in 1 2 3 4 5 6 7 8; do
		[ "$(cat "$MNT/contracts/w$i/node_count")" = 40 ]
		[ "$(cat "$MNT/contracts/w$i/node_memory_size")" = "atleast 40G" ]
		[ ! -s "$MNT/contracts/w$i/error" ]
	done
	shared=$(cat "$C/node_count")
	[[ "$shared" =~ ^[1-8]$ ]]
	vcpus=$(cat "$C/node_vcpus_count")
	[[ "$vcpus" =~ ^just\ [1-8]$ ]]
	[ ! -s "$C/error" ]
	# What is on disk is what was shown.
	cclfs_unmount
	cclfs_mount
	[ "$(cat "$C/node_count")" = "$shared" ]
	[ "$(cat "$C/node_vcpus_count")" = "$vcpus" ]
	[ "$(ls "$MNT/contracts" | wc -l)" = 9 ]
}

@test "python's open().write() gets the error; os.write of one value works" {
	command -v python3 >/dev/null || skip "python3 is not installed"
	run python3 -c "
import sys
try:
    with open(sys.argv[1], 'w') as f:
        f.write('nope\n')
except OSError as e:
    print('errno', e.errno)
" "$C/node_count"
	[ "$output" = "errno 22" ]
	python3 -c "
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b'12\n')
os.close(fd)" "$C/node_count"
	[ "$(cat "$C/node_count")" = 12 ]
}
