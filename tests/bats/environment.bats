#!/usr/bin/env bats
# Node commands get a clean environment: the daemon is started with cloud
# credentials, an agent socket and other variables (every value holds
# "marker"), and `env` run through exec on local nodes, on sshd test hosts
# and through mpiexec shows none of them; it shows what cclfs gives (PATH,
# HOME, USER, LOGNAME, the locale, TZ, CCLFS_*, Open MPI's consent to run as
# root for local nodes) and the contract's config/environment, read at each
# command.

load helpers
source "$BATS_TEST_DIRNAME/../sshd/testhosts.bash"

FIRST=131 # host k of a test listens on 127.0.1.(FIRST + k)
# Each host has a login directory of its own (see tests/sshd/testhosts.bash).
export TESTHOSTS_OWN_LOGIN=1

teardown() {
	if [ -n "${HOSTS:-}" ]; then
		testhosts_stop "$HOSTS" || true
	fi
	cclfs_teardown
}

# Mount with the markers in the daemon's environment (extra arguments go
# to cclfs).
mount_with_markers() {
	AWS_ACCESS_KEY_ID=AKIAMARKER0000000001 \
		AWS_SECRET_ACCESS_KEY=marker-secret-key \
		AWS_SESSION_TOKEN=marker-session-token \
		AWS_PROFILE=marker-profile \
		GOOGLE_APPLICATION_CREDENTIALS=/marker/credentials.json \
		CLOUDSDK_CORE_PROJECT=marker-project \
		SSH_AUTH_SOCK=/marker/agent.sock \
		SOME_OTHER_VAR=marker-other \
		CCLFS_SOMETHING=marker-cclfs \
		LANG=C.UTF-8 LC_MESSAGES=C TZ=Etc/UTC USER=tester LOGNAME=tester \
		OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		cclfs_mount "$@"
}

# The names in env output $1, one per line, sorted, without the shell's
# own (PWD, OLDPWD, SHLVL, _).
names_of() {
	sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' "$1" |
		grep -v -x -e PWD -e OLDPWD -e SHLVL -e _ | sort | tr '\n' ' '
}

# No marker anywhere in file $1.
no_markers() {
	if grep -i marker "$1"; then
		echo "the daemon's environment reached the node: $1" >&2
		return 1
	fi
}

@test "local nodes: only PATH, HOME, USER, the locale, TZ, CCLFS_* and config/environment" {
	cclfs_setup --no-mount
	mount_with_markers
	cd "$MNT"
	mkdir contracts/c
	echo local >contracts/c/node_provider
	echo 2 >contracts/c/node_count
	printf 'MY_SETTING=hello world\n# a comment\nOMP_NUM_THREADS=3\n' \
		>contracts/c/config/environment
	[ "$(cat contracts/c/config/environment)" = "$(printf 'MY_SETTING=hello world\nOMP_NUM_THREADS=3')" ]
	echo h >contracts/c/deploy
	wait_state h running
	echo env >clusters/h/nodes/1/exec
	no_markers clusters/h/nodes/1/stdout
	[ "$(names_of clusters/h/nodes/1/stdout)" = "CCLFS_CLUSTER CCLFS_EXEC CCLFS_HOSTFILE CCLFS_INSTANCE CCLFS_NODE CCLFS_NODE_COUNT HOME LANG LC_MESSAGES LOGNAME MY_SETTING OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS PATH TZ USER " ]
	grep -qx "HOME=$TESTDIR/home" clusters/h/nodes/1/stdout
	grep -qx "PATH=$PATH" clusters/h/nodes/1/stdout
	grep -qx 'USER=tester' clusters/h/nodes/1/stdout
	grep -qx 'LANG=C.UTF-8' clusters/h/nodes/1/stdout
	grep -qx 'TZ=Etc/UTC' clusters/h/nodes/1/stdout
	grep -qx 'MY_SETTING=hello world' clusters/h/nodes/1/stdout
	grep -qx 'CCLFS_NODE=1' clusters/h/nodes/1/stdout
	# The same on every node through the cluster's exec.
	echo env >clusters/h/exec
	no_markers clusters/h/exec
	[ "$(grep -c '^[01]: OMP_NUM_THREADS=3$' clusters/h/exec)" = 2 ]
	# config/environment is read at each command: an edit applies to the
	# next one, values may override PATH or HOME.
	printf 'MY_SETTING=changed\nHOME=/nonexistent/home\n' \
		>contracts/c/config/environment
	echo 'echo "$MY_SETTING $HOME ${OMP_NUM_THREADS:-unset}"' \
		>clusters/h/nodes/0/exec
	[ "$(cat clusters/h/nodes/0/stdout)" = "changed /nonexistent/home unset" ]
	echo terminated >clusters/h/state
	wait_state h terminated
}

