#!/usr/bin/env bats
# The sshd test-host library itself (tests/sshd/testhosts.bash): hosts on
# 127.0.1.k that answer ssh with the generated key and known_hosts, kill and
# revive, cleanup by pid, and the namespace network of ManagerWorkers tests.

# Hosts 201.. here: the benchmarks and the provider suites use 1..N.
FIRST=201

setup() {
	source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"
	TESTDIR=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-testhosts.XXXXXX")
	TH=$TESTDIR/hosts
	TH2=$TESTDIR/hosts2
	TN=$TESTDIR/net
	BG_PIDS=()
	# A remote command no other process has in its command line.
	SLEEP="sleep 60.$$$RANDOM"
}

teardown() {
	local pid
	for pid in "${BG_PIDS[@]+"${BG_PIDS[@]}"}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	testnet_stop "$TN" || true
	testhosts_stop "$TH2" || true
	testhosts_stop "$TH" || true
	rm -rf "$TESTDIR"
}

# ssh with the files testhosts_start wrote, spelled out.
th_ssh() { # dir address command...
	local d=$1 addr=$2
	shift 2
	ssh -F /dev/null -i "$d/id_ed25519" -o UserKnownHostsFile="$d/known_hosts" \
		-o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5 \
		"root@$addr" "$@"
}

# In the client namespace of the network.
in_client() {
	nsenter --net="/run/netns/$TESTNET_CLIENT_NS" "$@"
}

# The pids listed (one per line) are all gone (zombies count as gone:
# PID 1 may not reap).
all_dead() {
	local pid state
	for pid in $1; do
		state=$(awk '{ sub(/.*\) /, ""); print substr($0, 1, 1) }' "/proc/$pid/stat" 2>/dev/null || true)
		if [ -n "$state" ] && [ "$state" != Z ]; then
			echo "pid $pid is still alive ($state): $(tr '\0' ' ' <"/proc/$pid/cmdline")" >&2
			return 1
		fi
	done
}

need_netns() {
	local why
	if ! why=$(testnet_supported 2>&1); then
		skip "network namespaces unavailable: $why"
	fi
}

@test "testhosts_start: three hosts answer ssh with the generated key and known_hosts" {
	testhosts_start "$TH" 3 "$FIRST"
	[ -f "$TH/id_ed25519" ] && [ -f "$TH/id_ed25519.pub" ]
	[ "$(wc -l <"$TH/known_hosts")" -eq 3 ]
	local k addr
	for ((k = FIRST; k < FIRST + 3; k++)); do
		addr=127.0.1.$k
		grep -q "^$addr ssh-ed25519 AAAA" "$TH/known_hosts"
		run th_ssh "$TH" "$addr" hostname
		[ "$status" -eq 0 ]
		[ "$output" = "$(hostname)" ]
		# Each host is its own daemon: the server address of the session.
		run th_ssh "$TH" "$addr" 'echo ${SSH_CONNECTION##* } ${SSH_CONNECTION% *}'
		[ "$status" -eq 0 ]
		[[ "$output" == "22 "*" $addr" ]]
		# Exit codes come back.
		run th_ssh "$TH" "$addr" 'exit 7'
		[ "$status" -eq 7 ]
		# The same through DIR/ssh_config.
		run ssh -F "$TH/ssh_config" "$addr" 'echo ok; echo err >&2'
		[ "$status" -eq 0 ]
		[[ "$output" == *ok* ]]
	done
	# Three listeners, nothing else.
	[ "$(testhosts_pids "$TH" | wc -l)" -eq 3 ]
}

@test "test hosts: a quiet shell, and the host key is checked" {
	testhosts_start "$TH" 2 "$FIRST"
	# sshd's SHLVL=1 becomes 2 in bash -c, so bash skips ~/.bashrc.
	run th_ssh "$TH" "127.0.1.$FIRST" 'echo $SHLVL'
	[ "$status" -eq 0 ]
	[ "$output" = 2 ]
	# Host 1 presenting host 2's key is refused.
	awk -v a="127.0.1.$FIRST" -v b="127.0.1.$((FIRST + 1))" \
		'$1 == b { print a, $2, $3 }' "$TH/known_hosts" >"$TESTDIR/wrong_known_hosts"
	run ssh -F /dev/null -i "$TH/id_ed25519" -o UserKnownHostsFile="$TESTDIR/wrong_known_hosts" \
		-o StrictHostKeyChecking=yes -o BatchMode=yes "root@127.0.1.$FIRST" true
	[ "$status" -eq 255 ]
	[[ "$output" == *"Host key verification failed"* || "$output" == *"HOST IDENTIFICATION HAS CHANGED"* ]]
}

