"""A Python function called a known number of times from two threads (the tests of --at
py:FUNCTION): handle(n, tag) by two threads, 200 calls each, 1 ms apart, once a line "go" comes on
stdin (after sampler's probe is in); other functions are called around it, which the probe must not
count. Prints "done calls=N" at the end."""
import os
import sys
import threading
import time


def other(n):
    return n + 1


def handle(n, tag):
    return other(n) + len(tag)


def worker(tag, calls):
    for n in range(calls):
        handle(n, tag)
        other(n)
        time.sleep(0.001)


print(f"ready pid={os.getpid()}", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=worker, args=(tag, 200), name=tag) for tag in ("alpha", "beta")]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("done calls=400", flush=True)
sys.stdin.readline()
