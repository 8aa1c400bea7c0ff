#include <mpi.h>

#define NOT_IMPLEMENTED (-99) /* what the unfinished exercise returns */
#define TAG 0

/* One blocking round trip between ranks 0 and 1 (notebook 01's pingpong_c); others do nothing. */
void round_trip(MPI_Comm comm, int rank, const unsigned char *sendbuf, unsigned char *recvbuf,
                int nbytes)
{
    if (rank == 0) {
        MPI_Send(sendbuf, nbytes, MPI_BYTE, 1, TAG, comm);
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE);
        MPI_Send(recvbuf, nbytes, MPI_BYTE, 0, TAG, comm);
    }
}

/* warmup untimed round trips, MPI_Barrier, then reps timed ones. samples[i] (the caller's array
 * of reps doubles): this rank's one-way time of timed round trip i, half of it, in seconds.
 * *one_way: elapsed / (2 * reps), the maximum over ranks (MPI_Allreduce, MPI_MAX).
 * Returns 0 on success. */
int time_pingpong_c(MPI_Comm comm, const unsigned char *sendbuf, unsigned char *recvbuf,
                    int nbytes, int reps, int warmup, double *samples, double *one_way)
{
    /* BEGIN SOLUTION */
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int i = 0; i < warmup; i++)
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
    MPI_Barrier(comm);
    double start = MPI_Wtime();
    double before = start;
    for (int i = 0; i < reps; i++) {
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
        double after = MPI_Wtime();
        samples[i] = (after - before) / 2.0;
        before = after;
    }
    double mine = (before - start) / (2.0 * reps);
    MPI_Allreduce(&mine, one_way, 1, MPI_DOUBLE, MPI_MAX, comm);
    return 0;
    /* END SOLUTION */
}
