#!/usr/bin/env bats
# The hosts provider against real OpenSSH test hosts (127.0.1.101 and up):
# deploy, exec, files/ over SFTP, interrupt/resume/restart/terminate, host
# keys, authentication, timeouts, a dying sshd, remounts, and ManagerWorkers
# whose workers only the manager reaches (network namespaces).

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

FIRST=101 # host k of a test listens on 127.0.1.(FIRST + k)
# Each host has a login directory of its own (HOSTS/hostK/login, on /root
# for its sshd), as a machine has: what the nodes keep there goes with
# TESTDIR, and never meets another suite's clusters of the same name.
export TESTHOSTS_OWN_LOGIN=1

# The login directory of host k, as this machine sees it.
login() {
	echo "$HOSTS/host$((FIRST + $1))/login"
}

# A test with N hosts h0..h(N-1) in cclfs.conf; more [hosts] lines after N.
hosts_setup() {
	local n=$1 k
	shift
	cclfs_setup --no-mount
	HOSTS=$TESTDIR/hosts
	testhosts_start "$HOSTS" "$n" "$FIRST"
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$HOSTS/id_ed25519\""
		echo "known_hosts = \"$HOSTS/known_hosts\""
		printf '%s\n' "$@"
		for ((k = 0; k < n; k++)); do
			echo "[hosts.h$k]"
			echo "address = \"127.0.1.$((FIRST + k))\""
			[ -z "${HOST_EXTRA:-}" ] || echo "$HOST_EXTRA"
		done
	} >"$TESTDIR/cclfs.conf"
	# shellcheck disable=SC2086
	cclfs_mount -o config="$TESTDIR/cclfs.conf" ${MOUNT_EXTRA:-}
}

teardown() {
	if [ -n "${AGENT:-}" ]; then
		kill "$AGENT" 2>/dev/null || true
	fi
	if [ -n "${STOPPED:-}" ]; then
		# shellcheck disable=SC2086
		kill -CONT $STOPPED 2>/dev/null || true
	fi
	if [ -n "${HOSTS:-}" ]; then
		testhosts_stop "$HOSTS" || true
	fi
	if [ -n "${NETDIR:-}" ]; then
		testnet_stop "$NETDIR" || true
	fi
	cclfs_teardown
	if [ -n "${NONROOT:-}" ]; then
		# its sessions' processes first: userdel refuses a user in use
		pkill -KILL -u "$NONROOT" || true
		userdel -f "$NONROOT" || echo "user $NONROOT left behind" >&2
		rm -rf "/tmp/$NONROOT"
	fi
}

# Unmount and mount again with the same state and cclfs.conf.
remount() {
	cd "$TESTDIR"
	cclfs_unmount
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
}

# deploy CONTRACT NAME COUNT [CLUSTER_TYPE]: a hosts cluster, running.
deploy() {
	local c=$MNT/contracts/$1
	[ -d "$c" ] || mkdir "$c"
	echo hosts >"$c/node_provider"
	echo "$3" >"$c/node_count"
	[ -z "${4:-}" ] || echo "$4" >"$c/cluster_type"
	echo "$2" >"$c/deploy"
	wait_state "$2" running
}

