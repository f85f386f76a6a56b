#!/usr/bin/env bats
# What clusters cost and the limits a contract puts on them, on the local
# provider priced by [local] price: cost_so_far counts only the time nodes
# were billable (running; not interrupted), the mount's costs file has a
# line per cluster and a total, a spent config/budget interrupts (or
# terminates) the cluster and keeps it down until raised, and
# config/idle_minutes stops a cluster nobody uses (CCLFS_TEST_MINUTE_MS,
# a scale for tests only, makes a minute short). Bounds are generous: the
# machine is shared; nothing here times cclfs.

load helpers

setup() {
	cclfs_setup --no-mount
	# 3600 USD an hour: a node costs a dollar a second.
	printf '[local]\nprice = "3600"\n' >"$TESTDIR/cclfs.conf"
}

teardown() {
	cclfs_kill_node_processes
	cclfs_teardown
}

mount_priced() {
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
}

# deployed NAME COUNT [config/KEY=VALUE...]: a running local cluster NAME.
deployed() {
	local c=$MNT/contracts/$1 kv
	mkdir "$c"
	echo local >"$c/node_provider"
	echo "$2" >"$c/node_count"
	shift 2
	for kv in "$@"; do
		echo "${kv#*=}" >"$c/config/${kv%%=*}"
	done
	echo "${c##*/}" >"$c/deploy"
	echo running >"$MNT/clusters/${c##*/}/wait"
}

# The field $2 (1-based) of the costs line of cluster $1.
costs_field() {
	awk -F'\t' -v h="$1" -v f="$2" '$1 == h { print $f }' "$MNT/costs"
}

info_field() { # handle name
	sed -n "s/^$2: //p" "$MNT/clusters/$1/info"
}

@test "costs: a line per cluster and a total; interrupted time is not billed; size and time are true" {
	mount_priced
	cd "$MNT"
	[ "$(stat -c %a costs)" = 444 ]
	[ "$(head -1 costs)" = "$(printf 'handle\tprovider\tinstance_type\tregion\tnodes\tprice_per_hour\thours_billed\tcost_so_far')" ]
	[ "$(tail -1 costs | cut -f1)" = total ]
	deployed a 2
	# The resolution and info carry [local]'s price.
	[ "$(cut -f4 contracts/a/resolution)" = 3600 ]
	[ "$(info_field a price_per_hour)" = 7200 ]
	[ "$(costs_field a 2)" = local ]
	[ "$(costs_field a 5)" = 2 ]
	[ "$(costs_field a 6)" = 7200.000000 ]
	sleep 1
	local before after
	before=$(costs_field a 8)
	sleep 0.5
	after=$(costs_field a 8)
	# Running: the cost grows (two nodes, two dollars a second).
	awk -v a="$before" -v b="$after" 'BEGIN { exit !(b > a + 0.5) }'
	echo interrupted >clusters/a/state
	echo interrupted >clusters/a/wait
	before=$(costs_field a 8)
	[ "$(costs_field a 6)" = 0.000000 ]
	sleep 1.5
	# Interrupted: not a cent more, in costs and in info.
	[ "$(costs_field a 8)" = "$before" ]
	[ "$(info_field a cost_so_far)" = "$(printf '%.2f' "$before")" ]
	# Two nodes for about 1.5 s or more: the node-hours (shown to 4
	# places: 0.18 USD at 3600 an hour) and the cost agree.
	awk -v h="$(info_field a hours_billed)" -v c="$before" \
		'BEGIN { exit !(h > 0 && c > 2.5 && c < 3600 * h + 0.2 && c > 3600 * h - 0.2) }'
	[ "$(stat -c %s costs)" -eq "$(wc -c <costs)" ]
	# The file changes only while a node is billed: its time is when the
	# last one stopped, and stays.
	local t1
	t1=$(stat -c %Y costs)
	sleep 1.2
	[ "$(stat -c %Y costs)" = "$t1" ]
	echo resumed >clusters/a/state
	echo running >clusters/a/wait
	[ "$(costs_field a 6)" = 7200.000000 ]
	deployed b 1
	[ "$(grep -c . costs)" -eq 4 ]
	awk -F'\t' '$1 == "total" { exit !($6 == "10800.000000") }' costs
	# Grown to 3 nodes, a cluster's price follows.
	echo 3 >clusters/a/node_count
	echo running >clusters/a/wait
	[ "$(info_field a price_per_hour)" = 10800 ]
	[ "$(costs_field a 6)" = 10800.000000 ]
	[ "$(costs_field a 5)" = 3 ]
	echo terminated >clusters/a/state
	echo terminated >clusters/a/wait
	[ "$(costs_field a 5)" = 0 ]
}

