#!/usr/bin/env bats
# files/ of an SSH node (hosts provider, a real sshd test host at
# 127.0.1.237), driven through the mount with shell commands as a user
# would: what OpenSSH's SFTP server offers (symbolic and hard links, atomic
# rename, statvfs, fsync, chown), the errors its file system gives,
# 32-bit second-precision times, locks between the mount's processes, and
# open files and attributes that stay true. Runs as root (sshd, mounts).

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

FIRST=237

setup() {
	if [ "$(id -u)" != 0 ]; then
		skip "needs root: sshd test hosts"
	fi
	HOSTS=
	CNAME=
	SMALL=
	WATCHER=
	STOPPED=
	cclfs_setup --no-mount
	HOSTS=$TESTDIR/hosts
	# A test named so has a server that does not offer OpenSSH's rename
	# extension (sftp-server -P: refused, and not announced).
	# One about what reaches the server reads its log (every request).
	case $BATS_TEST_DESCRIPTION in
	*"without posix-rename"*)
		TESTHOSTS_SFTP="internal-sftp -P posix-rename" \
			testhosts_start "$HOSTS" 1 "$FIRST"
		;;
	*"reaches the server"* | *"reach the server"*)
		TESTHOSTS_SFTP="/usr/lib/openssh/sftp-server -e -l DEBUG3 2>>$TESTDIR/sftp.log" \
			testhosts_start "$HOSTS" 1 "$FIRST"
		;;
	*) testhosts_start "$HOSTS" 1 "$FIRST" ;;
	esac
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$HOSTS/id_ed25519\""
		echo "known_hosts = \"$HOSTS/known_hosts\""
		# far above the bound of the test of a close while a session
		# is being made: waiting for it fails that test
		echo 'connect_timeout = 120'
		echo '[hosts.h0]'
		echo "address = \"127.0.1.$FIRST\""
	} >"$TESTDIR/cclfs.conf"
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	CNAME=fssh$$
	mkdir "$MNT/contracts/c"
	echo hosts >"$MNT/contracts/c/node_provider"
	echo 1 >"$MNT/contracts/c/node_count"
	echo "$CNAME" >"$MNT/contracts/c/deploy"
	wait_state "$CNAME" running
	NODE=$MNT/clusters/$CNAME/nodes/0
	cd "$NODE/files"
	# the node's directory, as the node sees it
	ON_NODE=$(on_node pwd)
	[ -d "$ON_NODE" ]
}

teardown() {
	[ -n "${TESTDIR:-}" ] || return 0
	cd /
	if [ -n "$WATCHER" ]; then
		kill "$WATCHER" 2>/dev/null || true
	fi
	if [ -n "$STOPPED" ]; then
		kill -CONT "$STOPPED" 2>/dev/null || true
	fi
	if [ -n "$SMALL" ]; then
		umount "$SMALL" 2>/dev/null || true
	fi
	if [ -n "$HOSTS" ]; then
		testhosts_stop "$HOSTS" || true
	fi
	cclfs_teardown
	if [ -n "$CNAME" ]; then
		rm -rf "/root/.cclfs/$CNAME"
	fi
}

# Run a command on the node, in files/; its output.
on_node() {
	echo "$1" >"$NODE/exec"
	cat "$NODE/stdout"
}

# The message of a failed command (its stderr), for errno checks.
fails_with() { # message command...
	local msg=$1
	shift
	run "$@"
	[ "$status" -ne 0 ]
	[[ "$output" == *"$msg"* ]] || {
		echo "expected '$msg', got: $output"
		return 1
	}
}

@test "symbolic links: ln -s, readlink, ls -l, seen on the node" {
	echo data >target
	ln -s target link
	[ "$(readlink link)" = target ]
	[ "$(cat link)" = data ]
	ls -l link | grep -q 'link -> target$'
	[ "$(on_node 'readlink link')" = target ]
	ln -s /nowhere/at/all dangling
	[ "$(readlink dangling)" = /nowhere/at/all ]
	[ "$(stat -c %F dangling)" = "symbolic link" ]
	fails_with "File exists" ln -s other link
}

