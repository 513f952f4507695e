"""Write a large Go program for bench/attach.py: PACKAGES packages of FUNCTIONS functions
each (every one with its own struct type, kept alive by a table the program calls through),
importing a wide part of the standard library, and a ring whose Read the bench samples.

    python bench/bigo/generate.py OUT_DIR [--packages 40] [--functions 250]
"""

from __future__ import annotations

import argparse
from pathlib import Path

STD = ["archive/zip", "compress/gzip", "crypto/ecdsa", "crypto/rsa", "crypto/tls", "crypto/x509",
       "database/sql", "encoding/json", "encoding/xml", "go/parser", "go/types", "go/format",
       "html/template", "image/png", "image/jpeg", "math/big", "net/http", "net/mail", "net/rpc",
       "regexp", "text/template", "debug/elf", "debug/dwarf", "runtime/pprof"]

MAIN = """package main

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
%(imports)s
)

var _ = []interface{}{%(keep)s}

// Ring is the same ring as targets/ringbuf-go: w-r is the fill level.
type Ring struct {
	r   uint64
	w   uint64
	buf []uint64
}

var ring = &Ring{buf: make([]uint64, 20000)}

//go:noinline
func (b *Ring) Read() (uint64, bool) {
	r := atomic.LoadUint64(&b.r)
	if r == atomic.LoadUint64(&b.w) {
		return 0, false
	}
	v := b.buf[r%%uint64(len(b.buf))]
	atomic.StoreUint64(&b.r, r+1)
	return v, true
}

//go:noinline
func (b *Ring) Write(v uint64) bool {
	w := atomic.LoadUint64(&b.w)
	if w-atomic.LoadUint64(&b.r) >= uint64(len(b.buf)) {
		return false
	}
	b.buf[w%%uint64(len(b.buf))] = v
	atomic.StoreUint64(&b.w, w+1)
	return true
}

func main() {
	go func() {
		for v := uint64(0); ; {
			if ring.Write(v) {
				v++
			} else {
				runtime.Gosched()
			}
		}
	}()
	go func() {
		for {
			if _, ok := ring.Read(); !ok {
				runtime.Gosched()
			}
		}
	}()
	fmt.Printf("ready pid=%%d\\n", os.Getpid())
	var total uint64
	for second := 1; ; second++ {
		time.Sleep(time.Second)
%(calls)s
		fmt.Printf("reads/s=%%d writes/s=%%d\\n", atomic.LoadUint64(&ring.r), total%%2)
	}
}
"""


def package(index: int, functions: int) -> str:
    lines = [f"package p{index}", "", "import \"strconv\"", ""]
    for f in range(functions):
        lines += [
            f"type T{f} struct {{ A{f} int64; B{f} string; C{f} []uint32; D{f} map[string]int }}",
            "",
            "//go:noinline",
            f"func F{f}(x int64) uint64 {{",
            f"\tt := &T{f}{{A{f}: x * {f + 1}, B{f}: strconv.Itoa(int(x)), D{f}: map[string]int{{}}}}",
            f"\tt.C{f} = append(t.C{f}, uint32(len(t.B{f})))",
            f"\tt.D{f}[t.B{f}] = len(t.C{f})",
            f"\treturn uint64(t.A{f}) + uint64(t.C{f}[0]) + uint64(len(t.D{f}))",
            "}",
            "",
        ]
    table = ", ".join(f"F{f}" for f in range(functions))
    lines += [f"var Table = []func(int64) uint64{{{table}}}", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--packages", type=int, default=40)
    parser.add_argument("--functions", type=int, default=250)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "go.mod").write_text("module bigo\n\ngo 1.19\n")
    for p in range(args.packages):
        (out / f"p{p}").mkdir(exist_ok=True)
        (out / f"p{p}" / "p.go").write_text(package(p, args.functions))
    aliases = [f"s{i}" for i in range(len(STD))]
    imports = "\n".join([f'\t{a} "{path}"' for a, path in zip(aliases, STD)] +
                        [f'\t"bigo/p{p}"' for p in range(args.packages)])
    keep = ", ".join([
        "s0.NewReader", "s1.NewWriter", "s2.Sign", "s3.SignPKCS1v15", "s4.Dial", "s5.ParseCertificate",
        "s6.Open", "s7.Marshal", "s8.Marshal", "s9.ParseFile", "s10.NewPackage", "s11.Source",
        "s12.New", "s13.Decode", "s14.Decode", "s15.NewInt", "s16.ListenAndServe", "s17.ReadMessage",
        "s18.Dial", "s19.MustCompile", "s20.New", "s21.Open", "s22.New", "s23.StartCPUProfile",
    ])
    calls = "\n".join(f"\t\ttotal += p{p}.Table[second%len(p{p}.Table)](int64(second))"
                      for p in range(args.packages))
    (out / "main.go").write_text(MAIN % {"imports": imports, "keep": keep, "calls": calls})


if __name__ == "__main__":
    main()
