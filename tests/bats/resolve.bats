#!/usr/bin/env bats
# Resolution over the catalog (DESIGN §1 resolve, resolution, candidates,
# catalog/; §2 the assumption grammar; §3 resolution): the issue's
# examples, type names and their hierarchy, failures explained, the
# resolve policy, ManagerWorkers roles, what clears a resolution, the
# candidates listing, the read-only catalog/ tree, and an installed binary.
#
# Every expectation is computed here from the CSV files of catalog/data
# (with awk), or checked against them: the names a test spells out
# (g5.12xlarge, ...) are those of the issue, and the test also asserts that
# the CSV computation gives them.

load helpers

DATA=$BATS_TEST_DIRNAME/../../catalog/data

setup() {
	cclfs_setup
	C=$MNT/contracts/c1
	mkdir "$C"
}

teardown() {
	# The second mount of the install test, if a failure left it mounted.
	if [ -n "${MNT2:-}" ] && grep -qs " $MNT2 fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT2" 2>/dev/null || umount -l "$MNT2" 2>/dev/null
	fi
	cclfs_teardown
}

# --- helpers: the CSV side ---

# The region the tests configure for ec2 (the AWS CLI's chain: AWS_REGION):
# without cluster_locale, resolution considers ec2's offers there only, and
# every region of gcp (no [gcp] region).
R0=us-east-1
export AWS_REGION=$R0
unset AWS_DEFAULT_REGION AWS_PROFILE AWS_CONFIG_FILE

# Fail with a message naming what differed.
expect_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s:\n--- expected\n%s\n--- got\n%s\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# csv_awk [AWK_ARGS...] PROGRAM: run PROGRAM once per row of types.csv
# with c[COLUMN] holding each column by its header name, c["regions"] the
# regions of offers.csv that offer the type (space-separated) and
# price[PROVIDER "," TYPE "," REGION] / zones[...] the offers' prices and
# zones. Functions: in_list(x, "a b c"); bin(bytes) and dec(bits) render a
# quantity with the largest suffix K M G T P (powers of 1024 / 1000) that
# divides it exactly, else the number as the CSV writes it. A partition of
# a device (accelerator_fraction < 1) has accelerator_count = that
# fraction, as the catalog counts it. offered():
# whether resolution considers the type without cluster_locale (ec2: an
# offer in R0; gcp: any offer); cheapest(): its lowest priced offer
# considered so, as "PRICE<TAB>REGION" ("" when none is priced).
csv_awk() {
	local prog=${!#}
	awk -F, -v R0="$R0" "${@:1:$#-1}" '
	function in_list(x, l) { return x != "" && index(" " l " ", " " x " ") > 0 }
	function suffixed(v, base,   k) {
		if (v == "") return ""
		for (k = 5; k >= 1; k--)
			if (v % (base ^ k) == 0)
				return sprintf("%.0f", v / base ^ k) substr("KMGTP", k, 1)
		return v
	}
	function bin(v) { return suffixed(v, 1024) }
	function dec(v) { return suffixed(v, 1000) }
	function offered() {
		return c["provider"] == "ec2" ? in_list(R0, c["regions"]) : c["regions"] != ""
	}
	function cheapest(   n, i, r, k, bp, br) {
		n = split(c["regions"], r, " ")
		bp = ""; br = ""
		for (i = 1; i <= n; i++) {
			if (c["provider"] == "ec2" && r[i] != R0) continue
			k = c["provider"] "," c["instance_type"] "," r[i]
			if (price[k] == "") continue
			if (bp == "" || price[k] + 0 < bp + 0 || (price[k] + 0 == bp + 0 && r[i] < br)) {
				bp = price[k]; br = r[i]
			}
		}
		return bp == "" ? "" : bp "\t" br
	}
	FILENAME ~ /offers/ {
		if (FNR > 1) {
			k = $1 "," $2
			regs[k] = regs[k] (regs[k] == "" ? "" : " ") $3
			price[k "," $3] = $4
			spot[k "," $3] = $5
			zones[k "," $3] = $6
		}
		next
	}
	FNR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
	{
		delete c
		for (i = 1; i <= NF; i++) c[h[i]] = $i
		c["regions"] = regs[c["provider"] "," c["instance_type"]]
		# A partition of a device counts as that fraction of one.
		if (c["accelerator_fraction"] != "" && c["accelerator_fraction"] < 1 &&
		    c["accelerator_count"] != "")
			c["accelerator_count"] = c["accelerator_count"] * c["accelerator_fraction"]
	}
	'"$prog" "$DATA/offers.csv" "$DATA/types.csv"
}

# csv_select COND [AWK_ARGS...]: "provider<TAB>instance_type" of every row
# for which the awk expression COND holds, in byte order.
csv_select() {
	local cond=$1
	shift
	csv_awk "$@" "($cond) { print c[\"provider\"] \"\\t\" c[\"instance_type\"] }" |
		LC_ALL=C sort
}

# csv_field PROVIDER TYPE COLUMN: one column of one row.
csv_field() {
	csv_awk -v P="$1" -v N="$2" -v F="$3" \
		'c["provider"] == P && c["instance_type"] == N { print c[F] }'
}

# csv_offer PROVIDER TYPE REGION COLUMN: price_usd_hour, spot_price_usd_hour
# or zones of one offer of offers.csv.
csv_offer() {
	awk -F, -v P="$1" -v N="$2" -v R="$3" -v F="$4" '
	FNR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
	$1 == P && $2 == N && $3 == R { print $h[F] }' "$DATA/offers.csv"
}

# subtypes KIND NAME: NAME (any case) and every type below it in the type
# CSVs' hierarchy of KIND (an ERE over their kind column), one per line.
subtypes() {
	awk -F, -v K="^($1)\$" -v R="$2" '
	FNR > 1 && $1 ~ K { par[$2] = $3; seen[$2] = 1 }
	END {
		for (x in seen) {
			d = 0
			for (y = x; y != "" && d++ < 100; y = par[y])
				if (tolower(y) == tolower(R)) { print x; break }
		}
	}' "$DATA/platform_types.csv" "$DATA/platform_types_added.csv" \
		"$DATA/machine_types.csv" "$DATA/machine_types_added.csv" \
		"$DATA/cclfs_types.csv" | LC_ALL=C sort
}

# words: the lines of stdin as one space-separated list (for in_list).
words() {
	tr '\n' ' '
}

# csv_resolution ROLE PROVIDER TYPE [REGION [MARKET]]: the expected resolution line
# of a role from offers.csv (REGION defaults to R0, MARKET to on-demand).
csv_resolution() {
	local region=${4:-$R0} market=${5:-on-demand} price zones
	if [ "$market" = spot ]; then
		price=$(csv_offer "$2" "$3" "$region" spot_price_usd_hour)
	else
		price=$(csv_offer "$2" "$3" "$region" price_usd_hour)
	fi
	zones=$(csv_offer "$2" "$3" "$region" zones)
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "$1" "$2" "$3" "${price:-unknown}" "$region" "${zones:--}" "$market"
}

# --- helpers: the cclfs side ---

# "provider<TAB>instance_type" of every candidate type of c1 (candidates has
# one line per offer: a type and a region), in byte order.
cand() {
	tail -n +2 "$C/candidates" | cut -f1,2 | LC_ALL=C sort -u
}

# The instance types listed by a "N instance types satisfy the contract
# (a, b, c); ..." error, one per line, in byte order.
listed_in_error() {
	sed -n 's/.*instance types satisfy the contract (\([^)]*\)).*/\1/p' "$C/error" |
		sed 's/, /\n/g' | LC_ALL=C sort
}

# touch resolve must fail with EINVAL as touch reports it; resolution stays
# empty.
resolve_fails() {
	run touch "$C/resolve"
	expect_eq "$status" 1 "rc of touch resolve"
	expect_eq "$output" "touch: setting times of '$C/resolve': Invalid argument" \
		"stderr of touch resolve"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution after a failed resolve"
}

# touch resolve must succeed and leave error empty.
resolve_ok() {
	run touch "$C/resolve"
	expect_eq "$status" 0 "rc of touch resolve (error: $(cat "$C/error"))"
	expect_eq "$(cat "$C/error")" "" "error after a successful resolve"
}

# --- 1. the issue's examples ---

@test "node_machinetype EC2Type_T3_xLarge resolves to ec2 t3.xlarge at the CSV price" {
	echo EC2Type_T3_xLarge >"$C/node_machinetype"
	# The CSV: exactly one instance type has that machine type (or one
	# below it).
	want=$(csv_select 'in_list(c["machine_type"], L)' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3_xLarge | words)")
	expect_eq "$want" "$(printf 'ec2\tt3.xlarge')" "CSV set"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 t3.xlarge)" resolution
	expect_eq "$(cand)" "$want" candidates
}

