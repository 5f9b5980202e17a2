/*
 * Minimal STREAM-triad bandwidth probe, used only when no STREAM binary is
 * given: a[i] = b[i] + s * c[i] over arrays far larger than the caches,
 * best of REPS timed passes, counted as STREAM counts (3 x 8 bytes per
 * element).  Prints {"triad_mbs": X} on stdout.
 *
 *   triad [ELEMENTS] [REPS]        defaults 10000000 10, STREAM's defaults
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000L;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1000 || reps < 1) {
        fprintf(stderr, "usage: triad [ELEMENTS >= 1000] [REPS >= 1]\n");
        return 2;
    }
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "triad: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    const double s = 3.0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now();
        for (long i = 0; i < n; i++)
            a[i] = b[i] + s * c[i];
        t = now() - t;
        if (t < best)
            best = t;
    }
    /* a wrong result means the timed loop did not run as written */
    if (a[n / 2] != 7.0) {
        fprintf(stderr, "triad: validation failed (%g != 7)\n", a[n / 2]);
        return 1;
    }
    printf("{\"triad_mbs\": %.1f}\n", 3.0 * 8.0 * (double)n / best / 1e6);
    return 0;
}
