"""In-process probes (issue 36), the parts that know no ptrace: where a jump may replace a site's
first bytes and how the instructions it displaces run elsewhere (relocate.py). The mechanism that
makes pages in the target and writes the jump is backends/ptrace's (inject.py, areas.py).
"""
