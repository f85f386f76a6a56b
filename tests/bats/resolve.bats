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

# Fail with a message naming what differed.
expect_eq() {
	if [ "$1" != "$2" ]; then
		printf '%s:\n--- expected\n%s\n--- got\n%s\n' "${3:-value}" "$2" "$1" >&2
		return 1
	fi
}

# csv_awk [AWK_ARGS...] PROGRAM: run PROGRAM once per row of
# instance_types.csv with c[COLUMN] holding each column by its header name,
# c["machine_type"] from instance_extras.csv, and c["locale"] given the
# provider's region of cclfs_regions.csv when the column is empty.
# Functions: in_list(x, "a b c"); bin(bytes) and dec(bits) render a
# quantity with the largest suffix K M G T P (powers of 1024 / 1000) that
# divides it exactly, else the number as the CSV writes it.
csv_awk() {
	local prog=${!#}
	awk -F, "${@:1:$#-1}" '
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
	FILENAME ~ /instance_extras/ {
		if (FNR == 1) for (i = 1; i <= NF; i++) xh[$i] = i
		else mt[$xh["provider"] "," $xh["instance_type"]] = $xh["machine_type"]
		next
	}
	FILENAME ~ /cclfs_regions/ { if (FNR > 1) reg[$1] = $2; next }
	FNR == 1 { for (i = 1; i <= NF; i++) h[i] = $i; next }
	{
		delete c
		for (i = 1; i <= NF; i++) c[h[i]] = $i
		c["machine_type"] = mt[c["provider"] "," c["instance_type"]]
		if (c["locale"] == "") c["locale"] = reg[c["provider"]]
	}
	'"$prog" "$DATA/instance_extras.csv" "$DATA/cclfs_regions.csv" \
		"$DATA/instance_types.csv"
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
	}' "$DATA/platform_types.csv" "$DATA/machine_types.csv" \
		"$DATA/cclfs_types.csv" | LC_ALL=C sort
}

# words: the lines of stdin as one space-separated list (for in_list).
words() {
	tr '\n' ' '
}

# The expected resolution line of a role from the CSV.
csv_resolution() {
	local price
	price=$(csv_field "$2" "$3" price_usd_hour)
	printf '%s\t%s\t%s\t%s' "$1" "$2" "$3" "${price:-unknown}"
}

# --- helpers: the cclfs side ---

# "provider<TAB>instance_type" of every candidate of c1, in byte order.
cand() {
	tail -n +2 "$C/candidates" | cut -f1,2 | LC_ALL=C sort
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
	# From instance_extras.csv: the types whose machine type's parent is
	# EC2Type_T3 or EC2Type_T3A, the one family below it (machine_types.csv).
	expect_eq "$(subtypes 'machine_family|machine_type' EC2Type_T3 |
		grep -vE '_(Nano|Micro|Small|Medium|Large|[0-9]*xLarge)$')" \
		"$(printf 'EC2Type_T3\nEC2Type_T3A')" "families under EC2Type_T3"
	want=$(awk -F, '$6 == "EC2Type_T3" || $6 == "EC2Type_T3A" { print $1 "\t" $2 }' \
		"$DATA/instance_extras.csv" | LC_ALL=C sort)
	expect_eq "$(csv_select 'in_list(c["machine_type"], L)' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3 | words)")" "$want" \
		"CSV set through the hierarchy"
	n=$(echo "$want" | wc -l)
	[ "$n" -gt 1 ]
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: $n instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" candidates
	grep -qF "$(cat "$C/error")" "$TESTDIR/daemon.log"
}

