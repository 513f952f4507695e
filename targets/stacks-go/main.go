// Goroutines with known stacks, for sampler stack and profile (issue 35):
//
//	chanWait    level1 -> level2 -> level3 -> <-ch (nothing is ever sent)
//	mutexWait   lockIt -> mu.Lock() (main holds mu for good)
//	timerWait   nap -> time.Sleep(1h)
//	recurse     recurse(10) -> ... -> recurse(0) -> select {} (no cases)
//	spin        spin -> hot() and cold() (their time 3:1), on a thread of its own
//
// It prints "ready pid=N" once every goroutine is where it stays, then "hot=N cold=M" each second.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var (
	mu        sync.Mutex
	ch        = make(chan int)
	ready     sync.WaitGroup
	sink      uint64
	hotCalls  uint64
	coldCalls uint64
)

//go:noinline
func level3() int {
	ready.Done()
	return <-ch
}

//go:noinline
func level2() int { return level3() + 1 }

//go:noinline
func level1() int { return level2() + 1 }

//go:noinline
func lockIt() {
	ready.Done()
	mu.Lock()
	mu.Unlock()
}

//go:noinline
func nap() {
	ready.Done()
	time.Sleep(time.Hour)
}

//go:noinline
func bottom() {
	ready.Done()
	select {}
}

//go:noinline
func recurse(n int) int {
	if n == 0 {
		bottom()
		return 0
	}
	return recurse(n-1) + n
}

//go:noinline
func hot() {
	for i := 0; i < 3000; i++ {
		sink += uint64(i)
	}
	atomic.AddUint64(&hotCalls, 1)
}

//go:noinline
func cold() {
	for i := 0; i < 1000; i++ {
		sink += uint64(i)
	}
	atomic.AddUint64(&coldCalls, 1)
}

//go:noinline
func spin() {
	runtime.LockOSThread()
	ready.Done()
	for {
		hot()
		cold()
	}
}

func main() {
	mu.Lock()
	ready.Add(5)
	go func() { sink += uint64(level1()) }()
	go lockIt()
	go nap()
	go func() { sink += uint64(recurse(10)) }()
	go spin()
	ready.Wait()
	time.Sleep(50 * time.Millisecond) // each is parked by now
	fmt.Printf("ready pid=%d\n", os.Getpid())
	for {
		time.Sleep(time.Second)
		fmt.Printf("hot=%d cold=%d\n", atomic.LoadUint64(&hotCalls), atomic.LoadUint64(&coldCalls))
	}
}
