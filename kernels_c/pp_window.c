/* Windowed bandwidth, as the OSU micro-benchmarks measure it (osu_bw, osu_bibw): instead of one
 * message and its echo, a window of W non-blocking sends is in flight at once, so the time per
 * message approaches the gap between messages (LogGP's g, G) rather than a whole latency.
 *
 *   bw:   rank 0 posts W Isends to rank 1; rank 1 has W Irecvs posted and answers the window
 *         with one 1-byte acknowledgement. A sample is rank 0's time from its first Isend to
 *         the acknowledgement: W * nbytes / sample is the one-way bandwidth.
 *   bibw: both ranks post W Isends to each other at once (each has W Irecvs posted); a sample
 *         is rank 0's time until both its sends and its receives completed:
 *         2 * W * nbytes / sample is the bidirectional bandwidth.
 *
 * The window W is the kernels' batch (PP_BATCH_OF(flags)). Every message of window i carries
 * stamp i and lands in its own receive slot (W slots of nbytes: MPI forbids receives that are
 * pending at once into the same bytes). Slots are checked after the timed region; then the two
 * ranks post the next window's receives and exchange an empty "ready" message, so that neither
 * checks nor postings are timed and the next window starts with its receives in place.
 * PP_CORRUPT_ECHO: the last message of every window a rank sends has one byte flipped (it is
 * sent from a damaged copy, never by writing into a buffer that is being sent).
 * Ranks above 1 stay idle (NaN samples). */
#include "pp_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The window's buffers, allocated per call and touched before any timing. */
struct pp_window_bufs {
    unsigned char *send; /* the payload every message of a window carries */
    unsigned char *bad;  /* the same payload with one byte flipped (PP_CORRUPT_ECHO) */
    unsigned char *slots; /* W receive slots of nbytes each */
    MPI_Request *reqs;    /* W receives, then W sends */
};

static void pp_window_free(struct pp_window_bufs *b)
{
    free(b->send);
    free(b->bad);
    free(b->slots);
    free(b->reqs);
    memset(b, 0, sizeof *b);
}

static int pp_window_alloc(struct pp_window_bufs *b, size_t nbytes, int window)
{
    size_t one = nbytes > 0 ? nbytes : 1;
    memset(b, 0, sizeof *b);
    if (one > SIZE_MAX / (size_t)window) {
        return PP_ERR_ALLOC;
    }
    b->send = malloc(one);
    b->bad = malloc(one);
    b->slots = malloc(one * (size_t)window);
    b->reqs = malloc(2 * (size_t)window * sizeof *b->reqs);
    if (!b->send || !b->bad || !b->slots || !b->reqs) {
        pp_window_free(b);
        return PP_ERR_ALLOC;
    }
    memset(b->slots, 0, one * (size_t)window); /* first touch now, not in a timed window */
    pp_fill(b->send, nbytes, 0);
    return 0;
}

static int pp_post_receives(struct pp_window_bufs *b, size_t nbytes, int window, int peer,
                            MPI_Comm comm)
{
    for (int k = 0; k < window; k++) {
        PP_MPI_CHECK(MPI_Irecv(b->slots + (size_t)k * nbytes, (int)nbytes, MPI_BYTE, peer, PP_TAG,
                               comm, &b->reqs[k]));
    }
    return 0;
}

static int pp_post_sends(struct pp_window_bufs *b, size_t nbytes, int window, int peer,
                         int corrupting, MPI_Comm comm)
{
    for (int k = 0; k < window; k++) {
        const unsigned char *buf = corrupting && k == window - 1 ? b->bad : b->send;
        PP_MPI_CHECK(MPI_Isend(buf, (int)nbytes, MPI_BYTE, peer, PP_TAG, comm,
                               &b->reqs[window + k]));
    }
    return 0;
}

/* Damaged messages among the window's W received slots. */
static int pp_check_slots(const struct pp_window_bufs *b, size_t nbytes, int window, long iter)
{
    int bad = 0;
    for (int k = 0; k < window; k++) {
        bad += !pp_stamped_ok(b->slots + (size_t)k * nbytes, nbytes, iter);
    }
    return bad;
}

