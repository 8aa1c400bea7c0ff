/* Instrumented MPI for grading learners' C (pingpong_lab.course.grading.cbuild).
 *
 * The grader compiles a learner's file with this header in front of it: the point-to-point
 * calls below, MPI_Barrier, MPI_Wtime and MPI_Allreduce become calls of pp_graded.c's
 * wrappers, which record (kind, peer, tag, bytes) of every call and then make the real MPI
 * call. pp_graded.c itself never sees these macros.
 *
 * MPI_Wtime is a fake clock in this build: it reads a counter that only the point-to-point
 * calls advance, by PP_GRADED_TICK_S * (rank + 1) each. A timing loop around k round trips
 * then measures exactly 2 k (rank + 1) ticks on every machine, however noisy: the grader
 * knows every sample and the maximum over ranks in advance.
 */
#ifndef PP_GRADED_H
#define PP_GRADED_H
#include <mpi.h>

/* what pp_graded_calls() reports in the first field of a call */
enum pp_graded_kind {
    PP_GRADED_SEND = 1,
    PP_GRADED_RECV = 2,
    PP_GRADED_ISEND = 3,
    PP_GRADED_IRECV = 4,
    PP_GRADED_SSEND = 5,
    PP_GRADED_BARRIER = 6,   /* peer, tag, bytes: 0 */
    PP_GRADED_WTIME = 7,     /* peer, tag, bytes: 0 */
    PP_GRADED_ALLREDUCE = 8, /* peer: 1 for MPI_MAX, else 0; tag: 1 for MPI_DOUBLE; bytes */
};
#define PP_GRADED_MAX 512      /* calls recorded; later ones are only counted */
#define PP_GRADED_TICK_S 1e-6 /* what one point-to-point call adds to the fake clock */

int pp_graded_send(const void *buf, int count, MPI_Datatype type, int peer, int tag,
                   MPI_Comm comm);
int pp_graded_ssend(const void *buf, int count, MPI_Datatype type, int peer, int tag,
                    MPI_Comm comm);
int pp_graded_recv(void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                   MPI_Status *status);
int pp_graded_isend(const void *buf, int count, MPI_Datatype type, int peer, int tag,
                    MPI_Comm comm, MPI_Request *request);
int pp_graded_irecv(void *buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                    MPI_Request *request);
int pp_graded_barrier(MPI_Comm comm);
double pp_graded_wtime(void);
int pp_graded_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm);
/* copies up to max_calls records of 4 ints into out; returns how many calls were made */
int pp_graded_calls(int *out, int max_calls);
void pp_graded_reset(void);
/* this MPI's MPI_ANY_SOURCE, MPI_ANY_TAG and MPI_PROC_NULL, in that order: the grader judges
 * the recorded peers and tags with the values the learner's code was compiled with */
void pp_graded_constants(int out[3]);

#ifndef PP_GRADED_IMPLEMENTATION
#define MPI_Send pp_graded_send
#define MPI_Ssend pp_graded_ssend
#define MPI_Recv pp_graded_recv
#define MPI_Isend pp_graded_isend
#define MPI_Irecv pp_graded_irecv
#define MPI_Barrier pp_graded_barrier
#define MPI_Wtime pp_graded_wtime
#define MPI_Allreduce pp_graded_allreduce
#endif
#endif
