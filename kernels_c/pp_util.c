/* Helpers shared by the ping-pong kernels (see pp_util.h). */
#include "pp_util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pp_report_mpi_error(const char *file, int line, const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "error code %d", rc);
    }
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, text);
}

static unsigned char *pp_send_cache = NULL;
static unsigned char *pp_recv_cache = NULL;
static size_t pp_cache_bytes = 0;

void pp_free_buffers(void)
{
    free(pp_send_cache);
    free(pp_recv_cache);
    pp_send_cache = pp_recv_cache = NULL;
    pp_cache_bytes = 0;
}

int pp_buffers(size_t nbytes, int flags, unsigned char **send_buf, unsigned char **recv_buf)
{
    size_t need = nbytes > 0 ? nbytes : 1;
    if (need > pp_cache_bytes) {
        long page = sysconf(_SC_PAGESIZE);
        size_t align = page > 0 ? (size_t)page : 4096;
        void *s = NULL;
        void *r = NULL;
        pp_free_buffers();
        if (posix_memalign(&s, align, need) != 0) {
            return PP_ERR_ALLOC;
        }
        if (posix_memalign(&r, align, need) != 0) {
            free(s);
            return PP_ERR_ALLOC;
        }
        /* Touch every page now, so that no first-touch page fault lands in a timed loop. */
        memset(s, 0, need);
        memset(r, 0, need);
        pp_send_cache = s;
        pp_recv_cache = r;
        pp_cache_bytes = need;
    }
    *send_buf = pp_send_cache;
    *recv_buf = (flags & PP_SHARED_BUFFER) ? pp_send_cache : pp_recv_cache;
    return 0;
}

static unsigned char pp_pattern(size_t j, long iter)
{
    return (unsigned char)(j * 7u + (j >> 8) + (unsigned long)iter * 13u + 1u);
}

void pp_fill(unsigned char *buf, size_t nbytes, long iter)
{
    for (size_t j = 0; j < nbytes; j++) {
        buf[j] = pp_pattern(j, iter);
    }
}

int pp_check(const unsigned char *buf, size_t nbytes, long iter)
{
    for (size_t j = 0; j < nbytes; j++) {
        if (buf[j] != pp_pattern(j, iter)) {
            return 0;
        }
    }
    return 1;
}

static int pp_chunk(size_t remaining)
{
    return (int)(remaining < PP_CHUNK_BYTES ? remaining : PP_CHUNK_BYTES);
}

int pp_send(const void *buf, size_t nbytes, int peer, MPI_Comm comm)
{
    const char *p = buf;
    size_t done = 0;
    do {
        int n = pp_chunk(nbytes - done);
        PP_MPI_CHECK(MPI_Send(p + done, n, MPI_BYTE, peer, PP_TAG, comm));
        done += (size_t)n;
    } while (done < nbytes);
    return 0;
}

int pp_recv(void *buf, size_t nbytes, int peer, MPI_Comm comm)
{
    char *p = buf;
    size_t done = 0;
    do {
        int n = pp_chunk(nbytes - done);
        PP_MPI_CHECK(MPI_Recv(p + done, n, MPI_BYTE, peer, PP_TAG, comm, MPI_STATUS_IGNORE));
        done += (size_t)n;
    } while (done < nbytes);
    return 0;
}

/* One direction with Isend or Irecv and a wait, chunk by chunk. */
static int pp_isend_wait(const char *p, size_t nbytes, int peer, MPI_Comm comm)
{
    size_t done = 0;
    do {
        MPI_Request req;
        int n = pp_chunk(nbytes - done);
        PP_MPI_CHECK(MPI_Isend(p + done, n, MPI_BYTE, peer, PP_TAG, comm, &req));
        PP_MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        done += (size_t)n;
    } while (done < nbytes);
    return 0;
}

static int pp_irecv_wait(char *p, size_t nbytes, int peer, MPI_Comm comm)
{
    size_t done = 0;
    do {
        MPI_Request req;
        int n = pp_chunk(nbytes - done);
        PP_MPI_CHECK(MPI_Irecv(p + done, n, MPI_BYTE, peer, PP_TAG, comm, &req));
        PP_MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        done += (size_t)n;
    } while (done < nbytes);
    return 0;
}

