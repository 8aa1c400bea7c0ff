/* Bidirectional bandwidth (osu_bibw): both ranks send a window to each other at once (see
 * pp_window.c). Ranks above 1 stay idle. */
#include "pp_util.h"

int pp_bibw(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples)
{
    return pp_run_window(comm, 1, nbytes, warmup, iters, flags, samples);
}
