// stall-go: the Go twin of targets/stall/stall.c, for bench/stall.py: a goroutine calls
// probe(&ring) in a tight loop and clocks every call (time.Now, monotonic); probe adds one
// to ring.w, so at its entry ring.w is the call's index (what a tracer reads at the
// breakpoint: 8 bytes at the address in rax, Go's first argument). A call over 5 us is
// kept as (index, ns, start), up to 65,536.
//
//	stall-go [busy]
//
// "busy": one more goroutine spins (GOMAXPROCS is the core count). SIGUSR1 makes the
// calling goroutine print the calls kept since the last one, "long index=N ns=D t0=T",
// then "end long"; SIGUSR2 forgets them. It prints "ready pid=N" and once a second
// "requests/s=N".
package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

type Ring struct {
	w, r uint64
}

var ring Ring

//go:noinline
func probe(b *Ring) {
	b.w++
}

type call struct {
	index uint64
	ns    int64
	t0    int64
}

func main() {
	var dump, forget atomic.Bool
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range signals {
			if s == syscall.SIGUSR1 {
				dump.Store(true)
			} else {
				forget.Store(true)
			}
		}
	}()
	if len(os.Args) > 1 && os.Args[1] == "busy" {
		go func() {
			n := 0
			for {
				n++
			}
		}()
	}
	kept := make([]call, 0, 1<<16)
	start := time.Now()
	fmt.Printf("ready pid=%d\n", os.Getpid())
	last, atLast := time.Since(start), uint64(0)
	for {
		index := ring.w
		t0 := time.Since(start)
		probe(&ring)
		t1 := time.Since(start)
		if t1-t0 > 5*time.Microsecond && len(kept) < cap(kept) {
			kept = append(kept, call{index, int64(t1 - t0), int64(t0)})
		}
		if forget.Load() {
			forget.Store(false)
			kept = kept[:0]
		}
		if dump.Load() {
			dump.Store(false)
			for _, c := range kept {
				fmt.Printf("long index=%d ns=%d t0=%d\n", c.index, c.ns, c.t0)
			}
			fmt.Println("end long")
			kept = kept[:0]
		}
		if t1-last >= time.Second {
			fmt.Printf("requests/s=%d\n", uint64(float64(ring.w-atLast)/(t1-last).Seconds()))
			atLast, last = ring.w, time.Since(start)
		}
	}
}
