// throws: a C++ program that throws (and catches) exceptions on command, for libstdc++'s USDT
// probes (libstdcxx:throw, libstdcxx:catch). Each line "N" on stdin throws N exceptions, each
// caught, then prints "threw N caught=C" (C: caught since the start). It prints "ready pid=P" first.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>

__attribute__((noinline)) static void fail(long i) {
    throw std::runtime_error("step " + std::to_string(i));
}

int main() {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("ready pid=%d\n", getpid());
    long caught = 0;
    char line[64];
    while (std::fgets(line, sizeof line, stdin)) {
        long n = std::atol(line);
        for (long k = 0; k < n; k++) {
            try {
                fail(k);
            } catch (const std::exception &) {
                caught++;
            }
        }
        std::printf("threw %ld caught=%ld\n", n, caught);
    }
    return 0;
}
