#!/usr/bin/env bats
# The state store checks itself: a damaged, truncated, missing or empty
# state.db is refused at mount with a sentence saying what to do, never
# mounted with defaults; a last-good copy is kept and -o recover mounts from
# it; a store that cannot be written is refused, and a write that cannot be
# stored (disk full, read-only) fails with ENOSPC / EROFS and says why in
# the contract's error file.

load helpers

setup() {
	TMPFS_MOUNTS=()
	cclfs_setup --no-mount
}

# The pid of the process running in the node directory $1 (one expected).
node_pid() {
	local link
	link=$(find /proc/[0-9]*/cwd -maxdepth 0 -lname "$1" 2>/dev/null)
	link=${link%/cwd}
	echo "${link#/proc/}"
}

teardown() {
	local pid
	cclfs_kill_node_processes
	if cclfs_is_mounted; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for pid in "${CCLFS_PIDS[@]}"; do
		wait_until 10 pid_exited "$pid" || kill -9 "$pid" 2>/dev/null
	done
	chattr -R -i "$STATE" 2>/dev/null || true
	for m in "${TMPFS_MOUNTS[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	cclfs_teardown
}

need_root() {
	[ "$(id -u)" = 0 ] || skip "needs root (tmpfs mounts, chattr)"
}

# A mount that must be refused: non-zero exit, nothing mounted; what it
# said is in $output (and in daemon.log, for the sanitizer check).
mount_refused() {
	run "$CCLFS_BIN" "$MNT" -o statedir="$STATE"
	echo "$output" >>"$TESTDIR/daemon.log"
	if [ "$status" -eq 0 ]; then
		echo "cclfs mounted although it should not have: $output" >&2
		return 1
	fi
	! cclfs_is_mounted
}

# 61 contracts with three values each (about ten pages of state.db).
populate() {
	local i
	for i in $(seq 1 61); do
		mkdir "$MNT/contracts/c$i"
		echo "$i" >"$MNT/contracts/c$i/node_count"
		echo local >"$MNT/contracts/c$i/node_provider"
		echo "atleast ${i}G" >"$MNT/contracts/c$i/node_memory_size"
	done
}

# Every value of every contract, to compare before and after.
values() {
	(cd "$MNT/contracts" && for c in *; do
		echo "$c $(cat "$c/node_count") $(cat "$c/node_provider")" \
			"$(cat "$c/node_memory_size")"
	done)
}

# Write 4 KiB of random bytes over page $1 (from 1) of state.db.
damage_page() {
	dd if=/dev/urandom of="$STATE/state.db" bs=4096 seek=$(($1 - 1)) \
		count=1 conv=notrunc status=none
}

@test "a good store mounts, and a last-good copy of it is kept, mode 0600" {
	cclfs_mount
	populate
	cclfs_unmount
	[ "$(stat -c %a "$STATE/state.db.last-good")" = 600 ]
	cclfs_mount
	[ "$(ls "$MNT/contracts" | wc -l)" = 61 ]
	[ "$(cat "$MNT/contracts/c61/node_memory_size")" = "atleast 61G" ]
	cclfs_unmount
	# Taken after the check at this mount: it holds the 61 contracts.
	cp "$STATE/state.db.last-good" "$STATE/state.db"
	cclfs_mount
	[ "$(ls "$MNT/contracts" | wc -l)" = 61 ]
}

@test "random bytes over a page of state.db are refused at mount, at several offsets" {
	cclfs_mount
	populate
	before=$(values)
	cclfs_unmount
	cp "$STATE/state.db" "$TESTDIR/good.db"
	[ "$(stat -c %s "$TESTDIR/good.db")" -ge $((10 * 4096)) ]
	for page in 1 2 5 10; do
		cp "$TESTDIR/good.db" "$STATE/state.db"
		damage_page "$page"
		mount_refused
		[[ "$output" == *"state database $STATE/state.db is damaged"* ]]
		[[ "$output" == *"cclfs will not mount it"* ]]
		[[ "$output" == *"-o recover"* ]]
	done
	# Nothing was written to it: the damaged file is as it was.
	cp "$STATE/state.db" "$TESTDIR/damaged.db"
	mount_refused
	cmp "$STATE/state.db" "$TESTDIR/damaged.db"
	cp "$TESTDIR/good.db" "$STATE/state.db"
	cclfs_mount
	[ "$(values)" = "$before" ]
}

@test "a truncated state.db is refused at mount" {
	cclfs_mount
	populate
	cclfs_unmount
	cp "$STATE/state.db" "$TESTDIR/good.db"
	for size in 100 4096 20000 $(($(stat -c %s "$TESTDIR/good.db") - 4096)); do
		cp "$TESTDIR/good.db" "$STATE/state.db"
		truncate -s "$size" "$STATE/state.db"
		mount_refused
		[[ "$output" == *"$STATE/state.db is damaged"* ]]
	done
}

