/* libring: a ring buffer in a shared library, for sampler's tests of libraries
 * (their symbols, DWARF, globals and separate debug files). */
#include <stdint.h>

struct lring {
    uint64_t r; /* items taken since the start */
    uint64_t w; /* items added since the start */
    uint64_t capacity;
    uint64_t *buf;
};

extern struct lring *lib_ring; /* the program's ring, a global of the library */
extern uint64_t lib_last;      /* the argument of the last lib_count call */

struct lring *lring_new(uint64_t capacity);
int lring_push(struct lring *b, uint64_t v);
int lring_pop(struct lring *b, uint64_t *v);
uint64_t lib_count(uint64_t i);
