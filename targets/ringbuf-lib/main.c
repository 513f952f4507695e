/* ringbuf-lib: a single-threaded program (printing reads/s and writes/s like ringbuf-c) whose ring buffer lives in libring.so. Each
 * round (about every 2 ms) it adds 3 items and takes 2, so w - r grows by one per round
 * up to the capacity (1000), and calls lib_count(round). On SIGUSR1 (or at the start with
 * --plugin) it loads libplugin.so from its own folder with dlopen and calls plugin_work. */
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

static volatile sig_atomic_t want_plugin;

static void on_usr1(int sig)
{
    (void)sig;
    want_plugin = 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--plugin") == 0)
        want_plugin = 1;
    signal(SIGUSR1, on_usr1);
    lib_ring = lring_new(1000);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready pid=%d\n", (int)getpid());
    uint64_t (*work)(uint64_t) = NULL;
    uint64_t reads = 0, writes = 0;
    struct timespec last, now;
    clock_gettime(CLOCK_MONOTONIC, &last);
    for (uint64_t round = 0;; round++) {
        uint64_t v;
        for (int k = 0; k < 3; k++)
            writes += lring_push(lib_ring, round);
        for (int k = 0; k < 2; k++)
            reads += lring_pop(lib_ring, &v);
        lib_count(round);
        if (want_plugin && work == NULL) {
            char path[PATH_MAX];
            ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
            if (n > 0) {
                path[n] = 0;
                strcpy(strrchr(path, '/') + 1, "libplugin.so");
                void *plugin = dlopen(path, RTLD_NOW);
                if (plugin != NULL)
                    work = (uint64_t(*)(uint64_t))dlsym(plugin, "plugin_work");
                printf(work ? "plugin loaded\n" : "plugin failed: %s\n", dlerror());
            }
        }
        if (work != NULL)
            work(round);
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* a second since the last line (comparing the nanoseconds alone printed almost never
         * once the last line fell near the end of a second) */
        if ((now.tv_sec - last.tv_sec) * 1000000000L + (now.tv_nsec - last.tv_nsec) >= 1000000000L) {
            printf("reads/s=%llu writes/s=%llu\n", (unsigned long long)reads, (unsigned long long)writes);
            reads = writes = 0;
            last = now;
        }
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
}
