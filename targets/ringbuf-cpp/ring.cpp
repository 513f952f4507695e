// ringbuf-cpp: the ring buffer in C++, for sampler's tests of C++ names and values:
// a class in a namespace (rb::Ring) with std::atomic indexes and a std::string name,
// one writer and one reader thread; prints like ringbuf-c.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

namespace rb {

class Ring {
public:
    explicit Ring(uint64_t capacity) : capacity(capacity), buf(new uint64_t[capacity]), name("ring-cpp") {}
    __attribute__((noinline)) bool write(uint64_t v);
    __attribute__((noinline)) bool read(uint64_t *v);
    __attribute__((noinline)) uint64_t tick(uint64_t second);
    __attribute__((noinline)) uint64_t size() const { return w.load() - r.load(); }

    std::atomic<uint64_t> r{0};
    std::atomic<uint64_t> w{0};
    uint64_t capacity;
    uint64_t *buf;
    std::string name;
};

bool Ring::write(uint64_t v)
{
    uint64_t at = w.load(std::memory_order_relaxed);
    if (at - r.load(std::memory_order_acquire) >= capacity)
        return false;
    buf[at % capacity] = v;
    w.store(at + 1, std::memory_order_release);
    return true;
}

bool Ring::read(uint64_t *v)
{
    uint64_t at = r.load(std::memory_order_relaxed);
    if (at == w.load(std::memory_order_acquire))
        return false;
    *v = buf[at % capacity];
    r.store(at + 1, std::memory_order_release);
    return true;
}

uint64_t Ring::tick(uint64_t second)
{
    __asm__ volatile("" ::: "memory");
    return w.load() - r.load() + second * 0;
}

// a second "size" in the program: `--at size` is ambiguous
__attribute__((noinline)) uint64_t size(const Ring &b)
{
    return b.size();
}

} // namespace rb

rb::Ring *ring;
static std::atomic<uint64_t> reads, writes;

int main()
{
    ring = new rb::Ring(20000);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    std::thread writer([] {
        for (uint64_t v = 0;;) {
            if (ring->write(v)) {
                v++;
                writes++;
            } else {
                std::this_thread::yield();
            }
        }
    });
    std::thread reader([] {
        for (uint64_t v;;) {
            if (ring->read(&v))
                reads++;
            else
                std::this_thread::yield();
        }
    });
    printf("ready pid=%d\n", (int)getpid());
    uint64_t last_r = 0, last_w = 0;
    for (uint64_t second = 1;; second++) {
        sleep(1);
        uint64_t r = reads, w = writes;
        ring->tick(second);
        rb::size(*ring);
        printf("reads/s=%llu writes/s=%llu\n", (unsigned long long)(r - last_r), (unsigned long long)(w - last_w));
        last_r = r;
        last_w = w;
    }
}
