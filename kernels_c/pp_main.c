/* Stand-alone driver: `mpiexec -n 2 ./pp_blocking [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-s]`
 * prints an OSU-like table of one-way times (half round trip, max across ranks).
 * Compiled once per kernel with -DPP_KERNEL=<function> -DPP_TITLE="<text>". The windowed
 * kernels add -DPP_DIRECTIONS=1 (bw) or 2 (bibw) and take [-w WINDOW]: their table holds the
 * time of a whole window (not halved) and the bandwidth it gives, in MB/s as OSU prints it. */
#include "pp_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PP_SMALL_LIMIT 8192 /* OSU's large-message threshold, bytes */
#define PP_ITERS_SMALL 10000
#define PP_ITERS_LARGE 1000
#define PP_WARMUP_SMALL 100
#define PP_WARMUP_LARGE 10
#define PP_DEFAULT_MAX ((size_t)4 << 20)
#define PP_DEFAULT_WINDOW 64 /* osu_bw's window */
#ifndef PP_DIRECTIONS
#define PP_DIRECTIONS 0 /* a ping-pong, not a windowed kernel */
#endif

int PP_KERNEL(MPI_Comm comm, size_t nbytes, int warmup, int iters, int flags, double *samples);

struct pp_options {
    size_t min_bytes, max_bytes;
    int iters, warmup, flags;
};

static int parse_size(const char *text, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end != '\0' || text[0] == '-') {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct pp_options *o)
{
    o->min_bytes = 0;
    o->max_bytes = PP_DEFAULT_MAX;
    o->iters = o->warmup = -1;
    o->flags = PP_DIRECTIONS ? PP_FLAGS_BATCH(PP_DEFAULT_WINDOW) : 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-s") == 0) {
            o->flags |= PP_SHARED_BUFFER;
        } else if (strcmp(a, "-m") == 0 && v) {
            char lo[32], hi[32];
            const char *colon = strchr(v, ':');
            if (!colon || (size_t)(colon - v) >= sizeof lo || strlen(colon + 1) >= sizeof hi) {
                return -1;
            }
            memcpy(lo, v, (size_t)(colon - v));
            lo[colon - v] = '\0';
            strcpy(hi, colon + 1);
            if (parse_size(lo, &o->min_bytes) || parse_size(hi, &o->max_bytes) ||
                o->min_bytes > o->max_bytes) {
                return -1;
            }
            i++;
        } else if (PP_DIRECTIONS && strcmp(a, "-w") == 0 && v) {
            size_t w;
            if (parse_size(v, &w) || w < 1 || w > 65536) {
                return -1;
            }
            o->flags = (o->flags & ((1 << PP_BATCH_SHIFT) - 1)) | PP_FLAGS_BATCH((int)w);
            i++;
        } else if ((strcmp(a, "-i") == 0 || strcmp(a, "-x") == 0) && v) {
            size_t n;
            if (parse_size(v, &n) || n > 100000000) {
                return -1;
            }
            *(a[1] == 'i' ? &o->iters : &o->warmup) = (int)n;
            i++;
        } else {
            return -1;
        }
    }
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_size(MPI_Comm comm, const struct pp_options *o, size_t nbytes, int rank)
{
    int iters = o->iters >= 0 ? o->iters : nbytes <= PP_SMALL_LIMIT ? PP_ITERS_SMALL : PP_ITERS_LARGE;
    int warmup = o->warmup >= 0 ? o->warmup
                                : nbytes <= PP_SMALL_LIMIT ? PP_WARMUP_SMALL : PP_WARMUP_LARGE;
    double *mine = malloc(sizeof(double) * (size_t)(iters > 0 ? iters : 1));
    double *worst = malloc(sizeof(double) * (size_t)(iters > 0 ? iters : 1));
    if (!mine || !worst) {
        fprintf(stderr, "out of memory for %d samples\n", iters);
        MPI_Abort(comm, 1);
    }
    int rc = PP_KERNEL(comm, nbytes, warmup, iters, o->flags, mine);
    int worst_rc = rc;
    MPI_Allreduce(&rc, &worst_rc, 1, MPI_INT, MPI_MAX, comm);
    int lowest_rc = rc;
    MPI_Allreduce(&rc, &lowest_rc, 1, MPI_INT, MPI_MIN, comm);
    if (lowest_rc < 0 || worst_rc > 0) {
        if (rank == 0) {
            fprintf(stderr, "%s at %zu bytes: %s (code %d)\n", PP_TITLE, nbytes,
                    lowest_rc < 0 ? "kernel error" : "corrupted message", lowest_rc < 0 ? lowest_rc : worst_rc);
        }
        free(mine);
        free(worst);
        return 1;
    }
    for (int i = 0; i < iters; i++) {
        if (isnan(mine[i])) {
            mine[i] = -1.0; /* this rank did not time iteration i */
        }
    }
    MPI_Reduce(mine, worst, iters, MPI_DOUBLE, MPI_MAX, 0, comm);
    if (rank == 0 && iters > 0) {
        double sum = 0.0;
        for (int i = 0; i < iters; i++) {
            worst[i] *= PP_DIRECTIONS ? 1.0 : 0.5; /* ping-pong: one way = half the round trip */
            sum += worst[i];
        }
        qsort(worst, (size_t)iters, sizeof(double), compare_doubles);
        double median = iters % 2 ? worst[iters / 2] : 0.5 * (worst[iters / 2 - 1] + worst[iters / 2]);
        printf("%-12zu %14.2f %14.2f %14.2f %10d", nbytes, 1e6 * sum / iters, 1e6 * median,
               1e6 * worst[0], iters);
        if (PP_DIRECTIONS) { /* bytes moved by one window over its median time */
            double moved = (double)PP_DIRECTIONS * PP_BATCH_OF(o->flags) * (double)nbytes;
            printf(" %14.2f", median > 0 ? moved / median / 1e6 : 0.0);
        }
        printf("\n");
        fflush(stdout);
    }
    free(mine);
    free(worst);
    return 0;
}

int main(int argc, char **argv)
{
    struct pp_options o;
    int rank, size, failed = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse_args(argc, argv, &o) != 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-s]%s\n", argv[0],
                    PP_DIRECTIONS ? " [-w WINDOW]" : "");
        }
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) {
        printf("# %s\n# %s\n# ranks: %d, buffers: %s\n", PP_TITLE, pp_build_info(), size,
               (o.flags & PP_SHARED_BUFFER) ? "one shared" : "separate send and receive");
        printf("# %-10s %14s %14s %14s %10s", "Size", "Avg(us)", "Median(us)", "Min(us)",
               "Iters");
        if (PP_DIRECTIONS) {
            printf(" %14s  (times per window of %d)", "MB/s", PP_BATCH_OF(o.flags));
        }
        printf("\n");
    }
    for (size_t n = o.min_bytes; n <= o.max_bytes && !failed; n = n ? 2 * n : 1) {
        failed = run_size(MPI_COMM_WORLD, &o, n, rank);
    }
    pp_free_buffers();
    MPI_Finalize();
    return failed;
}
