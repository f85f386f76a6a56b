/* The ring: rank 0 sends -1 to rank 1; every rank adds one to what it
 * receives and passes it on to the next, the last back to rank 0. Every
 * rank prints what it received: "rank R of N received V". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, value;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "ring: needs at least 2 ranks, got %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (rank == 0) {
		value = -1;
		MPI_Send(&value, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
		MPI_Recv(&value, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(&value, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	}
	printf("rank %d of %d received %d\n", rank, size, value);
	fflush(stdout);
	if (rank != 0) {
		value++;
		MPI_Send(&value, 1, MPI_INT, (rank + 1) % size, 0,
			 MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
