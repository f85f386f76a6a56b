#!/usr/bin/env bats
# The gcp catalog refresh (DESIGN §1 catalog/PROVIDER/refresh): `touch
# catalog/gcp/refresh` against the fake Google endpoint of tests/fakegce
# (fake_catalog.py: the machine types of fake_compute.py in its two regions,
# their accelerator types, and Compute SKUs priced per series in the Cloud
# Billing Catalog); the read-back, the API key or the credentials' token, a
# price list refused (the catalog's prices kept), a refresh that fails (the
# catalog kept), a remount.
#
# Expected prices are computed here from the fake's rates (the SERIES and
# GPUS tables of fake_catalog.py), not read back from cclfs.

load helpers
load fakegce

FAKE_NET=127.0.6
BKEY=AIzaFakeBillingKey-bats-0123456789
DATA=$BATS_TEST_DIRNAME/../../catalog/data
CATPY=$BATS_TEST_DIRNAME/../fakegce/fake_catalog.py

# Start the fake (it takes BKEY) and mount; extra lines go to [gcp].
refresh_setup() {
	cclfs_setup --no-mount
	FAKE_ARGS=(--billing-key "$BKEY")
	gce_start
	gce_conf "billing_endpoint = \"$FAKE_URL/v1/\"" "$@"
	gce_mount
}

teardown() {
	fakegce_teardown
}

# A value against the one expected, both shown when they differ.
expect_eq() {
	[ "$1" = "$2" ] && return 0
	printf '%s:\n--- expected\n%s\n--- got\n%s\n' "${3:-value}" "$2" "$1" >&2
	return 1
}

# Fail when any of the files (or the files under the directories) holds
# the secret $1.
no_secret() { # secret path...
	local secret=$1
	shift
	if grep -rlF "$secret" "$@" >&2; then
		echo "the secret is in the files above" >&2
		return 1
	fi
}

refresh_done() {
	[[ "$(head -1 "$MNT/catalog/gcp/refresh")" != running* ]]
}

# Touch catalog/gcp/refresh and wait until it no longer reads "running".
refresh_now() {
	touch "$MNT/catalog/gcp/refresh"
	wait_until 60 refresh_done
}

# A catalog control request of the fake.
cat_post() { # json
	gce_post /catalog/settings "$1"
}

cat_state() { # python expression over s (the catalog part's state)
	python3 -c '
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1] + "/_fake/catalog/state"))
print(eval(sys.argv[2]))' "$FAKE_URL" "$1"
}

# The fake's price of TYPE in REGION (SPOT=1: spot), as cclfs prints it:
# vCPUs x core + GiB x RAM (+ GPUs x the GPU's), each rate the fake's SKU
# rate (SERIES, GPUS) times the region's factor and FACTOR (the
# price_factor setting), in whole nanodollars as a SKU's unitPrice has it.
fake_price() {
	python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
import fake_catalog as fc
from fake_compute import MACHINE_TYPES
t, region, spot, factor = sys.argv[2], sys.argv[3], sys.argv[4] == "1", float(sys.argv[5])
f = factor * fc.REGIONS[region][1]
def rate(v):
    m = fc.money(v * f)
    return int(m["units"]) + m["nanos"] / 1e9
arch, cpus, mem, accels = MACHINE_TYPES[t]
cpus = {"e2-micro": 0.25, "e2-small": 0.5, "e2-medium": 1.0}.get(t, cpus)
_, core, ram, score, sram = fc.SERIES[t.split("-")[0]]
p = cpus * rate(score if spot else core) + mem * 1048576 / 1073741824.0 * rate(sram if spot else ram)
for a in accels:
    od, sp = fc.GPUS["Nvidia L4"]
    p += a["guestAcceleratorCount"] * rate(sp if spot else od)
print("%.15g" % p)' "$(dirname "$CATPY")" "$1" "$2" "${SPOT:-0}" "${FACTOR:-1}"
}

# A type's regions file as the fake's rates make it: REGION, price, spot,
# zones (given in the order of the regions, sorted).
want_regions() { # type "region zones..." ...
	local t=$1 line r
	shift
	for line in "$@"; do
		r=${line%% *}
		printf '%s\t%s\t%s\t%s\n' "$r" "$(fake_price "$t" "$r")" \
			"$(SPOT=1 fake_price "$t" "$r")" "${line#* }"
	done
}

