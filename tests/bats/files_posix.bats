#!/usr/bin/env bats
# files/ is a POSIX directory: the checks of posix.bash, one per item,
# each run three times: in a plain directory of this machine (the suite
# checking itself: every plain test passes), in files/ of a local node and
# in files/ of a hosts node on an sshd test host (127.0.1.161). "The node
# side" is the same directory for the plain one and the node's exec file
# for a node. A local node's files are passed through to the kernel
# (FUSE passthrough) where it can; local-nopt: runs the checks that
# concern file data again with -o nopassthrough, the path through the
# daemon. Select with -f '^plain: ', -f '^local: ', -f '^local-nopt: ',
# -f '^ssh: ' or an item, e.g. -f 'hard links'. Runs as root (chown, a
# second user, the test host).

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"
source "$BATS_TEST_DIRNAME/posix.bash"

FIRST=161 # the test host listens on 127.0.1.161

setup() {
	if [ "$(id -u)" != 0 ]; then
		skip "needs root: chown, a second user, allow_other, sshd"
	fi
	OTHER=
	OTHER_GROUP=
	HOLDER=
	HOSTS=
	CNAME=
	KIND=
}

teardown() {
	[ -n "${TESTDIR:-}" ] || return 0
	cd /
	if [ -n "$HOLDER" ]; then
		kill -9 "$HOLDER" 2>/dev/null || true
	fi
	if [ "$KIND" = local ]; then
		cclfs_kill_node_processes
	fi
	if [ -n "$OTHER" ]; then
		userdel "$OTHER" 2>/dev/null || true
	fi
	if [ -n "$OTHER_GROUP" ]; then
		groupdel "$OTHER_GROUP" 2>/dev/null || true
	fi
	# the test host first: it is found by its files under TESTDIR
	if [ -n "$HOSTS" ]; then
		testhosts_stop "$HOSTS" || true
	fi
	cclfs_teardown
	# the hosts node's directory on the test host, by the name we chose
	if [ "$KIND" = ssh ] && [ -n "$CNAME" ]; then
		rm -rf "/root/.cclfs/$CNAME"
	fi
}

# Deploy a running 1-node cluster CNAME of provider $1; E is its node's
# exec file, NODE its node directory through the mount, D its files/.
posix_deploy() {
	local c=$MNT/contracts/c$CNAME
	mkdir "$c"
	echo "$1" >"$c/node_provider"
	echo 1 >"$c/node_count"
	echo "$CNAME" >"$c/deploy"
	wait_state "$CNAME" running
	NODE=$MNT/clusters/$CNAME/nodes/0
	E=$NODE/exec
	D=$NODE/files
}

# The node side of a node: the command goes to the exec file; its stdout
# is printed, its stderr shown when it fails.
node_exec() {
	if printf '%s\n' "$1" >"$E"; then
		cat "$NODE/stdout"
	else
		echo "node command failed: $1" >&2
		cat "$NODE/stderr" >&2
		return 1
	fi
}

# on KIND: set up D, DISK and on_node for plain, local or ssh.
on() {
	KIND=$1
	POSIX_KIND=$1
	case $1 in
	plain)
		cclfs_setup --no-mount
		D=$TESTDIR/plain
		mkdir -m 0755 "$D"
		DISK=$D
		on_node() { (cd "$D" && bash -c "$1"); }
		;;
	local | local-nopt)
		if [ "$1" = local ]; then
			cclfs_setup -o allow_other
		else
			cclfs_setup -o allow_other -o nopassthrough
		fi
		POSIX_KIND=local
		KIND=local
		CNAME=p$BATS_TEST_NUMBER
		posix_deploy local
		DISK=$(cd "$STATE" && pwd -P)/nodes/$CNAME/0
		on_node() { node_exec "$1"; }
		;;
	ssh)
		cclfs_setup --no-mount
		HOSTS=$TESTDIR/hosts
		testhosts_start "$HOSTS" 1 "$FIRST"
		cat >"$TESTDIR/cclfs.conf" <<-CONF
			[hosts]
			user = "root"
			keyfile = "$HOSTS/id_ed25519"
			known_hosts = "$HOSTS/known_hosts"
			[hosts.h0]
			address = "127.0.1.$FIRST"
		CONF
		cclfs_mount -o allow_other -o config="$TESTDIR/cclfs.conf"
		CNAME=posix$$t$BATS_TEST_NUMBER
		posix_deploy hosts
		DISK=
		on_node() { node_exec "$1"; }
		;;
	esac
	# another user reaches D (its own mode decides the rest)
	chmod 0711 "$TESTDIR"
}