@test "accelerator_count atleast 4 + Ampere: 15 types; just 4 + atmost 256G: 3; cheapest: g2-standard-48; AmazonEC2 + NVIDIA_A10G: g5.12xlarge" {
	# The NVIDIA chain of platform_types.csv: Ampere is matched by Ampere
	# and every architecture below it (Ada, Hopper).
	ampere=$(subtypes accelerator_architecture Ampere | words)
	[[ " $ampere " == *" Ada "* && " $ampere " == *" Hopper "* && " $ampere " == *" Ampere "* ]]
	echo 'atleast 4' >"$C/accelerator_count"
	echo Ampere >"$C/accelerator_architecture"
	want=$(csv_select 'c["accelerator_count"] != "" && c["accelerator_count"] >= 4 &&
		in_list(c["accelerator_architecture"], L)' -v L="$ampere")
	expect_eq "$(echo "$want" | wc -l)" 15 "size of the CSV set"
	for t in a2-highgpu-4g p4de.24xlarge g2-standard-48 g5.12xlarge g6.12xlarge; do
		echo "$want" | cut -f2 | grep -qx "$t"
	done
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: 15 instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" "candidates (15)"

	echo 'just 4' >"$C/accelerator_count"
	echo 'atmost 256G' >"$C/node_memory_size"
	want=$(csv_select 'c["accelerator_count"] == 4 && c["memory_bytes"] != "" &&
		c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L)' \
		-v L="$ampere")
	expect_eq "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "$(printf 'g2-standard-48\ng5.12xlarge\ng6.12xlarge')" \
		"CSV set (3)"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: 3 instance types satisfy the contract ("*"); add assumptions, or write cheapest to config/resolve_policy" ]]
	expect_eq "$(listed_in_error)" "$(echo "$want" | cut -f2 | LC_ALL=C sort)" "types listed by error"
	expect_eq "$(cand)" "$want" "candidates (3)"

	# The cheapest of the three by CSV price.
	cheapest=$(echo "$want" | while IFS=$'\t' read -r p t; do
		printf '%s\t%s\t%s\n' "$(csv_field "$p" "$t" price_usd_hour)" "$p" "$t"
	done | sort -t$'\t' -k1,1g | head -1)
	expect_eq "$(echo "$cheapest" | cut -f2,3)" "$(printf 'gcp\tg2-standard-48')" "cheapest by CSV"
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node gcp g2-standard-48)" \
		"resolution with cheapest"
	expect_eq "$(cand)" "$want" "candidates with cheapest"

	echo unique >"$C/config/resolve_policy"
	echo AmazonEC2 >"$C/node_provider"
	echo NVIDIA_A10G >"$C/accelerator"
	want=$(csv_select 'c["accelerator_count"] == 4 && c["memory_bytes"] <= 256 * 2^30 &&
		in_list(c["accelerator_architecture"], L) && in_list(c["provider"], P) &&
		c["accelerator"] == "NVIDIA_A10G"' -v L="$ampere" \
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
	want=$(csv_select 'in_list(c["accelerator_architecture"], L)' \
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
	expect_eq "$(awk -F, '$2 == "t3.xlarge" { print $5 }' "$DATA/instance_extras.csv")" \
		EC2Type_T3_xLarge "machine_type of t3.xlarge"
}

@test "node_provider: ec2, AmazonEC2, CloudProvider (every ec2 and gcp type), gcp, Localhost and OnPremises (the local type)" {
	local p want
	for p in ec2 AmazonEC2 CloudProvider GoogleCloud gcp Localhost OnPremises local; do
		echo "$p" >"$C/node_provider"
		want=$(csv_select 'in_list(c["provider"], L)' -v L="$(subtypes provider "$p" | words)")
		# The local provider's one type, under Localhost in cclfs_types.csv.
		if subtypes provider "$p" | grep -qx local; then
			want=$(printf '%s\nlocal\tlocal' "$want" | sed '/^$/d' | LC_ALL=C sort)
		fi
		expect_eq "$(cand)" "$want" "candidates of node_provider $p"
	done
	# The supertype: every row of the CSV.
	echo CloudProvider >"$C/node_provider"
	expect_eq "$(cand)" "$(tail -n +2 "$DATA/instance_types.csv" | cut -d, -f1,2 |
		tr , '\t' | LC_ALL=C sort)" "CloudProvider = every CSV row"
	expect_eq "$(cand | cut -f1 | uniq)" "$(printf 'ec2\ngcp')" "providers of CloudProvider"
	for p in Localhost OnPremises; do
		echo "$p" >"$C/node_provider"
		expect_eq "$(cand)" "$(printf 'local\tlocal')" "candidates of $p"
		resolve_ok
		expect_eq "$(cut -f1-3 "$C/resolution")" "$(printf 'node\tlocal\tlocal')" "resolution of $p"
	done
	echo ec2 >"$C/node_provider"
	expect_eq "$(cand | cut -f1 | sort -u)" ec2 "providers of ec2"
	expect_eq "$(cand | wc -l)" "$(awk -F, '$1 == "ec2"' "$DATA/instance_types.csv" | wc -l)" \
		"count of ec2"
}