# The column of a type's regions file for a region: 2 price, 3 spot, 4 zones.
region_col() { # type region column
	awk -F'\t' -v R="$2" -v C="$3" '$1 == R { print $C }' "$MNT/catalog/gcp/$1/regions"
}

ALL_TYPES="c3-standard-4 e2-medium e2-small e2-standard-2 e2-standard-4 g2-standard-4 n1-standard-4 n2-standard-2 n2-standard-8 t2a-standard-2 t2a-standard-4"
CENTRAL="us-central1 us-central1-a us-central1-b us-central1-c us-central1-f"
WEST4="europe-west4 europe-west4-a europe-west4-b europe-west4-c"

@test "touch catalog/gcp/refresh: the fake's machine types, zones and SKU prices read back; kept over a remount; default goes back" {
	refresh_setup "billing_api_key = \"$BKEY\""
	expect_eq "$(cat catalog/gcp/refresh)" "default: the compiled-in catalog" "before"
	compiled=$(awk -F, '$1 == "gcp"' "$DATA/types.csv" | wc -l)
	expect_eq "$(ls catalog/gcp | grep -vx refresh | wc -l)" "$compiled" "compiled-in types"
	refresh_now
	first=$(head -1 catalog/gcp/refresh)
	[[ "$first" == "done 20"*"Z: 11 types, 21 offers, 21 priced" ]] || {
		cat catalog/gcp/refresh >&2
		return 1
	}
	# Nothing else to say: every offer priced, every GPU known.
	expect_eq "$(wc -l <catalog/gcp/refresh)" 1 "summary lines"
	expect_eq "$(ls catalog/gcp | grep -vx refresh | tr '\n' ' ')" "$ALL_TYPES " "types"
	# The Billing Catalog was asked with the key, every page of it.
	[ "$(cat_state "s['auth'].get('key', 0) > 10 and s['auth'].get('bearer', 0) == 0")" = True ]
	expect_eq "$(cat catalog/gcp/e2-standard-2/regions)" \
		"$(want_regions e2-standard-2 "$WEST4" "$CENTRAL")" "regions of e2-standard-2"
	# A shared-core type: billed for half a vCPU.
	expect_eq "$(cat catalog/gcp/e2-small/regions)" \
		"$(want_regions e2-small "$WEST4" "$CENTRAL")" "regions of e2-small"
	# The GPU's rate is part of the price; the zones are those that have
	# both the machine type and its GPU.
	expect_eq "$(cat catalog/gcp/g2-standard-4/regions)" \
		"$(want_regions g2-standard-4 "$WEST4" "us-central1 us-central1-a us-central1-b")" \
		"regions of g2-standard-4"
	expect_eq "$(cat catalog/gcp/t2a-standard-4/regions)" \
		"$(want_regions t2a-standard-4 "$CENTRAL")" "regions of t2a-standard-4"
	expect_eq "$(cat catalog/gcp/g2-standard-4/accelerator)" NVIDIA_L4 accelerator
	expect_eq "$(cat catalog/gcp/g2-standard-4/accelerator_count)" 1 "accelerator count"
	expect_eq "$(cat catalog/gcp/g2-standard-4/accelerator_memory)" 24G "accelerator memory"
	expect_eq "$(cat catalog/gcp/t2a-standard-2/architecture)" arm64 architecture
	expect_eq "$(cat catalog/gcp/n2-standard-8/node_memory_size)" 32G memory
	# Resolution follows: the cheapest 2-vCPU type with 8 GiB.
	mkdir contracts/c
	echo gcp >contracts/c/node_provider
	echo e2-standard-2 >contracts/c/node_machinetype
	echo europe-west4 >contracts/c/cluster_locale
	touch contracts/c/resolve
	expect_eq "$(cut -f2-5 contracts/c/resolution)" \
		"$(printf 'gcp\te2-standard-2\t%s\teurope-west4' "$(fake_price e2-standard-2 europe-west4)")" resolution
	# A remount reads the stored rows.
	summary=$(cat catalog/gcp/refresh)
	cd /
	cclfs_unmount
	gce_mount
	expect_eq "$(cat catalog/gcp/refresh)" "$summary" "summary after a remount"
	expect_eq "$(cat catalog/gcp/e2-standard-2/regions)" \
		"$(want_regions e2-standard-2 "$WEST4" "$CENTRAL")" "regions after a remount"
	# default: the compiled-in rows again.
	echo default >catalog/gcp/refresh
	expect_eq "$(cat catalog/gcp/refresh)" "default: the compiled-in catalog" "after default"
	expect_eq "$(ls catalog/gcp | grep -vx refresh | wc -l)" "$compiled" "types after default"
	# The key is in no file cclfs wrote.
	no_secret "$BKEY" "$STATE" "$TESTDIR/daemon.log" "$FAKE/requests.log"
}

