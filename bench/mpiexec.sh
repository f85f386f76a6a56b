#!/usr/bin/env bash
# bench/mpiexec.sh: what does launching an MPI job through
# clusters/H/mpiexec cost over running Open MPI's mpirun by hand with the
# same hostfile?
#
# The job is a trivial MPI program (MPI_Init, MPI_Finalize), one rank per
# node, on clusters of 4 and 16 nodes:
#  - local: PeerWorkersMPI clusters of the local provider; by hand is
#    `mpirun --hostfile clusters/H/hostfile -np N trivial` in this shell.
#  - hosts: PeerWorkersMPI clusters of sshd test hosts in network
#    namespaces (each its own hostname, so Open MPI starts a daemon on each
#    over ssh), cclfs running in the manager's namespace; by hand is the
#    same mpirun on node 0 through an ssh connection kept open
#    (ControlMaster), with the hostfile and the ssh cclfs put on the nodes.
# Each measurement is the wall time from the start of the write (or of
# ssh/mpirun) to its end; the two ways alternate, REPS times each (default
# 7) after one warm-up, and the medians and their ratio are reported.
# Results go to bench/results/mpiexec.txt and .csv (overwritten). Run as
# root (Open MPI's allow-run-as-root variables are set here).
set -euo pipefail
export LC_ALL=C
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/build/cclfs
OUT=$REPO/bench/results
REPS=${REPS:-7}
SIZES=${SIZES:-"4 16"}

[ -x "$BIN" ] || {
	echo "build cclfs first (cmake --build build)" >&2
	exit 1
}
# shellcheck source=tests/sshd/testhosts.bash
source "$REPO/tests/sshd/testhosts.bash"
TESTHOSTS_SETENV="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"

DIR=$(mktemp -d /tmp/cclfs-bench-mpi.XXXXXX)
MNT=$DIR/mnt
NETDIR=$DIR/net
mkdir -p "$MNT"
CCLFS_PID=
NETNS=0

cleanup() {
	cd /
	if grep -qs " $MNT fuse.cclfs " /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" || true
	fi
	[ -z "$CCLFS_PID" ] || kill "$CCLFS_PID" 2>/dev/null || true
	[ "$NETNS" = 0 ] || testnet_stop "$NETDIR" || true
	rm -rf "$DIR"
}
trap cleanup EXIT

cat >"$DIR/trivial.c" <<'EOF'
#include <mpi.h>
int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Finalize();
	return 0;
}
EOF
mpicc -o "$DIR/trivial" "$DIR/trivial.c"

now_us() { echo "${EPOCHREALTIME/./}"; }

# mount [nsenter args...]: cclfs on MNT, waiting for the mount.
mount_cclfs() {
	"$@" "$BIN" "$MNT" -f -o statedir="$DIR/state" -o config="$DIR/cclfs.conf" \
		>>"$DIR/daemon.log" 2>&1 3>&- &
	CCLFS_PID=$!
	for _ in $(seq 1 200); do
		grep -qs " $MNT fuse.cclfs " /proc/self/mounts && return 0
		sleep 0.05
	done
	echo "cclfs did not mount" >&2
	cat "$DIR/daemon.log" >&2
	return 1
}

unmount_cclfs() {
	cd /
	fusermount3 -u "$MNT"
	wait "$CCLFS_PID" || true
	CCLFS_PID=
	rm -rf "$DIR/state"
}

# deploy NAME PROVIDER N: a PeerWorkersMPI cluster, running.
deploy() {
	local c=$MNT/contracts/$1 s
	mkdir "$c"
	echo "$2" >"$c/node_provider"
	echo PeerWorkersMPI >"$c/cluster_type"
	echo "$3" >"$c/node_count"
	echo "$1" >"$c/deploy"
	while :; do
		s=$(cat "$MNT/clusters/$1/state" 2>/dev/null || true)
		[ "$s" = running ] && break
		[ "$s" != failed ] || {
			cat "$MNT/clusters/$1/error" >&2
			exit 1
		}
		sleep 0.01
	done
}

