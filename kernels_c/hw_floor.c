/* Hardware floor for a shared-memory ping-pong, without MPI.
 *
 *   hw_floor [-i ITERS] [-r ROUNDS] [-m MIN:MAX] [-t SECONDS] [-l] [-b]
 *
 * Latency (-l, default on): two processes (fork) share one 64-byte cache line through an
 * anonymous MAP_SHARED mapping and bounce a counter: the parent writes 2k+1, the child answers
 * 2k+2. One-way latency = round trip / 2. The processes are pinned to two different allowed
 * CPUs when there are at least two; otherwise they share one and yield while spinning.
 * ROUNDS batches of ITERS round trips are timed; the median, minimum and mean one-way time of
 * the batches are printed.
 *
 * Bandwidth (-b, default on): single-core memcpy between two separate, touched, page-aligned
 * buffers for every power of two from MIN to MAX bytes, each size repeated for about SECONDS.
 * bandwidth = bytes / (time per copy) (each copy reads and writes that many bytes).
 *
 * Output: "key value ..." lines, easy to parse:
 *   cpus <allowed CPUs> pinned <0|1> cpu_parent <n> cpu_child <n>
 *   latency_oneway_s median <s> min <s> mean <s> rounds <n> iters <n>
 *   memcpy <bytes> <seconds per copy> <bytes per second> <copies>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define SPINS_BEFORE_YIELD 2000

struct shared_line {
    _Alignas(LINE) _Atomic uint64_t flag;
    char pad[LINE - sizeof(uint64_t)];
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_long(const char *text, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < 0) {
        return -1;
    }
    *out = v;
    return 0;
}

/* The first two CPUs this process may run on; returns how many CPUs are allowed. */
static int allowed_cpus(int *first, int *second)
{
    cpu_set_t set;
    int count = 0;
    *first = *second = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return 0;
    }
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            if (count == 0) {
                *first = c;
            } else if (count == 1) {
                *second = c;
            }
            count++;
        }
    }
    return count;
}

