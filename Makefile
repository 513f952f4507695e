# sampler: `make demo` sets everything up and samples the bundled target;
# `make test` sets everything up and runs the tests. Both are safe to run twice.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
GOBUILD := go build -buildvcs=false -trimpath
# go needs a cache directory; a bare environment (no HOME) gets one in the tree
ifeq ($(HOME),)
export GOCACHE := $(CURDIR)/.cache/go-build
export GOPATH := $(CURDIR)/.cache/go
endif

.PHONY: demo test test-more test-hostile test-fleet test-delve test-ship test-beside test-heavy test-bench test-python lint bench bench-quick faults faults-quick ctrl-c soak soak-quick guardian-bench bench-killed bench-attach bench-setup-hold bench-limit bench-many bench-profile test-long \
	setup system-deps bench-deps \
	image kube-test dist dist-test \
	targets clean

demo: setup
	@bash scripts/demo.sh

# make test is the short form, under 10 minutes on a 2-core machine: the unit tests (two at a time) and every
# integration test but the suites make test-more runs (tests/suites.py; CI runs both); the 25 slowest at the end
test: setup lint
	$(VENV)/bin/python -m pytest -q -ra -n 2 -m "not more" tests/unit
	$(VENV)/bin/python -m pytest -q -ra --durations=25 -m "not more" tests/integration

# the long suites, each its own target (CI runs them all after make test; about 12 minutes): the hostile corpus
# (targets no privilege wrote, run as root against them), many processes and forks, the Delve backends beside
# ptrace on Go values, the wheel alone in a fresh venv, Debian's programs and sampler beside gdb and bpftrace,
# the heavy forms of in-process and Python tests, and every Python test on every interpreter
SUITES := hostile fleet delve ship beside heavy
test-more: $(addprefix test-,$(SUITES)) test-python

$(addprefix test-,$(SUITES)): test-%: setup
	$(VENV)/bin/python -m pytest -q -ra --durations=10 -m $*

# the short forms of the bench and fault harnesses (tests/bench: bench-quick, faults-quick, soak-quick,
# attach, limit, stall, many; about 3 minutes); .ci/run runs them after make test
test-bench: setup bench-deps
	$(VENV)/bin/python -m pytest -q -ra --durations=10 tests/bench

# the Python tests on every interpreter here (make test runs them on Debian's 3.11, and the layout tables'
# lines on each: tests/integration/pythons.py's SOME); 124 tests, about 4 minutes
test-python: setup
	SAMPLER_PYTHON_MATRIX=1 $(VENV)/bin/python -m pytest -q -ra --durations=10 tests/integration/test_python_*.py

# the exhaustive forms of tests make test runs short (tests/long.py: every real program's every function for
# return probes and exits, 3 trials of the setuid exec race, 8 runs of burst-go's probes in and out, 5 trials of a
# descriptor swapped under the in-process probes' memfd); about 2 minutes
test-long: setup
	SAMPLER_LONG=1 $(VENV)/bin/python -m pytest -q -ra --durations=10 tests/unit/test_return_probes.py \
		tests/unit/test_exits.py "tests/integration/test_hostile.py::test_what_shares_the_memory_cannot_reach_a_setuid_program_the_target_execd" \
		"tests/integration/test_inprocess.py::test_a_go_program_survives_reading_probes_put_in_and_taken_out_again_and_again" \
		"tests/integration/test_hostile.py::test_root_writes_the_trampoline_into_no_file_the_target_swapped_in"

# ruff and mypy --strict, with their configuration in pyproject.toml
lint: setup
	$(VENV)/bin/ruff check sampler tests bench
	$(VENV)/bin/mypy

setup: system-deps $(VENV)/.installed targets
	@# sampler's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (as on these machines)
	@# each run compiled its 50 modules again, 0.5 of the 1.1 s of a short attach
	$(VENV)/bin/python -m compileall -q sampler > /dev/null

# the whole overhead matrix (about 15 minutes); results under bench/results/
bench: setup bench-deps
	$(VENV)/bin/python bench/overhead.py

# a small matrix (under 3 minutes); make test-bench runs it once
bench-quick: setup bench-deps
	$(VENV)/bin/python bench/overhead.py --quick

