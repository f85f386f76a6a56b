# Shared by the suites that drive cclfs against the fake EC2 endpoint of
# tests/fakeec2 (ec2.bats, lifecycle.bats): starting it, cclfs.conf for it,
# asking it what it holds, and stopping everything it started. A suite sets
# AKID and SECRET (the credentials cclfs gets) and FAKE_NET (the /24 of
# its instances) before calling these.

source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

FAKE_PY=$BATS_TEST_DIRNAME/../fakeec2/fake_ec2.py

# cclfs.conf for an EC2 endpoint at $1 (also the Price List endpoint of a
# catalog refresh and the SSM endpoint of image aliases); extra 'key = "value"' lines go to [ec2], in place of
# the default of the same key (a key may appear once). Exports the
# credentials the fake accepts.
ec2_conf() {
	local url=$1 line
	shift
	local -A given=()
	for line in "$@"; do
		given[${line%% *}]=1
	done
	export AWS_ACCESS_KEY_ID=$AKID AWS_SECRET_ACCESS_KEY=$SECRET
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION \
		AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2 AWS_ENDPOINT_URL_PRICING \
		AWS_ENDPOINT_URL_SSM
	{
		echo '[ec2]'
		for line in "endpoint_url = \"$url\"" \
			"pricing_endpoint_url = \"$url\"" "ssm_endpoint_url = \"$url\"" \
			'region = "us-east-1"' \
			'imageid = "ami-0cclfs"' 'user = "root"' \
			'poll_interval = "0.05"' 'poll_max = "0.2"' \
			'retry_backoff = "0.01"' 'retry_backoff_max = "0.05"' \
			'request_timeout = "2"' 'boot_timeout = "60"'; do
			[ -n "${given[${line%% *}]:-}" ] || echo "$line"
		done
		printf '%s\n' "$@"
	} >"$TESTDIR/cclfs.conf"
}

# Start the fake (by pid) accepting AKID:SECRET and the extra credentials
# given (AKID:SECRET[:TOKEN]); sets FAKE, FAKE_PID and FAKE_URL. The words
# of the array FAKE_ARGS, when a suite sets it, are more options of the
# fake's: --regions N, --delay-ms N, --fail-pricing CODE, --hang ACTION
# (see tests/fakeec2/fake_ec2.py and fake_catalog.py).
fake_start() {
	local creds=(--credentials "$AKID:$SECRET") c
	for c in "$@"; do
		creds+=(--credentials "$c")
	done
	FAKE=$TESTDIR/fake
	mkdir -p "$FAKE"
	python3 "$FAKE_PY" --dir "$FAKE" --net "$FAKE_NET" --first 10 \
		"${creds[@]}" ${FAKE_ARGS+"${FAKE_ARGS[@]}"} \
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
}

ec2_mount() {
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
}

# The suites' teardown: the fake by pid, what it could not stop, cclfs.
fakeec2_teardown() {
	cd /
	if [ -n "${FAKE_PID:-}" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	# Whatever the fake could not stop (it stops its hosts and closes its
	# silent listeners on SIGTERM).
	if [ -d "${FAKE:-}/testhosts" ]; then
		testhosts_stop "$FAKE/testhosts" || true
	fi
	cclfs_teardown
}

# Ask the fake: fake_py 'PYTHON EXPRESSION over s (the state JSON)'.
fake_py() {
	python3 -c '
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1] + "/_fake/state"))
print(eval(sys.argv[2]))' "$FAKE_URL" "$1"
}

# The calls of ACTION that were not dry runs (None when there was none).
fake_calls() {
	fake_py "(s['calls'].get('$1', 0) - s['dry_runs'].get('$1', 0)) or None"
}

fake_post() { # path json
	python3 -c '
import sys, urllib.request
r = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(),
                           method="POST")
urllib.request.urlopen(r).read()' "$FAKE_URL$1" "$2"
}

# Instances of cluster $1 in state $2 (any state when $2 is empty).
fake_count() {
	fake_py "len([i for i in s['instances'] if i['tags'].get('cclfs:cluster') == '$1' and ('$2' == '' or i['state'] == '$2')])"
}

fake_count_is() { # cluster state count
	[ "$(fake_count "$1" "$2")" = "$3" ]
}

# contract NAME COUNT [CLUSTER_TYPE]: an ec2 contract.
contract() {
	local c=$MNT/contracts/$1
	[ -d "$c" ] || mkdir "$c"
	echo ec2 >"$c/node_provider"
	echo t3.micro >"$c/node_machinetype"
	echo "$2" >"$c/node_count"
	[ -z "${3:-}" ] || echo "$3" >"$c/cluster_type"
}

# Nothing is left in the fake: every instance terminated, no key pair, no
# placement group.
nothing_left() {
	[ "$(fake_py "(len([i for i in s['instances'] if i['state'] != 'terminated']), len(s['key_pairs']), len(s['placement_groups']))")" = "(0, 0, 0)" ]
}

# The security groups cclfs made that are still there (not sg-0cclfs, the
# user's group the fake starts with).
fake_sg_count() {
	fake_py "len(s['security_groups'])"
}

# The rules of the security group named $1, sorted, as
# "PROTOCOL PORT SOURCE" lines (SOURCE: a CIDR, or "self" for the group).
fake_sg_rules() {
	fake_py "'\n'.join(sorted('%s %s %s' % (r['protocol'], r['from_port'], r.get('cidr') or ('self' if r['group'] == g['id'] else r['group'])) for g in s['security_groups'] if g['name'] == '$1' for r in g['rules']))"
}
