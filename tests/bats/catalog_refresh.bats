#!/usr/bin/env bats
# The live catalog refresh (DESIGN §1 catalog/PROVIDER/refresh, §3): `touch
# catalog/ec2/refresh` against the fake EC2 and Price List endpoints of
# tests/fakeec2 (their fixture is catalog/data's ec2 rows run backwards,
# priced in every region by a documented rule, with the API's known mistakes
# and one type new to the hierarchy: see tests/fakeec2/fake_catalog.py);
# what the summary says, what the catalog and resolution then show, a
# remount, `default`, a failing pricing call, a failing refresh, one cut off
# by an unmount, and a deploy that goes to the resolved region.
#
# Every expectation is computed here from catalog/data and the fixture's
# rule (awk), not read back from cclfs.

load helpers
load fakeec2

AKID=AKIDCCLFSTEST
SECRET=cclfs-test-secret-key
FAKE_NET=127.0.2
DATA=$BATS_TEST_DIRNAME/../../catalog/data
NEW_TYPE=p6e-gb300.36xlarge

refresh_setup() {
	cclfs_setup --no-mount
	fake_start
	ec2_conf "$FAKE_URL" "$@"
	ec2_mount
}

teardown() {
	fakeec2_teardown
}

expect_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s:\n--- expected\n%s\n--- got\n%s\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# Wait until catalog/ec2/refresh no longer reads "running...".
wait_refresh() {
	local i
	for i in $(seq 1 1200); do
		case $(head -1 "$MNT/catalog/ec2/refresh") in
		running*) sleep 0.1 ;;
		*) return 0 ;;
		esac
	done
	echo "refresh still running: $(cat "$MNT/catalog/ec2/refresh")" >&2
	return 1
}

# 19119 as 19,119.
commas() {
	printf '%s' "$1" | rev | sed 's/\([0-9]\{3\}\)/\1,/g; s/,$//' | rev
}

# The fixture's on-demand price of TYPE in REGION: its us-east-1 price in
# offers.csv times 1 + 0.05 x the region's position (us-east-1, us-west-2,
# eu-west-1, then regions.csv's order), rounded to 6 decimals; "-" when
# us-east-1 has none. With SPOT=1, the offer's spot price: 0.3 x that.
fixture_price() {
	awk -F, -v T="$1" -v R="$2" -v S="${SPOT:-0}" '
	FILENAME ~ /regions/ {
		if (FNR > 1 && $1 == "ec2" && $2 != "us-east-1" && $2 != "us-west-2" && $2 != "eu-west-1")
			order[++n] = $2
		next
	}
	$1 == "ec2" && $2 == T && $3 == "us-east-1" { p = $4 }
	END {
		pos["us-east-1"] = 0; pos["us-west-2"] = 1; pos["eu-west-1"] = 2
		for (i = 1; i <= n; i++) pos[order[i]] = i + 2
		if (p == "") { print "-"; exit }
		v = int(p * (1 + 0.05 * pos[R]) * 1e6 + 0.5) / 1e6
		if (S) v = int(v * 0.3 * 1e6 + 0.5) / 1e6
		printf "%.15g\n", v
	}' "$DATA/regions.csv" "$DATA/offers.csv"
}