# The pids whose environment holds marker $1 (what cclfs started).
marked() {
	grep -lzxF "$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

@test "the tutorial on three hosts: exec per node and on all, outputs apart" {
	hosts_setup 3
	cd "$MNT"
	cat catalog/hosts/host/node_provider | grep -qx hosts
	deploy c x 3
	[ "$(ls clusters/x/nodes | tr '\n' ' ')" = "0 1 2 " ]
	grep -qx 'address: 127.0.1.102' clusters/x/nodes/1/status
	grep -qx 'instance_id: h1' clusters/x/nodes/1/status
	grep -qx 'connection: reachable' clusters/x/nodes/1/status
	echo 'echo out; echo err >&2' >clusters/x/nodes/0/exec
	[ "$(cat clusters/x/nodes/0/stdout)" = out ]
	[ "$(cat clusters/x/nodes/0/stderr)" = err ]
	[ "$(cat clusters/x/nodes/0/exit_status)" = 0 ]
	# Each command runs in the node's working directory, on its address.
	exec 5<>clusters/x/exec
	echo 'echo $CCLFS_NODE $PWD' >&5
	run cat <&5
	exec 5>&-
	[ "${#lines[@]}" -eq 3 ]
	[ "${lines[0]}" = "0: 0 /root/.cclfs/x/0" ]
	[ "${lines[2]}" = "2: 2 /root/.cclfs/x/2" ]
	# The address each node's command saw is its own host's.
	echo 'echo $SSH_CONNECTION' >clusters/x/exec
	for k in 0 1 2; do
		grep -q "^$k: .* 127.0.1.$((FIRST + k)) 22\$" clusters/x/exec
	done
	# A failing command: EIO, its status kept, the reason in error.
	run_shell 'echo "exit 3" > clusters/x/nodes/2/exec'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Input/output error"* ]]
	[ "$(cat clusters/x/nodes/2/exit_status)" = 3 ]
	grep -q 'nodes/2/exec: "exit 3" exited with status 3' clusters/x/error
	# A signal is reported as 128 + its number.
	run_shell 'echo "kill -9 \$\$" > clusters/x/nodes/1/exec'
	[ "$status" -ne 0 ]
	[ "$(cat clusters/x/nodes/1/exit_status)" = 137 ]
	# Ten megabytes of output are streamed to the node's stdout file.
	echo 'head -c 10485760 /dev/zero' >clusters/x/nodes/0/exec
	[ "$(stat -c %s clusters/x/nodes/0/stdout)" = 10485760 ]
	echo true >clusters/x/exec
	[ "$(cat clusters/x/error)" = "" ]
	echo terminated >clusters/x/state
	wait_state x terminated
	[ ! -e "$(login 0)/.cclfs/x" ]
	[ ! -e "$(login 1)/.cclfs/x" ]
}

@test "files/ is the node's working directory over SFTP, 0700 until a command opens it" {
	hosts_setup 2
	cd "$MNT"
	deploy c x 2
	# the node's directory is made 0700, and files/ shows its mode
	[ "$(stat -c %a "$(login 1)"/.cclfs/x/1)" = 700 ]
	[ "$(stat -c %a clusters/x/nodes/1/files)" = 700 ]
	echo 'chmod 755 .' >clusters/x/nodes/1/exec
	[ "$(stat -c %a "$(login 1)"/.cclfs/x/1)" = 755 ]
	[ "$(stat -c %a clusters/x/nodes/1/files)" = 755 ]
	mkdir -p "$TESTDIR/data/sub"
	seq 1 200000 >"$TESTDIR/data/big.txt"
	head -c 3000000 /dev/urandom >"$TESTDIR/data/sub/blob"
	cp -r "$TESTDIR/data" clusters/x/nodes/1/files/
	cmp "$TESTDIR/data/big.txt" "$(login 1)"/.cclfs/x/1/data/big.txt
	cmp "$TESTDIR/data/sub/blob" "$(login 1)"/.cclfs/x/1/data/sub/blob
	# Sizes and times come from the node.
	touch -d '2001-02-03 04:05:06' "$(login 1)"/.cclfs/x/1/data/big.txt
	[ "$(stat -c '%s %Y' clusters/x/nodes/1/files/data/big.txt)" = \
		"$(stat -c '%s %Y' "$(login 1)"/.cclfs/x/1/data/big.txt)" ]
	[ "$(ls clusters/x/nodes/1/files/data | tr '\n' ' ')" = "big.txt sub " ]
	# cp back downloads.
	cp -r clusters/x/nodes/1/files/data "$TESTDIR/back"
	cmp "$TESTDIR/data/big.txt" "$TESTDIR/back/big.txt"
	cmp "$TESTDIR/data/sub/blob" "$TESTDIR/back/sub/blob"
	# A command sees what was uploaded, and files/ what it wrote.
	echo 'wc -l < data/big.txt > count' >clusters/x/nodes/1/exec
	[ "$(cat clusters/x/nodes/1/files/count)" = 200000 ]
	# Write, append, rename (also over a file), mkdir, remove.
	echo one >clusters/x/nodes/1/files/f
	echo two >>clusters/x/nodes/1/files/f
	[ "$(cat "$(login 1)"/.cclfs/x/1/f)" = "$(printf 'one\ntwo')" ]
	mv clusters/x/nodes/1/files/f clusters/x/nodes/1/files/g
	mv clusters/x/nodes/1/files/g clusters/x/nodes/1/files/count
	[ "$(cat clusters/x/nodes/1/files/count)" = "$(printf 'one\ntwo')" ]
	[ ! -e "$(login 1)"/.cclfs/x/1/g ]
	mkdir clusters/x/nodes/1/files/d
	[ -d "$(login 1)"/.cclfs/x/1/d ]
	run rmdir clusters/x/nodes/1/files/data
	[ "$status" -ne 0 ]
	[[ "$output" == *"not empty"* ]]
	rm -r clusters/x/nodes/1/files/data clusters/x/nodes/1/files/d
	[ "$(ls "$(login 1)"/.cclfs/x/1)" = count ]
	run cat clusters/x/nodes/1/files/missing
	[[ "$output" == *"No such file"* ]]
	# Node 0 has a working directory of its own.
	[ -z "$(ls clusters/x/nodes/0/files)" ]
}

@test "interrupt, resume, restart and terminate act on what cclfs started" {
	hosts_setup 2
	cd "$MNT"
	deploy c x 2
	echo 'sleep 300 >/dev/null 2>&1 & echo started' >clusters/x/nodes/0/exec
	echo 'sleep 301 >/dev/null 2>&1 &' >clusters/x/nodes/1/exec
	p0=$(marked CCLFS_INSTANCE=x/0)
	p1=$(marked CCLFS_INSTANCE=x/1)
	[ -n "$p0" ] && [ -n "$p1" ]
	echo interrupted >clusters/x/state
	wait_state x interrupted
	[ "$(awk '{print $3}' /proc/$p0/stat)" = T ]
	[ "$(awk '{print $3}' /proc/$p1/stat)" = T ]
	run_shell 'echo true > clusters/x/exec'
	[[ "$output" == *"Device or resource busy"* ]]
	echo resumed >clusters/x/state
	wait_state x running
	[ "$(awk '{print $3}' /proc/$p0/stat)" = S ]
	touch clusters/x/restart
	[ -z "$(marked CCLFS_INSTANCE=x/0)" ]
	[ -z "$(marked CCLFS_INSTANCE=x/1)" ]
	echo 'sleep 302 >/dev/null 2>&1 &' >clusters/x/exec
	[ -n "$(marked CCLFS_INSTANCE=x/1)" ]
	echo terminated >clusters/x/state
	wait_state x terminated
	[ -z "$(marked CCLFS_INSTANCE=x/0)" ]
	[ -z "$(marked CCLFS_INSTANCE=x/1)" ]
	[ ! -e "$(login 0)/.cclfs/x" ]
	[ ! -e "$(login 1)/.cclfs/x" ]
	run grep -c connection: clusters/x/nodes/0/status
	[ "$output" = 0 ]
}

@test "a host is never held by two live clusters" {
	hosts_setup 3
	cd "$MNT"
	deploy c a 2
	mkdir contracts/d
	echo hosts >contracts/d/node_provider
	echo 2 >contracts/d/node_count
	echo b >contracts/d/deploy
	wait_state b failed
	grep -q 'no free host of type host' clusters/b/error
	# What b took is freed by its terminate; a's hosts stay a's.
	echo terminated >clusters/b/state
	wait_state b terminated
	echo 1 >contracts/d/node_count
	echo b1 >contracts/d/deploy
	wait_state b1 running
	held=$(cat clusters/a/nodes/0/status clusters/a/nodes/1/status \
		clusters/b1/nodes/0/status | grep instance_id | sort -u | wc -l)
	[ "$held" = 3 ]
	# After a remount the holds are the same.
	remount
	echo b2 >contracts/d/deploy
	wait_state b2 failed
	echo terminated >clusters/a/state
	wait_state a terminated
	echo b3 >contracts/d/deploy
	wait_state b3 running
	# The first exec after the remount connects again.
	echo 'echo again' >clusters/b1/exec
	[ "$(cat clusters/b1/exec)" = "0: again" ]
}

@test "host keys: unknown refused, recorded when asked, a changed one refused" {
	hosts_setup 1
	cd "$MNT"
	# Without the test's known_hosts the key is unknown.
	sed -i '/^known_hosts/d' "$TESTDIR/cclfs.conf"
	remount
	mkdir contracts/c
	echo hosts >contracts/c/node_provider
	echo x >contracts/c/deploy
	wait_state x failed
	grep -q 'host key of 127.0.1.101 port 22 (SHA256:.*) is unknown' clusters/x/error
	grep -q 'ssh-keyscan -p 22 127.0.1.101' clusters/x/error
	echo terminated >clusters/x/state
	wait_state x terminated
	# accept_new_host_keys records the first key in the state directory.
	sed -i 's/^\[hosts\]$/[hosts]\naccept_new_host_keys = "yes"/' \
		"$TESTDIR/cclfs.conf"
	remount
	echo y >contracts/c/deploy
	wait_state y running
	grep -q '^127.0.1.101 ssh-ed25519 ' "$STATE/known_hosts"
	echo true >clusters/y/exec
	# The machine is replaced (new host key): refused, never accepted.
	testhosts_kill "$HOSTS" "$FIRST"
	rm -f "$HOSTS/host$FIRST"/ssh_host_ed25519_key*
	ssh-keygen -q -t ed25519 -N '' -f "$HOSTS/host$FIRST/ssh_host_ed25519_key"
	testhosts_revive "$HOSTS" "$FIRST"
	run_shell 'echo true > clusters/y/exec'
	[ "$status" -ne 0 ]
	grep -q 'is not the one recorded in .*known_hosts: refusing' clusters/y/error
	grep -q 'connection: unreachable: the host key' clusters/y/nodes/0/status
}

@test "authentication: ssh-agent, a key file, and a clear refusal" {
	hosts_setup 1
	cd "$MNT"
	# No key in cclfs.conf: ssh-agent's keys are used.
	sed -i '/^keyfile/d' "$TESTDIR/cclfs.conf"
	# (fd 3 is bats' own: the agent must not keep it open)
	eval "$(ssh-agent -s 3>&-)" >/dev/null
	AGENT=$SSH_AGENT_PID
	ssh-add -q "$HOSTS/id_ed25519"
	remount
	mkdir contracts/c
	echo hosts >contracts/c/node_provider
	echo a >contracts/c/deploy
	wait_state a running
	echo terminated >clusters/a/state
	wait_state a terminated
	kill "$AGENT"
	# Without agent: the contract's key file; a wrong one is refused.
	unset SSH_AUTH_SOCK SSH_AGENT_PID
	remount
	ssh-keygen -q -t ed25519 -N '' -f "$TESTDIR/wrong"
	echo "$TESTDIR/wrong" >contracts/c/config/keyfile
	echo b >contracts/c/deploy
	wait_state b failed
	grep -q "refused the login as root (tried the key file $TESTDIR/wrong" clusters/b/error
	echo terminated >clusters/b/state
	wait_state b terminated
	echo "" >contracts/c/config/keyfile
	echo "-o BatchMode=yes -i $HOSTS/id_ed25519" >contracts/c/config/sshflags
	echo c >contracts/c/deploy
	wait_state c running
	echo terminated >clusters/c/state
	wait_state c terminated
	echo cclfs-nouser >contracts/c/config/user
	echo d >contracts/c/deploy
	wait_state d failed
	grep -q 'refused the login as cclfs-nouser' clusters/d/error
}

@test "a dying sshd: that node unreachable, the others work, then it comes back" {
	hosts_setup 3
	cd "$MNT"
	deploy c x 3
	echo true >clusters/x/exec
	testhosts_kill "$HOSTS" $((FIRST + 1))
	run_shell 'echo hostname > clusters/x/nodes/1/exec'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Input/output error"* ]]
	grep -q 'nodes/1/exec: "hostname" could not be run: cannot connect to 127.0.1.102 port 22: Connection refused' clusters/x/error
	grep -q '^connection: unreachable: cannot connect to 127.0.1.102 port 22: Connection refused$' clusters/x/nodes/1/status
	grep -qx 'connection: reachable' clusters/x/nodes/0/status
	run_shell 'echo "echo ok" > clusters/x/exec'
	[ "$status" -ne 0 ]
	[ "$(grep -c ': ok$' clusters/x/exec)" = 2 ]
	grep -q 'failed on 1 of 3 nodes: 1 (cannot connect' clusters/x/error
	echo 'echo ok' >clusters/x/nodes/2/exec
	testhosts_revive "$HOSTS" $((FIRST + 1))
	echo 'echo back' >clusters/x/nodes/1/exec
	[ "$(cat clusters/x/nodes/1/stdout)" = back ]
	grep -qx 'connection: reachable' clusters/x/nodes/1/status
	[ "$(cat clusters/x/error)" = "" ]
}

@test "command timeout and Ctrl-C stop the remote command" {
	hosts_setup 1 'command_timeout = "1"'
	cd "$MNT"
	deploy c x 1
	start=$(date +%s%N)
	run_shell 'echo "sleep 30" > clusters/x/nodes/0/exec'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Connection timed out"* ]]
	[ $(($(date +%s%N) - start)) -lt 10000000000 ]
	grep -q 'did not finish within 1 s' clusters/x/error
	sleep 0.3
	[ -z "$(marked CCLFS_INSTANCE=x/0)" ]
	# Ctrl-C: the writer gets EINTR quickly and the command is killed.
	sed -i 's/^command_timeout.*$//' "$TESTDIR/cclfs.conf"
	remount
	# (a background job starts with SIGINT ignored: python takes it back,
	# as a shell in the foreground has it)
	python3 -c "import os, signal
signal.signal(signal.SIGINT, signal.default_int_handler)
fd = os.open('clusters/x/nodes/0/exec', os.O_WRONLY)
os.write(fd, b'sleep 40\\n')" 2>"$TESTDIR/w.err" &
	writer=$!
	for _ in $(seq 1 100); do
		[ -n "$(marked CCLFS_INSTANCE=x/0)" ] && break
		sleep 0.05
	done
	[ -n "$(marked CCLFS_INSTANCE=x/0)" ]
	start=$(date +%s%N)
	kill -INT "$writer"
	wait "$writer" || true
	[ $(($(date +%s%N) - start)) -lt 5000000000 ]
	grep -q KeyboardInterrupt "$TESTDIR/w.err"
	grep -q 'nodes/0/exec: the command was interrupted' clusters/x/error
	for _ in $(seq 1 40); do
		[ -z "$(marked CCLFS_INSTANCE=x/0)" ] && break
		sleep 0.05
	done
	[ -z "$(marked CCLFS_INSTANCE=x/0)" ]
}

@test "cclfs.conf mistakes in [hosts] stop the mount with the file and key" {
	cclfs_setup --no-mount
	printf '[hosts.a]\nport = "22"\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -f -o config="$TESTDIR/bad.conf",statedir="$STATE"
	[ "$status" -ne 0 ]
	[[ "$output" == *"bad.conf: [hosts.a] has no address"* ]]
	printf '[hosts.a]\naddress = "h"\nport = "99999"\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -f -o config="$TESTDIR/bad.conf",statedir="$STATE"
	[[ "$output" == *'[hosts.a] port: "99999" is not valid'* ]]
	printf '[hosts.a]\naddress = "h"\ncolor = "red"\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -f -o config="$TESTDIR/bad.conf",statedir="$STATE"
	[[ "$output" == *'[hosts.a] has no key "color"'* ]]
	printf '[hosts.a b]\naddress = "h"\n' >"$TESTDIR/bad.conf"
	run "$CCLFS_BIN" "$MNT" -f -o config="$TESTDIR/bad.conf",statedir="$STATE"
	[[ "$output" == *"a host name is 1 to 64 letters"* ]]
	! cclfs_is_mounted
}

@test "host types and features make catalog types contracts resolve to" {
	cclfs_setup --no-mount
	cat >"$TESTDIR/cclfs.conf" <<-EOF
		[hosts.a]
		address = "127.0.1.250"
		type = "big"
		vcpus = "64"
		memory = "512G"
		[hosts.b]
		address = "127.0.1.251"
		type = "big"
		vcpus = "32"
		memory = "1T"
		[hosts.c]
		address = "127.0.1.252"
		vcpus = "4"
	EOF
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	[ "$(ls catalog/hosts | tr '\n' ' ')" = "big host " ]
	[ "$(cat catalog/hosts/big/node_vcpus_count)" = 32 ]
	[ "$(cat catalog/hosts/big/node_memory_size)" = 512G ]
	mkdir contracts/c
	echo hosts >contracts/c/node_provider
	echo 'atleast 16' >contracts/c/node_vcpus_count
	touch contracts/c/resolve
	[ "$(cat contracts/c/resolution)" = "$(printf 'node\thosts\tbig\t0\t-\t-\ton-demand')" ]
	echo 'atleast 64' >contracts/c/node_vcpus_count
	run_shell 'touch contracts/c/resolve'
	[ "$status" -ne 0 ]
}

# cclfs.conf for the test network: the manager as host m and N workers
# w1..wN (N 0: m an ordinary host), more [hosts] lines after N.
netns_conf() {
	local n=$1 k
	shift
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$NETDIR/id_ed25519\""
		echo "known_hosts = \"$NETDIR/known_hosts\""
		printf '%s\n' "$@"
		echo '[hosts.m]'
		echo "address = \"$TESTNET_MANAGER\""
		[ "$n" -eq 0 ] || echo 'type = "manager"'
		for ((k = 1; k <= n; k++)); do
			echo "[hosts.w$k]"
			echo "address = \"${TESTNET_WORKERS[$((k - 1))]}\""
			echo 'type = "worker"'
		done
	} >"$TESTDIR/cclfs.conf"
}

