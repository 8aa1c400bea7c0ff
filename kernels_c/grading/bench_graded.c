/* Grading a learner's whole benchmark program (notebook 02): an MPI profiling layer.
 *
 * Linked into the learner's executable, these definitions of MPI_* take the place of the MPI
 * library's for the learner's calls and reach the library through PMPI_* (the MPI standard's
 * profiling interface), so the program is graded by what it does, however it is written. Every
 * way to send a point-to-point message is seen: blocking (Send, Ssend, Rsend, Bsend),
 * non-blocking (Isend, Issend, Irsend, Ibsend), persistent (the four *_init, then Start or
 * Startall), combined (Sendrecv, Sendrecv_replace, Isendrecv, Isendrecv_replace), and the
 * large-count *_c form of each. Receives are not counted: a message is charged once, where it
 * leaves, so a program may receive into a buffer of any capacity, with any call.
 *
 * MPI_Wtime is the real clock on rank 0. On rank 1 it runs RANK1_RATE times as fast (from
 * where it stood at MPI_Init), in every run: rank 1 is then the slower rank of every round trip,
 * so a program that reports rank 0's own time instead of the maximum over ranks is told apart.
 * The grader recomputes what the program should report from the readings logged below, so a run
 * is judged by what the program itself read, on a quiet or a busy machine alike.
 *
 * Two switches, read from the environment at MPI_Init and then removed from it. Grading runs
 * every time with both (PP_BENCH_CORRUPT=maybe), so no graded run differs from another:
 *
 *   PP_BENCH_LOG=PATH     at MPI_Finalize each rank writes PATH.rankR, one line per event in
 *                         order: "send BYTES" for a message it sent, "sync" for a call that
 *                         synchronises the ranks (Barrier, Ibarrier, Allreduce, Allgather,
 *                         Alltoall), "clock SECONDS" for each value MPI_Wtime returned;
 *   PP_BENCH_CORRUPT=1    every message rank 1 sends to rank 0 leaves with one byte flipped:
 *                         a program that checks the echo must notice and fail;
 *   PP_BENCH_CORRUPT=maybe  the same or nothing, as rank 1's layer draws at random when the
 *                         program starts (from /dev/urandom, so nothing the program reads
 *                         tells which). With PP_BENCH_LOG, rank 1 makes PATH.rank1.corrupted as
 *                         its first flipped message leaves, so the grader knows which runs
 *                         were which.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RANK1_RATE 2.0            /* how much faster rank 1's MPI_Wtime runs (cbench.RANK1_RATE) */
#define PP_BENCH_EVENTS (1 << 22) /* events logged at most (then the log says "truncated") */
#define PP_BENCH_PERSISTENT 256   /* persistent send requests alive at once */

enum event_kind { SEND, SYNC, CLOCK };
struct event {
    enum event_kind kind;
    long long bytes; /* SEND */
    double seconds;  /* CLOCK: what MPI_Wtime returned */
};

static int corrupt, my_rank;
static double clock_origin; /* the real clock at MPI_Init */
static char log_path[4096];
static struct event *events;
static size_t nevents, capacity;
static int truncated;
static int corrupt_marked;

static long long bytes_of(long long count, MPI_Datatype type)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return count * size;
}

static void record(enum event_kind kind, long long bytes, double seconds)
{
    if (log_path[0] == '\0')
        return;
    if (nevents == capacity) {
        size_t more = capacity ? 2 * capacity : 4096;
        struct event *grown =
            more <= PP_BENCH_EVENTS ? realloc(events, more * sizeof *events) : NULL;
        if (grown == NULL) {
            truncated = 1;
            return;
        }
        events = grown;
        capacity = more;
    }
    events[nevents++] = (struct event){kind, bytes, seconds};
}

static void sent(long long bytes)
{
    record(SEND, bytes, 0.0);
}

static int corrupts(const void *buf, long long bytes, int dest)
{
    return corrupt && my_rank == 1 && dest == 0 && bytes > 0 && buf != NULL;
}

