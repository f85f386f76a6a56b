# tests/bats/posix.bash: the POSIX checks of files_posix.bats, one function
# per item, each run in a directory D and asserting with a message that
# names what differed.
#
# The caller sets, before calling a check:
#   D            the directory under test (a plain directory, or files/ of
#                a node through the mount); the checks work below it
#   POSIX_KIND   plain, local or ssh: where a node legitimately differs
#                (SSH nodes: locks exclude only processes through the
#                mount, times have whole seconds, no fifos or sockets
#                over SFTP), the check asserts what that kind must do
#   DISK         the same directory on the disk beneath, when this
#                machine sees it (plain: D itself; local: the node's
#                directory); empty for an SSH node
# and defines on_node CMD: run the shell command CMD on "the other side"
# with D's directory as its working directory, print its stdout, and
# return its status (plain: run directly in D; a node: written to its exec
# file). Node commands start background processes with their output
# redirected (nohup ... >/dev/null 2>&1 &), and every background process a
# check starts ends by itself within 30 s.

# Fail with a message naming what differed.
posix_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s: expected [%.300s], got [%.300s]\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# The errno name a Python statement fails with in the current directory,
# or OK: posix_errno 'os.mkdir("d")' prints EEXIST when d exists.
posix_errno() {
	python3 -c '
import errno, os, sys
try:
    exec(sys.argv[1])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
' "$1"
}

# Poll for up to $1 seconds until `test -e $2`.
posix_wait_for() {
	local i
	for ((i = 0; i < $1 * 20; i++)); do
		[ -e "$2" ] && return 0
		sleep 0.05
	done
	echo "$2 did not appear within $1 s" >&2
	return 1
}

# ---------------------------------------------------------------- items

# Regular files: create, append, read back (both sides), O_EXCL.
posix_regular() {
	cd "$D" || return 1
	echo one >a
	echo two >>a
	posix_eq "$(cat a)" "$(printf 'one\ntwo')" "cat a"
	posix_eq "$(on_node 'cat a')" "$(printf 'one\ntwo')" "a on the node side"
	posix_eq "$(stat -c %s a)" 8 "size of a"
	posix_eq "$(posix_errno 'os.open("a", os.O_CREAT | os.O_EXCL | os.O_WRONLY)')" EEXIST "O_EXCL on an existing file"
	posix_eq "$(posix_errno 'os.close(os.open("b", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))')" OK "O_EXCL on a new file"
	posix_eq "$(on_node 'echo node >>a; wc -c <b')" 0 "b on the node side"
	posix_eq "$(cat a)" "$(printf 'one\ntwo\nnode')" "a after the node appended"
	if [ -n "$DISK" ]; then
		posix_eq "$(cat "$DISK/a")" "$(printf 'one\ntwo\nnode')" "a on disk"
	fi
	rm a b
	posix_eq "$(ls -A)" "" "empty again"
}

# Directories: mkdir, rmdir, EEXIST, ENOTEMPTY, ENOENT, ENOTDIR.
posix_dirs() {
	cd "$D" || return 1
	mkdir d
	posix_eq "$(stat -c %F d)" directory "type of d"
	posix_eq "$(posix_errno 'os.mkdir("d")')" EEXIST "mkdir of an existing directory"
	touch d/x
	posix_eq "$(posix_errno 'os.rmdir("d")')" ENOTEMPTY "rmdir of a non-empty directory"
	posix_eq "$(posix_errno 'os.rmdir("nothere")')" ENOENT "rmdir of nothing"
	posix_eq "$(posix_errno 'os.mkdir("d/x/y")')" ENOTDIR "mkdir below a file"
	posix_eq "$(on_node 'ls d')" x "d on the node side"
	mkdir d/sub
	# (SFTP v3 attributes carry no link count: the node side's, for SSH)
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$(on_node 'stat -c %h d')" 3 "link count of d with a subdirectory, on the node"
	else
		posix_eq "$(stat -c %h d)" 3 "link count of d with a subdirectory"
	fi
	rmdir d/sub
	rm d/x
	rmdir d
	posix_eq "$(on_node 'ls -A')" "" "empty on the node side"
	# a listing longer than one request of the kernel: every name once,
	# with its attributes
	on_node 'mkdir big && cd big && seq -f n%05g 1 1500 | xargs touch' >/dev/null
	posix_eq "$(ls big | wc -l) $(ls big | sort -u | wc -l)" "1500 1500" "names of a directory of 1500 files"
	posix_eq "$(ls -l big | grep -c '^-rw')" 1500 "attributes of a directory of 1500 files"
	# one open directory read again from its start (rewinddir) sees what
	# changed since; a new one too
	posix_eq "$(python3 -c '
import os, subprocess, sys
fd = os.open("big", os.O_RDONLY | os.O_DIRECTORY)
first = len(os.listdir(fd))
open("big/later", "w").close()
os.unlink("big/n00001")
again = os.listdir(fd)
print(first, len(again), "later" in again, "n00001" in again)')" "1500 1500 True False" "a directory read again from its start"
	# removed while it is read, in pieces: every name is still found
	posix_eq "$(python3 -c '
import os
n = 0
with os.scandir("big") as it:
    for e in it:
        os.unlink("big/" + e.name)
        n += 1
print(n, len(os.listdir("big")))')" "1500 0" "names of a directory emptied while it is read"
	rmdir big
}

