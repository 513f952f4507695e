/* stall: a program that clocks every call of the function a tracer samples, so that what a
 * breakpoint costs it is measured from inside (bench/stall.py).
 *
 *   stall [busy]
 *
 * A thread calls probe(&ring) in a tight loop, reading CLOCK_MONOTONIC before and after
 * each call. probe() adds one to ring.w, so at its entry ring.w is the index of the call
 * (what a tracer reads at the breakpoint: 8 bytes at rdi). A call that took longer than
 * 5 us (a breakpoint's stall, or the thread preempted) is kept as (index, ns, and its start
 * t0 in CLOCK_MONOTONIC ns), up to
 * 65,536 of them. "busy": one more thread spins, so that every core of a 2-core machine
 * is busy.
 *
 * SIGUSR1 makes the calling thread print the calls kept since the last SIGUSR1, one per
 * line, "long index=N ns=D t0=T", then "end long"; SIGUSR2 forgets them. It prints "ready
 * pid=N" and once a second "requests/s=N" (calls of probe). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THRESHOLD_NS 5000
#define KEPT (1 << 16)

struct ring {
    unsigned long w, r;
};
struct ring ring;
static struct {
    unsigned long index;
    long ns, t0;
} kept[KEPT];
static long nkept;
static volatile sig_atomic_t dump, forget;

__attribute__((noinline)) void probe(struct ring *b)
{
    b->w++;
    __asm__ volatile("" ::: "memory");
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        dump = 1;
    else
        forget = 1;
}

static void *spin(void *arg)
{
    volatile unsigned long n = 0;
    (void)arg;
    for (;;)
        n++;
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGUSR1, on_signal);
    signal(SIGUSR2, on_signal);
    if (argc > 1 && strcmp(argv[1], "busy") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, spin, NULL);
    }
    printf("ready pid=%d\n", getpid());
    long last = now_ns();
    unsigned long at_last = 0;
    for (;;) {
        unsigned long index = ring.w;
        long t0 = now_ns();
        probe(&ring);
        long t1 = now_ns();
        if (t1 - t0 > THRESHOLD_NS && nkept < KEPT) {
            kept[nkept].index = index;
            kept[nkept].ns = t1 - t0;
            kept[nkept].t0 = t0;
            nkept++;
        }
        if (forget) {
            forget = 0;
            nkept = 0;
        }
        if (dump) {
            dump = 0;
            for (long i = 0; i < nkept; i++)
                printf("long index=%lu ns=%ld t0=%ld\n", kept[i].index, kept[i].ns, kept[i].t0);
            printf("end long\n");
            nkept = 0;
        }
        if (t1 - last >= 1000000000L) {
            printf("requests/s=%lu\n", (unsigned long)((ring.w - at_last) * 1e9 / (t1 - last)));
            at_last = ring.w;
            last = now_ns();
        }
    }
}
