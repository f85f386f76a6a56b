#!/usr/bin/env bats
# Contracts: mkdir creates one with every file of DESIGN §1, values read
# back with their defaults and normal forms, bad values are refused with
# the errno the shell shows and the reason in `error` and the log (nothing
# stored changes), the fixed schema cannot grow, read-only files stay
# read-only even for root, rm resets, rmdir/rm -r remove, several writes on
# one descriptor are validated as a whole, and role files are their own.
# Everything is driven with the shell commands a user would type.

load helpers

setup() {
	cclfs_setup
	C=$MNT/contracts/c1
	mkdir "$C"
}

teardown() {
	cclfs_teardown
}

ASSUMPTIONS="node_provider cluster_locale node_machinetype node_memory_size
node_ecu_count node_vcpus_count accelerator_count accelerator_memory
accelerator_type accelerator_manufacturer accelerator_architecture
accelerator processor_manufacturer processor_microarchitecture processor
storage_type storage_size network_performance node_architecture"

CONFIG="user sshflags tunneled exename exeflags directory threadlevel mpiflags
imageid subnet_id placement_group security_group_id resolve_policy keyfile environment
market recover failover ssh_cidr zone network gpu budget budget_action
idle_minutes idle_action wait_timeout"

# The sorted names of words given (one per line), byte order.
sorted() {
	printf '%s\n' "$@" | LC_ALL=C sort
}

# The entries of a directory, dot files included, byte order.
listing() {
	LC_ALL=C ls -1A "$1" | LC_ALL=C sort
}

# Fail with a message naming what differed.
expect_eq() {
	if [ "$1" != "$2" ]; then
		# long values are cut to their first 200 bytes
		printf '%s: expected [%.200s], got [%.200s] (%d bytes)\n' \
			"${3:-value}" "$2" "$1" "${#1}" >&2
		return 1
	fi
}

# The error file of c1 holds exactly one line, starting with
# "contracts/c1/FILE: " and matching the glob PATTERN after it; the daemon
# log holds the same sentence.
expect_error() {
	local file=$1 pattern=$2 err
	err=$(cat "$C/error")
	[ "$(wc -l <"$C/error")" -eq 1 ] || {
		echo "error file is not one line: [$err]" >&2
		return 1
	}
	[[ "$err" == "contracts/c1/$file: "$pattern ]] || {
		echo "error file: [$err] does not match [contracts/c1/$file: $pattern]" >&2
		return 1
	}
	grep -qF -- "$err" "$TESTDIR/daemon.log" || {
		echo "daemon.log lacks [$err]:" >&2
		cat "$TESTDIR/daemon.log" >&2
		return 1
	}
}

# expect_refused FILE GOOD NORMAL CMD ERRNO PATTERN
# Write GOOD to FILE (reads back NORMAL), run CMD (a shell command run in
# c1) which must fail with rc 1 and ERRNO's text on stderr; FILE still
# reads NORMAL, also after `: >` and `truncate -s 0` (no-ops); the error
# file and the log hold the reason (PATTERN); the next good write clears it.
expect_refused() {
	local file=$1 good=$2 normal=$3 cmd=$4 errno=$5 pattern=$6
	echo "$good" >"$C/$file"
	expect_eq "$(cat "$C/$file")" "$normal" "$file after a good write"
	expect_eq "$(stat -c %s "$C/error")" 0 "error size before"
	run bash -c "cd '$C' && $cmd"
	expect_eq "$status" 1 "rc of [$cmd]"
	[[ "$output" == *"$errno"* ]] || {
		echo "stderr of [$cmd]: [$output], wanted [$errno]" >&2
		return 1
	}
	expect_eq "$(cat "$C/$file")" "$normal" "$file after [$cmd]"
	expect_error "$file" "$pattern"
	: >"$C/$file"
	expect_eq "$(cat "$C/$file")" "$normal" "$file after : >"
	truncate -s 0 "$C/$file"
	expect_eq "$(cat "$C/$file")" "$normal" "$file after truncate -s 0"
	expect_eq "$(stat -c %s "$C/$file")" "$((${#normal} + 1))" "size of $file"
	expect_error "$file" "$pattern"
	echo "$good" >"$C/$file"
	expect_eq "$(stat -c %s "$C/error")" 0 "error size after a good write"
	expect_eq "$(cat "$C/error")" "" "error after a good write"
}

# --- 1. the tree of a contract ---