@test "cluster_locale us-east-1 and EC2Region_USEast1 select every ec2 type" {
	target=$(awk -F, '$1 == "locale" && $2 == "us-east-1" { print $3 }' "$DATA/cclfs_aliases.csv")
	expect_eq "$target" EC2Region_USEast1 "us-east-1 in cclfs_aliases.csv"
	want=$(csv_select 'in_list(c["locale"], L)' -v L="$(subtypes locale "$target" | words)")
	expect_eq "$want" "$(awk -F, '$1 == "ec2" { print $1 "\t" $2 }' \
		"$DATA/instance_types.csv" | LC_ALL=C sort)" "CSV: EC2Region_USEast1 = every ec2 row"
	echo us-east-1 >"$C/cluster_locale"
	expect_eq "$(cat "$C/cluster_locale")" us-east-1 "us-east-1 read back"
	expect_eq "$(cand)" "$want" "candidates of us-east-1"
	echo ec2region_useast1 >"$C/cluster_locale"
	expect_eq "$(cat "$C/cluster_locale")" EC2Region_USEast1 "EC2Region_USEast1 read back"
	expect_eq "$(cand)" "$want" "candidates of EC2Region_USEast1"
	target=$(awk -F, '$1 == "locale" && $2 == "us-central1" { print $3 }' "$DATA/cclfs_aliases.csv")
	echo us-central1 >"$C/cluster_locale"
	expect_eq "$(cand)" "$(csv_select 'in_list(c["locale"], L)' \
		-v L="$(subtypes locale "$target" | words)")" "candidates of us-central1"
	expect_eq "$(cand | cut -f1 | sort -u)" gcp "providers of us-central1"
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
	# The CSV's largest memory, and that only one type has it.
	max=$(csv_awk 'c["memory_bytes"] != "" { print c["memory_bytes"] "\t" c["provider"] "\t" c["instance_type"] "\t" bin(c["memory_bytes"]) }' |
		sort -t$'\t' -k1,1g | tail -2)
	top=$(echo "$max" | tail -1)
	[ "$(echo "$max" | head -1 | cut -f1)" != "$(echo "$top" | cut -f1)" ]
	[ "$(echo "$top" | cut -f1)" -lt $((100 * 1024 ** 4)) ]
	# Every type is left before node_memory_size: the CSV's and the local one.
	total=$(($(tail -n +2 "$DATA/instance_types.csv" | wc -l) + $(ls "$MNT/catalog/local" | wc -l)))
	run_shell "echo again > contracts/c1/resolve"
	expect_eq "$status" 1 "rc of echo > resolve"
	[[ "$output" == *"write error: Invalid argument"* ]]
	expect_eq "$(cat "$C/error")" "contracts/c1/resolve: no instance type satisfies node_memory_size; of the $total types that satisfy the assumptions before it, the closest is $(echo "$top" | cut -f2) $(echo "$top" | cut -f3) with node_memory_size $(echo "$top" | cut -f4)" error
	expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution"
	grep -qF "$(cat "$C/error")" "$TESTDIR/daemon.log"
	resolve_fails
}

