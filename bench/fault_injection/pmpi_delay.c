/*
 * LD_PRELOAD interposer on the MPI profiling interface: adds a fixed,
 * busy-waited delay before every send and collective, to fake a slower
 * network (all ranks) or a slow rank (one rank).
 *
 *   FI_DELAY_NS       nanoseconds to add per call (0 or unset: no delay)
 *   FI_DELAY_RANK     only this MPI_COMM_WORLD rank is delayed (unset or -1: all)
 *   FI_INIT_DELAY_NS  nanoseconds to add to MPI_Init (a slow launcher or PMIx)
 *   FI_INIT_DELAY_FILE  while this file exists, the MPI_Init delay is the
 *                     number it holds (a fault that passes: lifted mid-run by
 *                     removing the file)
 *   FI_IGNORE_SIGTERM 1: the rank ignores SIGTERM from its start (a hung or
 *                     badly behaved job: only SIGKILL stops it)
 *
 * Build: mpicc -O2 -shared -fPIC -o libpmpi_delay.so pmpi_delay.c
 *
 * Busy-waiting rather than nanosleep: the delays wanted here are hundreds of
 * nanoseconds, far below the ~50 us a KVM guest's sleep actually takes, and a
 * sleeping rank would also give its core away, which is a different fault.
 */
#define _POSIX_C_SOURCE 199309L
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long delay_ns = -1; /* -1: environment not read yet */

static void configure(void)
{
    const char *s = getenv("FI_DELAY_NS");
    long ns = s ? strtol(s, NULL, 10) : 0;
    const char *r = getenv("FI_DELAY_RANK");
    if (ns > 0 && r && *r && atoi(r) >= 0) {
        /* The launcher's variable works before MPI_Init and without a
         * communicator call, which a wrapper must not make on its own. */
        const char *me = getenv("OMPI_COMM_WORLD_RANK");
        if (!me)
            me = getenv("PMI_RANK");
        if (!me || atoi(me) != atoi(r))
            ns = 0;
    }
    delay_ns = ns > 0 ? ns : 0;
}

static void spin_ns(long ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

static void spin(void)
{
    if (delay_ns < 0)
        configure();
    if (delay_ns == 0)
        return;
    spin_ns(delay_ns);
}

static void init_delay(void)
{
    const char *s = getenv("FI_INIT_DELAY_NS");
    long ns = s ? strtol(s, NULL, 10) : 0;
    const char *path = getenv("FI_INIT_DELAY_FILE");
    if (path) {
        FILE *f = fopen(path, "r");
        ns = 0;
        if (f) {
            if (fscanf(f, "%ld", &ns) != 1)
                ns = 0;
            fclose(f);
        }
    }
    if (ns > 0)
        spin_ns(ns);
}

/* At load, before main: a rank signalled before its MPI_Init ignores it too. */
__attribute__((constructor)) static void ignore_sigterm(void)
{
    const char *ignore = getenv("FI_IGNORE_SIGTERM");
    if (ignore && atoi(ignore) == 1)
        signal(SIGTERM, SIG_IGN);
}

int MPI_Init(int *argc, char ***argv)
{
    init_delay();
    return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    init_delay();
    return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    spin();
    return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    spin();
    return PMPI_Ssend(buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    spin();
    return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *status)
{
    spin();
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                         comm, status);
}

int MPI_Barrier(MPI_Comm comm)
{
    spin();
    return PMPI_Barrier(comm);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    spin();
    return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    spin();
    return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    spin();
    return PMPI_Bcast(buf, count, type, root, comm);
}
