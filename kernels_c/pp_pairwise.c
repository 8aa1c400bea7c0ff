/* Pairwise exchange: every rank r in the bottom half ping-pongs with r + size/2 at the same
 * time, so all pairs compete for the same memory system or network. */
#include "pp_util.h"

int pp_pairwise(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples)
{
    int rank, size;
    PP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    PP_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) {
        return PP_ERR_NO_PEER;
    }
    if (size % 2 != 0) {
        return PP_ERR_ODD_RANKS; /* every rank sees the same size: all refuse, none waits */
    }
    int half = size / 2;
    int peer = rank < half ? rank + half : rank - half;
    return pp_run_pairs(comm, peer, rank < half, 0, nbytes, warmup, iters, flags, samples);
}
