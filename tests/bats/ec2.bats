#!/usr/bin/env bats
# The ec2 provider against the fake EC2 endpoint of tests/fakeec2 (every
# request's SigV4 signature checked with botocore; each instance a real
# sshd on 127.0.2.k): the tutorial, API faults, credentials, instances of
# unknown clusters, capacity, images, spot, resize and the security group
# made per cluster. The crash tests are ec2_crash.bats's.

load helpers
load fakeec2
load mpiring
load ec2suite
load cloudfiles

FAKE_NET=127.0.2

teardown() {
	ec2suite_teardown
}

@test "tutorial on ec2: deploy 4 nodes, exec, interrupt, resume with new addresses, terminate" {
	ec2_setup
	ec2_mount
	contract c1 4
	echo subnet-0cclfs >contracts/c1/config/subnet_id
	echo sg-0cclfs >contracts/c1/config/security_group_id
	# Two instances a page: DescribeInstances must follow nextToken.
	fake_post /_fake/settings '{"page_size": 2}'
	touch contracts/c1/resolve
	grep -q 'ec2.*t3.micro' contracts/c1/resolution
	echo t1 >contracts/c1/deploy
	wait_state t1 running
	[ "$(ls clusters/t1/nodes)" = "$(printf '0\n1\n2\n3')" ]
	# One call per role, whatever N is.
	[ "$(fake_calls RunInstances)" = 1 ]
	[ "$(fake_count t1 running)" = 4 ]
	[ "$(fake_py "sorted(i['tags']['cclfs:role'] for i in s['instances'])")" = "['worker', 'worker', 'worker', 'worker']" ]
	[ "$(fake_py "len(set(i['client_token'] for i in s['instances']))")" = 1 ]
	[ "$(fake_py "all(i['volume_tags'].get('cclfs:cluster') == 't1' for i in s['instances'])")" = True ]
	[ "$(fake_py "sorted(set((i['subnet_id'], tuple(i['security_group_ids'])) for i in s['instances']))")" = "[('subnet-0cclfs', ('sg-0cclfs',))]" ]
	[ "$(fake_py "s['placement_groups']")" = "['cclfs-t1-$(fake_py "s['instances'][0]['tags']['cclfs:token'][:8]")']" ]
	# The generated private key stays under the state directory, 0600.
	key=$(ls "$STATE"/keys/t1-* | grep -v '\.pub$')
	[ "$(stat -c %a "$key")" = 600 ]
	for n in 0 1 2 3; do
		grep -q '^state: running' clusters/t1/nodes/$n/status
		addr=$(sed -n 's/^address: //p' clusters/t1/nodes/$n/status)
		id=$(sed -n 's/^instance_id: //p' clusters/t1/nodes/$n/status)
		[ "$(fake_py "[i['address'] for i in s['instances'] if i['id'] == '$id'][0]")" = "$addr" ]
		echo 'echo $SSH_CONNECTION; echo $CCLFS_INSTANCE' >clusters/t1/nodes/$n/exec
		[ "$(head -1 clusters/t1/nodes/$n/stdout | cut -d' ' -f3)" = "$addr" ]
		[ "$(tail -1 clusters/t1/nodes/$n/stdout)" = "t1/$n" ]
		before[n]=$addr
	done
	echo 'hostname' >clusters/t1/exec
	# The host keys were recorded under the instance ids.
	grep -q '^i-' "$STATE/known_hosts"

	echo interrupted >clusters/t1/state
	wait_state t1 interrupted
	[ "$(fake_count t1 stopped)" = 4 ]
	[ "$(fake_calls StopInstances)" = 1 ]
	run bash -c 'echo true > clusters/t1/nodes/0/exec'
	[ "$status" -ne 0 ]

	echo resumed >clusters/t1/state
	wait_state t1 running
	[ "$(fake_calls StartInstances)" = 1 ]
	for n in 0 1 2 3; do
		addr=$(sed -n 's/^address: //p' clusters/t1/nodes/$n/status)
		[ "$addr" != "${before[n]}" ]
		echo 'echo $SSH_CONNECTION' >clusters/t1/nodes/$n/exec
		[ "$(cut -d' ' -f3 clusters/t1/nodes/$n/stdout)" = "$addr" ]
		grep -q "^$addr " clusters/t1/hostfile
		! grep -q "^${before[n]} " clusters/t1/hostfile
	done
	# The nodes' own copy of the hostfile follows too.
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/t1/nodes/2/exec
	[ "$(cat clusters/t1/nodes/2/stdout)" = "$(cat clusters/t1/hostfile)" ]

	echo terminated >clusters/t1/state
	wait_state t1 terminated
	[ "$(fake_calls TerminateInstances)" = 1 ]
	[ "$(fake_count t1 terminated)" = 4 ]
	nothing_left
	[ ! -e "$key" ] && [ ! -e "$key.pub" ]
	# Every sshd of the instances is gone.
	# (Gone, or a zombie; one reaped between two looks is gone.)
	for pid in $(fake_py "' '.join(str(i['sshd_pid']) for i in s['instances'] if i['sshd_pid'])"); do
		st=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) || st=gone
		[ "$st" = gone ] || [ "$st" = Z ]
	done
	rmdir clusters/t1
	[ "$(fake_py "s['launches_per_token']")" != "" ]
	[ "$(fake_py "max(s['launches_per_token'].values())")" = 1 ]
}

