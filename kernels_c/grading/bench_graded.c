/* Grading a learner's whole benchmark program (notebook 02): an MPI profiling layer.
 *
 * Linked into the learner's executable, these definitions of MPI_* take the place of the MPI
 * library's for the learner's calls and reach the library through PMPI_* (the MPI standard's
 * profiling interface), so whatever point-to-point calls the program uses are seen without
 * touching its source. Three switches, read from the environment at MPI_Init:
 *
 *   PP_BENCH_LOG=PATH     at MPI_Finalize each rank writes PATH.rankR: one line
 *                         "sent BYTES COUNT" per message size it sent (to any peer);
 *   PP_BENCH_FAKE_CLOCK=L,B  MPI_Wtime is a fake clock that only point-to-point calls move,
 *                         by (rank + 1) * (L + bytes * B) seconds per message sent or received
 *                         ("1" for L = 1 us, B = 1 ns): a correct program then reports, per
 *                         size, exactly the slowest rank's one-way time (see cbench.py);
 *   PP_BENCH_CORRUPT=1    every message rank 1 sends to rank 0 leaves with one byte flipped:
 *                         a program that checks the echo must notice and fail.
 * The switches are removed from the environment once read, so the program does not see them.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PP_BENCH_LATENCY_S 1e-6  /* the fake clock's defaults */
#define PP_BENCH_S_PER_BYTE 1e-9
#define PP_BENCH_SIZES 64 /* distinct message sizes counted; enough for 1 B .. 2^62 B */

static int fake_clock, corrupt, my_rank;
static double fake_latency_s = PP_BENCH_LATENCY_S, fake_s_per_byte = PP_BENCH_S_PER_BYTE;
static const char *log_path;
static double fake_now = 1000.0;
static long long sizes_sent[PP_BENCH_SIZES];
static long long count_sent[PP_BENCH_SIZES];
static int nsizes;

static long long bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (long long)count * size;
}

static void moved(long long bytes)
{
    if (fake_clock)
        fake_now += (my_rank + 1) * (fake_latency_s + (double)bytes * fake_s_per_byte);
}

static void sent(int count, MPI_Datatype type)
{
    long long bytes = bytes_of(count, type);
    moved(bytes);
    for (int i = 0; i < nsizes; i++) {
        if (sizes_sent[i] == bytes) {
            count_sent[i]++;
            return;
        }
    }
    if (nsizes < PP_BENCH_SIZES) {
        sizes_sent[nsizes] = bytes;
        count_sent[nsizes++] = 1;
    }
}

/* What actually leaves: buf itself, or (PP_BENCH_CORRUPT, rank 1 to rank 0) a copy with one byte
 * flipped. The copy of a non-blocking send must outlive the call: it is never freed. */
static const void *outgoing(const void *buf, int count, MPI_Datatype type, int dest, int *copied)
{
    long long bytes = bytes_of(count, type);
    *copied = 0;
    if (!corrupt || my_rank != 1 || dest != 0 || bytes <= 0 || buf == NULL)
        return buf;
    unsigned char *copy = malloc((size_t)bytes);
    if (copy == NULL)
        return buf;
    memcpy(copy, buf, (size_t)bytes);
    copy[bytes / 2] ^= 0x5a;
    *copied = 1;
    return copy;
}

static int getflag(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static char log_copy[4096];

static void start(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    fake_clock = getflag("PP_BENCH_FAKE_CLOCK");
    if (fake_clock) {
        double latency, per_byte;
        if (sscanf(getenv("PP_BENCH_FAKE_CLOCK"), "%lf,%lf", &latency, &per_byte) == 2) {
            fake_latency_s = latency;
            fake_s_per_byte = per_byte;
        }
    }
    corrupt = getflag("PP_BENCH_CORRUPT");
    const char *log = getenv("PP_BENCH_LOG");
    if (log != NULL) {
        snprintf(log_copy, sizeof log_copy, "%s", log);
        log_path = log_copy;
    }
    unsetenv("PP_BENCH_FAKE_CLOCK");
    unsetenv("PP_BENCH_CORRUPT");
    unsetenv("PP_BENCH_LOG");
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    start();
    return rc;
}

int MPI_Finalize(void)
{
    if (log_path != NULL && log_path[0] != '\0') {
        char path[4096];
        snprintf(path, sizeof path, "%s.rank%d", log_path, my_rank);
        FILE *f = fopen(path, "w");
        if (f != NULL) {
            for (int i = 0; i < nsizes; i++)
                fprintf(f, "sent %lld %lld\n", sizes_sent[i], count_sent[i]);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}

double MPI_Wtime(void)
{
    return fake_clock ? fake_now : PMPI_Wtime();
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    int copied;
    const void *out = outgoing(buf, count, type, dest, &copied);
    sent(count, type);
    int rc = PMPI_Send(out, count, type, dest, tag, comm);
    if (copied)
        free((void *)out);
    return rc;
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    int copied;
    const void *out = outgoing(buf, count, type, dest, &copied);
    sent(count, type);
    int rc = PMPI_Ssend(out, count, type, dest, tag, comm);
    if (copied)
        free((void *)out);
    return rc;
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    int copied;
    const void *out = outgoing(buf, count, type, dest, &copied);
    sent(count, type);
    int rc = PMPI_Rsend(out, count, type, dest, tag, comm);
    if (copied)
        free((void *)out);
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    int copied;
    const void *out = outgoing(buf, count, type, dest, &copied);
    sent(count, type);
    return PMPI_Isend(out, count, type, dest, tag, comm, request);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *request)
{
    int copied;
    const void *out = outgoing(buf, count, type, dest, &copied);
    sent(count, type);
    return PMPI_Issend(out, count, type, dest, tag, comm, request);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    moved(bytes_of(count, type));
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request)
{
    moved(bytes_of(count, type));
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    int copied;
    const void *out = outgoing(sendbuf, sendcount, sendtype, dest, &copied);
    sent(sendcount, sendtype);
    moved(bytes_of(recvcount, recvtype));
    int rc = PMPI_Sendrecv(out, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                           source, recvtag, comm, status);
    if (copied)
        free((void *)out);
    return rc;
}
