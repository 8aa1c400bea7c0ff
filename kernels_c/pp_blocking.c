/* Blocking ping-pong: rank 0 sends with MPI_Send, rank 1 echoes with MPI_Recv + MPI_Send.
 * Ranks above 1 take part only in the synchronising barrier. */
#include "pp_util.h"

int pp_pingpong_blocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                         double *samples)
{
    int rank, size;
    PP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    PP_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) {
        return PP_ERR_NO_PEER;
    }
    int peer = rank == 0 ? 1 : rank == 1 ? 0 : MPI_PROC_NULL;
    return pp_run_pairs(comm, peer, rank == 0, 0, nbytes, warmup, iters, flags, samples);
}