@test "mkdir contracts/NAME creates every file and folder of DESIGN §1" {
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C")" "$(sorted cluster_type node_count \
		node_process_count $ASSUMPTIONS manager worker config resolve \
		resolution candidates deploy clusters error)" "contract listing"
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C/manager")" "$(sorted $ASSUMPTIONS)" "manager/"
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C/worker")" "$(sorted $ASSUMPTIONS)" "worker/"
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C/config")" "$(sorted $CONFIG)" "config/"
	expect_eq "$(listing "$C/clusters")" "" "clusters/"
	expect_eq "$(listing "$MNT/contracts")" "c1" "contracts/"
	[ "$(ls "$C" | wc -l)" -eq 31 ]
	[ "$(ls "$C/manager" | wc -l)" -eq 19 ]
	[ "$(ls "$C/config" | wc -l)" -eq 27 ]
	for d in manager worker config clusters; do
		[ -d "$C/$d" ]
	done
	for f in resolve deploy error resolution candidates node_count; do
		[ -f "$C/$f" ]
	done
}

@test "modes tell the truth: 0644 values and triggers, 0444 generated files, 0755 folders; environment and error the owner's only" {
	local f d
	for f in cluster_type node_count node_process_count $ASSUMPTIONS \
		resolve deploy; do
		expect_eq "$(stat -c %a "$C/$f")" 644 "$f"
		[ "$(stat -c %F "$C/$f")" = "regular empty file" ] ||
			[ "$(stat -c %F "$C/$f")" = "regular file" ]
	done
	for d in manager worker; do
		for f in $ASSUMPTIONS; do
			expect_eq "$(stat -c %a "$C/$d/$f")" 644 "$d/$f"
		done
	done
	for f in $CONFIG; do
		# environment values may be secrets: the mounting user's only
		want=644
		[ "$f" = environment ] && want=600
		expect_eq "$(stat -c %a "$C/config/$f")" $want "config/$f"
	done
	for f in resolution candidates; do
		expect_eq "$(stat -c %a "$C/$f")" 444 "$f"
	done
	# the error may quote a value: the mounting user's only
	expect_eq "$(stat -c %a "$C/error")" 400 error
	for d in . manager worker config clusters; do
		expect_eq "$(stat -c %a "$C/$d")" 755 "$d/"
		expect_eq "$(stat -c %F "$C/$d")" directory "$d/"
	done
	expect_eq "$(stat -c %a "$MNT/contracts")" 755 "contracts/"
	expect_eq "$(stat -c %a "$MNT/README")" 444 "README"
}

# --- 2. defaults ---

@test "defaults: PeerWorkers, 1, 1, and every assumption and config file empty" {
	local f d
	expect_eq "$(cat "$C/cluster_type")" PeerWorkers cluster_type
	expect_eq "$(cat "$C/node_count")" 1 node_count
	expect_eq "$(cat "$C/node_process_count")" 1 node_process_count
	# Reading returns the value and a newline; stat tells its true size.
	expect_eq "$(od -An -c "$C/node_count" | tr -s ' ')" " 1 \n" "node_count bytes"
	expect_eq "$(stat -c %s "$C/cluster_type")" 12 "size of cluster_type"
	expect_eq "$(stat -c %s "$C/node_count")" 2 "size of node_count"
	expect_eq "$(stat -c %s "$C/node_process_count")" 2 "size of node_process_count"
	for d in . manager worker; do
		for f in $ASSUMPTIONS; do
			expect_eq "$(stat -c %s "$C/$d/$f")" 0 "size of $d/$f"
			expect_eq "$(cat "$C/$d/$f" | wc -c)" 0 "bytes read from $d/$f"
		done
	done
	for f in $CONFIG; do
		expect_eq "$(stat -c %s "$C/config/$f")" 0 "size of config/$f"
		expect_eq "$(cat "$C/config/$f" | wc -c)" 0 "bytes read from config/$f"
	done
	expect_eq "$(stat -c %s "$C/error")" 0 "size of error"
	expect_eq "$(cat "$C/error" | wc -c)" 0 "bytes read from error"
	expect_eq "$(stat -c %s "$C/resolution")" 0 "size of resolution"
}

# --- 3. values parse and read back normalised ---

