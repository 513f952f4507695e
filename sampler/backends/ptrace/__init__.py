"""The native backend: sampler as its own debugger, over the process mechanism (sampler/process).

- ``backend``: the sampling cycle (arm, wait, read, put back, let go) and the read plans' life;
  ``site``: a breakpoint's hits to rows; ``fleet``: many processes;
- ``inprocess`` and ``readrows``: the in-process probes put, drained and read as rows;
- ``latency``, ``timedprobes``, ``pylatency``: --latency and --to (over probes/pairing.py and returns.py);
- ``stackcopy`` and ``parked``: stacks at a hit; ``rescue``: what the guardian runs when the
  worker is killed.
"""
