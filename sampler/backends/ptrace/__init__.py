"""The native backend: sampler as its own debugger, with python-ptrace's system calls.

What drives ptrace and no more (debug info is sampler/debuginfo):

- ``backend``: the sampling cycle (arm, wait, read, put back, let go) and the read plans'
  life; ``plan``: the reads a hit needs, learnt at the first two hits;
- ``scope``: what the expressions' names mean at the breakpoint (locals, globals, ABI
  argument registers, registers; Delve's EvalScope); ``evaluate``: expression to value over
  types and memory; ``golang``: interfaces' dynamic types; ``wrappers``: values shown as text;
- ``tracer``: threads, waits, breakpoints and the step over one; ``children``: processes
  the target forks, cleaned of the breakpoints and let go; ``calls``: the raw system calls
  python-ptrace lacks; ``instructions``: decoding at a breakpoint (capstone);
- ``memory``: reading the target (and writing the breakpoint byte only); ``rescue``: what
  the guardian runs when the worker is killed.
"""
