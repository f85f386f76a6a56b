#!/usr/bin/env bats
# The lifecycle engine against the fake EC2 endpoint of tests/fakeec2: each
# cluster's jobs run on their own (a deploy stuck waiting for SSH holds up
# no other cluster), terminate cancels a deploy at any point and leaves
# nothing behind, a cluster failed against an unreachable endpoint can be
# terminated and removed, unmount cancels running jobs and the next mount
# takes them up again, and ec2 nodes report their connection.
#
# Bounds are generous (10 s for what should take 2 s): the suite shares a
# loaded machine. A deploy that never gets an SSH banner comes from the
# fake's ssh_silent setting: its instances accept connections on port 22
# and never answer.

load helpers
load fakeec2

AKID=AKIDCCLFSLIFE
SECRET=cclfs-lifecycle-secret-key
# The /24 of the fake's instances: apart from ec2.bats (127.0.2), so both
# suites may run at once.
FAKE_NET=${CCLFS_LIFECYCLE_NET:-127.0.4}

# Start the fake and write cclfs.conf for it; extra lines go to [ec2].
# Does not mount.
ec2_setup() {
	cclfs_setup --no-mount
	fake_start
	ec2_conf "$FAKE_URL" "$@"
}

teardown() {
	fakeec2_teardown
}

# local_contract NAME COUNT: a contract of the local provider.
local_contract() {
	local c=$MNT/contracts/$1
	[ -d "$c" ] || mkdir "$c"
	echo local >"$c/node_provider"
	echo "$2" >"$c/node_count"
}

# The first word of clusters/$1/state (a deploy may show its progress).
state_of() {
	local s
	IFS= read -r s <"$MNT/clusters/$1/state" || true
	printf '%s' "${s%% *}"
}

is_state() { # handle state
	[ "$(state_of "$1")" = "$2" ]
}

# Wait up to $1 seconds for clusters/$2/state to read $3; fail at once on
# failed (unless that is awaited), and say where the cluster is.
wait_state_in() {
	local secs=$1 h=$2 want=$3 s deadline
	deadline=$((${EPOCHREALTIME/./} + secs * 1000000))
	while :; do
		s=$(state_of "$h")
		[ "$s" = "$want" ] && return 0
		if [ "$s" = failed ] && [ "$want" != failed ]; then
			echo "cluster $h failed: $(cat "$MNT/clusters/$h/error")" >&2
			return 1
		fi
		if [ "${EPOCHREALTIME/./}" -ge "$deadline" ]; then
			echo "cluster $h is still '$(cat "$MNT/clusters/$h/state")' after $secs s, not $want;" \
				"error: $(cat "$MNT/clusters/$h/error")" >&2
			return 1
		fi
		sleep 0.05
	done
}

# Cluster $1 reads terminated and nothing of it is left in the fake.
terminated_and_clean() {
	is_state "$1" terminated && nothing_left
}

# Wait (10 s at most) for terminated_and_clean; on failure say what is left.
wait_terminated_clean() {
	wait_until 10 terminated_and_clean "$1" || {
		echo "clusters/$1/state: $(cat "$MNT/clusters/$1/state"); error: $(cat "$MNT/clusters/$1/error")" >&2
		echo "left in the fake: $(fake_py "([(i['id'], i['state']) for i in s['instances'] if i['state'] != 'terminated'], s['key_pairs'], s['placement_groups'])")" >&2
		return 1
	}
}

# Sleep until $2 seconds after the time $1 (an EPOCHREALTIME).
sleep_until() {
	sleep "$(awk -v t0="$1" -v d="$2" -v now="$EPOCHREALTIME" \
		'BEGIN { w = t0 + d - now; printf "%.3f", (w > 0 ? w : 0) }')"
}