# A second user, member of a group of its own besides its primary one
# (OTHER_GROUP), both removed by name in teardown (also when the test
# fails).
with_other_user() {
	# groupadd and useradd refuse a name that exists: never someone
	# else's
	groupadd "cclfspg$$" || {
		echo "cannot add the group cclfspg$$" >&2
		return 1
	}
	OTHER_GROUP=cclfspg$$
	useradd -M -N -G "$OTHER_GROUP" -s /usr/sbin/nologin "cclfspx$$" || {
		echo "cannot add the user cclfspx$$" >&2
		return 1
	}
	OTHER=cclfspx$$
	chmod 0755 "$D"
}

# ---------------------------------------------------------------- plain

@test "plain: regular files" {
	on plain
	posix_regular
}

@test "plain: directories" {
	on plain
	posix_dirs
}

@test "plain: symlinks" {
	on plain
	posix_symlinks
}

@test "plain: hard links" {
	on plain
	posix_hardlinks
}

@test "plain: fifos" {
	on plain
	posix_fifos
}

@test "plain: cp -a, tar and rsync -aH of a tree with links and a fifo" {
	on plain
	posix_tools
}

@test "plain: unix sockets" {
	on plain
	posix_sockets
}

@test "plain: chmod with setgid and sticky bits" {
	on plain
	posix_chmod
}

@test "plain: chown and chgrp" {
	on plain
	posix_chown
}

@test "plain: utimens with nanoseconds" {
	on plain
	posix_utimens
}

@test "plain: umask applied once" {
	on plain
	posix_umask
}

@test "plain: long relative paths" {
	on plain
	posix_longpaths
}

@test "plain: open file usable after unlink" {
	on plain
	posix_unlink_open
}

@test "plain: open file usable after rename" {
	on plain
	posix_rename_open
}

@test "plain: fcntl locks" {
	on plain
	posix_lock_fcntl
}

@test "plain: OFD locks" {
	on plain
	posix_lock_ofd
}

@test "plain: flock locks" {
	on plain
	posix_lock_flock
}

@test "plain: sqlite written from both sides" {
	on plain
	posix_sqlite
}

@test "plain: statfs" {
	on plain
	posix_statfs
}

@test "plain: fresh after a node command" {
	on plain
	posix_fresh_exec
}

@test "plain: fresh after a background change" {
	on plain
	posix_fresh_background
}

@test "plain: another user" {
	on plain
	with_other_user
	posix_other_user "$OTHER"
}

# ---------------------------------------------------------------- local

@test "local: regular files" {
	on local
	posix_regular
}

@test "local: directories" {
	on local
	posix_dirs
}

@test "local: symlinks" {
	on local
	posix_symlinks
}

@test "local: hard links" {
	on local
	posix_hardlinks
}

@test "local: fifos" {
	on local
	posix_fifos
}

@test "local: device nodes refused with EPERM" {
	on local
	posix_devices_refused
}

@test "local: cp -a, tar and rsync -aH of a tree with links and a fifo" {
	on local
	posix_tools
}

@test "local: unix sockets" {
	on local
	posix_sockets
}

@test "local: chmod with setgid and sticky bits" {
	on local
	posix_chmod
}

@test "local: chown and chgrp" {
	on local
	posix_chown
}

@test "local: utimens with nanoseconds" {
	on local
	posix_utimens
}

@test "local: umask applied once" {
	on local
	posix_umask
}

@test "local: long relative paths" {
	on local
	posix_longpaths
}

@test "local: open file usable after unlink" {
	on local
	posix_unlink_open
}

@test "local: open file usable after rename" {
	on local
	posix_rename_open
}

@test "local: fcntl locks" {
	on local
	posix_lock_fcntl
}

@test "local: OFD locks" {
	on local
	posix_lock_ofd
}

@test "local: flock locks" {
	on local
	posix_lock_flock
}

@test "local: sqlite written from both sides" {
	on local
	posix_sqlite
}

@test "local: statfs" {
	on local
	posix_statfs
}

@test "local: fresh after a node command" {
	on local
	posix_fresh_exec
}

@test "local: fresh after a background change" {
	on local
	posix_fresh_background
}

@test "local: another user" {
	on local
	with_other_user
	posix_other_user "$OTHER"
}