@test "every assumption file of every level parses and reads back normalised" {
	# file|written|read back. Type names must be known to the catalog
	# (catalog/data/*.csv) and read back in its spelling, whatever the
	# case they were written in.
	local table="node_provider|amazonec2|AmazonEC2
cluster_locale|EC2ZONE_USEAST1|EC2Zone_USEast1
node_machinetype|EC2Type_T3_xLarge|EC2Type_T3_xLarge
node_memory_size|atleast 16g|atleast 16G
node_ecu_count|atmost 64|atmost 64
node_vcpus_count|@AtLeast 6|atleast 6
accelerator_count|1..3|1..3
accelerator_memory|24G|just 24G
accelerator_type|gpu|GPU
accelerator_manufacturer|NVIDIA|NVIDIA
accelerator_architecture|ada|Ada
accelerator|nvidia_a10g|NVIDIA_A10G
processor_manufacturer|Intel|Intel
processor_microarchitecture|ICELAKE|IceLake
processor|intelxeon_8280l|IntelXeon_8280L
storage_type|StorageType_SSD|StorageType_SSD
storage_size|0100.50T..2p|100.5T..2P
network_performance|10g..25G|10G..25G
node_architecture|ARM64|arm64"
	local file in want d n=0
	while IFS='|' read -r file in want; do
		n=$((n + 1))
		# contract level: echo; manager/: printf without a newline;
		# worker/: surrounding blanks and tabs.
		echo "$in" >"$C/$file"
		printf '%s' "$in" >"$C/manager/$file"
		printf ' \t %s \t \n' "$in" >"$C/worker/$file"
		for d in . manager worker; do
			expect_eq "$(cat "$C/$d/$file")" "$want" "$d/$file"
			expect_eq "$(stat -c %s "$C/$d/$file")" "$((${#want} + 1))" \
				"size of $d/$file"
		done
	done <<<"$table"
	expect_eq "$n" 19 "rows"
	expect_eq "$(cat "$C/error")" "" "error"
}

@test "assumption grammar: keywords, ranges, suffixes, leading zeros, any number, type names in the catalog's spelling" {
	local M=$C/node_memory_size
	echo 'atleast 16g' >"$M"
	expect_eq "$(cat "$M")" "atleast 16G"
	echo 4 >"$M"
	expect_eq "$(cat "$M")" "just 4"
	echo 16G..32G >"$M"
	expect_eq "$(cat "$M")" "16G..32G"
	echo '@AtMost 256G' >"$M"
	expect_eq "$(cat "$M")" "atmost 256G"
	echo '0016.50G' >"$M"
	expect_eq "$(cat "$M")" "just 16.5G"
	echo 'atleast 24G' >"$M"
	expect_eq "$(cat "$M")" "atleast 24G"
	echo 'JUST 12G' >"$M"
	expect_eq "$(cat "$M")" "just 12G"
	echo '16G .. 48G' >"$M"
	expect_eq "$(cat "$M")" "16G..48G"
	echo 'atleast   1.5t' >"$M"
	expect_eq "$(cat "$M")" "atleast 1.5T"
	echo 'just 6' >"$C/node_vcpus_count"
	expect_eq "$(cat "$C/node_vcpus_count")" "just 6"
	echo 6 >"$C/worker/node_vcpus_count"
	expect_eq "$(cat "$C/worker/node_vcpus_count")" "just 6"
	echo 'atleast 3' >"$C/accelerator_count"
	expect_eq "$(cat "$C/accelerator_count")" "atleast 3"
	echo '10G..25G' >"$C/network_performance"
	expect_eq "$(cat "$C/network_performance")" "10G..25G"
	echo 'atleast 100m' >"$C/manager/network_performance"
	expect_eq "$(cat "$C/manager/network_performance")" "atleast 100M"
	# Type names are matched without regard to case and read back as the
	# catalog spells them: declared names, the providers' own names of
	# instance types, and aliases alike.
	echo Ada >"$C/accelerator_architecture"
	expect_eq "$(cat "$C/accelerator_architecture")" Ada
	echo ada >"$C/accelerator_architecture"
	expect_eq "$(cat "$C/accelerator_architecture")" Ada
	echo ADA >"$C/worker/accelerator_architecture"
	expect_eq "$(cat "$C/worker/accelerator_architecture")" Ada
	echo vega >"$C/manager/accelerator_architecture"
	expect_eq "$(cat "$C/manager/accelerator_architecture")" Vega
	echo t3.xlarge >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" t3.xlarge
	echo T3.XLARGE >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" t3.xlarge
	expect_eq "$(stat -c %s "$C/node_machinetype")" 10 "size of node_machinetype"
	echo EC2Type_T3_xLarge >"$C/manager/node_machinetype"
	expect_eq "$(cat "$C/manager/node_machinetype")" EC2Type_T3_xLarge
	echo ec2type_t3_xlarge >"$C/worker/node_machinetype"
	expect_eq "$(cat "$C/worker/node_machinetype")" EC2Type_T3_xLarge
	echo ec2type_c5 >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" EC2Type_C5
	# Machine families are a tree no instance type links to: refused.
	! echo EC2Family_Compute >"$C/node_machinetype"
	expect_eq "$(cat "$C/node_machinetype")" EC2Type_C5
	echo nvidia >"$C/accelerator_manufacturer"
	expect_eq "$(cat "$C/accelerator_manufacturer")" NVIDIA
	printf ' \tIntel \n' >"$C/processor_manufacturer"
	expect_eq "$(cat "$C/processor_manufacturer")" Intel
	echo EC2 >"$C/node_provider"
	expect_eq "$(cat "$C/node_provider")" ec2
	echo LOCAL >"$C/manager/node_provider"
	expect_eq "$(cat "$C/manager/node_provider")" local
	echo storagetype_ssd >"$C/storage_type"
	expect_eq "$(cat "$C/storage_type")" StorageType_SSD
	echo ec2zone_useast1 >"$C/cluster_locale"
	expect_eq "$(cat "$C/cluster_locale")" EC2Zone_USEast1
	expect_eq "$(cat "$C/error")" "" "error"
}