@test "hard links: ln, link counts 2, one file" {
	echo one >a
	ln a b
	[ "$(stat -c %h a)" = 2 ]
	[ "$(stat -c %h b)" = 2 ]
	[ "$(on_node 'stat -c %h a')" = 2 ]
	[ "$(on_node 'stat -c %i a')" = "$(on_node 'stat -c %i b')" ]
	echo two >>b
	[ "$(cat a)" = "$(printf 'one\ntwo')" ]
	ls -l | grep -q '^-.* 2 .* a$'
	[ "$(ls -a | tr '\n' ' ')" = ". .. a b " ]
	fails_with "File exists" ln a b
	mkdir d
	fails_with "not allowed" ln d d2
}

@test "rename over an existing file replaces it in one step; mv -n keeps it" {
	echo new >n
	echo old >o
	on_node 'stat -c %i n' >"$TESTDIR/ino"
	mv n o
	[ "$(cat o)" = new ]
	[ ! -e n ]
	[ "$(on_node 'stat -c %i o')" = "$(cat "$TESTDIR/ino")" ]
	mkdir d e
	touch e/x
	fails_with "empty" mv -T d e
	echo keep >k
	echo other >m
	mv -n m k
	[ "$(cat k)" = keep ]
	[ -e m ]
}

@test "a server without posix-rename: rename replaces a file or an empty directory, and refuses what rename(2) refuses" {
	# SFTP version 3's rename: onto nothing only; cclfs removes the
	# target first, after checking what rename(2) would refuse.
	echo one >a
	echo two >b
	mv a b
	[ "$(cat b)" = one ]
	[ ! -e a ]
	[ "$(on_node 'cat b; ls')" = "$(printf 'one\nb')" ]
	mkdir d e
	touch d/in
	mv -T d e
	[ -f e/in ]
	[ ! -e d ]
	# a directory over a file, a file over a directory: both stay
	mkdir d
	run python3 -c 'import os; os.rename("d", "b")'
	[[ "$output" == *NotADirectoryError* ]]
	run python3 -c 'import os; os.rename("b", "d")'
	[[ "$output" == *IsADirectoryError* ]]
	[ "$(on_node 'cat b; test -d d && echo dir')" = "$(printf 'one\ndir')" ]
	# a directory over one that is not empty
	mkdir f
	run python3 -c 'import os; os.rename("f", "e")'
	[[ "$output" == *"Directory not empty"* ]]
	[ "$(on_node 'ls e; test -d f && echo dir')" = "$(printf 'in\ndir')" ]
	# The same, with the type of the name moved changed on the node
	# behind the kernel's back, within the 0.9 s it keeps it (the target
	# it looks up afresh, and refuses a mismatch itself): a directory
	# where it saw a file, a file where it saw a directory.
	rmdir d f
	echo x >s
	echo precious >t
	mkdir s2 t2
	run python3 - "$ON_NODE" <<'EOF'
import os, sys
node = sys.argv[1]
os.stat("s"), os.stat("s2")
os.unlink(os.path.join(node, "s"))
os.mkdir(os.path.join(node, "s"))
os.rmdir(os.path.join(node, "s2"))
with open(os.path.join(node, "s2"), "w") as f:
    f.write("data\n")
for src, dst in (("s", "t"), ("s2", "t2")):
    try:
        os.rename(src, dst)
        print(dst, "renamed")
    except OSError as e:
        print(dst, e.__class__.__name__)
EOF
	echo "$output"
	[ "${lines[0]}" = "t NotADirectoryError" ]
	[ "${lines[1]}" = "t2 IsADirectoryError" ]
	[ "$(cat "$ON_NODE/t")" = precious ]
	[ -d "$ON_NODE/s" ] && [ -d "$ON_NODE/t2" ]
	[ "$(cat "$ON_NODE/s2")" = data ]
}

@test "rename over a file: its name never goes missing on the node" {
	echo 0 >o
	(while [ ! -e "$TESTDIR/stop" ]; do
		[ -e "$ON_NODE/o" ] || echo missing >>"$TESTDIR/seen"
	done) &
	WATCHER=$!
	for i in $(seq 100); do
		echo "$i" >n
		mv n o
	done
	touch "$TESTDIR/stop"
	wait "$WATCHER"
	WATCHER=
	[ "$(cat o)" = 100 ]
	[ ! -e "$TESTDIR/seen" ]
}

