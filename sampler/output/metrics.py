"""--metrics HOST:PORT: an OpenMetrics/Prometheus endpoint of the run (prometheus_client).

The HTTP server runs in a process of its own, fed one line per sample through a pipe:
a server thread in the worker would take the interpreter's lock from the hot path of a
hit for as long as a scrape lasts, and the target's thread waits then. A write to a full
pipe drops that update (the next sample's values replace it anyway); the server ends on
the pipe's EOF, when the run ends or the worker dies.
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import sys
from collections.abc import Sequence

from sampler import waits
from sampler.errors import OutputError
from sampler.output import RowByRow
from sampler.output.aggregate import OTHER, key_of
from sampler.sample import Sample, Value

LOOPBACK = "127.0.0.1"
PAUSE_BUCKETS = (5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25,
                 1.0)
READY_TIMEOUT_S = 10.0


def parse_address(text: str) -> tuple[str, int]:
    """'9464' or ':9464' -> loopback; 'HOST:PORT' as given ('[::1]:9464' for IPv6)."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or LOOPBACK
    try:
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise OutputError(f"--metrics {text}: the port must be a number from 1 to 65535",
                          "e.g. --metrics 127.0.0.1:9464") from None
    return host, number


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


MAX_LABELS = 1000
"""Distinct values of a --count-by column exported as labels (a series each); beyond, ``(other)``."""
HIST_BUCKETS = tuple(float(1 << k) for k in range(0, 41))
"""--hist's buckets in the export: powers of two, 1 to 2^40 (and +Inf), as bpftrace's hist()."""


class MetricsWriter(RowByRow):
    def __init__(self, address: str, names: Sequence[str], pid: int, count_by: Sequence[str] = (),
                 hists: Sequence[str] = ()) -> None:
        """Start the server process; OutputError when it cannot listen there."""
        self.host, self.port = parse_address(address)
        self.names, self.pid = list(names), pid
        self.count_by, self.hists = list(count_by), list(hists)
        self._index = {name: index for index, name in enumerate(self.names)}
        read_end, self._write_end = os.pipe()
        ready_read, ready_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        self._server = os.fork()
        if self._server == 0:  # the server process
            os.close(self._write_end)
            os.close(ready_read)
            try:
                _serve(read_end, ready_write, self.host, self.port, self.names, pid, self.count_by, self.hists)
            finally:
                os._exit(0)
        os.close(read_end)
        os.close(ready_write)
        os.set_blocking(self._write_end, False)
        try:
            ready = waits.readable([ready_read], READY_TIMEOUT_S)
            said = os.read(ready_read, 4096).decode(errors="replace").strip() if ready else "no answer"
        finally:
            os.close(ready_read)
        if said != "ok":
            self.close()
            raise OutputError(f"--metrics {address}: cannot serve on {self.host}:{self.port} ({said})",
                              "give a free port, e.g. --metrics 127.0.0.1:9464")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def begin(self) -> None:
        pass

    def write(self, sample: Sample) -> None:
        r = sample.reading
        update = {"pid": sample.pid,
                  "values": [v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
                             for v in r.values],
                  "error": bool(r.error), "pause_s": r.pause_us / 1e6,
                  "keys": [key_of(self._value(sample, name)) for name in self.count_by],
                  "hist": [self._value(sample, name) for name in self.hists]}
        line = (json.dumps(update) + "\n").encode()
        if len(line) > select.PIPE_BUF:  # only writes this small reach the pipe whole: drop it
            return
        try:
            os.write(self._write_end, line)
        except (BlockingIOError, BrokenPipeError):
            pass  # a full pipe: this update is dropped; a dead server: the rows still go out

    def _value(self, sample: Sample, name: str) -> Value:
        if name == "thread":
            return sample.reading.thread or None
        if name == "pid":
            return sample.pid
        value = sample.reading.values[self._index[name]]
        return value if name in self.count_by or isinstance(value, (int, float)) else None

    def close(self) -> None:
        if self._write_end >= 0:
            os.close(self._write_end)  # EOF: the server ends
            self._write_end = -1
        if self._server > 0:
            try:
                os.waitpid(self._server, 0)
            except ChildProcessError:
                pass
            self._server = 0


def _serve(updates: int, ready: int, host: str, port: int, names: list[str], pid: int,
           count_by: list[str], hists: list[str]) -> None:
    """The server process: the metrics, the HTTP server (a thread), then updates until EOF."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

    from sampler.safety.supervisor import name_process

    name_process(b"sampler-metrics")
    registry = CollectorRegistry()
    label = str(pid)
    value = Gauge("sampler_value", "The last value of each expression", ["pid", "expression"], registry=registry)
    samples = Counter("sampler_samples", "Samples taken (rows written)", ["pid"], registry=registry)
    errors = Counter("sampler_errors", "Samples with an error", ["pid"], registry=registry)
    pause = Histogram("sampler_pause_seconds", "How long the target (ptrace: the hitting thread) was stopped",
                      ["pid"], buckets=PAUSE_BUCKETS, registry=registry)
    if pid:  # (a run of many processes: each gets its series with its first row)
        samples.labels(label)
        errors.labels(label)
    counted = Counter("sampler_value_count", "Samples per value of a --count-by expression",
                      ["pid", "expression", "value"], registry=registry)
    distribution = Histogram("sampler_value_distribution", "The values of a --hist expression",
                             ["pid", "expression"], buckets=HIST_BUCKETS, registry=registry)
    seen: dict[str, set[str]] = {name: set() for name in count_by}
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        os.write(ready, (e.strerror or str(e)).encode())
        return
    os.write(ready, b"ok")
    os.close(ready)
    with os.fdopen(updates, "rb") as lines:
        for line in lines:
            try:
                update = json.loads(line)
            except ValueError:
                continue
            label = str(update.get("pid") or pid)  # a run of many processes: each its own series
            samples.labels(label).inc()
            if update["error"]:
                errors.labels(label).inc()
            pause.labels(label).observe(update["pause_s"])
            for name, number in zip(names, update["values"]):
                if number is not None:
                    value.labels(label, name).set(number)
            for name, key in zip(count_by, update.get("keys", [])):
                if key not in seen[name]:
                    if len(seen[name]) >= MAX_LABELS:
                        key = OTHER
                    seen[name].add(key)
                counted.labels(label, name, key).inc()
            for name, number in zip(hists, update.get("hist", [])):
                if isinstance(number, (int, float)) and not isinstance(number, bool):
                    distribution.labels(label, name).observe(number)
