#!/usr/bin/env bats
# bench/files.sh, the benchmark of issue 17's targets, still runs: at a
# tiny size (8 MiB, 40 small files, 2 rounds) it mounts cclfs, a hosts node
# and sshfs, makes every copy of every contender (checking each copy back:
# cmp of the big file, the bytes of the small ones) and reports every
# comparison. Its times are not looked at: at this size, on a machine
# shared with the other suites, they say nothing (bench/ is where they are
# measured, docs/performance.md where they are read). The wait for the
# host's memory reporting to be quiet before each operation is shortened
# to 200 ms.

@test "bench/files.sh: every copy of every contender made and checked, every comparison reported" {
	out=$BATS_TEST_TMPDIR/out
	log=$BATS_TEST_TMPDIR/log
	if ! BIN=$CCLFS_BIN BIG_MB=8 SMALL_N=40 ROUNDS=2 HOST_K=171 QUIET_MS=200 OUT=$out COMMIT=test \
		bash "$BATS_TEST_DIRNAME/../../bench/files.sh" >"$log" 2>&1 3>&-; then
		cat "$log" >&2
		return 1
	fi
	# 4 operations, 4 comparisons each, with their medians and ratio
	[ "$(grep -cE '^(big|small)_(in|out) +(local|ssh|sshfs) +[0-9.]+ +[0-9.]+ +(plain|sshfs|scp) +[0-9.]+ +[0-9.]+x ' "$out/files.txt")" = 16 ]
	[ "$(grep -cE ',test,8,40,[0-9]+,2,(big|small)_(in|out),' "$out/files.csv")" = 16 ]
	# the six targets judged
	[ "$(grep -cE ' (PASS|FAIL)$' "$out/files.txt")" = 6 ]
	# the memory the copies took, said
	grep -qE '^memory: +(freed memory is handed back to the host \(free page reporting\); a pass ran during [0-9]+ of 40 timed operations|no free page reporting)$' "$out/files.txt"
	# each contender timed in each round of each operation: 4 x 5 lines
	# of two times
	[ "$(grep -cE '^  (big|small)_(in|out) (local|plain|ssh|sshfs|scp) +[0-9]+ [0-9]+ $' "$out/files.txt")" = 20 ]
	# nothing left behind: the mounts, the test host, the node directory
	[ -z "$(grep 'cclfs-files\.' /proc/self/mounts)" ]
	[ -z "$(ss -Htln state listening src 127.0.1.171:22)" ]
	[ -z "$(ls -d /root/.cclfs/fbench* /root/.cclfs-fbench-* 2>/dev/null)" ]
}
