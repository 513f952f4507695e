// spawner runs /bin/true through os/exec every 10 ms (Go starts processes with
// clone(CLONE_VM|CLONE_VFORK) and an exec in the child) and calls work(i) each
// time; after the given seconds (or at SIGUSR1, sooner) it prints "children ok=N bad=N"
// and exits 0 when none failed. For the fork tests of the Delve backends.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func work(i int) int { return i*2 + 1 }

func main() {
	seconds := 5.0
	if len(os.Args) > 1 {
		seconds, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGUSR1)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	ok, bad := 0, 0
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for i := 0; time.Now().Before(end) && len(stop) == 0; i++ {
		work(i)
		if err := exec.Command("/bin/true").Run(); err != nil {
			bad++
			fmt.Println("child:", err)
		} else {
			ok++
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("children ok=%d bad=%d\n", ok, bad)
	if bad > 0 {
		os.Exit(1)
	}
}