@test "ManagerWorkers on ec2: one launch per role, workers through the manager" {
	ec2_setup
	ec2_mount
	contract mw 2 ManagerWorkers
	echo m1 >contracts/mw/deploy
	wait_state m1 running
	[ "$(fake_calls RunInstances)" = 2 ]
	[ "$(fake_py "sorted(i['tags']['cclfs:role'] for i in s['instances'])")" = "['manager', 'worker', 'worker']" ]
	waddr=$(sed -n 's/^address: //p' clusters/m1/nodes/1/status)
	echo 'echo $SSH_CONNECTION' >clusters/m1/nodes/1/exec
	[ "$(cut -d' ' -f3 clusters/m1/nodes/1/stdout)" = "$waddr" ]
	# cclfs holds no connection of its own to a worker: the manager's
	# sshd carries it.
	run bash -c "ss -Htnp state established dst $waddr:22"
	[ "$status" -eq 0 ]
	[[ $output == *sshd* ]]
	[[ $output != *cclfs* ]]
	echo terminated >clusters/m1/state
	wait_state m1 terminated
	nothing_left
}

@test "PeerWorkersMPI on ec2: node 0 reaches every node with the cluster's key, also after resume" {
	ec2_setup
	ec2_mount
	contract pm 3 PeerWorkersMPI
	echo pm >contracts/pm/deploy
	wait_state pm running
	# Each instance's own home authorizes the cluster's key, once.
	for h in "$FAKE"/testhosts/host*/; do
		[ "$(grep -c ' cclfs:pm:' "$h/home/.ssh/authorized_keys")" = 1 ]
	done
	[ "$(ls -d "$FAKE"/testhosts/host*/ | wc -l)" = 3 ]
	mpi_reach_all pm 1 2
	# Resumed instances have new addresses: the host keys mpirun's ssh
	# checks follow them (strict checking, no prompt).
	echo interrupted >clusters/pm/state
	wait_state pm interrupted
	echo resumed >clusters/pm/state
	wait_state pm running
	mpi_reach_all pm 1 2
	echo terminated >clusters/pm/state
	wait_state pm terminated
	nothing_left
}

@test "files/ of an ec2 node: the instance's working directory over SFTP, kept across interrupt and resume with a new address" {
	ec2_setup
	ec2_mount
	contract c 2
	echo f1 >contracts/c/deploy
	wait_state f1 running
	cloudfiles_check f1 0
	cloudfiles_check f1 1
	cloudfiles_kept f1 1
	echo terminated >clusters/f1/state
	wait_state f1 terminated
}

@test "throttling, 5xx and timeouts are retried; the ClientToken never launches twice" {
	ec2_setup
	ec2_mount
	contract c 2
	# (Each fault of RunInstances skips the deploy's dry run.)
	fake_post /_fake/faults '[{"action": "RunInstances", "code": "RequestLimitExceeded", "status": 503, "skip": 1, "count": 2},
		{"action": "DescribeInstances", "code": "InternalError", "status": 500, "count": 2},
		{"action": "CreatePlacementGroup", "code": "Unavailable", "status": 503, "count": 1},
		{"action": "ImportKeyPair", "status": 502, "code": "", "count": 1}]'
	echo r1 >contracts/c/deploy
	wait_state r1 running
	[ "$(grep -c '^RunInstances 503 RequestLimitExceeded' "$FAKE/requests.log")" = 2 ]
	[ "$(grep -c '^DescribeInstances 500 InternalError' "$FAKE/requests.log")" = 2 ]
	[ "$(fake_py "max(s['launches_per_token'].values())")" = 1 ]
	[ "$(fake_count r1 running)" = 2 ]
	echo true >clusters/r1/exec

	# A RunInstances whose answer comes too late is sent again with the
	# same ClientToken: the fake launched once, the second call gets the
	# same instances.
	fake_post /_fake/faults '[{"action": "RunInstances", "delay_ms": 4000, "skip": 1, "count": 1}]'
	echo r2 >contracts/c/deploy
	wait_state r2 running
	[ "$(fake_calls RunInstances)" -ge 3 ]
	[ "$(fake_py "max(s['launches_per_token'].values())")" = 1 ]
	[ "$(fake_count r2 '')" = 2 ]

	fake_post /_fake/faults '[{"action": "TerminateInstances", "code": "RequestLimitExceeded", "status": 503, "count": 3},
		{"action": "StopInstances", "code": "InternalError", "status": 500, "count": 1}]'
	echo interrupted >clusters/r2/state
	wait_state r2 interrupted
	echo terminated >clusters/r2/state
	echo terminated >clusters/r1/state
	wait_state r2 terminated
	wait_state r1 terminated
	nothing_left
}

