/* forker: a program that starts processes while it is sampled, and counts how they end.
 *
 *   forker MODE PERIOD_MS SECONDS
 *
 * Every PERIOD_MS the parent calls spawn(i), which starts a child in one of these ways
 * (MODE), and calls work(i) itself:
 *   fork   spawn forks; the child calls work() three times and exits 0
 *   vfork  spawn vforks; the child calls work() once and _exits 0 (it shares the
 *          parent's memory: a breakpoint there is live for it)
 *   exec   spawn forks; the child calls work() and execs /bin/true
 *   vexec  spawn vforks; the child execs /bin/true at once (as posix_spawn does)
 *   mixed  each of the above in turn
 * A child that calls work() checks its answer: a wrong one exits 3. The program the
 * children exec is $FORKER_EXEC (default /bin/true); its exit status is theirs. The parent reaps its
 * children as they end; after SECONDS it waits for the last ones, prints
 *   children forked=N ok=N bad=N
 * (bad: a child killed by a signal or exiting non-zero, each also printed as
 * "child PID signal S forked T by M" / "child PID status S forked T by M", T the
 * CLOCK_MONOTONIC seconds of its fork, M how it was started) and exits 0 when no child went bad, else 1. The children also
 * call child_only(), which the parent never calls.
 * SIGUSR1 ends the loop early, as if SECONDS had passed (tests that must outlive a run of
 * sampler start it with a long SECONDS and end it so).
 * Once a second it prints "requests/s=N" (calls of work in the parent), as the other
 * targets print their throughput. A rarely hit function, tick(), is called each second. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile long calls;  /* calls of work() in this process */
static const char *program = "/bin/true";
static long forked, ok, bad;
static volatile sig_atomic_t stop_now;

static void on_usr1(int sig)
{
    (void)sig;
    stop_now = 1;
}

__attribute__((noinline)) long work(long i)
{
    calls++;
    __asm__ volatile("" ::: "memory");
    return i * 2 + 1;
}

/* Called by the children only, never by the parent. */
__attribute__((noinline)) long child_only(long i)
{
    __asm__ volatile("" ::: "memory");
    return i + calls * 0;
}

__attribute__((noinline)) long tick(long second)
{
    __asm__ volatile("" ::: "memory");
    return second + calls * 0;
}

static void child_body(long i, int times)
{
    for (int k = 0; k < times; k++)
        if (work(i) != i * 2 + 1 || child_only(i) != i)
            _exit(3);
}

/* Starts one child: the fork happens inside the sampled function when --at spawn. */
__attribute__((noinline)) pid_t spawn(long i, const char *mode)
{
    pid_t pid;
    if (strcmp(mode, "vfork") == 0) {
        pid = vfork();
        if (pid == 0) {
            child_body(i, 1);
            _exit(0);
        }
    } else if (strcmp(mode, "vexec") == 0) {
        pid = vfork();
        if (pid == 0) {
            execl(program, program, (char *)NULL);
            _exit(4);
        }
    } else {
        pid = fork();
        if (pid == 0) {
            child_body(i, strcmp(mode, "exec") == 0 ? 1 : 3);
            if (strcmp(mode, "exec") == 0) {
                execl(program, program, (char *)NULL);
                _exit(4);
            }
            _exit(0);
        }
    }
    return pid;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double forked_at[1 << 16];  /* by PID, modulo: when each child was forked */
static const char *forked_how[1 << 16];  /* by PID, modulo: fork, vfork, exec or vexec */

static void reap(int flags)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, flags)) > 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            ok++;
        } else {
            bad++;
            printf("child %d %s %d forked %.6f by %s\n", pid, WIFSIGNALED(status) ? "signal" : "status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), forked_at[pid & 0xffff],
                   forked_how[pid & 0xffff]);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    static const char *mixed[] = {"fork", "vfork", "exec", "vexec"};
    if (argc != 4) {
        fprintf(stderr, "usage: forker fork|vfork|exec|vexec|mixed PERIOD_MS SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    long period_us = atol(argv[2]) * 1000;
    double seconds = atof(argv[3]);
    if (getenv("FORKER_EXEC"))
        program = getenv("FORKER_EXEC");
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGUSR1, on_usr1);
    printf("ready pid=%d\n", getpid());
    double start = now(), last = start;
    long at_last = 0, second = 0;
    for (long i = 0; !stop_now && now() - start < seconds; i++) {
        const char *m = strcmp(mode, "mixed") == 0 ? mixed[i % 4] : mode;
        double at = now();
        pid_t pid = spawn(i, m);
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        forked_at[pid & 0xffff] = at;
        forked_how[pid & 0xffff] = m;
        forked++;
        work(i);
        reap(WNOHANG);
        usleep(period_us);
        if (now() - last >= 1.0) {
            tick(++second);
            printf("requests/s=%ld\n", (long)((calls - at_last) / (now() - last)));
            at_last = calls;
            last = now();
        }
    }
    reap(0);
    printf("children forked=%ld ok=%ld bad=%ld\n", forked, ok, bad);
    return bad ? 1 : 0;
}