@test "node_machinetype EC2Type_T3 is ambiguous: resolve fails, error and candidates list every t3 and t3a size" {
	echo EC2Type_T3 >"$C/node_machinetype"
	# From types.csv and machine_types.csv: the types whose machine type's
	# parent is EC2Type_T3 or EC2Type_T3A, the one family below it.
	expect_eq "$(subtypes 'machine_family|machine_type' EC2Type_T3 |
		grep -vE '_(Nano|Micro|Small|Medium|Large|[0-9]*xLarge)$')" \
		"$(printf 'EC2Type_T3\nEC2Type_T3A')" "families under EC2Type_T3"
	want=$(awk -F, 'FNR == NR { if ($1 == "machine_type") par[$2] = $3; next }
		FNR > 1 && (par[$22] == "EC2Type_T3" || par[$22] == "EC2Type_T3A") { print $1 "\t" $2 }' \
		"$DATA/machine_types.csv" "$DATA/types.csv" | LC_ALL=C sort)
	expect_eq "$(csv_select 'in_list(c["machine_type"], L) && offered()' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3 | words)")" "$want" \
		"CSV set through the hierarchy (all offered in $R0)"
	n=$(echo "$want" | wc -l)
	[ "$n" -gt 1 ]
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: $n instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" candidates
	grep -qF "$(cat "$C/error")" "$TESTDIR/daemon.log"
}

@test "accelerator_count atleast 4 + Ampere: every type by the CSV; just 4 + atmost 256G; cheapest: g2-standard-48 in its cheapest region; AmazonEC2 + NVIDIA_A10G: g5.12xlarge" {
	# The NVIDIA chain of platform_types.csv: Ampere is matched by Ampere
	# and every architecture below it (Ada, Hopper).
	ampere=$(subtypes accelerator_architecture Ampere | words)
	[[ " $ampere " == *" Ada "* && " $ampere " == *" Hopper "* && " $ampere " == *" Ampere "* ]]
	echo 'atleast 4' >"$C/accelerator_count"
	echo Ampere >"$C/accelerator_architecture"
	want=$(csv_select 'c["accelerator_count"] != "" && c["accelerator_count"] >= 4 &&
		in_list(c["accelerator_architecture"], L) && offered()' -v L="$ampere")
	n=$(echo "$want" | wc -l)
	# v1 had 15; v2 adds Hopper and Blackwell types (p5, a3, a4, g4...).
	[ "$n" -gt 15 ]
	for t in a2-highgpu-4g p4de.24xlarge g2-standard-48 g5.12xlarge g6.12xlarge p5.48xlarge a3-highgpu-8g; do
		echo "$want" | cut -f2 | grep -qx "$t"
	done
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: $n instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" "candidates ($n)"

	echo 'just 4' >"$C/accelerator_count"
	echo 'atmost 256G' >"$C/node_memory_size"
	want=$(csv_select 'c["accelerator_count"] == 4 && c["memory_bytes"] != "" &&
		c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L) &&
		offered()' -v L="$ampere")
	n=$(echo "$want" | wc -l)
	for t in g2-standard-48 g5.12xlarge g6.12xlarge; do
		echo "$want" | cut -f2 | grep -qx "$t"
	done
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: $n instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" "candidates ($n)"

	# The cheapest offer of the set by CSV price (ec2 in R0, gcp in any
	# region), ties by vCPUs, then name, then region.
	cheapest=$(csv_awk -v L="$ampere" 'c["accelerator_count"] == 4 && c["memory_bytes"] != "" &&
		c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L) &&
		cheapest() != "" { print cheapest() "\t" c["vcpus"] "\t" c["provider"] "\t" c["instance_type"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k3,3g -k5,5 -k2,2 | head -1)
	expect_eq "$(echo "$cheapest" | cut -f4,5)" "$(printf 'gcp\tg2-standard-48')" "cheapest by CSV"
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node gcp g2-standard-48 "$(echo "$cheapest" | cut -f2)")" \
		"resolution with cheapest"
	expect_eq "$(cand)" "$want" "candidates with cheapest"

	echo unique >"$C/config/resolve_policy"
	echo AmazonEC2 >"$C/node_provider"
	echo NVIDIA_A10G >"$C/accelerator"
	want=$(csv_select 'c["accelerator_count"] == 4 && c["memory_bytes"] <= 256 * 2^30 &&
		in_list(c["accelerator_architecture"], L) && in_list(c["provider"], P) &&
		c["accelerator"] == "NVIDIA_A10G" && offered()' -v L="$ampere" \
		-v P="$(subtypes provider AmazonEC2 | words)")
	expect_eq "$want" "$(printf 'ec2\tg5.12xlarge')" "CSV set (1)"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 g5.12xlarge)" \
		"resolution with AmazonEC2 and NVIDIA_A10G"
}

# --- 2. type names ---

@test "type names are case-insensitive and read back in the catalog's spelling; t3.xlarge and EC2Type_T3_xLarge select the same type" {
	echo ampere >"$C/accelerator_architecture"
	expect_eq "$(cat "$C/accelerator_architecture")" Ampere "ampere read back"
	lower=$(cat "$C/candidates")
	echo AMPERE >"$C/accelerator_architecture"
	expect_eq "$(cat "$C/candidates")" "$lower" "candidates of AMPERE and ampere"
	want=$(csv_select 'in_list(c["accelerator_architecture"], L) && offered()' \
		-v L="$(subtypes accelerator_architecture Ampere | words)")
	expect_eq "$(cand)" "$want" "candidates of ampere"
	: >"$C/accelerator_architecture"
	rm "$C/accelerator_architecture"

	echo t3.XLARGE >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" t3.xlarge "t3.XLARGE read back"
	resolve_ok
	by_provider_name=$(cat "$C/resolution")
	expect_eq "$by_provider_name" "$(csv_resolution node ec2 t3.xlarge)" "resolution of t3.XLARGE"
	cand_provider_name=$(cat "$C/candidates")
	echo ec2type_t3_xlarge >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" EC2Type_T3_xLarge "ec2type_t3_xlarge read back"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$by_provider_name" "resolution of EC2Type_T3_xLarge"
	expect_eq "$(cat "$C/candidates")" "$cand_provider_name" "candidates of EC2Type_T3_xLarge"
	# The CSV ties the two names together.
	expect_eq "$(csv_field ec2 t3.xlarge machine_type)" \
		EC2Type_T3_xLarge "machine_type of t3.xlarge"
}

@test "node_provider: ec2, AmazonEC2, CloudProvider (every ec2 and gcp type), gcp, Localhost and OnPremises (the local type)" {
	local p want
	for p in ec2 AmazonEC2 CloudProvider GoogleCloud gcp Localhost OnPremises local; do
		echo "$p" >"$C/node_provider"
		want=$(csv_select 'in_list(c["provider"], L) && offered()' \
			-v L="$(subtypes provider "$p" | words)")
		# The local provider's one type, under Localhost in cclfs_types.csv.
		if subtypes provider "$p" | grep -qx local; then
			want=$(printf '%s\nlocal\tlocal' "$want" | sed '/^$/d' | LC_ALL=C sort)
		fi
		expect_eq "$(cand)" "$want" "candidates of node_provider $p"
	done
	# The supertype: every row of the CSV offered where resolution looks.
	echo CloudProvider >"$C/node_provider"
	expect_eq "$(cand)" "$(csv_select 'offered()')" "CloudProvider = every CSV row offered"
	expect_eq "$(cand | cut -f1 | uniq)" "$(printf 'ec2\ngcp')" "providers of CloudProvider"
	for p in Localhost OnPremises; do
		echo "$p" >"$C/node_provider"
		expect_eq "$(cand)" "$(printf 'local\tlocal')" "candidates of $p"
		resolve_ok
		expect_eq "$(cut -f1-3 "$C/resolution")" "$(printf 'node\tlocal\tlocal')" "resolution of $p"
	done
	echo ec2 >"$C/node_provider"
	expect_eq "$(cand | cut -f1 | sort -u)" ec2 "providers of ec2"
	expect_eq "$(cand | wc -l)" "$(awk -F, -v R="$R0" '$1 == "ec2" && $3 == R' "$DATA/offers.csv" | wc -l)" \
		"count of ec2 (its offers in $R0)"
}

@test "cluster_locale: a region by the provider's name or platform name, and EC2Region/GCPRegion, select what offers.csv offers there" {
	local r want
	# regions.csv: every region's platform name and the provider's name.
	expect_eq "$(awk -F, '$2 == "us-east-1" { print $3 }' "$DATA/regions.csv")" \
		EC2Region_USEast1 "us-east-1 in regions.csv"
	expect_eq "$(awk -F, 'NR > 1' "$DATA/regions.csv" | wc -l)" 73 "regions in regions.csv"
	for r in us-east-1 eu-west-1 europe-west4 us-central1 ap-southeast-2; do
		want=$(awk -F, -v R="$r" '$3 == R { print $1 "\t" $2 }' "$DATA/offers.csv" | LC_ALL=C sort)
		[ -n "$want" ]
		echo "$r" >"$C/cluster_locale"
		expect_eq "$(cat "$C/cluster_locale")" "$r" "$r read back"
		expect_eq "$(cand)" "$want" "candidates of $r"
		expect_eq "$(tail -n +2 "$C/candidates" | cut -f3 | sort -u)" "$r" "regions of the candidates of $r"
		# The same by the region's platform name, in any case.
		name=$(awk -F, -v R="$r" '$2 == R { print $3 }' "$DATA/regions.csv")
		echo "$name" | tr '[:upper:]' '[:lower:]' >"$C/cluster_locale"
		expect_eq "$(cat "$C/cluster_locale")" "$name" "$name read back"
		expect_eq "$(cand)" "$want" "candidates of $name"
	done
	# The parents: every region of a provider, overriding AWS_REGION.
	echo EC2Region >"$C/cluster_locale"
	expect_eq "$(cand)" "$(csv_select 'c["provider"] == "ec2" && c["regions"] != ""')" "candidates of EC2Region"
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f3 | sort -u | wc -l)" \
		"$(awk -F, '$1 == "ec2"' "$DATA/regions.csv" | wc -l)" "regions of EC2Region"
	echo GCPRegion >"$C/cluster_locale"
	expect_eq "$(cand | cut -f1 | sort -u)" gcp "providers of GCPRegion"
	expect_eq "$(tail -n +2 "$C/candidates" | wc -l)" \
		"$(awk -F, '$1 == "gcp"' "$DATA/offers.csv" | wc -l)" "offers of GCPRegion"
	# An unknown region is refused and the closest names suggested.
	run_shell "echo eu-west-9 > contracts/c1/cluster_locale"
	expect_eq "$status" 1 "rc of echo eu-west-9"
	[[ "$(cat "$C/error")" == 'contracts/c1/cluster_locale: "eu-west-9" is not a known cluster_locale; did you mean eu-west-'* ]]
}

