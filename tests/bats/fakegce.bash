# Shared by the suites that drive cclfs against the fake Google endpoint of
# tests/fakegce (gcp.bats, gcp_catalog.bats): starting it with a service
# account key of its own, cclfs.conf and the environment for it, asking it
# what it holds, and stopping everything it started. A suite sets FAKE_NET
# (the /24 of its instances) before calling these.

source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

GCE_PY=$BATS_TEST_DIRNAME/../fakegce/fake_gce.py
GCE_PROJECT=cclfs-test

# Start the fake (by pid) trusting the service account key $TESTDIR/key.json
# (written once the port is known); sets FAKE, FAKE_PID, FAKE_URL and KEY.
# The words of the array FAKE_ARGS, when a suite sets it, are more options.
gce_start() {
	FAKE=$TESTDIR/fake
	KEY=$TESTDIR/key.json
	mkdir -p "$FAKE"
	python3 "$GCE_PY" --dir "$FAKE" --net "$FAKE_NET" --first 10 \
		--project "$GCE_PROJECT" --service-account "$KEY" \
		${FAKE_ARGS+"${FAKE_ARGS[@]}"} \
		>>"$TESTDIR/fake.log" 2>&1 3>&- &
	FAKE_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$FAKE/port" ] && break
		sleep 0.05
	done
	[ -s "$FAKE/port" ] || {
		cat "$TESTDIR/fake.log" >&2
		return 1
	}
	FAKE_URL=http://127.0.0.1:$(cat "$FAKE/port")
	python3 "$GCE_PY" --make-key "$KEY" \
		--email "cclfs@$GCE_PROJECT.iam.gserviceaccount.com" \
		--project "$GCE_PROJECT" --token-uri "$FAKE_URL/token"
}

# The environment Google's tools read, with the key as the credentials, and
# cclfs.conf for the fake; extra 'key = "value"' lines go to [gcp], in place
# of the default of the same key.
gce_conf() {
	local line
	local -A given=()
	for line in "$@"; do
		given[${line%% *}]=1
	done
	unset CLOUDSDK_CORE_PROJECT GOOGLE_CLOUD_PROJECT CLOUDSDK_COMPUTE_ZONE \
		CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE CLOUDSDK_CONFIG \
		CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING GCE_METADATA_HOST
	export GOOGLE_APPLICATION_CREDENTIALS=$KEY
	# No metadata server is asked when the key is missing.
	export GCE_METADATA_HOST=127.0.0.1:9
	{
		echo '[gcp]'
		for line in "endpoint = \"$FAKE_URL/compute/v1/\"" \
			'region = "us-central1"' 'user = "root"' \
			'poll_interval = "0.05"' 'poll_max = "0.2"' \
			'retry_backoff = "0.01"' 'retry_backoff_max = "0.05"' \
			'request_timeout = "5"' 'boot_timeout = "60"'; do
			[ -n "${given[${line%% *}]:-}" ] || echo "$line"
		done
		printf '%s\n' "$@"
	} >"$TESTDIR/cclfs.conf"
}

gce_mount() {
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
}

# The suites' teardown: the fake by pid, what it could not stop, cclfs.
fakegce_teardown() {
	cd /
	if [ -n "${FAKE_PID:-}" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	if [ -d "${FAKE:-}/testhosts" ]; then
		testhosts_stop "$FAKE/testhosts" || true
	fi
	cclfs_teardown
}

# Ask the fake: gce_py 'PYTHON EXPRESSION over s (the Compute state JSON)'.
gce_py() {
	python3 -c '
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1] + "/_fake/state"))["compute"]
print(eval(sys.argv[2]))' "$FAKE_URL" "$1"
}

gce_post() { # path json
	python3 -c '
import sys, urllib.request
r = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(),
                           method="POST")
urllib.request.urlopen(r).read()' "$FAKE_URL/_fake$1" "$2"
}

# Calls of a template ("POST bulkInsert"), 0 when none.
gce_calls() {
	gce_py "s['calls'].get('$1', 0)"
}

# Instances of the cluster whose token starts with... no: of label value $1
# (the encoded handle) in status $2 (any when empty).
gce_count() {
	gce_py "len([i for i in s['instances'] if i['labels'].get('cclfs-cluster') == '$1' and ('$2' == '' or i['status'] == '$2')])"
}

# Nothing is left: no instance, no firewall rule, no resource policy.
gce_nothing_left() {
	[ "$(gce_py "(len(s['instances']), len(s['firewalls']), len(s['resource_policies']))")" = "(0, 0, 0)" ]
}

# gce_contract NAME COUNT [CLUSTER_TYPE [TYPE]]: a gcp contract.
gce_contract() {
	local c=$MNT/contracts/$1
	[ -d "$c" ] || mkdir "$c"
	echo gcp >"$c/node_provider"
	echo "${4:-e2-standard-2}" >"$c/node_machinetype"
	echo "$2" >"$c/node_count"
	[ -z "${3:-}" ] || echo "$3" >"$c/cluster_type"
}
