/* emulate: functions that start with each kind of instruction sampler's ptrace backend
 * runs without a single-step (sampler/backends/ptrace/emulate.py), called with inputs that
 * set every arithmetic flag, so that a trace with SAMPLER_CHECK_EMULATION=1 compares each
 * emulation with what the CPU does (tests/integration/test_emulate.py).
 *
 *   emulate THREADS CALLS
 *
 * THREADS threads wait for SIGUSR1, then each calls every function CALLS times, and the
 * program prints "sum=S" (what the functions returned, added up: with one thread the same at every run)
 * and "done calls=N" (N: the calls of each function) and waits to be killed.
 * Built without -g: a breakpoint by name goes to the first instruction. The f_*_at
 * symbols name an instruction inside a function (a store to and a load from its frame). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

unsigned char flag_byte;

#define FN(name, body) \
    __asm__(".text\n.globl " #name "\n.type " #name ",@function\n" #name ":\n" body "\n.size " #name ",.-" #name "\n")

FN(f_endbr, "endbr64\n mov %rdi,%rax\n ret");
FN(f_nop, "nopl 0x0(%rax,%rax,1)\n mov %rdi,%rax\n ret");
FN(f_push, "push %rbx\n mov %rdi,%rax\n pop %rbx\n ret");
FN(f_push_r15, "push %r15\n pop %r15\n mov %rsi,%rax\n ret");
FN(f_sub_rsp, "sub $0x18,%rsp\n add $0x18,%rsp\n mov %rdi,%rax\n ret");
FN(f_mov, "mov %rdi,%rax\n ret");
FN(f_mov32, "mov %edi,%eax\n ret");
FN(f_mov8, "mov %sil,%dil\n mov %rdi,%rax\n ret");
FN(f_mov_imm, "mov $0x12345,%eax\n add %rdi,%rax\n ret");
FN(f_movabs, "movabs $0x123456789abcdef0,%rax\n xor %rdi,%rax\n ret");
FN(f_lea, "lea 0x10(%rdi,%rsi,4),%rax\n ret");
FN(f_lea_rip, "lea f_lea(%rip),%rax\n add %rdi,%rax\n ret");
FN(f_xor, "xor %eax,%eax\n add %rdi,%rax\n ret");
FN(f_add, "add %rsi,%rdi\n sbb %rax,%rax\n ret");
FN(f_add32, "add %esi,%edi\n seto %al\n movzbl %al,%eax\n add %rdi,%rax\n ret");
FN(f_sub, "sub %rsi,%rdi\n seto %al\n movzbl %al,%eax\n ret");
FN(f_sub_imm, "sub $0x7f,%rdi\n setp %al\n movzbl %al,%eax\n ret");
FN(f_cmp, "cmp %rsi,%rdi\n sbb %rax,%rax\n ret");
FN(f_cmp_imm, "cmp $-5,%edi\n setl %al\n movzbl %al,%eax\n ret");
FN(f_cmp8, "cmp $0x80,%dil\n seta %al\n movzbl %al,%eax\n ret");
FN(f_test, "test %rsi,%rdi\n sete %al\n movzbl %al,%eax\n ret");
FN(f_test8, "test $0x40,%dil\n setne %al\n movzbl %al,%eax\n ret");
FN(f_and, "and $0xf0f0,%rdi\n mov %rdi,%rax\n ret");
FN(f_or, "or %esi,%edi\n sets %al\n movzbl %al,%eax\n ret");
FN(f_cmpb_mem, "cmpb $0x0,flag_byte(%rip)\n sete %al\n movzbl %al,%eax\n ret");
FN(f_ret, "ret");
FN(f_store, "sub $0x18,%rsp\n .globl f_store_at\n f_store_at:\n mov %rdi,0x8(%rsp)\n mov 0x8(%rsp),%rax\n"
            " add $0x18,%rsp\n ret");
FN(f_load, "sub $0x18,%rsp\n mov %rsi,0x10(%rsp)\n .globl f_load_at\n f_load_at:\n mov 0x10(%rsp),%eax\n"
           " add $0x18,%rsp\n ret");
__asm__(".type f_store_at,@function\n.size f_store_at,8\n.type f_load_at,@function\n.size f_load_at,8\n");

typedef long (*function)(long, long);
long f_endbr(long, long), f_nop(long, long), f_push(long, long), f_push_r15(long, long), f_sub_rsp(long, long),
    f_mov(long, long), f_mov32(long, long), f_mov8(long, long), f_mov_imm(long, long), f_movabs(long, long),
    f_lea(long, long), f_lea_rip(long, long), f_xor(long, long), f_add(long, long), f_add32(long, long),
    f_sub(long, long), f_sub_imm(long, long), f_cmp(long, long), f_cmp_imm(long, long), f_cmp8(long, long),
    f_test(long, long), f_test8(long, long), f_and(long, long), f_or(long, long), f_cmpb_mem(long, long),
    f_ret(long, long), f_store(long, long), f_load(long, long);
static const function functions[] = {
    f_endbr, f_nop, f_push, f_push_r15, f_sub_rsp, f_mov, f_mov32, f_mov8, f_mov_imm, f_movabs, f_lea, f_lea_rip,
    f_xor, f_add, f_add32, f_sub, f_sub_imm, f_cmp, f_cmp_imm, f_cmp8, f_test, f_test8, f_and, f_or, f_cmpb_mem,
    f_ret, f_store, f_load,
};
#define FUNCTIONS (sizeof functions / sizeof functions[0])

/* Values at the edges of signed and unsigned arithmetic, mixed with random ones. */
static const unsigned long edges[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000, 0x7fffffffffffffff,
    0x8000000000000000, 0xffffffffffffffff, 0xfffffffffffffffb, 0x0f, 0x10, 0x40,
};
#define EDGES (sizeof edges / sizeof edges[0])

static long calls;
static volatile long sink;
static volatile sig_atomic_t go;
static pthread_barrier_t finished;

static unsigned long next(unsigned long *state)
{
    unsigned long x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x % 3 == 0 ? edges[(x >> 8) % EDGES] : x >> (x % 64);
}

static void *caller(void *arg)
{
    unsigned long state = 0x9e3779b97f4a7c15UL * ((unsigned long)arg + 1);
    while (!go)
        usleep(1000);
    for (long i = 0; i < calls; i++) {
        flag_byte = (unsigned char)i;
        for (unsigned f = 0; f < FUNCTIONS; f++)
            sink += functions[f]((long)next(&state), (long)next(&state));
    }
    pthread_barrier_wait(&finished);
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    go = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: emulate THREADS CALLS\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    calls = atol(argv[2]);
    signal(SIGUSR1, on_usr1);
    pthread_barrier_init(&finished, NULL, threads + 1);
    for (long t = 0; t < threads; t++) {
        pthread_t id;
        pthread_create(&id, NULL, caller, (void *)t);
    }
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    pthread_barrier_wait(&finished);
    printf("sum=%lx\n", (unsigned long)sink); /* (one thread: the same at every run, traced or not) */
    printf("done calls=%ld\n", calls * threads);
    fflush(stdout);
    for (;;)
        pause();
}
