/* ringbuf: a small C program for sampler to measure, with the same behaviour,
 * flags and output as targets/ringbuf-go: a single-producer single-consumer
 * ring buffer, one writer and one reader pthread. With --bug, the writer's
 * "full" check is off by one, so w-r reaches capacity+1. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ring {
    uint64_t r; /* items read since the start */
    uint64_t w; /* items written since the start */
    uint64_t capacity;
    int bug;
    uint64_t *buf;
};

struct ring *ring;
static uint64_t reads, writes;

/* Append v, or return 0 when the ring is full. */
__attribute__((noinline)) int ring_write(struct ring *b, uint64_t v)
{
    uint64_t w = __atomic_load_n(&b->w, __ATOMIC_RELAXED);
    uint64_t r = __atomic_load_n(&b->r, __ATOMIC_ACQUIRE);
    uint64_t limit = b->capacity + (b->bug ? 1 : 0); /* the off-by-one */
    if (w - r >= limit)
        return 0;
    b->buf[w % b->capacity] = v;
    __atomic_store_n(&b->w, w + 1, __ATOMIC_RELEASE);
    return 1;
}

/* Take the oldest item into *v, or return 0 when the ring is empty. */
__attribute__((noinline)) int ring_read(struct ring *b, uint64_t *v)
{
    uint64_t r = __atomic_load_n(&b->r, __ATOMIC_RELAXED);
    uint64_t w = __atomic_load_n(&b->w, __ATOMIC_ACQUIRE);
    if (r == w)
        return 0;
    *v = b->buf[r % b->capacity];
    __atomic_store_n(&b->r, r + 1, __ATOMIC_RELEASE);
    return 1;
}

/* Called once a second by the reporter: a rarely hit function. */
__attribute__((noinline)) uint64_t tick(struct ring *b, uint64_t second)
{
    __asm__ volatile("" ::: "memory");
    return __atomic_load_n(&b->w, __ATOMIC_RELAXED) - __atomic_load_n(&b->r, __ATOMIC_RELAXED) + second * 0;
}

/* Only called when RINGBUF_NEVER=call: a breakpoint there is never hit. */
__attribute__((noinline)) uint64_t never(struct ring *b)
{
    __asm__ volatile("" ::: "memory");
    return __atomic_load_n(&b->w, __ATOMIC_RELAXED);
}

static void *writer(void *arg)
{
    (void)arg;
    uint64_t v = 0;
    for (;;) {
        if (ring_write(ring, v)) {
            v++;
            __atomic_add_fetch(&writes, 1, __ATOMIC_RELAXED);
        } else {
            sched_yield();
        }
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    uint64_t v;
    for (;;) {
        if (ring_read(ring, &v))
            __atomic_add_fetch(&reads, 1, __ATOMIC_RELAXED);
        else
            sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long capacity = 20000;
    int bug = 0;
    unsigned long long exit_after = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bug") == 0 || strcmp(argv[i], "-bug") == 0) {
            bug = 1;
        } else if ((strcmp(argv[i], "--capacity") == 0 || strcmp(argv[i], "-capacity") == 0) && i + 1 < argc) {
            capacity = atol(argv[++i]);
        } else if (strncmp(argv[i], "--capacity=", 11) == 0) {
            capacity = atol(argv[i] + 11);
        } else if (strcmp(argv[i], "--exit-after") == 0 && i + 1 < argc) {
            exit_after = strtoull(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: %s [--capacity N] [--bug] [--exit-after SECONDS]\n", argv[0]);
            return 2;
        }
    }
    if (capacity < 1) {
        fprintf(stderr, "ringbuf: --capacity must be at least 1\n");
        return 2;
    }
    ring = calloc(1, sizeof *ring);
    ring->capacity = (uint64_t)capacity;
    ring->bug = bug;
    ring->buf = calloc((size_t)capacity, sizeof *ring->buf);
    setvbuf(stdout, NULL, _IOLBF, 0);

    pthread_t tw, tr;
    pthread_create(&tw, NULL, writer, NULL);
    pthread_create(&tr, NULL, reader, NULL);
    printf("ready pid=%d\n", (int)getpid());
    int call_never = getenv("RINGBUF_NEVER") && strcmp(getenv("RINGBUF_NEVER"), "call") == 0;
    uint64_t last_r = 0, last_w = 0;
    for (uint64_t second = 1;; second++) {
        struct timespec one = {1, 0};
        while (nanosleep(&one, &one) != 0)
            ;
        uint64_t r = __atomic_load_n(&reads, __ATOMIC_RELAXED), w = __atomic_load_n(&writes, __ATOMIC_RELAXED);
        tick(ring, second);
        if (call_never)
            never(ring);
        printf("reads/s=%llu writes/s=%llu\n", (unsigned long long)(r - last_r), (unsigned long long)(w - last_w));
        last_r = r;
        last_w = w;
        if (second == exit_after) {
            printf("exiting\n");
            return 0;
        }
    }
}