@test "touch catalog/ec2/refresh: today's types, offers and prices of every region; the summary; resolution follows; kept over a remount; default goes back" {
	refresh_setup
	expect_eq "$(cat catalog/ec2/refresh)" "default: the compiled-in catalog" "before"
	expect_eq "$(stat -c %a catalog/ec2/refresh)" 644 mode
	[ ! -e catalog/gcp/refresh ] && [ ! -e catalog/local/refresh ]
	# Before: only us-east-1 is priced.
	expect_eq "$(awk -F'\t' '$1 == "eu-west-1" { print $2 }' catalog/ec2/t3.xlarge/regions)" - "eu-west-1 before"
	touch catalog/ec2/refresh
	wait_refresh
	types=$(($(awk -F, '$1 == "ec2"' "$DATA/types.csv" | wc -l) + 1))
	offers=$(($(awk -F, '$1 == "ec2"' "$DATA/offers.csv" | wc -l) + 2))
	priced=$(($(awk -F, 'FNR == NR { if ($1 == "ec2" && $3 == "us-east-1" && $4 != "") p[$2] = 1; next }
		$1 == "ec2" && p[$2]' "$DATA/offers.csv" "$DATA/offers.csv" | wc -l) + 2))
	first=$(head -1 catalog/ec2/refresh)
	[[ "$first" == "done 20"*"Z: $(commas $types) types, $(commas $offers) offers, $(commas $priced) priced" ]] || {
		echo "summary: $first (want $types types, $offers offers, $priced priced)" >&2
		return 1
	}
	# The corrections of the API's known mistakes, and the new type.
	grep -q '^p5.4xlarge: DescribeInstanceTypes gives it 0 GPUs' catalog/ec2/refresh
	grep -q '^p5en.48xlarge: .*"NVIDIA"' catalog/ec2/refresh
	grep -q '^trn2.48xlarge: .*512 GiB.*96 GiB' catalog/ec2/refresh
	grep -q "^accelerator GB300 of $NEW_TYPE is new to the hierarchy: placed under NVIDIAAccelerator" catalog/ec2/refresh
	expect_eq "$(cat catalog/ec2/p5.4xlarge/accelerator_count)" 1 "p5.4xlarge corrected"
	expect_eq "$(cat catalog/ec2/p5en.48xlarge/accelerator)" NVIDIA_H200 "p5en corrected"
	expect_eq "$(cat catalog/ec2/trn2.48xlarge/accelerator_memory)" 96G "trn2 corrected"
	# Every region's prices, by the fixture's rule, for a few types.
	for t in t3.xlarge g5.12xlarge p5.48xlarge; do
		want=$(awk -F, -v T="$t" '$1 == "ec2" && $2 == T { print $3 "\t" $6 }' "$DATA/offers.csv" |
			LC_ALL=C sort | while IFS=$'\t' read -r r z; do
			printf '%s\t%s\t%s\t%s\n' "$r" "$(fixture_price "$t" "$r")" \
				"$(SPOT=1 fixture_price "$t" "$r")" "${z:--}"
		done)
		expect_eq "$(cat "catalog/ec2/$t/regions")" "$want" "regions of $t"
	done
	expect_eq "$(ls catalog/ec2 | grep -vx refresh | wc -l)" "$types" "types listed"
	# The type new to the hierarchy: its accelerator is a name contracts
	# accept, under NVIDIA's.
	expect_eq "$(cat catalog/ec2/$NEW_TYPE/accelerator)" GB300 "accelerator of $NEW_TYPE"
	mkdir contracts/c
	echo gb300 >contracts/c/accelerator
	expect_eq "$(cat contracts/c/accelerator)" GB300 "GB300 accepted"
	# [ec2] region is us-east-1: EC2Region asks for every region.
	echo EC2Region >contracts/c/cluster_locale
	expect_eq "$(tail -n +2 contracts/c/candidates | cut -f1-3)" \
		"$(printf 'ec2\t%s\tus-east-1\nec2\t%s\tus-west-2' "$NEW_TYPE" "$NEW_TYPE")" "GB300 candidates"
	echo NVIDIAAccelerator >contracts/c/accelerator
	tail -n +2 contracts/c/candidates | cut -f2 | grep -qx "$NEW_TYPE"
	rm contracts/c/accelerator
	# Resolution: eu-west-1 has prices now; cheapest over every region
	# picks us-east-1, the lowest factor.
	echo t3.xlarge >contracts/c/node_machinetype
	echo eu-west-1 >contracts/c/cluster_locale
	echo cheapest >contracts/c/config/resolve_policy
	touch contracts/c/resolve
	expect_eq "$(cut -f2-5 contracts/c/resolution)" \
		"$(printf 'ec2\tt3.xlarge\t%s\teu-west-1' "$(fixture_price t3.xlarge eu-west-1)")" "resolution in eu-west-1"
	echo EC2Region >contracts/c/cluster_locale
	touch contracts/c/resolve
	expect_eq "$(cut -f2-5 contracts/c/resolution)" \
		"$(printf 'ec2\tt3.xlarge\t%s\tus-east-1' "$(fixture_price t3.xlarge us-east-1)")" "cheapest region"
	# The refreshed spot prices: a spot contract's cheapest region.
	best=$(awk -F, '$1 == "ec2" && $2 == "t3.xlarge" { print $3 }' "$DATA/offers.csv" |
		while read -r r; do
			printf '%s\t%s\n' "$(SPOT=1 fixture_price t3.xlarge "$r")" "$r"
		done | LC_ALL=C sort -t$'\t' -k1,1g -k2,2 | head -1)
	echo spot >contracts/c/config/market
	touch contracts/c/resolve
	expect_eq "$(cut -f3,4,5,7 contracts/c/resolution)" "$(printf 't3.xlarge\t%s\tspot' "$best")" "cheapest spot region"
	echo on-demand >contracts/c/config/market
	summary=$(cat catalog/ec2/refresh)
	# A remount reads the stored rows.
	cd /
	cclfs_unmount
	ec2_mount
	expect_eq "$(cat catalog/ec2/refresh)" "$summary" "summary after a remount"
	expect_eq "$(awk -F'\t' '$1 == "eu-west-1" { print $2 }' catalog/ec2/t3.xlarge/regions)" \
		"$(fixture_price t3.xlarge eu-west-1)" "eu-west-1 after a remount"
	[ -d "catalog/ec2/$NEW_TYPE" ]
	# default: the compiled-in rows again, now and after a remount.
	echo default >catalog/ec2/refresh
	expect_eq "$(cat catalog/ec2/refresh)" "default: the compiled-in catalog" "after default"
	expect_eq "$(awk -F'\t' '$1 == "eu-west-1" { print $2 }' catalog/ec2/t3.xlarge/regions)" - "eu-west-1 after default"
	[ ! -e "catalog/ec2/$NEW_TYPE" ]
	cd /
	cclfs_unmount
	ec2_mount
	expect_eq "$(cat catalog/ec2/refresh)" "default: the compiled-in catalog" "default after a remount"
	[ ! -e "catalog/ec2/$NEW_TYPE" ]
	# Another word is refused.
	run_shell "echo later > catalog/ec2/refresh"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	grep -q 'catalog/ec2/refresh: "later" is not default or refresh' "$TESTDIR/daemon.log"
}

@test "a refresh whose pricing call fails: types and offers refreshed, the catalog's prices kept, the summary says so" {
	FAKE_ARGS=(--fail-pricing AccessDeniedException)
	refresh_setup
	touch catalog/ec2/refresh
	wait_refresh
	head -1 catalog/ec2/refresh | grep -q '^done '
	grep -qi 'on-demand prices.*AccessDenied' catalog/ec2/refresh
	# us-east-1 keeps the compiled-in price; eu-west-1 stays unknown; the
	# new type is there, unpriced.
	expect_eq "$(awk -F'\t' '$1 == "us-east-1" { print $2 }' catalog/ec2/t3.xlarge/regions)" \
		"$(awk -F, '$1 == "ec2" && $2 == "t3.xlarge" && $3 == "us-east-1" { print $4 }' "$DATA/offers.csv")" \
		"us-east-1 price kept"
	expect_eq "$(awk -F'\t' '$1 == "eu-west-1" { print $2 }' catalog/ec2/t3.xlarge/regions)" - "eu-west-1 still unknown"
	[ -d "catalog/ec2/$NEW_TYPE" ]
	expect_eq "$(awk -F'\t' '{ print $2 }' catalog/ec2/$NEW_TYPE/regions | sort -u)" - "the new type unpriced"
}

@test "a refresh that fails keeps the catalog; one cut off by an unmount stores nothing; a deploy goes to the resolved region" {
	refresh_setup
	# Credentials the fake refuses: the refresh fails as a whole.
	cd /
	cclfs_unmount
	AWS_SECRET_ACCESS_KEY=wrong cclfs_mount -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	touch catalog/ec2/refresh
	wait_refresh
	[[ "$(head -1 catalog/ec2/refresh)" == "failed "*"; the catalog is unchanged" ]]
	expect_eq "$(ls catalog/ec2 | grep -vx refresh | wc -l)" \
		"$(awk -F, '$1 == "ec2"' "$DATA/types.csv" | wc -l)" "types after a failed refresh"
	grep -q 'ec2 catalog refresh failed' "$TESTDIR/daemon.log"
	# A refresh that hangs, cut off by an unmount: the daemon ends, and
	# the next mount has the compiled-in catalog.
	cd /
	cclfs_unmount
	fake_post /_fake/faults '[{"action": "DescribeInstanceTypeOfferings", "delay_ms": 600000, "count": -1}]'
	ec2_mount
	touch catalog/ec2/refresh
	head -1 catalog/ec2/refresh | grep -q '^running'
	# A second request while one runs: EBUSY, said in the log.
	run touch catalog/ec2/refresh
	[ "$status" -ne 0 ]
	[[ "$output" == *"Device or resource busy"* ]]
	grep -q 'catalog/ec2/refresh: a refresh is under way already' "$TESTDIR/daemon.log"
	cd /
	cclfs_unmount
	python3 -c 'import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/_fake/faults", method="DELETE")).read()' "$FAKE_URL"
	ec2_mount
	expect_eq "$(cat catalog/ec2/refresh)" "default: the compiled-in catalog" "after the cut-off refresh"
	# A contract resolved to eu-west-1 deploys there.
	contract r 1
	echo eu-west-1 >contracts/r/cluster_locale
	touch contracts/r/resolve
	expect_eq "$(cut -f5 contracts/r/resolution)" eu-west-1 "resolved region"
	echo r1 >contracts/r/deploy
	wait_state r1 running
	grep -qx 'region: eu-west-1' clusters/r1/info
	# ...at that region's price (the compiled-in catalog has none there).
	grep -qx "price_per_hour: $(cut -f4 contracts/r/resolution)" clusters/r1/info
	expect_eq "$(fake_py "sorted(set(i['region'] for i in s['instances']))")" "['eu-west-1']" "region of the instances"
	expect_eq "$(fake_py "sorted(s['calls_by_region'].get('RunInstances', {}))")" "['eu-west-1']" "region of RunInstances"
	echo terminated >clusters/r1/state
	wait_state r1 terminated
	expect_eq "$(fake_count r1 running)" 0 "instances left running"
}