@test "many lookups at once each get their own file's answer" {
	on_node 'for i in $(seq 60); do head -c $i /dev/zero >f$i; mkdir d$i; done'
	seq 60 | xargs -P 12 -I{} sh -c 'echo "f{} $(stat -c %s f{}) $(stat -c %F d{})"' |
		sort >"$TESTDIR/got"
	seq 60 | while read -r i; do echo "f$i $i directory"; done | sort >"$TESTDIR/want"
	diff "$TESTDIR/want" "$TESTDIR/got"
}

@test "df shows the node's file system; fsync reaches the server" {
	[ "$(stat -f -c '%b %S' .)" = "$(on_node 'stat -f -c "%b %S" .')" ]
	[ "$(df -P . | awk 'NR == 2 { print $2 }')" -gt 0 ]
	dd if=/dev/zero of=f bs=4k count=4 conv=fsync status=none
	# each fsync and fdatasync is a fsync@openssh.com request, counted in
	# the server's log around each call (the file open all along)
	[ "$(python3 - "$TESTDIR/sftp.log" <<'EOF'
import os, re, sys
def n():
    return len(re.findall(r"request \d+: fsync", open(sys.argv[1]).read()))
fd = os.open("f", os.O_RDWR)
os.write(fd, b"x")
a = n()
os.fsync(fd)
b = n()
os.write(fd, b"y")
os.fdatasync(fd)
print(a >= 1, b - a, n() - b)
EOF
)" = "True 1 1" ]
	[ "$(stat -c %s f)" = 16384 ]
}

@test "a regular file shows an I/O size of 256 KiB (what cp sizes its buffer by)" {
	echo x >f
	[ "$(stat -c %o f)" = 262144 ]
}

@test "chown and chgrp as on the node; the login's files are the mounting user's" {
	touch f
	[ "$(stat -c '%u %g' f)" = "$(id -u) $(id -g)" ]
	chown 1234:5678 f
	[ "$(stat -c '%u %g' f)" = "1234 5678" ]
	[ "$(on_node 'stat -c "%u %g" f')" = "1234 5678" ]
	chgrp 4321 f
	[ "$(stat -c '%u %g' f)" = "1234 4321" ]
	chown 0 f
	[ "$(on_node 'stat -c "%u %g" f')" = "0 4321" ]
	mkdir d
	chown -h 77:88 d
	[ "$(ls -nd d | awk '{ print $3, $4 }')" = "77 88" ]
	# a symbolic link's own owner and times, not its target's
	ln -s f l
	chown -h 55:66 l
	[ "$(stat -c '%u %g' l)" = "55 66" ]
	[ "$(on_node 'stat -c "%u %g" l f' | tr '\n' ' ')" = "55 66 0 4321 " ]
	touch -h -d @1000000000 l
	[ "$(on_node 'stat -c %Y l')" = 1000000000 ]
	[ "$(on_node 'stat -c %Y f')" != 1000000000 ]
}

@test "new files and directories get the caller's umask, once" {
	(umask 0 && touch a && mkdir d)
	[ "$(stat -c %a a d | tr '\n' ' ')" = "666 777 " ]
	(umask 002 && touch b && mkdir e)
	[ "$(on_node 'stat -c %a b e' | tr '\n' ' ')" = "664 775 " ]
	(umask 077 && touch c && mkdir f)
	[ "$(stat -c %a c f | tr '\n' ' ')" = "600 700 " ]
}

@test "errors as the node's file system gives them" {
	long=$(printf 'n%.0s' $(seq 256))
	fails_with "File name too long" touch "$long"
	fails_with "File name too long" mkdir "$long"
	touch "${long:1}" # 255 bytes are fine
	touch f
	fails_with "File too large" truncate -s 4611686018427387904 f
	mkdir d
	touch d/x
	fails_with "Directory not empty" rmdir d
	fails_with "File exists" mkdir d
	fails_with "Is a directory" sh -c 'echo x >d'
	# a small file system and a read-only one, mounted on the node
	mkdir small ro
	SMALL=$ON_NODE/small
	on_node "mount -t tmpfs -o size=64k tmpfs small && mount -t tmpfs -o ro tmpfs ro && echo ok" | grep -qx ok
	fails_with "No space left on device" dd if=/dev/zero of=small/big bs=16k count=16 status=none
	fails_with "Read-only file system" touch ro/x
	fails_with "Read-only file system" mkdir ro/d
	on_node 'umount ro'
	on_node 'umount small'
	SMALL=
}

