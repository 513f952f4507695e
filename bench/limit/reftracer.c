// reftracer: the least a breakpoint sample can cost, for bench/limit.py to hold
// sampler against. It does the cycle sampler's ptrace backend does, in plain C:
//
//   oneshot: every 1/HZ s write int3 through /proc/PID/mem, wait for the trap,
//            PTRACE_GETREGS, read 16 bytes at the address in REG (process_vm_readv),
//            put the byte back, rewind rip, PTRACE_CONT.
//   everyhit: keep int3 in place; at each trap GETREGS, read, put the byte back,
//            rewind, PTRACE_SINGLESTEP over the instruction, re-arm, PTRACE_CONT.
//
// Only the hitting thread stops (every thread is PTRACE_SEIZEd, new ones follow by
// PTRACE_O_TRACECLONE); other stops are passed on. pause = from waitpid returning
// with the trap to the PTRACE_CONT request (as sampler counts it: the time until the
// request returns also holds the tracer's own preemption by the thread it let go).
// It prints one line:
//   samples=N median_pause_us=X p95_pause_us=Y hits_per_s=Z
// (with REFTRACER_VALUES set, oneshot first prints "value=W" per sample: the first 8 of
// the 16 bytes it read, for bench/stall.py to match each sample to the stall it caused)
//
// usage: reftracer oneshot PID ADDR(hex) REG COUNT HZ
//        reftracer everyhit PID ADDR(hex) REG SECONDS   (SIGINT or SIGTERM ends it sooner, cleanly)
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 2000000

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned long long reg_value(const struct user_regs_struct *r, const char *name) {
    if (!strcmp(name, "rdi")) return r->rdi;
    if (!strcmp(name, "rsi")) return r->rsi;
    if (!strcmp(name, "rax")) return r->rax;
    if (!strcmp(name, "rbx")) return r->rbx;
    fprintf(stderr, "reftracer: unknown register %s\n", name);
    exit(2);
}

static int pid, mem;
static unsigned long addr;
static unsigned char original, int3 = 0xcc;

static void seize_all(void) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d) { perror("reftracer: opendir"); exit(1); }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && ptrace(PTRACE_SEIZE, atoi(e->d_name), 0, PTRACE_O_TRACECLONE) && errno != ESRCH) {
            perror("reftracer: PTRACE_SEIZE");
            exit(1);
        }
    closedir(d);
}

static void detach_all(void) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int tid = atoi(e->d_name), st;
        if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) continue;
        for (;;) {  // serve until this thread reports the interrupt; pass on anything else
            int who = waitpid(tid, &st, __WALL);
            if (who < 0 || !WIFSTOPPED(st)) break;
            if (st >> 16 == PTRACE_EVENT_STOP) break;
            int sig = (st >> 16) ? 0 : WSTOPSIG(st);
            if (sig == SIGTRAP) {  // a trap of ours still in flight: rewind, never deliver it
                struct user_regs_struct r;
                ptrace(PTRACE_GETREGS, tid, 0, &r);
                if (r.rip - 1 == addr) { r.rip -= 1; ptrace(PTRACE_SETREGS, tid, 0, &r); sig = 0; }
            }
            ptrace(PTRACE_CONT, tid, 0, sig);
        }
        ptrace(PTRACE_DETACH, tid, 0, 0);
    }
    if (d) closedir(d);
}

static volatile sig_atomic_t stopping;  // everyhit: SIGINT or SIGTERM ends the run (the byte put back)

static void stop_soon(int sig) { (void)sig; stopping = 1; }

// Wait for the next trap on our address; pass every other stop on. -1: a stop signal came.
static int wait_trap(struct user_regs_struct *r) {
    for (;;) {
        int st, tid = waitpid(-1, &st, __WALL);
        if (tid < 0 && errno == EINTR && stopping) return -1;
        if (tid < 0) { perror("reftracer: waitpid"); exit(1); }
        if (!WIFSTOPPED(st)) {
            if (tid == pid) { fprintf(stderr, "reftracer: the target ended\n"); exit(1); }
            continue;
        }
        int sig = WSTOPSIG(st), event = st >> 16;
        if (event) { ptrace(PTRACE_CONT, tid, 0, 0); continue; }
        if (sig == SIGTRAP) {
            ptrace(PTRACE_GETREGS, tid, 0, r);
            if (r->rip - 1 == addr) return tid;
        }
        ptrace(PTRACE_CONT, tid, 0, sig == SIGTRAP ? 0 : sig);
    }
}

