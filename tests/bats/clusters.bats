#!/usr/bin/env bats
# Clusters: the CloudClusters tutorial as shell commands. A contract on the
# local provider is deployed under a name or 15 random letters; the state
# file shows the transitions (deploying K/N → running, interrupt, resume,
# terminate) and refuses the ones that make no sense; exec runs commands on
# one node or on all of them; restart kills what was started; rmdir removes
# a terminated cluster; everything survives an unmount and a kill -9 of the
# daemon. Local nodes are working directories under STATE/nodes/H/RANK and
# the processes that carry their CCLFS_INSTANCE.

load helpers

setup() {
	cclfs_setup
	# The local provider resolves its base directory with realpath.
	STATE_REAL=$(cd "$STATE" && pwd -P)
}

teardown() {
	cclfs_kill_node_processes
	cclfs_teardown
}

# contract NAME NODE_COUNT: a contract that resolves to the local type.
contract() {
	mkdir "$MNT/contracts/$1"
	echo local >"$MNT/contracts/$1/node_provider"
	echo "$2" >"$MNT/contracts/$1/node_count"
}

# wait_state HANDLE STATE: poll clusters/HANDLE/state for up to 10 s.
wait_state() {
	local h=$1 want=$2 s="" i
	for i in $(seq 1 200); do
		s=$(cat "$MNT/clusters/$h/state" 2>/dev/null) || s="(unreadable)"
		[ "$s" = "$want" ] && return 0
		sleep 0.05
	done
	echo "clusters/$h/state is [$s], not [$want], after 10 s" >&2
	return 1
}

# deploy CONTRACT NAME: deploy NAME and wait until it runs.
deploy() {
	echo "$2" >"$MNT/contracts/$1/deploy"
	wait_state "$2" running
}

# Fail with a message naming what differed.
expect_eq() {
	if [ "$1" != "$2" ]; then
		if [[ "$1$2" == *$'\n'* ]]; then
			echo "${3:-value}: differs (diff expected got):" >&2
			diff <(printf '%s\n' "$2") <(printf '%s\n' "$1") | head -40 >&2
		else
			printf '%s: expected [%.300s], got [%.300s]\n' \
				"${3:-value}" "$2" "$1" >&2
		fi
		return 1
	fi
}

# expect_error FILE TEXT: an error file holds exactly TEXT, and stat tells
# its true size at once.
expect_error() {
	expect_eq "$(cat "$1")" "$2" "${1#"$MNT"/}"
	expect_eq "$(stat -c %s "$1")" "$(wc -c <"$1")" "size of ${1#"$MNT"/}"
}

# expect_no_error FILE: an error file is empty (cleared), stat says so too.
expect_no_error() {
	expect_eq "$(cat "$1")" "" "${1#"$MNT"/}"
	expect_eq "$(stat -c %s "$1")" 0 "size of ${1#"$MNT"/}"
}

# The state letter of a process (R, S, T, Z...), nothing when it is gone.
proc_state() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	echo "${s%% *}"
}

# Gone: no such process, or a zombie nobody reaped (the test's init may
# not reap orphans).
proc_gone() {
	local s
	s=$(proc_state "$1")
	[ -z "$s" ] || [ "$s" = Z ] || [ "$s" = X ]
}

# A loop that counts every 50 ms in the node's working directory,
# detached from the command that starts it; its pid is left in `pid`.
LOOP_CMD=$(
	cat <<'EOF'
nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i >counter.tmp; mv -f counter.tmp counter; sleep 0.05; done' >/dev/null 2>&1 & echo $! >pid
EOF
)

# start_loop HANDLE NODE: start the loop and wait until it counts.
start_loop() {
	echo "$LOOP_CMD" >"$MNT/clusters/$1/nodes/$2/exec"
	wait_counter_above "$STATE/nodes/$1/$2" 0
}

counter() {
	cat "$1/counter" 2>/dev/null || echo 0
}

# wait_counter_above DIR N: the counter in DIR goes above N within 5 s.
wait_counter_above() {
	local i
	for i in $(seq 1 100); do
		[ "$(counter "$1")" -gt "$2" ] && return 0
		sleep 0.05
	done
	echo "the counter in $1 stayed at $(counter "$1") (not above $2)" >&2
	return 1
}

