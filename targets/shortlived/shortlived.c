/* shortlived: a process that lives a moment, as a psql per query does, for sampler's --exe
 * tests (tests/integration/test_many.py).
 *
 *   shortlived DELAY_MS COUNT SPACING_MS
 *
 * It waits DELAY_MS after its start, calls `counted` COUNT times, SPACING_MS apart, and
 * exits; its last line says how many calls it made ("calls=COUNT"). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long calls;

__attribute__((noinline)) void counted(long i)
{
    calls += 1;
    __asm__ volatile("" ::"r"(i) : "memory");
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s DELAY_MS COUNT SPACING_MS\n", argv[0]);
        return 2;
    }
    long delay = strtol(argv[1], NULL, 10), count = strtol(argv[2], NULL, 10), spacing = strtol(argv[3], NULL, 10);
    sleep_ms(delay);
    for (long i = 0; i < count; i++) {
        counted(i);
        if (spacing > 0)
            sleep_ms(spacing);
    }
    printf("calls=%ld\n", calls);
    return 0;
}
