# tests/sshd/testhosts.bash: real OpenSSH sshd test hosts for the suites and
# benchmarks, host k on 127.0.1.k:22 (testhosts_*) or a manager and workers in
# network namespaces (testnet_*); every daemon is found and stopped by pid.

# Source it from bash (set -euo pipefail callers and bats both work):
#
#   testhosts_start DIR N [FIRST]   hosts FIRST..FIRST+N-1, host k on 127.0.1.k:22
#   testhosts_stop DIR              kill every sshd of DIR's hosts (idempotent)
#   testhosts_kill DIR K            host K dies: listener and sessions killed
#   testhosts_revive DIR K          host K back, same host key and config
#   testhosts_move DIR K NEWK       host K killed, then back as host NEWK on
#                                   the address NEWK of its /24, same host key
#   testhosts_init DIR              only the client files below (no host)
#   testhosts_pids DIR              pids of every live sshd of DIR
#   testnet_supported               0 when `ip netns add` is permitted here
#   testnet_start DIR NWORKERS      client, manager and worker namespaces
#   testnet_stop DIR                their sshds killed, namespaces deleted
#
# What DIR holds (absolute paths are written into every file):
#   id_ed25519, id_ed25519.pub   the client key pair (no passphrase)
#   authorized_keys              its public key; every host accepts it
#   known_hosts                  "ADDRESS ssh-ed25519 AAAA..." per host
#   ssh_config                   for `ssh -F DIR/ssh_config root@ADDRESS CMD`
#                                (key, known_hosts, strict checking, BatchMode,
#                                KexAlgorithms curve25519-sha256)
#   host<k>/                     host key, sshd_config, sshd.pid, log, and
#                                optionally authorized_keys (see below)
#   netns/<role>/, netns.list, testnet.env   the namespace network
#
# Addresses: TESTHOSTS_NET (default 127.0.1, a /24 of the loopback 127/8)
# is the prefix of the addresses testhosts_start gives, host k on
# TESTHOSTS_NET.k. A host keeps the address it was started with:
# testhosts_revive, testhosts_move and testhosts_stop read it from the host's
# sshd_config, whatever TESTHOSTS_NET is then.
#
# Per-host keys: when HOSTDIR/authorized_keys exists as the host's
# sshd_config is written (testhosts_start, testhosts_move), that host also
# accepts the keys it lists, after the shared DIR/authorized_keys. Create
# HOSTDIR (DIR/host<k>) and the file before testhosts_start.
#
# Several of these functions may run at once on one DIR for different hosts
# (a fake cloud starts and stops hosts from parallel jobs): known_hosts is
# rewritten under a lock (flock on DIR). Run testhosts_init first then, so
# the client key is not created twice at once.
#
# Every test host shares this machine, so `hostname` prints the same on all of
# them; the address a command ran on is the third word of $SSH_CONNECTION.
# The namespace hosts have their own UTS namespace: `hostname` prints
# `manager` on the manager and `worker<k>` on worker k.
#
# Remote commands run `bash -c` as root; sshd sets SHLVL=1, so bash does not
# read ~/.bashrc (Debian's bash does for commands run by sshd otherwise).
# Each host has a home of its own, HOSTDIR/home (sshd sets HOME there; the
# login directory stays root's): the keys a command adds to
# ~/.ssh/authorized_keys there are accepted by that host only. Each also has
# a TMPDIR of its own, HOSTDIR/tmp.
# TESTHOSTS_SETENV adds NAME=VALUE words to the sessions' environment.
#
# Own login directories: sshd starts each session in the user's home of
# /etc/passwd, /root for every host, so what a node keeps there (cclfs's
# .cclfs/HANDLE/) is one directory for all of them, and for every test suite
# that runs at the same time. With TESTHOSTS_OWN_LOGIN=1 (the fake clouds
# set it) a host's sshd runs in a mount namespace of its own where
# HOSTDIR/login is mounted on /root: each host then has a login directory of
# its own, as a machine has; seen from outside, its files are under
# HOSTDIR/login. FUSE mounts (a test's cclfs) are not seen there.
#
# Delayed ACKs: on loopback, sshd's small writes meet the peer's delayed ACK
# (Nagle) twice per login, adding about 80 ms to each new connection (measured
# 140 ms -> 55 ms for `ssh HOST hostname`). testhosts_start therefore adds the
# route `local 127.0.1.0/24 dev lo table local quickack 1` (only the test-host
# addresses; the client then connects from 127.0.1.k itself) and testhosts_stop
# deletes it once no test host listens on 127.0.1.0/24 any more. The same
# holds for the /24 of TESTHOSTS_NET, and testhosts_move adds it for the /24
# it moves to.
# TESTHOSTS_QUICKACK=0 leaves routing alone. The namespaces of testnet_start
# get quickack on their own routes.
#
# Stopping: every sshd that has a log of DIR open (sshd -E keeps it open in
# the listener and in every connection child) or is the pid its PidFile
# records, and everything they forked (parent links in /proc), is stopped
# with SIGSTOP as it is found and then killed; nothing is found by name.
# Where PID 1 does not reap orphans, killed daemons stay as zombies; they
# count as gone.

