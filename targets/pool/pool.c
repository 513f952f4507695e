/* pool: a pre-fork server in miniature, as nginx, gunicorn and PostgreSQL run: a parent that
 * forks workers and forks a new one whenever one ends.
 *
 *   pool WORKERS PERIOD_US
 *
 * Each worker calls handle(n) every PERIOD_US microseconds, n counting its calls from 0. On
 * SIGUSR1 a worker stops, prints "worker PID handled N" (N: its calls) and exits 0; the parent
 * then forks a new one and prints "spawned pid=C". On SIGTERM the parent stops forking, sends
 * SIGUSR1 to every worker, waits for them and prints "pool done bad=B" (B: workers that did not
 * exit 0), then exits. The parent prints "ready pid=N" once the first workers run and, once a
 * second, "requests/s=N": the calls of every worker in that second (counters in shared memory).
 * never() is never called: a breakpoint there stays in. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MOST 1024

static volatile sig_atomic_t stop_now;
static volatile long *counters; /* calls of handle(), per worker slot */

static void on_signal(int sig)
{
    (void)sig;
    stop_now = 1;
}

__attribute__((noinline)) long handle(long n)
{
    __asm__ volatile("" ::: "memory");
    return n + 1;
}

/* Never called: a breakpoint there stays in every process all the time. */
__attribute__((noinline)) long never(long n)
{
    __asm__ volatile("" ::: "memory");
    return n - 1;
}
long (*volatile keep_never)(long) = never;

static void worker(int slot, long period_us)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGTERM, SIG_DFL);
    long n = 0;
    struct timespec pause = {period_us / 1000000, (period_us % 1000000) * 1000};
    while (!stop_now) {
        if (handle(n) != n + 1)
            _exit(3);
        n++;
        counters[slot]++;
        nanosleep(&pause, NULL);
    }
    printf("worker %d handled %ld\n", getpid(), n);
    fflush(stdout);
    _exit(0);
}

static pid_t spawn(int slot, long period_us)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        worker(slot, period_us);
    return pid;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pool WORKERS PERIOD_US\n");
        return 2;
    }
    int workers = atoi(argv[1]);
    long period_us = atol(argv[2]);
    if (workers < 1 || workers > MOST || period_us < 1) {
        fprintf(stderr, "pool: 1 to %d workers, a period of 1 us or more\n", MOST);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    counters = mmap(NULL, sizeof(long) * MOST, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (counters == MAP_FAILED)
        return 1;
    pid_t pids[MOST];
    for (int i = 0; i < workers; i++)
        pids[i] = spawn(i, period_us);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    printf("ready pid=%d\n", getpid());
    long bad = 0, last = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!stop_now) {
        int status;
        pid_t ended = waitpid(-1, &status, WNOHANG);
        if (ended > 0) {
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                bad++;
                printf("worker %d ended badly: status %d\n", ended, status);
            }
            for (int i = 0; i < workers; i++)
                if (pids[i] == ended) {
                    pids[i] = spawn(i, period_us);
                    printf("spawned pid=%d\n", pids[i]);
                }
            continue;
        }
        usleep(10000);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= 1) {
            long total = 0;
            for (int i = 0; i < workers; i++)
                total += counters[i];
            printf("requests/s=%ld\n", total - last);
            last = total;
            start.tv_sec += 1;
        }
    }
    for (int i = 0; i < workers; i++)
        kill(pids[i], SIGUSR1);
    int status;
    pid_t ended;
    while ((ended = wait(&status)) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
            printf("worker %d ended badly: status %d\n", ended, status);
        }
    printf("pool done bad=%ld\n", bad);
    return bad ? 1 : 0;
}
