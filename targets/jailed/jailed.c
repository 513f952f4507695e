/* jailed: a small program for the hostile-target tests, run in a root of its own (chroot).
 *
 *   jailed
 *
 * Counts in the global `counter` and calls step() about 1,000 times a second; prints
 * "ready pid=N" once, then "requests/s=N" each second. Built with DWARF
 * (targets/bin/jailed) and without it (targets/bin/jailed-nodebug: strip --strip-debug,
 * the same build-id), so that a test can offer the DWARF as a separate debug file found
 * by build-id, inside the root or (what sampler must refuse) through a symlink out of it.
 * `banner` holds escape sequences, for the tests that nothing reaches a terminal raw. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

volatile long counter;
const char *label = "jailed";
/* Text that drives a terminal: retitles it, rings, clears the screen. */
const char *banner = "\x1b]0;PWNED\x07\x1b[2Jowned";

__attribute__((noinline)) long step(long i)
{
    counter++;
    __asm__ volatile("" ::: "memory");
    return i + 1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", getpid());
    long last = 0;
    time_t second = time(NULL);
    for (long i = 0;; i++) {
        step(i);
        usleep(1000);
        if (time(NULL) != second) {
            second = time(NULL);
            printf("requests/s=%ld\n", counter - last);
            last = counter;
        }
    }
}
