/* The probe with a semaphore: sys/sdt.h writes the semaphore's address into the note, and the
 * program runs the probe (and what sets up its arguments) only while it is non-zero. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

__extension__ unsigned short sampler_guarded_semaphore __attribute__((unused)) __attribute__((section(".probes")));

static unsigned long fired;

/* i >= 0: one step (the probe fires if someone counts on it); i < 0: how often it fired */
unsigned long guarded_fires(long i) {
    if (i < 0)
        return fired;
    if (sampler_guarded_semaphore) {
        fired++;
        DTRACE_PROBE1(sampler, guarded, i);
    }
    return fired;
}
