// ringbuf is a small program for sampler to measure: a ring buffer with one
// writer goroutine and one reader goroutine. With --bug, the writer's "full"
// check is off by one, so the writer overruns the reader and w-r reaches
// capacity+1: the bug sampler exists to find.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Ring is a single-producer single-consumer ring buffer. r and w count the
// items read and written since the start; w-r is the fill level.
type Ring struct {
	r   uint64
	w   uint64
	buf []uint64
	bug bool
	// for sampler's tests of Go values: a string, a map and a channel
	name   string
	tags   map[string]int
	events chan uint64
}

var ring *Ring

// Write appends v, or reports false when the ring is full.
//
//go:noinline
func (b *Ring) Write(v uint64) bool {
	w := atomic.LoadUint64(&b.w)
	r := atomic.LoadUint64(&b.r)
	limit := uint64(len(b.buf))
	if b.bug {
		limit++ // the off-by-one: lets the writer overrun the reader by one slot
	}
	if w-r >= limit {
		return false
	}
	b.buf[w%uint64(len(b.buf))] = v
	atomic.StoreUint64(&b.w, w+1)
	return true
}

// Read takes the oldest item, or reports false when the ring is empty.
//
//go:noinline
func (b *Ring) Read() (uint64, bool) {
	r := atomic.LoadUint64(&b.r)
	w := atomic.LoadUint64(&b.w)
	if r == w {
		return 0, false
	}
	v := b.buf[r%uint64(len(b.buf))]
	atomic.StoreUint64(&b.r, r+1)
	return v, true
}

// Tick is called once a second by the reporter: a rarely hit function.
//
//go:noinline
func Tick(b *Ring, second uint64) uint64 {
	return atomic.LoadUint64(&b.w) - atomic.LoadUint64(&b.r) + second*0
}

// Never is only called when RINGBUF_NEVER=call: a breakpoint there is never hit.
//
//go:noinline
func Never(b *Ring) uint64 {
	return atomic.LoadUint64(&b.w)
}

func main() {
	capacity := flag.Int("capacity", 20000, "number of slots in the ring")
	bug := flag.Bool("bug", false, "put an off-by-one into the writer's full check")
	exitAfter := flag.Uint64("exit-after", 0, "exit (status 0) after this many seconds; 0: run until killed")
	flag.Parse()
	if *capacity < 1 {
		fmt.Fprintln(os.Stderr, "ringbuf: --capacity must be at least 1")
		os.Exit(2)
	}
	ring = &Ring{buf: make([]uint64, *capacity), bug: *bug, name: "ring-go",
		tags: map[string]int{"a": 1, "b": 2, "c": 3}, events: make(chan uint64, 8)}
	ring.events <- 1
	ring.events <- 2
	ring.events <- 3
	if os.Getenv("RINGBUF_BANNER") != "" {
		fmt.Println(banner)
	}
	var reads, writes uint64

	go func() {
		var v uint64
		for {
			if ring.Write(v) {
				v++
				atomic.AddUint64(&writes, 1)
			} else {
				runtime.Gosched()
			}
		}
	}()
	go func() {
		for {
			if _, ok := ring.Read(); ok {
				atomic.AddUint64(&reads, 1)
			} else {
				runtime.Gosched()
			}
		}
	}()

	fmt.Printf("ready pid=%d\n", os.Getpid())
	never := os.Getenv("RINGBUF_NEVER") == "call"
	var lastR, lastW uint64
	for second := uint64(1); ; second++ {
		time.Sleep(time.Second)
		r, w := atomic.LoadUint64(&reads), atomic.LoadUint64(&writes)
		Tick(ring, second)
		if never {
			Never(ring)
		}
		fmt.Printf("reads/s=%d writes/s=%d\n", r-lastR, w-lastW)
		lastR, lastW = r, w
		if second == *exitAfter {
			fmt.Println("exiting")
			os.Exit(0)
		}
	}
}

// banner holds what Delve's terminal prints as its prompt, after a newline: for the
// test that no value can fake a prompt or a column.
var banner = "a\n(dlv) n=b"
