/* Blocking ping-pong: rank 0 sends with MPI_Send, rank 1 answers with MPI_Recv + MPI_Send.
 * Ranks above 1 take part only in the synchronising barrier. */
#include "pp_util.h"

int pp_pingpong_blocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                         double *samples)
{
    return pp_pingpong_ranks_0_1(comm, 0, nbytes, warmup, iters, flags, samples);
}