@test "regions are part of the answer: unique lists the regions of one type; cluster_locale narrows it; cheapest compares regions; an unpriced region is never cheapest" {
	# t3.xlarge is offered in many ec2 regions; EC2Region lifts AWS_REGION.
	echo t3.xlarge >"$C/node_machinetype"
	echo EC2Region >"$C/cluster_locale"
	regions=$(awk -F, '$1 == "ec2" && $2 == "t3.xlarge" { print $3 }' "$DATA/offers.csv" | LC_ALL=C sort)
	n=$(echo "$regions" | wc -l)
	[ "$n" -gt 1 ]
	resolve_fails
	expect_eq "$(cat "$C/error")" "contracts/c1/resolve: ec2 t3.xlarge is offered in $n regions ($(echo "$regions" | paste -sd, | sed 's/,/, /g')); write one of them to cluster_locale, or cheapest to config/resolve_policy" error
	# Narrowed to one region: that offer, with its zones.
	echo eu-west-1 >"$C/cluster_locale"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 t3.xlarge eu-west-1)" "resolution in eu-west-1"
	[[ "$(cut -f6 "$C/resolution")" == *eu-west-1a* ]]
	# cheapest across every ec2 region: only us-east-1 is priced in the
	# compiled-in catalog, so that is where it goes.
	echo EC2Region >"$C/cluster_locale"
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 t3.xlarge us-east-1)" "cheapest over EC2Region"
	# Matching offers, none priced: cheapest fails and names the refresh.
	echo eu-west-1 >"$C/cluster_locale"
	[ -z "$(csv_offer ec2 t3.xlarge eu-west-1 price_usd_hour)" ]
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: 1 offers satisfy the contract, but none has a known price"*"touch catalog/ec2/refresh"* ]]
	# gcp prices every region: cheapest picks the lowest across them
	# (ties by region name).
	echo n2-standard-8 >"$C/node_machinetype"
	rm "$C/cluster_locale"
	best=$(awk -F, '$1 == "gcp" && $2 == "n2-standard-8" && $4 != "" { print $4 "\t" $3 }' "$DATA/offers.csv" |
		LC_ALL=C sort -t$'\t' -k1,1g -k2,2 | head -1 | cut -f2)
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node gcp n2-standard-8 "$best")" "cheapest gcp region"
	# ...and unique lists every gcp region of it.
	echo unique >"$C/config/resolve_policy"
	resolve_fails
	n=$(awk -F, '$1 == "gcp" && $2 == "n2-standard-8"' "$DATA/offers.csv" | wc -l)
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: gcp n2-standard-8 is offered in $n regions ("* ]]
}

@test "the configured region: a type sold elsewhere only is explained, and cluster_locale lifts it" {
	# A type of types.csv with offers, none of them in R0.
	t=$(awk -F, -v R="$R0" 'NR > 1 && $1 == "ec2" { o[$2] = 1; if ($3 == R) in0[$2] = 1 }
		END { for (x in o) if (!(x in in0)) print x }' "$DATA/offers.csv" | LC_ALL=C sort | head -1)
	[ -n "$t" ]
	echo "$t" >"$C/node_machinetype"
	n=$(awk -F, -v T="$t" '$1 == "ec2" && $2 == T' "$DATA/offers.csv" | wc -l)
	resolve_fails
	expect_eq "$(cat "$C/error")" "contracts/c1/resolve: $n offers satisfy the contract, but none in $R0, the region configured for ec2; write the region to use to cluster_locale (a region, or EC2Region or GCPRegion for all of a provider's)" error
	expect_eq "$(tail -n +2 "$C/candidates")" "" "candidates in $R0"
	r=$(awk -F, -v T="$t" '$1 == "ec2" && $2 == T { print $3 }' "$DATA/offers.csv" | LC_ALL=C sort | head -1)
	echo "$r" >"$C/cluster_locale"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 "$t" "$r")" "resolution in $r"
}

