#!/usr/bin/env bash
# Start the bundled Go ring buffer, sample w-r at its Read method at 1 Hz for
# about 10 s into samples.csv, show the rows and their report (a histogram and
# demo.png), stop the target.
set -euo pipefail
cd "$(dirname "$0")/.."
target=targets/bin/ringbuf-go
log=$(mktemp)
"$target" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q '^ready pid=' "$log" && break; sleep 0.1; done
echo "demo: $target running as PID $pid"
echo "+ sampler attach --pid $pid --at 'main.(*Ring).Read' --expr 'delta=b.w-b.r' --interval 1s --count 10 --out samples.csv"
.venv/bin/sampler attach --pid "$pid" --at 'main.(*Ring).Read' --expr 'delta=b.w-b.r' \
  --interval 1s --count 10 --out samples.csv
echo
echo "demo: samples.csv"
column -s, -t < samples.csv 2>/dev/null || cat samples.csv
echo
echo "+ sampler report samples.csv --hist delta --plot demo.png"
.venv/bin/sampler report samples.csv --hist delta --plot demo.png
sleep 1.2
if kill -0 "$pid" 2>/dev/null; then
  echo "demo: the target is still running after sampling; its last line: $(tail -n 1 "$log")"
else
  echo "demo: the target is not running any more" >&2
  exit 1
fi