# deploy_mw N: cluster mw of the manager and N workers, running.
deploy_mw() {
	mkdir contracts/mw
	echo ManagerWorkers >contracts/mw/cluster_type
	echo "$1" >contracts/mw/node_count
	echo manager >contracts/mw/manager/node_machinetype
	echo worker >contracts/mw/worker/node_machinetype
	echo mw >contracts/mw/deploy
	wait_state mw running
}

@test "ManagerWorkers: workers are reached only through the manager" {
	cclfs_netns_setup 3
	netns_conf 3
	# The daemon lives in the client namespace; its mount is visible here.
	cclfs_mount_in_netns "$TESTNET_CLIENT_NS" -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	deploy_mw 3
	[ "$(ls clusters/mw/nodes | tr '\n' ' ')" = "0 1 2 manager " ]
	echo hostname >clusters/mw/nodes/manager/exec
	[ "$(cat clusters/mw/nodes/manager/stdout)" = manager ]
	for k in 0 1 2; do
		echo hostname >clusters/mw/nodes/$k/exec
		[ "$(cat clusters/mw/nodes/$k/stdout)" = "worker$((k + 1))" ]
	done
	echo hostname >clusters/mw/exec
	[ "$(cat clusters/mw/exec | tr '\n' ' ')" = "manager: manager 0: worker1 1: worker2 2: worker3 " ]
	# The workers' sshd sees the manager's inner address as the client.
	echo 'echo ${SSH_CONNECTION%% *}' >clusters/mw/nodes/1/exec
	[ "$(cat clusters/mw/nodes/1/stdout)" = "$TESTNET_MANAGER_INNER" ]
	# files/ of a worker works through the manager too.
	echo data >clusters/mw/nodes/2/files/f
	echo 'cat f' >clusters/mw/nodes/2/exec
	[ "$(cat clusters/mw/nodes/2/stdout)" = data ]
	echo terminated >clusters/mw/state
	wait_state mw terminated
}