@test "Hopper on each provider, arm64 and an NPU resolve as offers.csv and types.csv say" {
	local p hopper
	hopper=$(subtypes accelerator_architecture Hopper | words)
	[[ " $hopper " == *" Blackwell "* ]]
	echo Hopper >"$C/accelerator_architecture"
	echo cheapest >"$C/config/resolve_policy"
	for p in ec2 gcp; do
		echo "$p" >"$C/node_provider"
		want=$(csv_select 'in_list(c["accelerator_architecture"], L) && offered() &&
			c["provider"] == P' -v L="$hopper" -v P="$p")
		[ -n "$want" ]
		expect_eq "$(cand)" "$want" "Hopper candidates on $p"
		best=$(csv_awk -v L="$hopper" -v P="$p" 'in_list(c["accelerator_architecture"], L) &&
			c["provider"] == P && cheapest() != "" { print cheapest() "\t" c["vcpus"] "\t" c["instance_type"] }' |
			LC_ALL=C sort -t$'\t' -k1,1g -k3,3g -k4,4 -k2,2 | head -1)
		resolve_ok
		expect_eq "$(cat "$C/resolution")" \
			"$(csv_resolution node "$p" "$(echo "$best" | cut -f4)" "$(echo "$best" | cut -f2)")" \
			"cheapest Hopper on $p"
	done
	rm "$C/accelerator_architecture" "$C/node_provider"
	# arm64: the Graviton types of ec2 and the Arm series of gcp.
	echo arm64 >"$C/node_architecture"
	expect_eq "$(cat "$C/node_architecture")" arm64 "node_architecture read back"
	want=$(csv_select 'c["architecture"] == "arm64" && offered()')
	expect_eq "$(cand)" "$want" "arm64 candidates"
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f4 | sort -u)" arm64 "architecture column"
	echo aarch64 >"$C/node_architecture"
	expect_eq "$(cat "$C/node_architecture")" aarch64 "the alias aarch64 read back"
	expect_eq "$(cand)" "$want" "aarch64 candidates"
	best=$(csv_awk 'c["architecture"] == "arm64" && cheapest() != "" { print cheapest() "\t" c["vcpus"] "\t" c["provider"] "\t" c["instance_type"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k3,3g -k5,5 -k2,2 | head -1)
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$best" | cut -f4)" "$(echo "$best" | cut -f5)" "$(echo "$best" | cut -f2)")" \
		"cheapest arm64"
	rm "$C/node_architecture"
	# An NPU: Trainium and Inferentia.
	echo NPU >"$C/accelerator_type"
	want=$(csv_select 'in_list(c["accelerator_type"], L) && offered()' \
		-v L="$(subtypes accelerator_type NPU | words)")
	echo "$want" | cut -f2 | grep -q '^trn1\.'
	echo "$want" | cut -f2 | grep -q '^inf2\.'
	expect_eq "$(cand)" "$want" "NPU candidates"
	echo AWSTrainium2 >"$C/accelerator"
	echo EC2Region >"$C/cluster_locale"
	echo unique >"$C/config/resolve_policy"
	want=$(csv_select 'c["accelerator"] == "AWSTrainium2" && c["regions"] != ""')
	expect_eq "$(cand)" "$want" "Trainium2 candidates"
	# A type without a known price anywhere is never cheapest.
	echo cheapest >"$C/config/resolve_policy"
	if [ -z "$(csv_awk 'c["accelerator"] == "AWSTrainium2" { R0 = "x"; for (k in price) if (index(k, "ec2," c["instance_type"] ",") == 1 && price[k] != "") print k }')" ]; then
		resolve_fails
		[[ "$(cat "$C/error")" == *"none has a known price"* ]]
	fi
}

@test "every alias of platform_aliases.csv is accepted and selects what its target selects" {
	# No alias target (nor any type below one) is the architecture of an
	# instance type of the CSV, so each alias selects nothing: the test
	# checks that with awk, then that the alias and its target give the
	# same candidates and the same explanation of the failure.
	local kind alias target want n=0 e1 c1
	while IFS=, read -r kind alias target; do
		n=$((n + 1))
		want=$(csv_select 'in_list(c[K], L)' -v K="$kind" \
			-v L="$(subtypes "$kind" "$target" | words)")
		echo "$alias" | tr '[:upper:]' '[:lower:]' >"$C/$kind"
		expect_eq "$(cat "$C/$kind")" "$alias" "$kind $alias read back"
		expect_eq "$(cand)" "$want" "candidates of $kind $alias"
		run touch "$C/resolve"
		e1=$(cat "$C/error")
		c1=$(cat "$C/candidates")
		echo "$target" >"$C/$kind"
		run touch "$C/resolve"
		expect_eq "$(cat "$C/error")" "$e1" "error of $alias vs $target"
		expect_eq "$(cat "$C/candidates")" "$c1" "candidates of $alias vs $target"
		rm "$C/$kind"
	done < <(tail -n +2 "$DATA/platform_aliases.csv")
	expect_eq "$n" "$(($(wc -l <"$DATA/platform_aliases.csv") - 1))" "aliases tried"
	# That nothing matched is what the data says (see above); an alias of
	# cclfs_aliases.csv that does select types is tested with us-east-1.
	[ "$n" -gt 0 ]
}

@test "an unknown type name is refused with EINVAL; error suggests the closest names" {
	run_shell "echo Amper > contracts/c1/accelerator_architecture"
	expect_eq "$status" 1 "rc of echo Amper"
	[[ "$output" == *"Invalid argument"* ]]
	expect_eq "$(cat "$C/accelerator_architecture")" "" "accelerator_architecture after the refusal"
	[[ "$(cat "$C/error")" == 'contracts/c1/accelerator_architecture: "Amper" is not a known accelerator_architecture; did you mean Ampere'* ]]
	grep -q '^accelerator_architecture,Ampere,' "$DATA/platform_types.csv"
	run_shell "echo t3.xlarg > contracts/c1/node_machinetype"
	expect_eq "$status" 1 "rc of echo t3.xlarg"
	[[ "$output" == *"Invalid argument"* ]]
	[[ "$(cat "$C/error")" == 'contracts/c1/node_machinetype: "t3.xlarg" is not a known node_machinetype; did you mean t3.xlarge'* ]]
	grep -qF 'contracts/c1/node_machinetype: "t3.xlarg" is not a known node_machinetype' \
		"$TESTDIR/daemon.log"
}

# --- 3. failures explained ---

