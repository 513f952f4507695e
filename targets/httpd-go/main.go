// httpd is a small HTTP server for sampler to measure, built from the
// standard library alone: a handler that counts requests per path, and a
// bounded client in the same process that calls it on 127.0.0.1 a few
// hundred times a second. It imports enough of the standard library
// (JSON, templates, TLS, gzip) to be the size of a real service's binary.
package main

import (
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"sync/atomic"
	"time"
)

// Stats is what the handler keeps: requests served and the last one's path.
type Stats struct {
	served uint64
	last   string
	paths  map[string]int
	mu     sync.Mutex
}

// Shape is an interface for sampler's tests: its dynamic value is a basic
// type, a pointer to a struct, or a struct, by the length of the path (handler).
type Shape interface{ Area() float64 }

type Square struct{ side int64 }

func (s *Square) Area() float64 { return float64(s.side * s.side) }

type Circle struct{ radius int64 }

func (c Circle) Area() float64 { return 3 * float64(c.radius*c.radius) }

type Number int64

func (n Number) Area() float64 { return float64(n) }

var (
	stats               = &Stats{paths: map[string]int{}}
	current Shape       = &Square{side: 7} // a pointer to a struct
	anyval  interface{}                    // the --rate, an int64
	lastErr error                          // the last encoding error: nil
	page    = template.Must(template.New("page").Parse("<p>{{.}}</p>"))
	_       = tls.VersionTLS13
)

//go:noinline
func serve(w http.ResponseWriter, r *http.Request, shape Shape) int {
	stats.mu.Lock()
	stats.served++
	stats.last = r.URL.Path
	stats.paths[r.URL.Path]++
	n := stats.paths[r.URL.Path]
	stats.mu.Unlock()
	if r.URL.Query().Get("gzip") != "" {
		z := gzip.NewWriter(w)
		defer z.Close()
		_ = page.Execute(z, r.URL.Path)
		return n
	}
	lastErr = json.NewEncoder(w).Encode(map[string]int{"n": n})
	return n
}

// deep uses about 300 bytes of stack per level before it serves: a request for
// /deep/N calls serve with a stack that must often grow first (the burst's requests).
//
//go:noinline
func deep(level int, w http.ResponseWriter, r *http.Request, shape Shape) int {
	var pad [256]byte
	pad[level%256] = byte(level)
	if level > 0 {
		return deep(level-1, w, r, shape) + int(pad[level%256]&0)
	}
	return serve(w, r, shape)
}

//go:noinline
func handler(w http.ResponseWriter, r *http.Request) {
	var shape Shape
	switch len(r.URL.Path) % 3 {
	case 0:
		shape = &Square{side: int64(len(r.URL.Path))}
	case 1:
		shape = Circle{radius: 2}
	default:
		shape = Number(len(r.URL.Path))
	}
	if strings.HasPrefix(r.URL.Path, "/deep/") {
		level, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/deep/"))
		if deep(level%200, w, r, shape) < 0 {
			panic("never")
		}
		return
	}
	if serve(w, r, shape) < 0 || current.Area() < 0 {
		panic("never")
	}
}

func main() {
	rate := flag.Int("rate", 200, "requests per second the built-in client makes (0: none)")
	exitAfter := flag.Int("exit-after", 0, "exit (status 0) after this many seconds; 0: run until killed")
	burst := flag.Int("burst", 0, "on each SIGUSR1, make this many requests, each on a new connection, "+
		"eight at a time, then print 'burst connections=C requests=R' as the server counted them")
	flag.Parse()
	anyval = int64(*rate)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpd:", err)
		os.Exit(1)
	}
	http.HandleFunc("/", handler)
	var connections uint64
	server := &http.Server{ConnState: func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			n := atomic.AddUint64(&connections, 1)
			if *burst == 0 { // the tests that compare goroutines across runs know a new connection
				fmt.Printf("connection n=%d\n", n)
			}
		}
	}}
	go func() { _ = server.Serve(listener) }()
	url := "http://" + listener.Addr().String()
	signals := make(chan os.Signal, 1)
	if *burst > 0 { // before "ready": a SIGUSR1 that came first would end the program
		signal.Notify(signals, syscall.SIGUSR1)
	}
	fmt.Printf("ready pid=%d url=%s\n", os.Getpid(), url)

	var done uint64
	if *rate > 0 {
		go func() {
			// one keep-alive connection for the whole run: a debugger that stops the whole
			// process (dlv's attach, under load several seconds) must not make a request time
			// out, or the client opens a new connection, served by a new goroutine
			client := &http.Client{Timeout: 120 * time.Second}
			paths := []string{"/", "/items", "/items/42", "/health", "/ping", "/a,b", "/say%20\"hi\""}
			tick := time.NewTicker(time.Second / time.Duration(*rate))
			for i := 0; ; i++ {
				<-tick.C
				resp, err := client.Get(url + paths[i%len(paths)])
				if err != nil {
					fmt.Printf("client error: %v\n", err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				atomic.AddUint64(&done, 1)
			}
		}()
	}
	if *burst > 0 {
		go bursts(url, *burst, &connections, signals)
	}
	var last uint64
	for second := 1; ; second++ {
		time.Sleep(time.Second)
		now := atomic.LoadUint64(&done)
		fmt.Printf("requests/s=%d\n", now-last)
		last = now
		if second == *exitAfter {
			os.Exit(0)
		}
	}
}

// bursts makes n requests on new connections at each SIGUSR1, and says what the
// server counted: connections accepted and requests served.
func bursts(url string, n int, connections *uint64, signals chan os.Signal) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range signals {
		stats.mu.Lock()
		served := stats.served
		stats.mu.Unlock()
		conns := atomic.LoadUint64(connections)
		var wg sync.WaitGroup
		work := make(chan int)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					resp, err := client.Get(fmt.Sprintf("%s/deep/%d", url, i*37))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}()
		}
		for i := 0; i < n; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		time.Sleep(100 * time.Millisecond) // the server's side of the last connections ends
		stats.mu.Lock()
		served = stats.served - served
		stats.mu.Unlock()
		fmt.Printf("burst connections=%d requests=%d\n", atomic.LoadUint64(connections)-conns, served)
	}
}