TESTHOSTS_SSHD=${TESTHOSTS_SSHD:-/usr/sbin/sshd}
TESTHOSTS_TIMEOUT=${TESTHOSTS_TIMEOUT:-10} # seconds to wait for a daemon
TESTHOSTS_NET=${TESTHOSTS_NET:-127.0.1} # host k listens on TESTHOSTS_NET.k
# More NAME=VALUE words for the environment of the hosts' sessions.
TESTHOSTS_SETENV=${TESTHOSTS_SETENV-}
# The SFTP server and its options (-P REQUESTS: refuse those extensions).
TESTHOSTS_SFTP=${TESTHOSTS_SFTP:-internal-sftp}
# The key exchanges the hosts offer: OpenSSH's defaults without the
# post-quantum sntrup761x25519 hybrid, which makes each new `ssh` connection
# about 60 ms slower here (libssh2 does not offer it anyway). Empty: sshd's
# defaults.
TESTHOSTS_KEX=${TESTHOSTS_KEX-curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group-exchange-sha256,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group14-sha256}

# Addresses of the namespace network (the same in every run: each run has its
# own namespaces).
TESTNET_CLIENT_ADDR=10.77.0.1
TESTNET_MANAGER_ADDR=10.77.0.2
TESTNET_INNER_PREFIX=10.78.0
TESTNET_MANAGER_INNER_ADDR=10.78.0.1
TESTNET_WORKER_BASE=100 # worker k is 10.78.0.(100+k)

# ---------------------------------------------------------------- helpers

_testhosts_err() {
	echo "testhosts: $*" >&2
}

_testhosts_abs() { # DIR -> absolute path (created)
	mkdir -p "$1" && (cd "$1" && pwd -P)
}

_testhosts_posint() { # name value
	if ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
		_testhosts_err "$1: not a positive integer: '$2'"
		return 1
	fi
}