@test "times: whole seconds from 1970 within 32 bits, others refused" {
	touch f
	touch -d @4294967295 f
	[ "$(stat -c %Y f)" = 4294967295 ]
	[ "$(on_node 'stat -c %Y f')" = 4294967295 ]
	fails_with "Value too large" touch -d @4294967296 f
	fails_with "Value too large" touch -d '1969-12-31 23:59:59 UTC' f
	[ "$(stat -c %Y f)" = 4294967295 ]
	touch -m -d @1000000000.75 f
	[ "$(python3 -c 'import os; print(os.stat("f").st_mtime_ns)')" = 1000000000000000000 ]
	[ "$(stat -c %X f)" = 4294967295 ] # touch -m left atime alone
}

@test "mkfifo and mknod: not permitted (SFTP makes no special files)" {
	fails_with "not permitted" mkfifo p
	[ ! -e p ]
	python3 -c 'import os; os.mknod("r", 0o600 | 0o100000)'
	[ "$(stat -c %F r)" = "regular empty file" ]
}

@test "flock and fcntl locks exclude each other through the mount" {
	touch f
	# flock: a second open file description cannot take what the first holds
	flock -n f -c '! flock -n f true && ! flock -s -n f true'
	flock -s -n f -c 'flock -s -n f true && ! flock -n f true'
	flock -n f true # released with its holder
	# POSIX locks: per process, ranges, F_GETLK sees the holder
	cat >"$TESTDIR/lk.py" <<'EOF'
import fcntl, os, struct, sys
fd = os.open("f", os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
r, w = os.pipe()
if os.fork() == 0:
    fd2 = os.open("f", os.O_RDWR)
    ok = []
    try:
        fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
        ok.append("locked-held")
    except OSError:
        ok.append("refused")
    fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 10)
    ok.append("other-range")
    got = fcntl.fcntl(fd2, fcntl.F_GETLK,
                      struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 5, 0))
    ok.append("getlk-%d" % struct.unpack("hhqqi", got)[0])
    os.write(w, (" ".join(ok)).encode())
    os._exit(0)
os.wait()
print(os.read(r, 100).decode())
fcntl.lockf(fd, fcntl.LOCK_UN, 0, 0)
if os.fork() == 0:
    fd2 = os.open("f", os.O_RDWR)
    fcntl.lockf(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 0)
    os._exit(0)
print("child-after-unlock", os.wait()[1])
EOF
	run python3 "$TESTDIR/lk.py"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "refused other-range getlk-1" ]
	[ "${lines[1]}" = "child-after-unlock 0" ]
}

@test "an open file stays usable after rm; stat sees the node's changes" {
	echo kept >f
	exec 5<f
	rm f
	[ ! -e f ]
	[ "$(cat <&5)" = kept ]
	exec 5<&-
	echo 12345 >g
	[ "$(stat -c %s g)" = 6 ]
	on_node 'echo 1234567890 >>g'
	[ "$(stat -c %s g)" = 17 ]
	[ "$(cat g)" = "$(printf '12345\n1234567890')" ]
}

@test "attributes asked with an open never outlive a change or a command" {
	echo 12345 >g
	# read, then stat: answered with what the open asked in its flight
	exec 5<g
	[ "$(head -c 5 <&5)" = 12345 ]
	[ "$(stat -c %s g)" = 6 ]
	# a write through the mount right after another open
	exec 6<g
	echo more >>g
	[ "$(stat -c %s g)" = 11 ]
	# a command on the node right after an open
	exec 7<g
	on_node 'echo 1234567890 >>g'
	[ "$(stat -c %s g)" = 22 ]
	exec 7<g
	on_node 'chmod 600 g'
	[ "$(stat -c %a g)" = 600 ]
	# another name of the file changed right after an open of this one
	ln g h
	exec 8<g
	echo x >>h
	[ "$(stat -c %s g)" = 24 ]
	exec 5<&- 6<&- 7<&- 8<&-
	# a chmod after times were set: the mode it set, with those times
	touch -d @1000000000 g
	chmod 640 g
	[ "$(stat -c '%a %Y' g)" = "640 1000000000" ]
	[ "$(on_node 'stat -c %a g')" = 640 ]
	on_node 'chmod 604 g'
	[ "$(stat -c %a g)" = 604 ]
}

