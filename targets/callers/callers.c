/* callers: threads that call one function at the same moment, counting their calls, to
 * check that an every-hit trace counts exactly what the program counts itself.
 *
 *   callers THREADS CALLS FUNCTION [RATE]
 *
 * FUNCTION is hot or warm (plain functions of this program; warm's first instructions take a 5-byte
 * jump), paired (given a pointer to {i, 3 * i} and i, on the caller's stack; at every i % 1000 == 999
 * the pointer is 16, which paired does not follow: an expression reading through it must fail alone)
 * or one of glibc's read, write,
 * send, recv, close, openat, malloc, free. THREADS threads are made and wait at a
 * barrier; the main thread waits until FUNCTION's first 64 bytes change (a tracer
 * wrote its breakpoint there; at most 30 s), then lets them go. Each thread calls
 * FUNCTION CALLS times (at most RATE times a second, where RATE is given: it sleeps 0.1 ms whenever
 * it is ahead, and never runs more than 1 ms of calls at once to catch up). Then it prints "done calls=N" (N: the calls of FUNCTION made by
 * the threads) and waits to be killed. The program's own output is written with the raw
 * system call, so that it never calls a traced wrapper itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_barrier_t barrier;
static long per_thread;
static long rate;
static const char *function;
static long total;
volatile long sink;
static __thread void *volatile kept;

__attribute__((noinline)) long hot(long i)
{
    __asm__ volatile("" ::: "memory");
    return i + 1;
}

/* as hot, with a first instruction long enough for an in-process probe's 5-byte jump */
__attribute__((noinline)) long warm(long i)
{
    long r = i;
    __asm__ volatile("" : "+r"(r));
    return r * 7 + 3;
}

struct pair {
    long a, b;
};

/* reads its pair only where the pointer is good */
__attribute__((noinline)) long paired(struct pair *p, long i)
{
    long r = i;
    __asm__ volatile("" : "+r"(r));
    if (i % 1000 == 999)
        return r;
    return p->a + p->b + r;
}

static void say(const char *text)
{
    syscall(SYS_write, 1, text, strlen(text));
}

struct files {
    int null, zero, pair[2];
};

static void *caller(void *arg)
{
    struct files *f = arg;
    int null = f->null, zero = f->zero, pair[2] = {f->pair[0], f->pair[1]};
    char byte = 'x';
    long made = 0;
    pthread_barrier_wait(&barrier);
    struct timespec began, now, nap = {0, 100000};
    long paced_from = 0;
    clock_gettime(CLOCK_MONOTONIC, &began);
    for (long i = 0; i < per_thread; i++) {
        while (rate && i % 256 == 0) {  /* paced: RATE a second, never catching up more than 1 ms */
            clock_gettime(CLOCK_MONOTONIC, &now);
            double elapsed = (now.tv_sec - began.tv_sec) + (now.tv_nsec - began.tv_nsec) / 1e9;
            if (elapsed * rate - (i - paced_from) > rate / 1000.0) {  /* behind (it was stopped): from here on */
                began = now;
                began.tv_nsec -= 1000000;
                if (began.tv_nsec < 0) {
                    began.tv_sec -= 1;
                    began.tv_nsec += 1000000000;
                }
                paced_from = i - rate / 1000;
                elapsed = 0.001;
            }
            if (i - paced_from <= elapsed * rate)
                break;
            syscall(SYS_nanosleep, &nap, NULL);
        }
        if (strcmp(function, "hot") == 0) {
            sink += hot(i);
        } else if (strcmp(function, "warm") == 0) {
            sink += warm(i);
        } else if (strcmp(function, "paired") == 0) {
            struct pair pair = {i, 3 * i};
            __asm__ volatile("" : : "r"(&pair) : "memory");
            sink += paired(i % 1000 == 999 ? (struct pair *)16 : &pair, i);
        } else if (strcmp(function, "write") == 0) {
            write(null, &byte, 1);
        } else if (strcmp(function, "read") == 0) {
            read(zero, &byte, 1);
        } else if (strcmp(function, "send") == 0) {
            send(pair[0], &byte, 1, 0);
            syscall(SYS_read, pair[1], &byte, 1);
        } else if (strcmp(function, "recv") == 0) {
            syscall(SYS_write, pair[0], &byte, 1);
            recv(pair[1], &byte, 1, 0);
        } else if (strcmp(function, "close") == 0) {
            close((int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY));
        } else if (strcmp(function, "openat") == 0) {
            syscall(SYS_close, openat(AT_FDCWD, "/dev/null", O_RDONLY));
        } else if (strcmp(function, "malloc") == 0) {
            kept = malloc(32);  /* through a volatile pointer: not optimised away */
            free(kept);
        } else if (strcmp(function, "free") == 0) {
            kept = malloc(48);
            free(kept);
        }
        made++;
    }
    __atomic_add_fetch(&total, made, __ATOMIC_SEQ_CST);
    for (;;)  /* not ending: a thread's end calls free() and the like itself */
        syscall(SYS_pause);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        say("usage: callers THREADS CALLS FUNCTION [RATE]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    per_thread = atol(argv[2]);
    function = argv[3];
    rate = argc == 5 ? atol(argv[4]) : 0;
    void *address = strcmp(function, "hot") == 0 ? (void *)hot : strcmp(function, "warm") == 0 ? (void *)warm
        : strcmp(function, "paired") == 0 ? (void *)paired : dlsym(RTLD_DEFAULT, function);
    if (address == NULL) {
        say("callers: unknown function\n");
        return 2;
    }
    unsigned char before[64];
    memcpy(before, address, sizeof before);
    pthread_barrier_init(&barrier, NULL, threads + 1);
    pthread_t *ids = calloc(threads, sizeof *ids);
    struct files *files = calloc(threads, sizeof *files);
    for (int t = 0; t < threads; t++) {  /* before the tracer comes: it may trace openat */
        files[t].null = open("/dev/null", O_WRONLY);
        files[t].zero = open("/dev/zero", O_RDONLY);
        socketpair(AF_UNIX, SOCK_STREAM, 0, files[t].pair);
        pthread_create(&ids[t], NULL, caller, &files[t]);
    }
    char line[96];
    snprintf(line, sizeof line, "ready pid=%d\n", getpid());
    say(line);
    struct timespec pause = {0, 1000000};
    for (int waited = 0; memcmp(before, address, sizeof before) == 0; waited++) {
        if (waited > 30000) {
            say("callers: no breakpoint came within 30 s\n");
            return 1;
        }
        syscall(SYS_nanosleep, &pause, NULL);
    }
    pthread_barrier_wait(&barrier);
    while (__atomic_load_n(&total, __ATOMIC_SEQ_CST) < (long)threads * per_thread)
        syscall(SYS_nanosleep, &pause, NULL);
    snprintf(line, sizeof line, "done calls=%ld\n", total);
    say(line);
    for (;;)
        syscall(SYS_pause);
}
