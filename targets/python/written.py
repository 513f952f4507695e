"""Python functions found by where they are written (the tests of --at py:FILE.py:LINE): once a line
"go" comes on stdin, plain() is called 3 times, Box.method 4, Box.twice (a staticmethod) 5, and
inner(), a function nested in outer(), 6 (through 6 calls of outer). Each function's lines carry a
marker comment the test finds them by. Prints "done" at the end."""
import os
import sys


def plain(n):  # marker: plain
    return n + 1


class Box:
    def method(self, n):  # marker: method
        doubled = n * 2
        return doubled  # marker: method body

    @staticmethod
    def twice(n):  # marker: twice
        return 2 * n


def outer(n):  # marker: outer
    def inner(k):  # marker: inner
        return k + n  # marker: inner body
    return inner(n)


print(f"ready pid={os.getpid()}", flush=True)
sys.stdin.readline()
for n in range(3):
    plain(n)
for n in range(4):
    Box().method(n)
for n in range(5):
    Box.twice(n)
for n in range(6):
    outer(n)  # marker: module
print("done", flush=True)
sys.stdin.readline()
