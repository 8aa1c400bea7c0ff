/* Non-blocking ping-pong: the same exchange as pp_blocking.c with MPI_Isend/MPI_Irecv and
 * waits; rank 0 posts its receive before its send. Ranks above 1 stay idle. */
#include "pp_util.h"

int pp_pingpong_nonblocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                            double *samples)
{
    int rank, size;
    PP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    PP_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) {
        return PP_ERR_NO_PEER;
    }
    int peer = rank == 0 ? 1 : rank == 1 ? 0 : MPI_PROC_NULL;
    return pp_run_pairs(comm, peer, rank == 0, 1, nbytes, warmup, iters, flags, samples);
}