# The counter does not move over half a second.
counter_stays() {
	local a b
	a=$(counter "$1")
	sleep 0.5
	b=$(counter "$1")
	expect_eq "$b" "$a" "counter in $1 after 0.5 s"
}

now_ms() {
	date +%s%3N
}

@test "tutorial: a 4-node contract deploys under a name; nodes, links, info, status and log" {
	contract c 4
	touch "$MNT/contracts/c/resolve"
	expect_eq "$(cut -f1-3 "$MNT/contracts/c/resolution")" "$(printf 'node\tlocal\tlocal')"
	echo h >"$MNT/contracts/c/deploy"
	expect_no_error "$MNT/contracts/c/error"
	# deploy returns at once; the state shows the progress, then running
	s=$(cat "$MNT/clusters/h/state")
	[[ "$s" =~ ^(deploying\ [0-4]/4|running)$ ]] || {
		echo "state right after deploy: [$s]" >&2
		false
	}
	wait_state h running
	expect_eq "$(ls "$MNT/clusters")" h "ls clusters"
	expect_eq "$(ls "$MNT/clusters/h/nodes" | tr '\n' ' ')" "0 1 2 3 " "ls nodes"
	# symlinks both ways, and following them lands where they say
	expect_eq "$(readlink "$MNT/clusters/h/contract")" ../../contracts/c
	expect_eq "$(readlink "$MNT/contracts/c/clusters/h")" ../../../clusters/h
	[ -L "$MNT/clusters/h/contract" ]
	[ -L "$MNT/contracts/c/clusters/h" ]
	expect_eq "$(cat "$MNT/clusters/h/contract/node_count")" 4
	expect_eq "$(cat "$MNT/contracts/c/clusters/h/state")" running
	# info: the contract, the node count, the local provider and type
	info=$(cat "$MNT/clusters/h/info")
	grep -qx 'handle: h' <<<"$info"
	grep -qx 'contract: c' <<<"$info"
	grep -qx 'node_count: 4' <<<"$info"
	grep -qx 'nodes: local local' <<<"$info"
	# each node runs on localhost with an instance id of its own
	ids=()
	for n in 0 1 2 3; do
		st=$(cat "$MNT/clusters/h/nodes/$n/status")
		grep -qx 'state: running' <<<"$st"
		grep -qx 'address: localhost' <<<"$st"
		id=$(sed -n 's/^instance_id: //p' <<<"$st")
		[[ "$id" =~ ^local-[0-9a-f]+$ ]] || {
			echo "node $n: instance id [$id]" >&2
			false
		}
		ids+=("$id")
		[ -d "$STATE/nodes/h/$n" ]
	done
	expect_eq "$(printf '%s\n' "${ids[@]}" | sort -u | wc -l)" 4 "distinct instance ids"
	# Every local node is this machine: Open MPI takes a host once, with
	# the slots of all its nodes.
	expect_eq "$(cat "$MNT/clusters/h/hostfile")" "localhost slots=4" hostfile
	# the log: one timestamped line per event of the deploy
	log=$(cat "$MNT/clusters/h/log")
	[ -n "$log" ]
	expect_eq "$(grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z ' <<<"$log")" 0 "untimestamped log lines"
	grep -q 'Z deploy requested from contracts/c, 4 nodes$' <<<"$log"
	grep -q 'Z state: running$' <<<"$log"
	grep -q 'Z deployed 4 nodes$' <<<"$log"
}

