#include <stddef.h>

#define NOT_IMPLEMENTED (-99)

/* Weighted least squares y = alpha + beta * x; w weights the squared residuals (NULL: all 1).
 * Returns 0, or -1 when n < 2 or all x are equal. */
int linfit(int n, const double *x, const double *y, const double *w, double *alpha,
           double *beta)
{
    /* BEGIN SOLUTION */
    double sw = 0.0, sx = 0.0, sy = 0.0;
    for (int i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sw += wi;
        sx += wi * x[i];
        sy += wi * y[i];
    }
    if (n < 2 || sw <= 0.0)
        return -1;
    double xm = sx / sw, ym = sy / sw, sxx = 0.0, sxy = 0.0;
    for (int i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sxx += wi * (x[i] - xm) * (x[i] - xm);
        sxy += wi * (x[i] - xm) * (y[i] - ym);
    }
    if (sxx <= 0.0)
        return -1;
    *beta = sxy / sxx;
    *alpha = ym - *beta * xm;
    return 0;
    /* END SOLUTION */
}