# 0 when $1 is a /24 prefix "a.b.c" of the loopback network 127.0.0.0/8.
_testhosts_net_ok() {
	local a b c
	if [[ $1 =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
		a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} c=${BASH_REMATCH[3]}
		if [ "$a" = 127 ] && [ "$((10#$b))" -le 255 ] && [ "$((10#$c))" -le 255 ]; then
			return 0
		fi
	fi
	_testhosts_err "TESTHOSTS_NET: not a /24 prefix of 127.0.0.0/8 (like 127.0.1): '$1'"
	return 1
}

# The address a host directory's sshd_config listens on (without :22), or
# nothing when it has none.
_testhosts_host_addr() { # hostdir
	local key val
	[ -f "$1/sshd_config" ] || return 0
	while read -r key val; do
		if [ "$key" = ListenAddress ]; then
			printf '%s' "${val%:*}"
			return 0
		fi
	done <"$1/sshd_config"
	return 0
}

# The dotted address as /proc/net/tcp prints it (little-endian hex).
_testhosts_hexaddr() { # a.b.c.d
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	printf '%02X%02X%02X%02X' "$d" "$c" "$b" "$a"
}

# Escape the glob characters of a path for find -lname.
_testhosts_glob_escape() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\*/\\*}
	s=${s//\?/\\?}
	s=${s//\[/\\[}
	printf '%s' "$s"
}

# 0 when PID exists and is not a zombie (PID 1 may not reap daemons).
_testhosts_alive() {
	local line
	{ IFS= read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
	line=${line##*) }
	[ "${line:0:1}" != Z ] && [ "${line:0:1}" != X ]
}

_testhosts_comm() { # pid -> its comm, or nothing
	local c=
	{ IFS= read -r c <"/proc/$1/comm"; } 2>/dev/null || true
	printf '%s' "$c"
}

# The client key pair, authorized_keys and ssh_config of DIR (once).
_testhosts_client_files() { # absdir
	local d=$1
	mkdir -p /run/sshd || {
		_testhosts_err "cannot create /run/sshd"
		return 1
	}
	if [ ! -f "$d/id_ed25519" ] || [ ! -f "$d/id_ed25519.pub" ]; then
		rm -f "$d/id_ed25519" "$d/id_ed25519.pub"
		ssh-keygen -q -t ed25519 -N '' -C testhosts-client -f "$d/id_ed25519" </dev/null || {
			_testhosts_err "ssh-keygen of the client key in $d failed"
			return 1
		}
	fi
	[ -f "$d/authorized_keys" ] || cp "$d/id_ed25519.pub" "$d/authorized_keys" || return 1
	[ -f "$d/known_hosts" ] || : >"$d/known_hosts" || return 1
	if [ ! -f "$d/ssh_config" ]; then
		cat >"$d/ssh_config" <<-EOF || return 1
			# Client options for the test hosts of this directory.
			Host *
			 User root
			 IdentityFile "$d/id_ed25519"
			 IdentitiesOnly yes
			 UserKnownHostsFile "$d/known_hosts"
			 GlobalKnownHostsFile /dev/null
			 StrictHostKeyChecking yes
			 BatchMode yes
			 KexAlgorithms curve25519-sha256
			 ConnectTimeout 5
			 LogLevel ERROR
		EOF
	fi
}

# A host's directory: its host key (kept across restarts) and sshd_config.
_testhosts_host_files() { # absdir hostdir listen
	local d=$1 h=$2 listen=$3 keyfiles
	mkdir -p "$h" || return 1
	# The shared keys, then the host's own when it has a file of them.
	keyfiles="\"$d/authorized_keys\""
	[ ! -f "$h/authorized_keys" ] || keyfiles+=" \"$h/authorized_keys\""
	# Its own home (HOME), as a machine of its own: what a command puts in
	# ~/.ssh/authorized_keys there, this host accepts.
	mkdir -p "$h/home" || return 1
	# And its own TMPDIR: programs that keep per-machine state in the
	# temporary directory must not meet their twin of another test host.
	# Open MPI's daemons do: each one writes hwloc.sm in a session directory
	# named after the host name (the same on every test host) and segfaults
	# now and then when another daemon of the job rewrites the same file.
	mkdir -p "$h/tmp" "$h/login" || return 1
	keyfiles+=" \"$h/home/.ssh/authorized_keys\""
	if [ ! -f "$h/ssh_host_ed25519_key" ] || [ ! -f "$h/ssh_host_ed25519_key.pub" ]; then
		rm -f "$h/ssh_host_ed25519_key" "$h/ssh_host_ed25519_key.pub"
		ssh-keygen -q -t ed25519 -N '' -C "${h##*/}" -f "$h/ssh_host_ed25519_key" </dev/null ||
			return 1
	fi
	cat >"$h/sshd_config" <<-EOF
		# A test host of $d (tests/sshd/testhosts.bash).
		HostKey "$h/ssh_host_ed25519_key"
		PidFile "$h/sshd.pid"
		ListenAddress $listen
		AuthorizedKeysFile $keyfiles
		UsePAM no
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		StrictModes no
		PermitUserRC no
		SetEnv SHLVL=1 HOME=$h/home TMPDIR=$h/tmp $TESTHOSTS_SETENV
		PrintMotd no
		PrintLastLog no
		LogLevel ERROR
		MaxSessions 200
		MaxStartups 200
		Subsystem sftp $TESTHOSTS_SFTP
		${TESTHOSTS_KEX:+KexAlgorithms $TESTHOSTS_KEX}
	EOF
}

# Start the sshd of a host directory (it daemonizes and writes its PidFile).
# With a namespace, it runs there under its own UTS namespace and hostname.
_testhosts_launch() { # hostdir [netns hostname]
	local h=$1 ns=${2:-} name=${3:-}
	rm -f "$h/sshd.pid"
	# A fresh log: what the new daemon writes before its PidFile tells
	# whether it failed (sshd forks before it binds, exit status 0).
	if [ -e "$h/log" ]; then mv -f "$h/log" "$h/log.prev"; fi
	# shellcheck disable=SC2094 # sshd appends to its log, and so does this
	if [ -z "$ns" ] && [ "${TESTHOSTS_OWN_LOGIN:-0}" = 1 ]; then
		# The namespace starts with a copy of every mount, cclfs's and
		# other FUSE mounts among them: those are detached there, or
		# their daemons would outlive their unmount as long as this sshd
		# runs (nothing propagates: the mounts here are private).
		# shellcheck disable=SC2016 # sh expands them
		unshare --mount --propagation private sh -c '
			while read -r _ m t _; do
				case $t in fuse | fuse.*) umount -l "$m" ;; esac
			done </proc/self/mounts
			mount --bind "$1" /root && exec "$2" -f "$3" -E "$4"' \
			sh "$h/login" "$TESTHOSTS_SSHD" "$h/sshd_config" "$h/log" </dev/null >>"$h/log" 2>&1 3>&-
	elif [ -z "$ns" ]; then
		"$TESTHOSTS_SSHD" -f "$h/sshd_config" -E "$h/log" </dev/null >>"$h/log" 2>&1 3>&-
	else
		# shellcheck disable=SC2016 # sh expands them
		ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec "$2" -f "$3" -E "$4"' \
			sh "$name" "$TESTHOSTS_SSHD" "$h/sshd_config" "$h/log" </dev/null >>"$h/log" 2>&1 3>&-
	fi
}

_testhosts_log_tail() { # hostdir
	tail -n 3 "$1/log" 2>/dev/null | sed 's/^/    /' >&2 || true
}

# Wait until each host's sshd has written its PidFile and listens on port 22
# of its address (read from /proc/PID/net/tcp: the daemon's own network
# namespace, and no connection, which would fork an sshd child per probe).
# Arguments: triples "hostdir address label".
_testhosts_wait_ready() {
	local deadline=$((${EPOCHREALTIME/./} + TESTHOSTS_TIMEOUT * 1000000))
	local -a pending=("$@") next
	local i h addr label pid hex tcp now
	local -a tcp_lines
	local -A failing=() # hostdir -> when its log was first seen non-empty
	while [ ${#pending[@]} -gt 0 ]; do
		next=()
		for ((i = 0; i < ${#pending[@]}; i += 3)); do
			h=${pending[i]} addr=${pending[i + 1]} label=${pending[i + 2]}
			# A line without its newline is a PidFile still being written.
			{ IFS= read -r pid <"$h/sshd.pid"; } 2>/dev/null || pid=
			if [ -n "$pid" ]; then
				if ! _testhosts_alive "$pid"; then
					_testhosts_err "$label: sshd (pid $pid) exited; its log:"
					_testhosts_log_tail "$h"
					return 1
				fi
				hex=$(_testhosts_hexaddr "$addr")
				tcp=
				if mapfile -t tcp_lines <"/proc/$pid/net/tcp" 2>/dev/null; then
					tcp=" ${tcp_lines[*]} "
				fi
				[[ $tcp == *" $hex:0016 00000000:0000 0A "* ]] && continue
			elif [ -s "$h/log" ]; then
				# LogLevel ERROR: anything logged before the PidFile is
				# an error; give it 0.3 s to turn out harmless.
				now=${EPOCHREALTIME/./}
				: "${failing[$h]:=$now}"
				if [ $((now - failing[$h])) -gt 300000 ]; then
					_testhosts_err "$label: sshd failed to start; its log:"
					_testhosts_log_tail "$h"
					return 1
				fi
			fi
			next+=("$h" "$addr" "$label")
		done
		pending=("${next[@]+"${next[@]}"}")
		[ ${#pending[@]} -eq 0 ] && break
		if [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
			for ((i = 0; i < ${#pending[@]}; i += 3)); do
				_testhosts_err "${pending[i + 2]}: sshd does not accept connections on ${pending[i + 1]}:22 after $TESTHOSTS_TIMEOUT s; its log:"
				_testhosts_log_tail "${pending[i]}"
			done
			return 1
		fi
		sleep 0.01
	done
	return 0
}

# Replace the known_hosts lines of the given addresses (and drop those of
# the addresses in _TESTHOSTS_KH_DROP, a space-separated list), under a lock
# on DIR: parallel callers do not lose each other's lines.
# Arguments: pairs "address hostdir".
_testhosts_known_hosts() { # absdir pairs...
	local d=$1 i addrs=() key
	shift
	local -a pairs=("$@") lines=()
	for ((i = 0; i < ${#pairs[@]}; i += 2)); do
		addrs+=("${pairs[i]}")
		read -r key <"${pairs[i + 1]}/ssh_host_ed25519_key.pub" || return 1
		key=${key% *} # "ssh-ed25519 AAAA..." without the comment
		lines+=("${pairs[i]} $key")
	done
	local -a drop=()
	read -r -a drop <<<"${_TESTHOSTS_KH_DROP:-}"
	addrs+=("${drop[@]+"${drop[@]}"}")
	(
		if command -v flock >/dev/null; then
			flock 9 || exit 1
		fi
		{
			awk -v drop="${addrs[*]}" 'BEGIN { n = split(drop, a, " "); for (i = 1; i <= n; i++) d[a[i]] = 1 }
				!($1 in d)' "$d/known_hosts" 2>/dev/null || true
			printf '%s\n' "${lines[@]}"
		} >"$d/known_hosts.tmp.$BASHPID" && mv -f "$d/known_hosts.tmp.$BASHPID" "$d/known_hosts"
	) 9<"$d"
}

# Start several hosts in parallel. Arguments: absdir, then quadruples
# "hostdir listen-address netns-or-- hostname-or--".
_testhosts_start_hosts() {
	local d=$1 i pid failed=0 ns name
	shift
	local -a spec=("$@") pids=() labels=()
	for ((i = 0; i < ${#spec[@]}; i += 4)); do
		ns=${spec[i + 2]} name=${spec[i + 3]}
		[ "$ns" = - ] && ns=
		[ "$name" = - ] && name=
		(_testhosts_host_files "$d" "${spec[i]}" "${spec[i + 1]}" &&
			_testhosts_launch "${spec[i]}" "$ns" "$name") &
		pids+=($!)
		labels+=("${spec[i]}")
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[i]}"; then
			_testhosts_err "${labels[i]}: sshd did not start; its log:"
			_testhosts_log_tail "${labels[i]}"
			failed=1
		fi
	done
	return "$failed"
}

# Every sshd process that has a log matching PATTERN (a find -lname glob)
# open: listeners and their connection children (sshd -E keeps the log open
# in both), even when DIR was removed meanwhile.
_testhosts_log_holders() { # pattern
	local out p pid
	local -A seen=()
	out=$(find /proc/[0-9]*/fd -maxdepth 1 \( -lname "$1" -o -lname "$1 (deleted)" \) 2>/dev/null || true)
	for p in $out; do
		pid=${p#/proc/}
		pid=${pid%%/*}
		[ -n "${seen[$pid]:-}" ] && continue
		seen[$pid]=1
		[ "$(_testhosts_comm "$pid")" = sshd ] && _testhosts_alive "$pid" && echo "$pid"
	done
	return 0
}

# ppid -> "pid pid ..." for every process (parent links of /proc/PID/stat).
_testhosts_scan_children() {
	local f line pid ppid
	declare -gA _TESTHOSTS_KIDS=()
	for f in /proc/[0-9]*/stat; do
		{ IFS= read -r line <"$f"; } 2>/dev/null || continue
		pid=${line%% *}
		line=${line##*) } # "S PPID ..."
		line=${line#* }
		ppid=${line%% *}
		_TESTHOSTS_KIDS[$ppid]+="$pid "
	done
}

# Kill process trees: the roots and everything they forked. Every process
# is stopped (SIGSTOP) as it is found, so none can fork behind the scan or
# be orphaned (and lose its parent link) before the SIGKILL; children are
# found before their parents die. Waits until every one is gone.
_testhosts_kill_trees() { # pids...
	local p c added pass
	local -A victim=()
	for p in "$@"; do
		[ -n "$p" ] || continue
		victim[$p]=1
		kill -STOP "$p" 2>/dev/null || true
	done
	[ ${#victim[@]} -gt 0 ] || return 0
	for ((pass = 0; pass < 100; pass++)); do
		_testhosts_scan_children
		added=0
		# Closure over this scan, then a new scan to see forks in flight.
		while :; do
			local more=0
			for p in "${!victim[@]}"; do
				for c in ${_TESTHOSTS_KIDS[$p]:-}; do
					if [ -z "${victim[$c]:-}" ]; then
						victim[$c]=1
						kill -STOP "$c" 2>/dev/null || true
						more=1
						added=1
					fi
				done
			done
			[ "$more" = 1 ] || break
		done
		[ "$added" = 1 ] || break
	done
	kill -KILL "${!victim[@]}" 2>/dev/null || true
	local deadline=$((${EPOCHREALTIME/./} + 5000000)) left
	while :; do
		left=
		for p in "${!victim[@]}"; do
			_testhosts_alive "$p" && left+=" $p"
		done
		[ -z "$left" ] && return 0
		if [ "${EPOCHREALTIME/./}" -gt "$deadline" ]; then
			_testhosts_err "processes still alive 5 s after SIGKILL:$left"
			return 1
		fi
		sleep 0.01
	done
}

# The listener pid recorded for a host directory, when that process is
# still that host's sshd (its title shows its -f argument).
_testhosts_recorded_pid() { # hostdir
	local pid='' cmd=''
	{ IFS= read -r pid <"$1/sshd.pid"; } 2>/dev/null || return 0
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	_testhosts_alive "$pid" || return 0
	[ "$(_testhosts_comm "$pid")" = sshd ] || return 0
	{ IFS= read -r -d '' cmd <"/proc/$pid/cmdline"; } 2>/dev/null || true
	[[ $cmd == *"-f $1/sshd_config"* ]] && echo "$pid"
	return 0
}

# Kill the sshds of the host directories matching GLOB under DIR (recorded
# listeners, every sshd with such a log open, and all they forked).
_testhosts_kill_hostdirs() { # absdir glob
	local d=$1 glob=$2 h pid roots=()
	for h in "$d"/$glob; do
		[ -d "$h" ] || continue
		pid=$(_testhosts_recorded_pid "$h")
		[ -z "$pid" ] || roots+=("$pid")
	done
	for pid in $(_testhosts_log_holders "$(_testhosts_glob_escape "$d")/$glob/log"); do
		roots+=("$pid")
	done
	_testhosts_kill_trees "${roots[@]+"${roots[@]}"}" || return 1
	for h in "$d"/$glob; do
		[ -d "$h" ] && rm -f "$h/sshd.pid"
	done
	return 0
}

_testhosts_quickack_on() { # [net] (TESTHOSTS_NET by default)
	local net=${1:-$TESTHOSTS_NET}
	[ "${TESTHOSTS_QUICKACK:-1}" = 1 ] || return 0
	[ -z "$(ip route show table local "$net.0/24" 2>/dev/null)" ] || return 0
	ip route add local "$net.0/24" dev lo table local scope host quickack 1 2>/dev/null || true
}

# Delete the route of NET.0/24 when it is ours and no test host listens on
# NET.x:22 any more.
_testhosts_quickack_off() { # [net] (TESTHOSTS_NET by default)
	local net=${1:-$TESTHOSTS_NET} hex
	[[ $(ip route show table local "$net.0/24" 2>/dev/null) == *"quickack 1"* ]] || return 0
	hex=$(_testhosts_hexaddr "$net.0")
	hex=${hex:2} # the /24 part: "01007F" for 127.0.1
	local -a tcp=()
	mapfile -t tcp </proc/self/net/tcp 2>/dev/null || return 0
	local line
	for line in "${tcp[@]}"; do
		[[ $line =~ ^\ *[0-9]+:\ [0-9A-F]{2}$hex:0016\ 00000000:0000\ 0A\  ]] && return 0
	done
	ip route del local "$net.0/24" dev lo table local 2>/dev/null || true
}

# ---------------------------------------------------------------- testhosts

# testhosts_start DIR N [FIRST]: start hosts FIRST..FIRST+N-1 (FIRST 1 by
# default), host k an sshd on TESTHOSTS_NET.k:22 (127.0.1.k by default);
# returns when every one listens.
testhosts_start() {
	if [ $# -lt 2 ] || [ $# -gt 3 ]; then
		_testhosts_err "usage: testhosts_start DIR N [FIRST]"
		return 2
	fi
	local d n=$2 first=${3:-1} k net=$TESTHOSTS_NET spec=() ready=() known=()
	_testhosts_posint N "$n" || return 2
	_testhosts_posint FIRST "$first" || return 2
	_testhosts_net_ok "$net" || return 2
	if [ $((first + n - 1)) -gt 254 ]; then
		_testhosts_err "hosts $first..$((first + n - 1)): k must stay within 1..254 ($net.k)"
		return 2
	fi
	d=$(_testhosts_abs "$1") || return 1
	_testhosts_client_files "$d" || return 1
	_testhosts_quickack_on "$net"
	for ((k = first; k < first + n; k++)); do
		if [ -n "$(_testhosts_recorded_pid "$d/host$k")" ]; then
			_testhosts_err "host $k of $d is already running (testhosts_revive or testhosts_stop first)"
			return 1
		fi
		spec+=("$d/host$k" "$net.$k:22" - -)
		ready+=("$d/host$k" "$net.$k" "host $k ($net.$k)")
		known+=("$net.$k" "$d/host$k")
	done
	_testhosts_start_hosts "$d" "${spec[@]}" || return 1
	_testhosts_wait_ready "${ready[@]}" || return 1
	_testhosts_known_hosts "$d" "${known[@]}"
}

# testhosts_stop DIR: kill every sshd of DIR's hosts and what they forked;
# returns when all are gone. Idempotent.
testhosts_stop() {
	if [ $# -ne 1 ]; then
		_testhosts_err "usage: testhosts_stop DIR"
		return 2
	fi
	[ -d "$1" ] || return 0
	local d h addr net
	local -A nets=([$TESTHOSTS_NET]=1)
	d=$(cd "$1" && pwd -P) || return 1
	for h in "$d"/host[0-9]*; do
		addr=$(_testhosts_host_addr "$h")
		[ -z "$addr" ] || nets[${addr%.*}]=1
	done
	_testhosts_kill_hostdirs "$d" 'host[0-9]*' || return 1
	for net in "${!nets[@]}"; do
		_testhosts_quickack_off "$net"
	done
	return 0
}

# testhosts_kill DIR K: host K dies (listener and every session killed;
# established sessions drop, new connections are refused).
testhosts_kill() {
	if [ $# -ne 2 ]; then
		_testhosts_err "usage: testhosts_kill DIR K"
		return 2
	fi
	_testhosts_posint K "$2" || return 2
	local d
	d=$(cd "$1" && pwd -P) || return 1
	if [ ! -f "$d/host$2/sshd_config" ]; then
		_testhosts_err "$d has no host $2"
		return 1
	fi
	_testhosts_kill_hostdirs "$d" "host$2"
}

# testhosts_revive DIR K: start host K again (same key and config); returns
# when it accepts connections. A host that is running is left alone.
testhosts_revive() {
	if [ $# -ne 2 ]; then
		_testhosts_err "usage: testhosts_revive DIR K"
		return 2
	fi
	_testhosts_posint K "$2" || return 2
	local d k=$2 addr
	d=$(cd "$1" && pwd -P) || return 1
	if [ ! -f "$d/host$k/sshd_config" ]; then
		_testhosts_err "$d has no host $k"
		return 1
	fi
	[ -z "$(_testhosts_recorded_pid "$d/host$k")" ] || return 0
	addr=$(_testhosts_host_addr "$d/host$k")
	[ -n "$addr" ] || addr=$TESTHOSTS_NET.$k
	_testhosts_quickack_on "${addr%.*}"
	if ! _testhosts_launch "$d/host$k"; then
		_testhosts_err "host $k: sshd did not start; its log:"
		_testhosts_log_tail "$d/host$k"
		return 1
	fi
	_testhosts_wait_ready "$d/host$k" "$addr" "host $k ($addr)"
}

# testhosts_move DIR K NEWK: host K is killed (as testhosts_kill) and comes
# back as host NEWK: its directory renamed DIR/host<NEWK> (host key and
# authorized_keys kept), its sshd_config rewritten for the address NEWK of
# the /24 it was on, started; known_hosts loses the old address and gets the
# new one. Returns when it accepts connections. NEWK = K restarts the host
# in place; otherwise DIR/host<NEWK> must not exist.
testhosts_move() {
	if [ $# -ne 3 ]; then
		_testhosts_err "usage: testhosts_move DIR K NEWK"
		return 2
	fi
	_testhosts_posint K "$2" || return 2
	_testhosts_posint NEWK "$3" || return 2
	local d k=$2 nk=$3 old new h
	if [ "$nk" -gt 254 ]; then
		_testhosts_err "NEWK must stay within 1..254"
		return 2
	fi
	d=$(cd "$1" && pwd -P) || return 1
	if [ ! -f "$d/host$k/sshd_config" ]; then
		_testhosts_err "$d has no host $k"
		return 1
	fi
	if [ "$nk" != "$k" ] && [ -e "$d/host$nk" ]; then
		_testhosts_err "host $nk of $d exists already"
		return 1
	fi
	old=$(_testhosts_host_addr "$d/host$k")
	[ -n "$old" ] || old=$TESTHOSTS_NET.$k
	new=${old%.*}.$nk
	_testhosts_kill_hostdirs "$d" "host$k" || return 1
	if [ "$nk" != "$k" ]; then
		mv "$d/host$k" "$d/host$nk" || return 1
	fi
	h=$d/host$nk
	_testhosts_quickack_on "${new%.*}"
	_testhosts_host_files "$d" "$h" "$new:22" || return 1
	if ! _testhosts_launch "$h"; then
		_testhosts_err "host $nk: sshd did not start; its log:"
		_testhosts_log_tail "$h"
		return 1
	fi
	_testhosts_wait_ready "$h" "$new" "host $nk ($new)" || return 1
	_TESTHOSTS_KH_DROP=$old _testhosts_known_hosts "$d" "$new" "$h"
}

# testhosts_init DIR: the client key pair, authorized_keys, known_hosts and
# ssh_config of DIR, and no host (for callers that then start hosts of DIR
# from parallel jobs).
testhosts_init() {
	if [ $# -ne 1 ]; then
		_testhosts_err "usage: testhosts_init DIR"
		return 2
	fi
	local d
	d=$(_testhosts_abs "$1") || return 1
	_testhosts_client_files "$d"
}

# testhosts_pids DIR: the pids of every live sshd of DIR (listeners and
# connection children, test hosts and namespace hosts), one per line.
testhosts_pids() {
	if [ $# -ne 1 ]; then
		_testhosts_err "usage: testhosts_pids DIR"
		return 2
	fi
	[ -d "$1" ] || return 0
	local d h pid
	local -A seen=()
	d=$(cd "$1" && pwd -P) || return 1
	for h in "$d"/host[0-9]* "$d"/netns/*; do
		[ -d "$h" ] || continue
		pid=$(_testhosts_recorded_pid "$h")
		[ -n "$pid" ] && seen[$pid]=1
	done
	for pid in $(_testhosts_log_holders "$(_testhosts_glob_escape "$d")/*/log"); do
		seen[$pid]=1
	done
	[ ${#seen[@]} -eq 0 ] || printf '%s\n' "${!seen[@]}" | sort -n
}

# ---------------------------------------------------------------- testnet

# testnet_supported: 0 when network namespaces can be created here (else a
# reason on stderr).
testnet_supported() {
	local ns=cclfs-probe-$$-$RANDOM err
	if ! command -v ip >/dev/null || ! command -v nsenter >/dev/null || ! command -v unshare >/dev/null; then
		echo "ip, nsenter or unshare is missing" >&2
		return 1
	fi
	if ! err=$(ip netns add "$ns" 2>&1); then
		echo "ip netns add is not permitted here: $err" >&2
		return 1
	fi
	ip netns del "$ns" 2>/dev/null || true
	return 0
}

_testnet_ip() { # netns args... (a failure is reported)
	local ns=$1 err
	shift
	if ! err=$(ip -n "$ns" "$@" 2>&1); then
		_testhosts_err "ip -n $ns $*: $err"
		return 1
	fi
}

_testnet_add_ns() { # absdir name
	local err
	if ! err=$(ip netns add "$2" 2>&1); then
		_testhosts_err "ip netns add $2: $err"
		return 1
	fi
	echo "$2" >>"$1/netns.list"
	_testnet_ip "$2" link set lo up
}

# Connect to ADDRESS:22 from inside namespace NS; prints the error, if any.
_testnet_probe() { # ns address
	# shellcheck disable=SC2016 # bash -c expands it
	timeout 3 nsenter --net="/run/netns/$1" bash -c 'exec 3<>"/dev/tcp/$1/22"' probe "$2" 2>&1
}

# testnet_start DIR NWORKERS: a client namespace joined to a manager
# namespace (TESTNET_CLIENT_ADDR/24), the manager bridged to NWORKERS worker
# namespaces on another subnet (TESTNET_INNER_PREFIX.0/24), no route between
# the client and the workers; an sshd in the manager and in every worker.
# Sets TESTNET_CLIENT_NS, TESTNET_MANAGER_NS, TESTNET_WORKER_NS=(...),
# TESTNET_MANAGER (the manager's address seen from the client),
# TESTNET_MANAGER_INNER (seen from the workers), TESTNET_WORKERS=(...) and
# TESTNET_WORKER_1.. (the workers' addresses seen from the manager), and
# writes them to DIR/testnet.env. Run the client side with
# `nsenter --net=/run/netns/$TESTNET_CLIENT_NS COMMAND`.
testnet_start() {
	if [ $# -ne 2 ]; then
		_testhosts_err "usage: testnet_start DIR NWORKERS"
		return 2
	fi
	local d n=$2 id k ns addr msg spec=() ready=() known=()
	_testhosts_posint NWORKERS "$n" || return 2
	if [ "$n" -gt 150 ]; then
		_testhosts_err "NWORKERS: at most 150"
		return 2
	fi
	d=$(_testhosts_abs "$1") || return 1
	if [ -s "$d/netns.list" ]; then
		_testhosts_err "$d already has a network (testnet_stop first)"
		return 1
	fi
	_testhosts_client_files "$d" || return 1
	mkdir -p "$d/netns" || return 1
	: >"$d/netns.list"
	# Names unique per directory and process: parallel runs do not collide.
	id=$(printf '%s' "$d" | cksum)
	id=${id%% *}-$$
	TESTNET_CLIENT_NS=cclfs-$id-client
	TESTNET_MANAGER_NS=cclfs-$id-manager
	TESTNET_WORKER_NS=()
	TESTNET_CLIENT=$TESTNET_CLIENT_ADDR
	TESTNET_MANAGER=$TESTNET_MANAGER_ADDR
	TESTNET_MANAGER_INNER=$TESTNET_MANAGER_INNER_ADDR
	TESTNET_WORKERS=()
	for ((k = 1; k <= n; k++)); do
		TESTNET_WORKER_NS+=("cclfs-$id-worker$k")
		TESTNET_WORKERS+=("$TESTNET_INNER_PREFIX.$((TESTNET_WORKER_BASE + k))")
		printf -v "TESTNET_WORKER_$k" '%s' "${TESTNET_WORKERS[k - 1]}"
	done
	local c=$TESTNET_CLIENT_NS m=$TESTNET_MANAGER_NS

	# Client <-> manager: one veth pair, eth0 at both ends.
	_testnet_add_ns "$d" "$c" || return 1
	_testnet_add_ns "$d" "$m" || return 1
	_testnet_ip "$m" link add eth0 type veth peer name eth0 netns "$c" || return 1
	_testnet_ip "$c" addr add "$TESTNET_CLIENT_ADDR/24" dev eth0 || return 1
	_testnet_ip "$m" addr add "$TESTNET_MANAGER_ADDR/24" dev eth0 || return 1
	_testnet_ip "$c" link set eth0 up || return 1
	_testnet_ip "$m" link set eth0 up || return 1
	# Manager <-> workers: a bridge in the manager, a veth pair per worker.
	_testnet_ip "$m" link add br0 type bridge || return 1
	_testnet_ip "$m" addr add "$TESTNET_MANAGER_INNER_ADDR/24" dev br0 || return 1
	_testnet_ip "$m" link set br0 up || return 1
	for ((k = 1; k <= n; k++)); do
		ns=${TESTNET_WORKER_NS[k - 1]}
		addr=${TESTNET_WORKERS[k - 1]}
		_testnet_add_ns "$d" "$ns" || return 1
		_testnet_ip "$m" link add "vw$k" type veth peer name eth0 netns "$ns" || return 1
		_testnet_ip "$m" link set "vw$k" master br0 || return 1
		_testnet_ip "$m" link set "vw$k" up || return 1
		_testnet_ip "$ns" addr add "$addr/24" dev eth0 || return 1
		_testnet_ip "$ns" link set eth0 up || return 1
		_testnet_ip "$ns" route replace "$TESTNET_INNER_PREFIX.0/24" dev eth0 proto kernel \
			scope link src "$addr" quickack 1 || return 1
	done
	# No delayed ACKs on these links (see the header); no default routes
	# anywhere and no forwarding in the manager: the client and the workers
	# cannot reach each other.
	_testnet_ip "$c" route replace "${TESTNET_CLIENT_ADDR%.*}.0/24" dev eth0 proto kernel \
		scope link src "$TESTNET_CLIENT_ADDR" quickack 1 || return 1
	_testnet_ip "$m" route replace "${TESTNET_MANAGER_ADDR%.*}.0/24" dev eth0 proto kernel \
		scope link src "$TESTNET_MANAGER_ADDR" quickack 1 || return 1
	_testnet_ip "$m" route replace "$TESTNET_INNER_PREFIX.0/24" dev br0 proto kernel \
		scope link src "$TESTNET_MANAGER_INNER_ADDR" quickack 1 || return 1

	spec+=("$d/netns/manager" "0.0.0.0:22" "$m" manager)
	ready+=("$d/netns/manager" 0.0.0.0 "manager ($m)")
	known+=("$TESTNET_MANAGER" "$d/netns/manager")
	for ((k = 1; k <= n; k++)); do
		spec+=("$d/netns/worker$k" "0.0.0.0:22" "${TESTNET_WORKER_NS[k - 1]}" "worker$k")
		ready+=("$d/netns/worker$k" 0.0.0.0 "worker $k (${TESTNET_WORKER_NS[k - 1]})")
		known+=("${TESTNET_WORKERS[k - 1]}" "$d/netns/worker$k")
	done
	_testhosts_start_hosts "$d" "${spec[@]}" || return 1
	_testhosts_wait_ready "${ready[@]}" || return 1
	_testhosts_known_hosts "$d" "${known[@]}" || return 1

	# Self-check, every connection between namespaces of this network.
	if ! msg=$(_testnet_probe "$c" "$TESTNET_MANAGER"); then
		_testhosts_err "self-check: the client cannot reach the manager at $TESTNET_MANAGER:22: $msg"
		return 1
	fi
	for ((k = 1; k <= n; k++)); do
		addr=${TESTNET_WORKERS[k - 1]}
		if ! msg=$(_testnet_probe "$m" "$addr"); then
			_testhosts_err "self-check: the manager cannot reach worker $k at $addr:22: $msg"
			return 1
		fi
		if msg=$(_testnet_probe "$c" "$addr"); then
			_testhosts_err "self-check: the client reaches worker $k at $addr:22; it must not"
			return 1
		fi
		if ip -n "$c" route get "$addr" >/dev/null 2>&1; then
			_testhosts_err "self-check: the client has a route to worker $k ($addr)"
			return 1
		fi
		if ip -n "${TESTNET_WORKER_NS[k - 1]}" route get "$TESTNET_CLIENT_ADDR" >/dev/null 2>&1; then
			_testhosts_err "self-check: worker $k has a route to the client ($TESTNET_CLIENT_ADDR)"
			return 1
		fi
	done

	{
		echo "# The namespace network of $d (testnet_start); source it from bash."
		printf 'TESTNET_DIR=%q\n' "$d"
		printf 'TESTNET_CLIENT_NS=%q\n' "$TESTNET_CLIENT_NS"
		printf 'TESTNET_MANAGER_NS=%q\n' "$TESTNET_MANAGER_NS"
		printf 'TESTNET_WORKER_NS=(%s)\n' "${TESTNET_WORKER_NS[*]}"
		printf 'TESTNET_CLIENT=%q\n' "$TESTNET_CLIENT"
		printf 'TESTNET_MANAGER=%q\n' "$TESTNET_MANAGER"
		printf 'TESTNET_MANAGER_INNER=%q\n' "$TESTNET_MANAGER_INNER"
		printf 'TESTNET_WORKERS=(%s)\n' "${TESTNET_WORKERS[*]}"
		for ((k = 1; k <= n; k++)); do
			printf 'TESTNET_WORKER_%d=%q\n' "$k" "${TESTNET_WORKERS[k - 1]}"
		done
	} >"$d/testnet.env"
}

# testnet_stop DIR: kill the namespace sshds of DIR (and what they forked),
# delete every namespace in DIR/netns.list. Idempotent; fine after a start
# that failed half way.
testnet_stop() {
	if [ $# -ne 1 ]; then
		_testhosts_err "usage: testnet_stop DIR"
		return 2
	fi
	[ -d "$1" ] || return 0
	local d ns rc=0
	d=$(cd "$1" && pwd -P) || return 1
	if [ -d "$d/netns" ]; then
		_testhosts_kill_hostdirs "$d" 'netns/*' || rc=1
	fi
	if [ -f "$d/netns.list" ]; then
		while IFS= read -r ns; do
			[ -n "$ns" ] || continue
			if [ -e "/run/netns/$ns" ] && ! ip netns del "$ns" 2>/dev/null; then
				_testhosts_err "ip netns del $ns failed"
				rc=1
			fi
		done <"$d/netns.list"
		[ "$rc" = 0 ] && rm -f "$d/netns.list"
	fi
	rm -f "$d/testnet.env"
	return "$rc"
}
