"""Python calls of known lengths (the tests of --at py:FUNCTION --latency). ``timed.py KIND``; once a
line "go" comes on stdin, for ms in 1..N:

- slow: slow(ms) sleeps ms milliseconds and calls quick() (a Python call inside it), N=20;
- failing: failing(ms) sleeps ms milliseconds and raises, caught by its caller, N=5;
- ticks: ticks(ms), a generator that sleeps ms milliseconds before each of its 3 values, consumed
  whole by a loop that sleeps ms milliseconds after each value, N=5;
- waits: waits(ms), a coroutine that awaits asyncio.sleep(ms / 1000) twice, run by asyncio.run, N=5;
- long: waits(600) N=5 times (1.2 s each: a trace that begins meanwhile finds one under way).

``timed.py KIND N``: N calls instead. Each call's own time, from its caller's perf_counter (a coroutine's from inside it), is printed:
"slow 3 3.081" (KIND ms own-ms), then "done"."""
import asyncio
import os
import sys
import time


def quick():
    return 1


def slow(ms):
    time.sleep(ms / 1000)
    return quick()


def failing(ms):
    time.sleep(ms / 1000)
    raise ValueError(ms)


def ticks(ms):
    for i in range(3):
        time.sleep(ms / 1000)
        yield i


async def waits(ms):
    began = time.perf_counter()
    await asyncio.sleep(ms / 1000)
    await asyncio.sleep(ms / 1000)
    return (time.perf_counter() - began) * 1000


def run(kind, ms):
    began = time.perf_counter()
    if kind == "slow":
        slow(ms)
    elif kind == "failing":
        try:
            failing(ms)
        except ValueError:
            pass
    elif kind == "ticks":
        for _ in ticks(ms):
            time.sleep(ms / 1000)
    elif kind == "long":
        return asyncio.run(waits(600))
    else:
        return asyncio.run(waits(ms))
    return (time.perf_counter() - began) * 1000


kind = sys.argv[1]
print(f"ready pid={os.getpid()}", flush=True)
sys.stdin.readline()
for ms in range(1, (int(sys.argv[2]) if len(sys.argv) > 2 else 20 if kind == "slow" else 5) + 1):
    print(f"{kind} {ms} {run(kind, ms):.3f}", flush=True)
print("done", flush=True)
sys.stdin.readline()
