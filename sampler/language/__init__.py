"""The expression language every backend shares: checking an expression (``expr``, on
Python's ast), the C types a cast may name (``casts``), and ``--stop-when`` conditions over
a row's columns (``condition``)."""