@test "a file that grew or shrank on the node after its open is read whole" {
	printf 12345 >g
	exec 5<g
	on_node 'printf 67890 >>g'
	[ "$(cat <&5)" = 1234567890 ]
	exec 5<g
	on_node 'printf 123 >g'
	[ "$(cat <&5)" = 123 ]
	exec 5<&-
	# grown past a size that ends a piece of a small read exactly
	head -c 7500 /dev/urandom >g
	exec 5<g
	on_node 'head -c 1500 /dev/urandom >>g'
	[ "$(wc -c <&5)" = 9000 ]
	exec 5<&-
	# read and written through one descriptor, past the size it opened
	printf abc >g
	exec 5<>g
	printf abcdefgh >&5
	[ "$(cat g)" = abcdefgh ]
	exec 5<&-
}

# The daemon's SSH sessions to the test host.
sessions() {
	ss -Htnp state established dst "127.0.1.$FIRST:22" |
		grep -c "pid=$CCLFS_PID," || true
}

@test "big files go both ways over a second session, byte for byte" {
	head -c $((37 * 1048576 + 4321)) /dev/urandom >"$TESTDIR/big"
	[ "$(sessions)" = 1 ]
	cp "$TESTDIR/big" big
	# the node's file, and the sessions that carried it
	[ "$(on_node 'sha256sum <big')" = "$(sha256sum <"$TESTDIR/big")" ]
	[ "$(sessions)" = 2 ]
	cp big "$TESTDIR/back"
	cmp "$TESTDIR/big" "$TESTDIR/back"
	# reads and writes anywhere once both handles are in use: a run in
	# sequence first, then places before, inside and across the stripes
	python3 - "$TESTDIR/big" big "$TESTDIR/ref" big2 <<'PY'
import os, random, sys
local, remote, ref, remote2 = sys.argv[1:]
data = open(local, "rb").read()
rnd = random.Random(7)
spots = [(rnd.randrange(0, len(data)), rnd.randrange(1, 3 << 20))
         for _ in range(60)] + [((4 << 20) - 5, 10), ((8 << 20) - 1, 2)]
fd = os.open(remote, os.O_RDONLY)
assert os.read(fd, 12 << 20) == data[:12 << 20]
for off, n in spots:
    got = os.pread(fd, n, off)
    assert got == data[off:off + n], (off, n, len(got))
os.close(fd)
# the same writes to a plain file and through the mount
out = [os.open(ref, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
       os.open(remote2, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
for fd in out:
    for at in range(0, 12 << 20, 1 << 20):
        os.pwrite(fd, data[at:at + (1 << 20)], at)
for off, n in spots + [(30 << 20, 5000)]:
    piece = rnd.randbytes(n)
    for fd in out:
        os.pwrite(fd, piece, off)
for fd in out:
    os.close(fd)
PY
	cmp "$TESTDIR/ref" big2
	[ "$(on_node 'sha256sum <big2')" = "$(sha256sum <"$TESTDIR/ref")" ]
}

@test "a big file's writes reach the server in requests of 252 KiB, by a handle of its own" {
	head -c $((64 << 20)) /dev/urandom >"$TESTDIR/big"
	cp "$TESTDIR/big" big
	[ "$(on_node 'sha256sum <big')" = "$(sha256sum <"$TESTDIR/big")" ]
	cmp "$TESTDIR/big" big
	writes() { # length: the writes of big of that length the server got
		grep -c "write \"[^\"]*/big\" (handle [0-9]*) off [0-9]* len $1[[:space:]]*$" \
			"$TESTDIR/sftp.log" || true
	}
	# the first MiBs of each handle by libssh2's 30,000 bytes a write,
	# then the most OpenSSH's server takes (256 KiB less 1 KiB, in
	# pages) by a second open of the file: most of the bytes
	[ "$(writes 30000)" -ge 100 ]
	[ "$(writes 258048)" -ge 128 ]
	[ "$(grep -c 'open "[^"]*/big" flags WRITE' "$TESTDIR/sftp.log")" -ge 2 ]
	# a big file that fills the node's file system: the error as its
	# file system gives it, from the write or the close
	mkdir small
	SMALL=$ON_NODE/small
	on_node "mount -t tmpfs -o size=40m tmpfs small && echo ok" | grep -qx ok
	fails_with "No space left on device" dd if="$TESTDIR/big" of=small/big bs=1M status=none
	on_node 'umount small'
	SMALL=
}

@test "a big file renamed or put in another's place while written keeps every byte" {
	python3 - "$TESTDIR/ref" <<'PY'
import os, sys
data = os.urandom(21 << 20)
open(sys.argv[1], "wb").write(data)
for old, new, other in (("r1", "r2", None), ("r3", "r4", b"other")):
    fd = os.open(old, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data[:1 << 20])
    # the second handle opens by name, after this: the name is gone,
    # or names another file
    os.rename(old, new)
    if other:
        open(old, "wb").write(other)
    for at in range(1 << 20, len(data), 1 << 20):
        os.write(fd, data[at:at + (1 << 20)])
    os.close(fd)
PY
	cmp "$TESTDIR/ref" r2
	cmp "$TESTDIR/ref" r4
	[ "$(cat r3)" = other ]
	[ "$(on_node 'sha256sum <r4')" = "$(sha256sum <"$TESTDIR/ref")" ]
}

# The local ports of the daemon's sessions to the test host.
session_ports() {
	ss -Htnp state established dst "127.0.1.$FIRST:22" |
		grep "pid=$CCLFS_PID," | awk '{print $3}' | sed 's/.*://'
}

# Kill the test host's sshd of the daemon's session at local port $1:
# the connection drops as when a network fails.
kill_session_at() {
	local pids
	[ "$(echo "$1" | wc -w)" = 1 ] || return 1
	pids=$(ss -Htnp state established src "127.0.1.$FIRST:22" \
		dst ":$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
	[ -n "$pids" ] || return 1
	# shellcheck disable=SC2086
	kill -9 $pids
}

# ... the session other than the one at port $MAIN_PORT (the second
# one, for big files).
kill_bulk_session() {
	kill_session_at "$(session_ports | grep -vx "$MAIN_PORT")"
}

@test "the second session dropping: reads and writes go on, byte for byte" {
	head -c $((40 << 20)) /dev/urandom >"$TESTDIR/big"
	MAIN_PORT=$(session_ports)
	[ "$(echo "$MAIN_PORT" | wc -w)" = 1 ]
	cp "$TESTDIR/big" big
	export -f session_ports kill_session_at kill_bulk_session
	export FIRST CCLFS_PID MAIN_PORT
	python3 - "$TESTDIR/big" big w <<'PY'
import os, subprocess, sys
local, remote, out = sys.argv[1:]
data = open(local, "rb").read()
fd = os.open(remote, os.O_RDONLY)
got = b"".join(os.read(fd, 1 << 20) for _ in range(16))
subprocess.run(["bash", "-c", "kill_bulk_session"], check=True)
while True:
    piece = os.read(fd, 1 << 20)
    if not piece:
        break
    got += piece
os.close(fd)
assert got == data, "the read came back different"
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for at in range(0, 16 << 20, 1 << 20):
    os.write(fd, data[at:at + (1 << 20)])
subprocess.run(["bash", "-c", "kill_bulk_session"], check=True)
for at in range(16 << 20, len(data), 1 << 20):
    os.write(fd, data[at:at + (1 << 20)])
os.close(fd)
PY
	# what the second session had not got acked went by the first
	cmp "$TESTDIR/big" w
	[ "$(on_node 'sha256sum <w')" = "$(sha256sum <"$TESTDIR/big")" ]
	# the node and its files go on: a big copy again, byte for byte,
	# over two sessions again
	cp "$TESTDIR/big" again
	[ "$(sessions)" = 2 ]
	cmp "$TESTDIR/big" again
	[ "$(on_node 'sha256sum <again')" = "$(sha256sum <"$TESTDIR/big")" ]
}

# Whether a process of this machine (the test host's SFTP server) has
# file $1 open.
held_open() {
	find /proc/[0-9]*/fd -lname "$1" 2>/dev/null | grep -q .
}

# Whether file $1 is closed by every process within 60 s.
closed_within_60s() {
	for _ in $(seq 600); do
		held_open "$1" || return 0
		sleep 0.1
	done
	return 1
}

@test "a big file closed while its second session is being made: the close does not wait for it" {
	head -c $((12 << 20)) /dev/urandom >"$TESTDIR/big"
	[ "$(sessions)" = 1 ]
	# the check below can tell: a file open through the mount is open
	# on the node
	exec 5>big
	held_open "$ON_NODE/big"
	exec 5>&-
	# the host's sshd stops taking connections: the second session's
	# handshake waits, up to connect_timeout (120 s)
	STOPPED=$(ss -Htlnp state listening src "127.0.1.$FIRST:22" |
		grep -o 'pid=[0-9]*' | cut -d= -f2 | head -1)
	[ -n "$STOPPED" ]
	kill -STOP "$STOPPED"
	cp "$TESTDIR/big" big
	# the kernel does not wait for the release that follows a close:
	# the node's file, open until the daemon closes it, tells
	closed_within_60s "$ON_NODE/big"
	kill -CONT "$STOPPED"
	STOPPED=
	# the second session is made, and the open given up leaves no
	# handle of the file behind
	for _ in $(seq 600); do
		[ "$(sessions)" = 2 ] && break
		sleep 0.1
	done
	[ "$(sessions)" = 2 ]
	closed_within_60s "$ON_NODE/big"
	cmp "$TESTDIR/big" big
	[ "$(on_node 'sha256sum <big')" = "$(sha256sum <"$TESTDIR/big")" ]
	# the next big file goes over it
	cp "$TESTDIR/big" big2
	cmp "$TESTDIR/big" big2
	[ "$(sessions)" = 2 ]
}

@test "a big file read to its end over two sessions reads on as it grows on the node" {
	head -c $((13 << 20)) /dev/urandom >"$TESTDIR/big"
	cp "$TESTDIR/big" grow
	python3 - "$TESTDIR/big" grow "$NODE" <<'PY'
import os, sys
local, remote, node = sys.argv[1:]
data = open(local, "rb").read()
def on_node(cmd):
    with open(node + "/exec", "w") as f:
        f.write(cmd + "\n")
def read_on(fd):
    got = b""
    while True:
        piece = os.read(fd, 1 << 20)
        if not piece:
            return got
        got += piece
fd = os.open(remote, os.O_RDONLY)
assert read_on(fd) == data, "the first read came back different"
for k in range(3):
    more = os.urandom(300000 + k)
    open(local, "ab").write(more)
    # the test host is this machine: the node appends a file of ours
    open(local + ".more", "wb").write(more)
    on_node("cat '%s.more' >>grow" % local)
    assert read_on(fd) == more, "round %d: the new bytes did not come" % k
os.close(fd)
PY
	cmp "$TESTDIR/big" grow
}

@test "a listing the session drops in the middle of is asked again, whole" {
	on_node 'mkdir many && cd many && seq 30000 | xargs touch'
	for delay in 0.02 0.05 0.1 0.15 0.2 0.3; do
		(sleep "$delay" && kill_session_at "$(session_ports)") &
		run timeout 60 ls many
		wait $!
		echo "after $delay s: ls ended with $status, ${#lines[@]} lines" >&3
		[ "$status" = 0 ]
		[ "${#lines[@]}" = 30000 ]
	done
}

# What the daemon read ahead for an open file (up to 1 MiB on one
# session, 16 MiB over two) is read again after a command, as the
# kernel's caches are.
@test "bytes read ahead of a descriptor are read again after a command on the node" {
	python3 - "$NODE" <<'PY'
import os, sys
node = sys.argv[1]
size = 28 << 20
def on_node(cmd):
    with open(node + "/exec", "w") as f:
        f.write(cmd + "\n")
def rewrite(byte):
    on_node("head -c %d /dev/zero | tr '\\0' %s | "
            "dd of=f conv=notrunc status=none" % (size, byte))
open("f", "wb").write(os.urandom(size))
fd = os.open("f", os.O_RDONLY)
assert len(os.read(fd, 200000)) == 200000
rewrite("x")
assert os.pread(fd, 300000, 500000) == b"x" * 300000, "1 MiB kept"
# in sequence past 8 MiB: two sessions, stripes read ahead
at = 200000
while at < 14 << 20:
    piece = os.read(fd, 1 << 20)
    assert piece == b"x" * len(piece), at
    at += len(piece)
rewrite("y")
rest = b""
while True:
    piece = os.read(fd, 1 << 20)
    if not piece:
        break
    rest += piece
assert rest == b"y" * (size - at), "the stripes kept"
os.close(fd)
PY
	[ "$(sessions)" = 2 ]
}

# Small files of a directory opened in its listing's order (tar, cp -r)
# are opened and read ahead of their opens, on the node's two sessions.
# The order is the server's, as `ls -U` on the node shows it.
listed() { # dir: its files in the listing's order
	on_node "ls -U $1"
}

@test "files of a directory read in its order come whole, and fresh after a change on the node or through the mount" {
	on_node 'mkdir d && cd d && for i in $(seq 10 49); do head -c $((i * 97 % 9000)) /dev/urandom >f$i; done && : >empty && head -c 70000 /dev/urandom >big'
	mapfile -t order < <(listed d)
	[ "${#order[@]}" = 42 ]
	# a copy out of the whole directory, twice: byte for byte
	for round in 1 2; do
		rm -rf "$TESTDIR/out"
		mkdir "$TESTDIR/out"
		tar -C d -cf - . | tar -C "$TESTDIR/out" -xf -
		[ "$(cd "$TESTDIR/out" && sha256sum -- * | sort)" = \
			"$(on_node 'cd d && sha256sum -- * | sort')" ]
	done
	# two files in order: the next ones are on their way; then changes
	ls d >/dev/null
	cat "d/${order[0]}" "d/${order[1]}" >/dev/null
	on_node "cd d && echo node >${order[2]} && rm ${order[3]} && echo more >>${order[4]}"
	echo mount >"d/${order[5]}"
	rm "d/${order[6]}"
	[ "$(cat "d/${order[2]}")" = node ]
	fails_with "No such file" cat "d/${order[3]}"
	[ "$(tail -c 5 "d/${order[4]}")" = more ]
	[ "$(cat "d/${order[5]}")" = mount ]
	fails_with "No such file" cat "d/${order[6]}"
	[ "$(sha256sum <"d/${order[7]}")" = \
		"$(on_node "sha256sum <d/${order[7]}")" ]
}

@test "files read in a directory's order: the next few reach the server ahead of their reads, one file read alone not" {
	on_node 'mkdir d e && for i in $(seq 10 29); do head -c 3000 /dev/urandom >d/f$i; head -c 3000 /dev/urandom >e/f$i; done'
	mapfile -t order < <(listed d)
	mapfile -t other < <(listed e)
	opens() { # path under files/: how many opens reached the server
		grep -c "open \"[^\"]*/$1\"" "$TESTDIR/sftp.log" || true
	}
	ls e >/dev/null
	cat "e/${other[0]}" >/dev/null
	ls d >/dev/null
	cat "d/${order[0]}" "d/${order[1]}" >/dev/null
	for _ in $(seq 1 100); do
		n=0
		for i in $(seq 2 9); do
			n=$((n + $(opens "d/${order[$i]}")))
		done
		[ "$n" -ge 8 ] && break
		sleep 0.1
	done

	# the eight after the two, once each, and none further
	for i in $(seq 2 9); do
		[ "$(opens "d/${order[$i]}")" = 1 ]
	done
	for i in $(seq 10 19); do
		[ "$(opens "d/${order[$i]}")" = 0 ]
	done
	# a single file of a listed directory: that one only
	[ "$(opens "e/${other[0]}")" = 1 ]
	[ "$(grep -c 'open "[^"]*/e/' "$TESTDIR/sftp.log")" = 1 ]
	# what was opened ahead and not wanted is closed soon after
	sleep 1
	[ "$(grep -c 'close "[^"]*/d/' "$TESTDIR/sftp.log")" = 10 ]
}
