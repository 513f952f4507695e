"""Debuggers that sampler can drive; the session reaches them only through base."""