@test "ManagerWorkers: a worker the manager cannot reach fails within connect_timeout, and serves once back" {
	cclfs_netns_setup 1
	netns_conf 1 'keepalive = 2' 'connect_timeout = 2'
	cclfs_mount_in_netns "$TESTNET_CLIENT_NS" -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	deploy_mw 1
	echo hostname >clusters/mw/nodes/0/exec
	[ "$(cat clusters/mw/nodes/0/stdout)" = worker1 ]
	# The worker's answers to the manager are lost (a route to nowhere):
	# its session through the manager goes silent and is given up, and
	# the manager's sshd, asked for a new tunnel, sends SYNs that are
	# never answered, for about two minutes before Linux gives up.
	ip -n "${TESTNET_WORKER_NS[0]}" route add blackhole "$TESTNET_MANAGER_INNER/32"
	run timeout 40 sh -c 'echo hostname >clusters/mw/nodes/0/exec'
	echo "first: status $status: $output"
	[ "$status" -ne 124 ]
	# Now the worker's session must go through a new tunnel: the connect
	# gives up 2 s after the manager was asked for it.
	run timeout 30 sh -c 'echo hostname >clusters/mw/nodes/0/exec'
	echo "second: status $status: $output"
	[ "$status" -ne 124 ]
	[ "$status" -ne 0 ]
	run cat clusters/mw/nodes/0/status
	echo "$output"
	echo "$output" | grep -q "did not reach ${TESTNET_WORKERS[0]} port 22 within 2000 ms"
	# Back on the network, the open given up on ends at the manager's next
	# SYN (they go 1, 3, 7, 15, 31 and 63 s after the first), and the
	# worker serves again through the manager.
	ip -n "${TESTNET_WORKER_NS[0]}" route del blackhole "$TESTNET_MANAGER_INNER/32"
	for ((i = 0; i < 60; i++)); do
		if timeout 30 sh -c 'echo hostname >clusters/mw/nodes/0/exec' 2>/dev/null; then
			break
		fi
		sleep 2
	done
	echo "served again after $i tries"
	[ "$(cat clusters/mw/nodes/0/stdout)" = worker1 ]
	echo hostname >clusters/mw/nodes/manager/exec
	[ "$(cat clusters/mw/nodes/manager/stdout)" = manager ]
	echo terminated >clusters/mw/state
	wait_state mw terminated
}

