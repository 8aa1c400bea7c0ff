/* Course driver for a learner's linfit() (notebook 04's C regression challenge).
 *
 * Reads "n weighted" and then n lines "x y w" on stdin, calls
 *     int linfit(int n, const double *x, const double *y, const double *w,
 *                double *alpha, double *beta)
 * (w is NULL when unweighted) and prints "status alpha beta". The grader builds it with the
 * learner's linfit.c into a plain executable (no MPI) and runs it with a deadline, so a crash or
 * an endless loop fails the cell, not the notebook.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int linfit(int n, const double *x, const double *y, const double *w, double *alpha,
           double *beta);

int main(void)
{
    int n = 0, weighted = 0;
    if (scanf("%d %d", &n, &weighted) != 2 || n < 0)
        return 2;
    double *x = malloc((size_t)(n + 1) * sizeof *x);
    double *y = malloc((size_t)(n + 1) * sizeof *y);
    double *w = malloc((size_t)(n + 1) * sizeof *w);
    if (!x || !y || !w)
        return 3;
    for (int i = 0; i < n; i++)
        if (scanf("%lf %lf %lf", &x[i], &y[i], &w[i]) != 3)
            return 2;
    double alpha = NAN, beta = NAN;
    int status = linfit(n, x, y, weighted ? w : NULL, &alpha, &beta);
    printf("%d %.17g %.17g\n", status, alpha, beta);
    free(x);
    free(y);
    free(w);
    return 0;
}
