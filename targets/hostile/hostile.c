/* A program that attacks its tracer, for tests/integration/test_hostile.py: it calls work() (the
 * probed function) in a loop, and one of its parts does what a hostile target can do to the memory
 * sampler shares with it. Run as nobody.
 *   hostile swap FILE   a clone(CLONE_FILES) sibling (a separate process: it runs while sampler holds
 *                       the target's threads) puts a read-only descriptor of FILE over every
 *                       descriptor that names a sampler memfd, as soon as it appears
 *   hostile shrink      the sibling keeps a copy of the descriptor of sampler's data memfd and cuts
 *                       the file to 0 bytes a moment later
 *   hostile forge N     a thread takes N tickets in sampler's ring and writes records naming probe 9999
 * It prints what it did ("swapped 5", "shrunk", "forged 1000") and "ready pid=P" at the start. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long calls;

__attribute__((noinline)) void work(void) {
    calls++;
    __asm__ volatile("" ::: "memory");
}

static const char *mode, *argument;
static pid_t target;
static char sibling_stack[1 << 16];

static int sampler_fd(int fd, const char *which) {
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = 0;
    return strstr(link, which) != NULL;
}

static int mapped(const char *maps, const char *which) {
    static char text[1 << 16];
    int fd = open(maps, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = 0;
    return strstr(text, which) != NULL;
}

static int sibling(void *unused) {
    (void)unused;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* it spins: it must end with the target */
    if (getppid() != target)
        return 0;
    if (!strcmp(mode, "swap")) {
        int victim = open(argument, O_RDONLY);
        if (victim < 0) {
            perror(argument);
            return 1;
        }
        char maps[64];
        snprintf(maps, sizeof maps, "/proc/%d/maps", (int)target);
        for (;;) {
            for (int fd = 3; fd < 64; fd++)
                if (fd != victim && sampler_fd(fd, "memfd:sampler-code")) {
                    /* once the target mapped it (sampler's next step takes the file at that number) */
                    for (int tries = 0; tries < 200000 && sampler_fd(fd, "memfd:sampler-code"); tries++)
                        if (mapped(maps, "memfd:sampler-code")) {
                            dup2(victim, fd);
                            printf("swapped %d\n", fd);
                            fflush(stdout);
                            break;
                        }
                }
        }
    }
    /* shrink */
    for (;;) {
        for (int fd = 3; fd < 64; fd++)
            if (sampler_fd(fd, "memfd:sampler-data")) {
                int copy = dup(fd);
                if (copy < 0)
                    continue;
                usleep(300000);
                if (ftruncate(copy, 0) == 0)
                    printf("shrunk\n");
                else
                    printf("could not shrink: %m\n");
                fflush(stdout);
                return 0;
            }
    }
}

static void *forger(void *unused) {
    (void)unused;
    long n = atol(argument);
    uint8_t *data = NULL;
    while (!data) {
        FILE *maps = fopen("/proc/self/maps", "r");
        char line[512];
        while (maps && fgets(line, sizeof line, maps))
            if (strstr(line, "memfd:sampler-data"))
                data = (uint8_t *)strtoul(line, NULL, 16);
        if (maps)
            fclose(maps);
        usleep(2000);
    }
    usleep(200000);
    long forged = 0;
    for (long i = 0; i < n; i++) {
        uint64_t ticket = __atomic_fetch_add((uint64_t *)(data + 0x40), 1, __ATOMIC_SEQ_CST);
        uint8_t *slot = data + 0x1000 + (ticket & 0xffff) * 32;
        for (int spin = 0; __atomic_load_n((uint64_t *)slot, __ATOMIC_ACQUIRE) != ticket; spin++)
            if (spin > 100000000)
                goto out;
        *(uint32_t *)(slot + 8) = 9999;
        *(uint32_t *)(slot + 12) = 0;
        *(uint64_t *)(slot + 16) = 0;
        *(uint64_t *)(slot + 24) = 0;
        __atomic_store_n((uint64_t *)slot, ticket + 1, __ATOMIC_RELEASE);
        forged++;
    }
out:
    printf("forged %ld\n", forged);
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hostile swap FILE | shrink | forge N\n");
        return 2;
    }
    mode = argv[1];
    argument = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    target = getpid();
    if (!strcmp(mode, "forge")) {
        pthread_t thread;
        pthread_create(&thread, NULL, forger, NULL);
    } else if (clone(sibling, sibling_stack + sizeof sibling_stack, CLONE_FILES | SIGCHLD, NULL) < 0) {
        perror("clone");
        return 1;
    }
    printf("ready pid=%d\n", getpid());
    struct timespec pause = {0, 100000};
    for (;;) {
        work();
        nanosleep(&pause, NULL);
    }
}
