/*
 * halo: nearest-neighbour (halo) exchange on a periodic Cartesian process
 * grid of 1, 2 or 3 dimensions, timed for five exchange strategies and
 * verified byte by byte.  README.md documents the options, the method and
 * the JSON output; the comments here explain the design choices.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

#define HALO_VERSION "1.0"
#define MAX_DIMS 3
#define MAX_SIDES (2 * MAX_DIMS)
#define MAX_SIZES 64
#define MAX_SAMPLES 64
/* MPI counts are ints; 1 GiB keeps every count well inside that. */
#define MAX_SIZE_BYTES (1L << 30)
#define MAX_ITERS 100000000L
/* A broken link can corrupt every message; a few lines per rank are enough
 * to diagnose it without flooding the job's error file. */
#define MAX_REPORTS_PER_RANK 8

enum { BSBR, SERE, ISBR, ISIR, IRIS, NSTRATEGIES };
static const char *const strategy_name[NSTRATEGIES] = {"BSBR", "SERE", "ISBR", "ISIR", "IRIS"};

/* Side j of a rank: dimension j/2, j even = towards lower coordinates. */
static const char *const side_name[MAX_SIDES] = {"-x", "+x", "-y", "+y", "-z", "+z"};

/* 8 * 4^k for k = 0..8 (8 B .. 512 KiB), then 1 MiB so that the sweep ends
 * at the size the issue asks for. */
static const long default_sizes[] = {8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288, 1048576};

struct options {
    int dims;
    int nstrategies;
    int strategy[NSTRATEGIES];
    int nsizes;
    long size[MAX_SIZES];
    long warmup;
    long iters;
    long samples;
    int json;
    int corrupt_rank; /* -1: no corruption */
};

static void usage(FILE *f)
{
    fputs("usage: halo [--dims N] [--strategy LIST|all] [--sizes LIST] [--warmup N]\n"
          "            [--iters N] [--samples K] [--json] [--corrupt-one-byte[=RANK]] [--help]\n"
          "\n"
          "Nearest-neighbour exchange on a periodic Cartesian grid of all ranks; every\n"
          "rank exchanges one message with each of its 2*N neighbours per exchange.\n"
          "\n"
          "  --dims N          grid dimensions, 1..3 (default 1)\n"
          "  --strategy LIST   comma-separated BSBR,SERE,ISBR,ISIR,IRIS, or all (default all)\n"
          "  --sizes LIST      comma-separated message sizes in bytes, each 1..1073741824\n"
          "                    (default 8,32,128,512,2048,8192,32768,131072,524288,1048576)\n"
          "  --warmup N        untimed exchanges per strategy and size, >= 0 (default 10)\n"
          "  --iters N         timed exchanges per strategy and size, >= 1 (default 100)\n"
          "  --samples K       repeat warm-up and timed exchanges K times, 1..64 (default 1);\n"
          "                    the JSON holds one max-over-ranks time per repetition\n"
          "  --json            print one JSON document on stdout instead of a table\n"
          "  --corrupt-one-byte[=RANK]\n"
          "                    TEST ONLY: flip one received byte on RANK (default 0) in the\n"
          "                    first timed exchange, so that verification must fail\n"
          "  --help            print this help and exit\n"
          "\n"
          "Exit status: 0 all messages verified, 1 verification failed, 2 bad options.\n",
          f);
}