@test "a host that drops off the network fails what waits on it after three keepalives" {
	cclfs_netns_setup 1
	netns_conf 0 'keepalive = 2' 'connect_timeout = 2'
	cclfs_mount_in_netns "$TESTNET_CLIENT_NS" -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	deploy c c 1
	echo 'echo data >f; echo more >g' >clusters/c/nodes/0/exec
	[ "$(cat clusters/c/nodes/0/files/f)" = data ]
	# The host's answers are lost on the way (a route to nowhere): what
	# cclfs sends is never acked, and no error comes back either.
	ip -n "$TESTNET_MANAGER_NS" route add blackhole "$TESTNET_CLIENT/32"
	# A name never looked up is asked of the host. The session is given
	# up after three keepalives unacked (6 s here, then a connect of 2 s
	# that fails); left to TCP's retries it waited 63 s here, up to 15
	# minutes elsewhere.
	run timeout 30 cat clusters/c/nodes/0/files/g
	echo "status $status: $output"
	[ "$status" -ne 124 ]
	[ "$status" -ne 0 ]
	run timeout 30 sh -c 'echo hostname >clusters/c/nodes/0/exec'
	[ "$status" -ne 124 ]
	[ "$status" -ne 0 ]
	# Back on the network, the next use connects again.
	ip -n "$TESTNET_MANAGER_NS" route del blackhole "$TESTNET_CLIENT/32"
	echo 'cat g' >clusters/c/nodes/0/exec
	[ "$(cat clusters/c/nodes/0/stdout)" = more ]
	[ "$(cat clusters/c/nodes/0/files/g)" = more ]
	echo terminated >clusters/c/state
	wait_state c terminated
}

