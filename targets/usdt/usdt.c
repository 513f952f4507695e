/* usdt: a program with <sys/sdt.h> probes, for sampler's USDT tests.
 *
 * Each step i fires, in step():
 *   sampler:tick    (no semaphore)  arg0 = i, arg1 = -i (int), arg2 = 7, arg3 = calls (a global),
 *                                   arg4 = i % 256 (a char), arg5 = the step's name ("step-<i>")
 *   sampler:item    (no semaphore)  arg0 = i, arg1 = table[i % 8] (= (i % 8) * 1000 + 1), read
 *                                   through an index by the compiler where it can
 *   sampler:guarded (a semaphore)   arg0 = i, fired only while its semaphore is non-zero
 *                                   (guarded.c): the program counts how often it fired
 * The -O0 build (usdt-O0) has its arguments on the stack: memory operands off %rbp.
 *
 * usdt [PACE_US]: one step every PACE_US microseconds (0, the default: none until asked).
 * Commands on stdin: "N\n" runs N steps at once (then prints "done N guarded=G calls=C ns=T", T its own time for them),
 * "pace US\n" runs one step every US microseconds until the next command, "fork N\n" forks a child
 * that runs N steps and says "child PID done N guarded=G semaphore=S", "q\n" exits (at the
 * end of stdin it goes on pacing, or exits if it was not). It prints "ready pid=P" first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long calls;
long table[8];
unsigned long guarded_fires(long i); /* guarded.c */
extern unsigned short sampler_guarded_semaphore;

__attribute__((noinline)) void step(long i, long *t) {
    char name[32];
    int negative = (int)-i;
    char low = (char)(i % 256);
    calls++;
    snprintf(name, sizeof name, "step-%ld", i);
    DTRACE_PROBE6(sampler, tick, i, negative, 7, calls, low, name);
    DTRACE_PROBE2(sampler, item, i, t[i % 8]);
    guarded_fires(i);
}

int main(int argc, char **argv) {
    for (int k = 0; k < 8; k++)
        table[k] = k * 1000 + 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", getpid());
    long i = 0, pace_us = argc > 1 ? atol(argv[1]) : 0;
    int reading = 1; /* stdin still open */
    char line[64];
    for (;;) {
        if (!reading) {
            if (!pace_us)
                break;
            usleep((useconds_t)pace_us);
            step(i++, table);
            continue;
        }
        struct pollfd in = {.fd = 0, .events = POLLIN};
        int timeout = -1;
        if (pace_us) {
            usleep((useconds_t)pace_us);
            timeout = 0;
        }
        if (poll(&in, 1, timeout) == 0) {
            step(i++, table);
            continue;
        }
        if (!fgets(line, sizeof line, stdin)) {
            reading = 0;
            continue;
        }
        if (line[0] == 'q')
            break;
        if (strncmp(line, "pace ", 5) == 0) {
            pace_us = atol(line + 5);
            continue;
        }
        if (strncmp(line, "fork ", 5) == 0) { /* a child runs N steps, says what it saw, exits */
            long n = atol(line + 5);
            pid_t child = fork();
            if (child == 0) {
                unsigned long before = guarded_fires(-1);
                for (long k = 0; k < n; k++)
                    step(i + k, table);
                printf("child %d done %ld guarded=%lu semaphore=%u\n", getpid(), n, guarded_fires(-1) - before,
                       (unsigned)sampler_guarded_semaphore);
                fflush(stdout);
                _exit(0);
            }
            waitpid(child, NULL, 0);
            printf("forked %d\n", child);
            continue;
        }
        pace_us = 0;
        long n = atol(line);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long k = 0; k < n; k++)
            step(i++, table);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("done %ld guarded=%lu calls=%ld ns=%lld\n", n, guarded_fires(-1), calls,
               (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec));
    }
    return 0;
}
