#!/usr/bin/env bats
# The gcp provider against the fake Compute Engine of tests/fakegce (every
# JWT's signature and every Bearer token checked; each instance a real sshd
# on 127.0.5.k): the CloudClusters tutorial, ManagerWorkers, MPI, firewall
# rules, credentials, zones without capacity, spot, faults, instances of
# unknown clusters, and a daemon killed at random points.

load helpers
load fakegce
load mpiring
load cloudfiles

FAKE_NET=127.0.5

# Start the fake and write cclfs.conf for it; extra lines go to [gcp].
gcp_setup() {
	cclfs_setup --no-mount
	gce_start
	gce_conf "$@"
}

# Say why an mpiexec failed, then fail.
mpi_failed() {
	cat "clusters/$1/error" "clusters/$1/mpi_stderr" >&2
	return 1
}

teardown() {
	fakegce_teardown
	if [ -n "${MPIBIN:-}" ]; then
		rm -rf "$MPIBIN"
	fi
}

@test "tutorial on gcp: deploy 4 nodes, exec, interrupt, resume with new addresses, terminate" {
	gcp_setup
	gce_mount
	gce_contract c1 4
	touch contracts/c1/resolve
	grep -q 'gcp.*e2-standard-2.*us-central1' contracts/c1/resolution
	echo t1 >contracts/c1/deploy
	wait_state t1 running
	[ "$(ls clusters/t1/nodes)" = "$(printf '0\n1\n2\n3')" ]
	# One bulkInsert for the four, in the region's first zone.
	[ "$(gce_calls 'POST bulkInsert')" = 1 ]
	[ "$(gce_count t1 RUNNING)" = 4 ]
	[ "$(gce_py "sorted(set((i['zone'], i['labels']['cclfs-role'], i['machine_type']) for i in s['instances']))")" = "[('us-central1-a', 'worker', 'e2-standard-2')]" ]
	[ "$(gce_py "len(set(i['request_id'] for i in s['instances']))")" = 1 ]
	# Named by rank: the number in the name is the rank + 1.
	for n in 0 1 2 3; do
		id=$(sed -n 's/^instance_id: //p' clusters/t1/nodes/$n/status)
		[[ $id == us-central1-a/cclfs-t1-*-w-000$((n + 1)) ]]
		addr=$(sed -n 's/^address: //p' clusters/t1/nodes/$n/status)
		[ "$(gce_py "[i['natIP'] for i in s['instances'] if i['name'] == '${id#*/}'][0]")" = "$addr" ]
		echo 'echo $SSH_CONNECTION; echo $CCLFS_INSTANCE' >clusters/t1/nodes/$n/exec
		[ "$(head -1 clusters/t1/nodes/$n/stdout | cut -d' ' -f3)" = "$addr" ]
		before[n]=$addr
	done
	# The debian-12 image of the type's architecture, the login's key in
	# the ssh-keys metadata, the cluster's network tag.
	[ "$(gce_py "sorted(set(i['image'] for i in s['instances']))")" = "['debian-cloud/debian-12-bookworm-v20241112']" ]
	[ "$(gce_py "sorted(set(tuple(i['users']) for i in s['instances']))")" = "[('root',)]" ]
	tag=$(gce_py "s['instances'][0]['tags'][0]")
	[[ $tag == cclfs-t1-* ]]
	# Two firewall rules: SSH from anywhere, everything from the tag.
	[ "$(gce_py "sorted((f['name'][len('$tag'):], f.get('sourceRanges'), f.get('sourceTags'), f['targetTags'], [a['IPProtocol'] for a in f['allowed']]) for f in s['firewalls'])")" = "[('-internal', None, ['$tag'], ['$tag'], ['all']), ('-ssh', ['0.0.0.0/0'], None, ['$tag'], ['tcp'])]" ]
	# The generated key stays under the state directory, 0600.
	key=$(ls "$STATE"/keys/t1-* | grep -v '\.pub$')
	[ "$(stat -c %a "$key")" = 600 ]
	# Each host key came from the instance's guest attributes, before
	# the first connection.
	[ "$(gce_calls 'GET getGuestAttributes')" = 4 ]
	for n in 0 1 2 3; do
		id=$(sed -n 's/^instance_id: //p' clusters/t1/nodes/$n/status)
		dir=$(gce_py "[i['host_dir'] for i in s['instances'] if i['name'] == '${id#*/}'][0]")
		[ "$(grep "^gce:$id " "$STATE/known_hosts" | cut -d' ' -f2-3)" = "$(cut -d' ' -f1-2 "$dir/ssh_host_ed25519_key.pub")" ]
	done

	echo interrupted >clusters/t1/state
	wait_state t1 interrupted
	[ "$(gce_count t1 TERMINATED)" = 4 ]
	[ "$(gce_calls 'POST stop')" = 4 ]
	echo resumed >clusters/t1/state
	wait_state t1 running
	[ "$(gce_calls 'POST start')" = 4 ]
	for n in 0 1 2 3; do
		addr=$(sed -n 's/^address: //p' clusters/t1/nodes/$n/status)
		[ "$addr" != "${before[n]}" ]
		echo 'echo $SSH_CONNECTION' >clusters/t1/nodes/$n/exec
		[ "$(cut -d' ' -f3 clusters/t1/nodes/$n/stdout)" = "$addr" ]
		grep -q "^$addr " clusters/t1/hostfile
	done
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/t1/nodes/2/exec
	[ "$(cat clusters/t1/nodes/2/stdout)" = "$(cat clusters/t1/hostfile)" ]

	echo terminated >clusters/t1/state
	wait_state t1 terminated
	[ "$(gce_calls 'DELETE instance')" = 4 ]
	gce_nothing_left
	[ ! -e "$key" ] && [ ! -e "$key.pub" ]
	[ "$(gce_py "max(s['launches'].values())")" = 4 ]
	# No secret anywhere: not the private key, not a token.
	pk=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["private_key"].splitlines()[1])' "$KEY")
	! grep -rqF -- "$pk" "$MNT/clusters" "$TESTDIR/daemon.log" "$STATE"
	! grep -rq 'ya29\.' "$MNT/clusters" "$TESTDIR/daemon.log" "$STATE"
}

