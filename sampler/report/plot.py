"""`sampler report --plot`: one panel per expression over time, rows with an error marked,
and a panel of the pause; with matplotlib (an optional dependency: a clear line without it)."""

from __future__ import annotations

import io
from pathlib import Path

from sampler import writes
from sampler.report.load import ReportError, Table, cells, numeric, to_number
from sampler.report.stats import failed_in, group


def plot(table: Table, path: str) -> int:
    """Write the figure to ``path`` (.png, .svg or .pdf); returns the number of panels."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".png", ".svg", ".pdf"):
        raise ReportError(f"--plot {path}: the file must end in .png, .svg or .pdf", "e.g. --plot run.png")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("--plot needs matplotlib, which is not installed",
                          "pip install matplotlib (or pip install 'debug-sampler[plot]')") from None
    panels = [*table.expressions, "pause_us"]
    figure, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(10, 2.2 * len(panels) + 0.6),
                                squeeze=False)
    for axis, name in zip(axes[:, 0], panels):
        for pid, rows in group(table.rows, lambda row: int(row["pid"])).items():
            label = f"PID {pid}"
            values = numeric(cells(rows, name)) if name in table.columns else None
            if values is None:
                axis.text(0.5, 0.5, f"{name}: not numeric", transform=axis.transAxes, ha="center")
                continue
            points = [(row["elapsed_s"], to_number(row.get(name))) for row in rows]
            points = [(t, v) for t, v in points if v is not None]  # rows with a value
            axis.plot([t for t, _ in points], [v for _, v in points], marker=".", markersize=3, linewidth=0.8,
                      label=label)
            if name != "pause_us":
                failed = [row["elapsed_s"] for row in rows if failed_in(row["error"], name, row)]
                if failed:
                    axis.plot(failed, [axis.get_ylim()[0]] * len(failed), "x", color="red", label=f"{label}: error")
        axis.set_ylabel(name)
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("elapsed (s)")
    figure.suptitle(", ".join(table.files))
    figure.tight_layout()
    image = io.BytesIO()  # drawn here, written by the one way sampler writes files (never through a link)
    try:
        figure.savefig(image, dpi=100, format=suffix[1:])
    finally:
        plt.close(figure)
    writes.write_file(path, image.getvalue(), "--plot")
    return len(panels)
