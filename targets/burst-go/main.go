// burst-go: the Go twin of targets/burst/burst.c, for bench/inprocess.py.
//
//	burst-go THREADS CALLS
//
// Round after round, THREADS goroutines (each locked to its own OS thread) call touch(&their
// pair) CALLS times and clock the loop; touch makes two field updates through its argument. Each
// compares touch's first 16 bytes with the program's own before and after its loop. After each
// round: "burst threads=T calls=N ns_per_call=X traced=0|1|mixed" (X: the median over the
// goroutines), then a 100 ms rest. It prints "ready pid=N" first.
package main

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

type pair struct {
	n, sum uint64
	pad    [48]byte
}

//go:noinline
func touch(a *pair) {
	a.n++
	a.sum += a.n
}

func code() []byte {
	entry := reflect.ValueOf(touch).Pointer()
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(entry)), 16)...)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: burst-go THREADS CALLS")
		os.Exit(2)
	}
	threads, err1 := strconv.Atoi(os.Args[1])
	calls, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || threads < 1 || calls < 1 {
		fmt.Fprintln(os.Stderr, "usage: burst-go THREADS CALLS")
		os.Exit(2)
	}
	original := code()
	pairs := make([]pair, threads)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	for {
		perCall := make([]float64, threads)
		state := make([]int, threads)
		var wg sync.WaitGroup
		for i := 0; i < threads; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				before := !bytes.Equal(code(), original)
				t0 := time.Now()
				p := &pairs[i]
				for c := 0; c < calls; c++ {
					touch(p)
				}
				elapsed := time.Since(t0)
				after := !bytes.Equal(code(), original)
				perCall[i] = float64(elapsed.Nanoseconds()) / float64(calls)
				switch {
				case before && after:
					state[i] = 1
				case !before && !after:
					state[i] = 0
				default:
					state[i] = 2
				}
			}(i)
		}
		wg.Wait()
		sorted := append([]float64(nil), perCall...)
		sort.Float64s(sorted)
		traced, untraced := 0, 0
		for _, s := range state {
			if s == 1 {
				traced++
			} else if s == 0 {
				untraced++
			}
		}
		label := "mixed"
		if traced == threads {
			label = "1"
		} else if untraced == threads {
			label = "0"
		}
		fmt.Printf("burst threads=%d calls=%d ns_per_call=%.3f traced=%s\n", threads, calls, sorted[threads/2], label)
		time.Sleep(100 * time.Millisecond)
	}
}