@test "cluster_type, counts and config values normalise" {
	echo managerworkers >"$C/cluster_type"
	expect_eq "$(cat "$C/cluster_type")" ManagerWorkers
	echo PEERWORKERSMPI >"$C/cluster_type"
	expect_eq "$(cat "$C/cluster_type")" PeerWorkersMPI
	printf 'peerworkers' >"$C/cluster_type"
	expect_eq "$(cat "$C/cluster_type")" PeerWorkers
	echo 0004 >"$C/node_count"
	expect_eq "$(cat "$C/node_count")" 4
	printf '\t 12 \n' >"$C/node_process_count"
	expect_eq "$(cat "$C/node_process_count")" 12
	echo yes >"$C/config/tunneled"
	expect_eq "$(cat "$C/config/tunneled")" true
	echo OFF >"$C/config/tunneled"
	expect_eq "$(cat "$C/config/tunneled")" false
	echo 1 >"$C/config/tunneled"
	expect_eq "$(cat "$C/config/tunneled")" true
	echo FUNNELED >"$C/config/threadlevel"
	expect_eq "$(cat "$C/config/threadlevel")" funneled
	echo ' Multiple ' >"$C/config/threadlevel"
	expect_eq "$(cat "$C/config/threadlevel")" multiple
	echo Cheapest >"$C/config/resolve_policy"
	expect_eq "$(cat "$C/config/resolve_policy")" cheapest
	echo unique >"$C/config/resolve_policy"
	expect_eq "$(cat "$C/config/resolve_policy")" unique
	printf 'ubuntu' >"$C/config/user"
	expect_eq "$(cat "$C/config/user")" ubuntu
	echo '  -n 4 --bind-to core  ' >"$C/config/mpiflags"
	expect_eq "$(cat "$C/config/mpiflags")" "-n 4 --bind-to core"
	echo ami-0123456789abcdef0 >"$C/config/imageid"
	expect_eq "$(cat "$C/config/imageid")" ami-0123456789abcdef0
	echo '/home/ubuntu/run dir' >"$C/config/directory"
	expect_eq "$(cat "$C/config/directory")" "/home/ubuntu/run dir"
	expect_eq "$(stat -c %s "$C/config/directory")" 21 "size of config/directory"
	expect_eq "$(cat "$C/error")" "" "error"
}

# --- 4. invalid values are refused, nothing stored changes ---

@test "a value that does not parse is refused with EINVAL; error and log say why; : > and truncate are no-ops" {
	expect_refused node_memory_size 'atleast 16G' 'atleast 16G' \
		"echo 'lots' > node_memory_size" "Invalid argument" '"lots" *'
	expect_refused manager/node_memory_size '32G' 'just 32G' \
		"echo 'lots' > manager/node_memory_size" "Invalid argument" '"lots" *'
	grep -qF 'contracts/c1/node_memory_size: "lots" is not a size' \
		"$TESTDIR/daemon.log"
}

@test "node_count refuses 0, -1, 4.5, abc and a huge number" {
	local bad
	for bad in 0 -1 4.5 abc 1e3 '3 4' 1000001; do
		expect_refused node_count 3 3 "echo '$bad' > node_count" \
			"Invalid argument" "\"$bad\" *"
	done
	expect_refused node_process_count 2 2 "echo 0 > node_process_count" \
		"Invalid argument" '"0" *'
}

@test "cluster_type refuses a name that is not a cluster type" {
	expect_refused cluster_type ManagerWorkers ManagerWorkers \
		"echo bogus > cluster_type" "Invalid argument" \
		'"bogus" is not a cluster type*'
}

@test "a two-line value is refused (both lines invalid)" {
	expect_refused node_count 3 3 "printf 'a\nb\n' > node_count" \
		"Invalid argument" '*'
}

