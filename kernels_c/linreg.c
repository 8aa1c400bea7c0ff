/*
 * linreg.c - the "C regression challenge": fit T(b) = alpha + beta*b to a sweep CSV.
 *
 * Build:  cc -O2 -Wall -Wextra -o linreg linreg.c -lm
 * Usage:  linreg [--column NAME] [--weighted] results.csv
 *
 * Reads the sweep CSV written by pingpong-lab (lines starting with '#' are comments, the first
 * other line is the header), takes the message size from the "nbytes" column and the time from
 * "t_median_s" (or NAME), and prints
 *
 *     alpha_s=<alpha> beta_s_per_byte=<beta>
 *
 * by least squares. --weighted minimises relative errors (weights 1/t^2 on the squared
 * residuals), like numpy.polyfit(b, t, 1, w=1/t). Sums are formed in two passes (means first,
 * then centred sums) with Neumaier compensated summation, so sizes spanning many decades do
 * not lose precision. Errors go to stderr as one line; the exit status is then 2.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 256

/* Print "linreg: error: ..." and exit with status 2. */
static void die(const char *fmt, ...)
{
    va_list ap;
    fputs("linreg: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

/* Compensated (Neumaier) running sum. */
typedef struct {
    double sum;
    double comp;
} ksum;

static void ksum_add(ksum *s, double x)
{
    double t = s->sum + x;
    if (fabs(s->sum) >= fabs(x))
        s->comp += (s->sum - t) + x;
    else
        s->comp += (x - t) + s->sum;
    s->sum = t;
}

static double ksum_value(const ksum *s) { return s->sum + s->comp; }

/* Strip trailing newline / carriage return and surrounding blanks in place. */
static char *trim(char *s)
{
    size_t n;
    while (*s == ' ' || *s == '\t')
        s++;
    n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* Split a line at commas in place; returns the number of fields. */
static int split(char *line, char **fields)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *comma = strchr(p, ',');
        if (n == MAX_FIELDS)
            return -1;
        if (comma)
            *comma = '\0';
        fields[n++] = trim(p);
        if (!comma)
            return n;
        p = comma + 1;
    }
}

static double parse_number(const char *path, const char *text, const char *column, long lineno)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        die("%s: malformed line %ld: %s='%s' is not a finite number", path, lineno, column, text);
    return v;
}

static int is_skipped(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line == '#' || *line == '\0' || *line == '\n' || *line == '\r';
}

int main(int argc, char **argv)
{
    const char *path = NULL, *column = "t_median_s";
    int weighted = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--weighted") == 0) {
            weighted = 1;
        } else if (strcmp(argv[i], "--column") == 0) {
            if (++i == argc)
                die("--column needs a column name");
            column = argv[i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: linreg [--column NAME] [--weighted] results.csv\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            die("unknown option '%s' (usage: linreg [--column NAME] [--weighted] FILE)", argv[i]);
        } else if (path) {
            die("more than one input file ('%s' and '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path)
        die("no input file (usage: linreg [--column NAME] [--weighted] FILE)");

    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot open '%s': %s", path, strerror(errno));

    char *line = NULL, *fields[MAX_FIELDS];
    size_t cap = 0, n = 0, alloc = 0;
    long lineno = 0;
    int nfields = 0, ix = -1, iy = -1;
    double *x = NULL, *y = NULL;

    while (getline(&line, &cap, f) != -1) {
        lineno++;
        if (is_skipped(line))
            continue;
        int k = split(line, fields);
        if (k < 0)
            die("line %ld: more than %d fields", lineno, MAX_FIELDS);
        if (nfields == 0) { /* header */
            nfields = k;
            for (int j = 0; j < k; j++) {
                if (strcmp(fields[j], "nbytes") == 0)
                    ix = j;
                if (strcmp(fields[j], column) == 0)
                    iy = j;
            }
            if (ix < 0)
                die("%s: no 'nbytes' column in the header (line %ld)", path, lineno);
            if (iy < 0)
                die("%s: no '%s' column in the header (line %ld)", path, column, lineno);
            continue;
        }
        if (k != nfields)
            die("%s: malformed line %ld: expected %d fields, got %d", path, lineno, nfields, k);
        if (n == alloc) {
            alloc = alloc ? 2 * alloc : 64;
            double *nx = realloc(x, alloc * sizeof *nx);
            if (!nx)
                die("out of memory");
            x = nx;
            double *ny = realloc(y, alloc * sizeof *ny);
            if (!ny)
                die("out of memory");
            y = ny;
        }
        x[n] = parse_number(path, fields[ix], "nbytes", lineno);
        y[n] = parse_number(path, fields[iy], column, lineno);
        if (x[n] <= 0)
            die("%s: line %ld: nbytes must be positive, got %g", path, lineno, x[n]);
        if (y[n] <= 0)
            die("%s: line %ld: %s must be positive, got %g", path, lineno, column, y[n]);
        n++;
    }
    if (ferror(f))
        die("%s: read error", path);
    fclose(f);
    free(line);
    if (nfields == 0)
        die("%s: empty (no header line)", path);
    if (n < 2)
        die("%s: %zu data row(s); a fit needs at least 2", path, n);

    /* Pass 1: weighted means. Weights 1/t^2 give relative-error least squares. */
    ksum sw = {0, 0}, swx = {0, 0}, swy = {0, 0};
    for (size_t i = 0; i < n; i++) {
        double w = weighted ? 1.0 / (y[i] * y[i]) : 1.0;
        ksum_add(&sw, w);
        ksum_add(&swx, w * x[i]);
        ksum_add(&swy, w * y[i]);
    }
    double xm = ksum_value(&swx) / ksum_value(&sw);
    double ym = ksum_value(&swy) / ksum_value(&sw);

    /* Pass 2: centred sums. */
    ksum sxx = {0, 0}, sxy = {0, 0};
    for (size_t i = 0; i < n; i++) {
        double w = weighted ? 1.0 / (y[i] * y[i]) : 1.0;
        double dx = x[i] - xm;
        ksum_add(&sxx, w * dx * dx);
        ksum_add(&sxy, w * dx * (y[i] - ym));
    }
    if (!(ksum_value(&sxx) > 0))
        die("%s: all message sizes are equal; need at least 2 distinct sizes", path);

    double beta = ksum_value(&sxy) / ksum_value(&sxx);
    double alpha = ym - beta * xm;
    printf("alpha_s=%.17g beta_s_per_byte=%.17g\n", alpha, beta);
    free(x);
    free(y);
    return 0;
}