# the fault suite (about an hour): what the target goes through when sampler is
# signalled or killed, the target exits or stops, a second debugger comes, the disk fills;
# then SIGKILL of the worker, the guardian or both mid-trace with an in-process probe (issue 36)
faults: setup
	$(VENV)/bin/python bench/faults.py
	$(VENV)/bin/python bench/inprocess_faults.py

# one Ctrl-C to the whole process group at 100 moments of attach and trace (about 2 minutes; make test-bench: 12)
ctrl-c: setup targets
	SAMPLER_CTRL_C_RUNS=100 $(VENV)/bin/python -m pytest -q -s tests/bench/test_ctrl_c.py

# one trial per fault (a few minutes); make test-bench runs it once
faults-quick: setup
	$(VENV)/bin/python bench/faults.py --quick
	$(VENV)/bin/python bench/inprocess_faults.py --quick

# the soak (about 15 minutes): 200 consecutive runs of every way of sampling on long-lived
# targets, then a million zero-stop samples for memory; results under bench/results/
soak: setup
	$(VENV)/bin/python bench/soak.py

# 10 runs (every way once) and 50,000 samples; make test-bench runs it once
soak-quick: setup
	$(VENV)/bin/python bench/soak.py --quick

# the longest hold of 3,600 probes (every libc function) put in and taken out, clocked in the target
# (targets/stall); results under bench/results/ (about a minute a round)
bench-setup-hold: setup targets
	$(VENV)/bin/python bench/setup_hold.py

# time to the first row and peak RSS, sampler beside dlv, on four binaries up to a generated
# 30 MB Go program (built once into build/); results under bench/results/ (about 2 minutes)
bench-attach: setup targets
	$(VENV)/bin/python bench/attach.py

# sampler's breakpoint sample beside the project's minimal C tracer (bench/limit/reftracer.c)
# and bpftrace: pauses at 10 Hz and 1 kHz, every-hit rates (about 4 minutes); then the stall
# the target sees, clocked inside it, beside the C tracer and a minimal Python loop (about 4 minutes);
# then what a probe on every call costs a 1.5 ns function, in-process beside int3s and bpftrace (about 15 minutes)
bench-limit: setup bench-deps
	$(VENV)/bin/python bench/limit.py
	$(VENV)/bin/python bench/stall.py
	$(VENV)/bin/python bench/inprocess.py
	$(VENV)/bin/python bench/inprocess_budget.py
	$(VENV)/bin/python bench/latency_clock.py

# what sampler profile costs the threads it samples, clocked inside them, beside perf record -g and
# nothing: 49, 99 and 999 Hz on 1 and 8 busy threads (about 4 minutes); then sampler stack's time
# beside gdb's and eu-stack's on a 10-thread process; results under bench/results/
bench-profile: setup bench-deps
	$(VENV)/bin/python bench/profiling.py
	$(VENV)/bin/python bench/stacktime.py

# many processes in one run: 1, 10, 50 and 200 workers of targets/pool sampled together at 10 Hz
# for 30 s each (rows per process against the schedule, CPU per tick, RSS, attach; about 3 minutes)
bench-many: setup
	$(VENV)/bin/python bench/many.py

# sampler's container image (podman, else docker), tagged with the version; BASE_IMAGE=...
# overrides the base, SAMPLER_LOCAL_BASE=1 makes one from Debian's packages (no registry here)
image: setup
	@bash deploy/build-image.sh

# real containers and pods from kubectl sampler's manifests (podman; a few minutes):
# installs podman, runc and debootstrap when missing, builds the base and the image
kube-test: setup
	@bash deploy/podman-setup.sh
	SAMPLER_LOCAL_BASE=1 $(VENV)/bin/python -m pytest -q -ra tests/kube

# what to carry onto a host, in dist/: the wheel (debug-sampler, Python 3.9 and up), the single
# file (x86-64 Linux, glibc 2.31 and up, no Python needed) and SHA256SUMS; the single file is built
# by PyInstaller in a Debian 11 container made here from Debian's packages (a few minutes the first time)
dist: setup
	@bash deploy/dist/build.sh

