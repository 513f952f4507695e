"""A Python thread that only computes, in units of a few microseconds, and says every half
second how many units it got through (bench/python.py: what reading its stacks costs it)."""
import os
import threading
import time


def unit():
    return sum(range(100))


def never():
    """Never called: a probe here costs every other Python call of the process (bench/python.py)."""


def work():
    done = 0
    start = time.monotonic()
    mark = start
    while True:
        unit()
        done += 1
        if done % 256 == 0:
            now = time.monotonic()
            if now - mark >= 0.5:
                print(f"t={now:.3f} units={done}", flush=True)
                mark = now


threading.Thread(target=work, name="worker", daemon=True).start()
print(f"ready pid={os.getpid()}", flush=True)
while True:
    time.sleep(3600)