@test "without a billing key the credentials' token reads the SKUs; a key the Billing API refuses keeps the catalog's prices and says why" {
	refresh_setup
	refresh_now
	head -1 catalog/gcp/refresh | grep -q '^done .*: 11 types, 21 offers, 21 priced$'
	[ "$(cat_state "s['auth'].get('bearer', 0) > 10 and s['auth'].get('key', 0) == 0")" = True ]
	expect_eq "$(region_col n1-standard-4 us-central1 2)" "$(fake_price n1-standard-4 us-central1)" "n1 price"
	# A wrong key: types and offers refreshed, prices those the catalog
	# had (the first refresh's), the summary says why without the key.
	cd /
	cclfs_unmount
	gce_conf "billing_endpoint = \"$FAKE_URL/v1/\"" 'billing_api_key = "AIzaWrongKey-987654321"'
	gce_mount
	cat_post '{"price_factor": 2}'
	refresh_now
	head -1 catalog/gcp/refresh | grep -q '^done .*: 11 types, 21 offers, 21 priced$'
	grep -q 'prices were not obtained (Cloud Billing: .*API key not valid.*); the catalog.s prices are kept' catalog/gcp/refresh
	no_secret AIzaWrongKey catalog/gcp/refresh "$STATE" "$TESTDIR/daemon.log" \
		"$FAKE/requests.log"
	expect_eq "$(region_col n1-standard-4 us-central1 2)" "$(fake_price n1-standard-4 us-central1)" "n1 price kept"
	# The right key again: the doubled prices.
	cd /
	cclfs_unmount
	gce_conf "billing_endpoint = \"$FAKE_URL/v1/\"" "billing_api_key = \"$BKEY\""
	gce_mount
	refresh_now
	expect_eq "$(region_col n1-standard-4 us-central1 2)" "$(FACTOR=2 fake_price n1-standard-4 us-central1)" "n1 price doubled"
	expect_eq "$(region_col n1-standard-4 us-central1 3)" "$(SPOT=1 FACTOR=2 fake_price n1-standard-4 us-central1)" "n1 spot doubled"
}

@test "a refresh that fails keeps the catalog it had; a SKU missing keeps that offer's price" {
	refresh_setup "billing_api_key = \"$BKEY\""
	refresh_now
	head -1 catalog/gcp/refresh | grep -q '^done '
	before=$(cat catalog/gcp/e2-standard-2/regions)
	# The machine types refused: the refresh fails as a whole.
	cat_post '{"machine_types_fault": {"status": 403, "reason": "forbidden", "message": "Required compute.machineTypes.list permission"}, "price_factor": 3}'
	refresh_now
	[[ "$(head -1 catalog/gcp/refresh)" == "failed "*"machineTypes.aggregatedList"*"; the catalog is unchanged" ]] || {
		cat catalog/gcp/refresh >&2
		return 1
	}
	grep -q 'gcp catalog refresh failed' "$TESTDIR/daemon.log"
	expect_eq "$(cat catalog/gcp/e2-standard-2/regions)" "$before" "regions after a failed refresh"
	expect_eq "$(ls catalog/gcp | grep -vx refresh | wc -l)" 11 "types after a failed refresh"
	# The RAM SKU of E2 in us-central1 gone: those offers keep their price,
	# their spot price and every other region are new; a note names it.
	cat_post '{"machine_types_fault": null, "skus_left_out": ["E2 Instance Ram running in Americas"]}'
	refresh_now
	head -1 catalog/gcp/refresh | grep -q '^done .*: 11 types, 21 offers, 21 priced$'
	grep -q '^4 offers have no on-demand price (no SKU for e2 RAM); the catalog.s are kept$' catalog/gcp/refresh
	expect_eq "$(region_col e2-standard-2 us-central1 2)" "$(fake_price e2-standard-2 us-central1)" "e2 price kept"
	expect_eq "$(region_col e2-standard-2 us-central1 3)" "$(SPOT=1 FACTOR=3 fake_price e2-standard-2 us-central1)" "e2 spot new"
	expect_eq "$(region_col e2-standard-2 europe-west4 2)" "$(FACTOR=3 fake_price e2-standard-2 europe-west4)" "europe-west4 new"
}
