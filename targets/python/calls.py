"""Python functions called a known number of times (the tests of ustack at a probe): each round
calls often() twice and seldom() once, each of which calls libc's getppid once, then sleeps 5 ms."""
import os
import time


def often():
    os.getppid()
    time.sleep(0.005)


def seldom():
    os.getppid()
    time.sleep(0.005)


def rounds():
    while True:
        often()
        often()
        seldom()


print(f"ready pid={os.getpid()}", flush=True)
rounds()