@test "files/ of gcp nodes: the manager's and a worker's through the manager, over SFTP, kept across interrupt and resume" {
	gcp_setup
	gce_mount
	gce_contract mw 2 ManagerWorkers
	echo f1 >contracts/mw/deploy
	wait_state f1 running
	cloudfiles_check f1 manager
	cloudfiles_check f1 1
	cloudfiles_kept f1 1
	echo terminated >clusters/f1/state
	wait_state f1 terminated
	gce_nothing_left
}

@test "ManagerWorkers on gcp: one bulkInsert per role, workers only through the manager" {
	gcp_setup
	gce_mount
	gce_contract mw 3 ManagerWorkers
	echo m1 >contracts/mw/deploy
	wait_state m1 running
	[ "$(gce_calls 'POST bulkInsert')" = 2 ]
	[ "$(gce_py "sorted(i['labels']['cclfs-role'] for i in s['instances'])")" = "['manager', 'worker', 'worker', 'worker']" ]
	[[ $(sed -n 's/^instance_id: //p' clusters/m1/nodes/manager/status) == us-central1-a/cclfs-m1-*-m-1 ]]
	for n in 0 1 2; do
		waddr=$(sed -n 's/^address: //p' clusters/m1/nodes/$n/status)
		# A worker's address is its internal one, reached from the
		# manager.
		[ "$(gce_py "[i['networkIP'] for i in s['instances'] if i['labels']['cclfs-role'] == 'worker' and i['name'].endswith('-w-000$((n + 1))')][0]")" = "$waddr" ]
		echo 'hostname >/dev/null; echo ok' >clusters/m1/nodes/$n/exec
		[ "$(cat clusters/m1/nodes/$n/stdout)" = ok ]
	done
	# cclfs holds no connection of its own to a worker.
	for n in 0 1 2; do
		nat=$(gce_py "[i['natIP'] for i in s['instances'] if i['name'].endswith('-w-000$((n + 1))')][0]")
		run bash -c "ss -Htnp state established dst $nat:22"
		[[ $output != *cclfs* ]]
	done
	echo terminated >clusters/m1/state
	wait_state m1 terminated
	gce_nothing_left
}

