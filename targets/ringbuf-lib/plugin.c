/* A plug-in the program loads with dlopen when it gets SIGUSR1 (or at once with --plugin). */
#include <stdint.h>

uint64_t plugin_calls;

__attribute__((noinline)) uint64_t plugin_work(uint64_t x)
{
    __asm__ volatile("" ::: "memory");
    plugin_calls++;
    return x * 2;
}