# FUSE passthrough (Linux 6.9 and later): the kernel reads and writes a
# local node's file itself. Skipped where the kernel has none.
needs_passthrough() {
	local cfg
	for cfg in /proc/config.gz "/boot/config-$(uname -r)"; do
		[ -r "$cfg" ] || continue
		if zgrep -q '^CONFIG_FUSE_PASSTHROUGH=y' "$cfg"; then
			return 0
		fi
		skip "this kernel has no FUSE passthrough"
	done
	skip "this kernel's configuration is not readable"
}

# The kernel passes through to a file of one level of stacking at most:
# a node directory on overlayfs (a container's disk) goes through the
# daemon. Call after `on local`.
needs_unstacked_disk() {
	if [ "$(stat -f -c %T "$DISK")" = overlayfs ]; then
		skip "the node's directory is on overlayfs"
	fi
}

# Bytes the daemon read and wrote (read, write, splice) so far.
daemon_io() {
	awk '/^(rchar|wchar):/ { n += $2 } END { print n }' "/proc/$CCLFS_PID/io"
}

# 32 MiB written into files/ and read back: how many bytes the daemon
# moved meanwhile.
io_through_daemon() {
	local before after
	before=$(daemon_io)
	dd if=/dev/urandom of="$TESTDIR/data" bs=1M count=32 status=none
	cp "$TESTDIR/data" "$D/data"
	cmp "$TESTDIR/data" "$D/data"
	cmp "$TESTDIR/data" "$DISK/data"
	after=$(daemon_io)
	echo $((after - before))
}

@test "local: passthrough: file data does not go through the daemon" {
	needs_passthrough
	on local
	needs_unstacked_disk
	local moved
	moved=$(io_through_daemon)
	echo "the daemon moved $moved bytes" >&2
	[ "$moved" -lt $((4 << 20)) ]
}

@test "local: nopassthrough: file data goes through the daemon" {
	on local-nopt
	local moved
	moved=$(io_through_daemon)
	echo "the daemon moved $moved bytes" >&2
	[ "$moved" -ge $((64 << 20)) ]
}

# A shared mapping through the mount maps the node's file itself: what
# either side writes, the other reads at once, without msync.
@test "local: passthrough: a shared mapping is the node's file" {
	needs_passthrough
	on local
	needs_unstacked_disk
	cd "$D"
	head -c 8192 /dev/zero >m
	run python3 - "$DISK/m" <<-'PY'
		import mmap, os, sys
		fd = os.open("m", os.O_RDWR)
		m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
		m[0:5] = b"mount"
		with open(sys.argv[1], "rb") as f:
		    print(f.read(5).decode())
		with open(sys.argv[1], "r+b") as f:
		    f.seek(4096)
		    f.write(b"node")
		print(m[4096:4100].decode())
	PY
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = mount ]
	[ "${lines[1]}" = node ]
}

# A command on the node renames another file over one that is open
# through the mount: the descriptor keeps reading the file it opened, as
# on a disk. The name opens the new file once that descriptor is closed;
# until then the kernel refuses it (EIO), since passthrough ties the
# name's inode to one file while it is open (cclfs(1)).
@test "local: passthrough: a file replaced on the node while open" {
	needs_passthrough
	on local
	needs_unstacked_disk
	cd "$D"
	echo old >f
	exec 7<f
	node_exec 'echo new >g && mv g f' >/dev/null
	run cat f
	[ "$status" -ne 0 ]
	[[ $output == *"Input/output error"* ]]
	[ "$(cat <&7)" = old ]
	exec 7<&-
	[ "$(cat f)" = new ]
}

# Every open looks its file up in the daemon's table of backing files:
# thousands open at once each read their own bytes, a file open by two
# names (a hard link) is one file, and once all are closed each opens
# again.
@test "local: passthrough: thousands of files open at once" {
	needs_passthrough
	on local
	needs_unstacked_disk
	cd "$D"
	python3 - <<-'PY'
		import os, resource
		hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
		resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
		n = 3000
		for i in range(n):
		    with open("o%d" % i, "w") as f:
		        f.write("file %d\n" % i)
		fds = [os.open("o%d" % i, os.O_RDWR) for i in range(n)]
		for i, fd in enumerate(fds):
		    assert os.pread(fd, 64, 0) == b"file %d\n" % i, i
		os.link("o7", "l7")
		fd = os.open("l7", os.O_RDWR)
		os.pwrite(fd, b"FILE", 0)
		assert os.pread(fds[7], 4, 0) == b"FILE"
		os.close(fd)
		for fd in fds:
		    os.close(fd)
		for i in range(n):
		    with open("o%d" % i, "rb") as f:
		        want = b"%s %d\n" % (b"FILE" if i == 7 else b"file", i)
		        assert f.read() == want, i
	PY
	[ "$(cat "$DISK/l7")" = "FILE 7" ]
}

