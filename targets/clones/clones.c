/* clones: functions that gcc -O2 changes the shape of, as it does in real programs.
 *
 *   ring_gap   only exists as its clone ring_gap.isra.0 (scalar replacement: it gets b->w
 *              and b->r, not b); gdb still breaks at `ring_gap` and prints b, through the
 *              caller's call site (DW_OP_GNU_parameter_ref)
 *   ring_used  static inline: no code of its own, inlined into main at two places
 *   advance    an ordinary function, also called through a pointer
 *   tick       called once a second; ring_full never
 *
 * Each turn of main's loop calls ring_gap twice, check_slow twice, advance twice (and once
 * in 1000 turns once more, through the pointer) and runs each inlined copy of ring_used
 * once; `loops` counts the turns and `calls` the calls of ring_gap. Once a second it prints
 * "requests/s=N" (turns of the loop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ring {
    unsigned long w, r;
    char name[32];
    long pad[8];
};
struct ring rings[2] = {{0, 0, "ring 0", {0}}, {0, 0, "ring 1", {0}}};
volatile long calls;
volatile long loops;

static __attribute__((noinline)) long ring_gap(struct ring *b, long scale)
{
    calls++;
    return (long)(b->w - b->r) * scale;
}

static __attribute__((noinline)) void advance(struct ring *b, int step)
{
    for (int i = 0; i < step; i++) {
        b->w++;
        b->pad[i & 7] += i * step;
    }
    if (b->w - b->r > 100)
        b->r += step;
}

static int check_slow(struct ring *b)
{
    if (__builtin_expect(b->w % 1000 != 7, 1))
        return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s w=%lu r=%lu", b->name, b->w, b->r);
    for (int i = 0; i < 20; i++)
        buf[i] ^= (char)i;
    return (int)strlen(buf) + buf[3];
}

/* rarely called: once a second (tick), never (ring_full) */
static __attribute__((noinline)) void tick(long second, long rate)
{
    printf("requests/s=%ld\n", rate);
    __asm__ volatile("" ::"r"(second) : "memory");
}

static __attribute__((noinline)) void ring_full(const struct ring *b)
{
    printf("ring %s is full\n", b->name);
}

static inline unsigned long ring_used(const struct ring *b)
{
    return b->w - b->r;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void (*volatile advance_by_pointer)(struct ring *, int) = advance;

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", getpid());
    long sum = 0, at_last = 0, second = 0;
    double last = now();
    for (long i = 0;; i++) {
        struct ring *b = &rings[i & 1];
        advance(b, 3);
        advance(b, 3);
        sum += ring_gap(b, 2) + ring_gap(b, i & 3);
        sum += check_slow(b) + check_slow(&rings[1]);
        if (i % 1000 == 0)
            advance_by_pointer(b, 1);
        if (ring_used(b) > 1000000)
            ring_full(b);
        sum += ring_used(&rings[0]) & 1;
        loops++;
        if (now() - last >= 1.0) {
            tick(++second, (long)((loops - at_last) / (now() - last)));
            at_last = loops;
            last = now();
        }
        if (i % 100000 == 0)
            printf("sum=%ld\n", sum);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, 0);
    }
}