@test "no type at all: the write fails, error names the assumption and the closest miss (largest memory per the CSV)" {
	echo 'atleast 100T' >"$C/node_memory_size"
	# The CSV's largest memory, and the types that have it (v2 has a tie).
	rows=$(csv_awk 'c["memory_bytes"] != "" { print c["memory_bytes"] "\t" c["provider"] "\t" c["instance_type"] "\t" bin(c["memory_bytes"]) }' |
		sort -t$'\t' -k1,1g)
	most=$(echo "$rows" | tail -1 | cut -f1)
	tied=$(echo "$rows" | awk -F'\t' -v M="$most" '$1 == M { print $2 " " $3 }')
	[ "$most" -lt $((100 * 1024 ** 4)) ]
	# Every type is left before node_memory_size: the CSV's and the local one.
	total=$(($(tail -n +2 "$DATA/types.csv" | wc -l) + $(ls "$MNT/catalog/local" | wc -l)))
	run_shell "echo again > contracts/c1/resolve"
	expect_eq "$status" 1 "rc of echo > resolve"
	[[ "$output" == *"write error: Invalid argument"* ]]
	err=$(cat "$C/error")
	[[ "$err" == "contracts/c1/resolve: no instance type satisfies node_memory_size; of the $total types that satisfy the assumptions before it, the closest is "*" with node_memory_size $(echo "$rows" | tail -1 | cut -f4)" ]] || {
		echo "error: [$err]" >&2
		return 1
	}
	closest=$(echo "$err" | sed 's/.*the closest is \(.*\) with node_memory_size.*/\1/')
	echo "$tied" | grep -qxF -- "$closest"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution"
	grep -qF "$(cat "$C/error")" "$TESTDIR/daemon.log"
	resolve_fails
}

@test "no type at all: the closest miss is among the types the earlier assumptions left (most vCPUs of gcp per the CSV)" {
	echo gcp >"$C/node_provider"
	echo 'atleast 100000' >"$C/node_vcpus_count"
	left=$(awk -F, '$1 == "gcp"' "$DATA/types.csv" | wc -l)
	most=$(awk -F, '$1 == "gcp" && $3 != "" { print $3 }' "$DATA/types.csv" | sort -g | tail -1)
	# Types with that many vCPUs (there may be a tie).
	tied=$(awk -F, -v M="$most" '$1 == "gcp" && $3 == M { print $2 }' "$DATA/types.csv")
	resolve_fails
	err=$(cat "$C/error")
	[[ "$err" == "contracts/c1/resolve: no instance type satisfies node_vcpus_count; of the $left types that satisfy the assumptions before it, the closest is gcp "*" with node_vcpus_count $most" ]] || {
		echo "error: [$err]" >&2
		return 1
	}
	closest=$(echo "$err" | sed 's/.*the closest is gcp \([^ ]*\) with.*/\1/')
	echo "$tied" | grep -qx -- "$closest"
	# A type name that empties the set: named too.
	rm "$C/node_vcpus_count"
	echo NVIDIA_A10G >"$C/accelerator"
	expect_eq "$(csv_select 'c["provider"] == "gcp" && c["accelerator"] == "NVIDIA_A10G"')" "" \
		"gcp types with an A10G"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: no instance type satisfies accelerator; of the $left types that satisfy the assumptions before it, the closest is gcp "* ]]
}

@test "several types: error lists them and hints at cheapest; the next success clears error" {
	echo EC2Type_T3A >"$C/node_machinetype"
	want=$(csv_select 'in_list(c["machine_type"], L) && offered()' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3A | words)")
	n=$(echo "$want" | wc -l)
	[ "$n" -gt 1 ]
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: $n instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(stat -c %s "$C/error")" 0 "size of error"
}

# --- 4. resolve_policy ---

@test "resolve_policy cheapest from config/resolve_policy picks the lowest CSV price; unique fails again" {
	echo EC2Type_T3 >"$C/node_machinetype"
	best=$(csv_awk -v L="$(subtypes 'machine_(type|family)' EC2Type_T3 | words)" \
		'in_list(c["machine_type"], L) && cheapest() != "" { print cheapest() "\t" c["vcpus"] "\t" c["instance_type"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k3,3g -k4,4 | head -1 | cut -f4)
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 "$best")" "resolution with cheapest"
	echo unique >"$C/config/resolve_policy"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "resolution after the policy changed"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: "*" instance types satisfy the contract ("* ]]
}

@test "config/market spot: cheapest compares spot prices, resolution says spot, candidates follow; no spot price is said" {
	echo n2-standard-8 >"$C/node_machinetype"
	echo cheapest >"$C/config/resolve_policy"
	# The cheapest region of each market, ties by region name.
	od=$(awk -F, '$1 == "gcp" && $2 == "n2-standard-8" && $4 != "" { print $4 "\t" $3 }' "$DATA/offers.csv" |
		LC_ALL=C sort -t$'\t' -k1,1g -k2,2 | head -1 | cut -f2)
	sp=$(awk -F, '$1 == "gcp" && $2 == "n2-standard-8" && $5 != "" { print $5 "\t" $3 }' "$DATA/offers.csv" |
		LC_ALL=C sort -t$'\t' -k1,1g -k2,2 | head -1 | cut -f2)
	[ "$od" != "$sp" ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node gcp n2-standard-8 "$od")" "on-demand"
	echo Spot >"$C/config/market"
	expect_eq "$(cat "$C/config/market")" spot "config/market"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "resolution after the market changed"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node gcp n2-standard-8 "$sp" spot)" "spot"
	# candidates: the spot price orders them; both prices are shown.
	expect_eq "$(sed -n 2p "$C/candidates" | cut -f3)" "$sp" "first candidate's region"
	expect_eq "$(sed -n 2p "$C/candidates" | cut -f9,10)" \
		"$(csv_offer gcp n2-standard-8 "$sp" price_usd_hour)	$(csv_offer gcp n2-standard-8 "$sp" spot_price_usd_hour)" "first candidate's prices"
	# Per role: the nodes of PeerWorkers are workers.
	echo 'manager=spot worker=on-demand' >"$C/config/market"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node gcp n2-standard-8 "$od")" "workers on demand"
	run bash -c "echo sometimes >'$C/config/market'"
	[ "$status" = 1 ]
	[[ "$output" == *"Invalid argument"* ]]
	[[ "$(cat "$C/error")" == *'"sometimes" is not a market'* ]]
	expect_eq "$(cat "$C/config/market")" 'manager=spot worker=on-demand' "market after a refused write"
	# The compiled-in catalog has no EC2 spot price.
	echo t3.xlarge >"$C/node_machinetype"
	echo spot >"$C/config/market"
	resolve_fails
	[[ "$(cat "$C/error")" == *"offers satisfy the contract, but none has a known spot price"* ]]
}