int pp_run_window(MPI_Comm comm, int both, size_t nbytes, int warmup, int iters, int flags,
                  double *samples)
{
    int rank, size;
    PP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    PP_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) {
        return PP_ERR_NO_PEER;
    }
    const int window = PP_BATCH_OF(flags);
    int ok = warmup >= 0 && iters >= 0 && (samples != NULL || iters == 0) && flags >= 0 &&
             nbytes <= PP_CHUNK_BYTES;
    int all_ok = 0;
    PP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    if (!all_ok) {
        return PP_ERR_ARGS;
    }
    const int peer = rank == 0 ? 1 : rank == 1 ? 0 : MPI_PROC_NULL;
    const int sends = rank == 0 || both;    /* who posts a window of sends */
    const int receives = rank == 1 || both; /* who posts a window of receives */
    const int corrupting = (flags & PP_CORRUPT_ECHO) != 0 && nbytes > 0;
    struct pp_window_bufs b;
    memset(&b, 0, sizeof b);
    ok = peer == MPI_PROC_NULL || pp_window_alloc(&b, nbytes, window) == 0;
    PP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    if (!all_ok) {
        pp_window_free(&b);
        return PP_ERR_ALLOC;
    }

    int corrupt = 0;
    int rc = 0;
    unsigned char ack = 0;
    if (peer != MPI_PROC_NULL && receives && iters + warmup > 0) {
        rc = pp_post_receives(&b, nbytes, window, peer, comm);
    }
    for (long i = -(long)warmup; i < iters && !rc; i++) {
        if (i == 0) {
            rc = MPI_Barrier(comm) == MPI_SUCCESS ? 0 : PP_ERR_MPI; /* synchronised start */
        }
        if (i >= 0) {
            samples[i] = NAN; /* overwritten below on rank 0 */
        }
        if (peer == MPI_PROC_NULL || rc) {
            continue;
        }
        /* Untimed: this window's payload (and its damaged copy). */
        pp_stamp(b.send, nbytes, i);
        if (corrupting) {
            memcpy(b.bad, b.send, nbytes);
            b.bad[nbytes / 2] ^= 0xFF;
        }
        double t0 = MPI_Wtime();
        if (sends) {
            rc = pp_post_sends(&b, nbytes, window, peer, corrupting, comm);
        }
        if (!rc && receives && sends) {
            rc = MPI_Waitall(2 * window, b.reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS ? 0
                                                                              : PP_ERR_MPI;
        } else if (!rc && receives) {
            rc = MPI_Waitall(window, b.reqs, MPI_STATUSES_IGNORE) == MPI_SUCCESS ? 0 : PP_ERR_MPI;
        } else if (!rc) {
            rc = MPI_Waitall(window, b.reqs + window, MPI_STATUSES_IGNORE) == MPI_SUCCESS
                     ? 0
                     : PP_ERR_MPI;
        }
        if (!rc && !both) { /* bw: one acknowledgement for the whole window */
            int mpi_rc = rank == 1 ? MPI_Send(&ack, 1, MPI_BYTE, peer, PP_TAG, comm)
                                   : MPI_Recv(&ack, 1, MPI_BYTE, peer, PP_TAG, comm,
                                              MPI_STATUS_IGNORE);
            rc = mpi_rc == MPI_SUCCESS ? 0 : PP_ERR_MPI;
        }
        double t1 = MPI_Wtime();
        if (rc) {
            break;
        }
        if (rank == 0 && i >= 0) {
            samples[i] = t1 - t0;
        }
        /* Untimed: check what arrived, post the next window's receives, then agree to go on. */
        if (receives) {
            corrupt += pp_check_slots(&b, nbytes, window, i);
            memset(b.slots, 0, nbytes * (size_t)window); /* a missing message stays visible */
            if (i + 1 < iters) {
                rc = pp_post_receives(&b, nbytes, window, peer, comm);
            }
        }
        if (!rc) {
            rc = MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, PP_TAG_READY, NULL, 0, MPI_BYTE, peer,
                              PP_TAG_READY, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS
                     ? 0
                     : PP_ERR_MPI;
        }
    }
    pp_window_free(&b);
    return rc ? rc : corrupt;
}