# Symlinks: ln -s, readlink, lstat type, followed; both sides.
posix_symlinks() {
	cd "$D" || return 1
	echo target >t
	ln -s t l
	posix_eq "$(readlink l)" t "readlink l"
	posix_eq "$(stat -c %F l)" "symbolic link" "lstat type of l"
	posix_eq "$(stat -L -c %F l)" "regular file" "type of what l points to"
	posix_eq "$(cat l)" target "read through l"
	posix_eq "$(on_node 'readlink l; stat -c %F l')" "$(printf 't\nsymbolic link')" "l on the node side"
	on_node 'ln -s nowhere dangling' >/dev/null
	posix_eq "$(readlink dangling)" nowhere "a node's dangling link"
	posix_eq "$(posix_errno 'os.symlink("x", "l")')" EEXIST "symlink over an existing name"
	rm l dangling t
}

# Hard links: ln; link count 2 and one inode for both names, both sides.
posix_hardlinks() {
	cd "$D" || return 1
	echo data >a
	ln a b
	posix_eq "$(on_node 'stat -c %h a; [ a -ef b ] && echo same')" "$(printf '2\nsame')" "a and b on the node side"
	# SFTP v3 attributes carry neither link counts nor inode numbers: on
	# an SSH node the counts come from the directory's listing
	posix_eq "$(stat -c %h a)" 2 "link count of a"
	posix_eq "$(stat -c %h b)" 2 "link count of b"
	# SFTP gives no inode numbers: on an SSH node two names show two
	if [ "$POSIX_KIND" != ssh ]; then
		posix_eq "$(stat -c %i b)" "$(stat -c %i a)" "inode of b (a's)"
	fi
	if [ -n "$DISK" ]; then
		posix_eq "$(stat -c %i "$DISK/b")" "$(stat -c %i "$DISK/a")" "inodes on disk"
	fi
	echo more >>b
	# On an SSH node the mount cannot tell that a and b are one file
	# (SFTP gives no inode numbers): a shows the change when what the
	# kernel holds of it expires, within a second.
	if [ "$POSIX_KIND" = ssh ]; then
		wait_until 3 sh -c 'test "$(cat a)" = "$1"' _ \
			"$(printf 'data\nmore')" || true
	fi
	posix_eq "$(cat a)" "$(printf 'data\nmore')" "a after appending to b"
	rm a
	posix_eq "$(cat b)" "$(printf 'data\nmore')" "b after rm a"
	on_node 'ln b c' >/dev/null
	posix_eq "$(cat c)" "$(printf 'data\nmore')" "the node's link c"
	if [ "$POSIX_KIND" != ssh ]; then
		posix_eq "$(stat -c %h b)" 2 "link count of b after the node's ln"
		posix_eq "$(stat -c %i c)" "$(stat -c %i b)" "inode of the node's link"
	fi
	rm b c
}

# Fifos: mkfifo, type, a writer and a reader through D (a fifo's data
# never passes through a file system: both ends are opened in D). SSH
# nodes: SFTP has no mknod; mkfifo fails and leaves nothing behind.
posix_fifos() {
	cd "$D" || return 1
	local err
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$(posix_errno 'os.mkfifo("p")')" EPERM "mkfifo on an SSH node"
		if [ -e p ] || [ -L p ]; then
			echo "mkfifo failed but left p behind: $(stat -c %F p)" >&2
			return 1
		fi
		return 0
	fi
	mkfifo -m 0640 p
	posix_eq "$(stat -c %F p)" fifo "type of p"
	posix_eq "$(stat -c %a p)" 640 "mode of p"
	posix_eq "$(on_node 'stat -c %F p')" fifo "type of p on the node side"
	timeout 10 sh -c 'echo through >p' &
	local writer=$!
	posix_eq "$(timeout 10 cat p)" through "read from the fifo"
	wait "$writer" || {
		echo "the writer of the fifo failed" >&2
		return 1
	}
	on_node 'mkfifo q' >/dev/null
	posix_eq "$(stat -c %F q)" fifo "type of the node's fifo"
	rm p q
}

