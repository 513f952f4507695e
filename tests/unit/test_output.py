import csv
import io
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sampler.errors import OutputError
from sampler.output import outlet
from sampler.output.console import ConsoleWriter, format_line
from sampler.output.csv import CsvWriter
from sampler.sample import Reading, Sample

WHEN = datetime(2026, 11, 30, 2, 3, 4, 500000, tzinfo=UTC)


def sample(seq: int, values: tuple, error: str = "") -> Sample:
    reading = Reading(values=values, thread="19", pause_us=5123.4, wait_us=2400.0, error=error)
    return Sample(seq=seq, time=WHEN, elapsed_s=0.1 * seq, pid=42, reading=reading, late_us=1500.0)


def test_header_once_and_one_flushed_row_per_sample(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    writer = CsvWriter(str(path), ["delta", "b.r"])
    writer.begin()
    writer.write(sample(1, (448, 7)))
    outlet.settle()
    # written by the file's thread: readable before close
    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows == [
        ["seq", "time", "elapsed_s", "pid", "thread", "delta", "b.r", "pause_us", "wait_us", "late_us", "error"],
        ["1", "2026-11-30T02:03:04.500000Z", "0.100000", "42", "19", "448", "7", "5123", "2400", "1500", ""],
    ]
    writer.write(sample(2, (None, 1.5), error='delta: nil pointer, "quoted"'))
    writer.close()
    outlet.settle()
    rows = list(csv.DictReader(path.read_text().splitlines()))
    assert rows[1]["delta"] == "" and rows[1]["b.r"] == "1.5"
    assert rows[1]["error"] == 'delta: nil pointer, "quoted"'


def test_unwritable_path_is_an_output_error(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="cannot write --out"):
        CsvWriter(str(tmp_path / "missing" / "s.csv"), ["x"])


def test_console_line() -> None:
    assert format_line(sample(3, (448, None)), ["delta", "b.r"]) == "#3 delta=448 pause=5.1ms late=1.5ms"
    stream = io.StringIO()
    ConsoleWriter(["d"], stream).write(sample(1, (None,), error="not hit"))
    assert stream.getvalue() == "#1 pause=5.1ms late=1.5ms error: not hit\n"


def test_no_header_until_sampling_starts(tmp_path: Path) -> None:
    # GIVEN an --out file that exists, and one that does not
    kept = tmp_path / "kept.csv"
    kept.write_text("an earlier run\n")
    new = tmp_path / "new.csv"
    # WHEN writers are opened and closed without sampling ever starting (an attach error)
    for path in (kept, new):
        CsvWriter(str(path), ["x"]).close()
    outlet.settle()
    # THEN the existing file is as it was, and the new one is not left behind
    assert kept.read_text() == "an earlier run\n"
    assert not new.exists()


def test_stdout_gets_the_header_only_at_begin(capfd: pytest.CaptureFixture[str]) -> None:
    writer = CsvWriter("-", ["x"])
    assert capfd.readouterr().out == ""
    writer.begin()
    writer.close()
    outlet.settle()
    assert capfd.readouterr().out.splitlines()[0].startswith("seq,time,")


def test_a_device_or_fifo_as_out(tmp_path: Path) -> None:
    # a device: written, never truncated or removed
    writer = CsvWriter("/dev/null", ["x"])
    writer.begin()
    writer.write(sample(1, (1,)))
    writer.close()
    outlet.settle()
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # a FIFO without a reader is refused at once, never waited for
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="a FIFO that no one reads"):
        CsvWriter(str(fifo), ["x"])
    # with a reader: the header at begin and each row, whole, in order
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        writer = CsvWriter(str(fifo), ["x"])
        writer.begin()
        writer.write(sample(1, (7,)))
        writer.write(sample(2, (8,)))
        writer.close()
        outlet.settle()
        lines = os.read(reader, 65536).decode().splitlines()
    finally:
        os.close(reader)
    assert lines[0].startswith("seq,time,") and [line.split(",")[5] for line in lines[1:]] == ["7", "8"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO: never truncated or replaced


def test_counts_kept_in_sampler_cap_the_values_a_target_can_make() -> None:
    from sampler.output import aggregate

    out = io.StringIO()
    counts = aggregate.Aggregate(["cmd", "n"], ["cmd", "thread"], ["n"], 42, stream=out)
    now = datetime.now(UTC)
    for i in range(aggregate.MAX_KEYS + 150):  # a hostile target: a new value at every hit
        counts.write(Sample(i, now, 0.0, 42, Reading((f"v{i}" if i >= 100 else "get", i % 5 or None),
                                                     thread="7"), 0.0))
    counts.write(Sample(0, now, 0.0, 42, Reading((None, "x"), thread="8"), 0.0))
    counts.close()
    assert len(counts.counts["cmd"]) == aggregate.MAX_KEYS + 2  # the first 10,000, "(other)", "(error)"
    assert counts.counts["cmd"]["get"] == 100 and counts.counts["cmd"]["(other)"] == 51
    assert counts.counts["cmd"]["(error)"] == 1 and counts.counts["thread"] == {"7": 10_150, "8": 1}
    text = out.getvalue()
    assert text.startswith("@cmd (PID 42):\nget") and "\n(other)   " in text and "@thread (PID 42):\n7" in text
    assert "(9982 more values, 9982 samples)" in text  # 20 shown of 10,002
    assert "@n (PID 42):" in text and "samples of n were no number: not counted" in text


def test_count_headers_of_a_run_of_many_count_the_processes_seen() -> None:
    from sampler.output import aggregate

    # a run that began with one process (--exe) and took in 3 more: the headers say 4
    out = io.StringIO()
    counts = aggregate.Aggregate(["n"], ["pid"], [], "1 processes", stream=out)
    for pid in (10, 11, 12, 13, 10):
        counts.write(Sample(0, datetime.now(UTC), 0.0, pid, Reading((1,)), 0.0))
    assert "pid (4 processes)" in counts.render()
    assert "1 processes" not in counts.render()