@test "capacity: zones a and b exhausted, launched in c; the log has the three attempts and nothing of a and b is left" {
	ec2_setup
	ec2_mount
	contract mw 2 ManagerWorkers
	fake_post /_fake/settings '{"capacity": [{"zone": "us-east-1a"}, {"zone": "us-east-1b", "instance_type": "t3.micro", "market": "on-demand"}]}'
	echo z1 >contracts/mw/deploy
	wait_state z1 running
	log=$(cat clusters/z1/log)
	[[ "$log" == *"launch attempt 1 of 5: t3.micro in us-east-1a"* ]]
	[[ "$log" == *"launch attempt 1 of 5 failed in us-east-1a: RunInstances: InsufficientInstanceCapacity"* ]]
	[[ "$log" == *"launch attempt 2 of 5: t3.micro in us-east-1b"* ]]
	[[ "$log" == *"launch attempt 3 of 5: t3.micro in us-east-1c"* ]]
	[[ "$log" == *"launched in us-east-1c"* ]]
	[[ "$log" != *"attempt 4"* ]]
	# Every instance is in c; nothing was launched (so nothing is left)
	# in a or b, whose capacity errors launch nothing.
	[ "$(fake_py "sorted(set((i['zone'], i['state']) for i in s['instances']))")" = "[('us-east-1c', 'running')]" ]
	[ "$(fake_count z1)" = 3 ]
	[ "$(grep -c '^RunInstances 500 InsufficientInstanceCapacity' "$FAKE/requests.log")" = 2 ]
	echo terminated >clusters/z1/state
	wait_state z1 terminated
	nothing_left
}

@test "capacity: a failure after the manager launched cleans the attempt up before the next zone; exhausted everywhere, the deploy fails with nothing left" {
	ec2_setup
	ec2_mount
	contract mw 2 ManagerWorkers
	# The manager (on demand) launches; the spot workers find no capacity
	# in a, then in b.
	echo 'manager=on-demand worker=spot' >contracts/mw/config/market
	echo 2 >contracts/mw/config/failover
	fake_post /_fake/settings '{"capacity": [{"market": "spot"}]}'
	echo f1 >contracts/mw/deploy
	wait_state f1 failed
	grep -q 'There is no Spot capacity available that matches your request' clusters/f1/error
	grep -q 'everything launched for the cluster was terminated' clusters/f1/error
	log=$(cat clusters/f1/log)
	[[ "$log" == *"launch attempt 1 of 2 failed in us-east-1a"* ]]
	[[ "$log" == *"launch attempt 2 of 2: t3.micro in us-east-1b"* ]]
	[[ "$log" != *"attempt 3"* ]]
	# Each attempt's manager was terminated: the one of a before b began.
	[ "$(fake_py "sorted((i['zone'], i['state'], i['tags']['cclfs:role']) for i in s['instances'])")" = "[('us-east-1a', 'terminated', 'manager'), ('us-east-1b', 'terminated', 'manager')]" ]
	[ "$(fake_calls RunInstances)" = 4 ]
	nothing_left
	echo terminated >clusters/f1/state
	wait_state f1 terminated
	rmdir clusters/f1
}

@test "capacity: with cheapest, no capacity for the cheapest type in any zone moves the deploy to the next candidate; resolution and info show what was launched" {
	ec2_setup
	ec2_mount
	mkdir contracts/ch
	echo ec2 >contracts/ch/node_provider
	echo EC2Type_T3 >contracts/ch/node_machinetype
	echo 2 >contracts/ch/node_count
	echo cheapest >contracts/ch/config/resolve_policy
	echo 2 >contracts/ch/config/failover
	touch contracts/ch/resolve
	[ "$(cut -f3 contracts/ch/resolution)" = t3a.nano ]
	fake_post /_fake/settings '{"capacity": [{"instance_type": "t3a.nano"}]}'
	echo n1 >contracts/ch/deploy
	wait_state n1 running
	log=$(cat clusters/n1/log)
	[[ "$log" == *"launch attempt 2 of 2: t3a.nano in us-east-1b"* ]]
	[[ "$log" == *"no capacity for ec2 t3a.nano in us-east-1 ("*"); moving to the next candidate (1 of 3): t3.nano in us-east-1 at 0.0052 USD/hour"* ]]
	[ "$(cut -f3,4,5 contracts/ch/resolution)" = "$(printf 't3.nano\t0.0052\tus-east-1')" ]
	grep -q '^nodes: ec2 t3.nano$' clusters/n1/info
	grep -q '^price_per_hour: 0.0104$' clusters/n1/info
	[ "$(fake_py "sorted(set((i['instance_type'], i['state']) for i in s['instances']))")" = "[('t3.nano', 'running')]" ]
	echo terminated >clusters/n1/state
	wait_state n1 terminated
	nothing_left
	# Without cheapest, no other candidate is tried.
	echo unique >contracts/ch/config/resolve_policy
	echo t3a.nano >contracts/ch/node_machinetype
	echo n2 >contracts/ch/deploy
	wait_state n2 failed
	! grep -q 'next candidate' clusters/n2/log
	nothing_left
}