@test "a two-line value is refused and the old value stays (first line valid)" {
	# bash's printf writes a line at a time: the first write alone is a
	# good value, the second makes it two lines; the refusal must not
	# leave the first line stored. Both lines are known type names here.
	expect_refused node_provider ec2 ec2 "printf 'gcp\nlocal\n' > node_provider" \
		"Invalid argument" '"gcp\\nlocal" *line*'
	expect_refused worker/accelerator nvidia_a10g NVIDIA_A10G \
		"printf 'NVIDIA_L4\nbogus\n' > worker/accelerator" \
		"Invalid argument" '"NVIDIA_L4\\nbogus" *line*'
	expect_refused node_count 3 3 "printf '4\n5\n' > node_count" \
		"Invalid argument" '*'
	expect_refused config/exename old old "printf 'a\nb\n' > config/exename" \
		"Invalid argument" '*line*'
}

@test "after a refused write, a later write on the same command does not slip in a value" {
	echo 3 >"$C/node_count"
	run bash -c "cd '$C' && printf 'x\n7\n' > node_count"
	expect_eq "$status" 1 "rc"
	[[ "$output" == *"Invalid argument"* ]]
	# The command failed: nothing it wrote may be stored, and error
	# must say why.
	expect_eq "$(cat "$C/node_count")" 3 "node_count"
	expect_error node_count '*'
}

@test "a value longer than 4096 bytes is refused with EFBIG (one write)" {
	printf 'a%.0s' $(seq 1 5000) >"$TESTDIR/big"
	echo >>"$TESTDIR/big"
	expect_refused config/exename old old "cat '$TESTDIR/big' > config/exename" \
		"File too large" '*4096 bytes*'
	expect_refused node_provider ec2 ec2 "cat '$TESTDIR/big' > node_provider" \
		"File too large" '*4096 bytes*'
	# 4096 bytes exactly is still a value.
	head -c 4096 "$TESTDIR/big" >"$TESTDIR/max"
	cat "$TESTDIR/max" >"$C/config/exename"
	expect_eq "$(stat -c %s "$C/config/exename")" 4097 "size at 4096 bytes"
	cmp <(head -c 4096 "$C/config/exename") "$TESTDIR/max"
}

@test "a value longer than 4096 bytes written with echo is refused and the old value stays" {
	# bash's echo writes 4096 bytes, then the rest: the refusal of the
	# second write must not leave the first 4096 bytes stored.
	printf 'a%.0s' $(seq 1 5000) >"$TESTDIR/big"
	expect_refused config/exename old old \
		"echo \"\$(cat '$TESTDIR/big')\" > config/exename" \
		"File too large" '*4096 bytes*'
	# A type file: the first 4096 bytes are a known name and blanks (a
	# good value alone), the rest goes past what one value may be.
	printf 'gcp%6000s' '' >"$TESTDIR/padded"
	expect_refused node_provider ec2 ec2 \
		"echo \"\$(cat '$TESTDIR/padded')\" > node_provider" \
		"File too large" '*4096 bytes*'
}

@test "assumption grammar errors: atleast without number, empty range, count with a suffix" {
	expect_refused node_memory_size 'atleast 16G' 'atleast 16G' \
		"echo atleast > node_memory_size" "Invalid argument" \
		'"atleast" has no number*'
	expect_refused node_memory_size 'atleast 16G' 'atleast 16G' \
		"echo 16G..8G > node_memory_size" "Invalid argument" \
		'"16G..8G" is an empty range*'
	expect_refused node_vcpus_count 4 'just 4' \
		"echo 4K > node_vcpus_count" "Invalid argument" '"4K" *'
	expect_refused worker/accelerator_count 2 'just 2' \
		"echo 'atleast 2G' > worker/accelerator_count" "Invalid argument" \
		'"atleast 2G" *'
	expect_refused network_performance 10G 'just 10G' \
		"echo fast > network_performance" "Invalid argument" '"fast" *'
	expect_refused accelerator_architecture Ada Ada \
		"echo 'Ada Lovelace' > accelerator_architecture" \
		"Invalid argument" '"Ada Lovelace" *'
}

@test "config values are validated: tunneled maybe, user with a blank" {
	expect_refused config/tunneled yes true "echo maybe > config/tunneled" \
		"Invalid argument" '"maybe" is not true or false'
	expect_refused config/user ubuntu ubuntu \
		"echo 'two words' > config/user" "Invalid argument" '"two words" *'
	expect_refused config/threadlevel single single \
		"echo many > config/threadlevel" "Invalid argument" '"many" *'
	expect_refused config/resolve_policy cheapest cheapest \
		"echo random > config/resolve_policy" "Invalid argument" '"random" *'
}