@test "exec on one node: output, status, working directory, environment; a failure is EIO with its reason" {
	contract c 4
	deploy c h
	N=$MNT/clusters/h/nodes/0
	echo 'echo hello; pwd' >"$N/exec"
	expect_eq "$(cat "$N/stdout")" "hello
$STATE_REAL/nodes/h/0" stdout
	expect_eq "$(cat "$N/exit_status")" 0 exit_status
	expect_eq "$(cat "$N/stderr")" "" stderr
	# what a command writes lands in the node's working directory
	echo 'echo data >made-here' >"$N/exec"
	expect_eq "$(cat "$STATE/nodes/h/0/made-here")" data
	# the environment, on another node
	echo 'echo "$CCLFS_CLUSTER $CCLFS_NODE $CCLFS_NODE_COUNT"; pwd; cat "$CCLFS_HOSTFILE"' \
		>"$MNT/clusters/h/nodes/2/exec"
	expect_eq "$(cat "$MNT/clusters/h/nodes/2/stdout")" "h 2 4
$STATE_REAL/nodes/h/2
$(cat "$MNT/clusters/h/hostfile")" "stdout of node 2"
	# node 0 kept its own last results
	expect_eq "$(cat "$N/stdout")" "" "stdout of node 0 after its last command"
	# a failing command: EIO, its status, its stderr, the reason
	run_shell "echo 'echo to-out; echo to-err >&2; exit 3' > clusters/h/nodes/0/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Input/output error" ]]
	expect_eq "$(cat "$N/exit_status")" 3 exit_status
	expect_eq "$(cat "$N/stderr")" to-err stderr
	expect_eq "$(cat "$N/stdout")" to-out stdout
	expect_error "$MNT/clusters/h/error" \
		'clusters/h/nodes/0/exec: "echo to-out; echo to-err >&2; exit 3" exited with status 3'
	grep -q 'clusters/h/nodes/0/exec: "echo to-out; echo to-err >&2; exit 3" exited with status 3' \
		"$MNT/clusters/h/log"
	# the next good exec clears the error
	echo true >"$N/exec"
	expect_no_error "$MNT/clusters/h/error"
	expect_eq "$(cat "$N/exit_status")" 0 exit_status
	expect_eq "$(cat "$N/stderr")" "" stderr
}

@test "exec on all nodes: lines prefixed by rank in rank order; a failure on one node fails the write" {
	contract c 4
	deploy c h
	H=$MNT/clusters/h
	# node 0 finishes last, node 3 first: the output is still in rank order
	out=$(
		exec 5<>"$H/exec"
		echo 'sleep 0.$((4 - CCLFS_NODE)); echo "hi from $CCLFS_NODE/$CCLFS_NODE_COUNT"' >&5 ||
			echo "WRITE FAILED"
		cat <&5
	)
	want=$'0: hi from 0/4\n1: hi from 1/4\n2: hi from 2/4\n3: hi from 3/4'
	expect_eq "$out" "$want" "read back on the descriptor"
	expect_eq "$(cat "$H/exec")" "$want" "clusters/h/exec"
	for n in 0 1 2 3; do
		expect_eq "$(cat "$H/nodes/$n/stdout")" "hi from $n/4" "stdout of $n"
		expect_eq "$(cat "$H/nodes/$n/exit_status")" 0 "exit_status of $n"
	done
	# every node runs at once
	t0=$(now_ms)
	echo 'sleep 0.5' >"$H/exec"
	t=$(($(now_ms) - t0))
	[ "$t" -lt 1500 ] || {
		echo "4 x sleep 0.5 on 4 nodes took $t ms" >&2
		false
	}
	# node 2 fails: the write fails, the others' output is there
	run_shell "echo '[ \$CCLFS_NODE != 2 ] || { echo bad >&2; exit 4; }; echo ok' > clusters/h/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Input/output error" ]]
	expect_eq "$(cat "$H/exec")" $'0: ok\n1: ok\n3: ok' "clusters/h/exec"
	expect_eq "$(cat "$H/nodes/2/exit_status")" 4 "exit_status of 2"
	expect_eq "$(cat "$H/nodes/2/stderr")" bad "stderr of 2"
	expect_eq "$(cat "$H/nodes/1/exit_status")" 0 "exit_status of 1"
	expect_error "$H/error" \
		'clusters/h/exec: "[ $CCLFS_NODE != 2 ] || { echo bad >&2; exit 4; }; echo ok" failed on 1 of 4 nodes: 2 (status 4)'
	echo true >"$H/exec"
	expect_no_error "$H/error"
}

