#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

struct ring { unsigned long w, r; char name[32]; long pad[8]; };
struct ring rings[2] = {{0, 0, "ring 0"}, {0, 0, "ring 1"}};
volatile long calls;

/* ISRA: only b->w and b->r are used: GCC passes them as scalars (ring_gap.isra.0) */
static __attribute__((noinline)) long ring_gap(struct ring *b, long scale)
{
    calls++;
    return (long)(b->w - b->r) * scale;
}

/* IPA-CP: always called with step 3: GCC makes advance.constprop.0 */
static __attribute__((noinline)) void advance(struct ring *b, int step)
{
    for (int i = 0; i < step; i++) {
        b->w++;
        b->pad[i & 7] += i * step;
    }
    if (b->w - b->r > 100) b->r += step;
}

/* partial inlining: a quick check inlined, the rest out of line (check_slow.part.0) */
static int check_slow(struct ring *b)
{
    if (__builtin_expect(b->w % 1000 != 7, 1))
        return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s w=%lu r=%lu", b->name, b->w, b->r);
    for (int i = 0; i < 20; i++) { buf[i] ^= (char)i; }
    return (int)strlen(buf) + buf[3];
}

/* IPA-CP: the direct calls all pass scale 4: scaled.constprop.0; the pointer keeps scaled itself */
static __attribute__((noinline)) long scaled(long x, long scale)
{
    calls++;
    return x * scale + (x >> 3);
}
long (*volatile scaled_by_pointer)(long, long) = scaled;

void (*volatile advance_by_pointer)(struct ring *, int) = advance;

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", getpid());
    long sum = 0;
    for (long i = 0;; i++) {
        struct ring *b = &rings[i & 1];
        advance(b, 3);
        advance(b, 3);
        sum += ring_gap(b, 2) + ring_gap(b, i & 3);
        sum += check_slow(b) + check_slow(&rings[1]);
        if (i % 1000 == 0) advance_by_pointer(b, 1);
        sum += scaled(i, 4) + scaled(sum, 4);
        if (i % 2 == 0) sum += scaled_by_pointer(i, i & 7);
        if (i % 100000 == 0) printf("sum=%ld\n", sum);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, 0);
    }
}
