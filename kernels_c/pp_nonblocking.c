/* Non-blocking ping-pong: the same exchange as pp_blocking.c with MPI_Isend/MPI_Irecv and
 * waits; rank 0 posts its receive before its send. Ranks above 1 stay idle. */
#include "pp_util.h"

int pp_pingpong_nonblocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                            double *samples)
{
    return pp_pingpong_ranks_0_1(comm, 1, nbytes, warmup, iters, flags, samples);
}