@test "budget: a spent budget interrupts the cluster with the reason; resume needs a raised budget" {
	mount_priced
	cd "$MNT"
	deployed a 2 budget=3
	echo interrupted >clusters/a/wait
	[[ "$(cat clusters/a/error)" == "clusters/a: the cluster has cost "*" USD, which reaches its budget of 3 USD (config/budget of contract a); interrupting it" ]]
	grep -q "reaches its budget of 3 USD" clusters/a/log
	awk -v c="$(info_field a cost_so_far)" 'BEGIN { exit !(c >= 3) }'
	run_shell 'echo resumed > clusters/a/state'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Device or resource busy"* ]]
	[[ "$(cat clusters/a/error)" == "clusters/a/state: the cluster has cost "*" USD and its budget is 3 USD; raise config/budget of contract a to resume it" ]]
	[ "$(cat clusters/a/state)" = interrupted ]
	echo 1000 >contracts/a/config/budget
	echo resumed >clusters/a/state
	echo running >clusters/a/wait
	echo hostname >clusters/a/exec
}

@test "budget: budget_action terminate terminates the cluster" {
	mount_priced
	cd "$MNT"
	deployed t 1 budget=1.5 budget_action=terminate
	echo terminated >clusters/t/wait
	[[ "$(cat clusters/t/error)" == *"reaches its budget of 1.5 USD (config/budget of contract t); terminating it" ]]
	[ ! -d "$STATE/nodes/t" ] || [ -z "$(ls "$STATE/nodes/t")" ]
}

@test "idle: a cluster nobody uses is interrupted; commands and processes cclfs started keep it up" {
	export CCLFS_TEST_MINUTE_MS=200
	mount_priced
	cd "$MNT"
	# Ten minutes of 0.2 s: idle after 2 s.
	deployed i 2 idle_minutes=10
	local t0=${EPOCHREALTIME/./}
	# A background process started through exec keeps the cluster up
	# while it runs (3 s), past the 2 s of idleness.
	echo 'nohup sleep 3 >/dev/null 2>&1 &' >clusters/i/nodes/1/exec
	echo interrupted >clusters/i/wait
	local waited=$(((${EPOCHREALTIME/./} - t0) / 1000))
	[ "$waited" -ge 3000 ]
	[[ "$(cat clusters/i/error)" == "clusters/i: the cluster has been idle for 10 minutes (config/idle_minutes of contract i): no exec, mpiexec or files/ use through the mount and no process cclfs started on its nodes; interrupting it" ]]
	# Resumed, it is idle again from then on.
	echo resumed >clusters/i/state
	echo running >clusters/i/wait
	echo interrupted >clusters/i/wait
	[ "$(grep -c "has been idle for 10 minutes" clusters/i/log)" -eq 2 ]
}

@test "idle: files/ use through the mount is activity; idle_action terminate" {
	export CCLFS_TEST_MINUTE_MS=200
	mount_priced
	cd "$MNT"
	deployed f 1 idle_minutes=10 idle_action=terminate
	local t0=${EPOCHREALTIME/./} i
	# Touch files/ every 0.5 s for 3 s: still running after that.
	for i in 1 2 3 4 5 6; do
		echo "$i" >clusters/f/nodes/0/files/beat
		sleep 0.5
	done
	[ "$(cat clusters/f/state)" = running ]
	echo terminated >clusters/f/wait
	[[ "$(cat clusters/f/error)" == *"idle for 10 minutes"*"terminating it" ]]
	[ "$(((${EPOCHREALTIME/./} - t0) / 1000))" -ge 3000 ]
}

@test "limits passed while unmounted are acted on at mount" {
	mount_priced
	cd "$MNT"
	# Two dollars a second, a budget of 4: spent about 2 s from now.
	deployed r 2 budget=4
	cd "$TESTDIR"
	cclfs_unmount
	sleep 3
	mount_priced
	cd "$MNT"
	echo interrupted >clusters/r/wait
	grep -q "reaches its budget of 4 USD" clusters/r/log
}

@test "[local] price: a bad price or key is refused at mount, naming it" {
	printf '[local]\nprice = "cheap"\n' >"$TESTDIR/cclfs.conf"
	run "$CCLFS_BIN" "$MNT" -f -o statedir="$STATE" -o config="$TESTDIR/cclfs.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *'[local] price: "cheap" is not valid; it takes a price in US dollars per hour, such as 0.25'* ]]
	printf '[local]\ncost = "1"\n' >"$TESTDIR/cclfs.conf"
	run "$CCLFS_BIN" "$MNT" -f -o statedir="$STATE" -o config="$TESTDIR/cclfs.conf"
	[ "$status" -ne 0 ]
	[[ "$output" == *'[local] has no key "cost"; it takes price'* ]]
	! cclfs_is_mounted
}
