"""What goes where, decided from the run's options before anything is seized: what a run needs of its
backend and what each backend can do (needs.py), the columns a run's rows have (columns.py), and the
latency parts that know no process: the pairing of entries with returns (pairing.py) and a function's
returns as the machine code says (returns.py)."""