# UNIX sockets: bind in D makes a socket; a client in D connects to it.
# SSH nodes: no sockets over SFTP; bind fails and leaves nothing behind.
posix_sockets() {
	cd "$D" || return 1
	local out
	out=$(timeout 10 python3 -c '
import errno, os, socket
s = socket.socket(socket.AF_UNIX)
try:
    s.bind("sock")
except OSError as e:
    print("bind:", errno.errorcode.get(e.errno, e.errno)); raise SystemExit
s.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect("sock")
a, _ = s.accept()
c.sendall(b"hello")
print(a.recv(5).decode())
')
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$out" "bind: EPERM" "bind on an SSH node"
		[ ! -e sock ] || {
			echo "bind failed but left sock behind: $(stat -c %F sock)" >&2
			return 1
		}
		return 0
	fi
	posix_eq "$out" hello "bind, connect and a message through sock"
	posix_eq "$(stat -c %F sock)" socket "type of sock"
	posix_eq "$(on_node 'stat -c %F sock')" socket "type of sock on the node side"
	rm sock
}

# Device nodes are refused with EPERM and leave nothing behind (a node's
# files/ is not the place of devices, as in an unprivileged container;
# root may make them in a plain directory, so this is not run there).
posix_devices_refused() {
	cd "$D" || return 1
	posix_eq "$(posix_errno 'import stat; os.mknod("chr", 0o600 | stat.S_IFCHR, os.makedev(1, 3))')" EPERM "mknod of a character device"
	posix_eq "$(posix_errno 'import stat; os.mknod("blk", 0o600 | stat.S_IFBLK, os.makedev(7, 0))')" EPERM "mknod of a block device"
	posix_eq "$(ls -A)" "" "nothing left"
}

# The tools: cp -a, tar and rsync -aH copy a tree with a hard link, a
# symbolic link, a private file, a fifo (not on SSH nodes: SFTP makes
# none) and old times into D, and the node side shows every name's type,
# mode, link count and time as in the tree; cp -a copies it back out
# (from an SSH node, whose names show no common inode, each name of the
# hard link as a file of its own).
posix_tools() {
	cd "$D" || return 1
	local src=$TESTDIR/tools-src back=$TESTDIR/tools-back m
	rm -rf "$src" "$back"
	mkdir -p "$src/sub"
	echo one >"$src/a"
	ln "$src/a" "$src/sub/b"
	ln -s ../a "$src/sub/s"
	echo secret >"$src/sub/p600"
	chmod 0600 "$src/sub/p600"
	touch -h -d '2001-02-03 04:05:06' "$src/a" "$src/sub/s" "$src/sub/p600"
	if [ "$POSIX_KIND" != ssh ]; then
		mkfifo -m 0640 "$src/f"
		touch -h -d '2002-03-04 05:06:07' "$src/f"
	fi
	touch -d '2002-03-04 05:06:07' "$src/sub"
	local want
	want=$(cd "$src" && find . -mindepth 1 -printf '%p %y %m %n %T@\n' | sort)
	cp -a "$src" cpa
	mkdir tara
	(cd "$src" && tar cf - .) | (cd tara && tar xf -)
	rsync -aH "$src/" rs/
	for m in cpa tara rs; do
		posix_eq "$(on_node "cd $m && find . -mindepth 1 -printf '%p %y %m %n %T@\\n' | sort")" "$want" "$m on the node side"
		posix_eq "$(on_node "[ $m/a -ef $m/sub/b ] && echo same")" same "the hard link in $m on the node side"
		posix_eq "$(cat $m/sub/s)" one "through the symbolic link in $m"
	done
	cp -a cpa "$back"
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$(cd "$back" && find . -mindepth 1 -printf '%p %y %m %T@\n' | sort)" "$(cd "$src" && find . -mindepth 1 -printf '%p %y %m %T@\n' | sort)" "the tree copied back out"
	else
		posix_eq "$(cd "$back" && find . -mindepth 1 -printf '%p %y %m %n %T@\n' | sort)" "$want" "the tree copied back out"
	fi
	posix_eq "$(cat "$back/sub/b")" one "a hard link copied back out"
	rm -rf cpa tara rs "$src" "$back"
}

# chmod, with the setgid and sticky bits; both sides (and on disk).
posix_chmod() {
	cd "$D" || return 1
	touch f
	mkdir d
	chmod 0640 f
	posix_eq "$(stat -c %a f)" 640 "mode of f"
	chmod 2775 d
	posix_eq "$(stat -c %a d)" 2775 "setgid directory"
	# (chmod(1) keeps a directory's setgid bit unless told: chmod(2) here)
	python3 -c 'import os; os.chmod("d", 0o1777)'
	posix_eq "$(stat -c %a d)" 1777 "sticky directory"
	chmod 4755 f
	posix_eq "$(stat -c %a f)" 4755 "setuid file"
	posix_eq "$(on_node 'stat -c %a f d')" "$(printf '4755\n1777')" "modes on the node side"
	if [ -n "$DISK" ]; then
		posix_eq "$(stat -c %a "$DISK/f" "$DISK/d")" "$(printf '4755\n1777')" "modes on disk"
	fi
	on_node 'chmod 0604 f' >/dev/null
	posix_eq "$(stat -c %a f)" 604 "mode the node set"
	rm f
	rmdir d
}

# chown and chgrp as root: 12345:23456 shown by stat, both sides.
posix_chown() {
	cd "$D" || return 1
	touch f
	mkdir d
	chown 12345:23456 f
	posix_eq "$(stat -c '%u %g' f)" "12345 23456" "owner of f"
	chgrp 34567 f
	posix_eq "$(stat -c '%u %g' f)" "12345 34567" "group of f after chgrp"
	chown -h 12345 d
	posix_eq "$(stat -c '%u %g' d)" "12345 0" "owner of d"
	ln -s f l
	chown -h 23456:12345 l
	posix_eq "$(stat -c '%u %g' l)" "23456 12345" "owner of the symlink l"
	posix_eq "$(stat -c '%u %g' f)" "12345 34567" "f after chown -h of l"
	posix_eq "$(on_node 'stat -c "%u %g" f d')" "$(printf '12345 34567\n12345 0')" "owners on the node side"
	if [ -n "$DISK" ]; then
		posix_eq "$(stat -c '%u %g' "$DISK/f")" "12345 34567" "owner on disk"
	fi
	on_node 'chown 777:888 f' >/dev/null
	posix_eq "$(stat -c '%u %g' f)" "777 888" "owner the node set"
	rm f l
	rmdir d
}

# utimens with nanoseconds (SSH: SFTP v3 has whole seconds: nanoseconds
# dropped, seconds kept, and a time past 2^32-1 refused with EOVERFLOW).
posix_utimens() {
	cd "$D" || return 1
	local want=981173106.123456789
	touch f
	TZ=UTC touch -d '2001-02-03 04:05:06.123456789 UTC' f
	TZ=UTC touch -a -d '2002-03-04 05:06:07.987654321 UTC' f
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$(TZ=UTC stat -c '%.9Y %.9X' f)" "981173106.000000000 1015218367.000000000" "times on an SSH node (seconds)"
		posix_eq "$(on_node 'stat -c "%Y %X" f')" "981173106 1015218367" "times on the node side"
		posix_eq "$(posix_errno 'os.utime("f", (4294967296, 4294967296))')" EOVERFLOW "a time of 2^32"
		posix_eq "$(stat -c %Y f)" 981173106 "mtime after the refused 2^32"
	else
		posix_eq "$(TZ=UTC stat -c '%.9Y %.9X' f)" "$want 1015218367.987654321" "mtime and atime"
		posix_eq "$(TZ=UTC stat -c %y f)" "2001-02-03 04:05:06.123456789 +0000" "stat -c %y"
		posix_eq "$(on_node 'stat -c "%.9Y %.9X" f')" "$want 1015218367.987654321" "times on the node side"
		if [ -n "$DISK" ]; then
			posix_eq "$(stat -c '%.9Y %.9X' "$DISK/f")" "$want 1015218367.987654321" "times on disk"
		fi
		posix_eq "$(posix_errno 'os.utime("f", ns=(4294967296 * 10**9 + 5, 4294967296 * 10**9 + 7))')" OK "a time of 2^32"
		posix_eq "$(stat -c '%.9Y' f)" 4294967296.000000007 "mtime of 2^32"
	fi
	on_node 'touch -d @1234567890 f' >/dev/null
	posix_eq "$(stat -c %Y f)" 1234567890 "mtime the node set"
	rm f
}

# The caller's umask applied once.
posix_umask() {
	cd "$D" || return 1
	(
		umask 0
		touch a
		mkdir d
	)
	posix_eq "$(stat -c %a a d)" "$(printf '666\n777')" "modes made under umask 0"
	(
		umask 027
		touch b
		mkdir e
		[ "$(posix_errno 'os.close(os.open("c", os.O_CREAT | os.O_WRONLY, 0o666))')" = OK ]
	)
	posix_eq "$(stat -c %a b e c)" "$(printf '640\n750\n640')" "modes made under umask 027"
	posix_eq "$(on_node 'stat -c %a a d b e')" "$(printf '666\n777\n640\n750')" "modes on the node side"
	rm a b c
	rmdir d e
}

# Long relative paths: a chain of directories 4,000 bytes deep made by cd
# step by step, a file at the bottom; then deeper than PATH_MAX (4096)
# below D, reached by cd (SSH: SFTP takes whole paths; the server's
# ENAMETOOLONG).
posix_longpaths() {
	cd "$D" || return 1
	local seg name rel=. i err depth=20
	seg=$(printf 'd%.0s' $(seq 1 200))
	name=$(printf 'f%.0s' $(seq 1 70))
	# SSH: the whole path, the node's directory in front, within PATH_MAX
	[ "$POSIX_KIND" != ssh ] || depth=19
	for i in $(seq 1 $depth); do
		mkdir "$seg" && cd "$seg" || return 1
		rel=$rel/$seg
	done
	echo deep >"$name"
	echo deeper >>"$name"
	rel=${rel#./}/$name
	echo "relative path of ${#rel} bytes" >&2
	[ "${#rel}" -ge 3800 ]
	[ "${#rel}" -lt 4096 ]
	posix_eq "$(cat "$name")" "$(printf 'deep\ndeeper')" "read back at the bottom"
	posix_eq "$(stat -c %s "$name")" 12 "size at the bottom"
	posix_eq "$(on_node "cat '$rel'")" "$(printf 'deep\ndeeper')" "the bottom on the node side"
	# a directory more is over PATH_MAX below D, and a file in it
	[ "$POSIX_KIND" != ssh ] || {
		mkdir "$seg"
		cd "$seg" || return 1
	}
	err=$(posix_errno 'os.mkdir("'"$seg"'")')
	if [ "$POSIX_KIND" = ssh ]; then
		posix_eq "$err" ENAMETOOLONG "mkdir past PATH_MAX on an SSH node"
	else
		posix_eq "$err" OK "mkdir past PATH_MAX"
		cd "$seg" || return 1
		echo bottom >"$name"
		posix_eq "$(cat "$name")" bottom "a file past PATH_MAX"
		posix_eq "$(ls)" "$name" "ls past PATH_MAX"
		rm "$name"
		cd ..
		rmdir "$seg"
	fi
	cd "$D" || return 1
	rm -r "$seg"
	posix_eq "$(ls -A)" "" "empty again"
}

# An open file stays usable after unlink: fstat, read, write.
posix_unlink_open() {
	cd "$D" || return 1
	# a name that only looks like libfuse's hidden ones is renamed to
	echo kept >g
	mv g .fuse_hiddenmine
	posix_eq "$(cat .fuse_hiddenmine)" kept "a file renamed to .fuse_hiddenmine"
	rm .fuse_hiddenmine
	echo data >f
	exec 7<f
	rm f
	posix_eq "$(cat <&7)" data "cat <&7 after rm"
	posix_eq "$(stat -L -c '%s %h' /dev/fd/7)" "5 0" "fstat after rm (size, links)"
	exec 7<&-
	# a name removed while open, another name left: one link
	echo two >h
	ln h h2
	exec 7<h
	rm h
	posix_eq "$(stat -L -c '%s %h' /dev/fd/7)" "4 1" "fstat after rm of one of two names (size, links)"
	exec 7<&-
	rm h2
	posix_eq "$(python3 -c '
import os
fd = os.open("g", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"abc")
os.unlink("g")
os.write(fd, b"def")
st = os.fstat(fd)
print(st.st_size, st.st_nlink, os.pread(fd, 6, 0).decode())
')" "6 0 abcdef" "write, fstat and read after unlink"
	# removed on the node side while open through D: read and write go
	# on through the descriptor
	echo data >f
	exec 7<>f
	on_node 'rm f' >/dev/null
	posix_eq "$(python3 -c '
import os
os.pwrite(7, b"DA", 0)
print(os.pread(7, 10, 0).decode(), end="")')" "DAta" "read and write after rm on the node side"
	exec 7>&-
	posix_eq "$(ls -A)" "" "nothing left"
}

# An open file stays usable after rename: read, write, fstat, and the
# writes are in the new name.
posix_rename_open() {
	cd "$D" || return 1
	echo data >f
	posix_eq "$(python3 -c '
import os
fd = os.open("f", os.O_RDWR)
os.rename("f", "g")
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b"more\n")
print(os.fstat(fd).st_size, os.pread(fd, 10, 0).decode().replace("\n", " "))
')" "10 data more " "write, fstat and read after rename"
	posix_eq "$(cat g)" "$(printf 'data\nmore')" "g after the writes"
	# Renamed behind the mount's back: reads and writes go on through
	# the descriptor (fstat cannot: the mount asks for it by the name,
	# which the node took away; see the man page).
	exec 7<g
	on_node 'mv g h' >/dev/null
	posix_eq "$(python3 -c 'import os; print(os.read(7, 100).decode(), end="")')" \
		"$(printf 'data\nmore')" "read after the node renamed it"
	exec 7<&-
	[ ! -e g ] || {
		echo "g still there after the node's rename" >&2
		return 1
	}
	rm h
}

# The lock program, written to D: python3 posix_lock.py KIND MODE FILE
# KIND: posix (fcntl lockf), ofd (F_OFD_SETLK) or flock.
# MODE: hold (takes the lock, creates FILE.held, waits until FILE.release
# exists or 30 s pass, removes FILE.held) or try (prints got or busy).
posix_lock_program() {
	cat >"$D/posix_lock.py" <<'EOF'
import fcntl, os, struct, sys, time
kind, mode, name = sys.argv[1:4]
fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
def lock(block):
    if kind == "posix":
        fcntl.lockf(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    elif kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    else:  # F_OFD_SETLKW 38, F_OFD_SETLK 37; F_WRLCK 1, whole file
        fcntl.fcntl(fd, 38 if block else 37, struct.pack("hhqqi4x", 1, 0, 0, 0, 0))
if mode == "try":
    try:
        lock(False)
        print("got")
    except OSError:
        print("busy")
    sys.exit(0)
if mode == "wait":
    # A wait a signal interrupts (EINTR, its handler runs), then a
    # wait the holder's end grants: the holder is told to end here.
    import signal
    class Rang(Exception):
        pass
    def ring(*_):
        raise Rang()
    signal.signal(signal.SIGALRM, ring)
    signal.alarm(1)
    try:
        lock(True)
        print("granted while held")
    except Rang:
        print("interrupted")
    signal.alarm(0)
    open(name + ".release", "w").close()
    lock(True)
    print("got")
    sys.exit(0)
lock(True)
open(name + ".held", "w").close()
end = time.time() + 30
while not os.path.exists(name + ".release") and time.time() < end:
    time.sleep(0.05)
os.unlink(name + ".held")
EOF
}

# Locks of KIND: a holder through D excludes a process on the node side
# and a holder on the node side excludes one through D (SSH: only
# processes through the mount exclude each other).
posix_locks() {
	local kind=$1 holder
	cd "$D" || return 1
	posix_lock_program
	# a holder through D
	python3 posix_lock.py "$kind" hold lk &
	holder=$!
	posix_wait_for 10 lk.held
	posix_eq "$(python3 posix_lock.py "$kind" try lk)" busy "$kind lock taken through D, tried through D"
	if [ "$POSIX_KIND" != ssh ]; then
		posix_eq "$(on_node "python3 posix_lock.py $kind try lk")" busy "$kind lock held through D, tried on the node side"
	fi
	touch lk.release
	wait "$holder"
	rm lk.release
	posix_eq "$(python3 posix_lock.py "$kind" try lk)" got "$kind lock after the holder ended"
	# a blocking wait through D: a signal interrupts it, the holder's
	# end grants it
	python3 posix_lock.py "$kind" hold lk &
	holder=$!
	posix_wait_for 10 lk.held
	posix_eq "$(timeout 20 python3 posix_lock.py "$kind" wait lk 2>&1 | tr '\n' ' ')" "interrupted got " "$kind lock waited for through D, held through D"
	wait "$holder"
	rm lk.release
	if [ "$POSIX_KIND" != ssh ]; then
		# a holder on the node side
		on_node "nohup python3 posix_lock.py $kind hold lk >/dev/null 2>&1 &" >/dev/null
		posix_wait_for 10 lk.held
		posix_eq "$(python3 posix_lock.py "$kind" try lk)" busy "$kind lock held on the node side, tried through D"
		on_node 'touch lk.release' >/dev/null
		local i
		for ((i = 0; i < 200; i++)); do
			[ -z "$(on_node 'ls lk.held 2>/dev/null || true')" ] && break
			sleep 0.05
		done
		posix_eq "$(python3 posix_lock.py "$kind" try lk)" got "$kind lock after the node's holder ended"
		rm lk.release
		# a blocking wait through D for a holder on the node side
		on_node "nohup python3 posix_lock.py $kind hold lk >/dev/null 2>&1 &" >/dev/null
		posix_wait_for 10 lk.held
		posix_eq "$(timeout 20 python3 posix_lock.py "$kind" wait lk 2>&1 | tr '\n' ' ')" "interrupted got " "$kind lock waited for through D, held on the node side"
	fi
	if [ -n "$DISK" ]; then
		# What the node side wrote under its lock is what a lock taken
		# through D then reads, also through a descriptor that read
		# the file before (as SQLite reads its database).
		printf aaaa >lk
		posix_eq "$(python3 - "$kind" "$DISK/lk" <<'EOF'
import fcntl, os, struct, sys
kind, disk = sys.argv[1:3]
def lock(fd, take):
    if kind == "posix":
        fcntl.lockf(fd, fcntl.LOCK_EX if take else fcntl.LOCK_UN)
    elif kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX if take else fcntl.LOCK_UN)
    else:  # F_OFD_SETLKW 38; F_WRLCK 1, F_UNLCK 2
        fcntl.fcntl(fd, 38, struct.pack("hhqqi4x", 1 if take else 2, 0, 0, 0, 0))
fd = os.open("lk", os.O_RDWR)
before = os.pread(fd, 4, 0).decode()
node = os.open(disk, os.O_RDWR)
lock(node, True)
os.pwrite(node, b"bbbb", 0)
lock(node, False)
lock(fd, True)
print(before, os.pread(fd, 4, 0).decode())
lock(fd, False)
EOF
)" "aaaa bbbb" "$kind lock through D after the node side wrote under its own"
	fi
	rm -f lk lk.release posix_lock.py
}
posix_lock_fcntl() { posix_locks posix; }
posix_lock_ofd() { posix_locks ofd; }
posix_lock_flock() { posix_locks flock; }