static int parse_strategies(const char *s, struct options *o, char *err, size_t errlen)
{
    o->nstrategies = 0;
    if (strcasecmp(s, "all") == 0) {
        for (int k = 0; k < NSTRATEGIES; k++)
            o->strategy[o->nstrategies++] = k;
        return 0;
    }
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;

        for (int k = 0; k < NSTRATEGIES; k++)
            if (len == strlen(strategy_name[k]) && strncasecmp(p, strategy_name[k], len) == 0)
                found = k;
        if (found < 0) {
            snprintf(err, errlen, "--strategy: unknown strategy '%.*s' (known: BSBR, SERE, ISBR, ISIR, IRIS, all)",
                     (int)(len > 40 ? 40 : len), p);
            return -1;
        }
        for (int k = 0; k < o->nstrategies; k++)
            if (o->strategy[k] == found) {
                snprintf(err, errlen, "--strategy: %s given twice", strategy_name[found]);
                return -1;
            }
        o->strategy[o->nstrategies++] = found;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int parse_sizes(const char *s, struct options *o, char *err, size_t errlen)
{
    o->nsizes = 0;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        long v;

        if (len >= sizeof item) {
            snprintf(err, errlen, "--sizes: '%.20s...' is not a size in bytes", p);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (hh_parse_long(item, 1, MAX_SIZE_BYTES, &v) != 0) {
            snprintf(err, errlen, "--sizes: expected sizes in bytes in 1..%ld, got '%s'", MAX_SIZE_BYTES, item);
            return -1;
        }
        for (int k = 0; k < o->nsizes; k++)
            if (o->size[k] == v) {
                snprintf(err, errlen, "--sizes: %ld given twice", v);
                return -1;
            }
        if (o->nsizes == MAX_SIZES) {
            snprintf(err, errlen, "--sizes: at most %d sizes", MAX_SIZES);
            return -1;
        }
        o->size[o->nsizes++] = v;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int parse_options(int argc, char **argv, int nranks, struct options *o, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"dims", required_argument, NULL, 'd'},
        {"strategy", required_argument, NULL, 's'},
        {"sizes", required_argument, NULL, 'z'},
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'i'},
        {"samples", required_argument, NULL, 'k'},
        {"json", no_argument, NULL, 'j'},
        /* the value only as --corrupt-one-byte=RANK: a bare number after
         * the flag would otherwise be ambiguous */
        {"corrupt-one-byte", optional_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long n;
    int c, r;

    memset(o, 0, sizeof *o);
    o->dims = 1;
    for (int k = 0; k < NSTRATEGIES; k++)
        o->strategy[o->nstrategies++] = k;
    for (size_t k = 0; k < sizeof default_sizes / sizeof default_sizes[0]; k++)
        o->size[o->nsizes++] = default_sizes[k];
    o->warmup = 10;
    o->iters = 100;
    o->samples = 1;
    o->corrupt_rank = -1;

    opterr = 0;
    while ((c = getopt_long(argc, argv, HH_OPTSTRING, longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            n = 0;
            if (optarg && hh_parse_long(optarg, 0, nranks - 1, &n) != 0) {
                snprintf(err, errlen, "--corrupt-one-byte: expected a rank in 0..%d, got '%s'",
                         nranks - 1, optarg);
                return HH_PARSE_ERROR;
            }
            o->corrupt_rank = (int)n;
            break;
        case 'd':
            if (hh_long_arg("--dims", optarg, 1, MAX_DIMS, &n, err, errlen) != 0)
                return HH_PARSE_ERROR;
            o->dims = (int)n;
            break;
        case 'k':
            if (hh_long_arg("--samples", optarg, 1, MAX_SAMPLES, &o->samples, err, errlen) != 0)
                return HH_PARSE_ERROR;
            break;
        case 's':
            if (parse_strategies(optarg, o, err, errlen) != 0)
                return HH_PARSE_ERROR;
            break;
        case 'z':
            if (parse_sizes(optarg, o, err, errlen) != 0)
                return HH_PARSE_ERROR;
            break;
        default:
            r = hh_run_option(c, MAX_ITERS, &o->warmup, &o->iters, &o->json, err, errlen);
            if (r < 0)
                return hh_getopt_error(c, argv, longopts, err, errlen);
            if (r != HH_PARSE_OK)
                return r;
        }
    }
    return hh_no_operands(argc, argv, err, errlen);
}

/* ---- payload pattern ---------------------------------------------------- */

/* A 64-bit finaliser (multiply/xorshift): cheap enough to fill and check
 * 1 MiB messages every exchange, and any change in rank, side, exchange
 * number or offset changes the bytes, so misrouted, stale or reordered
 * messages are caught as well as damaged ones. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= UINT64_C(0xbf58476d1ce4e5b9);
    z ^= z >> 27;
    z *= UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return z;
}

static uint64_t message_seed(int src, int side, uint64_t exchange)
{
    return mix64(mix64(mix64((uint64_t)src + 1) ^ (uint64_t)side) + exchange);
}

static uint64_t pattern_word(uint64_t seed, size_t w)
{
    return mix64(seed + (uint64_t)w * UINT64_C(0x9e3779b97f4a7c15));
}

/* Byte order is fixed (least significant first) so the pattern does not
 * depend on the host; compilers turn these loops into plain loads/stores. */
static void store_le64(unsigned char *p, uint64_t x)
{
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)(x >> (8 * k));
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int k = 7; k >= 0; k--)
        x = (x << 8) | p[k];
    return x;
}

static unsigned char expected_byte(uint64_t seed, size_t off)
{
    return (unsigned char)(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

static void fill_pattern(unsigned char *b, size_t n, uint64_t seed)
{
    size_t nw = n / 8;

    for (size_t w = 0; w < nw; w++)
        store_le64(b + 8 * w, pattern_word(seed, w));
    for (size_t off = 8 * nw; off < n; off++)
        b[off] = expected_byte(seed, off);
}

/* Offset of the first wrong byte, or -1. */
static long first_mismatch(const unsigned char *b, size_t n, uint64_t seed)
{
    size_t nw = n / 8;

    for (size_t w = 0; w < nw; w++)
        if (load_le64(b + 8 * w) != pattern_word(seed, w))
            for (size_t off = 8 * w;; off++)
                if (b[off] != expected_byte(seed, off))
                    return (long)off;
    for (size_t off = 8 * nw; off < n; off++)
        if (b[off] != expected_byte(seed, off))
            return (long)off;
    return -1;
}

/* ---- the grid and the five strategies ----------------------------------- */

struct grid {
    MPI_Comm comm;
    int rank, ndims, nsides;
    int extent[MAX_DIMS], coord[MAX_DIMS];
    int nbr[MAX_SIDES];
    unsigned char *sbuf[MAX_SIDES], *rbuf[MAX_SIDES];
    MPI_Request req[2 * MAX_SIDES];
};

/*
 * Tags: the message a rank sends to its side j carries tag j, so it arrives
 * on the receiver's side j^1 with tag j.  On a periodic dimension of extent
 * 2 both neighbours are the same rank, and with extent 1 both are the rank
 * itself; the two messages of a dimension are still told apart by the tag.
 */

enum { IDLE, SEND, RECV };

/*
 * BSBR schedule for one flow along a ring of n >= 2 ranks, where position p
 * sends to p+1 and receives from p-1 (mod n).  Each phase pairs disjoint
 * (sender, receiver) couples and every rank has at most one operation per
 * phase; all ranks walk the phases in the same order.  So every blocking
 * call of a phase is matched by its partner's call of the same phase, which
 * can only be waiting for calls of earlier phases: by induction on the phase
 * nothing deadlocks, whatever the MPI library's eager limit.
 *
 * Even n: even positions send to odd ones, then odd to even.  Plain parity
 * does not work for odd n, because positions n-1 and 0 are both even and the
 * wrap-around edge joins two senders; there a third phase carries only that
 * edge:
 *   phase 0: even p < n-1 send, odd p receive
 *   phase 1: odd p send, even p > 0 receive
 *   phase 2: p = n-1 sends to p = 0
 */
static int bsbr_role(int p, int n, int phase)
{
    if (n % 2 == 0) {
        if (phase == 0)
            return p % 2 == 0 ? SEND : RECV;
        return p % 2 == 1 ? SEND : RECV;
    }
    switch (phase) {
    case 0:
        return p % 2 == 1 ? RECV : (p < n - 1 ? SEND : IDLE);
    case 1:
        return p % 2 == 1 ? SEND : (p > 0 ? RECV : IDLE);
    default:
        return p == n - 1 ? SEND : (p == 0 ? RECV : IDLE);
    }
}

static void exchange_bsbr(struct grid *g, int size)
{
    for (int k = 0; k < g->ndims; k++) {
        int n = g->extent[k];

        /* flow 1 sends towards +, flow 0 towards -; both flows run the
         * same schedule with positions counted along the flow. */
        for (int flow = 1; flow >= 0; flow--) {
            int to = 2 * k + flow, from = to ^ 1;
            int p = flow ? g->coord[k] : n - 1 - g->coord[k];

            if (n == 1) {
                /* The only partner is this rank: a blocking send to self
                 * would wait for a receive that is never reached. */
                MPI_Sendrecv(g->sbuf[to], size, MPI_BYTE, g->nbr[to], to, g->rbuf[from], size, MPI_BYTE,
                             g->nbr[from], to, g->comm, MPI_STATUS_IGNORE);
                continue;
            }
            for (int phase = 0; phase < (n % 2 ? 3 : 2); phase++) {
                switch (bsbr_role(p, n, phase)) {
                case SEND:
                    MPI_Send(g->sbuf[to], size, MPI_BYTE, g->nbr[to], to, g->comm);
                    break;
                case RECV:
                    MPI_Recv(g->rbuf[from], size, MPI_BYTE, g->nbr[from], to, g->comm, MPI_STATUS_IGNORE);
                    break;
                default:
                    break;
                }
            }
        }
    }
}

static void exchange_sere(struct grid *g, int size)
{
    for (int k = 0; k < g->ndims; k++)
        for (int flow = 1; flow >= 0; flow--) {
            int to = 2 * k + flow, from = to ^ 1;
            MPI_Sendrecv(g->sbuf[to], size, MPI_BYTE, g->nbr[to], to, g->rbuf[from], size, MPI_BYTE,
                         g->nbr[from], to, g->comm, MPI_STATUS_IGNORE);
        }
}

static void exchange_isbr(struct grid *g, int size)
{
    for (int j = 0; j < g->nsides; j++)
        MPI_Isend(g->sbuf[j], size, MPI_BYTE, g->nbr[j], j, g->comm, &g->req[j]);
    for (int j = 0; j < g->nsides; j++)
        MPI_Recv(g->rbuf[j], size, MPI_BYTE, g->nbr[j], j ^ 1, g->comm, MPI_STATUS_IGNORE);
    MPI_Waitall(g->nsides, g->req, MPI_STATUSES_IGNORE);
}

static void exchange_isir(struct grid *g, int size)
{
    for (int j = 0; j < g->nsides; j++)
        MPI_Isend(g->sbuf[j], size, MPI_BYTE, g->nbr[j], j, g->comm, &g->req[j]);
    for (int j = 0; j < g->nsides; j++)
        MPI_Irecv(g->rbuf[j], size, MPI_BYTE, g->nbr[j], j ^ 1, g->comm, &g->req[g->nsides + j]);
    MPI_Waitall(2 * g->nsides, g->req, MPI_STATUSES_IGNORE);
}

static void exchange_iris(struct grid *g, int size)
{
    for (int j = 0; j < g->nsides; j++)
        MPI_Irecv(g->rbuf[j], size, MPI_BYTE, g->nbr[j], j ^ 1, g->comm, &g->req[g->nsides + j]);
    for (int j = 0; j < g->nsides; j++)
        MPI_Isend(g->sbuf[j], size, MPI_BYTE, g->nbr[j], j, g->comm, &g->req[j]);
    MPI_Waitall(2 * g->nsides, g->req, MPI_STATUSES_IGNORE);
}

static void (*const exchange_fn[NSTRATEGIES])(struct grid *, int) = {
    exchange_bsbr, exchange_sere, exchange_isbr, exchange_isir, exchange_iris,
};

/* ---- measurement --------------------------------------------------------- */

struct verify {
    long errors;        /* mismatching messages seen by this rank */
    long reports;       /* how many of them were printed */
    int corrupt_pending;
    uint64_t exchange;  /* global exchange number, the same on every rank */
};

/* Returns this rank's mean communication time per timed exchange. */
static double run_case(struct grid *g, int strategy, int size, const struct options *o, struct verify *v)
{
    double comm = 0.0;

    for (long it = 0; it < o->warmup + o->iters; it++) {
        double t0, t1;

        for (int j = 0; j < g->nsides; j++)
            fill_pattern(g->sbuf[j], (size_t)size, message_seed(g->rank, j, v->exchange));
        /* Ranks leave the previous verification at different times; without
         * this barrier that skew would be timed as communication. */
        MPI_Barrier(g->comm);
        t0 = MPI_Wtime();
        exchange_fn[strategy](g, size);
        t1 = MPI_Wtime();
        if (it >= o->warmup)
            comm += t1 - t0;

        if (v->corrupt_pending && it >= o->warmup) {
            g->rbuf[0][size / 2] ^= 0xff;
            v->corrupt_pending = 0;
        }
        for (int j = 0; j < g->nsides; j++) {
            uint64_t seed = message_seed(g->nbr[j], j ^ 1, v->exchange);
            long off = first_mismatch(g->rbuf[j], (size_t)size, seed);

            if (off < 0)
                continue;
            v->errors++;
            if (v->reports++ < MAX_REPORTS_PER_RANK)
                fprintf(stderr,
                        "halo: verification FAILED: rank %d, direction %s (message from rank %d), "
                        "strategy %s, size %d bytes, iteration %ld (%s), offset %ld: "
                        "expected 0x%02x, got 0x%02x\n",
                        g->rank, side_name[j], g->nbr[j], strategy_name[strategy], size, it,
                        it < o->warmup ? "warm-up" : "timed", off, expected_byte(seed, (size_t)off),
                        g->rbuf[j][off]);
        }
        v->exchange++;
    }
    return comm / (double)o->iters;
}

struct result {
    double min, mean, max;       /* microseconds, over ranks of the per-rank mean */
    double sample[MAX_SAMPLES];  /* max over ranks, one per repetition */
};

static void print_table(const struct options *o, const struct grid *g, int nranks, struct result res[][MAX_SIZES],
                        long errors)
{
    printf("# halo %s: %d ranks, periodic %d-D grid ", HALO_VERSION, nranks, g->ndims);
    for (int k = 0; k < g->ndims; k++)
        printf("%s%d", k ? "x" : "", g->extent[k]);
    printf(", warmup %ld, iters %ld\n", o->warmup, o->iters);
    printf("# time per exchange (%d messages per rank), microseconds: per-rank mean over timed\n", g->nsides);
    printf("# exchanges, then min/mean/max over ranks\n");
    printf("# %-8s %12s %14s %14s %14s\n", "strategy", "size_bytes", "min_us", "mean_us", "max_us");
    for (int s = 0; s < o->nstrategies; s++)
        for (int z = 0; z < o->nsizes; z++)
            printf("  %-8s %12ld %14.3f %14.3f %14.3f\n", strategy_name[o->strategy[s]], o->size[z], res[s][z].min,
                   res[s][z].mean, res[s][z].max);
    printf("# verification: %s (%ld mismatching message(s))\n", errors ? "FAILED" : "passed", errors);
}

static void print_json(const struct options *o, const struct grid *g, int nranks, struct result res[][MAX_SIZES],
                       long errors)
{
    printf("{\"program\":\"halo\",\"version\":\"%s\",\"ranks\":%d,\"dims\":%d,\"grid\":[", HALO_VERSION, nranks,
           g->ndims);
    for (int k = 0; k < g->ndims; k++)
        printf("%s%d", k ? "," : "", g->extent[k]);
    printf("],\"periodic\":true,\"warmup\":%ld,\"iters\":%ld,\"verification\":\"%s\",\"errors\":%ld,\"results\":[\n",
           o->warmup, o->iters, errors ? "failed" : "passed", errors);
    for (int s = 0; s < o->nstrategies; s++)
        for (int z = 0; z < o->nsizes; z++)
        {
            printf("{\"strategy\":\"%s\",\"size_bytes\":%ld,\"time_us\":{\"min\":%.4f,\"mean\":%.4f,\"max\":%.4f},"
                   "\"samples_max_us\":[",
                   strategy_name[o->strategy[s]], o->size[z], res[s][z].min, res[s][z].mean, res[s][z].max);
            for (long k = 0; k < o->samples; k++)
                printf("%s%.4f", k ? "," : "", res[s][z].sample[k]);
            printf("]}%s\n", (s == o->nstrategies - 1 && z == o->nsizes - 1) ? "" : ",");
        }
    printf("]}\n");
}

int main(int argc, char **argv)
{
    static struct result res[NSTRATEGIES][MAX_SIZES];
    struct options o;
    struct grid g;
    struct verify v = {0, 0, 0, 0};
    char err[256] = "";
    int wrank, nranks, pr, periods[MAX_DIMS] = {1, 1, 1}, alloc_failed = 0, any_alloc_failed;
    long maxsize = 1, total_errors = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    pr = hh_options_exit(parse_options(argc, argv, nranks, &o, err, sizeof err), wrank, "halo",
                         err, usage);
    if (pr >= 0) {
        MPI_Finalize();
        return pr;
    }

    memset(&g, 0, sizeof g);
    g.ndims = o.dims;
    g.nsides = 2 * o.dims;
    MPI_Dims_create(nranks, g.ndims, g.extent);
    /* No reordering: rank numbers in diagnostics are then the launcher's. */
    MPI_Cart_create(MPI_COMM_WORLD, g.ndims, g.extent, periods, 0, &g.comm);
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Cart_coords(g.comm, g.rank, g.ndims, g.coord);
    for (int k = 0; k < g.ndims; k++)
        MPI_Cart_shift(g.comm, k, 1, &g.nbr[2 * k], &g.nbr[2 * k + 1]);

    for (int z = 0; z < o.nsizes; z++)
        if (o.size[z] > maxsize)
            maxsize = o.size[z];
    for (int j = 0; j < g.nsides; j++) {
        g.sbuf[j] = calloc((size_t)maxsize, 1);
        g.rbuf[j] = calloc((size_t)maxsize, 1);
        if (!g.sbuf[j] || !g.rbuf[j])
            alloc_failed = 1;
    }
    MPI_Allreduce(&alloc_failed, &any_alloc_failed, 1, MPI_INT, MPI_MAX, g.comm);
    if (any_alloc_failed) {
        if (alloc_failed)
            fprintf(stderr, "halo: rank %d cannot allocate %d buffers of %ld bytes\n", g.rank, 2 * g.nsides, maxsize);
        for (int j = 0; j < g.nsides; j++) {
            free(g.sbuf[j]);
            free(g.rbuf[j]);
        }
        MPI_Comm_free(&g.comm);
        MPI_Finalize();
        return 1;
    }
    v.corrupt_pending = (g.rank == o.corrupt_rank);

    for (int s = 0; s < o.nstrategies; s++)
        for (int z = 0; z < o.nsizes; z++) {
            double t = 0.0, tmin, tmax, tsum;

            /* Each repetition is one sample; the figures over ranks use the
             * mean of all repetitions, as with a single long run. */
            for (long k = 0; k < o.samples; k++) {
                double tk = run_case(&g, o.strategy[s], (int)o.size[z], &o, &v), kmax;

                MPI_Reduce(&tk, &kmax, 1, MPI_DOUBLE, MPI_MAX, 0, g.comm);
                res[s][z].sample[k] = kmax * 1e6;
                t += tk / (double)o.samples;
            }

            MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, g.comm);
            MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, g.comm);
            MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, g.comm);
            res[s][z].min = tmin * 1e6;
            res[s][z].max = tmax * 1e6;
            res[s][z].mean = tsum / nranks * 1e6;
        }

    if (v.reports > MAX_REPORTS_PER_RANK)
        fprintf(stderr, "halo: rank %d: %ld more mismatching messages not shown\n", g.rank,
                v.reports - MAX_REPORTS_PER_RANK);
    /* Every rank needs the verdict to choose its exit status. */
    MPI_Allreduce(&v.errors, &total_errors, 1, MPI_LONG, MPI_SUM, g.comm);

    if (g.rank == 0) {
        if (o.json)
            print_json(&o, &g, nranks, res, total_errors);
        else
            print_table(&o, &g, nranks, res, total_errors);
        fflush(stdout);
        if (total_errors)
            fprintf(stderr, "halo: verification FAILED: %ld mismatching message(s) in total\n", total_errors);
    }

    for (int j = 0; j < g.nsides; j++) {
        free(g.sbuf[j]);
        free(g.rbuf[j]);
    }
    MPI_Comm_free(&g.comm);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