# the single file in bare Debian 11 and 12 containers (no python3, gcc or Go), the wheel installed
# from a folder into Debian 11's python3.9 with pip and with pipx (no network): each samples, traces,
# reports, survives its worker's SIGKILL and repairs on a static target built here; then the single
# file's start-up against the venv's (bench/startup.py)
dist-test: dist targets/bin/ringbuf-c-static
	@bash deploy/dist/test.sh

# how fast the guardian puts the byte back when the tracing worker is killed
guardian-bench: setup
	$(VENV)/bin/python bench/guardian.py

# redis under load, its tracing worker SIGKILLed with int3s in: how often it survives, with the int3s' copies and
# the target's SIGTRAP handler and without (bench/results/KILLED.md; about 3 minutes)
bench-killed: setup
	$(VENV)/bin/python bench/killed.py

bench-deps:
	@bash scripts/install-system-deps.sh bench

system-deps:
	@bash scripts/install-system-deps.sh

$(VENV)/.installed: pyproject.toml | system-deps
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip uninstall -q -y sampler 2>/dev/null || true  # the distribution's name before debug-sampler
	$(VENV)/bin/python -m pip install -q -e '.[plot,test,bench]' --config-settings editable_mode=compat  # a path in a .pth: nothing imported at start-up, where a Ctrl-C would be a traceback
	touch $@

targets: targets/bin/ringbuf-go targets/bin/ringbuf-go-stripped targets/bin/httpd-go targets/bin/httpd-go-stripped targets/bin/ringbuf-c targets/bin/ringbuf-c-O0 targets/bin/ringbuf-lib \
	targets/bin/libplugin.so targets/bin/ringbuf-cpp targets/bin/ringbuf-rust targets/bin/ringbuf-c-exported \
	targets/bin/forker targets/bin/callers targets/bin/emulate targets/bin/spawner-go targets/bin/jailed targets/bin/jailed-nodebug \
	targets/bin/clones targets/bin/clones-cpp targets/bin/stall targets/bin/stall-go targets/bin/pool \
	targets/bin/execrace targets/bin/ifuncs targets/bin/eintr targets/bin/shortlived \
	targets/bin/stacks targets/bin/stacks-cpp targets/bin/stacks-rust targets/bin/stacks-go targets/bin/spinners targets/bin/eintr-fp targets/bin/eintr-sockets \
	targets/bin/burst targets/bin/burst-go targets/bin/latency targets/bin/latency-cpp targets/bin/latency-rust \
	targets/bin/latency-go targets/bin/usdt targets/bin/usdt-O0 targets/bin/throws targets/bin/hostile targets/bin/fakepython targets/bin/fakego

targets/bin/ringbuf-go: targets/ringbuf-go/main.go targets/ringbuf-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/ringbuf-go && $(GOBUILD) -o ../bin/ringbuf-go .

# as many images ship Go: no .symtab, no DWARF; only Go's own function table (.gopclntab)
targets/bin/ringbuf-go-stripped: targets/ringbuf-go/main.go targets/ringbuf-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/ringbuf-go && $(GOBUILD) -ldflags='-s -w' -o ../bin/ringbuf-go-stripped .

# a Go HTTP server built from the standard library alone (about 9 MB), with its own client
targets/bin/httpd-go: targets/httpd-go/main.go targets/httpd-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/httpd-go && $(GOBUILD) -o ../bin/httpd-go .

# the same server as Debian ships Go daemons: no .symtab, no DWARF, only .gopclntab
targets/bin/httpd-go-stripped: targets/httpd-go/main.go targets/httpd-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/httpd-go && $(GOBUILD) -ldflags='-s -w' -o ../bin/httpd-go-stripped .

# USDT probes (<sys/sdt.h>, systemtap-sdt-dev), one with a semaphore; -O0 puts their arguments on the stack
targets/bin/usdt: targets/usdt/usdt.c targets/usdt/guarded.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -o $@ $^

targets/bin/usdt-O0: targets/usdt/usdt.c targets/usdt/guarded.c | system-deps
	mkdir -p targets/bin
	$(CC) -O0 -g -o $@ $^

# exceptions thrown and caught on command: libstdc++'s own USDT probes (libstdcxx:throw, catch)
targets/bin/throws: targets/usdt/throws.cpp | system-deps
	mkdir -p targets/bin
	$(CXX) -O2 -g -o $@ $<