# ami_of REGION PARAMETER: the AMI the fake's public SSM parameter holds.
ami_of() {
	python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import fake_ec2; print(fake_ec2.region_ami(sys.argv[2], sys.argv[3]))' \
		"$(dirname "$FAKE_PY")" "$1" "$2"
}

@test "image: nothing but credentials launches al2023 for the type's architecture with its own group; an arm64 resolution gets the arm64 image; an alias names the distribution" {
	ec2_setup 'imageid = ""'
	ec2_mount
	contract c 1
	echo i1 >contracts/c/deploy
	wait_state i1 running
	want=$(ami_of us-east-1 /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64)
	[ "$(fake_py "[(i['image_id'], i['architecture']) for i in s['instances']]")" = "[('$want', 'x86_64')]" ]
	[ "$(fake_calls GetParameter)" = 1 ]
	[ "$(fake_sg_count)" = 1 ]
	echo terminated >clusters/i1/state
	wait_state i1 terminated
	[ "$(fake_sg_count)" = 0 ]
	nothing_left
	# The cheapest arm64 type of at most 1 GiB: a Graviton, and its image.
	mkdir contracts/a
	echo ec2 >contracts/a/node_provider
	echo arm64 >contracts/a/node_architecture
	echo 'atmost 1G' >contracts/a/node_memory_size
	echo cheapest >contracts/a/config/resolve_policy
	touch contracts/a/resolve
	type=$(cut -f3 contracts/a/resolution)
	[[ "$type" == t4g.* ]]
	echo i2 >contracts/a/deploy
	wait_state i2 running
	want=$(ami_of us-east-1 /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64)
	[ "$(fake_py "[(i['image_id'], i['architecture'], i['instance_type']) for i in s['instances'] if i['state'] == 'running']")" = "[('$want', 'arm64', '$type')]" ]
	echo terminated >clusters/i2/state
	wait_state i2 terminated
	# An alias: the distribution's image for the architecture.
	echo ubuntu-24.04 >contracts/a/config/imageid
	echo i3 >contracts/a/deploy
	wait_state i3 running
	want=$(ami_of us-east-1 /aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id)
	[ "$(fake_py "[i['image_id'] for i in s['instances'] if i['state'] == 'running']")" = "['$want']" ]
	echo terminated >clusters/i3/state
	wait_state i3 terminated
	echo centos-7 >contracts/a/config/imageid
	echo i4 >contracts/a/deploy
	wait_state i4 failed
	grep -q 'config/imageid: centos-7 is neither an AMI id (ami-...) nor an image alias (al2023, ubuntu-24.04, ubuntu-22.04, debian-12)' clusters/i4/error
	nothing_left
}

@test "image: an AMI whose architecture is not the type's is refused at deploy, naming both; nothing is made" {
	ec2_setup
	ec2_mount
	contract c 2
	echo ami-0armimage >contracts/c/config/imageid
	echo m1 >contracts/c/deploy
	wait_state m1 failed
	grep -q 'config/imageid: the image ami-0armimage is arm64 but the instance type t3.micro is x86_64; write an x86_64 image or an alias' clusters/m1/error
	[ "$(fake_calls DescribeImages)" = 1 ]
	[ "$(fake_py "sum(s['dry_runs'].values())")" = 0 ]
	[ "$(fake_calls RunInstances)" = None ]
	[ "$(fake_calls ImportKeyPair)" = None ]
	nothing_left
	[ "$(fake_sg_count)" = 0 ]
	[ -z "$(ls "$STATE/keys")" ]
}