@test "config/environment: a bad line is refused with its file and line, nothing stored" {
	cclfs_setup
	cd "$MNT"
	mkdir contracts/c
	echo 'GOOD=1' >contracts/c/config/environment
	for bad in 'GOOD=1\nno equals sign' 'GOOD=1\n1BAD=x' 'GOOD=1\nCCLFS_NODE=9' \
		'GOOD=1\nA B=x' 'GOOD=1\nNUL=a\0b'; do
		run_shell "printf '$bad\n' > contracts/c/config/environment"
		[ "$status" -ne 0 ]
		[[ "$output" == *"Invalid argument"* ]]
		grep -q '^contracts/c/config/environment: line 2' contracts/c/error
		[ "$(cat contracts/c/config/environment)" = GOOD=1 ]
	done
	grep -q 'config/environment: line 2 contains a NUL byte' contracts/c/error
	# Each refusal is in the log too.
	grep -q 'contracts/c/config/environment: line 2, "1BAD=x", does not start with a variable name' \
		"$TESTDIR/daemon.log"
	echo 'GOOD=2' >contracts/c/config/environment
	[ "$(cat contracts/c/config/environment)" = GOOD=2 ]
	[ -z "$(cat contracts/c/error)" ]
}

@test "mpiexec: mpirun and its ranks see none of the daemon's variables" {
	command -v mpirun >/dev/null || skip "Open MPI is not installed"
	cclfs_setup --no-mount
	mount_with_markers
	cd "$MNT"
	mkdir contracts/m
	echo local >contracts/m/node_provider
	echo PeerWorkersMPI >contracts/m/cluster_type
	echo 2 >contracts/m/node_count
	echo 'MY_SETTING=from-the-contract' >contracts/m/config/environment
	echo m >contracts/m/deploy
	wait_state m running
	echo env >clusters/m/mpiexec
	[ "$(cat clusters/m/mpi_exit_status)" = 0 ]
	no_markers clusters/m/mpi_stdout
	no_markers clusters/m/mpi_stderr
	# Every rank (2 nodes x 1 slot) has the contract's value and cclfs's.
	[ "$(grep -c '^MY_SETTING=from-the-contract$' clusters/m/mpi_stdout)" = 2 ]
	[ "$(grep -c '^CCLFS_CLUSTER=m$' clusters/m/mpi_stdout)" = 2 ]
	[ "$(grep -c '^TZ=Etc/UTC$' clusters/m/mpi_stdout)" = 2 ]
	! grep -q -e '^AWS_' -e '^GOOGLE_' -e '^CLOUDSDK_' -e '^SSH_AUTH_SOCK=' \
		-e '^SOME_OTHER_VAR=' clusters/m/mpi_stdout
}

@test "hosts nodes: the login's environment, CCLFS_* and config/environment, nothing of the daemon's" {
	cclfs_setup --no-mount
	HOSTS=$TESTDIR/hosts
	testhosts_start "$HOSTS" 2 "$FIRST"
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$HOSTS/id_ed25519\""
		echo "known_hosts = \"$HOSTS/known_hosts\""
		for k in 0 1; do
			echo "[hosts.h$k]"
			echo "address = \"127.0.1.$((FIRST + k))\""
		done
	} >"$TESTDIR/cclfs.conf"
	mount_with_markers -o config="$TESTDIR/cclfs.conf"
	cd "$MNT"
	mkdir contracts/c
	echo hosts >contracts/c/node_provider
	echo 2 >contracts/c/node_count
	# Quotes, spaces and a dollar sign arrive as written.
	cat >contracts/c/config/environment <<-'EOF'
		MY_SETTING=hello world
		QUOTED=it's "quoted" $HOME `x`
		PATH=/opt/custom/bin:/usr/bin:/bin
	EOF
	echo x >contracts/c/deploy
	wait_state x running
	echo env >clusters/x/nodes/1/exec
	no_markers clusters/x/nodes/1/stdout
	! grep -q -e '^AWS_' -e '^GOOGLE_' -e '^CLOUDSDK_' -e '^SSH_AUTH_SOCK=' \
		-e '^SOME_OTHER_VAR=' -e '^LC_MESSAGES=' -e '^TZ=' \
		clusters/x/nodes/1/stdout
	# The login's: the host's own home, its user.
	grep -qx "HOME=$HOSTS/host$((FIRST + 1))/home" clusters/x/nodes/1/stdout
	grep -qx 'USER=root' clusters/x/nodes/1/stdout
	grep -qx 'LOGNAME=root' clusters/x/nodes/1/stdout
	grep -qx 'MY_SETTING=hello world' clusters/x/nodes/1/stdout
	grep -qxF 'QUOTED=it'\''s "quoted" $HOME `x`' clusters/x/nodes/1/stdout
	grep -qx 'PATH=/opt/custom/bin:/usr/bin:/bin' clusters/x/nodes/1/stdout
	grep -qx 'CCLFS_CLUSTER=x' clusters/x/nodes/1/stdout
	grep -qx 'CCLFS_NODE=1' clusters/x/nodes/1/stdout
	grep -qx 'CCLFS_NODE_COUNT=2' clusters/x/nodes/1/stdout
	grep -qx 'CCLFS_HOSTFILE=/root/.cclfs/x/hostfile' clusters/x/nodes/1/stdout
	# Without config/environment's PATH, the login's PATH (not the
	# daemon's).
	echo 'MY_SETTING=again' >contracts/c/config/environment
	echo env >clusters/x/exec
	no_markers clusters/x/exec
	[ "$(grep -c '^[01]: MY_SETTING=again$' clusters/x/exec)" = 2 ]
	login_path=$(ssh -F "$HOSTS/ssh_config" root@127.0.1.$FIRST 'echo $PATH')
	grep -qxF "0: PATH=$login_path" clusters/x/exec
	echo terminated >clusters/x/state
	wait_state x terminated
}