# ------------------------------------------- local, without passthrough
# The same checks as local:, for the files that go through the daemon:
# an unprivileged daemon's, a kernel without passthrough, -o nopassthrough.

@test "local-nopt: regular files" {
	on local-nopt
	posix_regular
}

@test "local-nopt: open file usable after unlink" {
	on local-nopt
	posix_unlink_open
}

@test "local-nopt: open file usable after rename" {
	on local-nopt
	posix_rename_open
}

@test "local-nopt: fcntl locks" {
	on local-nopt
	posix_lock_fcntl
}

@test "local-nopt: OFD locks" {
	on local-nopt
	posix_lock_ofd
}

@test "local-nopt: flock locks" {
	on local-nopt
	posix_lock_flock
}

@test "local-nopt: sqlite written from both sides" {
	on local-nopt
	posix_sqlite
}

@test "local-nopt: fresh after a node command" {
	on local-nopt
	posix_fresh_exec
}

@test "local-nopt: fresh after a background change" {
	on local-nopt
	posix_fresh_background
}

@test "local-nopt: another user" {
	on local-nopt
	with_other_user
	posix_other_user "$OTHER"
}

# ------------------------------------------------- one thread (-s)
# With -s the one thread serves every request, and cannot wait for the
# kernel's drops after a command: they may send it a lookup (a name whose
# time ran out on the way to a file) or the write-back of a page dirtied
# through a shared mapping. A command returns, and what it changed shows
# within a second (cclfs(1)). A hang fails the test at its timeout.

