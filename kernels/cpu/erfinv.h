/*
 * erfinv.h - the inverse error function in float64, plain C (C and C++):
 * the CPU kernel's (unary.c) and the CUDA emulation's erfinv / erfinvf
 * (emu/include/cuda_runtime.h; the real device has CUDA's own).
 */
#ifndef ORDO_ERFINV_H
#define ORDO_ERFINV_H

#include <math.h>

/* erfinv: Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2010) as the start, then Halley steps on
 * erf(y) - a in double (erf' = 2/sqrt(pi) exp(-y^2)): accurate to float64
 * over (-1, 1).  -1 and 1 give -inf and inf, |a| > 1 and NaN give NaN, as
 * Torch; the sign is kept, so erfinv(-0.0) is -0.0. */
static inline double ordo_erfinv(double a) {
    if (!(fabs(a) < 1.0)) return fabs(a) == 1.0 ? copysign(INFINITY, a) : NAN;
    if (a == 0) return a;
    double w = -log((1.0 - a) * (1.0 + a)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    double y = p * a;
    if (fabs(a) <= 0.5) { /* Halley's steps on erf(y) = a (erf'' / erf' = -2y), cubic */
        for (int k = 0; k < 2; k++) {
            const double r = erf(y) - a, s = r / (1.1283791670955126 * exp(-y * y));
            y -= s / (1.0 + y * s);
        }
        return y;
    }
    /* The tails: erf(y) rounds to +-1 there and Giles' start is far out as
     * 1 - |a| nears 2^-53, so Newton on log(erfc(|y|)) = log(1 - |a|),
     * nearly linear in y^2 (1 - |a| is exact: Sterbenz; erfc(|y|) > 0 for
     * |y| < 26, far beyond the 5.9 of the least 1 - |a|). */
    const double t = 1.0 - fabs(a), lt = log(t);
    double z = fabs(y);
    for (int k = 0; k < 6; k++) {
        const double e = erfc(z), g = log(e) - lt;
        const double step = g * e / (1.1283791670955126 * exp(-z * z)); /* g / -g' */
        z += step;
        if (fabs(step) <= 1e-17 * z) break;
    }
    return copysign(z, a);
}

#endif