# a target that attacks what sampler shares with it (a descriptor swapped, a ring cut short, forged
# records): tests/integration/test_hostile.py runs it as nobody
targets/bin/hostile: targets/hostile/hostile.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -Wall -o $@ $<

# a program that poses as CPython 3.11 (its frames loop, its line table is 1 MiB): test_hostile.py, as nobody
targets/bin/fakepython: targets/hostile/fakepython.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -o $@ $<

# a Go program whose runtime.allgs claims 2^40 goroutines over zero pages: test_hostile.py, as nobody
targets/bin/fakego: targets/fakego/main.go targets/fakego/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/fakego && $(GOBUILD) -o ../bin/fakego .

targets/bin/ringbuf-c: targets/ringbuf-c/ringbuf.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -o $@ $<

# linked statically: runs in make dist-test's bare Debian 11 container, whose glibc is older than this one's
targets/bin/ringbuf-c-static: targets/ringbuf-c/ringbuf.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -static -o $@ $<

targets/bin/ringbuf-c-O0: targets/ringbuf-c/ringbuf.c | system-deps
	mkdir -p targets/bin
	$(CC) -O0 -g -pthread -o $@ $<

# a program whose ring buffer lives in a shared library with DWARF, and a plug-in it dlopens
targets/bin/libring.so: targets/ringbuf-lib/ring.c targets/ringbuf-lib/ring.h | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -fPIC -shared -Wl,--build-id -o $@ $<

targets/bin/ringbuf-lib: targets/ringbuf-lib/main.c targets/ringbuf-lib/ring.h targets/bin/libring.so
	$(CC) -O2 -g -Wl,--build-id -o $@ $< -Ltargets/bin -lring -ldl -Wl,-rpath,'$$ORIGIN'

targets/bin/libplugin.so: targets/ringbuf-lib/plugin.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -fPIC -shared -Wl,--build-id -o $@ $<

# C++ and Rust: names and values as their users write them
targets/bin/ringbuf-cpp: targets/ringbuf-cpp/ring.cpp | system-deps
	mkdir -p targets/bin
	$(CXX) -O2 -g -pthread -o $@ $<

# (without rustc, say so and go on: only the Rust test then fails, saying why)
targets/bin/ringbuf-rust: targets/ringbuf-rust/main.rs | system-deps
	mkdir -p targets/bin
	@if command -v rustc >/dev/null; then echo "rustc -g -C opt-level=0 --edition 2021 -o $@ $<"; \
		rustc -g -C opt-level=0 --edition 2021 -o $@ $<; \
	else echo "make: rustc is not installed: targets/bin/ringbuf-rust is not built (apt-get install rustc)" >&2; fi

# a stripped server that exports its functions (.dynsym, as programs with plug-ins do):
# no DWARF and no .symtab, sampled with argN and casts
# a program that clocks every call of probe(): the stall a breakpoint costs it (bench/stall.py)
targets/bin/stall: targets/stall/stall.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -o $@ $<

targets/bin/stall-go: targets/stall-go/main.go targets/stall-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/stall-go && $(GOBUILD) -o ../bin/stall-go .

# bursts of calls of a 3 ns function, clocked by the program: what a probe on every call costs
# (bench/inprocess.py)
targets/bin/burst: targets/burst/burst.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -o $@ $<

targets/bin/burst-go: targets/burst-go/main.go targets/burst-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/burst-go && $(GOBUILD) -o ../bin/burst-go .

# calls of known length and result, clocked by the program (trace --latency: test_latency.py)
targets/bin/latency: targets/latency/latency.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -pthread -o $@ $<

targets/bin/latency-cpp: targets/latency/latency.cpp | system-deps
	mkdir -p targets/bin
	$(CXX) -O2 -g -Wall -o $@ $<

targets/bin/latency-rust: targets/latency-rust/main.rs | system-deps
	mkdir -p targets/bin
	@if command -v rustc >/dev/null; then echo "rustc -g -C opt-level=1 --edition 2021 -o $@ $<"; \
		rustc -g -C opt-level=1 --edition 2021 -o $@ $<; \
	else echo "make: rustc is not installed: targets/bin/latency-rust is not built (apt-get install rustc)" >&2; fi

targets/bin/latency-go: targets/latency-go/main.go targets/latency-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/latency-go && $(GOBUILD) -o ../bin/latency-go .