@test "touch deploy twice on a second contract: two clusters with 15-letter handles" {
	contract c 1
	deploy c first
	contract c2 2
	touch "$MNT/contracts/c2/deploy"
	touch "$MNT/contracts/c2/deploy"
	expect_no_error "$MNT/contracts/c2/error"
	handles=$(ls "$MNT/contracts/c2/clusters")
	expect_eq "$(wc -l <<<"$handles")" 2 "clusters of c2"
	expect_eq "$(grep -cE '^[A-Za-z]{15}$' <<<"$handles")" 2 "15-letter handles"
	expect_eq "$(ls "$MNT/clusters" | sort)" "$(printf '%s\n' first $handles | sort)" "ls clusters"
	expect_eq "$(ls "$MNT/contracts/c/clusters")" first "clusters of c"
	for h in $handles; do
		wait_state "$h" running
		expect_eq "$(readlink "$MNT/clusters/$h/contract")" ../../contracts/c2
		expect_eq "$(readlink "$MNT/contracts/c2/clusters/$h")" "../../../clusters/$h"
		expect_eq "$(ls "$MNT/clusters/$h/nodes" | tr '\n' ' ')" "0 1 "
		grep -qx 'contract: c2' "$MNT/clusters/$h/info"
		echo 'echo "$CCLFS_CLUSTER"' >"$MNT/clusters/$h/exec"
		expect_eq "$(cat "$MNT/clusters/$h/exec")" "0: $h
1: $h"
	done
}

@test "interrupt stops the nodes' processes, resume continues them; exec is EBUSY meanwhile" {
	contract c 2
	deploy c h
	W=$STATE/nodes/h/0
	start_loop h 0
	pid=$(cat "$W/pid")
	[ -n "$pid" ]
	[ "$(proc_state "$pid")" != T ]
	echo interrupted >"$MNT/clusters/h/state"
	s=$(cat "$MNT/clusters/h/state")
	[[ "$s" =~ ^(interrupting\ [0-2]/2|interrupted)$ ]] || {
		echo "state right after interrupted: [$s]" >&2
		false
	}
	wait_state h interrupted
	expect_no_error "$MNT/clusters/h/error"
	for n in 0 1; do
		grep -qx 'state: stopped' "$MNT/clusters/h/nodes/$n/status"
	done
	expect_eq "$(proc_state "$pid")" T "state of the loop"
	counter_stays "$W"
	# no command runs on an interrupted cluster
	run_shell "echo true > clusters/h/nodes/0/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/nodes/0/exec: the cluster is interrupted; commands run only on a running cluster"
	run_shell "echo true > clusters/h/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/exec: the cluster is interrupted; commands run only on a running cluster"
	# resume (the verb): running again, the loop counts again
	c=$(counter "$W")
	echo resume >"$MNT/clusters/h/state"
	wait_state h running
	expect_no_error "$MNT/clusters/h/error"
	for n in 0 1; do
		grep -qx 'state: running' "$MNT/clusters/h/nodes/$n/status"
	done
	wait_counter_above "$W" "$c"
	[ "$(proc_state "$pid")" != T ]
	echo 'echo back' >"$MNT/clusters/h/nodes/0/exec"
	expect_eq "$(cat "$MNT/clusters/h/nodes/0/stdout")" back
	log=$(cat "$MNT/clusters/h/log")
	for l in interrupting interrupted resuming; do
		grep -q "Z state: $l\$" <<<"$log"
	done
}

@test "restart kills every process started on the nodes; the nodes stay" {
	contract c 2
	deploy c h
	start_loop h 0
	start_loop h 1
	p0=$(cat "$STATE/nodes/h/0/pid")
	p1=$(cat "$STATE/nodes/h/1/pid")
	touch "$MNT/clusters/h/restart"
	expect_no_error "$MNT/clusters/h/error"
	proc_gone "$p0"
	proc_gone "$p1"
	counter_stays "$STATE/nodes/h/0"
	counter_stays "$STATE/nodes/h/1"
	# the nodes stay, with their files
	expect_eq "$(cat "$MNT/clusters/h/state")" running
	for n in 0 1; do
		grep -qx 'state: running' "$MNT/clusters/h/nodes/$n/status"
		[ -d "$STATE/nodes/h/$n" ]
		[ -f "$STATE/nodes/h/$n/counter" ]
	done
	echo 'ls' >"$MNT/clusters/h/nodes/0/exec"
	grep -qx counter "$MNT/clusters/h/nodes/0/stdout"
	grep -q 'Z restart: killed every process cclfs started$' "$MNT/clusters/h/log"
	# on an interrupted cluster too (stopped processes die as well); a
	# write fires it like touch
	start_loop h 0
	p0=$(cat "$STATE/nodes/h/0/pid")
	echo interrupt >"$MNT/clusters/h/state"
	wait_state h interrupted
	expect_eq "$(proc_state "$p0")" T
	echo now >"$MNT/clusters/h/restart"
	proc_gone "$p0"
	echo resume >"$MNT/clusters/h/state"
	wait_state h running
	counter_stays "$STATE/nodes/h/0"
}