@test "resolve_policy cheapest from cclfs.conf [defaults]; config/resolve_policy unique overrides it" {
	cclfs_unmount
	printf '[defaults]\nresolve_policy = "cheapest"\n' >"$TESTDIR/cclfs.conf"
	cclfs_mount -o config="$TESTDIR/cclfs.conf"
	C=$MNT/contracts/c2
	mkdir "$C"
	expect_eq "$(cat "$C/config/resolve_policy")" "" "config/resolve_policy (the default applies)"
	echo 'just 4' >"$C/accelerator_count"
	echo Ampere >"$C/accelerator_architecture"
	echo 'atmost 256G' >"$C/node_memory_size"
	best=$(csv_awk -v L="$(subtypes accelerator_architecture Ampere | words)" \
		'c["accelerator_count"] == 4 && c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L) && cheapest() != "" { print cheapest() "\t" c["vcpus"] "\t" c["instance_type"] "\t" c["provider"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k3,3g -k4,4 -k2,2 | head -1)
	n=$(csv_select 'c["accelerator_count"] == 4 && c["memory_bytes"] != "" && c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L) && offered()' \
		-v L="$(subtypes accelerator_architecture Ampere | words)" | wc -l)
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$best" | cut -f5)" "$(echo "$best" | cut -f4)" "$(echo "$best" | cut -f2)")" \
		"resolution with cheapest from cclfs.conf"
	echo unique >"$C/config/resolve_policy"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c2/resolve: $n instance types satisfy the contract ("* ]]
	rm "$C/config/resolve_policy"
	resolve_ok
}

@test "cheapest: a price tie is broken by fewer vCPUs, then by name" {
	# A tie found in the CSV: the types with 2 TiB of memory and 64..128
	# vCPUs. The cheapest price among them is shared by types with
	# different vCPU counts, and the first of them by name alone is not
	# the one with the fewest vCPUs.
	echo 'just 2T' >"$C/node_memory_size"
	echo 64..128 >"$C/node_vcpus_count"
	echo cheapest >"$C/config/resolve_policy"
	set_rows=$(csv_awk 'c["memory_bytes"] == 2 * 2^40 && c["vcpus"] >= 64 && c["vcpus"] <= 128 && cheapest() != "" { split(cheapest(), b, "\t"); print b[1] "\t" c["vcpus"] "\t" c["instance_type"] "\t" c["provider"] "\t" b[2] }')
	low=$(echo "$set_rows" | sort -t$'\t' -k1,1g | head -1 | cut -f1)
	tie=$(echo "$set_rows" | awk -F'\t' -v P="$low" '$1 == P')
	[ "$(echo "$tie" | wc -l)" -ge 2 ]
	[ "$(echo "$tie" | cut -f2 | sort -u | wc -l)" -ge 2 ]
	by_vcpus=$(echo "$tie" | LC_ALL=C sort -t$'\t' -k2,2g -k3,3 | head -1)
	by_name=$(echo "$tie" | LC_ALL=C sort -t$'\t' -k3,3 | head -1)
	[ "$by_vcpus" != "$by_name" ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$by_vcpus" | cut -f4)" "$(echo "$by_vcpus" | cut -f3)" "$(echo "$by_vcpus" | cut -f5)")" \
		"tie broken by vCPUs"
	# Among those with the most vCPUs of the tie, the name decides.
	most=$(echo "$tie" | cut -f2 | sort -g | tail -1)
	echo "$most" >"$C/node_vcpus_count"
	same=$(echo "$tie" | awk -F'\t' -v V="$most" '$2 == V' | LC_ALL=C sort -t$'\t' -k3,3)
	[ "$(echo "$same" | wc -l)" -ge 2 ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$same" | head -1 | cut -f4)" "$(echo "$same" | head -1 | cut -f3)" "$(echo "$same" | head -1 | cut -f5)")" \
		"tie broken by name"
}

# --- 5. ManagerWorkers ---

@test "ManagerWorkers: a manager line and a worker line, role files overriding the contract's, each right per the CSV" {
	echo ManagerWorkers >"$C/cluster_type"
	echo EC2Type_T3 >"$C/node_machinetype"
	echo 8 >"$C/node_vcpus_count"
	echo EC2Type_T3A >"$C/manager/node_machinetype"
	echo EC2Type_T3_Small >"$C/worker/node_machinetype"
	echo 2 >"$C/worker/node_vcpus_count"
	manager=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 8 && offered()' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3A | words)")
	worker=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 2 && offered()' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3_Small | words)")
	top=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 8 && offered()' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3 | words)")
	expect_eq "$(echo "$manager" | wc -l)" 1 "CSV manager set"
	expect_eq "$(echo "$worker" | wc -l)" 1 "CSV worker set"
	[ "$(echo "$top" | wc -l)" -gt 1 ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(
		csv_resolution manager $manager
		echo
		csv_resolution worker $worker
	)" resolution
	# candidates: the contract-level assumptions only.
	expect_eq "$(cand)" "$top" candidates
	# A failure in one role names it.
	echo 3 >"$C/worker/node_vcpus_count"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "resolution after a worker change"
	expect_eq "$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 3' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3_Small | words)")" "" "CSV worker set with 3 vCPUs"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: worker role: no instance type satisfies node_vcpus_count; "*"closest is $(echo "$worker" | tr '\t' ' ') with node_vcpus_count 2" ]]
	echo 2 >"$C/worker/node_vcpus_count"
	rm "$C/manager/node_machinetype"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: manager role: $(echo "$top" | wc -l) instance types satisfy the contract ("* ]]
}

@test "PeerWorkers and PeerWorkersMPI resolve one role, node; manager/ and worker/ files do not apply" {
	for t in PeerWorkers PeerWorkersMPI; do
		echo "$t" >"$C/cluster_type"
		echo t3.xlarge >"$C/node_machinetype"
		echo EC2Type_T3A >"$C/manager/node_machinetype"
		resolve_ok
		expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 t3.xlarge)" "resolution of $t"
		rm "$C/manager/node_machinetype"
	done
}

# --- 6. what clears a resolution ---

@test "changing any assumption clears resolution; resolving twice gives the same content" {
	local f v
	echo t3.xlarge >"$C/node_machinetype"
	resolve_ok
	first=$(cat "$C/resolution")
	expect_eq "$first" "$(csv_resolution node ec2 t3.xlarge)" resolution
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$first" "second resolve"
	echo go >"$C/resolve"
	expect_eq "$(cat "$C/resolution")" "$first" "third resolve (a write)"
	while read -r f v; do
		resolve_ok
		expect_eq "$(stat -c %s "$C/resolution")" "$((${#first} + 1))" "size before $f"
		echo "$v" >"$C/$f"
		expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution after writing $f"
		expect_eq "$(cat "$C/resolution")" "" "resolution after writing $f"
	done <<'EOF'
node_memory_size atleast 1G
node_vcpus_count atleast 1
network_performance atleast 1M
processor_manufacturer Intel
cluster_locale us-east-1
node_provider ec2
manager/node_vcpus_count atleast 2
worker/accelerator_count atmost 8
config/resolve_policy cheapest
EOF
	resolve_ok
	# rm resets a file to its default: a change as well.
	rm "$C/node_memory_size"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution after rm node_memory_size"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$first" "resolution after the changes"
}

@test "with node_provider empty every provider is searched: an ec2-only and a gcp-only contract resolve to their provider" {
	expect_eq "$(cat "$C/node_provider")" "" "node_provider"
	echo NVIDIA_A10G >"$C/accelerator"
	echo 1 >"$C/accelerator_count"
	echo 4 >"$C/node_vcpus_count"
	want=$(csv_select 'c["accelerator"] == "NVIDIA_A10G" && c["accelerator_count"] == 1 && c["vcpus"] == 4')
	expect_eq "$(echo "$want" | wc -l)" 1 "CSV ec2 set"
	expect_eq "$(echo "$want" | cut -f1)" ec2 "provider of the CSV ec2 set"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node $want)" "ec2-only contract"
	rm "$C/accelerator" "$C/accelerator_count"
	echo 416 >"$C/node_vcpus_count"
	echo 'atmost 8T' >"$C/node_memory_size"
	want=$(csv_select 'c["vcpus"] == 416 && c["memory_bytes"] <= 8 * 2^40 && offered()')
	expect_eq "$(echo "$want" | wc -l)" 1 "CSV gcp set"
	expect_eq "$(echo "$want" | cut -f1)" gcp "provider of the CSV gcp set"
	# One type, offered in several gcp regions: one of them must be named.
	region=$(awk -F, -v T="$(echo "$want" | cut -f2)" '$1 == "gcp" && $2 == T { print $3 }' \
		"$DATA/offers.csv" | LC_ALL=C sort | head -1)
	if [ "$(awk -F, -v T="$(echo "$want" | cut -f2)" '$1 == "gcp" && $2 == T' "$DATA/offers.csv" | wc -l)" -gt 1 ]; then
		resolve_fails
		[[ "$(cat "$C/error")" == *" is offered in "*" regions ("*"$region"* ]]
	fi
	echo "$region" >"$C/cluster_locale"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node $want "$region")" "gcp-only contract"
}

# --- 7. candidates ---

