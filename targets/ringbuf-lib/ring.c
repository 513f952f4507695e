#include <stdlib.h>

#include "ring.h"

struct lring *lib_ring;
uint64_t lib_last;
static uint64_t lib_counted; /* a static: only in .symtab and the DWARF */

struct lring *lring_new(uint64_t capacity)
{
    struct lring *b = calloc(1, sizeof *b);
    b->capacity = capacity;
    b->buf = calloc(capacity, sizeof *b->buf);
    return b;
}

/* Append v, or return 0 when the ring is full. */
__attribute__((noinline)) int lring_push(struct lring *b, uint64_t v)
{
    if (b->w - b->r >= b->capacity)
        return 0;
    b->buf[b->w % b->capacity] = v;
    b->w++;
    return 1;
}

/* Take the oldest item into *v, or return 0 when the ring is empty. */
__attribute__((noinline)) int lring_pop(struct lring *b, uint64_t *v)
{
    if (b->r == b->w)
        return 0;
    *v = b->buf[b->r % b->capacity];
    b->r++;
    return 1;
}

/* Called with 0, 1, 2, ... once per round of the main loop: every call has its own i. */
__attribute__((noinline)) uint64_t lib_count(uint64_t i)
{
    __asm__ volatile("" ::: "memory");
    lib_last = i;
    return ++lib_counted;
}
