"""The process mechanism: a traced process's threads, events, memory and bytes, knowing no config,
expression or row.

- ``reads``: the memory protocols every layer reads through (Read, Memory, Stop);
- ``tasks`` (the shared state, requests, waits), ``events`` (what each waitpid status means: forks,
  execs, signals), ``stepover`` (the step over a breakpoint, emulation, holding the others),
  ``tracer`` (attach, detach, the hot path), ``router`` (many processes' events), ``children``
  (processes the target forks, cleaned and let go), ``restart``, ``guard``, ``calls`` (the raw system
  calls python-ptrace lacks), ``instructions`` and ``emulate`` (the instruction under a breakpoint);
- ``memory`` (reading the target; writing a probe's bytes only), ``consistent`` (rows of one moment),
  ``patchtable`` (every byte written, journaled, put back), ``stats``;
- ``snapshot`` (a thread's registers and stack top, stopped only while read), ``freeze`` (every
  thread held by a sampler that does not trace: the guardian, repair);
- ``inject`` (system calls the target makes for sampler) and ``areas`` (its code and data
  mappings for the in-process probes).

The backends (backends/ptrace), stacks/, repair and the guardian's rescue use it directly.
"""