# The candidates lines of every offer resolution considers (ec2 in R0, gcp
# everywhere), in the order DESIGN gives (price, unknown last, then name,
# provider and region), as cclfs renders the columns.
csv_candidate_lines() {
	csv_awk '{
		acc = "-"
		if (c["accelerator_count"] != "" && c["accelerator_count"] != 0)
			acc = c["accelerator_count"] " x " (c["accelerator"] == "" ? "unknown" : c["accelerator"])
		m = bin(c["memory_bytes"]); am = bin(c["accelerator_memory_bytes"])
		n = split(c["regions"], r, " ")
		for (i = 1; i <= n; i++) {
			if (c["provider"] == "ec2" && r[i] != R0) continue
			k = c["provider"] "," c["instance_type"] "," r[i]
			printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				price[k] == "" ? "9e99" : price[k],
				c["instance_type"], c["provider"], r[i],
				c["provider"], c["instance_type"], r[i],
				c["architecture"] == "" ? "-" : c["architecture"],
				c["vcpus"] == "" ? "-" : c["vcpus"],
				m == "" ? "-" : m, acc, am == "" ? "-" : am,
				price[k] == "" ? "unknown" : price[k],
				spot[k] == "" ? "unknown" : spot[k],
				zones[k] == "" ? "-" : zones[k]
		}
	}' | LC_ALL=C sort -t$'\t' -k1,1g -k2,2 -k3,3 -k4,4 | cut -f5-
}

@test "candidates: the header, one tab-separated line per offer, sorted by price (unknown last) then name, whatever the policy and role files" {
	echo CloudProvider >"$C/node_provider"
	expect_eq "$(head -1 "$C/candidates")" \
		"$(printf 'provider\tinstance_type\tregion\tarchitecture\tvcpus\tmemory\taccelerators\taccelerator_memory\tprice_per_hour\tspot_per_hour\tzones')" header
	expect_eq "$(tail -n +2 "$C/candidates" | awk -F'\t' 'NF != 11' | head -3)" "" "lines without 11 fields"
	want=$(csv_candidate_lines)
	expect_eq "$(tail -n +2 "$C/candidates" | wc -l)" "$(echo "$want" | wc -l)" "line count"
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f1-3)" "$(echo "$want" | cut -f1-3)" "order of candidates"
	# Unknown prices come last.
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f9 | awk '$1 == "unknown" { u = 1; next } u { print "priced after unknown: " $0 }')" "" "unknown last"
	all=$(cat "$C/candidates")
	echo cheapest >"$C/config/resolve_policy"
	echo EC2Type_T3 >"$C/manager/node_machinetype"
	echo gcp >"$C/worker/node_provider"
	echo ManagerWorkers >"$C/cluster_type"
	expect_eq "$(cat "$C/candidates")" "$all" "candidates with cheapest and role files"
	expect_eq "$(stat -c %s "$C/candidates")" "$((${#all} + 1))" "size of candidates"
}

@test "candidates: region, architecture, vcpus, memory (binary suffix), accelerators, accelerator memory, prices and zones agree with the CSV" {
	echo CloudProvider >"$C/node_provider"
	want=$(csv_candidate_lines)
	got=$(tail -n +2 "$C/candidates")
	expect_eq "$(diff <(echo "$want") <(echo "$got") | head -20)" "" "every column (diff CSV cclfs)"
	# A few rows by hand against the CSV.
	grep -q "^$(printf 'ec2\tt3.xlarge\tus-east-1\tx86_64\t4\t16G\t-\t-\t')" <<<"$got"
	grep -q '^ec2,t3.xlarge,4,17179869184,' "$DATA/types.csv"
	grep -q "^$(printf 'ec2\tg5.12xlarge\tus-east-1\tx86_64\t48\t192G\t4 x NVIDIA_A10G\t24G\t')" <<<"$got"
	grep -q '^ec2,g5.12xlarge,48,206158430208,,4,GPU,NVIDIA,Ampere,NVIDIA_A10G,25769803776,' "$DATA/types.csv"
}

@test "prices read back exactly as the CSV gives them: candidates, resolution, catalog/.../price_per_hour and regions" {
	local bad="" p t price got region
	echo CloudProvider >"$C/node_provider"
	want=$(csv_candidate_lines | cut -f1-3,9)
	got=$(tail -n +2 "$C/candidates" | cut -f1-3,9)
	d=$(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -40)
	[ -z "$d" ] || bad="candidates prices differ from the CSV (< CSV, > cclfs):
$d"
	# The offers whose price has the most significant digits in the CSV.
	rm "$C/node_provider"
	while IFS=$'\t' read -r p t region price; do
		got=$(awk -F'\t' -v R="$region" '$1 == R { print $2 }' "$MNT/catalog/$p/$t/regions")
		[ "$got" = "$price" ] || bad="$bad
catalog/$p/$t/regions, $region: CSV $price, cclfs $got"
		echo "$t" >"$C/node_machinetype"
		echo "$region" >"$C/cluster_locale"
		run touch "$C/resolve"
		got=$(cut -f4,5 "$C/resolution")
		[ "$got" = "$(printf '%s\t%s' "$price" "$region")" ] || bad="$bad
resolution of $t in $region: CSV $price, cclfs $got"
		# price_per_hour: the lowest known price of its offers.
		low=$(awk -F, -v P="$p" -v T="$t" '$1 == P && $2 == T && $4 != "" { print $4 }' \
			"$DATA/offers.csv" | sort -g | head -1)
		got=$(cat "$MNT/catalog/$p/$t/price_per_hour")
		[ "$got" = "$low" ] || bad="$bad
catalog/$p/$t/price_per_hour: CSV $low, cclfs $got"
	done < <(awk -F, 'NR > 1 && $4 != "" { s = $4; gsub(/[^0-9]/, "", s); sub(/^0+/, "", s)
		print length(s) "\t" $1 "\t" $2 "\t" $3 "\t" $4 }' "$DATA/offers.csv" |
		sort -t$'\t' -k1,1nr -k3,3 -k4,4 | head -3 | cut -f2-)
	[ -z "$bad" ] || {
		echo "$bad" >&2
		return 1
	}
}

# --- 8. catalog/ ---

@test "catalog/: ec2 gcp local regions; one folder per CSV row of each provider; regions/PROVIDER/REGION lists what offers.csv offers there" {
	expect_eq "$(ls "$MNT/catalog")" "$(printf 'ec2\ngcp\nlocal\nregions')" "ls catalog"
	for p in ec2 gcp; do
		expect_eq "$(ls "$MNT/catalog/$p" | grep -vx refresh | wc -l)" \
			"$(awk -F, -v P="$p" '$1 == P' "$DATA/types.csv" | wc -l)" "ls catalog/$p | wc -l"
		expect_eq "$(ls "$MNT/catalog/$p" | grep -vx refresh | LC_ALL=C sort)" \
			"$(awk -F, -v P="$p" '$1 == P { print $2 }' "$DATA/types.csv" | LC_ALL=C sort)" \
			"names under catalog/$p"
		expect_eq "$(ls "$MNT/catalog/regions/$p")" \
			"$(awk -F, -v P="$p" '$1 == P { print $2 }' "$DATA/regions.csv" | LC_ALL=C sort)" \
			"regions of $p"
	done
	expect_eq "$(ls "$MNT/catalog/local")" local "ls catalog/local"
	expect_eq "$(ls "$MNT/catalog/regions")" "$(printf 'ec2\ngcp')" "ls catalog/regions"
	for r in ec2/eu-west-1 gcp/europe-west4; do
		expect_eq "$(ls "$MNT/catalog/regions/$r" | LC_ALL=C sort)" \
			"$(awk -F, -v P="${r%/*}" -v R="${r#*/}" '$1 == P && $3 == R { print $2 }' "$DATA/offers.csv" | LC_ALL=C sort)" \
			"types of $r"
	done
	expect_eq "$(readlink "$MNT/catalog/regions/ec2/eu-west-1/t3.xlarge")" ../../../ec2/t3.xlarge "a region's type link"
	expect_eq "$(cat "$MNT/catalog/regions/ec2/eu-west-1/t3.xlarge/node_vcpus_count")" 4 "through the link"
	[ ! -e "$MNT/catalog/regions/ec2/eu-west-9" ]
	[ ! -e "$MNT/catalog/regions/ec2/eu-west-1/n2-standard-8" ]
}

