/* eintr: counts the EINTRs its blocking system calls get, for sampler's test that a trace
 * leaves a thread blocked in one alone (tests/integration/test_eintr.py).
 *
 * Three threads block for good: in epoll_wait (never restarted after a stop: signal(7)),
 * in poll, and in sigtimedwait (also never restarted); each counts into `eintrs` every time
 * its call returns EINTR, and blocks again. The main thread calls work() in a loop, sleeping
 * 1 ms between calls, and prints "requests/s=N" once a second. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t eintrs;  /* EINTRs the blocked threads got */
volatile uint64_t calls;   /* calls of work() */
static int fds[2];

__attribute__((noinline)) uint64_t work(volatile uint64_t *counter)
{
    /* a locked instruction first: one sampler single-steps, holding the other threads */
    __asm__ volatile("lock incq (%0)" : : "r"(counter) : "memory");
    return *counter;
}

static void *in_epoll(void *arg)
{
    (void)arg;
    int ep = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &event);
    for (;;) {
        if (epoll_wait(ep, &event, 1, -1) < 0 && errno == EINTR)
            __atomic_add_fetch(&eintrs, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *in_poll(void *arg)
{
    (void)arg;
    struct pollfd one = {.fd = fds[0], .events = POLLIN};
    for (;;) {
        if (poll(&one, 1, -1) < 0 && errno == EINTR)
            __atomic_add_fetch(&eintrs, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *in_sigwait(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        if (sigtimedwait(&set, NULL, NULL) < 0 && errno == EINTR)
            __atomic_add_fetch(&eintrs, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (pipe(fds) != 0)
        return 1;
    pthread_t a, b, c;
    pthread_create(&a, NULL, in_epoll, NULL);
    pthread_create(&b, NULL, in_poll, NULL);
    pthread_create(&c, NULL, in_sigwait, NULL);
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    struct timespec pause = {0, 1000000}, last, now;
    clock_gettime(CLOCK_MONOTONIC, &last);
    uint64_t before = 0;
    for (;;) {
        work(&calls);
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > last.tv_sec) {
            printf("requests/s=%llu\n", (unsigned long long)(calls - before));
            fflush(stdout);
            before = calls;
            last = now;
        }
    }
}
