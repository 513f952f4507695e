#!/bin/sh
# Run inside a bare container by make dist-test: $1 is how sampler is started there (the single
# file, or the command a wheel installed). The target is /t/ringbuf-c-static, built outside.
# Samples it, traces it (int3s, then in-process: numpy reads the ring; --latency), reads its stacks,
# profiles it into a flame graph, makes a report, kills sampler's worker while armed (the guardian
# puts the byte back), leaves an int3 on purpose (--no-guardian) and repairs it; fails on the first
# step that goes wrong.
set -eu
S=$1
say() { echo "dist-test: $*"; }
fail() { echo "dist-test: FAILED: $*" >&2; exit 1; }
untouched() {  # running, untraced, not stopped
  [ -d "/proc/$T" ] || fail "the target died"
  grep -q '^TracerPid:[[:space:]]*0$' "/proc/$T/status" || fail "the target is still traced"
  grep -q '^State:[[:space:]]*[RS]' "/proc/$T/status" || fail "the target is stopped"
}
[ ! -e /usr/bin/python3 ] || [ "${WITH_PYTHON:-}" = 1 ] || fail "this container has python3"
[ ! -e /usr/bin/gcc ] && [ ! -e /usr/bin/go ] || fail "this container has a compiler"
/t/ringbuf-c-static > /tmp/target.out &
T=$!
sleep 0.5
$S --version
mkdir -m 777 /tmp/open  # a TMPDIR every user may write: the single file, as root, refuses to start from it
if TMPDIR=/tmp/open $S --version > /dev/null 2> /tmp/open.err; then
  [ "$S" != /dist/sampler ] || fail "the single file ran as root unpacked into a folder every user may write"
else
  grep -q "another user can change it" /tmp/open.err || fail "TMPDIR refused with: $(cat /tmp/open.err)"
  say "a TMPDIR every user may write: refused"
fi
$S attach --backend ptrace --pid "$T" --at ring_read --expr 'delta=b->w - b->r' --count 20 --rate 50 \
  --out /tmp/attach.csv --quiet
rows=$(($(wc -l < /tmp/attach.csv) - 1))
[ "$rows" = 20 ] || fail "attach wrote $rows rows, not 20"
untouched
say "attach: 20 rows"
$S trace --pid "$T" --at tick --expr 'second' --max-events 2 --out /tmp/trace.csv --quiet
rows=$(($(wc -l < /tmp/trace.csv) - 1))
[ "$rows" = 2 ] || fail "trace wrote $rows rows, not 2"
untouched
say "trace: 2 rows"
$S trace --pid "$T" --at ring_read --expr 'delta=b->w - b->r' --max-events 5000 --out /tmp/inproc.csv \
  2> /tmp/inproc.err || fail "trace in-process: $(cat /tmp/inproc.err)"
rows=$(($(wc -l < /tmp/inproc.csv) - 1))
[ "$rows" = 5000 ] || fail "trace in-process wrote $rows rows, not 5000"
grep -q "in-process from now on" /tmp/inproc.err || fail "ring_read was not traced in-process: $(grep -v '^#' /tmp/inproc.err)"
untouched
say "trace in-process: 5000 rows"
$S trace --pid "$T" --at ring_read --latency --max-events 500 --quiet --out /tmp/latency.csv
rows=$(($(wc -l < /tmp/latency.csv) - 1))
[ "$rows" = 500 ] || fail "trace --latency wrote $rows rows, not 500"
untouched
say "trace --latency: 500 rows"
$S stack --pid "$T" > /tmp/stack.txt
grep -q " in reader" /tmp/stack.txt && grep -q " in main" /tmp/stack.txt || fail "the stacks name no reader or main: $(cat /tmp/stack.txt)"
untouched
say "stack: the reader's and main's frames"
$S profile --pid "$T" --duration 2s --quiet --out /tmp/cpu.svg
grep -q "reader" /tmp/cpu.svg && grep -q "<svg" /tmp/cpu.svg || fail "the flame graph has no reader"
untouched
say "profile: a flame graph with the reader"
$S report /tmp/attach.csv --hist delta | grep -q "^  delta " || fail "the report has no line for delta"
say "report: statistics and a histogram"
armed() {  # start sampler on a function never called (its breakpoint in all the time); kill its tracer
  $S attach "$@" --pid "$T" --at never --expr 'b->w' --count 1 --hit-timeout 60s --quiet \
    --out /tmp/never.csv 2>/tmp/never.err &
  front=$!
  i=0
  until ls /run/sampler/"$T"-*.json >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "the breakpoint was never armed"; sleep 0.1
  done
  sleep 0.3
  tracer=$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$T/status")
  [ "$tracer" != 0 ] || fail "nothing traces the target while armed"
  kill -9 "$tracer"  # sampler's tracing worker, as the OOM killer would
  wait "$front" || true
  grep -q "killed by SIGKILL" /tmp/never.err || fail "sampler did not say its worker was killed: $(cat /tmp/never.err)"
}
# with its guardian (the default): the guardian puts the byte back
armed
i=0
until [ "$($S repair --pid "$T" 2>&1)" = "sampler: nothing to repair" ]; do
  i=$((i + 1)); [ $i -lt 50 ] || fail "the guardian did not put the byte back"; sleep 0.1
done
untouched
say "guardian: the int3 of a run whose worker was killed was put back"
# an int3 left on purpose: no guardian, the worker killed while the breakpoint is in
armed --no-guardian
repaired=$($S repair --pid "$T" 2>&1) || fail "repair: $repaired"
echo "$repaired" | grep -q "1 byte(s) restored" || fail "repair restored nothing: $repaired"
untouched
$S repair --all 2>&1 | grep -q "nothing to repair" || fail "repair --all found more"
say "repair: the int3 left by a killed run was put back"
$S attach --backend ptrace --pid "$T" --at ring_read --expr 'b->r' --count 3 --quiet --out /tmp/after.csv
untouched
kill "$T"
say "all passed"
