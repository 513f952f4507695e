/* Threads with known stacks, for sampler stack and profile (issue 35).
 *
 *   waiter   level1 -> level2 -> level3 -> pthread_mutex_lock (a mutex main holds for good)
 *   recurse  recurse(10) -> ... -> recurse(0) -> bottom -> nanosleep
 *   reader   read_input -> read (a pipe nobody writes)
 *   spinner  spin (a busy loop; hot() and cold() share its time 3:1)
 *   handler  in_signal_wait -> tgkill (the system call, to itself) -> on_signal (the handler)
 *            -> handler_sleep -> nanosleep
 *
 * Each thread is named (pthread_setname_np) as above. It prints "ready pid=N" once every thread
 * is where it stays, then "hot=N cold=M" each second (the calls of each, its own count).
 *
 * `stacks callers A B` instead: once a tracer's breakpoint is in leaf() (its first byte changed,
 * at most 30 s), via_a() calls it A times and via_b() B times, then "done a=A b=B" (its own counts).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KEEP __attribute__((noinline, optimize("no-optimize-sibling-calls")))

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static int pipe_fds[2];
static volatile int ready_count;
volatile unsigned long hot_calls, cold_calls;
static volatile unsigned long sink;

static void here(void) { __sync_fetch_and_add(&ready_count, 1); }

static void sleep_for_good(void) {
    for (;;) {
        struct timespec t = {3600, 0};
        nanosleep(&t, NULL);
    }
}

KEEP void level3(void) {
    here();
    pthread_mutex_lock(&held);
    pthread_mutex_unlock(&held);
}
KEEP void level2(void) { level3(); sink++; }
KEEP void level1(void) { level2(); sink++; }
static void *waiter_main(void *arg) { (void)arg; level1(); return NULL; }

KEEP void bottom(void) { here(); sleep_for_good(); }
KEEP int recurse(int n) {
    if (n == 0) {
        bottom();
        return 0;
    }
    int r = recurse(n - 1);
    return r + n;
}
static void *recurse_main(void *arg) { (void)arg; sink += (unsigned long)recurse(10); return NULL; }

KEEP void read_input(void) {
    char c;
    here();
    while (read(pipe_fds[0], &c, 1) > 0) {
    }
}
static void *reader_main(void *arg) { (void)arg; read_input(); return NULL; }

KEEP void hot(void) { for (int i = 0; i < 3000; i++) sink += (unsigned long)i; hot_calls++; }
KEEP void cold(void) { for (int i = 0; i < 1000; i++) sink += (unsigned long)i; cold_calls++; }
KEEP void spin(void) {
    here();
    for (;;) {
        hot();
        cold();
    }
}
static void *spinner_main(void *arg) { (void)arg; spin(); return NULL; }

KEEP void handler_sleep(void) { here(); sleep_for_good(); }
static void on_signal(int sig) { (void)sig; handler_sleep(); }
KEEP void in_signal_wait(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1);  /* handled as the call returns */
    sink++;
}
static void *handler_main(void *arg) { (void)arg; in_signal_wait(); return NULL; }

static void start(void *(*body)(void *), const char *name) {
    pthread_t t;
    if (pthread_create(&t, NULL, body, NULL) != 0) {
        perror("pthread_create");
        exit(1);
    }
    pthread_setname_np(t, name);
}

volatile unsigned long leaf_a, leaf_b;
KEEP void leaf(volatile unsigned long *count) { (*count)++; }
KEEP void via_a(void) { leaf(&leaf_a); }
KEEP void via_b(void) { leaf(&leaf_b); }

static int callers(long a, long b) {
    unsigned char first = *(volatile unsigned char *)(void *)leaf;
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (int i = 0; i < 30000 && *(volatile unsigned char *)(void *)leaf == first; i++) usleep(1000);
    for (long i = 0; i < a + b; i++) {
        if (i < a) via_a();
        if (i < b) via_b();
    }
    printf("done a=%lu b=%lu\n", leaf_a, leaf_b);
    fflush(stdout);
    for (;;) pause();
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "callers") == 0) return callers(atol(argv[2]), atol(argv[3]));
    if (pipe(pipe_fds) != 0) {
        perror("pipe");
        return 1;
    }
    pthread_mutex_lock(&held);
    start(waiter_main, "waiter");
    start(recurse_main, "recurse");
    start(reader_main, "reader");
    start(spinner_main, "spinner");
    start(handler_main, "handler");
    while (ready_count < 5) usleep(1000);
    usleep(20000); /* the waiter is in the kernel by now, the others too */
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (;;) {
        sleep(1);
        printf("hot=%lu cold=%lu\n", hot_calls, cold_calls);
        fflush(stdout);
    }
}