@test "testhosts_kill drops sessions and refuses connections; testhosts_revive brings the host back" {
	testhosts_start "$TH" 3 "$FIRST"
	local victim=127.0.1.$((FIRST + 1))
	th_ssh "$TH" "$victim" "echo started; $SLEEP" >"$TESTDIR/session.out" 2>&1 &
	local sess=$!
	BG_PIDS+=("$sess")

	for _ in $(seq 100); do
		grep -q started "$TESTDIR/session.out" && break
		sleep 0.05
	done
	grep -q started "$TESTDIR/session.out"
	local before
	before=$(testhosts_pids "$TH")
	[ "$(wc -l <<<"$before")" -eq 4 ] # three listeners and the session

	testhosts_kill "$TH" $((FIRST + 1))
	# The established session drops at once.
	run timeout 5 tail --pid="$sess" -f /dev/null
	[ "$status" -eq 0 ]
	local st=0
	wait "$sess" || st=$?
	[ "$st" -eq 255 ]
	# The remote command died with the session.
	run pgrep -f "$SLEEP"
	[ "$status" -eq 1 ]
	# New connections are refused; the other hosts are untouched.
	run th_ssh "$TH" "$victim" true
	[ "$status" -eq 255 ]
	[[ "$output" == *"Connection refused"* ]]
	run th_ssh "$TH" "127.0.1.$FIRST" hostname
	[ "$status" -eq 0 ]
	[ "$(testhosts_pids "$TH" | wc -l)" -eq 2 ]

	testhosts_revive "$TH" $((FIRST + 1))
	# Same host key: strict checking against the same known_hosts passes.
	run th_ssh "$TH" "$victim" hostname
	[ "$status" -eq 0 ]
	[ "$output" = "$(hostname)" ]
	[ "$(wc -l <"$TH/known_hosts")" -eq 3 ]
	# Reviving a running host changes nothing.
	testhosts_revive "$TH" $((FIRST + 1))
	[ "$(testhosts_pids "$TH" | wc -l)" -eq 3 ]
}

@test "testhosts_stop: no sshd of DIR survives, other directories' hosts do" {
	testhosts_start "$TH" 2 "$FIRST"
	testhosts_start "$TH2" 1 $((FIRST + 3))
	# A session open on each host of TH, so there are connection children.
	th_ssh "$TH" "127.0.1.$FIRST" "echo started; $SLEEP" >"$TESTDIR/s1.out" 2>&1 &
	BG_PIDS+=($!)
	th_ssh "$TH" "127.0.1.$((FIRST + 1))" "echo started; $SLEEP" >"$TESTDIR/s2.out" 2>&1 &
	BG_PIDS+=($!)

	for _ in $(seq 100); do
		grep -q started "$TESTDIR/s1.out" && grep -q started "$TESTDIR/s2.out" && break
		sleep 0.05
	done
	local pids others
	pids=$(testhosts_pids "$TH")
	[ "$(wc -l <<<"$pids")" -eq 4 ]
	others=$(testhosts_pids "$TH2")
	[ "$(wc -l <<<"$others")" -eq 1 ]

	testhosts_stop "$TH"
	all_dead "$pids"
	[ -z "$(testhosts_pids "$TH")" ]
	run pgrep -f "$SLEEP"
	[ "$status" -eq 1 ]
	# Idempotent.
	testhosts_stop "$TH"
	# The other directory's host is alive and answers.
	[ "$(testhosts_pids "$TH2")" = "$others" ]
	run th_ssh "$TH2" "127.0.1.$((FIRST + 3))" hostname
	[ "$status" -eq 0 ]
	# A directory that never had hosts, or does not exist, is fine.
	testhosts_stop "$TESTDIR/none"
	testhosts_stop "$TESTDIR"
}

@test "testhosts_start fails with the reason when an address is taken, and starts fast" {
	local t0 t1
	t0=${EPOCHREALTIME/./}
	testhosts_start "$TH" 8 "$FIRST"
	t1=${EPOCHREALTIME/./}
	echo "# 8 hosts started in $(((t1 - t0) / 1000)) ms" >&3
	[ $((t1 - t0)) -lt 5000000 ]
	run testhosts_start "$TH2" 1 "$FIRST"
	[ "$status" -ne 0 ]
	[[ "$output" == *"host $FIRST"* ]]
	[[ "$output" == *"Address already in use"* || "$output" == *"Cannot bind"* ]]
	[ -z "$(testhosts_pids "$TH2")" ]
	# Starting a host of DIR that runs already is refused too.
	run testhosts_start "$TH" 1 "$FIRST"
	[ "$status" -ne 0 ]
	[[ "$output" == *"already running"* ]]
	run th_ssh "$TH" "127.0.1.$FIRST" true
	[ "$status" -eq 0 ]
	# Bad arguments.
	run testhosts_start "$TH2" 0
	[ "$status" -eq 2 ]
	run testhosts_start "$TH2" 10 250
	[ "$status" -eq 2 ]
}

