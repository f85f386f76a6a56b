#!/usr/bin/env bats
# The ec2 provider's crash tests, against the fake EC2 endpoint of
# tests/fakeec2 (instances are sshds on 127.0.7.k, apart from ec2.bats's so
# that both suites run at once): the daemon killed at random points of
# deploy, terminate, grows and shrinks, a spot relaunch, a zone failover
# and the making of a security group leaks and duplicates nothing.

load helpers
load fakeec2
load ec2suite

FAKE_NET=127.0.7

teardown() {
	ec2suite_teardown
}

@test "crash: the daemon killed at random points of grows and shrinks on ec2 leaks and duplicates nothing" {
	ec2_setup
	ec2_mount
	contract c 2
	fake_post /_fake/settings '{"latency_ms": 20}'
	echo r >contracts/c/deploy
	wait_state r running
	for i in $(seq 1 8); do
		# A grow takes about a second against the fake, a shrink less.
		if ((i % 2)); then to=5 most=0.7; else to=2 most=0.15; fi
		echo $to >clusters/r/node_count
		delay=$(random_delay "$most")
		sleep "$delay"
		was=$(cat clusters/r/state)
		cd "$TESTDIR" && cclfs_crash && ec2_mount
		# The next mount finishes the resize.
		echo running >clusters/r/wait
		echo "# crash $i while resizing to $to after ${delay}s ($was)" >&3
		[ "$(ls clusters/r/nodes | wc -l)" = $to ]
		crash_check
		# Every instance EC2 runs for the cluster is a node's, once.
		[ "$(live_ids r)" = "$(sorted_ids r)" ]
	done
	echo terminated >clusters/r/state
	wait_state r terminated
	nothing_left
	[ "$(fake_sg_count)" = 0 ]
}

@test "crash: the daemon killed at 20 random points of deploy and terminate leaks and duplicates nothing" {
	ec2_setup
	ec2_mount
	contract c 2
	fake_post /_fake/settings '{"latency_ms": 20}'
	crash_deploys_and_terminates ec2_mount crash_check ec2_live
	nothing_left
	crash_check
}

@test "crash: the daemon killed at random points of a spot relaunch and of a zone failover leaks and duplicates nothing" {
	ec2_setup
	ec2_mount
	contract c 2
	echo spot >contracts/c/config/market
	fake_post /_fake/settings '{"latency_ms": 20}'
	echo r >contracts/c/deploy
	wait_state r running
	for i in $(seq 1 4); do
		old=$(sed -n 's/^instance_id: //p' clusters/r/nodes/1/status)
		fake_post /_fake/reclaim "{\"instance_id\": \"$old\"}"
		delay=$(random_delay 1.2)
		sleep "$delay"
		cd "$TESTDIR" && cclfs_crash && ec2_mount
		# Relaunched once, whatever the crash interrupted.
		for _ in $(seq 1 600); do
			[ "$(cat clusters/r/state)" = running ] && grep -q '^state: running$' clusters/r/nodes/1/status &&
				[ "$(sed -n 's/^instance_id: //p' clusters/r/nodes/1/status)" != "$old" ] && break
			sleep 0.05
		done
		[ "$(sed -n 's/^instance_id: //p' clusters/r/nodes/1/status)" != "$old" ]
		echo "# crash $i during a relaunch after ${delay}s" >&3
		crash_check
		[ "$(fake_py "len([i for i in s['instances'] if i['state'] not in ('terminated', 'shutting-down')])")" = 2 ]
	done
	echo terminated >clusters/r/state
	wait_state r terminated
	nothing_left
	# A failover: zone a has no capacity; killed while it moves on.
	echo on-demand >contracts/c/config/market
	fake_post /_fake/settings '{"capacity": [{"zone": "us-east-1a"}]}'
	for i in $(seq 1 3); do
		h=z$i
		echo $h >contracts/c/deploy
		delay=$(random_delay 0.8)
		sleep "$delay"
		cd "$TESTDIR" && cclfs_crash && ec2_mount
		st=$(wait_settled $h)
		echo "# crash $i during a failover after ${delay}s: $st $(cat clusters/$h/error)" >&3
		# Resumed at the mount: zone b has room.
		[ "$st" = running ]
		[ "$(fake_py "sorted(set(i['zone'] for i in s['instances'] if i['state'] == 'running'))")" = "['us-east-1b']" ]
		crash_check
		echo terminated >clusters/$h/state
		wait_state $h terminated
		[ "$(fake_count $h running)" = 0 ]
	done
	nothing_left
	[ "$(fake_sg_count)" = 0 ]
}

@test "security group: the daemon killed after CreateSecurityGroup made it, before its answer, leaves nothing after the next mount's terminate" {
	ec2_setup 'request_timeout = "30"'
	ec2_mount
	contract c 1
	# The first look at the state builds the fake's catalog (seconds): not
	# while the answer below is late.
	[ "$(fake_sg_count)" = 0 ]
	# The group is made (after its dry run), its answer late: the daemon
	# dies without its id. Late by 15 s: on a loaded machine the looks
	# below (a python each) take seconds.
	fake_post /_fake/faults '[{"action": "CreateSecurityGroup", "skip": 1, "delay_ms": 15000, "delay_after": true}]'
	echo s4 >contracts/c/deploy
	for _ in $(seq 1 200); do
		[ "$(fake_sg_count)" = 1 ] && break
		sleep 0.02
	done
	[ "$(fake_sg_count)" = 1 ]
	[ "$(fake_calls RunInstances)" = None ]
	cd "$TESTDIR" && cclfs_crash && ec2_mount
	for _ in $(seq 1 400); do
		st=$(cat clusters/s4/state)
		[ "$st" = running ] || [ "$st" = failed ] && break
		sleep 0.05
	done
	[ "$st" = running ] || [ "$st" = failed ]
	# Found again by its name, not made twice.
	[ "$(fake_calls CreateSecurityGroup)" = 1 ]
	echo terminated >clusters/s4/state
	wait_state s4 terminated
	[ "$(fake_sg_count)" = 0 ]
	nothing_left
}