static void pin_to(int cpu)
{
    if (cpu < 0) {
        return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

static void wait_for(_Atomic uint64_t *flag, uint64_t value, int yield)
{
    long spins = 0;
    while (atomic_load_explicit(flag, memory_order_acquire) != value) {
        if (yield || ++spins >= SPINS_BEFORE_YIELD) {
            sched_yield(); /* sharing a core (or being preempted): let the other side run */
            spins = 0;
        }
    }
}

static int latency(long iters, long rounds)
{
    int cpu0, cpu1;
    int ncpus = allowed_cpus(&cpu0, &cpu1);
    int pinned = ncpus >= 2;
    struct shared_line *line = mmap(NULL, sizeof *line, PROT_READ | PROT_WRITE,
                                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (line == MAP_FAILED) {
        perror("hw_floor: mmap");
        return 1;
    }
    atomic_store(&line->flag, 0);
    uint64_t total = (uint64_t)(iters * (rounds + 1)); /* +1 round of warm-up */
    pid_t child = fork();
    if (child < 0) {
        perror("hw_floor: fork");
        munmap(line, sizeof *line);
        return 1;
    }
    if (child == 0) {
        if (pinned) {
            pin_to(cpu1);
        }
        for (uint64_t k = 0; k < total; k++) {
            wait_for(&line->flag, 2 * k + 1, !pinned);
            atomic_store_explicit(&line->flag, 2 * k + 2, memory_order_release);
        }
        _exit(0);
    }
    if (pinned) {
        pin_to(cpu0);
    }
    double *oneway = malloc(sizeof(double) * (size_t)(rounds > 0 ? rounds : 1));
    if (!oneway) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        munmap(line, sizeof *line);
        return 1;
    }
    uint64_t k = 0;
    for (long r = -1; r < rounds; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++, k++) {
            atomic_store_explicit(&line->flag, 2 * k + 1, memory_order_release);
            wait_for(&line->flag, 2 * k + 2, !pinned);
        }
        double t1 = now();
        if (r >= 0) {
            oneway[r] = (t1 - t0) / (double)iters / 2.0;
        }
    }
    int status = 0;
    waitpid(child, &status, 0);
    munmap(line, sizeof *line);
    double sum = 0.0;
    for (long r = 0; r < rounds; r++) {
        sum += oneway[r];
    }
    qsort(oneway, (size_t)rounds, sizeof(double), compare_doubles);
    double median = rounds % 2 ? oneway[rounds / 2] : 0.5 * (oneway[rounds / 2 - 1] + oneway[rounds / 2]);
    printf("cpus %d pinned %d cpu_parent %d cpu_child %d\n", ncpus, pinned, pinned ? cpu0 : -1,
           pinned ? cpu1 : -1);
    printf("latency_oneway_s median %.6e min %.6e mean %.6e rounds %ld iters %ld\n", median,
           oneway[0], sum / (double)rounds, rounds, iters);
    free(oneway);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int bandwidth(size_t min_bytes, size_t max_bytes, double seconds)
{
    /* through a volatile pointer, so that no copy is optimised away */
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;
    void *src = NULL, *dst = NULL;
    size_t cap = max_bytes ? max_bytes : 1;
    if (posix_memalign(&src, 4096, cap) || posix_memalign(&dst, 4096, cap)) {
        fprintf(stderr, "hw_floor: cannot allocate 2 x %zu bytes\n", cap);
        free(src);
        return 1;
    }
    memset(src, 1, cap);
    memset(dst, 2, cap);
    for (size_t n = min_bytes ? min_bytes : 1; n <= max_bytes; n *= 2) {
        copy(dst, src, n); /* warm-up */
        long reps = 1;
        double t = 0.0;
        for (;;) { /* grow the repetitions until one batch takes a tenth of the budget */
            double t0 = now();
            for (long i = 0; i < reps; i++) {
                copy(dst, src, n);
            }
            t = now() - t0;
            if (t >= seconds / 10.0 || reps >= (1L << 30)) {
                break;
            }
            reps *= 2;
        }
        double best = t / (double)reps;
        long copies = reps;
        for (int b = 0; b < 9; b++) { /* best of 10 batches: the floor, not the typical */
            double t0 = now();
            for (long i = 0; i < reps; i++) {
                copy(dst, src, n);
            }
            double per = (now() - t0) / (double)reps;
            copies += reps;
            if (per < best) {
                best = per;
            }
        }
        printf("memcpy %zu %.6e %.6e %ld\n", n, best, (double)n / best, copies);
        fflush(stdout);
        if (n > max_bytes / 2) {
            break;
        }
    }
    free(src);
    free(dst);
    return 0;
}

int main(int argc, char **argv)
{
    long iters = 100000, rounds = 11;
    size_t min_bytes = 1, max_bytes = (size_t)16 << 20;
    double seconds = 0.05;
    int want_latency = 0, want_bandwidth = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (strcmp(a, "-l") == 0) {
            want_latency = 1;
        } else if (strcmp(a, "-b") == 0) {
            want_bandwidth = 1;
        } else if ((strcmp(a, "-i") == 0 || strcmp(a, "-r") == 0) && v && !parse_long(v, &n) &&
                   n > 0) {
            *(a[1] == 'i' ? &iters : &rounds) = n;
            i++;
        } else if (strcmp(a, "-t") == 0 && v && (seconds = strtod(v, NULL)) > 0) {
            i++;
        } else if (strcmp(a, "-m") == 0 && v) {
            long lo, hi;
            const char *colon = strchr(v, ':');
            char head[32];
            if (!colon || (size_t)(colon - v) >= sizeof head) {
                goto usage;
            }
            memcpy(head, v, (size_t)(colon - v));
            head[colon - v] = '\0';
            if (parse_long(head, &lo) || parse_long(colon + 1, &hi) || lo < 1 || hi < lo) {
                goto usage;
            }
            min_bytes = (size_t)lo;
            max_bytes = (size_t)hi;
            i++;
        } else {
            goto usage;
        }
    }
    if (!want_latency && !want_bandwidth) {
        want_latency = want_bandwidth = 1;
    }
    int rc = 0;
    if (want_latency) {
        rc |= latency(iters, rounds);
    }
    if (want_bandwidth) {
        rc |= bandwidth(min_bytes, max_bytes, seconds);
    }
    return rc;
usage:
    fprintf(stderr, "usage: %s [-i ITERS] [-r ROUNDS] [-m MIN:MAX] [-t SECONDS] [-l] [-b]\n",
            argv[0]);
    return 2;
}