terminate() {
	echo terminated >"$MNT/clusters/$1/state"
	while [ "$(cat "$MNT/clusters/$1/state")" != terminated ]; do sleep 0.01; done
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# measure SETUP N CLUSTER BYHAND...: REPS alternating runs of mpiexec and
# of the by-hand command; one line of results.
measure() {
	local setup=$1 n=$2 h=$3 i t0 ms
	shift 3
	: >"$DIR/a" && : >"$DIR/b"
	echo "$DIR/trivial" >"$MNT/clusters/$h/mpiexec"
	"$@" >/dev/null 2>>"$DIR/by_hand.stderr"
	for ((i = 0; i < REPS; i++)); do
		t0=$(now_us)
		echo "$DIR/trivial" >"$MNT/clusters/$h/mpiexec"
		echo $((($(now_us) - t0) / 1000)) >>"$DIR/a"
		t0=$(now_us)
		"$@" >/dev/null 2>>"$DIR/by_hand.stderr"
		echo $((($(now_us) - t0) / 1000)) >>"$DIR/b"
	done
	local a b
	a=$(median <"$DIR/a")
	b=$(median <"$DIR/b")
	printf '%s,%s,%s,%s,%s,"%s","%s"\n' "$setup" "$n" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')" \
		"$(paste -sd' ' "$DIR/a")" "$(paste -sd' ' "$DIR/b")" >>"$DIR/mpiexec.csv"
	printf '%-6s %3s  %10s %10s %6s   %s | %s\n' "$setup" "$n" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')" \
		"$(paste -sd' ' "$DIR/a")" "$(paste -sd' ' "$DIR/b")" >>"$DIR/mpiexec.txt"
}

printf 'setup,N,mpiexec_ms,by_hand_ms,ratio,mpiexec_runs,by_hand_runs\n' >"$DIR/mpiexec.csv"
{
	echo "# bench/mpiexec.sh on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $REPS runs each (medians, ms)"
	echo "# a trivial MPI program, one rank per node; by hand: mpirun with the cluster's hostfile"
	printf '%-6s %3s  %10s %10s %6s   %s\n' setup N mpiexec by_hand ratio "runs: mpiexec | by hand"
} >"$DIR/mpiexec.txt"

# --- the local provider ---
: >"$DIR/cclfs.conf"
mount_cclfs
cd "$MNT"
for n in $SIZES; do
	deploy "l$n" local "$n"
	measure local "$n" "l$n" mpirun --hostfile "$MNT/clusters/l$n/hostfile" -np "$n" "$DIR/trivial"
	terminate "l$n"
done
unmount_cclfs

# --- sshd hosts in network namespaces ---
if testnet_supported 2>/dev/null; then
	max=0
	for n in $SIZES; do [ "$n" -le "$max" ] || max=$n; done
	NETNS=1
	testnet_start "$NETDIR" "$max" >/dev/null
	# shellcheck source=/dev/null
	source "$NETDIR/testnet.env"
	{
		echo '[hosts]'
		echo 'user = "root"'
		echo "keyfile = \"$NETDIR/id_ed25519\""
		echo "known_hosts = \"$NETDIR/known_hosts\""
		for ((k = 1; k <= max; k++)); do
			echo "[hosts.w$k]"
			echo "address = \"${TESTNET_WORKERS[k - 1]}\""
		done
	} >"$DIR/cclfs.conf"
	mount_cclfs nsenter --net="/run/netns/$TESTNET_MANAGER_NS"
	cd "$MNT"
	for n in $SIZES; do
		deploy "h$n" hosts "$n"
		node0=$(sed -n 's/^address: //p' "clusters/h$n/nodes/0/status")
		sshcmd=(nsenter --net="/run/netns/$TESTNET_MANAGER_NS" ssh -F "$NETDIR/ssh_config"
			-o ControlMaster=auto -o ControlPath="$DIR/cm-%h" -o ControlPersist=120 "root@$node0")
		measure hosts "$n" "h$n" "${sshcmd[@]}" \
			"OMPI_MCA_plm_rsh_agent=\$PWD/.cclfs/h$n/mpi/ssh mpirun --hostfile \$PWD/.cclfs/h$n/hostfile -np $n $DIR/trivial"
		"${sshcmd[@]}" -O exit 2>/dev/null || true
		terminate "h$n"
		rmdir "clusters/h$n"
	done
	unmount_cclfs
else
	echo "# hosts: network namespaces are not available here; not measured" >>"$DIR/mpiexec.txt"
fi

mkdir -p "$OUT"
cp "$DIR/mpiexec.csv" "$DIR/mpiexec.txt" "$OUT/"
cat "$OUT/mpiexec.txt"
