// burst: what a probe on every call costs a program, clocked by the program (bench/inprocess.py).
//
//   burst THREADS CALLS
//
// Round after round, THREADS threads each call touch(&their pair) CALLS times in a tight loop and
// clock the loop (CLOCK_MONOTONIC); touch() makes two field updates through its argument (a->n += 1,
// a->sum += a->n: about 3 ns). Each thread also looks at touch()'s first 16 bytes before and after
// its loop: "traced=1" when they differed from the program's own both times (a tracer's int3 or
// jump was in for the whole burst), 0 when they were the program's own both times, "mixed" else.
// After each round it prints one line and rests 100 ms:
//
//   burst threads=T calls=N ns_per_call=X traced=0|1|mixed
//
// X is the median over the threads of (loop time / CALLS). It prints "ready pid=N" first.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pair { uint64_t n, sum; char pad[48]; };

__attribute__((noinline)) void touch(struct pair *a) {
    a->n += 1;
    a->sum += a->n;
}

static int threads;
static long calls;
static unsigned char original[16];
static pthread_barrier_t start, end;
static double ns_per_call[256];
static int state[256];
static struct pair pairs[256];

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int patched(void) {
    return memcmp((const void *)touch, original, sizeof original) != 0;
}

static void *work(void *arg) {
    int i = (int)(intptr_t)arg;
    void (*volatile call)(struct pair *) = touch;
    for (;;) {
        pthread_barrier_wait(&start);
        int before = patched();
        double t0 = now_ns();
        for (long c = 0; c < calls; c++)
            call(&pairs[i]);
        double t1 = now_ns();
        int after = patched();
        ns_per_call[i] = (t1 - t0) / calls;
        state[i] = before && after ? 1 : (!before && !after ? 0 : 2);
        pthread_barrier_wait(&end);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 3 || (threads = atoi(argv[1])) < 1 || threads > 256 || (calls = atol(argv[2])) < 1) {
        fprintf(stderr, "usage: burst THREADS CALLS\n");
        return 2;
    }
    memcpy(original, (const void *)touch, sizeof original);
    pthread_barrier_init(&start, NULL, threads + 1);
    pthread_barrier_init(&end, NULL, threads + 1);
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, work, (void *)(intptr_t)i);
    }
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (;;) {
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&end);
        double sorted[256];
        int traced = 0, untraced = 0;
        for (int i = 0; i < threads; i++) {
            sorted[i] = ns_per_call[i];
            traced += state[i] == 1;
            untraced += state[i] == 0;
        }
        qsort(sorted, threads, sizeof sorted[0], by_value);
        printf("burst threads=%d calls=%ld ns_per_call=%.3f traced=%s\n", threads, calls, sorted[threads / 2],
               traced == threads ? "1" : untraced == threads ? "0" : "mixed");
        fflush(stdout);
        usleep(100000);
    }
}