@test "terminate kills and removes the nodes; rmdir of the cluster and of its contract only then" {
	contract c 2
	deploy c h
	deploy c other
	start_loop h 1
	pid=$(cat "$STATE/nodes/h/1/pid")
	# not before it is terminated
	run_shell "rmdir clusters/h"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[ -d "$MNT/clusters/h" ]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h: the cluster is running; only a terminated cluster can be removed (echo terminated > clusters/h/state)"
	run_shell "rmdir contracts/c"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[[ "$(cat "$MNT/contracts/c/error")" == *"this contract is running; terminate it first"* ]]
	expect_eq "$(stat -c %s "$MNT/contracts/c/error")" "$(wc -c <"$MNT/contracts/c/error")" "size of contracts/c/error"
	echo terminated >"$MNT/clusters/h/state"
	wait_state h terminated
	expect_no_error "$MNT/clusters/h/error"
	proc_gone "$pid"
	[ ! -e "$STATE/nodes/h" ]
	[ -d "$STATE/nodes/other/0" ]
	for n in 0 1; do
		grep -qx 'state: terminated' "$MNT/clusters/h/nodes/$n/status"
	done
	grep -q 'Z state: terminating$' "$MNT/clusters/h/log"
	grep -q 'Z state: terminated$' "$MNT/clusters/h/log"
	# nothing runs on a terminated cluster
	run_shell "echo true > clusters/h/nodes/0/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/nodes/0/exec: the cluster is terminated; commands run only on a running cluster"
	run_shell "echo true > clusters/h/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	run_shell "touch clusters/h/restart"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Device or resource busy"* ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/restart: the cluster is terminated; restart needs it running or interrupted"
	# the contract is still busy with the other cluster
	run_shell "rmdir contracts/c"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[[ "$(cat "$MNT/contracts/c/error")" == *"cluster other of this contract is running; terminate it first (echo terminated > clusters/other/state)" ]]
	# rmdir of the terminated cluster works now
	rmdir "$MNT/clusters/h"
	[ ! -e "$MNT/clusters/h" ]
	expect_eq "$(ls "$MNT/clusters")" other "ls clusters"
	expect_eq "$(ls "$MNT/contracts/c/clusters")" other "clusters of c"
	[ ! -e "$STATE/clusters/h" ]
	# the verb works too; then the contract can go
	echo terminate >"$MNT/clusters/other/state"
	wait_state other terminated
	[ ! -e "$STATE/nodes/other" ]
	rmdir "$MNT/contracts/c"
	[ ! -e "$MNT/contracts/c" ]
	expect_eq "$(cat "$MNT/clusters/other/state")" terminated
	rmdir "$MNT/clusters/other"
	expect_eq "$(ls "$MNT/clusters")" "" "ls clusters"
}

@test "terminate right after deploy: terminated, every node terminated, progress only grows" {
	contract c 64
	echo big >"$MNT/contracts/c/deploy"
	echo terminated >"$MNT/clusters/big/state"
	seen=()
	for i in $(seq 1 200); do
		s=$(cat "$MNT/clusters/big/state")
		seen+=("$s")
		[ "$s" = terminated ] && break
		sleep 0.01
	done
	wait_state big terminated
	[ ! -e "$STATE/nodes/big" ]
	created=$(grep -h '^instance_id: local-' "$MNT"/clusters/big/nodes/*/status | wc -l)
	echo "# $created of 64 nodes had been created" >&3
	failed=0
	# every node of a terminated cluster says so, created or not
	expect_eq "$(grep -h '^state: ' "$MNT"/clusters/big/nodes/*/status | sort | uniq -c | sed 's/^ *//')" \
		"64 state: terminated" "node states ($created nodes had been created)" || failed=1
	# "terminating K/N" is the terminate's own progress over all N nodes
	# (a node never created is still looked after): K only grows, and no
	# deploy step adds to it.
	prev=0
	for s in "${seen[@]}"; do
		if [[ "$s" =~ ^terminating\ ([0-9]+)/64$ ]]; then
			[ "${BASH_REMATCH[1]}" -ge "$prev" ] || {
				echo "terminating went back from $prev: ${seen[*]}" >&2
				failed=1
			}
			prev=${BASH_REMATCH[1]}
		fi
	done
	[ "$failed" = 0 ]
}