# SQLite in rollback-journal mode, written in turns from both sides: 10
# rows each, 5 rounds; none lost, the database intact.
posix_sqlite() {
	cd "$D" || return 1
	local round
	cat >"$D/posix_sqlite.py" <<'EOF'
import sqlite3, sys
db = sqlite3.connect("t.db")
db.execute("PRAGMA journal_mode=DELETE")
db.execute("CREATE TABLE IF NOT EXISTS t (side TEXT, round INTEGER, n INTEGER)")
with db:
    for n in range(10):
        db.execute("INSERT INTO t VALUES (?, ?, ?)", (sys.argv[1], int(sys.argv[2]), n))
print(db.execute("SELECT count(*) FROM t").fetchone()[0])
db.close()
EOF
	for round in 1 2 3 4 5; do
		posix_eq "$(python3 posix_sqlite.py mount $round)" $((round * 20 - 10)) "rows after the mount's insert of round $round"
		posix_eq "$(on_node "python3 posix_sqlite.py node $round")" $((round * 20)) "rows after the node's insert of round $round"
	done
	posix_eq "$(python3 -c '
import sqlite3
db = sqlite3.connect("t.db")
print(db.execute("PRAGMA integrity_check").fetchone()[0],
      db.execute("SELECT count(*) FROM t WHERE side = \"mount\"").fetchone()[0],
      db.execute("SELECT count(*) FROM t WHERE side = \"node\"").fetchone()[0])
')" "ok 50 50" "integrity and rows of each side"
	rm -f t.db t.db-journal posix_sqlite.py
}