# A TCP port of 127.0.0.1 that nothing listens on.
closed_port() {
	python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

@test "a deploy stuck waiting for SSH holds up no other cluster; terminate cancels it and leaves nothing" {
	ec2_setup 'boot_timeout = "600"'
	ec2_mount
	local_contract lc 1
	echo L >contracts/lc/deploy
	wait_state_in 10 L running
	contract ec 4
	fake_post /_fake/settings '{"ssh_silent": 1}'
	t0=$EPOCHREALTIME
	echo E >contracts/ec/deploy
	# Launched and running in the fake; no instance answers SSH.
	wait_until 10 fake_count_is E running 4
	is_state E deploying
	# The local cluster's jobs do not wait for E's deploy.
	echo interrupted >clusters/L/state
	wait_state_in 10 L interrupted
	is_state E deploying
	echo resumed >clusters/L/state
	wait_state_in 10 L running
	is_state E deploying
	# About 2 s into the deploy, while cclfs waits for SSH: terminate.
	sleep_until "$t0" 2
	is_state E deploying
	echo terminated >clusters/E/state
	wait_terminated_clean E
	[ "$(fake_count E terminated)" = 4 ]
	rmdir clusters/E
	echo terminated >clusters/L/state
	wait_state_in 10 L terminated
	rmdir clusters/L
	rmdir contracts/ec contracts/lc
	[ -z "$(ls clusters)$(ls contracts)" ]
}

@test "terminate at 5 random points of a 4-node ec2 deploy cancels it and leaves nothing" {
	ec2_setup
	ec2_mount
	# PeerWorkersMPI: the deploy ends with the MPI key setup. Latency on
	# every call and three polls before an instance runs spread the
	# deploy over about 3 s, so the random points fall in every phase.
	contract c 4 PeerWorkersMPI
	fake_post /_fake/settings '{"latency_ms": 100, "pending_polls": 3}'
	for i in 1 2 3 4 5; do
		h=r$i
		ms=$((RANDOM % 3000))
		echo $h >contracts/c/deploy
		sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
		at=$(cat clusters/$h/state)
		t0=${EPOCHREALTIME/./}
		echo terminated >clusters/$h/state
		wait_terminated_clean $h
		took=$(((${EPOCHREALTIME/./} - t0) / 1000))
		echo "# $h: terminated ${ms} ms into the deploy, at '$at'; $(fake_count $h '') instances had been launched; clean after $took ms" >&3
		[ "$(fake_py "max(list(s['launches_per_token'].values()) + [0])")" -le 1 ]
		rmdir clusters/$h
	done
	[ -z "$(ls clusters)" ]
}

@test "a cluster failed against an unreachable endpoint is terminated, then it and its contract are removed" {
	cclfs_setup --no-mount
	ec2_conf "http://127.0.0.1:$(closed_port)" 'request_timeout = "0.5"' \
		'retries = "1"'
	ec2_mount
	contract c 2
	echo u1 >contracts/c/deploy
	wait_state_in 30 u1 failed
	[ -n "$(cat clusters/u1/error)" ]
	echo terminated >clusters/u1/state
	wait_state_in 10 u1 terminated
	rmdir clusters/u1
	rmdir contracts/c
	[ ! -e clusters/u1 ] && [ ! -e contracts/c ]
}

@test "unmount during a stuck ec2 deploy: the daemon exits, the next mount resumes the deploy" {
	ec2_setup 'boot_timeout = "600"'
	ec2_mount
	contract c 4
	fake_post /_fake/settings '{"ssh_silent": 1}'
	echo s1 >contracts/c/deploy
	wait_until 10 fake_count_is s1 running 4
	is_state s1 deploying
	cd "$TESTDIR"
	pid=$CCLFS_PID
	timeout 10 fusermount3 -u "$MNT"
	wait_until 10 pid_exited "$pid"
	wait "$pid"
	ec2_mount
	is_state s1 deploying
	echo terminated >clusters/s1/state
	wait_terminated_clean s1
	# The resumed deploy launched nothing more.
	[ "$(fake_count s1 '')" = 4 ]
	[ "$(fake_py "max(s['launches_per_token'].values())")" = 1 ]
	rmdir clusters/s1
}

@test "nodes/N/status of an ec2 node has its connection" {
	ec2_setup
	ec2_mount
	contract c 2
	echo n1 >contracts/c/deploy
	wait_state n1 running
	grep -q '^connection: .' clusters/n1/nodes/0/status
	echo true >clusters/n1/nodes/0/exec
	grep -qx 'connection: reachable' clusters/n1/nodes/0/status
	grep -q '^connection: .' clusters/n1/nodes/1/status
	echo terminated >clusters/n1/state
	wait_terminated_clean n1
}
