"""Globals that change in known ways, for `py:` values (tests/integration/test_python_values.py).
Each step, the program logs what it set: "step N big=... text=... keys=... queue=...". It steps
when it reads a line on stdin ("s"), or every PACE seconds when given one (argv[1])."""
import collections
import os
import sys
import threading
import time


class State:
    def __init__(self):
        self.queue = collections.deque()
        self.maxsize = 64
        self.name = "état"


step = 0
big = 2 ** 64
text = "naïve-0"
ratio = 0.5
flag = False
nothing = None
raw = b"\x00\xffab"
table = {f"key{i}": i for i in range(10_000)}
cfg = {"timeout": 30, "retries": 3, 7: "seven"}
items = [10, 20, 30]
pair = (1, "two")
members = {1, 2, 3}
state = State()
lock = threading.Lock()


def advance():
    global step, big, text, ratio, flag
    with lock:
        step += 1
        big = 2 ** 64 + step
        text = f"naïve-{step}"
        ratio = step / 4
        flag = not flag
        table[f"new{step}"] = step
        state.queue.append(step)
        cfg["timeout"] = 30 + step
    print(f"step {step} big={big} text={text} keys={len(table)} queue={len(state.queue)}", flush=True)


print(f"ready pid={os.getpid()}", flush=True)
pace = float(sys.argv[1]) if len(sys.argv) > 1 else None
if pace is None:
    for line in sys.stdin:
        if line.strip() == "q":
            break
        advance()
else:
    while True:
        time.sleep(pace)
        advance()