@test "a type name the catalog does not know is refused with EINVAL; error suggests known names" {
	expect_refused node_provider gcp gcp "echo aws > node_provider" \
		"Invalid argument" \
		'"aws" is not a known node_provider; did you mean ?*\?'
	expect_refused accelerator nvidia_a10g NVIDIA_A10G \
		"echo NVIDIA_A10X > accelerator" "Invalid argument" \
		'"NVIDIA_A10X" is not a known accelerator; did you mean ?*\?'
	expect_refused processor_manufacturer INTEL Intel \
		"echo Intell > processor_manufacturer" "Invalid argument" \
		'"Intell" is not a known processor_manufacturer; did you mean Intel*\?'
	expect_refused manager/storage_type StorageType_SSD StorageType_SSD \
		"echo StorageType_EBS > manager/storage_type" "Invalid argument" \
		'"StorageType_EBS" is not a known storage_type; did you mean ?*\?'
	grep -qF 'contracts/c1/accelerator: "NVIDIA_A10X" is not a known accelerator; did you mean ' \
		"$TESTDIR/daemon.log"
}

# --- 5. contract names ---

@test "names outside [A-Za-z0-9._-]{1,64} are refused; 64 characters work; an existing name is EEXIST" {
	local n64 n65
	n64=$(printf 'n%.0s' $(seq 1 64))
	n65=$(printf 'n%.0s' $(seq 1 65))
	run_shell "mkdir 'contracts/a b'"
	expect_eq "$status" 1 "rc of mkdir 'a b'"
	[[ "$output" == *"Invalid argument"* ]]
	run_shell "mkdir contracts/$n65"
	expect_eq "$status" 1 "rc of mkdir 65 chars"
	[[ "$output" == *"Invalid argument"* ]]
	run_shell "mkdir contracts/é"
	expect_eq "$status" 1 "rc of mkdir é"
	[[ "$output" == *"Invalid argument"* ]]
	run_shell "mkdir 'contracts/a*b'"
	expect_eq "$status" 1 "rc of mkdir a*b"
	[[ "$output" == *"Invalid argument"* ]]
	grep -qF "refused mkdir contracts/a b" "$TESTDIR/daemon.log"
	expect_eq "$(listing "$MNT/contracts")" c1 "contracts/ after refusals"
	test ! -e "$MNT/contracts/a b"
	test ! -e "$MNT/contracts/$n65"

	mkdir "$MNT/contracts/$n64"
	[ -d "$MNT/contracts/$n64/config" ]
	expect_eq "$(cat "$MNT/contracts/$n64/node_count")" 1 "node_count of the 64-char contract"
	mkdir "$MNT/contracts/A.b_c-9"
	expect_eq "$(listing "$MNT/contracts")" "$(sorted c1 "$n64" A.b_c-9)" "contracts/"

	echo 5 >"$C/node_count"
	run_shell "mkdir contracts/c1"
	expect_eq "$status" 1 "rc of mkdir existing"
	[[ "$output" == *"File exists"* ]]
	expect_eq "$(cat "$C/node_count")" 5 "node_count of the existing contract"
}

# --- 6. the schema is fixed ---

@test "files that are not part of the schema cannot be created" {
	local before
	before=$(listing "$C")
	run_shell "touch contracts/c1/foo"
	expect_eq "$status" 1 "rc of touch foo"
	[[ "$output" == *"Permission denied"* ]]
	expect_error foo '*'
	run_shell "echo x > contracts/c1/foo"
	expect_eq "$status" 1 "rc of echo > foo"
	[[ "$output" == *"Permission denied"* ]]
	run_shell "mkdir contracts/c1/sub"
	expect_eq "$status" 1 "rc of mkdir sub"
	[[ "$output" == *"Permission denied"* ]]
	expect_error sub '*'
	run_shell "touch contracts/c1/config/nope"
	expect_eq "$status" 1 "rc of touch config/nope"
	[[ "$output" == *"Permission denied"* ]]
	expect_error config/nope '*'
	run_shell "ln -s x contracts/c1/l"
	expect_eq "$status" 1 "rc of ln -s"
	[[ "$output" == *"Permission denied"* ]]
	expect_error l '*'
	run_shell "touch contracts/c1/manager/extra"
	expect_eq "$status" 1 "rc of touch manager/extra"
	[[ "$output" == *"Permission denied"* ]]
	test ! -e "$C/foo"
	test ! -e "$C/sub"
	test ! -e "$C/config/nope"
	test ! -L "$C/l"
	test ! -e "$C/manager/extra"
	expect_eq "$(listing "$C")" "$before" "contract listing"
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C/config")" "$(sorted $CONFIG)" "config/"
	# shellcheck disable=SC2086
	expect_eq "$(listing "$C/manager")" "$(sorted $ASSUMPTIONS)" "manager/"
	# nothing at the root either (file managers' trash, stray files)
	run_shell "mkdir .Trash-0"
	expect_eq "$status" 1 "rc of mkdir .Trash-0"
	[[ "$output" == *"Permission denied"* ]]
	run_shell "touch x"
	expect_eq "$status" 1 "rc of touch x"
	[[ "$output" == *"Permission denied"* ]]
	run_shell "mkdir clusters/h1"
	expect_eq "$status" 1 "rc of mkdir clusters/h1"
	expect_eq "$(listing "$MNT")" "$(sorted README catalog clusters contracts costs)" "root"
}

