"""sampler: ask a running process a question, every interval, with a debugger."""

__version__ = "0.1.0"