# statfs: a size, the node file system's (df run on the node side, and
# on the disk beneath where it is visible).
posix_statfs() {
	cd "$D" || return 1
	local size
	size=$(df -k --output=size . | tail -n 1 | tr -d ' ')
	echo "df size: $size KiB" >&2
	[ "$size" -gt 0 ] || {
		echo "df shows size $size" >&2
		return 1
	}
	posix_eq "$(on_node 'df -k --output=size . | tail -n 1 | tr -d " "')" "$size" "df size on the node side"
	if [ -n "$DISK" ]; then
		posix_eq "$(df -k --output=size "$DISK" | tail -n 1 | tr -d ' ')" "$size" "df size of the disk"
	fi
	posix_eq "$(stat -f -c %l .)" "$(on_node 'stat -f -c %l .')" "longest name (the node side's)"
}

# Freshness: a node command rewrites a file; the mount sees the new size
# and contents as soon as the command returns (cached before).
posix_fresh_exec() {
	cd "$D" || return 1
	echo old >f
	posix_eq "$(cat f) $(stat -c %s f)" "old 4" "f before"
	exec 7<f
	on_node 'echo "new and longer" >f' >/dev/null
	posix_eq "$(stat -c %s f)" 15 "size after the node's rewrite"
	posix_eq "$(cat f)" "new and longer" "contents after the node's rewrite"
	posix_eq "$(cat <&7)" "new and longer" "read through a descriptor opened before"
	exec 7<&-
	on_node 'echo gone >g; rm f; mkdir f' >/dev/null
	posix_eq "$(stat -c %F f)" directory "f replaced by a directory"
	posix_eq "$(cat g)" gone "a new file of the node"
	rmdir f
	rm g
	# A file known only from a listing (names with their attributes)
	on_node 'echo one >h' >/dev/null
	ls -l >/dev/null
	on_node 'echo "one and more" >h' >/dev/null
	posix_eq "$(stat -c %s h)" 13 "size after the node's rewrite of a file only listed"
	rm h
}