/* A flipped message is leaving: with a log, say so at once in PATH.rankR.corrupted (the program
 * may abort before MPI_Finalize, as it should). */
static void mark_corrupted(void)
{
    if (corrupt_marked || log_path[0] == '\0')
        return;
    corrupt_marked = 1;
    char path[4200];
    snprintf(path, sizeof path, "%s.rank%d.corrupted", log_path, my_rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0)
        close(fd);
}

/* What actually leaves: buf itself, or (PP_BENCH_CORRUPT, rank 1 to rank 0) a copy with one byte
 * flipped. The copy of a non-blocking send must outlive the call: it is never freed. */
static const void *outgoing(const void *buf, long long bytes, int dest)
{
    if (!corrupts(buf, bytes, dest))
        return buf;
    unsigned char *copy = malloc((size_t)bytes);
    if (copy == NULL)
        return buf;
    memcpy(copy, buf, (size_t)bytes);
    copy[bytes / 2] ^= 0x5a;
    mark_corrupted();
    return copy;
}

/* A buffer sent and then replaced by what arrives (Sendrecv_replace): flipped where it is. */
static void flip_in_place(void *buf, long long bytes, int dest)
{
    if (corrupts(buf, bytes, dest)) {
        ((unsigned char *)buf)[bytes / 2] ^= 0x5a;
        mark_corrupted();
    }
}

/* One random bit, from the operating system (0 if it cannot be read). */
static int random_bit(void)
{
    unsigned char byte = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f != NULL) {
        if (fread(&byte, 1, 1, f) != 1)
            byte = 0;
        fclose(f);
    }
    return byte & 1;
}