# A test with one host whose login is NONROOT, a user of this test's own
# (never one that exists) with a home of its own (the test hosts take the
# test's key from any user); cclfs mounted with $@ besides.
nonroot_setup() {
	if getent passwd "cclfsnr$$" >/dev/null; then
		echo "user cclfsnr$$ exists already" >&2
		return 1
	fi
	# (a password of "*": none, but not locked, which sshd refuses)
	useradd -M -N -p "*" -d "/tmp/cclfsnr$$" -s /bin/sh "cclfsnr$$"
	NONROOT=cclfsnr$$
	mkdir -m 0755 "/tmp/$NONROOT"
	chown "$NONROOT" "/tmp/$NONROOT"
	HOST_EXTRA="user = \"$NONROOT\"" MOUNT_EXTRA="$*" hosts_setup 1
	# sshd reads the authorized keys as the user
	chmod 0711 "$TESTDIR" "$HOSTS"
	chmod 0644 "$HOSTS/authorized_keys"
	cd "$MNT"
}

@test "a login that is not root: files/ gives EACCES where its rights end, and rm of an open file it cannot read" {
	nonroot_setup
	deploy c c 1
	F=clusters/c/nodes/0/files
	echo 'id -un; pwd' >clusters/c/nodes/0/exec
	[ "$(head -1 clusters/c/nodes/0/stdout)" = "$NONROOT" ]
	W=$(tail -1 clusters/c/nodes/0/stdout)
	# Made by root on the node: a directory the login cannot write, a
	# file it cannot read.
	mkdir -m 0755 "$W/rootdir"
	echo secret >"$W/rootfile"
	chmod 0600 "$W/rootfile"
	run touch "$F/rootdir/x"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run cat "$F/rootfile"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run rm "$F/rootfile"
	[ "$status" -eq 0 ]
	[ ! -e "$W/rootfile" ]
	# Open for appending, then made unreadable and removed: the removal
	# is the directory's to allow, and the descriptor writes on.
	echo one >"$F/g"
	exec 7>>"$F/g"
	chmod 0200 "$F/g"
	rm "$F/g"
	[ ! -e "$W/g" ]
	echo two >&7
	exec 7>&-
	[ ! -e "$F/g" ]
	# ... and one it may neither read nor write any more
	echo one >"$F/h"
	exec 7<>"$F/h"
	chmod 0000 "$F/h"
	rm "$F/h"
	[ ! -e "$W/h" ]
	echo two >&7
	exec 7>&-
	[ -z "$(ls -A "$W" | grep -v rootdir)" ]
	echo terminated >clusters/c/state
	wait_state c terminated
}

