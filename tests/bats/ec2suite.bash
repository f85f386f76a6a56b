# What the two suites of the ec2 provider share (ec2.bats, ec2_crash.bats):
# the fake's credentials, a setup that starts it, the teardown, and the
# checks that nothing was leaked or launched twice. FAKE_NET is the suite's.

AKID=AKIDCCLFSTEST
SECRET=cclfs-test-secret-key

# Start the fake (by pid) and write cclfs.conf for it; extra lines go to
# [ec2]. Does not mount.
ec2_setup() {
	cclfs_setup --no-mount
	fake_start "AKIDSESSION:session-secret:session-token-1"
	ec2_conf "$FAKE_URL" "$@"
}

ec2suite_teardown() {
	fakeec2_teardown
	if [ -n "${MPIBIN:-}" ]; then
		rm -rf "$MPIBIN"
	fi
}

# The ids of the cluster's instances EC2 has not terminated, sorted, one line.
live_ids() {
	fake_py "' '.join(sorted(i['id'] for i in s['instances'] if i['tags'].get('cclfs:cluster') == '$1' and i['state'] not in ('terminated', 'shutting-down')))"
}

# After a crash and a remount: every instance in the fake is terminated or
# belongs to a cluster the tree shows, and no ClientToken launched twice.
crash_check() {
	expect_none "$(fake_py "[i['id'] + ' of ' + i['tags'].get('cclfs:cluster', '?') for i in s['instances'] if i['state'] != 'terminated' and not __import__('os').path.isdir('$MNT/clusters/' + i['tags'].get('cclfs:cluster', '?'))]")" \
		"instances of no visible cluster"
	[ "$(fake_py "max(list(s['launches_per_token'].values()) + [0])")" -le 1 ]
}

# How many instances of cluster $1 run.
ec2_live() {
	fake_count "$1" running
}
