/* ifuncs: calls one of glibc's IFUNC string functions a known number of times, for
 * sampler's IFUNC tests (tests/integration/test_ifuncs.py).
 *
 *   ifuncs FUNCTION COUNT
 *
 * FUNCTION is memcpy, memmove, memset, strlen, strcmp or strchr. At each SIGUSR1 the
 * program calls it COUNT times (from main, through the PLT: -fno-builtin), then adds 1 to
 * `bursts` and COUNT to `calls`. Between bursts it waits in sigsuspend and calls nothing
 * else of libc's, so a trace of the function sees only these calls. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile uint64_t bursts; /* bursts done */
volatile uint64_t calls;  /* calls made */
volatile uint64_t sink;
static volatile sig_atomic_t asked;
static char a[256], b[256];

static void on_usr1(int sig)
{
    (void)sig;
    asked = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s memcpy|memmove|memset|strlen|strcmp|strchr COUNT\n", argv[0]);
        return 2;
    }
    const char *which = argv[1];
    long count = strtol(argv[2], NULL, 10);
    int kind = !strcmp(which, "memcpy") ? 0 : !strcmp(which, "memmove") ? 1 : !strcmp(which, "memset") ? 2
             : !strcmp(which, "strlen") ? 3 : !strcmp(which, "strcmp") ? 4 : !strcmp(which, "strchr") ? 5 : -1;
    if (kind < 0 || count < 1) {
        fprintf(stderr, "ifuncs: unknown function %s or count %s\n", which, argv[2]);
        return 2;
    }
    memset(a, 'a', sizeof a - 1);
    memset(b, 'a', sizeof b - 1);
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &old);
    struct sigaction action = {0};
    action.sa_handler = on_usr1;
    sigaction(SIGUSR1, &action, NULL);
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        while (!asked)
            sigsuspend(&old);
        asked = 0;
        for (long i = 0; i < count; i++) {
            switch (kind) {
            case 0: memcpy(b, a, 64 + (i & 63)); break;
            case 1: memmove(b + 1, b, 64 + (i & 63)); break;
            case 2: memset(b, 'a', 64 + (i & 63)); break;
            case 3: sink += strlen(a + (i & 63)); break;
            case 4: sink += (uint64_t)strcmp(a, b); break;
            case 5: sink += (uintptr_t)strchr(a, 'b'); break;
            }
        }
        calls += (uint64_t)count;
        bursts++;
    }
}
