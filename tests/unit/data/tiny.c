/* Input for the debug-info readers' unit tests (tests/unit/test_debuginfo_readers.py).
 * Rebuilt by hand only, never by the tests (the binaries are checked in, so that the
 * tests read exactly these bytes):
 *   gcc -O0 -g -gdwarf-5 -fno-omit-frame-pointer -Wl,--build-id=sha1 -o tiny-O0 tiny.c
 *   gcc -O2 -g -gdwarf-4 -Wl,--build-id=sha1 -o tiny-O2 tiny.c
 */
#include <stdint.h>

enum color { RED = 1, GREEN = 2, BLUE = -3 };

struct node {
    struct node *next;
    uint32_t value;
    int16_t small[4];
    enum color color;
};

struct node head = { 0, 42, { 1, -2, 3, -4 }, GREEN };
static long counter = 7;

__attribute__((noinline)) long walk(struct node *n, long limit)
{
    long sum = 0;
    for (int i = 0; n != 0 && i < limit; i++) {
        long here = n->value + n->small[i % 4];
        sum += here;
        n = n->next;
    }
    return sum;
}

int main(int argc, char **argv)
{
    (void)argv;
    head.next = argc > 5 ? &head : 0;
    counter += walk(&head, argc + 1);
    return (int)(counter & 1);
}
