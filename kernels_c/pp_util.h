/* Shared helpers for the ping-pong kernels: error codes, buffers, payload pattern, build info.
 *
 * Every kernel has the same shape:
 *
 *   int kernel(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples);
 *
 * It returns the number of corrupted messages seen by this rank (0 when every payload arrived
 * intact) or a negative PP_ERR_* code. samples[i] receives the round-trip time of timed
 * iteration i in seconds on ranks that start an exchange; other ranks write NaN there.
 *
 * The method (two buffers, stamped payload, untimed checks, "ready" message) is described once,
 * in docs/method.md.
 */
#ifndef PP_UTIL_H
#define PP_UTIL_H

#include <mpi.h>
#include <stddef.h>

/* Flags (bit mask). */
#define PP_SHARED_BUFFER 1 /* one buffer for send and receive (Durham style), not OSU's two */
#define PP_CORRUPT_ECHO 2  /* fault injection: the answering rank flips one byte of every reply */
/* Round trips per timed sample, in bits 8 and up (0 means 1). A sample is then the mean round
 * trip of a block of k back-to-back exchanges: used when one round trip is too short for the
 * timer's resolution. The payload changes from sample to sample and is checked after each. */
#define PP_BATCH_SHIFT 8
#define PP_FLAGS_BATCH(k) ((k) << PP_BATCH_SHIFT)
#define PP_BATCH_OF(flags) (((flags) >> PP_BATCH_SHIFT) > 0 ? ((flags) >> PP_BATCH_SHIFT) : 1)

/* Error codes (negative return values) and what each means, as Python reports it. */
#define PP_ERR_ARGS (-1)
#define PP_ERR_ARGS_TEXT "bad argument (negative size or count, or no sample buffer)"
#define PP_ERR_ODD_RANKS (-2)
#define PP_ERR_ODD_RANKS_TEXT                                                                   \
    "the pairwise exchange needs an even number of ranks (bottom half <-> top half)"
#define PP_ERR_NO_PEER (-3)
#define PP_ERR_NO_PEER_TEXT "a ping-pong needs at least 2 ranks"
#define PP_ERR_ALLOC (-4)
#define PP_ERR_ALLOC_TEXT "could not allocate the message buffers (message too large for memory?)"
#define PP_ERR_MPI (-5)
#define PP_ERR_MPI_TEXT "an MPI call failed (see the engine's stderr)"

/* Named constants. */
#define PP_TAG 17               /* message tag used by every kernel */
#define PP_TAG_READY 18         /* the answering rank's empty "checked, ready" message */
#define PP_CHUNK_BYTES ((size_t)1 << 30) /* MPI counts are int: longer messages go in pieces */
#define PP_STAMP_BYTES ((size_t)8)       /* bytes at each end of a payload that carry the iteration */
#define PP_PERIOD_BYTES ((size_t)1 << 16) /* the payload pattern repeats every 64 KiB */

/* Report a failing MPI call with file and line, and return PP_ERR_MPI from the caller. */
#define PP_MPI_CHECK(call)                                                                      \
    do {                                                                                       \
        int pp_rc_ = (call);                                                                   \
        if (pp_rc_ != MPI_SUCCESS) {                                                           \
            pp_report_mpi_error(__FILE__, __LINE__, #call, pp_rc_);                            \
            return PP_ERR_MPI;                                                                 \
        }                                                                                      \
    } while (0)

void pp_report_mpi_error(const char *file, int line, const char *what, int rc);

/* Page-aligned message buffers of exactly nbytes, reused across calls for the same size (all
 * the rounds of one size) and reallocated when the size changes, so the kind of memory (huge
 * pages from 4 MiB, as numpy) depends on the size only. Pages are touched on allocation, never
 * in a timed loop. The send buffer receives the payload's body. With PP_SHARED_BUFFER,
 * *recv_buf == *send_buf. Returns 0 or PP_ERR_ALLOC. */
int pp_buffers(size_t nbytes, int flags, unsigned char **send_buf, unsigned char **recv_buf);
void pp_free_buffers(void);

/* The pattern of iteration `iter`: every byte depends on its position and on the iteration,
 * so a stale (last iteration's), shifted or partial message never matches. It repeats every
 * PP_PERIOD_BYTES. */
void pp_fill(unsigned char *buf, size_t nbytes, long iter);
/* The kernels' payload of iteration `iter` is pattern 0 with its first and last
 * PP_STAMP_BYTES taken from pattern `iter`: pp_stamp writes those bytes, pp_stamped_ok
 * returns 1 when buf holds exactly that payload (it reads buf once). */
void pp_stamp(unsigned char *buf, size_t nbytes, long iter);
int pp_stamped_ok(const unsigned char *buf, size_t nbytes, long iter);

/* Blocking and non-blocking transfers of any size_t length (split into int-sized pieces). */
int pp_send(const void *buf, size_t nbytes, int peer, MPI_Comm comm);
int pp_recv(void *buf, size_t nbytes, int peer, MPI_Comm comm);
/* The starting rank's non-blocking exchange: receive posted before the send, both waited for. */
int pp_exchange_nonblocking(const void *send_buf, void *recv_buf, size_t nbytes, int peer,
                            MPI_Comm comm);

/* The round trip between `me` (who starts) and `peer` (who answers), shared by every kernel.
 * `starts` is 1 on the rank that sends first. `nonblocking` selects Isend/Irecv. */
int pp_run_pairs(MPI_Comm comm, int peer, int starts, int nonblocking, size_t nbytes, int warmup,
                 int iters, int flags, double *samples);

/* Ping-pong between ranks 0 (starts) and 1 (answers); other ranks idle. */
int pp_pingpong_ranks_0_1(MPI_Comm comm, int nonblocking, size_t nbytes, int warmup, int iters,
                          int flags, double *samples);

/* What this library was compiled against, for the loader's ABI preflight. The same text is
 * embedded in the binary as "PP_BUILD_INFO:...;" so it can be read without loading it. */
const char *pp_build_info(void);
/* This interface as Python needs it: flags, tags, error codes with their meaning and the
 * kernels by mode, as "PP_INTERFACE:NAME=value;...;END;", also embedded in the binary. Python
 * reads its constants from here (mpi/cinterface.py): this header is their only source. */
const char *pp_interface(void);
int pp_sizeof_comm(void);

/* Kernels. */
int pp_pingpong_blocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                         double *samples);
int pp_pingpong_nonblocking(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags,
                            double *samples);
int pp_pairwise(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples);
/* Windowed kernels (pp_window.c): the batch in `flags` is the window W, and samples[i] is rank
 * 0's time for window i (W messages and their acknowledgement; both directions for bibw). */
int pp_bw(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples);
int pp_bibw(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples);

/* The windowed exchange between ranks 0 and 1 (both = 0: bw, 1: bibw); other ranks idle. */
int pp_run_window(MPI_Comm comm, int both, size_t nbytes, int warmup, int iters, int flags,
                  double *samples);

#endif
