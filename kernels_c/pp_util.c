/* Helpers shared by the ping-pong kernels (see pp_util.h). */
#include "pp_util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* numpy asks Linux for transparent huge pages on arrays of 4 MiB and more; the C buffers do the
 * same, so that C and Python kernels (and mpi4py.bench) move data between the same kind of
 * memory. Huge pages mean fewer TLB misses and fewer pages for MPI to pin per message. */
#define PP_HUGE_BYTES ((size_t)4 << 20)
#define PP_HUGE_ALIGN ((size_t)2 << 20)

void pp_report_mpi_error(const char *file, int line, const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
        snprintf(text, sizeof text, "error code %d", rc);
    }
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, text);
}

/* Two reused page-aligned buffers: send and receive (one buffer with PP_SHARED_BUFFER). */
static unsigned char *pp_cache[2] = {NULL, NULL};
static size_t pp_cache_bytes = 0;

void pp_free_buffers(void)
{
    for (int b = 0; b < 2; b++) {
        free(pp_cache[b]);
        pp_cache[b] = NULL;
    }
    pp_cache_bytes = 0;
}

int pp_buffers(size_t nbytes, int flags, unsigned char **send_buf, unsigned char **recv_buf)
{
    size_t need = nbytes > 0 ? nbytes : 1;
    /* Exactly the size asked for, as mpi4py.bench allocates: a 1 MiB message must not sit in
     * the head of a 16 MiB buffer left by an earlier size, whose huge pages would make it
     * faster than in a fresh process (the history of a process would change its timings). */
    if (need != pp_cache_bytes) {
        long page = sysconf(_SC_PAGESIZE);
        size_t align = need >= PP_HUGE_BYTES ? PP_HUGE_ALIGN : page > 0 ? (size_t)page : 4096;
        pp_free_buffers();
        for (int b = 0; b < 2; b++) {
            void *p = NULL;
            if (posix_memalign(&p, align, need) != 0) {
                pp_free_buffers();
                return PP_ERR_ALLOC;
            }
#ifdef MADV_HUGEPAGE
            if (need >= PP_HUGE_BYTES) {
                (void)madvise(p, need, MADV_HUGEPAGE); /* a hint: refused is fine */
            }
#endif
            /* Touch every page now, so that no first-touch page fault lands in a timed loop. */
            memset(p, 0, need);
            pp_cache[b] = p;
        }
        pp_cache_bytes = need;
    }
    *send_buf = pp_cache[0];
    *recv_buf = (flags & PP_SHARED_BUFFER) ? pp_cache[0] : pp_cache[1];
    pp_fill(*send_buf, nbytes, 0); /* the body of every payload, written once per call */
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

/* The first and last byte positions of the stamp at the end of a message of nbytes. */
static size_t pp_tail(size_t nbytes)
{
    return nbytes > PP_STAMP_BYTES ? nbytes - PP_STAMP_BYTES : 0;
}

void pp_stamp(unsigned char *buf, size_t nbytes, long iter)
{
    for (size_t j = 0; j < nbytes && j < PP_STAMP_BYTES; j++) {
        buf[j] = pp_pattern(j, iter);
    }
    for (size_t j = pp_tail(nbytes); j < nbytes; j++) {
        buf[j] = pp_pattern(j, iter);
    }
}

/* Two periods of the body's pattern: any window of up to one period is contiguous here. */
static unsigned char pp_period[2 * PP_PERIOD_BYTES];
static int pp_period_ready = 0;

int pp_stamped_ok(const unsigned char *buf, size_t nbytes, long iter)
{
    size_t head = nbytes < PP_STAMP_BYTES ? nbytes : PP_STAMP_BYTES;
    size_t tail = pp_tail(nbytes);
    for (size_t j = 0; j < head; j++) {
        if (buf[j] != pp_pattern(j, iter)) {
            return 0;
        }
    }
    for (size_t j = tail; j < nbytes; j++) {
        if (buf[j] != pp_pattern(j, iter)) {
            return 0;
        }
    }
    if (!pp_period_ready) {
        pp_fill(pp_period, sizeof pp_period, 0);
        pp_period_ready = 1;
    }
    /* The body against the pattern's period: the message is read once, nothing else. */
    for (size_t j = head; j < tail;) {
        size_t len = tail - j < PP_PERIOD_BYTES ? tail - j : PP_PERIOD_BYTES;
        if (memcmp(buf + j, pp_period + j % PP_PERIOD_BYTES, len) != 0) {
            return 0;
        }
        j += len;
    }
    return 1;
}

static int pp_chunk(size_t remaining)
{
    return (int)(remaining < PP_CHUNK_BYTES ? remaining : PP_CHUNK_BYTES);
}

/* One direction, chunk by chunk (MPI counts are ints): a send or a receive, blocking or as
 * Isend/Irecv completed by a Wait. */
static int pp_one_way(void *buf, size_t nbytes, int peer, int sending, int nonblocking,
                      MPI_Comm comm)
{
    char *p = buf;
    size_t done = 0;
    do {
        MPI_Request req;
        int n = pp_chunk(nbytes - done);
        if (sending && nonblocking) {
            PP_MPI_CHECK(MPI_Isend(p + done, n, MPI_BYTE, peer, PP_TAG, comm, &req));
        } else if (sending) {
            PP_MPI_CHECK(MPI_Send(p + done, n, MPI_BYTE, peer, PP_TAG, comm));
        } else if (nonblocking) {
            PP_MPI_CHECK(MPI_Irecv(p + done, n, MPI_BYTE, peer, PP_TAG, comm, &req));
        } else {
            PP_MPI_CHECK(MPI_Recv(p + done, n, MPI_BYTE, peer, PP_TAG, comm, MPI_STATUS_IGNORE));
        }
        if (nonblocking) {
            PP_MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        }
        done += (size_t)n;
    } while (done < nbytes);
    return 0;
}

int pp_send(const void *buf, size_t nbytes, int peer, MPI_Comm comm)
{
    return pp_one_way((void *)buf, nbytes, peer, 1, 0, comm);
}

int pp_recv(void *buf, size_t nbytes, int peer, MPI_Comm comm)
{
    return pp_one_way(buf, nbytes, peer, 0, 0, comm);
}

int pp_exchange_nonblocking(const void *send_buf, void *recv_buf, size_t nbytes, int peer,
                            MPI_Comm comm)
{
    int rc;
    if (send_buf == recv_buf || nbytes > PP_CHUNK_BYTES) {
        /* A buffer being sent must not be received into: one direction at a time. */
        rc = pp_one_way((void *)send_buf, nbytes, peer, 1, 1, comm);
        return rc ? rc : pp_one_way(recv_buf, nbytes, peer, 0, 1, comm);
    }
    MPI_Request reqs[2];
    MPI_Status statuses[2]; /* not MPI_STATUSES_IGNORE: some GCCs misread it as a 0-byte array */
    PP_MPI_CHECK(MPI_Irecv(recv_buf, (int)nbytes, MPI_BYTE, peer, PP_TAG, comm, &reqs[0]));
    PP_MPI_CHECK(MPI_Isend(send_buf, (int)nbytes, MPI_BYTE, peer, PP_TAG, comm, &reqs[1]));
    PP_MPI_CHECK(MPI_Waitall(2, reqs, statuses));
    return 0;
}

/* One round trip (or a batch of them) seen from the rank that starts it. */
static int pp_start(const unsigned char *sbuf, unsigned char *rbuf, size_t nbytes, int peer,
                    int nonblocking, int batch, MPI_Comm comm)
{
    int rc = 0;
    for (int k = 0; k < batch && !rc; k++) {
        if (nonblocking) {
            rc = pp_exchange_nonblocking(sbuf, rbuf, nbytes, peer, comm);
        } else {
            rc = pp_send(sbuf, nbytes, peer, comm);
            rc = rc ? rc : pp_recv(rbuf, nbytes, peer, comm);
        }
    }
    return rc;
}

/* The same round trips seen from the rank that answers: receive into rbuf, reply from sbuf
 * (the same buffer in shared mode). `corrupt` flips one byte of the batch's last reply. */
static int pp_answer(unsigned char *sbuf, unsigned char *rbuf, size_t nbytes, int peer,
                     int nonblocking, int batch, int corrupt, MPI_Comm comm)
{
    int rc = 0;
    for (int k = 0; k < batch && !rc; k++) {
        int flip = corrupt && k == batch - 1;
        rc = pp_one_way(rbuf, nbytes, peer, 0, nonblocking, comm);
        if (rc) {
            break;
        }
        if (flip) {
            sbuf[nbytes / 2] ^= 0xFF;
        }
        rc = pp_one_way(sbuf, nbytes, peer, 1, nonblocking, comm);
        if (flip && sbuf != rbuf) {
            sbuf[nbytes / 2] ^= 0xFF; /* its own copy of the payload stays intact */
        }
    }
    return rc;
}

int pp_run_pairs(MPI_Comm comm, int peer, int starts, int nonblocking, size_t nbytes, int warmup,
                 int iters, int flags, double *samples)
{
    unsigned char *sbuf = NULL;
    unsigned char *rbuf = NULL;
    int ok = warmup >= 0 && iters >= 0 && (samples != NULL || iters == 0) && flags >= 0;
    int all_ok = 0;
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
    const int shared = (flags & PP_SHARED_BUFFER) != 0;
    const int corrupting = (flags & PP_CORRUPT_ECHO) != 0 && nbytes > 0 && !starts;
    if (peer != MPI_PROC_NULL && !starts) {
        pp_stamp(sbuf, nbytes, -(long)warmup); /* the first reply */
    }
    for (long i = -(long)warmup; i < iters; i++) {
        if (i == 0) {
            PP_MPI_CHECK(MPI_Barrier(comm)); /* synchronised start of the timed iterations */
        }
        if (i >= 0) {
            samples[i] = NAN; /* overwritten below on the rank that times */
        }
        if (peer == MPI_PROC_NULL) {
            continue;
        }
        if (starts) {
            pp_stamp(sbuf, nbytes, i); /* outside the timed region: 16 bytes */
            double t0 = MPI_Wtime();
            int rc = pp_start(sbuf, rbuf, nbytes, peer, nonblocking, batch, comm);
            double t1 = MPI_Wtime();
            if (rc) {
                return rc;
            }
            if (!pp_stamped_ok(rbuf, nbytes, i)) { /* outside the timed region */
                corrupt++;
                if (shared) { /* the corrupted reply is the next message's body: rewrite it */
                    pp_fill(sbuf, nbytes, 0);
                }
            }
            if (!shared) { /* wait until the answering rank has checked too (see below) */
                PP_MPI_CHECK(MPI_Recv(NULL, 0, MPI_BYTE, peer, PP_TAG_READY, comm,
                                      MPI_STATUS_IGNORE));
            }
            if (i >= 0) {
                samples[i] = (t1 - t0) / batch;
            }
            continue;
        }
        /* Answering rank. Separate buffers (OSU): reply from its own buffer, then check what
         * arrived, stamp the next reply and send an empty "ready" message: the starter waits
         * for it before starting its clock again, so none of this is timed. Shared buffer:
         * send back the very bytes received (the starter checks both directions at once). */
        int rc = pp_answer(shared ? rbuf : sbuf, rbuf, nbytes, peer, nonblocking, batch,
                           corrupting, comm);
        if (rc) {
            return rc;
        }
        if (!shared) {
            corrupt += !pp_stamped_ok(rbuf, nbytes, i);
            pp_stamp(sbuf, nbytes, i + 1);
            PP_MPI_CHECK(MPI_Send(NULL, 0, MPI_BYTE, peer, PP_TAG_READY, comm));
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
