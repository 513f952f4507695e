"""What keeps the target unharmed when sampler itself fails: the front process and the
worker it forks (``supervisor``), the guardian that puts bytes back when the worker is
killed (``guardian``), the durable log of patched bytes (``journal``) and the repair that
reads it (``repair``). Knows no backend: a backend hands the guardian its rescue."""