@test "state: asking for the current or ongoing state is accepted; illegal transitions are EBUSY, bad words EINVAL; read-only files" {
	contract c 1
	deploy c h
	S=$MNT/clusters/h/state
	# resume a running cluster: where it is already, nothing to do
	echo resumed >"$S"
	expect_eq "$(cat "$S")" running
	expect_no_error "$MNT/clusters/h/error"
	echo interrupt >"$S"
	wait_state h interrupted
	echo interrupted >"$S"
	expect_eq "$(cat "$S")" interrupted
	expect_no_error "$MNT/clusters/h/error"
	# whitespace around the word is ignored
	printf '  resume \n' >"$S"
	wait_state h running
	# bad words: EINVAL with the reason, nothing changes
	run_shell "echo bogus > clusters/h/state"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Invalid argument" ]]
	expect_error "$MNT/clusters/h/error" \
		'clusters/h/state: "bogus" is not a state to ask for; write interrupted, resumed or terminated'
	grep -q 'clusters/h/state: "bogus" is not a state to ask for' "$MNT/clusters/h/log"
	run_shell "echo running > clusters/h/state"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Invalid argument" ]]
	expect_eq "$(cat "$S")" running
	# a terminated cluster cannot be interrupted or resumed
	echo terminated >"$S"
	wait_state h terminated
	run_shell "echo interrupted > clusters/h/state"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/state: the cluster is terminated; it cannot be interrupted from there"
	run_shell "echo resume > clusters/h/state"
	[ "$status" -eq 1 ]
	[[ "$output" == *"write error: Device or resource busy" ]]
	expect_error "$MNT/clusters/h/error" \
		"clusters/h/state: the cluster is terminated; it cannot be resumed from there"
	expect_eq "$(cat "$S")" terminated
	# terminating it again is where it is: accepted
	echo terminate >"$S"
	expect_no_error "$MNT/clusters/h/error"
	expect_eq "$(cat "$S")" terminated
}

@test "info, log, error, hostfile and a node's status and results are read-only; modes tell (outputs the owner's only)" {
	contract c 1
	deploy c h
	echo 'echo out' >"$MNT/clusters/h/nodes/0/exec"
	for f in info log error hostfile nodes/0/status nodes/0/stdout \
		nodes/0/stderr nodes/0/exit_status nodes/0/info; do
		before=$(cat "$MNT/clusters/h/$f")
		run_shell "echo x > clusters/h/$f"
		[ "$status" -eq 1 ]
		[[ "$output" == *"clusters/h/$f: Permission denied" ]] || {
			echo "echo x > clusters/h/$f: [$output]" >&2
			false
		}
		# error and log now explain the refusal; nothing else changes
		case $f in
		error | log) ;;
		*) expect_eq "$(cat "$MNT/clusters/h/$f")" "$before" "clusters/h/$f after a refused write" ;;
		esac
		expect_error "$MNT/clusters/h/error" \
			"clusters/h/$f: this file is read-only; cclfs writes it"
		# what commands printed is the mounting user's only
		case $f in
		log | error | nodes/0/stdout | nodes/0/stderr) want=400 ;;
		*) want=444 ;;
		esac
		expect_eq "$(stat -c %a "$MNT/clusters/h/$f")" $want "mode of clusters/h/$f"
	done
	for f in state restart; do
		expect_eq "$(stat -c %a "$MNT/clusters/h/$f")" 644 "mode of clusters/h/$f"
	done
	for f in exec nodes/0/exec; do
		expect_eq "$(stat -c %a "$MNT/clusters/h/$f")" 600 "mode of clusters/h/$f"
	done
}

