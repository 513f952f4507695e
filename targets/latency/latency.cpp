// C++: calls of known length and result; every third call's work() throws through its frame.
//
//   latency-cpp CALLS   work(i, k): busy k x 100 us (k = 1 + i % 5), returns 1000 * i + k, or throws
//                       std::runtime_error when i % 3 == 2 (caught in main)
//
// As targets/latency/latency.c: waits for a tracer's change of work()'s first 64 bytes, then writes
// "call I K NS RESULT" or "threw I K NS" per call, "done calls=N threw=T", and waits to be killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

using Clock = std::chrono::steady_clock;

static void busy_us(long us) {
    auto end = Clock::now() + std::chrono::microseconds(us);
    while (Clock::now() < end) {
    }
}

__attribute__((noinline)) long work(long i, long k) {
    busy_us(100 * k);
    if (i % 3 == 2)
        throw std::runtime_error("every third call");
    return 1000 * i + k;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: latency-cpp CALLS\n");
        return 2;
    }
    long calls = std::atol(argv[1]);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    unsigned char before[64];
    const void *function = reinterpret_cast<const void *>(&work);
    std::memcpy(before, function, sizeof before);
    std::printf("ready pid=%d\n", getpid());
    for (int waited = 0; std::memcmp(before, function, sizeof before) == 0; waited++) {
        if (waited > 60000) {
            std::fprintf(stderr, "latency-cpp: no tracer came in 60 s\n");
            return 1;
        }
        usleep(1000);
    }
    long threw = 0;
    for (long i = 0; i < calls; i++) {
        long k = 1 + i % 5;
        auto t0 = Clock::now();
        try {
            long r = work(i, k);
            long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
            std::printf("call %ld %ld %lld %ld\n", i, k, ns, r);
        } catch (const std::runtime_error &) {
            long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
            std::printf("threw %ld %ld %lld\n", i, k, ns);
            threw++;
        }
        usleep(2000);
    }
    std::printf("done calls=%ld threw=%ld\n", calls, threw);
    for (;;)
        pause();
}