@test "no type at all: the closest miss is among the types the earlier assumptions left (most vCPUs of gcp per the CSV)" {
	echo gcp >"$C/node_provider"
	echo 'atleast 100000' >"$C/node_vcpus_count"
	left=$(awk -F, '$1 == "gcp"' "$DATA/instance_types.csv" | wc -l)
	most=$(awk -F, '$1 == "gcp" && $3 != "" { print $3 }' "$DATA/instance_types.csv" | sort -g | tail -1)
	# Types with that many vCPUs (there may be a tie).
	tied=$(awk -F, -v M="$most" '$1 == "gcp" && $3 == M { print $2 }' "$DATA/instance_types.csv")
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
	want=$(csv_select 'in_list(c["machine_type"], L)' \
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
		'in_list(c["machine_type"], L) && c["price_usd_hour"] != "" { print c["price_usd_hour"] "\t" c["vcpus"] "\t" c["instance_type"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k2,2g -k3,3 | head -1 | cut -f3)
	echo cheapest >"$C/config/resolve_policy"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node ec2 "$best")" "resolution with cheapest"
	echo unique >"$C/config/resolve_policy"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "resolution after the policy changed"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c1/resolve: "*" instance types satisfy the contract ("* ]]
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
		'c["accelerator_count"] == 4 && c["memory_bytes"] <= 256 * 2^30 && in_list(c["accelerator_architecture"], L) && c["price_usd_hour"] != "" { print c["price_usd_hour"] "\t" c["vcpus"] "\t" c["instance_type"] "\t" c["provider"] }' |
		LC_ALL=C sort -t$'\t' -k1,1g -k2,2g -k3,3 | head -1)
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$best" | cut -f4)" "$(echo "$best" | cut -f3)")" \
		"resolution with cheapest from cclfs.conf"
	echo unique >"$C/config/resolve_policy"
	resolve_fails
	[[ "$(cat "$C/error")" == "contracts/c2/resolve: 3 instance types satisfy the contract ("* ]]
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
	set_rows=$(csv_awk 'c["memory_bytes"] == 2 * 2^40 && c["vcpus"] >= 64 && c["vcpus"] <= 128 && c["price_usd_hour"] != "" { print c["price_usd_hour"] "\t" c["vcpus"] "\t" c["instance_type"] "\t" c["provider"] }')
	low=$(echo "$set_rows" | sort -t$'\t' -k1,1g | head -1 | cut -f1)
	tie=$(echo "$set_rows" | awk -F'\t' -v P="$low" '$1 == P')
	[ "$(echo "$tie" | wc -l)" -ge 2 ]
	[ "$(echo "$tie" | cut -f2 | sort -u | wc -l)" -ge 2 ]
	by_vcpus=$(echo "$tie" | LC_ALL=C sort -t$'\t' -k2,2g -k3,3 | head -1)
	by_name=$(echo "$tie" | LC_ALL=C sort -t$'\t' -k3,3 | head -1)
	[ "$by_vcpus" != "$by_name" ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$by_vcpus" | cut -f4)" "$(echo "$by_vcpus" | cut -f3)")" \
		"tie broken by vCPUs"
	# Among those with the most vCPUs of the tie, the name decides.
	most=$(echo "$tie" | cut -f2 | sort -g | tail -1)
	echo "$most" >"$C/node_vcpus_count"
	same=$(echo "$tie" | awk -F'\t' -v V="$most" '$2 == V' | LC_ALL=C sort -t$'\t' -k3,3)
	[ "$(echo "$same" | wc -l)" -ge 2 ]
	resolve_ok
	expect_eq "$(cat "$C/resolution")" \
		"$(csv_resolution node "$(echo "$same" | head -1 | cut -f4)" "$(echo "$same" | head -1 | cut -f3)")" \
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
	manager=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 8' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3A | words)")
	worker=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 2' \
		-v L="$(subtypes 'machine_(type|family)' EC2Type_T3_Small | words)")
	top=$(csv_select 'in_list(c["machine_type"], L) && c["vcpus"] == 8' \
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
	want=$(csv_select 'c["vcpus"] == 416 && c["memory_bytes"] <= 8 * 2^40')
	expect_eq "$(echo "$want" | wc -l)" 1 "CSV gcp set"
	expect_eq "$(echo "$want" | cut -f1)" gcp "provider of the CSV gcp set"
	resolve_ok
	expect_eq "$(cat "$C/resolution")" "$(csv_resolution node $want)" "gcp-only contract"
}