# Freshness of a background node process's change: seen within 1 s (on
# SSH nodes, which have no watch on the node: after the next exec).
posix_fresh_background() {
	cd "$D" || return 1
	echo old >f
	posix_eq "$(cat f) $(stat -c %s f)" "old 4" "f before"
	exec 7<f
	on_node "nohup sh -c 'sleep 0.3; echo \"new and longer\" >f' >/dev/null 2>&1 &" >/dev/null
	# read it meanwhile, so the caches hold the old contents
	posix_eq "$(cat f)" old "f while the background process sleeps"
	# and through the descriptor (not asserted: a slow machine may have
	# run the rewrite already)
	python3 -c 'import os; os.pread(7, 100, 0)'
	sleep 1.2
	if [ "$POSIX_KIND" = ssh ]; then
		on_node true >/dev/null
	fi
	posix_eq "$(stat -c %s f)" 15 "size 1.2 s after the background rewrite"
	posix_eq "$(cat f)" "new and longer" "contents 1.2 s after the background rewrite"
	posix_eq "$(python3 -c 'import os; print(os.pread(7, 100, 0).decode(), end="")')" \
		"new and longer" "a descriptor opened before, 1.2 s after the background rewrite"
	exec 7<&-
	rm f
}

# Another user (OTHER, run with runuser): files in a 0777 directory are
# theirs, a 0755 root directory refuses them, a 0600 root file is not
# theirs to read, a 0644 one is. D must be reachable by them.
posix_other_user() {
	cd "$D" || return 1
	local u=$1
	mkdir -m 0777 pub
	mkdir -m 0755 priv
	chmod 0777 pub
	echo secret >s600
	chmod 0600 s600
	echo open >s644
	chmod 0644 s644
	runuser -u "$u" -- touch pub/mine
	runuser -u "$u" -- mkdir pub/mydir
	posix_eq "$(stat -c '%U %a' pub/mine)" "$u 644" "owner and mode of the other user's file"
	posix_eq "$(stat -c %U pub/mydir)" "$u" "owner of the other user's directory"
	posix_eq "$(on_node 'stat -c %u pub/mine')" "$(id -u "$u")" "owner on the node side"
	posix_eq "$(runuser -u "$u" -- python3 -c '
import errno, os
try:
    os.close(os.open("priv/x", os.O_CREAT | os.O_WRONLY, 0o644)); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])')" EACCES "the other user creating in a 0755 root directory"
	posix_eq "$(runuser -u "$u" -- python3 -c '