@test "-o recover moves a damaged store aside and mounts the last-good copy" {
	cclfs_mount
	populate
	before=$(values)
	cclfs_unmount
	# This mount takes the copy (the 61 contracts); the next change is
	# made after it.
	cclfs_mount
	mkdir "$MNT/contracts/late"
	cclfs_unmount
	damage_page 10
	cp "$STATE/state.db" "$TESTDIR/damaged.db"
	mount_refused
	[[ "$output" == *"last-good copy $STATE/state.db.last-good of "* ]]
	[[ "$output" == *"changes made after it will be missing"* ]]
	cclfs_mount -o recover
	[ "$(values)" = "$before" ]
	[ ! -e "$MNT/contracts/late" ]
	grep -q "recover: state database $STATE/state.db is damaged" "$TESTDIR/daemon.log"
	grep -q "moved aside to $STATE/state.db.damaged-" "$TESTDIR/daemon.log"
	grep -q "mounted from the last-good copy taken .*: changes made after it .* may be missing" \
		"$TESTDIR/daemon.log"
	# The damaged file is kept, named with the time.
	aside=$(ls "$STATE" | grep -E '^state\.db\.damaged-[0-9]{8}-[0-9]{6}$')
	cmp "$STATE/$aside" "$TESTDIR/damaged.db"
	# The store is good again: the next mount needs no option.
	echo 9 >"$MNT/contracts/c1/node_count"
	cclfs_unmount
	cclfs_mount
	[ "$(cat "$MNT/contracts/c1/node_count")" = 9 ]
}

@test "a missing or empty state.db beside a last-good copy is refused; -o recover mounts the copy" {
	cclfs_mount
	populate
	before=$(values)
	cclfs_unmount
	cclfs_mount
	cclfs_unmount
	rm "$STATE/state.db"
	mount_refused
	[[ "$output" == *"state database $STATE/state.db is missing"* ]]
	[[ "$output" == *"-o recover"* ]]
	: >"$STATE/state.db"
	mount_refused
	[[ "$output" == *"state database $STATE/state.db is empty"* ]]
	cclfs_mount -o recover
	[ "$(values)" = "$before" ]
	ls "$STATE" | grep -qE '^state\.db\.empty-[0-9]{8}-[0-9]{6}$'
}

@test "a missing state.db beside a local cluster's remains is refused; -o recover lists them and its processes" {
	cclfs_mount
	mkdir "$MNT/contracts/c"
	echo local >"$MNT/contracts/c/node_provider"
	echo 2 >"$MNT/contracts/c/node_count"
	echo h1 >"$MNT/contracts/c/deploy"
	wait_state h1 running
	echo 'sleep 300 >/dev/null 2>&1 &' >"$MNT/clusters/h1/nodes/1/exec"
	pid=$(node_pid "$(cd "$STATE" && pwd -P)/nodes/h1/1")
	[[ "$pid" =~ ^[0-9]+$ ]]
	cclfs_unmount
	rm "$STATE/state.db" "$STATE/state.db.last-good"
	mount_refused
	[[ "$output" == *"cluster h1 is not in the state database"* ]]
	[[ "$output" == *"2 local node directories in $STATE/nodes/h1"* ]]
	[[ "$output" == *"processes of its local nodes still run: $pid (sleep, local-"* ]]
	[[ "$output" == *"$STATE/state.db is missing"* ]]
	[[ "$output" == *"would leave it untracked"* ]]
	: >"$STATE/state.db"
	mount_refused
	[[ "$output" == *"$STATE/state.db is empty"* ]]
	[[ "$output" == *"cluster h1 is not in the state database"* ]]
	cclfs_mount -o recover
	grep -q "cluster h1 is not in the state database.*still run: $pid (sleep" \
		"$TESTDIR/daemon.log"
	grep -q "recover: 1 cluster above is not tracked by cclfs" "$TESTDIR/daemon.log"
	[ -z "$(ls "$MNT/clusters")" ]
}