@test "mkdir inside a contract folder is refused and error names the refused path" {
	run_shell "mkdir contracts/c1/manager/sub"
	expect_eq "$status" 1 "rc of mkdir manager/sub"
	[[ "$output" == *"Permission denied"* ]]
	test ! -e "$C/manager/sub"
	expect_error manager/sub '*'
}

@test "rename is refused with EPERM" {
	echo 4 >"$C/node_count"
	run_shell "mv contracts/c1 contracts/c2"
	expect_eq "$status" 1 "rc of mv c1 c2"
	[[ "$output" == *"Operation not permitted"* ]]
	test -d "$C"
	test ! -e "$MNT/contracts/c2"
	run_shell "mv contracts/c1/node_count contracts/c1/x"
	expect_eq "$status" 1 "rc of mv node_count x"
	[[ "$output" == *"Operation not permitted"* ]]
	expect_eq "$(cat "$C/node_count")" 4 "node_count"
	test ! -e "$C/x"
	expect_error node_count '*renamed*'
	run_shell "mv contracts/c1/manager contracts/c1/boss"
	expect_eq "$status" 1 "rc of mv manager boss"
	[[ "$output" == *"Operation not permitted"* ]]
	test -d "$C/manager"
}

# --- 7. read-only files ---

@test "read-only files refuse writes, even from root" {
	local f before
	echo 'atleast 1' >"$C/node_vcpus_count"
	for f in resolution candidates; do
		before=$(cat "$C/$f")
		run_shell "echo x > contracts/c1/$f"
		expect_eq "$status" 1 "rc of echo > $f"
		[[ "$output" == *"Permission denied"* ]]
		expect_eq "$(cat "$C/$f")" "$before" "$f"
		expect_error "$f" '*read-only*'
		run_shell "echo x >> contracts/c1/$f"
		expect_eq "$status" 1 "rc of echo >> $f"
		run_shell "truncate -s 0 contracts/c1/$f"
		expect_eq "$status" 1 "rc of truncate $f"
		expect_eq "$(cat "$C/$f")" "$before" "$f"
	done
	run_shell "echo x > contracts/c1/error"
	expect_eq "$status" 1 "rc of echo > error"
	[[ "$output" == *"Permission denied"* ]]
	# error holds the refusal itself, never what was written.
	expect_error error '*read-only*'
	before=$(cat "$MNT/README")
	run_shell "echo x > README"
	expect_eq "$status" 1 "rc of echo > README"
	[[ "$output" == *"Permission denied"* ]]
	run_shell "truncate -s 0 README"
	expect_eq "$status" 1 "rc of truncate README"
	expect_eq "$(cat "$MNT/README")" "$before" "README"
	[[ "$before" == "cclfs: clusters of machines"* ]]
}

# --- 8. rm resets, rmdir and rm -r remove ---

@test "rm of a value file resets it to its default; the file stays" {
	echo 7 >"$C/node_count"
	echo ManagerWorkers >"$C/cluster_type"
	echo 'atleast 2' >"$C/node_vcpus_count"
	echo 'just 8G' >"$C/manager/node_memory_size"
	echo ubuntu >"$C/config/user"
	rm "$C/node_count"
	expect_eq "$(cat "$C/node_count")" 1 node_count
	rm "$C/cluster_type"
	expect_eq "$(cat "$C/cluster_type")" PeerWorkers cluster_type
	rm "$C/node_vcpus_count"
	expect_eq "$(stat -c %s "$C/node_vcpus_count")" 0 "size of node_vcpus_count"
	expect_eq "$(cat "$C/node_vcpus_count")" "" node_vcpus_count
	rm "$C/manager/node_memory_size"
	expect_eq "$(cat "$C/manager/node_memory_size")" "" manager/node_memory_size
	rm "$C/config/user"
	expect_eq "$(cat "$C/config/user")" "" config/user
	test -f "$C/node_count"
	test -f "$C/node_vcpus_count"
	[ "$(ls "$C" | wc -l)" -eq 31 ]
	# an empty write resets too
	echo 'atleast 2' >"$C/node_vcpus_count"
	echo >"$C/node_vcpus_count"
	expect_eq "$(stat -c %s "$C/node_vcpus_count")" 0 "size after echo >"
}

