/*
 * barrier: MPI_Barrier latency on communicators of 1, 2, 4, ... ranks and of
 * the whole world, plus the time MPI_Init took.  README.md documents the
 * options, the method and the JSON output.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define BARRIER_VERSION "1.1"
/* Per-call times are kept for the percentiles: 8 bytes per call. */
#define MAX_ITERS 10000000L

struct options {
    long warmup;
    long iters;
    int json;
};

static void usage(FILE *f)
{
    fputs("usage: barrier [--warmup N] [--iters N] [--json] [--help]\n"
          "\n"
          "MPI_Barrier latency on communicators of 1, 2, 4, ... ranks up to the world\n"
          "size, and of the world size itself; also the time MPI_Init took.\n"
          "\n"
          "  --warmup N   untimed barriers per communicator size, >= 0 (default 100)\n"
          "  --iters N    timed barriers per communicator size, >= 1 (default 1000)\n"
          "  --json       print one JSON document on stdout instead of a table\n"
          "  --help       print this help and exit\n"
          "\n"
          "Exit status: 0 success, 2 bad options.\n",
          f);
}

static int parse_options(int argc, char **argv, struct options *o, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    o->warmup = 100;
    o->iters = 1000;
    o->json = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, HH_OPTSTRING, longopts, NULL)) != -1) {
        int r = hh_run_option(c, MAX_ITERS, &o->warmup, &o->iters, &o->json, err, errlen);

        if (r < 0)
            return hh_getopt_error(c, argv, longopts, err, errlen);
        if (r != HH_PARSE_OK)
            return r;
    }
    return hh_no_operands(argc, argv, err, errlen);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The timed calls are cut into this many consecutive batches whose medians
 * are reported as samples: a verdict then compares distributions, and a
 * disturbance during part of the run shows as one odd batch. */
#define BATCHES 5

struct stats {
    int comm_size;
    double min, median, p90, max; /* microseconds */
    int nbatch;
    double batch[BATCHES];        /* median of each batch, microseconds */
};

