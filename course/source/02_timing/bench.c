/* bench.c: a ping-pong benchmark program, from 1 byte to MAX_BYTES in powers of two.
 *
 *     mpiexec -n 2 ./bench OUT.csv MAX_BYTES REPS WARMUP
 *
 * Rank 0 writes OUT.csv: the header "nbytes,reps,t_median_s", then one row per size, where
 * t_median_s is the median over the REPS timed round trips of the slower rank's one-way time
 * (half a round trip), in seconds. A wrong echo: a message on stderr and exit status 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_IMPLEMENTED (-99) /* what the unfinished exercise returns */
#define TAG 0

/* Given: one blocking round trip between ranks 0 and 1 (rank 1 echoes the bytes it received);
 * other ranks do nothing. */
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

int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Given: the median of n values (it sorts them in place). */
double median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Given: a byte pattern that changes with the size, so that a stale echo cannot pass. */
void fill(unsigned char *buf, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        buf[i] = (unsigned char)((i * 31 + nbytes * 7 + 1) & 0xff);
}

/* TODO 1: time one message size; every rank calls it.
 *  - warmup untimed round trips, then MPI_Barrier(comm);
 *  - reps timed round trips: read MPI_Wtime() before the first and after each one, and store
 *    half of round trip i (this rank's one-way time, seconds) in samples[i];
 *  - the maximum over ranks of every samples[i] into slowest[i] on rank 0 (MPI_Reduce or
 *    MPI_Allreduce with MPI_MAX, count reps);
 *  - rank 0: compare the echo (recvbuf) with sendbuf, nbytes bytes (memcmp); return 1 if they
 *    differ. Return 0 otherwise (and on every other rank). */
int time_size(MPI_Comm comm, const unsigned char *sendbuf, unsigned char *recvbuf, int nbytes,
              int reps, int warmup, double *samples, double *slowest)
{
    /* BEGIN SOLUTION */
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int i = 0; i < warmup; i++)
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
    MPI_Barrier(comm);
    double before = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
        round_trip(comm, rank, sendbuf, recvbuf, nbytes);
        double after = MPI_Wtime();
        samples[i] = (after - before) / 2.0;
        before = after;
    }
    MPI_Reduce(samples, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, comm);
    return rank == 0 && memcmp(sendbuf, recvbuf, (size_t)nbytes) != 0;
    /* END SOLUTION */
}

/* TODO 2: the program.
 *  - MPI_Init; this rank; MAX_BYTES, REPS and WARMUP from argv[2], argv[3], argv[4] (atoi);
 *  - malloc sendbuf and recvbuf (MAX_BYTES each), samples and slowest (REPS doubles each);
 *  - rank 0: fopen(argv[1], "w") and write the header line "nbytes,reps,t_median_s";
 *  - for nbytes = 1, 2, 4, ... up to MAX_BYTES: fill(sendbuf, nbytes), then time_size(...);
 *    on rank 0, if the echo was wrong: fprintf(stderr, ...) and MPI_Abort(comm, 1); else
 *    fprintf(out, "%d,%d,%.9e\n", nbytes, reps, median(slowest, reps));
 *  - fclose, free every buffer, MPI_Finalize, return 0. */
int main(int argc, char **argv)
{
    /* BEGIN SOLUTION */
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (argc != 5) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 %s OUT.csv MAX_BYTES REPS WARMUP\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int max_bytes = atoi(argv[2]), reps = atoi(argv[3]), warmup = atoi(argv[4]);
    unsigned char *sendbuf = malloc((size_t)max_bytes);
    unsigned char *recvbuf = malloc((size_t)max_bytes);
    double *samples = malloc(sizeof(double) * (size_t)reps);
    double *slowest = malloc(sizeof(double) * (size_t)reps);
    if (!sendbuf || !recvbuf || !samples || !slowest) {
        fprintf(stderr, "bench: out of memory\n");
        MPI_Abort(comm, 1);
    }
    FILE *out = NULL;
    if (rank == 0) {
        out = fopen(argv[1], "w");
        if (out == NULL) {
            fprintf(stderr, "bench: cannot write %s\n", argv[1]);
            MPI_Abort(comm, 1);
        }
        fprintf(out, "nbytes,reps,t_median_s\n");
    }
    for (int nbytes = 1; nbytes <= max_bytes; nbytes *= 2) {
        fill(sendbuf, nbytes);
        if (time_size(comm, sendbuf, recvbuf, nbytes, reps, warmup, samples, slowest)) {
            fprintf(stderr, "bench: the echo of %d bytes differs from what was sent\n", nbytes);
            MPI_Abort(comm, 1);
        }
        if (rank == 0)
            fprintf(out, "%d,%d,%.9e\n", nbytes, reps, median(slowest, reps));
        if (nbytes > max_bytes / 2)
            break; /* doubling again would pass max_bytes */
    }
    if (rank == 0)
        fclose(out);
    free(sendbuf);
    free(recvbuf);
    free(samples);
    free(slowest);
    MPI_Finalize();
    return 0;
    /* END SOLUTION */
}
