/* The rank sum: MPI_Reduce of every rank's number to rank 0, which prints
 * "sum of ranks 0..N-1 is S" (S = N(N-1)/2). With an argument, every rank
 * also prints "rank R on HOST" (the node it ran on). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, sum = 0, len;
	char host[MPI_MAX_PROCESSOR_NAME];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &len);
	if (argc > 1) {
		printf("rank %d on %s\n", rank, host);
		fflush(stdout);
	}
	MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("sum of ranks 0..%d is %d\n", size - 1, sum);
	MPI_Finalize();
	return 0;
}