# --- 7. candidates ---

# The candidates lines of every CSV row, in the order DESIGN gives (price,
# unknown last, then name), as cclfs renders the columns.
csv_candidate_lines() {
	csv_awk '{
		acc = "-"
		if (c["accelerator_count"] != "" && c["accelerator_count"] != 0)
			acc = c["accelerator_count"] " x " (c["accelerator"] == "" ? "unknown" : c["accelerator"])
		m = bin(c["memory_bytes"]); am = bin(c["accelerator_memory_bytes"])
		printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			c["price_usd_hour"] == "" ? "9e99" : c["price_usd_hour"],
			c["instance_type"], c["provider"],
			c["provider"], c["instance_type"], c["vcpus"] == "" ? "-" : c["vcpus"],
			m == "" ? "-" : m, acc, am == "" ? "-" : am,
			c["price_usd_hour"] == "" ? "unknown" : c["price_usd_hour"]
	}' | LC_ALL=C sort -t$'\t' -k1,1g -k2,2 -k3,3 | cut -f4-
}

@test "candidates: the header, one tab-separated line per type, sorted by price (unknown last) then name, whatever the policy and role files" {
	echo CloudProvider >"$C/node_provider"
	expect_eq "$(head -1 "$C/candidates")" \
		"$(printf 'provider\tinstance_type\tvcpus\tmemory\taccelerators\taccelerator_memory\tprice_per_hour')" header
	expect_eq "$(tail -n +2 "$C/candidates" | awk -F'\t' 'NF != 7' | head -3)" "" "lines without 7 fields"
	expect_eq "$(tail -n +2 "$C/candidates" | wc -l)" "$(($(wc -l <"$DATA/instance_types.csv") - 1))" "line count"
	want=$(csv_candidate_lines | cut -f1,2)
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f1,2)" "$want" "order of candidates"
	# Unknown prices come last.
	expect_eq "$(tail -n +2 "$C/candidates" | cut -f7 | awk '$1 == "unknown" { u = 1; next } u { print "priced after unknown: " $0 }')" "" "unknown last"
	all=$(cat "$C/candidates")
	echo cheapest >"$C/config/resolve_policy"
	echo EC2Type_T3 >"$C/manager/node_machinetype"
	echo gcp >"$C/worker/node_provider"
	echo ManagerWorkers >"$C/cluster_type"
	expect_eq "$(cat "$C/candidates")" "$all" "candidates with cheapest and role files"
	expect_eq "$(stat -c %s "$C/candidates")" "$((${#all} + 1))" "size of candidates"
}

@test "candidates: vcpus, memory (binary suffix), accelerators and accelerator memory agree with the CSV" {
	echo CloudProvider >"$C/node_provider"
	want=$(csv_candidate_lines | cut -f1-6)
	got=$(tail -n +2 "$C/candidates" | cut -f1-6)
	expect_eq "$(diff <(echo "$want") <(echo "$got") | head -20)" "" "columns 1-6 (diff CSV cclfs)"
	# A few rows by hand against the CSV.
	grep -qx "$(printf 'ec2\tt3.xlarge\t4\t16G\t-\t-')" <<<"$got"
	grep -q '^ec2,t3.xlarge,4,17179869184,' "$DATA/instance_types.csv"
	grep -qx "$(printf 'ec2\tg5.12xlarge\t48\t192G\t4 x NVIDIA_A10G\t24G')" <<<"$got"
	grep -q '^ec2,g5.12xlarge,48,206158430208,,4,GPU,NVIDIA,Ampere,NVIDIA_A10G,25769803776,' "$DATA/instance_types.csv"
}

