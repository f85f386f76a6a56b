#!/usr/bin/env bats
# files/ is a POSIX directory: the checks of posix.bash, one per item,
# each run three times: in a plain directory of this machine (the suite
# checking itself: every plain test passes), in files/ of a local node and
# in files/ of a hosts node on an sshd test host (127.0.1.161). "The node
# side" is the same directory for the plain one and the node's exec file
# for a node. Select with -f '^plain: ', -f '^local: ', -f '^ssh: ' or an
# item, e.g. -f 'hard links'. Runs as root (chown, a second user, the
# test host).

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"
source "$BATS_TEST_DIRNAME/posix.bash"

FIRST=161 # the test host listens on 127.0.1.161

setup() {
	if [ "$(id -u)" != 0 ]; then
		skip "needs root: chown, a second user, allow_other, sshd"
	fi
	OTHER=
	HOSTS=
	CNAME=
	KIND=
}

teardown() {
	[ -n "${TESTDIR:-}" ] || return 0
	cd /
	if [ "$KIND" = local ]; then
		cclfs_kill_node_processes
	fi
	if [ -n "$OTHER" ]; then
		userdel "$OTHER" 2>/dev/null || true
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
	local)
		cclfs_setup -o allow_other
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

# A second user, removed by name in teardown (also when the test fails).
with_other_user() {
	# useradd refuses a name that exists: never someone else's user
	useradd -M -N -s /usr/sbin/nologin "cclfspx$$" || {
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
	posix_other_user_refused "$OTHER"
}