@test "rm -r and rm -rf remove a contract" {
	echo 5 >"$C/node_count"
	echo 'atleast 4' >"$C/worker/node_vcpus_count"
	run rm -r "$C"
	expect_eq "$status" 0 "rc of rm -r"
	expect_eq "$output" "" "output of rm -r"
	test ! -e "$C"
	expect_eq "$(listing "$MNT/contracts")" "" "contracts/"
	mkdir "$C" "$MNT/contracts/c2"
	echo 'just 8G' >"$C/node_memory_size"
	run rm -rf "$C"
	expect_eq "$status" 0 "rc of rm -rf"
	test ! -e "$C"
	expect_eq "$(listing "$MNT/contracts")" c2 "contracts/"
	grep -qF "removed contracts/c1" "$TESTDIR/daemon.log"
}

@test "rmdir removes a contract that still has values; recreating it gives the defaults" {
	echo 5 >"$C/node_count"
	echo ManagerWorkers >"$C/cluster_type"
	echo 'atleast 16G' >"$C/node_memory_size"
	echo Ada >"$C/manager/accelerator_architecture"
	echo 'just 4' >"$C/worker/node_vcpus_count"
	echo yes >"$C/config/tunneled"
	run rmdir "$C"
	expect_eq "$status" 0 "rc of rmdir"
	test ! -e "$C"
	expect_eq "$(listing "$MNT/contracts")" "" "contracts/"
	mkdir "$C"
	expect_eq "$(cat "$C/node_count")" 1 node_count
	expect_eq "$(cat "$C/cluster_type")" PeerWorkers cluster_type
	expect_eq "$(stat -c %s "$C/node_memory_size")" 0 node_memory_size
	expect_eq "$(cat "$C/manager/accelerator_architecture")" "" manager/accelerator_architecture
	expect_eq "$(cat "$C/worker/node_vcpus_count")" "" worker/node_vcpus_count
	expect_eq "$(cat "$C/config/tunneled")" "" config/tunneled
	expect_eq "$(cat "$C/error")" "" error
	run rmdir "$MNT/contracts/none"
	expect_eq "$status" 1 "rc of rmdir of a missing contract"
	[[ "$output" == *"No such file or directory"* ]]
}

# --- 9. several writes on one descriptor ---

@test "several writes on one descriptor are appended and validated as a whole" {
	{ echo 4; } >"$C/node_count"
	expect_eq "$(cat "$C/node_count")" 4 "after { echo 4; }"
	exec 5>"$C/node_count"
	printf '1' >&5
	printf '6' >&5
	exec 5>&-
	expect_eq "$(cat "$C/node_count")" 16 "after two printf on fd 5"
	{
		printf 'atleast 1'
		printf '6'
		printf 'G\n'
	} >"$C/node_memory_size"
	expect_eq "$(cat "$C/node_memory_size")" "atleast 16G" "three writes"
	# a descriptor opened again starts from nothing
	exec 5>"$C/node_count"
	printf '2' >&5
	exec 5>&-
	expect_eq "$(cat "$C/node_count")" 2 "a fresh descriptor"
	expect_eq "$(cat "$C/error")" "" error
}

# --- 10. role files are their own ---

@test "manager/ and worker/ files are independent of the contract-level file" {
	echo 'just 32G' >"$C/manager/node_memory_size"
	expect_eq "$(stat -c %s "$C/node_memory_size")" 0 "contract level after manager write"
	expect_eq "$(cat "$C/worker/node_memory_size")" "" "worker after manager write"
	echo 'atleast 8G' >"$C/node_memory_size"
	expect_eq "$(cat "$C/manager/node_memory_size")" "just 32G" "manager after contract write"
	expect_eq "$(cat "$C/worker/node_memory_size")" "" "worker after contract write"
	echo 64G..128G >"$C/worker/node_memory_size"
	expect_eq "$(cat "$C/node_memory_size")" "atleast 8G" "contract level"
	expect_eq "$(cat "$C/manager/node_memory_size")" "just 32G" "manager"
	expect_eq "$(cat "$C/worker/node_memory_size")" "64G..128G" "worker"
	rm "$C/manager/node_memory_size"
	expect_eq "$(cat "$C/node_memory_size")" "atleast 8G" "contract level after rm manager"
	expect_eq "$(cat "$C/worker/node_memory_size")" "64G..128G" "worker after rm manager"
	rm "$C/node_memory_size"
	expect_eq "$(cat "$C/worker/node_memory_size")" "64G..128G" "worker after rm contract level"
	# and contracts are independent of each other
	mkdir "$MNT/contracts/c2"
	echo 9 >"$MNT/contracts/c2/node_count"
	expect_eq "$(cat "$C/node_count")" 1 "c1 node_count"
}