@test "an immutable state.db, or a state directory on a read-only file system, is refused with a sentence" {
	need_root
	cclfs_mount
	mkdir "$MNT/contracts/c"
	cclfs_unmount
	chattr +i "$STATE/state.db" 2>/dev/null ||
		skip "this file system has no immutable attribute"
	mount_refused
	chattr -i "$STATE/state.db"
	[[ "$output" == *"$STATE/state.db is immutable (chattr +i)"* ]]
	[[ "$output" == *"run chattr -i $STATE/state.db and mount again"* ]]
	mkdir "$TESTDIR/ro"
	mount -t tmpfs -o size=2m,mode=0700 tmpfs "$TESTDIR/ro"
	TMPFS_MOUNTS+=("$TESTDIR/ro")
	cp -a "$STATE/." "$TESTDIR/ro/"
	mount -o remount,ro "$TESTDIR/ro"
	STATE=$TESTDIR/ro mount_refused
	[[ "$output" == *"$TESTDIR/ro is on a read-only file system"* ]]
}

@test "a store made immutable while mounted: EROFS and a sentence in error, then writes work again" {
	need_root
	cclfs_mount
	mkdir "$MNT/contracts/c"
	echo 3 >"$MNT/contracts/c/node_count"
	chattr +i "$STATE/state.db-wal" 2>/dev/null ||
		skip "this file system has no immutable attribute"
	run_shell 'echo 4 > contracts/c/node_count'
	chattr -i "$STATE/state.db-wal"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Read-only file system"* ]]
	[[ "$(cat "$MNT/contracts/c/error")" == "contracts/c/node_count: state database $STATE/state.db: the change was not stored: it cannot be written"* ]]
	[ "$(cat "$MNT/contracts/c/node_count")" = 3 ]
	echo 5 >"$MNT/contracts/c/node_count"
	[ ! -s "$MNT/contracts/c/error" ]
	cclfs_unmount
	cclfs_mount
	[ "$(cat "$MNT/contracts/c/node_count")" = 5 ]
}

@test "disk full: ENOSPC and a sentence in error; after space is freed writes work and nothing is lost" {
	need_root
	mkdir -p "$STATE"
	mount -t tmpfs -o size=2m,mode=0700 tmpfs "$STATE"
	TMPFS_MOUNTS+=("$STATE")
	cclfs_mount
	for c in a b c; do
		mkdir "$MNT/contracts/$c"
		echo 2 >"$MNT/contracts/$c/node_count"
		echo "atleast 1G" >"$MNT/contracts/$c/node_memory_size"
		echo local >"$MNT/contracts/$c/node_provider"
	done
	before=$(values)
	# Fill the disk (dd stops with ENOSPC, as it should).
	dd if=/dev/zero of="$STATE/filler" bs=4096 status=none 2>/dev/null || true
	run_shell 'echo 7 > contracts/a/node_count'
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[[ "$(cat "$MNT/contracts/a/error")" == "contracts/a/node_count: state database $STATE/state.db: the change was not stored: no space is left on its disk"* ]]
	# The log line too (on stderr: the log in the store cannot take it).
	grep -q "contracts/a/node_count: state database $STATE/state.db: the change was not stored: no space is left" \
		"$TESTDIR/daemon.log"
	[ "$(cat "$MNT/contracts/a/node_count")" = 2 ]
	run_shell 'mkdir contracts/d'
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	[ "$(values)" = "$before" ]
	rm "$STATE/filler"
	echo 8 >"$MNT/contracts/a/node_count"
	[ ! -s "$MNT/contracts/a/error" ]
	mkdir "$MNT/contracts/d"
	after=$(values)
	[[ "$after" == *"a 8 local atleast 1G"* ]]
	cclfs_unmount
	cclfs_mount
	[ "$(values)" = "$after" ]
}

@test "a missing store beside what SSH and EC2 clusters left names their machines and keys" {
	mkdir -p "$STATE/clusters/far1" "$STATE/keys"
	chmod 700 "$STATE"
	printf '192.0.2.10 slots=2\n192.0.2.11 slots=2\n' >"$STATE/clusters/far1/hostfile"
	echo hello >"$STATE/clusters/far1/0.stdout"
	touch "$STATE/keys/ec2.one-0badc0de" "$STATE/keys/ec2.one-0badc0de.pub"
	mount_refused
	[[ "$output" == *"cluster far1 is not in the state database, but $STATE holds what it left: 2 files of command output in $STATE/clusters/far1, its hostfile names 192.0.2.10, 192.0.2.11"* ]]
	[[ "$output" == *"cluster ec2.one is not in the state database, but $STATE holds what it left: 2 SSH key files of an EC2 cluster in $STATE/keys (its instances are tagged cclfs-ec2.one-...)"* ]]
	[[ "$output" == *"the remains of 2 clusters (above)"* ]]
	cclfs_mount -o recover
	grep -q "recover: 2 clusters above are not tracked by cclfs" "$TESTDIR/daemon.log"
	# Reported, not touched.
	[ -e "$STATE/keys/ec2.one-0badc0de" ]
	[ "$(cat "$STATE/clusters/far1/0.stdout")" = hello ]
}