# functions gcc -O2 leaves only as clones (ring_gap.isra.0) or inlined copies (ring_used)
targets/bin/clones: targets/clones/clones.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -o $@ $<

# C++ methods of a namespaced class left only as clones (-fwhole-program makes them local)
targets/bin/clones-cpp: targets/clones/clones.cpp | system-deps
	mkdir -p targets/bin
	$(CXX) -O2 -g -fwhole-program -o $@ $<

targets/bin/ringbuf-c-exported: targets/ringbuf-c/ringbuf.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -pthread -rdynamic -o $@ $<
	strip --strip-all $@

# a program that forks, vforks and execs children while it is sampled, and counts how they end
targets/bin/jailed: targets/jailed/jailed.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wl,--build-id=sha1 -o $@ $<

targets/bin/jailed-nodebug: targets/bin/jailed
	strip --strip-debug -o $@ $<

targets/bin/forker: targets/forker/forker.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -o $@ $<

targets/bin/pool: targets/pool/pool.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -o $@ $<

# a hostile program: processes sharing its memory hit probes while it execs a set-user-ID program
targets/bin/execrace: targets/execrace/execrace.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -o $@ $<

# threads blocked for good in epoll_wait, poll and sigtimedwait, counting their EINTRs (test_eintr.py)
targets/bin/eintr: targets/eintr/eintr.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -pthread -o $@ $<

# the same built with frame pointers: unwinding its blocked threads needs rbp, which only a stop gives
targets/bin/eintr-fp: targets/eintr/eintr.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -fno-omit-frame-pointer -pthread -o $@ $<

# threads blocked in recv and accept with SO_RCVTIMEO and in io_uring_enter, at -O0: their EINTRs said
targets/bin/eintr-sockets: targets/eintr/sockets.c | system-deps
	mkdir -p targets/bin
	$(CC) -O0 -g -pthread -o $@ $<

# calls one of glibc's IFUNC string functions a known number of times (test_ifuncs.py)
targets/bin/ifuncs: targets/ifuncs/ifuncs.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -fno-builtin -o $@ $<

# a Go program that starts /bin/true through os/exec every 10 ms (the Delve backends' fork tests)
targets/bin/spawner-go: targets/spawner-go/main.go targets/spawner-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/spawner-go && $(GOBUILD) -o ../bin/spawner-go .

# a process that lives a moment and makes a known number of calls (--exe's joins)
targets/bin/shortlived: targets/shortlived/shortlived.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -o $@ $<

# threads (and goroutines) with known stacks, in C, C++, Rust and Go: sampler stack and profile's tests
targets/bin/stacks: targets/stacks/stacks.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -pthread -o $@ $<

targets/bin/stacks-cpp: targets/stacks-cpp/stacks.cpp | system-deps
	mkdir -p targets/bin
	$(CXX) -O2 -g -Wall -pthread -o $@ $<

targets/bin/stacks-rust: targets/stacks-rust/main.rs | system-deps
	mkdir -p targets/bin
	@if command -v rustc >/dev/null; then echo "rustc -g -C opt-level=0 --edition 2021 -o $@ $<"; \
		rustc -g -C opt-level=0 --edition 2021 -o $@ $<; \
	else echo "make: rustc is not installed: targets/bin/stacks-rust is not built (apt-get install rustc)" >&2; fi

targets/bin/stacks-go: targets/stacks-go/main.go targets/stacks-go/go.mod | system-deps
	mkdir -p targets/bin
	cd targets/stacks-go && $(GOBUILD) -o ../bin/stacks-go .

# threads that only compute, each clocking its own stalls (bench/profiling.py)
targets/bin/spinners: targets/spinners/spinners.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -Wall -pthread -o $@ $<

# threads calling one function (or a glibc wrapper) at the same moment, counting their calls
targets/bin/callers: targets/callers/callers.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -g -pthread -o $@ $< -ldl

# functions that start with each instruction the ptrace backend emulates (test_emulate.py); no -g
targets/bin/emulate: targets/emulate/emulate.c | system-deps
	mkdir -p targets/bin
	$(CC) -O2 -pthread -o $@ $<

clean:
	rm -rf targets/bin $(VENV) .cache samples.csv
