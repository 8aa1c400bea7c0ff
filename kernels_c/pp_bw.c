/* Windowed one-way bandwidth (osu_bw): a window of non-blocking sends, one acknowledgement
 * (see pp_window.c). Ranks above 1 stay idle. */
#include "pp_util.h"

int pp_bw(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples)
{
    return pp_run_window(comm, 0, nbytes, warmup, iters, flags, samples);
}