static double median_sorted(const double *t, long n)
{
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Sorts t in place.  p90 is the nearest-rank percentile: the ceil(0.9 n)-th
 * smallest value, always one of the measured times. */
static void summarise(double *t, long n, struct stats *s)
{
    /* Batches first: sorting each slice in place keeps every value in it,
     * and the whole array is sorted afterwards anyway. */
    s->nbatch = n >= BATCHES ? BATCHES : 1;
    for (int b = 0; b < s->nbatch; b++) {
        long lo = n * b / s->nbatch, hi = n * (b + 1) / s->nbatch;

        qsort(t + lo, (size_t)(hi - lo), sizeof *t, cmp_double);
        s->batch[b] = median_sorted(t + lo, hi - lo) * 1e6;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s->min = t[0] * 1e6;
    s->max = t[n - 1] * 1e6;
    s->median = median_sorted(t, n) * 1e6;
    s->p90 = t[(9 * n + 9) / 10 - 1] * 1e6;
}

int main(int argc, char **argv)
{
    struct timespec before, after;
    struct options o;
    struct stats st[64];
    char err[256] = "";
    int rank, nranks, pr, nsizes = 0, alloc_failed, any_alloc_failed;
    double init_s, init_max = 0.0, wt0, first_s, first_max = 0.0, *t, *tmax;

    /* MPI_Wtime is not available before MPI_Init, hence a POSIX clock, read
     * as the first thing in main so the figure covers all of MPI_Init. */
    clock_gettime(CLOCK_REALTIME, &before);
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_REALTIME, &after);
    init_s = (double)(after.tv_sec - before.tv_sec) + 1e-9 * (double)(after.tv_nsec - before.tv_nsec);

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* The first collective after MPI_Init: many MPIs connect ranks lazily,
     * so this is where start-up cost that MPI_Init deferred shows. */
    wt0 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    first_s = MPI_Wtime() - wt0;

    pr = hh_options_exit(parse_options(argc, argv, &o, err, sizeof err), rank, "barrier", err, usage);
    if (pr >= 0) {
        MPI_Finalize();
        return pr;
    }

    MPI_Reduce(&init_s, &init_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&first_s, &first_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    t = malloc((size_t)o.iters * sizeof *t);
    tmax = malloc((size_t)o.iters * sizeof *tmax);
    alloc_failed = !t || !tmax;
    MPI_Allreduce(&alloc_failed, &any_alloc_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_alloc_failed) {
        if (alloc_failed)
            fprintf(stderr, "barrier: rank %d cannot allocate room for %ld timings\n", rank, o.iters);
        free(t);
        free(tmax);
        MPI_Finalize();
        return 1;
    }

    for (int size = 1;; size = (size <= nranks / 2) ? 2 * size : nranks) {
        MPI_Comm sub;

        /* Ranks 0..size-1 form the communicator; the others get
         * MPI_COMM_NULL and go straight to the world barrier below, so they
         * neither disturb nor are disturbed by the measurement. */
        MPI_Comm_split(MPI_COMM_WORLD, rank < size ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub != MPI_COMM_NULL) {
            for (long i = 0; i < o.warmup; i++)
                MPI_Barrier(sub);
            for (long i = 0; i < o.iters; i++) {
                double t0 = MPI_Wtime();
                MPI_Barrier(sub);
                t[i] = MPI_Wtime() - t0;
            }
            /* A barrier call is as slow as its slowest rank. */
            MPI_Reduce(t, tmax, (int)o.iters, MPI_DOUBLE, MPI_MAX, 0, sub);
            if (rank == 0) {
                st[nsizes].comm_size = size;
                summarise(tmax, o.iters, &st[nsizes]);
            }
            MPI_Comm_free(&sub);
        }
        nsizes++;
        MPI_Barrier(MPI_COMM_WORLD);
        if (size == nranks)
            break;
    }

    if (rank == 0) {
        if (o.json) {
            printf("{\"program\":\"barrier\",\"version\":\"%s\",\"ranks\":%d,\"warmup\":%ld,\"iters\":%ld,"
                   "\"mpi_init_s\":%.6f,\"first_barrier_s\":%.6f,\"results\":[\n",
                   BARRIER_VERSION, nranks, o.warmup, o.iters, init_max, first_max);
            for (int k = 0; k < nsizes; k++) {
                printf("{\"comm_size\":%d,\"time_us\":{\"min\":%.4f,\"median\":%.4f,\"p90\":%.4f,\"max\":%.4f},"
                       "\"batch_medians_us\":[",
                       st[k].comm_size, st[k].min, st[k].median, st[k].p90, st[k].max);
                for (int b = 0; b < st[k].nbatch; b++)
                    printf("%s%.4f", b ? "," : "", st[k].batch[b]);
                printf("]}%s\n", k == nsizes - 1 ? "" : ",");
            }
            printf("]}\n");
        } else {
            printf("# barrier %s: %d ranks, warmup %ld, iters %ld\n", BARRIER_VERSION, nranks, o.warmup, o.iters);
            printf("# MPI_Init: %.6f s (max over ranks of CLOCK_REALTIME just after MPI_Init minus just before)\n",
                   init_max);
            printf("# first MPI_Barrier after MPI_Init: %.6f s (max over ranks)\n", first_max);
            printf("# per-call time = max over ranks of one MPI_Barrier call, microseconds\n");
            printf("# %-10s %12s %12s %12s %12s\n", "comm_size", "min_us", "median_us", "p90_us", "max_us");
            for (int k = 0; k < nsizes; k++)
                printf("  %-10d %12.3f %12.3f %12.3f %12.3f\n", st[k].comm_size, st[k].min, st[k].median, st[k].p90,
                       st[k].max);
        }
        fflush(stdout);
    }

    free(t);
    free(tmax);
    MPI_Finalize();
    return 0;
}
