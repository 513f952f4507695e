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
 * Commands on stdin: "N\n" runs N steps at once (then prints "done N guarded=G calls=C"),
 * "pace US\n" runs one step every US microseconds until the next command, "q\n" exits.
 * It prints "ready pid=P" first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/sdt.h>
#include <unistd.h>

long calls;
long table[8];
unsigned long guarded_fires(long i); /* guarded.c */

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

int main(void) {
    for (int k = 0; k < 8; k++)
        table[k] = k * 1000 + 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", getpid());
    long i = 0, pace_us = 0;
    char line[64];
    for (;;) {
        struct pollfd in = {.fd = 0, .events = POLLIN};
        int timeout = -1;
        if (pace_us) {
            usleep((useconds_t)pace_us);
            timeout = 0;
        }
        int ready = poll(&in, 1, timeout);
        if (ready == 0) {
            step(i++, table);
            continue;
        }
        if (!fgets(line, sizeof line, stdin) || line[0] == 'q')
            break;
        if (strncmp(line, "pace ", 5) == 0) {
            pace_us = atol(line + 5);
            continue;
        }
        pace_us = 0;
        long n = atol(line);
        for (long k = 0; k < n; k++)
            step(i++, table);
        printf("done %ld guarded=%lu calls=%ld\n", n, guarded_fires(-1), calls);
    }
    return 0;
}
