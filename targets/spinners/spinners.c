/* spinners N [M]: N threads that only compute, each clocking itself, for bench/profiling.py and
 * bench/stacktime.py: what sampling costs the threads, measured inside them; and M threads that
 * wait on a condition variable for good (a server's pool between requests).
 *
 * Each thread does units of work (a loop of about 20 us) and reads the monotonic clock after
 * each (the vDSO: tens of nanoseconds). A unit that took over STALL_NS longer than the thread's
 * fastest is a stall: the thread was stopped or not scheduled meanwhile; its excess counts into
 * stalled_ns. Once a second: "t_us=CLOCK units=N stalls=S stalled_us=T" (all threads together,
 * since start; CLOCK the monotonic clock, as Python's time.monotonic reads it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define STALL_NS 10000

static volatile uint64_t units, stalls, stalled_ns, sink;

static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

__attribute__((noinline)) void work(void) {
    for (int i = 0; i < 20000; i++) sink += (uint64_t)i * 7;
}

static void *spin(void *arg) {
    (void)arg;
    uint64_t fastest = UINT64_MAX, before = now();
    for (;;) {
        work();
        uint64_t after = now(), took = after - before;
        before = after;
        if (took < fastest) fastest = took;
        __sync_fetch_and_add(&units, 1);
        if (took > fastest + STALL_NS) {
            __sync_fetch_and_add(&stalls, 1);
            __sync_fetch_and_add(&stalled_ns, took - fastest);
        }
    }
    return NULL;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) void wait_for_work(void) {
    pthread_mutex_lock(&lock);
    for (;;) pthread_cond_wait(&never, &lock);
}

static void *idle(void *arg) {
    (void)arg;
    wait_for_work();
    return NULL;
}

int main(int argc, char **argv) {
    int busy = argc > 1 ? atoi(argv[1]) : 1, waiting = argc > 2 ? atoi(argv[2]) : 0;
    for (int i = 0; i < busy + waiting; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, i < busy ? spin : idle, NULL) != 0) return 1;
    }
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (;;) {
        sleep(1);
        printf("t_us=%lu units=%lu stalls=%lu stalled_us=%lu\n", (unsigned long)(now() / 1000),
               (unsigned long)units, (unsigned long)stalls, (unsigned long)(stalled_ns / 1000));
        fflush(stdout);
    }
}
