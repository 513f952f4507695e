// A Go program that makes its own runtime lie to sampler, for tests/integration/test_hostile.py (run
// as nobody): runtime.allgs, the list of goroutines sampler reads, is made to claim 2^40 goroutines
// over a gigabyte of zero pages (found by its symbol, so that the DWARF still says what it is). Its
// collector is off and its main goroutine never sleeps, so the runtime itself does not walk the list
// while the program runs.
//
//	fakego
package main

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"unsafe"
)

type slice struct {
	data     uintptr
	len, cap int
}

var spins uint64

func main() {
	debug.SetGCPercent(-1)
	program, err := elf.Open("/proc/self/exe")
	if err != nil {
		fmt.Println("elf:", err)
		os.Exit(1)
	}
	symbols, err := program.Symbols()
	if err != nil {
		fmt.Println("symbols:", err)
		os.Exit(1)
	}
	var at uintptr
	for _, symbol := range symbols {
		if symbol.Name == "runtime.allgs" {
			at = uintptr(symbol.Value)
		}
	}
	zeros, err := syscall.Mmap(-1, 0, 1<<30, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil || at == 0 {
		fmt.Println("no runtime.allgs, or mmap:", err)
		os.Exit(1)
	}
	header := (*slice)(unsafe.Pointer(at))
	header.data = uintptr(unsafe.Pointer(&zeros[0]))
	header.len, header.cap = 1<<40, 1<<40
	fmt.Printf("ready pid=%d\n", os.Getpid())
	for {
		spins++
	}
}