@test "catalog/ec2/g5.12xlarge: one 0444 file per assumption file plus price_per_hour, architecture and regions, each as the CSV says; writing is refused" {
	T=$MNT/catalog/ec2/g5.12xlarge
	expect_eq "$(LC_ALL=C ls "$T")" "$( (ls "$C/manager"; printf 'price_per_hour\narchitecture\nregions\n') | LC_ALL=C sort)" "files of g5.12xlarge"
	expect_eq "$(stat -c '%a' "$T"/* | sort -u)" 444 "modes"
	for f in "$T"/*; do [ -f "$f" ] && [ ! -L "$f" ]; done
	# File -> CSV column, and how the value is written.
	while read -r f col how; do
		v=$(csv_field ec2 g5.12xlarge "$col")
		case $how in
		bin) v=$(csv_awk -v V="$v" 'FNR == 2 && !done++ { print bin(V) }') ;;
		dec) v=$(csv_awk -v V="$v" 'FNR == 2 && !done++ { print dec(V) }') ;;
		esac
		expect_eq "$(cat "$T/$f")" "$v" "catalog/ec2/g5.12xlarge/$f (CSV $col)"
	done <<'EOF'
node_provider provider as-is
node_machinetype machine_type as-is
node_memory_size memory_bytes bin
node_ecu_count ecu as-is
node_vcpus_count vcpus as-is
accelerator_count accelerator_count as-is
accelerator_memory accelerator_memory_bytes bin
accelerator_type accelerator_type as-is
accelerator_manufacturer accelerator_manufacturer as-is
accelerator_architecture accelerator_architecture as-is
accelerator accelerator as-is
processor_manufacturer processor_manufacturer as-is
processor_microarchitecture processor_microarchitecture as-is
processor processor as-is
storage_type storage_type as-is
storage_size storage_bytes bin
network_performance network_bits_per_s dec
node_architecture architecture as-is
architecture architecture as-is
EOF
	# price_per_hour: the lowest known price of its offers (us-east-1's).
	expect_eq "$(cat "$T/price_per_hour")" "$(csv_offer ec2 g5.12xlarge us-east-1 price_usd_hour)" price_per_hour
	# regions: one line per offer (region, on-demand, spot, zones; - when
	# unknown), by region; cluster_locale: each region's platform name.
	expect_eq "$(cat "$T/regions")" "$(awk -F, '$1 == "ec2" && $2 == "g5.12xlarge" {
		printf "%s\t%s\t%s\t%s\n", $3, $4 == "" ? "-" : $4, $5 == "" ? "-" : $5, $6 == "" ? "-" : $6 }' \
		"$DATA/offers.csv" | LC_ALL=C sort)" regions
	expect_eq "$(LC_ALL=C sort "$T/cluster_locale")" "$(awk -F, 'FNR == NR { if ($1 == "ec2") name[$2] = $3; next }
		$1 == "ec2" && $2 == "g5.12xlarge" { print name[$3] }' "$DATA/regions.csv" "$DATA/offers.csv" | LC_ALL=C sort)" cluster_locale
	# The issue's values, checked against the CSV above.
	expect_eq "$(cat "$T/node_vcpus_count")" 48 node_vcpus_count
	expect_eq "$(cat "$T/accelerator")" NVIDIA_A10G accelerator
	expect_eq "$(cat "$T/node_memory_size")" 192G node_memory_size
	expect_eq "$(stat -c %s "$T/node_vcpus_count")" 3 "size of node_vcpus_count"
	run_shell "echo 1 > catalog/ec2/g5.12xlarge/node_vcpus_count"
	expect_eq "$status" 1 "rc of a write into catalog/"
	[[ "$output" == *"Permission denied"* ]]
	run_shell "touch catalog/ec2/g5.12xlarge/new"
	[ "$status" -eq 1 ]
	[[ "$output" == *"Permission denied"* ]]
	run_shell "rm catalog/ec2/g5.12xlarge/price_per_hour"
	[ "$status" -eq 1 ]
	expect_eq "$(cat "$T/node_vcpus_count")" 48 "node_vcpus_count after the refusals"
}

@test "catalog/local/local: node_provider local, node_vcpus_count = nproc, node_memory_size = MemTotal" {
	L=$MNT/catalog/local/local
	expect_eq "$(cat "$L/node_provider")" local node_provider
	expect_eq "$(cat "$L/node_machinetype")" local node_machinetype
	case $(uname -m) in
	aarch64) arch=arm64 ;;
	*) arch=$(uname -m) ;;
	esac
	expect_eq "$(cat "$L/node_architecture")" "$arch" node_architecture
	expect_eq "$(cat "$L/regions")" "" "regions of the local type"
	expect_eq "$(cat "$L/node_vcpus_count")" "$(nproc)" node_vcpus_count
	kib=$(awk '$1 == "MemTotal:" && $3 == "kB" { print $2 }' /proc/meminfo)
	expect_eq "$(cat "$L/node_memory_size")" \
		"$(csv_awk -v V="$((kib * 1024))" 'FNR == 2 && !done++ { print bin(V) }')" node_memory_size
	expect_eq "$(stat -c '%a' "$L/node_vcpus_count")" 444 mode
}

# --- 9. the installed binary ---

@test "cmake --install: the installed cclfs needs no other file; it resolves node_machinetype t3.xlarge" {
	BUILD=$(dirname "$CCLFS_BIN")
	run cmake --install "$BUILD" --prefix "$TESTDIR/prefix"
	expect_eq "$status" 0 "rc of cmake --install: $output"
	[ -x "$TESTDIR/prefix/bin/cclfs" ]
	# Nothing of catalog/data is installed: the binary carries it.
	expect_eq "$(find "$TESTDIR/prefix" -name '*.csv')" "" "CSV files installed"
	MNT2=$TESTDIR/mnt2
	mkdir "$MNT2"
	(cd / && exec "$TESTDIR/prefix/bin/cclfs" "$MNT2" -f -o statedir="$TESTDIR/state2" \
		>>"$TESTDIR/daemon.log" 2>&1 3>&-) &
	pid=$!
	cclfs_track_pid "$pid"
	for _ in $(seq 1 200); do
		grep -qs " $MNT2 fuse.cclfs " /proc/self/mounts && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	grep -qs " $MNT2 fuse.cclfs " /proc/self/mounts || {
		cat "$TESTDIR/daemon.log" >&2
		return 1
	}
	mkdir "$MNT2/contracts/c1"
	echo t3.xlarge >"$MNT2/contracts/c1/node_machinetype"
	touch "$MNT2/contracts/c1/resolve"
	expect_eq "$(cat "$MNT2/contracts/c1/resolution")" "$(csv_resolution node ec2 t3.xlarge)" \
		"resolution on the installed binary"
	expect_eq "$(ls "$MNT2/catalog/ec2" | grep -vx refresh | wc -l)" \
		"$(awk -F, '$1 == "ec2"' "$DATA/types.csv" | wc -l)" "catalog/ec2 of the installed binary"
	fusermount3 -u "$MNT2"
	wait "$pid"
}
