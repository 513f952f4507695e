// Go: calls of known length and result (trace --latency), whose goroutine moves between threads
// and whose stack grows mid-call.
//
//	latency-go CALLS   work(i, k): sleeps k x 100 us (k = 1 + i%5), then 20 ms in a blocking system call
//	                   (Go gives its P to another thread meanwhile: the goroutine goes on there), grows
//	                   its stack (a 64 KiB frame, deep), returns 1000*i + k
//
// A busy goroutine keeps the one P wanted (GOMAXPROCS 1). Waits for a tracer's change of work()'s first
// 64 bytes, then writes "call I K NS RESULT" per call (NS: the program's own clock around the call),
// "done calls=N", and waits to be killed.
package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

var sink int

//go:noinline
func deep(n int) int {
	var frame [8192]byte // 8 KiB a level: eight levels grow a new goroutine's stack past 64 KiB
	frame[n%len(frame)] = byte(n)
	if n == 0 {
		return int(frame[0])
	}
	return deep(n-1) + int(frame[n%len(frame)])
}

//go:noinline
func work(i, k int) int {
	time.Sleep(time.Duration(k) * 100 * time.Microsecond)
	// a blocking system call of 20 ms: Go hands the P to another thread meanwhile (a goroutine keeps it
	// busy), and this goroutine goes on, after the call, on that thread
	ts := syscall.Timespec{Nsec: 20_000_000}
	syscall.Nanosleep(&ts, nil)
	sink += deep(8)
	return 1000*i + k
}

func code() []byte {
	entry := reflect.ValueOf(work).Pointer()
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(entry)), 64)...)
}

func main() {
	calls := 20
	if len(os.Args) > 1 {
		fmt.Sscan(os.Args[1], &calls)
	}
	runtime.GOMAXPROCS(1)
	for b := 0; b < 1; b++ {
		go func() {
			for {
				for j := 0; j < 1000000; j++ {
					sink++
				}
				runtime.Gosched()
			}
		}()
	}
	before := code()
	fmt.Printf("ready pid=%d\n", os.Getpid())
	for waited := 0; bytes.Equal(before, code()); waited++ {
		if waited > 60000 {
			fmt.Fprintln(os.Stderr, "latency-go: no tracer came in 60 s")
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	for i := 0; i < calls; i++ { // a new goroutine each call: its stack starts small and grows in work()
		done := make(chan string)
		go func(i, k int) {
			t0 := time.Now()
			r := work(i, k)
			done <- fmt.Sprintf("call %d %d %d %d", i, k, time.Since(t0).Nanoseconds(), r)
		}(i, 1+i%5)
		fmt.Println(<-done)
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Printf("done calls=%d\n", calls)
	select {}
}
