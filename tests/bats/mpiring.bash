# The MPI ring of tests/mpi as the suites run it on a cluster: built where
# every node sees it (one filesystem), its expected lines, and the cluster's
# own ssh reaching every node from node 0.

# Build the ring into MPIBIN (a temporary directory; the suite removes it).
ring_build() {
	MPIBIN=$(mktemp -d "${TMPDIR:-/tmp}/cclfs-mpi.XXXXXX")
	mpicc -Wall -Wextra -Werror -o "$MPIBIN/ring" "$BATS_TEST_DIRNAME/../mpi/ring.c"
	chmod 755 "$MPIBIN"
}

# The ring's output on N ranks, in rank order: rank 0 gets N-2, rank r the
# r-2 its predecessor passed on.
ring_expected() {
	local n=$1 r
	echo "rank 0 of $n received $((n - 2))"
	for ((r = 1; r < n; r++)); do
		echo "rank $r of $n received $((r - 2))"
	done
}

# From node 0 of cluster $1, the cluster's ssh (what mpirun starts its
# daemons with) reaches each other node ($2...) at its address now.
mpi_reach_all() {
	local n addr
	for n in "${@:2}"; do
		addr=$(sed -n 's/^address: //p' "clusters/$1/nodes/$n/status")
		echo "\$OMPI_MCA_plm_rsh_agent $addr 'echo \$SSH_CONNECTION'" >"clusters/$1/nodes/0/exec"
		[ "$(cut -d' ' -f3 "clusters/$1/nodes/0/stdout")" = "$addr" ]
	done
}
