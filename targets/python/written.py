"""Python functions found by where they are written (the tests of --at py:FILE.py:LINE): once a line
"go" comes on stdin, plain() is called 3 times, each right after a Made() whose __init__ the
interpreter starts from C (at the frame address plain's frame takes next), Box.method 4 times,
Box.twice (a staticmethod) 5, outer() 6 and inner(), nested in it, 12 (twice a call of outer), and
Tagged.tag (a class made by a metaclass) 7. Each function's lines carry a marker comment the test
finds them by. Prints "done" at the end."""
import os
import sys


def plain(n):  # marker: plain
    return n + 1


class Made:
    def __init__(self, n):  # marker: made
        self.n = n


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
    return inner(n) + inner(n + 10)


class Meta(type):
    pass


class Tagged(metaclass=Meta):
    def tag(self, n):  # marker: tag
        return n


print(f"ready pid={os.getpid()}", flush=True)
sys.stdin.readline()
for n in range(3):
    Made(n)
    plain(n)
for n in range(4):
    Box().method(n)
for n in range(5):
    Box.twice(n)
for n in range(6):
    outer(n)  # marker: module
for n in range(7):
    Tagged().tag(n)
print("done", flush=True)
sys.stdin.readline()