static unsigned long long last_word;  // the first 8 of the 16 bytes last read

static void read_at(unsigned long long where) {
    unsigned char buf[16];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)where, sizeof buf};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof buf)
        memcpy(&last_word, buf, sizeof last_word);
}

// The sample itself: the bytes at the register's address, the byte back, the thread
// rewound onto the original instruction (it is continued or stepped by the caller).
static void take(int tid, struct user_regs_struct *r, const char *reg) {
    read_at(reg_value(r, reg));
    pwrite(mem, &original, 1, addr);
    r->rip -= 1;
    ptrace(PTRACE_SETREGS, tid, 0, r);
}

static void report(double *pause, int n, double seconds) {
    qsort(pause, n, sizeof *pause, by_value);
    printf("samples=%d median_pause_us=%.1f p95_pause_us=%.1f hits_per_s=%.1f\n", n,
           n ? pause[n / 2] : 0.0, n ? pause[n * 95 / 100] : 0.0, seconds > 0 ? n / seconds : 0.0);
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: reftracer oneshot PID ADDR REG COUNT HZ | everyhit PID ADDR REG SECONDS\n");
        return 2;
    }
    int every = !strcmp(argv[1], "everyhit");
    pid = atoi(argv[2]);
    addr = strtoul(argv[3], 0, 16);
    const char *reg = argv[4];
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    mem = open(path, O_RDWR);
    if (mem < 0 || pread(mem, &original, 1, addr) != 1) { perror("reftracer: /proc/PID/mem"); return 1; }
    double *pause = malloc(MAX_SAMPLES * sizeof *pause);
    unsigned long long *words = malloc(MAX_SAMPLES * sizeof *words);
    int print_words = getenv("REFTRACER_VALUES") != NULL;  // bench/stall.py matches samples by them
    struct user_regs_struct r;
    int n = 0;
    seize_all();
    if (!every) {
        int count = atoi(argv[5]), hz = argc > 6 ? atoi(argv[6]) : 10;
        for (; n < count && n < MAX_SAMPLES; n++) {
            usleep(1000000 / hz);
            pwrite(mem, &int3, 1, addr);
            int tid = wait_trap(&r);
            double seen = now_us();
            take(tid, &r, reg);
            pause[n] = now_us() - seen;
            ptrace(PTRACE_CONT, tid, 0, 0);
            words[n] = last_word;
        }
        detach_all();
        for (int i = 0; print_words && i < n; i++)
            printf("value=%llu\n", words[i]);
        report(pause, n, 0);
        return 0;
    }
    double seconds = atof(argv[5]), start = now_us(), end = start + seconds * 1e6;
    struct sigaction stop = {0};
    stop.sa_handler = stop_soon;  // (no SA_RESTART: the wait returns EINTR)
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    pwrite(mem, &int3, 1, addr);
    while (now_us() < end && n < MAX_SAMPLES && !stopping) {
        int tid = wait_trap(&r);
        if (tid < 0) break;
        double seen = now_us();
        take(tid, &r, reg);
        ptrace(PTRACE_SINGLESTEP, tid, 0, 0);
        for (;;) {  // this thread's step; others' stops are passed on meanwhile
            int st, who = waitpid(tid, &st, __WALL);
            if (who < 0 || !WIFSTOPPED(st) || WSTOPSIG(st) == SIGTRAP || (st >> 16)) break;
            ptrace(PTRACE_SINGLESTEP, tid, 0, WSTOPSIG(st));
        }
        pwrite(mem, &int3, 1, addr);
        pause[n++] = now_us() - seen;
        ptrace(PTRACE_CONT, tid, 0, 0);
    }
    pwrite(mem, &original, 1, addr);
    double took = (now_us() - start) / 1e6;
    detach_all();
    report(pause, n, took);
    return 0;
}