@test "unmount and mount again: running and interrupted clusters come back as they were" {
	contract c 2
	deploy c run
	deploy c int
	start_loop int 0
	pid=$(cat "$STATE/nodes/int/0/pid")
	echo interrupted >"$MNT/clusters/int/state"
	wait_state int interrupted
	echo 'echo before' >"$MNT/clusters/run/nodes/1/exec"
	snap() {
		local h n
		for h in run int; do
			cat "$MNT/clusters/$h/state" "$MNT/clusters/$h/log"
			grep -v '^cost_so_far\|^hours_billed' "$MNT/clusters/$h/info"
			for n in 0 1; do
				cat "$MNT/clusters/$h/nodes/$n/status"
			done
		done
		cat "$MNT/clusters/run/nodes/1/stdout" "$MNT/clusters/run/nodes/1/exit_status"
	}
	before=$(snap)
	cclfs_unmount
	cclfs_mount
	after=$(snap)
	expect_eq "$after" "$before" "clusters after the remount"
	expect_eq "$(cat "$MNT/clusters/run/state")" running
	expect_eq "$(cat "$MNT/clusters/int/state")" interrupted
	expect_eq "$(ls "$MNT/contracts/c/clusters" | tr '\n' ' ')" "int run "
	expect_eq "$(readlink "$MNT/clusters/int/contract")" ../../contracts/c
	# the interrupted loop is still stopped
	expect_eq "$(proc_state "$pid")" T
	counter_stays "$STATE/nodes/int/0"
	# exec still works on the running one, not on the interrupted one
	echo 'echo "after-$CCLFS_NODE"' >"$MNT/clusters/run/exec"
	expect_eq "$(cat "$MNT/clusters/run/exec")" $'0: after-0\n1: after-1'
	run_shell "echo true > clusters/int/exec"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Device or resource busy" ]]
	# the interrupted one resumes
	c=$(counter "$STATE/nodes/int/0")
	echo resume >"$MNT/clusters/int/state"
	wait_state int running
	wait_counter_above "$STATE/nodes/int/0" "$c"
	echo 'echo up' >"$MNT/clusters/int/nodes/1/exec"
	expect_eq "$(cat "$MNT/clusters/int/nodes/1/stdout")" up
	# a terminate after the remount leaves nothing behind
	echo terminated >"$MNT/clusters/int/state"
	wait_state int terminated
	proc_gone "$pid"
	[ ! -e "$STATE/nodes/int" ]
}

@test "kill -9 of the daemon during a deploy: the next mount finishes it, without orphans" {
	contract c16 16
	contract c64 64
	# (name, contract, nodes, delay before the crash)
	for attempt in big:c16:16:0 big2:c64:64:0 big3:c64:64:0.002 big4:c64:64:0.005; do
		IFS=: read -r h c n delay <<<"$attempt"
		echo "$h" >"$MNT/contracts/$c/deploy"
		sleep "$delay"
		seen=$(cat "$MNT/clusters/$h/state")
		cclfs_crash
		cclfs_mount
		echo "# $h: state before the crash: $seen" >&3
		wait_state "$h" running
		expect_eq "$(ls "$MNT/clusters/$h/nodes" | wc -l)" "$n" "node folders of $h"
		expect_eq "$(grep -lx 'state: running' "$MNT"/clusters/"$h"/nodes/*/status | wc -l)" "$n" "running nodes of $h"
		expect_eq "$(grep -h '^instance_id: local-' "$MNT"/clusters/"$h"/nodes/*/status | sort -u | wc -l)" "$n" "distinct instance ids of $h"
		expect_eq "$(ls "$STATE/nodes/$h" | sort -n | tr '\n' ' ')" "$(seq 0 $((n - 1)) | tr '\n' ' ')" "node directories of $h"
		echo 'echo "$CCLFS_NODE"' >"$MNT/clusters/$h/exec"
		expect_eq "$(wc -l <"$MNT/clusters/$h/exec")" "$n" "exec lines of $h"
		grep -q "Z deployed $n nodes\$" "$MNT/clusters/$h/log"
	done
	# a crash during a terminate: the next mount finishes it
	echo terminated >"$MNT/clusters/big2/state"
	cclfs_crash
	cclfs_mount
	wait_state big2 terminated
	[ ! -e "$STATE/nodes/big2" ]
	expect_eq "$(grep -lx 'state: terminated' "$MNT"/clusters/big2/nodes/*/status | wc -l)" 64 "terminated nodes of big2"
}

