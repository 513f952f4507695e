/* Calls of known length and known result, each clocked by the program itself (trace --latency).
 *
 *   latency work CALLS   work(i, k): busy k x 100 us (k = 1 + i % 5), returns 1000 * i + k
 *   latency half CALLS   half(i): busy 100 us, returns i / 2.0 (a double: xmm0)
 *   latency nest CALLS   nest(10): each level busy 100 us, then nest(level - 1); returns the levels below + 1
 *   latency jump CALLS   hop(i, k): as work, but every third call leaves by longjmp
 *   latency saved CALLS  tick(i): returns i + 1, while another thread waits with an address inside the
 *                        padding after tick()'s ret on its stack (as a signal handler's saved pc would be)
 *   latency pair CALLS   pair_of(i): busy 100 us, returns struct pair {i, -i} (16 bytes: rax and rdx)
 *   latency big CALLS    big_of(i): busy 100 us, returns struct big {i, 2i, 3i, i / 4.0} (32 bytes: in the
 *                        caller's memory, rax its address)
 *
 * The main thread waits until the first 64 bytes of the function change (a tracer's breakpoint),
 * then makes the calls and writes "call I K NS RESULT" for each (NS: the program's own clock around
 * the call), then "done calls=N" and waits to be killed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void busy_us(uint64_t us) {
    uint64_t end = now_ns() + us * 1000;
    while (now_ns() < end) {
    }
}

__attribute__((noinline)) long work(long i, long k) {
    busy_us(100 * (uint64_t)k);
    return 1000 * i + k;
}

__attribute__((noinline)) double half(long i) {
    busy_us(100);
    return (double)i / 2.0;
}

static volatile long levels;

/* each level's own time is 100 us plus the levels under it: the outermost about 1 ms */
__attribute__((noipa)) long nest(long level) {
    busy_us(100);
    long below = level > 1 ? nest(level - 1) : 0;
    levels++;  /* after the call: no tail call, no loop */
    return below + 1;
}

static jmp_buf away;

__attribute__((noinline)) long hop(long i, long k) {
    busy_us(100 * (uint64_t)k);
    if (i % 3 == 2)
        longjmp(away, 1);
    return 1000 * i + k;
}

/* a function whose first 0xc3 byte is its ret, with padding after it */
static volatile long ticks;

__attribute__((noinline, aligned(16))) long tick(long i) {
    ticks = ticks + 1;
    return i + 1;
}

static void *holds_saved_pc(void *unused) {
    (void)unused;
    const unsigned char *p = (const unsigned char *)tick;
    while (*p != 0xc3)
        p++;
    const void *volatile saved[4] = {p + 1, p + 2, p + 3, p + 4};
    for (;;) {
        pause();
        (void)saved[0];
    }
    return NULL;
}

static void wait_for_tracer(const void *function) {
    unsigned char before[64];
    memcpy(before, function, sizeof before);
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (int waited = 0; memcmp(before, function, sizeof before) == 0; waited++) {
        if (waited > 60000) {
            fprintf(stderr, "latency: no tracer came in 60 s\n");
            exit(1);
        }
        usleep(1000);
    }
}

struct pair { long a; long b; };
struct big { long a; long b; long c; double d; };

__attribute__((noinline)) struct pair pair_of(long i) {
    busy_us(100);
    struct pair p = { i, -i };
    return p;
}

__attribute__((noinline)) struct big big_of(long i) {
    busy_us(100);
    struct big r = { i, 2 * i, 3 * i, (double)i / 4.0 };
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: latency work|half|nest|jump CALLS\n");
        return 2;
    }
    const char *mode = argv[1];
    long calls = atol(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const void *function = strcmp(mode, "half") == 0 ? (const void *)half
                         : strcmp(mode, "nest") == 0 ? (const void *)nest
                         : strcmp(mode, "jump") == 0 ? (const void *)hop
                         : strcmp(mode, "saved") == 0 ? (const void *)tick
                         : strcmp(mode, "pair") == 0 ? (const void *)pair_of
                         : strcmp(mode, "big") == 0 ? (const void *)big_of : (const void *)work;
    if (strcmp(mode, "saved") == 0) {
        pthread_t thread;
        pthread_create(&thread, NULL, holds_saved_pc, NULL);
        usleep(10000);
    }
    wait_for_tracer(function);
    for (long i = 0; i < calls; i++) {
        long k = 1 + i % 5;
        uint64_t t0 = now_ns();
        if (strcmp(mode, "half") == 0) {
            double r = half(i);
            printf("call %ld 1 %llu %.17g\n", i, (unsigned long long)(now_ns() - t0), r);
        } else if (strcmp(mode, "nest") == 0) {
            long r = nest(10);
            printf("call %ld 10 %llu %ld\n", i, (unsigned long long)(now_ns() - t0), r);
        } else if (strcmp(mode, "jump") == 0) {
            if (setjmp(away) == 0) {
                long r = hop(i, k);
                printf("call %ld %ld %llu %ld\n", i, k, (unsigned long long)(now_ns() - t0), r);
            } else {
                printf("jumped %ld %ld %llu\n", i, k, (unsigned long long)(now_ns() - t0));
            }
        } else if (strcmp(mode, "pair") == 0) {
            struct pair r = pair_of(i);
            printf("call %ld 1 %llu %ld %ld\n", i, (unsigned long long)(now_ns() - t0), r.a, r.b);
        } else if (strcmp(mode, "big") == 0) {
            struct big r = big_of(i);
            printf("call %ld 1 %llu %ld %ld %ld %.17g\n", i, (unsigned long long)(now_ns() - t0), r.a, r.b, r.c, r.d);
        } else if (strcmp(mode, "saved") == 0) {
            long r = tick(i);
            printf("call %ld 0 %llu %ld\n", i, (unsigned long long)(now_ns() - t0), r);
        } else {
            long r = work(i, k);
            printf("call %ld %ld %llu %ld\n", i, k, (unsigned long long)(now_ns() - t0), r);
        }
        usleep(2000);
    }
    printf("done calls=%ld\n", calls);
    for (;;)
        pause();
}