@test "a login that is not root, with allow_other: what another user makes is the login's, shown as the mounting user's" {
	nonroot_setup -o allow_other
	deploy c c 1
	F=clusters/c/nodes/0/files
	echo pwd >clusters/c/nodes/0/exec
	W=$(cat clusters/c/nodes/0/stdout)
	# private until the mounting user opens it
	[ "$(stat -c %a "$W")" = 700 ]
	[ "$(stat -c %a "$F")" = 700 ]
	run runuser -u nobody -- ls "$F"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	chmod 0755 "$F"
	[ "$(stat -c %a "$W")" = 755 ]
	mkdir -m 1777 "$F/drop"
	runuser -u nobody -- sh -c "echo theirs >$F/drop/n"
	# the login cannot give it away: it is the login's on the node
	[ "$(stat -c %U "$W/drop/n")" = "$NONROOT" ]
	[ "$(stat -c '%U %a' "$F/drop/n")" = "root 644" ]
	[ "$(runuser -u nobody -- cat "$F/drop/n")" = theirs ]
	# so the other user, who is not its owner, cannot write it again
	run runuser -u nobody -- sh -c "echo again >>$F/drop/n"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	[ "$(cat "$W/drop/n")" = theirs ]
	# nor write where the modes shown refuse them
	run runuser -u nobody -- touch "$F/x"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	[ ! -e "$W/x" ]
	echo terminated >clusters/c/state
	wait_state c terminated
}

# The sshd processes serving the session of cclfs to host 0.
session_sshd() {
	ss -Htnp state established src "127.0.1.$FIRST:22" |
		grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u
}

@test "a host whose sshd stops answering loses its session after three keepalives, and the next one serves" {
	# 2 s: a probe has 4 s to be answered even on a loaded machine.
	hosts_setup 1 'keepalive = 2'
	cd "$MNT"
	deploy c c 1
	echo 'echo data >f; echo more >g' >clusters/c/nodes/0/exec
	# files/ in use: the session's SFTP channel is open, so the probe
	# can go while the lookup below waits.
	[ "$(cat clusters/c/nodes/0/files/f)" = data ]
	# A command silent for longer than three keepalives is not taken for
	# a silent host: the probes are answered.
	echo 'sleep 8; echo done' >clusters/c/nodes/0/exec
	[ "$(cat clusters/c/nodes/0/stdout)" = done ]
	STOPPED=$(session_sshd)
	[ "$(echo "$STOPPED" | wc -w)" -ge 1 ]
	# The host's kernel still acks; its sshd for this session is stopped.
	# shellcheck disable=SC2086
	kill -STOP $STOPPED
	# A name never looked up is asked of the host: the lookup waits for
	# the stopped session until three keepalives went unanswered (6 s), then
	# runs again on a new session (sshd's listener still answers).
	# Without the watch it would wait as long as the session is stopped.
	run timeout 30 cat clusters/c/nodes/0/files/g
	echo "status $status: $output"
	[ "$status" -eq 0 ]
	[ "$output" = more ]
	# ... served by another sshd: the stopped one's session was given up.
	now=$(session_sshd)
	[ -n "$now" ]
	for pid in $now; do
		if echo "$STOPPED" | grep -qx "$pid"; then
			return 1
		fi
	done
	# shellcheck disable=SC2086
	kill -CONT $STOPPED
	STOPPED=
	echo 'echo ok' >clusters/c/nodes/0/exec
	[ "$(cat clusters/c/nodes/0/stdout)" = ok ]
	echo terminated >clusters/c/state
	wait_state c terminated
}