@test "8 concurrent scripts exec on one node through read-write descriptors: each sees only its own output" {
	contract c 1
	deploy c h
	E=$MNT/clusters/h/nodes/0/exec
	pids=()
	for i in 1 2 3 4 5 6 7 8; do
		if [ $((i % 2)) = 1 ]; then
			# one descriptor for every round
			(
				exec 5<>"$E"
				for r in 1 2 3 4; do
					echo "echo me-$i-$r; sleep 0.1" >&5 || echo "WRITE FAILED"
					cat <&5
				done
			) >"$TESTDIR/out.$i" 2>&1 &
		else
			# a descriptor per round
			(
				for r in 1 2 3 4; do
					(
						exec 5<>"$E"
						echo "echo me-$i-$r; sleep 0.1" >&5 || echo "WRITE FAILED"
						cat <&5
					)
				done
			) >"$TESTDIR/out.$i" 2>&1 &
		fi
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p"
	done
	for i in 1 2 3 4 5 6 7 8; do
		expect_eq "$(cat "$TESTDIR/out.$i")" "$(printf "me-$i-%s\n" 1 2 3 4 | head -c -1)" "script $i"
	done
	expect_eq "$(cat "$MNT/clusters/h/nodes/0/exit_status")" 0
	[[ "$(cat "$MNT/clusters/h/nodes/0/stdout")" =~ ^me-[1-8]-[1-4]$ ]]
}

@test "a 10 MB output lands whole in stdout; a command that sleeps works and blocks nothing else" {
	contract c 2
	deploy c h
	N=$MNT/clusters/h/nodes
	echo 'head -c 10000000 /dev/zero | tr "\0" x' >"$N/0/exec"
	expect_eq "$(stat -c %s "$N/0/stdout")" 10000000 "stat size of stdout"
	expect_eq "$(wc -c <"$N/0/stdout")" 10000000 "bytes read from stdout"
	expect_eq "$(tr -d x <"$N/0/stdout" | wc -c)" 0 "bytes other than x"
	# read back through the read-write descriptor too
	n=$(
		exec 5<>"$N/1/exec"
		echo 'head -c 10000000 /dev/zero | tr "\0" y' >&5 || echo "WRITE FAILED"
		cat <&5 | wc -c
	)
	expect_eq "$n" 10000000 "bytes read on the descriptor"
	# a command that sleeps 2 s; meanwhile the tree answers and another
	# node runs its own command
	t0=$(now_ms)
	(echo 'sleep 2; echo woke' >"$N/0/exec") &
	p=$!
	sleep 0.3
	t1=$(now_ms)
	expect_eq "$(cat "$MNT/clusters/h/state")" running
	ls -l "$MNT/clusters/h" >/dev/null
	echo 'echo quick' >"$N/1/exec"
	expect_eq "$(cat "$N/1/stdout")" quick
	t=$(($(now_ms) - t1))
	[ "$t" -lt 1000 ] || {
		echo "reads and another node's exec took $t ms during a sleeping command" >&2
		false
	}
	wait "$p"
	t=$(($(now_ms) - t0))
	[ "$t" -ge 2000 ]
	expect_eq "$(cat "$N/0/stdout")" woke
	expect_eq "$(cat "$N/0/exit_status")" 0
}

@test "a deploy that fails part way, then terminate: no node directory is left" {
	contract c 3
	# Node 1 cannot be made: a file stands where its directory would go.
	mkdir -p "$STATE/nodes/h"
	: >"$STATE/nodes/h/1"
	echo h >"$MNT/contracts/c/deploy"
	wait_state h failed
	[[ "$(cat "$MNT/clusters/h/error")" == "clusters/h: deploy failed: "* ]]
	rm "$STATE/nodes/h/1"
	echo terminated >"$MNT/clusters/h/state"
	wait_state h terminated
	[ ! -e "$STATE/nodes/h" ]
	rmdir "$MNT/clusters/h"
	# The same name starts clean: no old log lines.
	echo h >"$MNT/contracts/c/deploy"
	wait_state h running
	[ "$(grep -c 'deploy requested' "$MNT/clusters/h/log")" = 1 ]
	! grep -q failed "$MNT/clusters/h/log"
}