@test "prices read back exactly as the CSV gives them: candidates, resolution and catalog/.../price_per_hour" {
	local bad="" p t price got
	echo CloudProvider >"$C/node_provider"
	want=$(csv_candidate_lines | cut -f1,2,7)
	got=$(tail -n +2 "$C/candidates" | cut -f1,2,7)
	d=$(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -40)
	[ -z "$d" ] || bad="candidates prices differ from the CSV (< CSV, > cclfs):
$d"
	# The rows whose price has the most significant digits in the CSV.
	rm "$C/node_provider"
	while IFS=$'\t' read -r p t price; do
		got=$(cat "$MNT/catalog/$p/$t/price_per_hour")
		[ "$got" = "$price" ] || bad="$bad
catalog/$p/$t/price_per_hour: CSV $price, cclfs $got"
		echo "$t" >"$C/node_machinetype"
		run touch "$C/resolve"
		got=$(cut -f4 "$C/resolution")
		[ "$got" = "$price" ] || bad="$bad
resolution of $t: CSV $price, cclfs $got"
	done < <(csv_awk '{ s = c["price_usd_hour"]; gsub(/[^0-9]/, "", s); sub(/^0+/, "", s)
		print length(s) "\t" c["provider"] "\t" c["instance_type"] "\t" c["price_usd_hour"] }' |
		sort -t$'\t' -k1,1nr -k3,3 | head -3 | cut -f2-)
	[ -z "$bad" ] || {
		echo "$bad" >&2
		return 1
	}
}

# --- 8. catalog/ ---

@test "catalog/: ec2 gcp local; one folder per CSV row of each provider" {
	expect_eq "$(ls "$MNT/catalog")" "$(printf 'ec2\ngcp\nlocal')" "ls catalog"
	for p in ec2 gcp; do
		expect_eq "$(ls "$MNT/catalog/$p" | wc -l)" \
			"$(awk -F, -v P="$p" '$1 == P' "$DATA/instance_types.csv" | wc -l)" "ls catalog/$p | wc -l"
		expect_eq "$(ls "$MNT/catalog/$p" | LC_ALL=C sort)" \
			"$(awk -F, -v P="$p" '$1 == P { print $2 }' "$DATA/instance_types.csv" | LC_ALL=C sort)" \
			"names under catalog/$p"
	done
	expect_eq "$(ls "$MNT/catalog/local")" local "ls catalog/local"
}

@test "catalog/ec2/g5.12xlarge: one 0444 file per assumption file plus price_per_hour, each as the CSV says; writing is refused" {
	T=$MNT/catalog/ec2/g5.12xlarge
	expect_eq "$(LC_ALL=C ls "$T")" "$( (ls "$C/manager"; echo price_per_hour) | LC_ALL=C sort)" "files of g5.12xlarge"
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
cluster_locale locale as-is
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
price_per_hour price_usd_hour as-is
EOF
	# The issue's values, checked against the CSV above.
	expect_eq "$(cat "$T/node_vcpus_count")" 48 node_vcpus_count
	expect_eq "$(cat "$T/accelerator")" NVIDIA_A10G accelerator
	expect_eq "$(cat "$T/node_memory_size")" 192G node_memory_size
	expect_eq "$(cat "$T/price_per_hour")" "$(csv_field ec2 g5.12xlarge price_usd_hour)" price_per_hour
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
	expect_eq "$(ls "$MNT2/catalog/ec2" | wc -l)" \
		"$(awk -F, '$1 == "ec2"' "$DATA/instance_types.csv" | wc -l)" "catalog/ec2 of the installed binary"
	fusermount3 -u "$MNT2"
	wait "$pid"
}