@test "a host that accepts but never speaks SSH fails the deploy within connect_timeout" {
	cclfs_setup --no-mount
	# A listener that accepts connections and says nothing.
	python3 -c '
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.1.120", 2222))
s.listen(8)
open("ready", "w").close()
conns = []
while True:
    c, _ = s.accept()
    conns.append(c)
' 3>&- &
	SILENT=$!
	for _ in $(seq 1 100); do
		[ -e ready ] && break
		sleep 0.05
	done
	printf '[hosts]\nconnect_timeout = "1"\n[hosts.mute]\naddress = "127.0.1.120"\nport = "2222"\n' \
		>"$TESTDIR/cclfs.conf"
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	mkdir contracts/c
	echo hosts >contracts/c/node_provider
	start=$(date +%s%N)
	echo x >contracts/c/deploy
	wait_state x failed
	kill "$SILENT"
	[ $(($(date +%s%N) - start)) -lt 8000000000 ]
	grep -q 'SSH handshake with .*127.0.1.120 port 2222 failed' clusters/x/error
}

@test "priced hosts: billed while running, not while interrupted; a tiny budget interrupts; idle stop asks the hosts for processes" {
	# A dollar a second per machine; a minute of idleness lasts 0.2 s.
	HOST_EXTRA='price = "3600"'
	export CCLFS_TEST_MINUTE_MS=200
	hosts_setup 2
	cd "$MNT"
	mkdir contracts/p
	echo 10 >contracts/p/config/idle_minutes
	deploy p p 2
	[ "$(cut -f4 contracts/p/resolution)" = 3600 ]
	[ "$(cat catalog/hosts/host/price_per_hour)" = 3600 ]
	[ "$(sed -n 's/^price_per_hour: //p' clusters/p/info)" = 7200 ]
	# A command left running on host 1 keeps the cluster up past its
	# 2 s of idleness, until it ends (3 s).
	local t0=${EPOCHREALTIME/./}
	echo 'nohup sleep 3 >/dev/null 2>&1 &' >clusters/p/nodes/1/exec
	echo interrupted >clusters/p/wait
	[ "$(((${EPOCHREALTIME/./} - t0) / 1000))" -ge 3000 ]
	grep -q "has been idle for 10 minutes" clusters/p/error
	local cost
	cost=$(awk -F'\t' '$1 == "p" { print $8 }' costs)
	sleep 1.5
	[ "$(awk -F'\t' '$1 == "p" { print $8 }' costs)" = "$cost" ]
	# Resumed with a budget already spent: interrupted again at once.
	echo >contracts/p/config/idle_minutes
	echo 0.5 >contracts/p/config/budget
	run_shell 'echo resumed > clusters/p/state'
	[ "$status" -ne 0 ]
	grep -q "raise config/budget of contract p to resume it" clusters/p/error
	awk -v c="$cost" 'BEGIN { exit !(c > 0) }'
	echo "$(awk -v c="$cost" 'BEGIN { print c + 2 }')" >contracts/p/config/budget
	echo resumed >clusters/p/state
	echo running >clusters/p/wait
	echo interrupted >clusters/p/wait
	grep -q "which reaches its budget of" clusters/p/error
}

@test "resize on hosts: grows onto free hosts (hostfile on every node), shrinks, and a grow past the free hosts goes back" {
	hosts_setup 3
	cd "$MNT"
	mkdir contracts/g
	echo PeerWorkersMPI >contracts/g/cluster_type
	deploy g g 1
	echo 3 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	[ "$(wc -l <clusters/g/hostfile)" -eq 3 ]
	# Every node has the new hostfile.
	echo 'wc -l < "$CCLFS_HOSTFILE"' >clusters/g/exec
	[ "$(cut -d' ' -f2 clusters/g/exec | sort -u)" = 3 ]
	echo 2 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 " ]
	[ "$(wc -l <clusters/g/hostfile)" -eq 2 ]
	echo 'wc -l < "$CCLFS_HOSTFILE"' >clusters/g/exec
	[ "$(cut -d' ' -f2 clusters/g/exec | sort -u)" = 2 ]
	# Four nodes on three hosts: the cluster goes back to its two.
	echo 4 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(cat clusters/g/node_count)" = 2 ]
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 " ]
	[[ "$(cat clusters/g/error)" == "clusters/g/node_count: resizing to 4 failed: "*"; the cluster has 2" ]]
	echo hostname >clusters/g/exec
	# The host the failed grow took is free again.
	echo 3 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(ls clusters/g/nodes | wc -l)" -eq 3 ]
}
