// clones-cpp: C++ methods that g++ -O2 -fwhole-program leaves only as clones:
//   rb::Ring::gap(long) const [clone .constprop.0] [clone .isra.0]  (scale is always 2)
//   rb::Ring::push(int) [clone .constprop.0]                         (step is always 3)
// as the issue found in a namespaced class; gdb breaks at them by name and prints `this`.
// Once a second it prints "requests/s=N" (turns of its loop).
#include <cstdio>
#include <ctime>
#include <unistd.h>

namespace rb {
struct Ring {
    unsigned long w = 0, r = 0;
    char name[32] = "cpp ring";
    long pad[8] = {};
    long gap(long scale) const;
    void push(int step);
};
__attribute__((noinline)) long Ring::gap(long scale) const { return (long)(w - r) * scale; }
__attribute__((noinline)) void Ring::push(int step)
{
    for (int i = 0; i < step; i++) {
        w++;
        pad[i & 7] += step;
    }
    if (w - r > 100)
        r += step;
}
}  // namespace rb

static rb::Ring rings[2];

static double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main()
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("ready pid=%d\n", getpid());
    long sum = 0, at_last = 0;
    double last = now();
    for (long i = 0;; i++) {
        rb::Ring *b = &rings[i & 1];
        b->push(3);
        sum += b->gap(2);
        timespec ts{0, 100000};
        nanosleep(&ts, nullptr);
        if (now() - last >= 1.0) {
            std::printf("requests/s=%ld\n", (long)((i - at_last) / (now() - last)));
            at_last = i;
            last = now();
        }
        if (i % 100000 == 0)
            std::printf("sum=%ld\n", sum);
    }
}