@test "testnet: the client reaches the manager, and the workers only through it" {
	need_netns
	testnet_start "$TN" 2
	[ "$TESTNET_MANAGER" = 10.77.0.2 ]
	[ "${#TESTNET_WORKERS[@]}" -eq 2 ]
	[ "$TESTNET_WORKER_2" = "${TESTNET_WORKERS[1]}" ]
	# testnet.env gives another shell the same values.
	run bash -c 'source "$1" && echo "$TESTNET_CLIENT_NS ${TESTNET_WORKERS[1]} $TESTNET_MANAGER"' _ "$TN/testnet.env"
	[ "$output" = "$TESTNET_CLIENT_NS ${TESTNET_WORKERS[1]} $TESTNET_MANAGER" ]
	[ "$(wc -l <"$TN/netns.list")" -eq 4 ]

	# Client -> manager.
	run in_client ssh -F "$TN/ssh_config" "root@$TESTNET_MANAGER" hostname
	[ "$status" -eq 0 ]
	[ "$output" = manager ]
	# Client -> manager -> each worker (ProxyJump; -F is passed on to the jump).
	local k
	for k in 1 2; do
		run in_client ssh -F "$TN/ssh_config" -J "root@$TESTNET_MANAGER" \
			"root@${TESTNET_WORKERS[k - 1]}" 'hostname; echo ${SSH_CONNECTION%% *}'
		[ "$status" -eq 0 ]
		[ "${lines[0]}" = "worker$k" ]
		[ "${lines[1]}" = "$TESTNET_MANAGER_INNER" ] # the worker sees the manager
	done
	# Client -> worker directly: no route, fails at once.
	local t0 t1
	t0=${EPOCHREALTIME/./}
	run in_client ssh -F "$TN/ssh_config" -o ConnectTimeout=3 "root@$TESTNET_WORKER_1" hostname
	t1=${EPOCHREALTIME/./}
	[ "$status" -eq 255 ]
	[[ "$output" == *"Network is unreachable"* ]]
	[ $((t1 - t0)) -lt 3000000 ]
	run in_client timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/22"' _ "$TESTNET_WORKER_2"
	[ "$status" -ne 0 ]
	# Worker -> client: no route either.
	run nsenter --net="/run/netns/${TESTNET_WORKER_NS[0]}" timeout 3 \
		bash -c 'exec 3<>"/dev/tcp/$1/22"' _ "$TESTNET_CLIENT"
	[ "$status" -ne 0 ]
	# Manager -> worker directly works.
	run nsenter --net="/run/netns/$TESTNET_MANAGER_NS" \
		ssh -F "$TN/ssh_config" "root@$TESTNET_WORKER_2" hostname
	[ "$status" -eq 0 ]
	[ "$output" = worker2 ]
}

@test "testnet_stop removes the namespaces and kills their sshds" {
	need_netns
	testnet_start "$TN" 2
	local names pids ns
	names=$(cat "$TN/netns.list")
	pids=$(testhosts_pids "$TN")
	[ "$(wc -l <<<"$pids")" -eq 3 ]
	for ns in $names; do
		[ -e "/run/netns/$ns" ]
	done

	testnet_stop "$TN"
	all_dead "$pids"
	[ -z "$(testhosts_pids "$TN")" ]
	for ns in $names; do
		[ ! -e "/run/netns/$ns" ]
		run bash -c 'ip netns list | grep -w "$1"' _ "$ns"
		[ "$status" -eq 1 ]
	done
	[ ! -e "$TN/netns.list" ]
	[ ! -e "$TN/testnet.env" ]
	testnet_stop "$TN"
}

@test "testnet_stop cleans up after a start that failed half way" {
	need_netns
	# A start that dies after the namespaces were made: sshd cannot run.
	run env TESTHOSTS_SSHD=/bin/false bash -c 'source "$1" && testnet_start "$2" 1' _ \
		"$BATS_TEST_DIRNAME/../sshd/testhosts.bash" "$TN"
	[ "$status" -ne 0 ]
	local names ns
	names=$(cat "$TN/netns.list")
	[ -n "$names" ]
	testnet_stop "$TN"
	for ns in $names; do
		[ ! -e "/run/netns/$ns" ]
	done
}