static int getflag(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

static void start(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    clock_origin = PMPI_Wtime();
    const char *how = getenv("PP_BENCH_CORRUPT");
    if (how != NULL && strcmp(how, "maybe") == 0)
        corrupt = my_rank == 1 && random_bit();
    else
        corrupt = getflag("PP_BENCH_CORRUPT");
    const char *log = getenv("PP_BENCH_LOG");
    if (log != NULL)
        snprintf(log_path, sizeof log_path, "%s", log);
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
    if (log_path[0] != '\0') {
        char path[4200];
        snprintf(path, sizeof path, "%s.rank%d", log_path, my_rank);
        FILE *f = fopen(path, "w");
        if (f != NULL) {
            for (size_t i = 0; i < nevents; i++) {
                if (events[i].kind == SYNC)
                    fputs("sync\n", f);
                else if (events[i].kind == CLOCK)
                    fprintf(f, "clock %.17g\n", events[i].seconds);
                else
                    fprintf(f, "send %lld\n", events[i].bytes);
            }
            if (truncated)
                fputs("truncated\n", f);
            fclose(f);
        }
    }
    return PMPI_Finalize();
}

double MPI_Wtime(void)
{
    double now = PMPI_Wtime();
    if (my_rank == 1)
        now = clock_origin + (now - clock_origin) * RANK1_RATE;
    record(CLOCK, 0, now);
    return now;
}

/* -- sends: blocking, non-blocking, int and large counts --------------------------------------- */
#define BLOCKING_SEND(NAME, COUNT)                                                                 \
    int NAME(const void *buf, COUNT count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)    \
    {                                                                                              \
        long long bytes = bytes_of((long long)count, type);                                        \
        const void *out = outgoing(buf, bytes, dest);                                              \
        sent(bytes);                                                                               \
        int rc = P##NAME(out, count, type, dest, tag, comm);                                       \
        if (out != buf)                                                                            \
            free((void *)out);                                                                     \
        return rc;                                                                                 \
    }

#define NONBLOCKING_SEND(NAME, COUNT)                                                              \
    int NAME(const void *buf, COUNT count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,    \
             MPI_Request *request)                                                                 \
    {                                                                                              \
        long long bytes = bytes_of((long long)count, type);                                        \
        const void *out = outgoing(buf, bytes, dest);                                              \
        sent(bytes);                                                                               \
        return P##NAME(out, count, type, dest, tag, comm, request);                                \
    }

BLOCKING_SEND(MPI_Send, int)
BLOCKING_SEND(MPI_Ssend, int)
BLOCKING_SEND(MPI_Rsend, int)
BLOCKING_SEND(MPI_Bsend, int)
NONBLOCKING_SEND(MPI_Isend, int)
NONBLOCKING_SEND(MPI_Issend, int)
NONBLOCKING_SEND(MPI_Irsend, int)
NONBLOCKING_SEND(MPI_Ibsend, int)

/* -- persistent sends: counted (and corrupted) at every start ---------------------------------- */
static struct persistent {
    MPI_Request request;
    const void *buf; /* the learner's buffer */
    void *copy;      /* what the request sends when every echo is corrupted, else NULL */
    long long bytes;
    int used;
} persistent[PP_BENCH_PERSISTENT];

static struct persistent *persistent_of(MPI_Request request)
{
    for (int i = 0; i < PP_BENCH_PERSISTENT; i++)
        if (persistent[i].used && persistent[i].request == request)
            return &persistent[i];
    return NULL;
}

/* The buffer a persistent send is made with: the learner's, or a copy refreshed at each start. */
static const void *persistent_buffer(const void *buf, long long bytes, int dest, void **copy)
{
    *copy = corrupts(buf, bytes, dest) ? malloc((size_t)bytes) : NULL;
    return *copy != NULL ? *copy : buf;
}

static void remember(MPI_Request request, const void *buf, void *copy, long long bytes)
{
    for (int i = 0; i < PP_BENCH_PERSISTENT; i++) {
        if (!persistent[i].used) {
            persistent[i] = (struct persistent){request, buf, copy, bytes, 1};
            return;
        }
    }
}

static void started(MPI_Request request)
{
    struct persistent *p = persistent_of(request);
    if (p == NULL)
        return; /* a persistent receive, or a request this layer did not make */
    if (p->copy != NULL) {
        memcpy(p->copy, p->buf, (size_t)p->bytes);
        ((unsigned char *)p->copy)[p->bytes / 2] ^= 0x5a;
        mark_corrupted();
    }
    sent(p->bytes);
}

#define PERSISTENT_SEND(NAME, COUNT)                                                               \
    int NAME(const void *buf, COUNT count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,    \
             MPI_Request *request)                                                                 \
    {                                                                                              \
        long long bytes = bytes_of((long long)count, type);                                        \
        void *copy;                                                                                \
        const void *use = persistent_buffer(buf, bytes, dest, &copy);                              \
        int rc = P##NAME(use, count, type, dest, tag, comm, request);                              \
        if (rc == MPI_SUCCESS)                                                                     \
            remember(*request, buf, copy, bytes);                                                  \
        return rc;                                                                                 \
    }

PERSISTENT_SEND(MPI_Send_init, int)
PERSISTENT_SEND(MPI_Ssend_init, int)
PERSISTENT_SEND(MPI_Rsend_init, int)
PERSISTENT_SEND(MPI_Bsend_init, int)

int MPI_Start(MPI_Request *request)
{
    started(*request);
    return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[])
{
    for (int i = 0; i < count; i++)
        started(requests[i]);
    return PMPI_Startall(count, requests);
}

int MPI_Request_free(MPI_Request *request)
{
    struct persistent *p = persistent_of(*request);
    if (p != NULL)
        p->used = 0; /* its copy may still be in flight: kept */
    return PMPI_Request_free(request);
}

/* -- combined send and receive ------------------------------------------------------------------ */
#define SENDRECV(NAME, COUNT)                                                                      \
    int NAME(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, int dest, int sendtag,   \
             void *recvbuf, COUNT recvcount, MPI_Datatype recvtype, int source, int recvtag,       \
             MPI_Comm comm, MPI_Status *status)                                                    \
    {                                                                                              \
        long long bytes = bytes_of((long long)sendcount, sendtype);                                \
        const void *out = outgoing(sendbuf, bytes, dest);                                          \
        sent(bytes);                                                                               \
        int rc = P##NAME(out, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,    \
                         source, recvtag, comm, status);                                           \
        if (out != sendbuf)                                                                        \
            free((void *)out);                                                                     \
        return rc;                                                                                 \
    }

