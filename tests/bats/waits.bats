#!/usr/bin/env bats
# Waiting without sleep loops, on the local provider: `echo STATE > wait`
# returns once the cluster is in that state, fails with EIO as soon as the
# state can no longer come without a new request, with EINTR on Ctrl-C and
# with ETIMEDOUT after config/wait_timeout; poll() on `state` wakes on a
# change; `tail -f log` sees new lines. Bounds are generous (the machine is
# shared): they catch a wait that never ends, they time nothing.

load helpers

setup() {
	cclfs_setup
}

teardown() {
	cclfs_kill_node_processes
	cclfs_teardown
}

# deployed NAME COUNT: a local cluster NAME deployed from contract NAME
# (not waited for).
deployed() {
	mkdir "$MNT/contracts/$1"
	echo local >"$MNT/contracts/$1/node_provider"
	echo "$2" >"$MNT/contracts/$1/node_count"
	echo "$1" >"$MNT/contracts/$1/deploy"
}

@test "wait: returns once the cluster is running, at once when it is there already" {
	deployed w 3
	cd "$MNT/clusters/w"
	run_shell 'echo running > clusters/w/wait'
	[ "$status" -eq 0 ]
	[ "$(cat state)" = running ]
	# Every node answers right after the wait.
	echo hostname >exec
	[ "$(grep -c . exec)" -eq 3 ]
	echo running >wait
	echo interrupted >state
	echo interrupted >wait
	[ "$(cat state)" = interrupted ]
	echo resumed >state
	echo running >wait
	echo terminated >state
	echo terminated >wait
	[ "$(cat state)" = terminated ]
	[ -z "$(cat error)" ]
	# It shows nothing and is written like a value.
	[ -z "$(cat wait)" ]
	[ "$(stat -c %a wait)" = 644 ]
}

@test "wait: a state that can no longer come without a request is EIO at once, with a sentence" {
	deployed w 1
	cd "$MNT/clusters/w"
	echo running >wait
	run_shell 'echo terminated > clusters/w/wait'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Input/output error"* ]]
	[ "$(cat error)" = "clusters/w/wait: the cluster is running, from where it cannot become terminated without a new request" ]
	grep -q "cannot become terminated" log
	echo interrupted >state
	echo interrupted >wait
	run_shell 'echo running > clusters/w/wait'
	[ "$status" -ne 0 ]
	[[ "$(cat error)" == *"the cluster is interrupted, from where it cannot become running"* ]]
	# A success does not clear an error it did not cause.
	echo interrupted >wait
	[ -n "$(cat error)" ]
}

@test "wait: fails as soon as the cluster reaches a state from where the wanted one cannot come" {
	deployed w 1
	cd "$MNT/clusters/w"
	echo running >wait
	# With an idle limit the daemon may interrupt a running cluster by
	# itself: a wait for interrupted blocks, until a terminate makes it
	# impossible.
	echo 60 >"$MNT/contracts/w/config/idle_minutes"
	(
		if echo interrupted >wait; then
			echo rc=0 >"$TESTDIR/waited"
		else
			echo "rc=$?" >"$TESTDIR/waited"
		fi
	) 2>"$TESTDIR/wait.err" &
	local waiter=$!
	sleep 0.5
	[ ! -e "$TESTDIR/waited" ]
	echo terminated >state
	wait "$waiter"
	[ "$(cat "$TESTDIR/waited")" = rc=1 ]
	grep -q "Input/output error" "$TESTDIR/wait.err"
	[[ "$(cat error)" == *"from where it cannot become interrupted without a new request"* ]]
}

@test "wait: a word that is no state is EINVAL, naming the states" {
	deployed w 1
	run_shell 'echo runing > clusters/w/wait'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	[ "$(cat "$MNT/clusters/w/error")" = 'clusters/w/wait: "runing" is not a state; write one of deploying, running, interrupting, interrupted, resuming, resizing, terminating, terminated or failed' ]
}

@test "wait: Ctrl-C ends it with EINTR; config/wait_timeout with ETIMEDOUT" {
	deployed w 1
	cd "$MNT/clusters/w"
	echo running >wait
	echo 60 >"$MNT/contracts/w/config/idle_minutes"
	# SIGINT as a terminal sends it: the write is interrupted, the
	# shell's trap runs and echo reports the error.
	run timeout -s INT 1 bash -c \
		'trap "echo interrupted-by-int" INT; echo interrupted > wait; echo "rc=$?"'
	[[ "$output" == *"Interrupted system call"* ]]
	[[ "$output" == *"rc=1"* ]]
	[ "$(cat state)" = running ]
	[ -z "$(cat error)" ]
	echo 0.3 >"$MNT/contracts/w/config/wait_timeout"
	run_shell 'echo interrupted > clusters/w/wait'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Connection timed out"* ]]
	[ "$(cat error)" = "clusters/w/wait: the cluster did not become interrupted within 0.3 seconds (config/wait_timeout); it is running" ]
	run_shell 'echo 0 > contracts/w/config/wait_timeout'
	[ "$status" -ne 0 ]
	[[ "$(cat "$MNT/contracts/w/error")" == *'"0" is not a number of seconds'* ]]
}

@test "poll() on state wakes when the state changes, and not before" {
	deployed w 1
	cd "$MNT/clusters/w"
	echo running >wait
	cat >"$TESTDIR/poll.py" <<'EOF'
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("read", os.read(fd, 4096).decode().strip())
p = select.poll()
p.register(fd, select.POLLIN)
print("quiet", p.poll(300) == [])
sys.stdout.flush()
ready = p.poll(30000)
os.lseek(fd, 0, 0)
print("woke", ready != [], os.read(fd, 4096).decode().strip())
EOF
	python3 "$TESTDIR/poll.py" state >"$TESTDIR/poll.out" &
	local poller=$!
	for _ in $(seq 1 100); do
		grep -q quiet "$TESTDIR/poll.out" && break
		sleep 0.05
	done
	echo interrupted >state
	wait "$poller"
	cat "$TESTDIR/poll.out"
	[ "$(sed -n 1p "$TESTDIR/poll.out")" = "read running" ]
	[ "$(sed -n 2p "$TESTDIR/poll.out")" = "quiet True" ]
	[[ "$(sed -n 3p "$TESTDIR/poll.out")" == "woke True interrupt"* ]]
}

@test "tail -f log sees a line written after it started" {
	deployed w 1
	cd "$MNT/clusters/w"
	echo running >wait
	tail -n 0 -f log >"$TESTDIR/tail.out" 2>&1 &
	local tailer=$!
	sleep 0.3
	echo interrupted >state
	for _ in $(seq 1 100); do
		grep -q "state: interrupted" "$TESTDIR/tail.out" && break
		sleep 0.05
	done
	kill "$tailer"
	wait "$tailer" || true
	grep -q "state: interrupting" "$TESTDIR/tail.out"
	grep -q "state: interrupted" "$TESTDIR/tail.out"
	# What it saw is what the log holds, each line once.
	[ "$(grep -c "state: interrupted$" "$TESTDIR/tail.out")" -eq 1 ]
}
