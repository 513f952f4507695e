"""Facts about the target, read before and while it is touched: /proc (``procfs``), what it
runs (``process``), why ptrace is refused (``permission``), finding it by name or container
(``pgrep``). Knows no backend."""