# Run "$@" in the background for 30 s at most. A request the daemon never
# answers may hold its caller beyond SIGKILL (a page's write-back waits
# uninterruptibly), so at the end the mount's connection is aborted
# (through fusectl, mounted in TESTDIR for it; or umount -f), which fails
# every request still waiting, and so does the test.
bounded() {
	local here=$PWD pid i dev rc
	"$@" 3>&- &
	pid=$!
	cd / # waiting in the mount would hang this shell too
	for i in $(seq 1 300); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			cd "$here" || return 1
			return "$rc"
		fi
		sleep 0.1
	done
	echo "still running after 30 s: $*" >&2
	dev=$(awk -v m="$MNT" '$5 == m { print $3 }' /proc/self/mountinfo)
	mkdir -p "$TESTDIR/fusectl"
	if [ -n "$dev" ] && mount -t fusectl none "$TESTDIR/fusectl"; then
		echo 1 >"$TESTDIR/fusectl/${dev#*:}/abort" || true
		umount "$TESTDIR/fusectl" || true
	else
		umount -f -c "$MNT" || true
	fi
	kill -9 "$pid" 2>/dev/null
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

# Run the node command $1 by writing E, 30 s at most.
exec_bounded() {
	bounded bash -c 'printf "%s\n" "$1" >"$2"' _ "$1" "$E"
}

# Poll (10 s at most) until "cat $1" prints $2.
shows() {
	local i
	for i in $(seq 1 100); do
		[ "$(bounded cat "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "$1: $(bounded cat "$1"), not $2" >&2
	return 1
}

# $@: the options that give one thread.
names_ran_out() {
	cclfs_setup "$@"
	KIND=local
	CNAME=s$BATS_TEST_NUMBER
	posix_deploy local
	cd "$D"
	mkdir d
	echo old >d/f
	ls -l d >/dev/null
	sleep 1.2 # the kernel's names under files/ are 0.9 s old at most
	exec_bounded 'echo more >>d/f && echo new >d/g'
	shows d/f "old
more"
	shows d/g new
	[ "$(cat "$NODE/exit_status")" = 0 ]
}

@test "local: one thread: a command after the names' time ran out" {
	names_ran_out -s
}

@test "local: one thread (-o max_threads=1): a command after the names' time ran out" {
	names_ran_out -o max_threads=1
}

@test "local-nopt: one thread: a command while a page is dirty through a shared mapping" {
	cclfs_setup -s -o nopassthrough
	KIND=local
	CNAME=s$BATS_TEST_NUMBER
	posix_deploy local
	cd "$D"
	head -c 8192 /dev/zero >m
	echo old >f
	cat >"$TESTDIR/map.py" <<-'PY'
		import mmap, os, sys
		fd = os.open("m", os.O_RDWR)
		m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
		m[0:5] = b"dirty"  # not written back yet
		os.stat(".")  # the names on the way here are fresh
		with open(sys.argv[1], "w") as e:
		    e.write("echo new >f\n")
		m.flush()
		m.close()
		os.close(fd)
		print("done")
	PY
	run bounded python3 "$TESTDIR/map.py" "$E"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = done ]
	shows f new
	exec_bounded 'head -c 5 m'
	[ "$(cat "$NODE/stdout")" = dirty ]
}

# A process holding lock $1 (flock or lockf) on l, through the mount, in
# the background as HOLDER (this shell keeps no descriptor of the mount:
# its children's exits would have to be served by the one thread).
hold() {
	rm -f "$TESTDIR/held"
	python3 -c '
import fcntl, os, sys, time
fd = os.open("l", os.O_RDWR)
getattr(fcntl, sys.argv[1])(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(60)
' "$1" "$TESTDIR/held" 3>&- &
	HOLDER=$!
	for _ in $(seq 1 100); do
		[ -e "$TESTDIR/held" ] && return 0
		sleep 0.1
	done
	return 1
}

# Another process's blocking lock $1 on l: what it answered.
try_lock() {
	bounded python3 -c '
import fcntl, os, sys
fd = os.open("l", os.O_RDWR)
try:
    getattr(fcntl, sys.argv[1])(fd, fcntl.LOCK_EX)
    print("granted")
except OSError as e:
    print(os.strerror(e.errno))
' "$1"
}

@test "local: one thread: a lock held elsewhere is EDEADLK, not a wait" {
	cclfs_setup -s
	KIND=local
	CNAME=s$BATS_TEST_NUMBER
	posix_deploy local
	cd "$D"
	touch l
	for how in flock lockf; do
		hold "$how"
		run try_lock "$how"
		kill "$HOLDER"
		wait "$HOLDER" || true
		HOLDER=
		echo "$how: $output"
		[ "$output" = "Resource deadlock avoided" ]
		# released: granted
		run try_lock "$how"
		[ "$output" = granted ]
	done
}

# ---------------------------------------------------------------- ssh

@test "ssh: regular files" {
	on ssh
	posix_regular
}

@test "ssh: directories" {
	on ssh
	posix_dirs
}

@test "ssh: symlinks" {
	on ssh
	posix_symlinks
}

@test "ssh: hard links" {
	on ssh
	posix_hardlinks
}

@test "ssh: fifos" {
	on ssh
	posix_fifos
}

@test "ssh: device nodes refused with EPERM" {
	on ssh
	posix_devices_refused
}

@test "ssh: cp -a, tar and rsync -aH of a tree with links" {
	on ssh
	posix_tools
}

@test "ssh: unix sockets" {
	on ssh
	posix_sockets
}

@test "ssh: chmod with setgid and sticky bits" {
	on ssh
	posix_chmod
}

@test "ssh: chown and chgrp" {
	on ssh
	posix_chown
}

@test "ssh: utimens with nanoseconds" {
	on ssh
	posix_utimens
}

@test "ssh: umask applied once" {
	on ssh
	posix_umask
}

@test "ssh: long relative paths" {
	on ssh
	posix_longpaths
}

@test "ssh: open file usable after unlink" {
	on ssh
	posix_unlink_open
}

@test "ssh: open file usable after rename" {
	on ssh
	posix_rename_open
}

@test "ssh: fcntl locks" {
	on ssh
	posix_lock_fcntl
}

@test "ssh: OFD locks" {
	on ssh
	posix_lock_ofd
}

@test "ssh: flock locks" {
	on ssh
	posix_lock_flock
}

@test "ssh: sqlite written from both sides" {
	on ssh
	posix_sqlite
}

@test "ssh: statfs" {
	on ssh
	posix_statfs
}

@test "ssh: fresh after a node command" {
	on ssh
	posix_fresh_exec
}

@test "ssh: fresh after a background change" {
	on ssh
	posix_fresh_background
}

@test "ssh: another user" {
	on ssh
	with_other_user
	posix_other_user "$OTHER"
}