int pp_exchange_nonblocking(const void *send_buf, void *recv_buf, size_t nbytes, int peer,
                            int send_first, MPI_Comm comm)
{
    int rc;
    if (!send_first) { /* the echo: the reply can only leave after the message arrived */
        rc = pp_irecv_wait(recv_buf, nbytes, peer, comm);
        return rc ? rc : pp_isend_wait(send_buf, nbytes, peer, comm);
    }
    if (send_buf == recv_buf || nbytes > PP_CHUNK_BYTES) {
        /* A buffer being sent must not be received into: one direction at a time. */
        rc = pp_isend_wait(send_buf, nbytes, peer, comm);
        return rc ? rc : pp_irecv_wait(recv_buf, nbytes, peer, comm);
    }
    MPI_Request reqs[2];
    PP_MPI_CHECK(MPI_Irecv(recv_buf, (int)nbytes, MPI_BYTE, peer, PP_TAG, comm, &reqs[0]));
    PP_MPI_CHECK(MPI_Isend(send_buf, (int)nbytes, MPI_BYTE, peer, PP_TAG, comm, &reqs[1]));
    PP_MPI_CHECK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    return 0;
}

int pp_run_pairs(MPI_Comm comm, int peer, int starts, int nonblocking, size_t nbytes, int warmup,
                 int iters, int flags, double *samples)
{
    unsigned char *sbuf = NULL;
    unsigned char *rbuf = NULL;
    int ok = warmup >= 0 && iters >= 0 && (samples != NULL || iters == 0) && flags >= 0;
    int all_ok = 0;
    int rc = 0;
    int corrupt = 0;

    /* Agree before communicating, so that one rank's bad argument or failed allocation is
     * an error on every rank and never a hang. */
    PP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    if (!all_ok) {
        return PP_ERR_ARGS;
    }
    ok = peer == MPI_PROC_NULL || pp_buffers(nbytes, flags, &sbuf, &rbuf) == 0;
    PP_MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm));
    if (!all_ok) {
        return PP_ERR_ALLOC;
    }

    const int batch = PP_BATCH_OF(flags);
    for (long i = -(long)warmup; i < iters; i++) {
        if (i == 0) {
            PP_MPI_CHECK(MPI_Barrier(comm)); /* synchronised start of the timed iterations */
        }
        if (peer == MPI_PROC_NULL) {
            if (i >= 0) {
                samples[i] = NAN;
            }
            continue;
        }
        if (starts) {
            pp_fill(sbuf, nbytes, i); /* outside the timed region */
            double t0 = MPI_Wtime();
            for (int k = 0; k < batch && !rc; k++) {
                if (nonblocking) {
                    rc = pp_exchange_nonblocking(sbuf, rbuf, nbytes, peer, 1, comm);
                } else {
                    rc = pp_send(sbuf, nbytes, peer, comm);
                    rc = rc ? rc : pp_recv(rbuf, nbytes, peer, comm);
                }
            }
            double t1 = MPI_Wtime();
            if (rc) {
                return rc;
            }
            if (!pp_check(rbuf, nbytes, i)) {
                corrupt++;
            }
            if (i >= 0) {
                samples[i] = (t1 - t0) / batch;
            }
        } else {
            for (int k = 0; k < batch; k++) {
                if (nonblocking) {
                    rc = pp_irecv_wait((char *)rbuf, nbytes, peer, comm);
                } else {
                    rc = pp_recv(rbuf, nbytes, peer, comm);
                }
                if (rc) {
                    return rc;
                }
                if ((flags & PP_CORRUPT_ECHO) && nbytes > 0 && k == batch - 1) {
                    rbuf[nbytes / 2] ^= 0xFF;
                }
                rc = nonblocking ? pp_isend_wait((char *)rbuf, nbytes, peer, comm)
                                 : pp_send(rbuf, nbytes, peer, comm);
                if (rc) {
                    return rc;
                }
            }
            if (i >= 0) {
                samples[i] = NAN;
            }
        }
    }
    return corrupt;
}

int pp_pingpong_ranks_0_1(MPI_Comm comm, int nonblocking, size_t nbytes, int warmup, int iters,
                          int flags, double *samples)
{
    int rank, size;
    PP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    PP_MPI_CHECK(MPI_Comm_size(comm, &size));
    if (size < 2) {
        return PP_ERR_NO_PEER;
    }
    int peer = rank == 0 ? 1 : rank == 1 ? 0 : MPI_PROC_NULL;
    return pp_run_pairs(comm, peer, rank == 0, nonblocking, nbytes, warmup, iters, flags, samples);
}
