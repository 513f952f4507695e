// Threads with known stacks in C++ (issue 35): the C target's shapes in classes, a template and a lambda.
//
//   waiter   st::Chain::level1 -> level2 -> level3 -> std::mutex::lock (main holds it for good)
//   recurse  st::recurse<int>(10) -> ... -> (0) -> st::bottom -> nanosleep
//   reader   st::Input::read_input -> read (a pipe nobody writes)
//   spinner  st::spin -> st::hot / st::cold (3:1)
//
// Each thread is named; "ready pid=N" once every thread is where it stays.
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#define KEEP __attribute__((noinline, optimize("no-optimize-sibling-calls")))

namespace st {

std::mutex held;
int pipe_fds[2];
std::atomic<int> ready{0};
std::atomic<unsigned long> hot_calls{0}, cold_calls{0};
volatile unsigned long sink;

void sleep_for_good() {
    for (;;) {
        timespec t{3600, 0};
        nanosleep(&t, nullptr);
    }
}

struct Chain {
    KEEP void level3() {
        ready++;
        std::lock_guard<std::mutex> lock(held);
        sink++;
    }
    KEEP void level2() { level3(); sink++; }
    KEEP void level1() { level2(); sink++; }
};

KEEP void bottom() { ready++; sleep_for_good(); }

template <typename T>
KEEP T recurse(T n) {
    if (n == 0) {
        bottom();
        return 0;
    }
    T r = recurse<T>(n - 1);
    return r + n;
}

struct Input {
    KEEP void read_input() {
        char c;
        ready++;
        while (::read(pipe_fds[0], &c, 1) > 0) {
        }
    }
};

KEEP void hot() { for (int i = 0; i < 3000; i++) sink = sink + i; hot_calls++; }
KEEP void cold() { for (int i = 0; i < 1000; i++) sink = sink + i; cold_calls++; }
KEEP void spin() {
    ready++;
    for (;;) {
        hot();
        cold();
    }
}

}  // namespace st

static void named(std::thread &t, const char *name) { pthread_setname_np(t.native_handle(), name); }

int main() {
    if (pipe(st::pipe_fds) != 0) return 1;
    st::held.lock();
    std::thread waiter([] { st::Chain().level1(); });
    std::thread recurser([] { st::sink = st::sink + st::recurse<int>(10); });
    std::thread reader([] { st::Input().read_input(); });
    std::thread spinner(st::spin);
    named(waiter, "waiter");
    named(recurser, "recurse");
    named(reader, "reader");
    named(spinner, "spinner");
    while (st::ready < 4) usleep(1000);
    usleep(20000);
    std::printf("ready pid=%d\n", getpid());
    std::fflush(stdout);
    for (;;) {
        sleep(1);
        std::printf("hot=%lu cold=%lu\n", st::hot_calls.load(), st::cold_calls.load());
        std::fflush(stdout);
    }
}