#define ISENDRECV(NAME, COUNT)                                                                     \
    int NAME(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, int dest, int sendtag,   \
             void *recvbuf, COUNT recvcount, MPI_Datatype recvtype, int source, int recvtag,       \
             MPI_Comm comm, MPI_Request *request)                                                  \
    {                                                                                              \
        long long bytes = bytes_of((long long)sendcount, sendtype);                                \
        const void *out = outgoing(sendbuf, bytes, dest);                                          \
        sent(bytes);                                                                               \
        return P##NAME(out, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,      \
                       source, recvtag, comm, request);                                            \
    }

#define SENDRECV_REPLACE(NAME, COUNT)                                                              \
    int NAME(void *buf, COUNT count, MPI_Datatype type, int dest, int sendtag, int source,         \
             int recvtag, MPI_Comm comm, MPI_Status *status)                                       \
    {                                                                                              \
        long long bytes = bytes_of((long long)count, type);                                        \
        flip_in_place(buf, bytes, dest);                                                           \
        sent(bytes);                                                                               \
        return P##NAME(buf, count, type, dest, sendtag, source, recvtag, comm, status);            \
    }

#define ISENDRECV_REPLACE(NAME, COUNT)                                                             \
    int NAME(void *buf, COUNT count, MPI_Datatype type, int dest, int sendtag, int source,         \
             int recvtag, MPI_Comm comm, MPI_Request *request)                                     \
    {                                                                                              \
        long long bytes = bytes_of((long long)count, type);                                        \
        flip_in_place(buf, bytes, dest);                                                           \
        sent(bytes);                                                                               \
        return P##NAME(buf, count, type, dest, sendtag, source, recvtag, comm, request);           \
    }

SENDRECV(MPI_Sendrecv, int)
SENDRECV_REPLACE(MPI_Sendrecv_replace, int)

#if MPI_VERSION >= 4
ISENDRECV(MPI_Isendrecv, int)
ISENDRECV_REPLACE(MPI_Isendrecv_replace, int)
BLOCKING_SEND(MPI_Send_c, MPI_Count)
BLOCKING_SEND(MPI_Ssend_c, MPI_Count)
BLOCKING_SEND(MPI_Rsend_c, MPI_Count)
BLOCKING_SEND(MPI_Bsend_c, MPI_Count)
NONBLOCKING_SEND(MPI_Isend_c, MPI_Count)
NONBLOCKING_SEND(MPI_Issend_c, MPI_Count)
NONBLOCKING_SEND(MPI_Irsend_c, MPI_Count)
NONBLOCKING_SEND(MPI_Ibsend_c, MPI_Count)
PERSISTENT_SEND(MPI_Send_init_c, MPI_Count)
PERSISTENT_SEND(MPI_Ssend_init_c, MPI_Count)
PERSISTENT_SEND(MPI_Rsend_init_c, MPI_Count)
PERSISTENT_SEND(MPI_Bsend_init_c, MPI_Count)
SENDRECV(MPI_Sendrecv_c, MPI_Count)
SENDRECV_REPLACE(MPI_Sendrecv_replace_c, MPI_Count)
ISENDRECV(MPI_Isendrecv_c, MPI_Count)
ISENDRECV_REPLACE(MPI_Isendrecv_replace_c, MPI_Count)
#endif

/* -- calls that synchronise the ranks: logged, so that a Barrier after the warm-up is seen ------ */
int MPI_Barrier(MPI_Comm comm)
{
    record(SYNC, 0, 0.0);
    return PMPI_Barrier(comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    record(SYNC, 0, 0.0);
    return PMPI_Ibarrier(comm, request);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    record(SYNC, 0, 0.0);
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    record(SYNC, 0, 0.0);
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    record(SYNC, 0, 0.0);
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
