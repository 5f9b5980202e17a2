/*
 * Paced memory-copy hog: copies between two buffers far larger than the
 * caches at a target rate, to take a chosen share of the memory bandwidth
 * away from a benchmark running on another core.
 *
 *   memhog RATE_MBS [BUFFER_MIB]     RATE_MBS 0: as fast as possible
 *
 * Runs until SIGTERM/SIGINT, then prints the achieved rate (MB/s of bytes
 * copied) on stderr.  The rate, not the hog's mere presence, sets the
 * slowdown (an unpaced copier is one fixed, large fault), so the pacing is
 * what makes the fault calibratable.
 *
 * Pacing works in 1 ms periods: copy the period's byte budget, then sleep to
 * the period's end.  Coarser periods would make the pressure bursty on the
 * benchmark's time scale; finer ones drown in the guest's sleep overshoot.
 */
#define _POSIX_C_SOURCE 199309L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: memhog RATE_MBS [BUFFER_MIB]\n");
        return 2;
    }
    double rate = atof(argv[1]) * 1e6; /* bytes per second */
    size_t buf = (size_t)(argc > 2 ? atol(argv[2]) : 256) << 20;
    const size_t chunk = 64 << 10;
    const double period = 1e-3;
    char *a = malloc(buf), *b = malloc(buf);
    if (!a || !b) {
        fprintf(stderr, "memhog: cannot allocate 2 x %zu bytes\n", buf);
        return 1;
    }
    memset(a, 1, buf);
    memset(b, 2, buf);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    double t0 = now(), next = t0;
    size_t off = 0;
    double copied = 0.0;
    while (!stop) {
        double budget = rate > 0 ? rate * period : 1e18;
        double done = 0.0;
        while (done < budget && !stop) {
            memcpy(b + off, a + off, chunk);
            off += chunk;
            if (off + chunk > buf)
                off = 0;
            done += (double)chunk;
            if (rate <= 0 && done >= 64.0 * chunk)
                break;
        }
        copied += done;
        if (rate > 0) {
            next += period;
            double wait = next - now();
            if (wait > 0) {
                struct timespec ts = {0, (long)(wait * 1e9)};
                nanosleep(&ts, NULL);
            } else if (wait < -0.1) {
                /* Descheduled for a while: do not pay the backlog back in one
                 * burst, which would be a different, harsher fault. */
                next = now();
            }
        }
    }
    double dt = now() - t0;
    fprintf(stderr, "memhog: copied %.0f MB in %.2f s: %.0f MB/s\n", copied / 1e6, dt,
            dt > 0 ? copied / 1e6 / dt : 0.0);
    /* keep the copies observable so the compiler cannot drop them */
    return b[buf / 2] == 3 ? 3 : 0;
}