@test "preflight: a missing permission or a quota fails the deploy before anything is made, naming what is missing" {
	ec2_setup
	ec2_mount
	contract c 2
	for action in ImportKeyPair CreatePlacementGroup CreateSecurityGroup RunInstances; do
		fake_post /_fake/settings "{\"deny\": [\"$action\"]}"
		echo "p$action" >contracts/c/deploy
		wait_state "p$action" failed
		grep -q "preflight: the AWS credentials are not allowed ec2:$action, so nothing was created; grant it to them (.*is not authorized to perform: ec2:$action" "clusters/p$action/error"
		[ "$(fake_py "s['dry_runs'].get('$action')")" -ge 1 ]
	done
	fake_post /_fake/settings '{"deny": []}'
	fake_post /_fake/faults '[{"action": "RunInstances", "code": "VcpuLimitExceeded", "count": 1,
		"message": "You have requested more vCPU capacity than your current vCPU limit of 0 allows."}]'
	echo pq >contracts/c/deploy
	wait_state pq failed
	grep -q 'preflight: RunInstances would fail, so nothing was created: RunInstances: VcpuLimitExceeded: You have requested more vCPU' clusters/pq/error
	for a in ImportKeyPair CreatePlacementGroup CreateSecurityGroup RunInstances AuthorizeSecurityGroupIngress; do
		[ "$(fake_calls $a)" = None ]
	done
	nothing_left
	[ "$(fake_sg_count)" = 0 ]
	[ -z "$(ls "$STATE/keys")" ]
	# Allowed again: the same contract deploys.
	echo pok >contracts/c/deploy
	wait_state pok running
	echo terminated >clusters/pok/state
	wait_state pok terminated
	nothing_left
}

