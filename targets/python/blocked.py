"""Four threads, each blocked in a known place (the tests of `sampler stack` on CPython, beside
py-spy dump): a lock, a sleep, a socket read, a busy loop; the main thread sleeps too."""
import os
import socket
import threading
import time

lock = threading.Lock()
lock.acquire()
left, right = socket.socketpair()


def wait_for_lock():
    lock.acquire()  # line 14


def sleep_long():
    time.sleep(3600)  # line 18


def read_socket():
    left.recv(10)  # line 22


def spin():
    x = 0
    while True:
        x += 1


def nested(depth):
    if depth == 0:
        return spin()
    return nested(depth - 1)


for function, name in ((wait_for_lock, "locker"), (sleep_long, "sleeper"), (read_socket, "reader"),
                       (lambda: nested(3), "spinner")):
    threading.Thread(target=function, name=name, daemon=True).start()
time.sleep(0.2)
print(f"ready pid={os.getpid()}", flush=True)
time.sleep(3600)