import errno
try:
    open("s600").read(); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])')" EACCES "the other user reading a 0600 root file"
	posix_eq "$(runuser -u "$u" -- cat s644)" open "the other user reading a 0644 root file"
	[ ! -e priv/x ] || {
		echo "priv/x exists" >&2
		return 1
	}
	runuser -u "$u" -- rm -f s644 2>/dev/null || true
	[ -e s644 ] || {
		echo "the other user removed a root file of a 0755 directory" >&2
		return 1
	}
	# rights through a supplementary group: the group's directory and
	# file, none through the others' bits
	local g
	g=$(id -Gn "$u" | cut -s -d' ' -f2)
	[ -n "$g" ] || {
		echo "$u has no supplementary group" >&2
		return 1
	}
	mkdir -m 0770 grp
	chgrp "$g" grp
	chmod 0770 grp
	echo shared >grp/r640
	chgrp "$g" grp/r640
	chmod 0640 grp/r640
	posix_eq "$(runuser -u "$u" -- cat grp/r640)" shared "the other user reading through a supplementary group"
	runuser -u "$u" -- touch grp/made
	posix_eq "$(stat -c '%U %G' grp/made)" "$u $(id -gn "$u")" "owner and group of a file made through a supplementary group's directory"
	# a set-group-ID directory gives its group to what is made in it,
	# and its bit to a directory
	mkdir -m 0777 sgid
	chgrp "$g" sgid
	chmod 2777 sgid
	runuser -u "$u" -- touch sgid/f
	runuser -u "$u" -- mkdir sgid/d
	runuser -u "$u" -- ln -s f sgid/l
	posix_eq "$(stat -c '%U %G' sgid/f)" "$u $g" "owner and group of a file made in a set-group-ID directory"
	posix_eq "$(stat -c '%U %G %A' sgid/d)" "$u $g drwxr-sr-x" "owner, group and mode of a directory made in a set-group-ID directory"
	posix_eq "$(stat -c '%U %G' sgid/l)" "$u $g" "owner and group of a symbolic link made in a set-group-ID directory"
	# a file that was there already stays its owner's when the other
	# user opens it to write with O_CREAT (as >> does)
	echo first >pub/there
	chmod 0666 pub/there
	runuser -u "$u" -- sh -c 'echo second >>pub/there'
	posix_eq "$(stat -c '%U' pub/there)" root "owner of a file there already, appended to by the other user"
	posix_eq "$(cat pub/there)" "first