@test "spot: nodes launched one-time; a reclaimed node shows preempted, comes back with its rank and a new address, and the MPI ring runs again" {
	ec2_setup
	ec2_mount
	contract sp 3 PeerWorkersMPI
	echo spot >contracts/sp/config/market
	printf 'OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n' >contracts/sp/config/environment
	ring_build
	echo s1 >contracts/sp/deploy
	wait_state s1 running
	echo "$MPIBIN/ring" >clusters/s1/mpiexec
	[ "$(grep '^rank' clusters/s1/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	grep -q '^market: spot$' clusters/s1/info
	[ "$(fake_py "sorted(set(i['market'] for i in s['instances']))")" = "['spot']" ]
	before=$(sed -n 's/^address: //p' clusters/s1/nodes/1/status)
	old=$(sed -n 's/^instance_id: //p' clusters/s1/nodes/1/status)
	fake_post /_fake/reclaim "{\"instance_id\": \"$old\"}"
	# Seen by the watch: preempted, then relaunched and set up again.
	for _ in $(seq 1 600); do
		grep -q "keys are set up again" clusters/s1/log && break
		sleep 0.05
	done
	log=$(cat clusters/s1/log)
	[[ "$log" == *"node 1 ($old) was preempted: ec2 took its spot instance back; it is relaunched"* ]]
	[[ "$log" == *"node 1 relaunched as i-"* ]]
	[[ "$log" == *"the hostfile, SSH and MPI keys are set up again on every node"* ]]
	wait_state s1 running
	# The node's copy of the hostfile follows too.
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/s1/nodes/2/exec
	[ "$(cat clusters/s1/nodes/2/stdout)" = "$(cat clusters/s1/hostfile)" ]
	after=$(sed -n 's/^address: //p' clusters/s1/nodes/1/status)
	new=$(sed -n 's/^instance_id: //p' clusters/s1/nodes/1/status)
	[ "$after" != "$before" ] && [ "$new" != "$old" ]
	grep -q '^state: running$' clusters/s1/nodes/1/status
	grep -q "^$after " clusters/s1/hostfile
	! grep -q "^$before " clusters/s1/hostfile
	[ "$(fake_py "sorted(i['state_reason_code'] for i in s['instances'] if i['id'] == '$old')")" = "['Server.SpotInstanceTermination']" ]
	[ "$(fake_count s1 running)" = 3 ]
	mpi_reach_all s1 1 2
	# The MPI ring over the cluster runs again.
	echo "$MPIBIN/ring" >clusters/s1/mpiexec
	[ "$(grep '^rank' clusters/s1/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	[ "$(cat clusters/s1/mpi_exit_status)" = 0 ]
	echo terminated >clusters/s1/state
	wait_state s1 terminated
	nothing_left
}

@test "resize on ec2: a grow is one RunInstances with a token of its own and sets up every node (MPI ring); a shrink terminates the highest ranks only; a later grow is a launch of its own" {
	ec2_setup
	ec2_mount
	contract rz 2 PeerWorkersMPI
	printf 'OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n' >contracts/rz/config/environment
	ring_build
	echo g >contracts/rz/deploy
	wait_state g running
	[ "$(fake_calls RunInstances)" = 1 ]
	first=$(node_ids g)
	echo 5 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(cat clusters/g/node_count)" = 5 ]
	# One call for the three new ranks, with a token of its own.
	[ "$(fake_calls RunInstances)" = 2 ]
	[ "$(fake_py "sorted(len([i for i in s['instances'] if i['client_token'] == t]) for t in set(i['client_token'] for i in s['instances']))")" = "[2, 3]" ]
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 2 3 4 " ]
	[ "$(node_ids g | cut -d' ' -f1-2)" = "$first" ]
	[ "$(live_ids g)" = "$(sorted_ids g)" ]
	grown=$(node_ids g)
	# In the zone of the cluster, every node with the hostfile.
	[ "$(fake_py "len(set(i['zone'] for i in s['instances'] if i['state'] == 'running'))")" = 1 ]
	[ "$(wc -l <clusters/g/hostfile)" = 5 ]
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/g/nodes/4/exec
	[ "$(cat clusters/g/nodes/4/stdout)" = "$(cat clusters/g/hostfile)" ]
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/g/nodes/0/exec
	[ "$(cat clusters/g/nodes/0/stdout)" = "$(cat clusters/g/hostfile)" ]
	mpi_reach_all g 1 2 3 4
	echo "$MPIBIN/ring" >clusters/g/mpiexec
	[ "$(grep '^rank' clusters/g/mpi_stdout | sort -k2n)" = "$(ring_expected 5)" ]
	grep -q 'resize: from 2 to 5 nodes' clusters/g/log
	grep -q 'resized: 5 nodes' clusters/g/log
	# Shrink: ranks 3 and 4 terminated, in one call; the rest untouched.
	gone=$(node_ids g | cut -d' ' -f4-5)
	echo 3 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(fake_calls TerminateInstances)" = 1 ]
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	[ "$(node_ids g)" = "$(echo "$grown" | cut -d' ' -f1-3)" ]
	for id in $gone; do
		[ "$(fake_py "[i['state'] for i in s['instances'] if i['id'] == '$id']")" = "['terminated']" ]
	done
	[ "$(fake_count g running)" = 3 ]
	[ "$(wc -l <clusters/g/hostfile)" = 3 ]
	# What the cluster shares stays: key pair, placement and security group.
	[ "$(fake_py "(len(s['key_pairs']), len(s['placement_groups']))")" = "(1, 1)" ]
	[ "$(fake_sg_count)" = 1 ]
	echo "$MPIBIN/ring" >clusters/g/mpiexec
	[ "$(grep '^rank' clusters/g/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	# Growing to ranks the cluster had before is a new launch.
	echo 5 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(fake_calls RunInstances)" = 3 ]
	[ "$(fake_count g running)" = 5 ]
	[ "$(fake_py "len(set(i['client_token'] for i in s['instances']))")" = 3 ]
	crash_check
	echo terminated >clusters/g/state
	wait_state g terminated
	nothing_left
	[ "$(fake_sg_count)" = 0 ]
}

@test "spot per role: the manager on demand, the workers spot; resolution says each role's market" {
	ec2_setup
	ec2_mount
	contract mw 2 ManagerWorkers
	echo 'manager=on-demand worker=spot' >contracts/mw/config/market
	touch contracts/mw/resolve
	[ "$(cut -f1,7 contracts/mw/resolution)" = "$(printf 'manager\ton-demand\nworker\tspot')" ]
	# No EC2 spot price before a refresh: the workers' price is unknown.
	[ "$(cut -f1,4 contracts/mw/resolution)" = "$(printf 'manager\t0.0104\nworker\tunknown')" ]
	echo r1 >contracts/mw/deploy
	wait_state r1 running
	grep -q '^market: manager=on-demand worker=spot$' clusters/r1/info
	[ "$(fake_py "sorted((i['tags']['cclfs:role'], i['market']) for i in s['instances'])")" = "[('manager', 'on-demand'), ('worker', 'spot'), ('worker', 'spot')]" ]
	echo terminated >clusters/r1/state
	wait_state r1 terminated
	nothing_left
}

@test "spot: with config/recover false a reclaimed node stays down and the cluster says it is degraded; interrupt is refused" {
	ec2_setup
	ec2_mount
	contract sp 2
	echo spot >contracts/sp/config/market
	echo no >contracts/sp/config/recover
	echo s2 >contracts/sp/deploy
	wait_state s2 running
	old=$(sed -n 's/^instance_id: //p' clusters/s2/nodes/0/status)
	fake_post /_fake/reclaim "{\"instance_id\": \"$old\"}"
	for _ in $(seq 1 400); do
		[ "$(cat clusters/s2/state)" = "running (degraded: 1 node preempted)" ] && break
		sleep 0.05
	done
	[ "$(cat clusters/s2/state)" = "running (degraded: 1 node preempted)" ]
	grep -q '^state: preempted$' clusters/s2/nodes/0/status
	grep -q 'config/recover is false: it stays down' clusters/s2/log
	[ "$(fake_calls RunInstances)" = 1 ]
	# One-time spot instances cannot be stopped: refused, nothing changes.
	run bash -c "echo interrupted >clusters/s2/state"
	[ "$status" = 1 ]
	[[ "$output" == *"Device or resource busy"* ]]
	grep -q 'the cluster has spot nodes, which ec2 cannot stop; terminate it, or deploy it on-demand (config/market) to interrupt it' clusters/s2/error
	[ "$(cat clusters/s2/state)" = "running (degraded: 1 node preempted)" ]
	[ "$(fake_calls StopInstances)" = None ]
	echo terminated >clusters/s2/state
	wait_state s2 terminated
	nothing_left
}

@test "a bad image and a forbidden call fail the deploy with AWS's message" {
	ec2_setup
	ec2_mount
	contract c 2
	echo ami-bad0000 >contracts/c/config/imageid
	echo b1 >contracts/c/deploy
	wait_state b1 failed
	grep -q "InvalidAMIID.NotFound: The image id '\[ami-bad0000\]' does not exist" clusters/b1/error
	nothing_left

	echo ami-0good >contracts/c/config/imageid
	fake_post /_fake/faults '[{"action": "RunInstances", "code": "UnauthorizedOperation", "status": 403, "count": 1,
		"message": "You are not authorized to perform this operation."}]'
	echo b2 >contracts/c/deploy
	wait_state b2 failed
	grep -q 'RunInstances: UnauthorizedOperation: You are not authorized' clusters/b2/error
	[ "$(grep -c '^RunInstances 403' "$FAKE/requests.log")" = 1 ]
	nothing_left
	[ "$(fake_py "s['instances'][0]['image_id'] if s['instances'] else 'none'")" = none ]
}

@test "credentials: missing, wrong, from a profile, with a session token" {
	ec2_setup
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	ec2_mount
	contract c 1
	echo n1 >contracts/c/deploy
	wait_state n1 failed
	grep -q 'no AWS credentials: looked in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), in profile default of .*/.aws/credentials' clusters/n1/error
	cd "$TESTDIR" && cclfs_unmount

	# A wrong secret: the fake's botocore check refuses the signature.
	export AWS_ACCESS_KEY_ID=$AKID AWS_SECRET_ACCESS_KEY=not-the-secret
	ec2_mount
	echo n2 >contracts/c/deploy
	wait_state n2 failed
	grep -q 'SignatureDoesNotMatch' clusters/n2/error
	! grep -q 'not-the-secret' clusters/n2/error clusters/n2/log "$TESTDIR/daemon.log"
	cd "$TESTDIR" && cclfs_unmount

	# A profile with a session token, from ~/.aws.
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	mkdir -p "$HOME/.aws"
	printf '[work]\naws_access_key_id = AKIDSESSION\naws_secret_access_key = session-secret\naws_session_token = session-token-1\n' >"$HOME/.aws/credentials"
	export AWS_PROFILE=work
	ec2_mount
	echo n3 >contracts/c/deploy
	wait_state n3 running
	echo true >clusters/n3/nodes/0/exec
	echo terminated >clusters/n3/state
	wait_state n3 terminated
	! grep -rq 'session-secret\|session-token-1' "$MNT/clusters" "$TESTDIR/daemon.log" "$STATE/cclfs.db"*
	unset AWS_PROFILE
}

@test "instances and security groups tagged with a cluster this state directory does not know are reported, not touched" {
	ec2_setup
	ec2_mount
	contract c 1
	echo mine >contracts/c/deploy
	wait_state mine running
	cd "$TESTDIR" && cclfs_unmount
	# Another state directory: it knows no cluster.
	STATE=$TESTDIR/state2
	ec2_mount
	# The report of the instances comes first, the groups' after a second
	# call: wait for both (the check runs in the background of the mount).
	for _ in $(seq 1 600); do
		[ "$(grep -c 'tagged cclfs:cluster=mine' "$TESTDIR/daemon.log")" -ge 2 ] && break
		sleep 0.05
	done
	grep -q "ec2: instance i-[0-9a-f]* (running, us-east-1) is tagged cclfs:cluster=mine (token [0-9a-f]*) but belongs to no cluster of this state directory; it was left alone" "$TESTDIR/daemon.log"
	# Its security group too.
	grep -q "ec2: security group sg-[0-9a-f]* (cclfs-mine-[0-9a-f]*, us-east-1) is tagged cclfs:cluster=mine (token [0-9a-f]*) but belongs to no cluster of this state directory; it was left alone" "$TESTDIR/daemon.log"
	[ "$(fake_sg_count)" = 1 ]
	[ "$(fake_count mine running)" = 1 ]
	[ "$(fake_py "s['calls'].get('TerminateInstances', 0) + s['calls'].get('StopInstances', 0)")" = 0 ]
	cd "$TESTDIR" && cclfs_unmount
	reports=$(grep -c 'tagged cclfs:cluster=mine ' "$TESTDIR/daemon.log")
	STATE=$TESTDIR/state
	ec2_mount
	sleep 1
	[ "$(grep -c 'tagged cclfs:cluster=mine ' "$TESTDIR/daemon.log")" = "$reports" ]
	echo terminated >clusters/mine/state
	wait_state mine terminated
	nothing_left
}

# The cluster's group name: cclfs-HANDLE-TOKEN8.
sg_name() {
	echo "cclfs-$1-$(fake_py "[i['tags']['cclfs:token'][:8] for i in s['instances'] if i['tags']['cclfs:cluster'] == '$1'][0]")"
}

@test "security group: made per cluster in the default VPC (SSH from 0.0.0.0/0, all from itself), used, deleted at terminate through DependencyViolation" {
	ec2_setup
	ec2_mount
	contract c 2
	echo s1 >contracts/c/deploy
	wait_state s1 running
	name=$(sg_name s1)
	[ "$(fake_py "[(g['vpc_id'], g['tags'].get('cclfs:cluster'), g['tags'].get('cclfs:token') == s['instances'][0]['tags']['cclfs:token']) for g in s['security_groups']]")" = "[('vpc-0default', 's1', True)]" ]
	[ "$(fake_py "[g['name'] for g in s['security_groups']]")" = "['$name']" ]
	[ "$(fake_sg_rules "$name")" = "$(printf -- '-1 None self\ntcp 22 0.0.0.0/0')" ]
	gid=$(fake_py "s['security_groups'][0]['id']")
	[ "$(fake_py "sorted(set(tuple(i['security_group_ids']) for i in s['instances']))")" = "[('$gid',)]" ]
	[ "$(fake_calls DescribeVpcs)" = 1 ]
	# The group is in use for a while after the instances are gone, and
	# EC2 may say so a few more times.
	fake_post /_fake/settings '{"sg_release_ms": 300}'
	fake_post /_fake/faults '[{"action": "DeleteSecurityGroup", "code": "DependencyViolation", "count": 3}]'
	echo terminated >clusters/s1/state
	wait_state s1 terminated
	[ "$(fake_sg_count)" = 0 ]
	[ "$(fake_calls DeleteSecurityGroup)" -ge 4 ]
	nothing_left
}

@test "security group: in the subnet's VPC, SSH from [ec2] ssh_cidr" {
	ec2_setup 'ssh_cidr = "203.0.113.0/24"' 'subnet_id = "subnet-0cclfs"'
	ec2_mount
	contract c 1
	echo s2 >contracts/c/deploy
	wait_state s2 running
	name=$(sg_name s2)
	[ "$(fake_py "[(g['name'], g['vpc_id']) for g in s['security_groups']]")" = "[('$name', 'vpc-0cclfs')]" ]
	[ "$(fake_sg_rules "$name")" = "$(printf -- '-1 None self\ntcp 22 203.0.113.0/24')" ]
	[ "$(fake_calls DescribeSubnets)" = 1 ]
	[ "$(fake_calls DescribeVpcs)" = None ]
	echo terminated >clusters/s2/state
	wait_state s2 terminated
	[ "$(fake_sg_count)" = 0 ]
	nothing_left
}

@test "security group: a named one (config/security_group_id) is used, never made nor deleted" {
	ec2_setup
	ec2_mount
	contract c 2
	echo sg-0cclfs >contracts/c/config/security_group_id
	echo s3 >contracts/c/deploy
	wait_state s3 running
	[ "$(fake_py "sorted(set(tuple(i['security_group_ids']) for i in s['instances']))")" = "[('sg-0cclfs',)]" ]
	echo terminated >clusters/s3/state
	wait_state s3 terminated
	[ "$(fake_py "[s['calls'].get(a) for a in ('CreateSecurityGroup', 'AuthorizeSecurityGroupIngress', 'DeleteSecurityGroup')]")" = "[None, None, None]" ]
	# Looked at only by the check at mount (groups of unknown clusters).
	[ "$(fake_py "s['calls'].get('DescribeSecurityGroups', 0)")" -le 1 ]
	nothing_left
}

@test "costs and budget on ec2: stopped instances are not billed; a tiny budget stops the cluster and keeps it down" {
	ec2_setup
	ec2_mount
	contract b 2
	# Two t3.micro at 0.0104 USD an hour: a ten-thousandth of a dollar
	# in about 17 s from the launch.
	echo 0.0001 >contracts/b/config/budget
	echo b >contracts/b/deploy
	wait_state b running
	echo interrupted >clusters/b/wait
	[[ "$(cat clusters/b/error)" == "clusters/b: the cluster has cost 0.0001"*" USD, which reaches its budget of 0.0001 USD (config/budget of contract b); interrupting it" ]]
	[ "$(fake_py "sorted(i['state'] for i in s['instances'])")" = "['stopped', 'stopped']" ]
	local cost
	cost=$(awk -F'\t' '$1 == "b" { print $8 }' costs)
	[ "$(awk -F'\t' '$1 == "b" { print $6 }' costs)" = 0.000000 ]
	sleep 2
	[ "$(awk -F'\t' '$1 == "b" { print $8 }' costs)" = "$cost" ]
	run_shell 'echo resumed > clusters/b/state'
	[ "$status" -ne 0 ]
	grep -q "raise config/budget of contract b to resume it" clusters/b/error
	echo terminated >clusters/b/state
	wait_state b terminated
	nothing_left
}