@test "PeerWorkersMPI on gcp: a compact placement policy, the MPI ring, node 0 reaches every node also after resume" {
	gcp_setup
	gce_mount
	gce_contract pm 3 PeerWorkersMPI n2-standard-2
	printf 'OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n' >contracts/pm/config/environment
	ring_build
	echo pm >contracts/pm/deploy
	wait_state pm running
	tag=$(gce_py "s['instances'][0]['tags'][0]")
	[ "$(gce_py "[(p['name'], p['groupPlacementPolicy']['collocation']) for p in s['resource_policies']]")" = "[('$tag', 'COLLOCATED')]" ]
	[ "$(gce_py "sorted(set(tuple(i['resource_policies']) for i in s['instances']))")" = "[('$tag',)]" ]
	# Another state directory's mount reports the policy with the
	# instances and rules, and leaves it alone.
	cd "$TESTDIR" && cclfs_unmount
	STATE=$TESTDIR/state2
	gce_mount
	wait_until 30 grep -q "gcp: placement policy $tag (us-central1) is of cluster pm (token [0-9a-f]*) but belongs to no cluster of this state directory; it was left alone" "$TESTDIR/daemon.log"
	[ "$(gce_calls 'DELETE resourcePolicy')" = 0 ]
	cd "$TESTDIR" && cclfs_unmount
	STATE=$TESTDIR/state
	gce_mount
	wait_state pm running
	echo "$MPIBIN/ring" >clusters/pm/mpiexec || mpi_failed pm
	[ "$(grep '^rank' clusters/pm/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	mpi_reach_all pm 1 2
	echo interrupted >clusters/pm/state
	wait_state pm interrupted
	echo resumed >clusters/pm/state
	wait_state pm running
	mpi_reach_all pm 1 2
	echo "$MPIBIN/ring" >clusters/pm/mpiexec || mpi_failed pm
	[ "$(grep '^rank' clusters/pm/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	echo terminated >clusters/pm/state
	wait_state pm terminated
	gce_nothing_left
}

@test "credentials: a key the token endpoint refuses, a missing key file: the deploy fails naming them, nothing is made; the project and endpoint as gcloud reads them" {
	gcp_setup
	# A key of the same account signed with another private key.
	python3 "$GCE_PY" --make-key "$TESTDIR/wrong.json" \
		--email "cclfs@$GCE_PROJECT.iam.gserviceaccount.com" \
		--project "$GCE_PROJECT" --token-uri "$FAKE_URL/token"
	export GOOGLE_APPLICATION_CREDENTIALS=$TESTDIR/wrong.json
	gce_mount
	gce_contract c 1
	echo w1 >contracts/c/deploy
	wait_state w1 failed
	err=$(cat clusters/w1/error)
	[[ $err == *"$TESTDIR/wrong.json"* ]]
	[[ $err == *"Invalid JWT Signature"* ]]
	[[ $err == "clusters/w1: deploy failed: the token endpoint $FAKE_URL/token refused"* ]]
	# Once by the mount's check for strays, once by the deploy: a refusal
	# is not retried.
	[ "$(grep -c '^POST /token 400' "$FAKE/requests.log")" = 2 ]
	[ "$(gce_py "(len(s['instances']), len(s['firewalls']))")" = "(0, 0)" ]
	echo terminated >clusters/w1/state
	wait_state w1 terminated
	cd "$TESTDIR" && cclfs_unmount

	export GOOGLE_APPLICATION_CREDENTIALS=$TESTDIR/nothing-here.json
	gce_mount
	echo w2 >contracts/c/deploy
	wait_state w2 failed
	[[ $(cat clusters/w2/error) == *"$TESTDIR/nothing-here.json"* ]]
	echo terminated >clusters/w2/state
	wait_state w2 terminated
	cd "$TESTDIR" && cclfs_unmount

	# The right key, its project through CLOUDSDK_CORE_PROJECT, the
	# endpoint through gcloud's override: it works.
	export GOOGLE_APPLICATION_CREDENTIALS=$KEY
	export CLOUDSDK_CORE_PROJECT=$GCE_PROJECT
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=$FAKE_URL/compute/v1/
	gce_conf 'endpoint = "http://127.0.0.1:9/nothing/"'
	export CLOUDSDK_CORE_PROJECT=$GCE_PROJECT
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=$FAKE_URL/compute/v1/
	gce_mount
	echo w3 >contracts/c/deploy
	wait_state w3 running
	echo terminated >clusters/w3/state
	wait_state w3 terminated
	gce_nothing_left
	! grep -rq 'ya29\.' "$MNT/clusters" "$TESTDIR/daemon.log" "$STATE"
}

@test "capacity: zones a and b exhausted, launched in c with the log saying so; exhausted everywhere, the deploy fails with nothing left" {
	gcp_setup
	gce_mount
	gce_contract c 2 ManagerWorkers
	gce_post /settings '{"capacity": [{"zone": "us-central1-a", "code": "ZONE_RESOURCE_POOL_EXHAUSTED"}, {"zone": "us-central1-b", "machine_type": "e2-standard-2", "code": "QUOTA_EXCEEDED"}]}'
	echo z1 >contracts/c/deploy
	wait_state z1 running
	[ "$(gce_py "sorted(set(i['zone'] for i in s['instances']))")" = "['us-central1-c']" ]
	log=$(cat clusters/z1/log)
	[[ $log == *"zone us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED; trying the next zone"* ]]
	[[ $log == *"zone us-central1-b: QUOTA_EXCEEDED; trying the next zone"* ]]
	[[ $log == *"launched in zone us-central1-c"* ]]
	[ "$(gce_count z1 RUNNING)" = 3 ]
	echo terminated >clusters/z1/state
	wait_state z1 terminated
	gce_nothing_left

	gce_post /settings '{"capacity": [{"zone": "*"}]}'
	echo z2 >contracts/c/deploy
	wait_state z2 failed
	[[ $(cat clusters/z2/error) == *"no capacity for the cluster in region us-central1 (4 zones tried"* ]]
	gce_nothing_left
}

@test "throttling, backend errors and slow answers are retried; a requestId never launches twice" {
	gcp_setup
	gce_mount
	gce_contract c 2
	gce_post /faults '[{"method": "POST", "path_re": "bulkInsert", "reason": "rateLimitExceeded", "count": 2},
		{"method": "GET", "path_re": "aggregated/instances", "reason": "backendError", "count": 2},
		{"method": "POST", "path_re": "firewalls", "status": 500, "reason": "internalError", "count": 1}]'
	echo r1 >contracts/c/deploy
	wait_state r1 running
	[ "$(grep -c 'bulkInsert 429' "$FAKE/requests.log")" = 2 ]
	[ "$(grep -c 'aggregated/instances 503' "$FAKE/requests.log")" = 2 ]
	echo true >clusters/r1/exec
	# A bulkInsert answered too late is sent again with the same
	# requestId: launched once.
	gce_post /faults '[{"method": "POST", "path_re": "bulkInsert", "delay_ms": 7000, "count": 1}]'
	echo r2 >contracts/c/deploy
	wait_state r2 running
	[ "$(gce_py "max(s['launches'].values())")" = 2 ]
	[ "$(gce_count r2 RUNNING)" = 2 ]
	for h in r1 r2; do
		echo terminated >clusters/$h/state
		wait_state $h terminated
	done
	gce_nothing_left
}

@test "instances and firewall rules labelled with a cluster this state directory does not know are reported, not touched" {
	gcp_setup
	gce_mount
	gce_contract c 1
	echo Mine.1 >contracts/c/deploy
	wait_state Mine.1 running
	# Label values are lowercase: the handle is encoded, reversibly.
	[ "$(gce_py "s['instances'][0]['labels']['cclfs-cluster']")" = "_mine_-1" ]
	cd "$TESTDIR" && cclfs_unmount
	STATE=$TESTDIR/state2
	gce_mount
	wait_until 30 grep -q 'firewall rule .* of cluster Mine.1' "$TESTDIR/daemon.log"
	grep -q "gcp: instance cclfs-mine-1-[0-9a-f]*-w-0001 (RUNNING, us-central1-a) is labelled cclfs-cluster=_mine_-1 (handle Mine.1, token [0-9a-f]*) but belongs to no cluster of this state directory; it was left alone" "$TESTDIR/daemon.log"
	[ "$(gce_py "(len(s['instances']), len(s['firewalls']))")" = "(1, 2)" ]
	[ "$(gce_calls 'DELETE instance')" = 0 ]
	cd "$TESTDIR" && cclfs_unmount
	STATE=$TESTDIR/state
	gce_mount
	echo terminated >clusters/Mine.1/state
	wait_state Mine.1 terminated
	gce_nothing_left
}

@test "spot: nodes launched SPOT; a preempted node shows it, comes back with its rank and a new address, and the MPI ring runs again" {
	gcp_setup
	gce_mount
	gce_contract sp 3 PeerWorkersMPI
	echo spot >contracts/sp/config/market
	printf 'OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n' >contracts/sp/config/environment
	ring_build
	echo s1 >contracts/sp/deploy
	wait_state s1 running
	grep -q '^market: spot$' clusters/s1/info
	[ "$(gce_py "sorted(set(i['provisioning_model'] for i in s['instances']))")" = "['SPOT']" ]
	echo "$MPIBIN/ring" >clusters/s1/mpiexec || mpi_failed s1
	before=$(sed -n 's/^address: //p' clusters/s1/nodes/1/status)
	old=$(sed -n 's/^instance_id: //p' clusters/s1/nodes/1/status)
	gce_post /preempt "{\"name\": \"${old#*/}\"}"
	wait_until 60 grep -q "keys are set up again" clusters/s1/log
	log=$(cat clusters/s1/log)
	[[ "$log" == *"node 1 ($old) was preempted: gcp took its spot instance back; it is relaunched"* ]]
	[[ "$log" == *"node 1 relaunched as us-central1-a/cclfs-s1-"* ]]
	wait_state s1 running
	after=$(sed -n 's/^address: //p' clusters/s1/nodes/1/status)
	new=$(sed -n 's/^instance_id: //p' clusters/s1/nodes/1/status)
	[ "$after" != "$before" ] && [ "$new" != "$old" ]
	[[ $new == us-central1-a/cclfs-s1-*-w-0002-* ]]
	grep -q "^$after " clusters/s1/hostfile
	[ "$(gce_count s1 RUNNING)" = 3 ]
	mpi_reach_all s1 1 2
	echo "$MPIBIN/ring" >clusters/s1/mpiexec || mpi_failed s1
	[ "$(grep '^rank' clusters/s1/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	echo terminated >clusters/s1/state
	wait_state s1 terminated
	gce_nothing_left
}

# The ids of the instances Compute Engine has for label value $1, sorted.
live_ids() {
	gce_py "' '.join(sorted(i['zone'] + '/' + i['name'] for i in s['instances'] if i['labels'].get('cclfs-cluster') == '$1' and i['status'] not in ('STOPPING', 'TERMINATED')))"
}

@test "resize on gcp: a grow is one bulkInsert with a requestId of its own in the cluster's zone and sets up every node (MPI ring); a shrink deletes the highest ranks only" {
	gcp_setup
	gce_mount
	gce_contract rz 2 PeerWorkersMPI n2-standard-2
	printf 'OMPI_ALLOW_RUN_AS_ROOT=1\nOMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n' >contracts/rz/config/environment
	ring_build
	echo g >contracts/rz/deploy
	wait_state g running
	[ "$(gce_calls 'POST bulkInsert')" = 1 ]
	first=$(node_ids g)
	echo 5 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(cat clusters/g/node_count)" = 5 ]
	# One call for the three new ranks, with a requestId of its own.
	[ "$(gce_calls 'POST bulkInsert')" = 2 ]
	[ "$(gce_py "sorted(s['launches'].values())")" = "[2, 3]" ]
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 2 3 4 " ]
	[ "$(node_ids g | cut -d' ' -f1-2)" = "$first" ]
	[ "$(live_ids g)" = "$(sorted_ids g)" ]
	[[ $(sed -n 's/^instance_id: //p' clusters/g/nodes/4/status) == us-central1-a/cclfs-g-*-w-0005-* ]]
	grown=$(node_ids g)
	[ "$(gce_py "len(set(i['zone'] for i in s['instances']))")" = 1 ]
	[ "$(gce_py "len(set(tuple(i['resource_policies']) for i in s['instances']))")" = 1 ]
	[ "$(wc -l <clusters/g/hostfile)" = 5 ]
	echo 'cat "$CCLFS_HOSTFILE"' >clusters/g/nodes/4/exec
	[ "$(cat clusters/g/nodes/4/stdout)" = "$(cat clusters/g/hostfile)" ] || {
		head clusters/g/nodes/4/stdout clusters/g/nodes/4/stderr clusters/g/hostfile clusters/g/log >&2
		false
	}
	mpi_reach_all g 1 2 3 4
	echo "$MPIBIN/ring" >clusters/g/mpiexec || mpi_failed g
	[ "$(grep '^rank' clusters/g/mpi_stdout | sort -k2n)" = "$(ring_expected 5)" ]
	grep -q 'resize: from 2 to 5 nodes' clusters/g/log
	# Shrink: ranks 3 and 4 deleted; the rest, the rules and the policy
	# stay.
	echo 3 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(gce_calls 'DELETE instance')" = 2 ]
	[ "$(ls clusters/g/nodes | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	[ "$(node_ids g)" = "$(echo "$grown" | cut -d' ' -f1-3)" ]
	[ "$(live_ids g)" = "$(sorted_ids g)" ]
	[ "$(gce_py "(len(s['firewalls']), len(s['resource_policies']))")" = "(2, 1)" ]
	[ "$(wc -l <clusters/g/hostfile)" = 3 ]
	echo "$MPIBIN/ring" >clusters/g/mpiexec || mpi_failed g
	[ "$(grep '^rank' clusters/g/mpi_stdout | sort -k2n)" = "$(ring_expected 3)" ]
	# Growing to ranks the cluster had before is a new launch.
	echo 4 >clusters/g/node_count
	echo running >clusters/g/wait
	[ "$(gce_calls 'POST bulkInsert')" = 3 ]
	[ "$(gce_py "sorted(s['launches'].values())")" = "[1, 2, 3]" ]
	[ "$(live_ids g)" = "$(sorted_ids g)" ]
	echo terminated >clusters/g/state
	wait_state g terminated
	gce_nothing_left
}

@test "crash: the daemon killed at random points of grows and shrinks on gcp leaks and duplicates nothing" {
	gcp_setup
	gce_mount
	gce_contract c 2
	gce_post /settings '{"op_ms": 150}'
	echo r >contracts/c/deploy
	wait_state r running
	for i in $(seq 1 8); do
		if ((i % 2)); then to=5 most=1.0; else to=2 most=0.4; fi
		echo $to >clusters/r/node_count
		delay=$(random_delay "$most")
		sleep "$delay"
		was=$(cat clusters/r/state)
		cd "$TESTDIR" && cclfs_crash && gce_mount
		# The next mount finishes the resize.
		echo running >clusters/r/wait
		echo "# crash $i while resizing to $to after ${delay}s ($was)" >&3
		[ "$(ls clusters/r/nodes | wc -l)" = $to ]
		gce_crash_check 3
		[ "$(live_ids r)" = "$(sorted_ids r)" ]
	done
	echo terminated >clusters/r/state
	wait_state r terminated
	gce_nothing_left
}

# After a crash and a remount: every instance in the fake belongs to a
# cluster the tree shows, and no requestId launched more than the role's
# count ($1).
gce_crash_check() {
	expect_none "$(gce_py "[i['name'] for i in s['instances'] if not __import__('os').path.isdir('$MNT/clusters/' + i['labels'].get('cclfs-cluster', '?'))]")" \
		"instances of no visible cluster"
	[ "$(gce_py "max(list(s['launches'].values()) + [0])")" -le "$1" ]
}

# How many instances of cluster $1 the fake has.
gce_live() {
	gce_count "$1" ''
}

@test "crash: the daemon killed at 20 random points of deploy and terminate leaks and duplicates nothing" {
	gcp_setup
	gce_mount
	gce_contract c 2
	gce_post /settings '{"op_ms": 150}'
	crash_deploys_and_terminates gce_mount "gce_crash_check 2" gce_live
	gce_nothing_left
}

@test "crash: the daemon killed at random points of a spot relaunch and of a zone failover leaks and duplicates nothing" {
	gcp_setup
	gce_mount
	gce_contract c 2
	echo spot >contracts/c/config/market
	echo r >contracts/c/deploy
	wait_state r running
	for i in $(seq 1 3); do
		old=$(sed -n 's/^instance_id: //p' clusters/r/nodes/1/status)
		gce_post /preempt "{\"name\": \"${old#*/}\"}"
		delay=$(random_delay 1.2)
		sleep "$delay"
		cd "$TESTDIR" && cclfs_crash && gce_mount
		# Relaunched once, whatever the crash interrupted.
		wait_until 60 eval '[ "$(cat clusters/r/state)" = running ] && grep -q "^state: running$" clusters/r/nodes/1/status && [ "$(sed -n "s/^instance_id: //p" clusters/r/nodes/1/status)" != "$old" ]'
		echo "# crash $i during a relaunch after ${delay}s" >&3
		gce_crash_check 2
		[ "$(gce_count r RUNNING)" = 2 ]
	done
	echo terminated >clusters/r/state
	wait_state r terminated
	gce_post /settings '{"capacity": [{"zone": "us-central1-a"}, {"zone": "us-central1-b"}]}'
	for i in 1 2 3; do
		echo f$i >contracts/c/deploy
		delay=$(random_delay 1.0)
		sleep "$delay"
		cd "$TESTDIR" && cclfs_crash && gce_mount
		wait_state f$i running
		echo "# crash $i during a failover after ${delay}s" >&3
		[ "$(gce_py "sorted(set(i['zone'] for i in s['instances'] if i['labels']['cclfs-cluster'] == 'f$i'))")" = "['us-central1-c']" ]
		gce_crash_check 2
		echo terminated >clusters/f$i/state
		wait_state f$i terminated
	done
	gce_nothing_left
}

@test "GPUs attached to an N1 type (config/gpu), maintenance terminates them; another series is refused; without guest attributes host keys are trusted on first use" {
	gcp_setup
	gce_mount
	gce_post /settings '{"guest_hostkeys": false}'
	gce_contract g 1 "" n1-standard-4
	echo nvidia-tesla-t4:2 >contracts/g/config/gpu
	echo g1 >contracts/g/deploy
	wait_state g1 running
	[ "$(gce_py "[(i['accelerators'], i['on_host_maintenance']) for i in s['instances']]")" = "[(['nvidia-tesla-t4:2'], 'TERMINATE')]" ]
	id=$(sed -n 's/^instance_id: //p' clusters/g1/nodes/0/status)
	grep -q "^gce:$id ssh-ed25519 " "$STATE/known_hosts"
	echo terminated >clusters/g1/state
	wait_state g1 terminated
	echo e2-standard-2 >contracts/g/node_machinetype
	echo g2 >contracts/g/deploy
	wait_state g2 failed
	[[ $(cat clusters/g2/error) == *"config/gpu: only N1 machine types take attached GPUs, and e2-standard-2 is not one"* ]]
	echo terminated >clusters/g2/state
	wait_state g2 terminated
	gce_nothing_left
}