second" "contents of the file appended to by the other user"
	runuser -u "$u" -- ln -s there pub/mylink
	posix_eq "$(stat -c '%U' pub/mylink)" "$u" "owner of the other user's symbolic link"
	posix_eq "$(on_node 'stat -c %u pub/mylink')" "$(id -u "$u")" "owner of the other user's symbolic link on the node side"
	# A caller in many groups (ids no group has: setpriv sets them as
	# given), one of them granting rights: its rights through it, and
	# what it makes is its own, with 100 groups as with 300 (more than a
	# file system in user space may read of a caller).
	local gid many
	gid=$(getent group "$g" | cut -d: -f3)
	many=$(seq -s, 70001 70099),$gid
	posix_eq "$(setpriv --reuid="$u" --regid="$(id -g "$u")" --groups="$many" cat grp/r640)" shared "a caller in 100 groups reading through the last"
	setpriv --reuid="$u" --regid="$(id -g "$u")" --groups="$many" touch grp/made100
	posix_eq "$(stat -c '%U %G' grp/made100)" "$u $(id -gn "$u")" "owner and group of a file made by a caller in 100 groups"
	setpriv --reuid="$u" --regid="$(id -g "$u")" --groups="$(seq -s, 70001 70300)" touch pub/made300
	posix_eq "$(stat -c '%U %G' pub/made300)" "$u $(id -gn "$u")" "owner and group of a file made by a caller in 300 groups"
	rm -r pub priv s600 s644 grp sgid
}
