"""A profile's output without a process (sampler/profile): folded text written and read back, the
SVG flame graph read with xml.etree (frames merged as flamegraph.pl merges them, each as wide as
its samples, hostile names escaped, the frame cap), speedscope's JSON against its schema, and
what `sampler report FILE.folded` prints."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from sampler.errors import OutputError, UsageError
from sampler.profile import flamegraph, folded, render, speedscope

SVG = "{http://www.w3.org/2000/svg}"
PROFILE = {"main;work;hot": 70, "main;work;cold": 30, "main;idle": 10}
HOSTILE = "</text><script>alert(1)</script>&\"'\x1b[31m\x07\u202e\x00x"


@dataclass(frozen=True)
class Drawn:
    """A frame as the SVG has it: its name and samples from its tooltip, its depth, its
    rectangle, its drawn name."""
    name: str
    samples: int
    percent: float
    depth: int
    x: float
    y: float
    width: float
    fill: str
    label: str


def frames_of(text: str) -> list[Drawn]:
    """Each frame of a flame graph, read with xml.etree."""
    group = ET.fromstring(text).find(f"{SVG}g[@id='frames']")
    assert group is not None
    found = []
    for g in group.findall(f"{SVG}g"):
        title, rect, label = g.find(f"{SVG}title"), g.find(f"{SVG}rect"), g.find(f"{SVG}text")
        assert title is not None and rect is not None and label is not None
        info = re.fullmatch(r"(.*) \(([0-9,]+) samples, ([0-9.]+)%\)", title.text or "", re.S)
        assert info, title.text
        found.append(Drawn(info.group(1), int(info.group(2).replace(",", "")), float(info.group(3)),
                           int(g.get("data-d", "-1")), float(rect.get("x", "nan")), float(rect.get("y", "nan")),
                           float(rect.get("width", "nan")), rect.get("fill", ""), label.text or ""))
    return found


def paths_of(frames: list[Drawn]) -> dict[str, int]:
    """Each frame's path from the root ("main;work") -> its samples, the caller of a frame found
    as the frame one level down whose rectangle holds it."""
    paths: dict[str, int] = {}
    placed: dict[int, list[tuple[float, float, str]]] = {}
    for frame in sorted(frames, key=lambda f: (f.depth, f.x)):
        if frame.depth == 0:
            path = ""
        else:
            [caller] = [p for (x, width, p) in placed[frame.depth - 1]
                        if x - 0.02 <= frame.x and frame.x + frame.width <= x + width + 0.02]
            path = f"{caller};{frame.name}".lstrip(";")
        assert path not in paths, f"two frames for {path}"
        paths[path] = frame.samples
        placed.setdefault(frame.depth, []).append((frame.x, frame.width, path))
    return paths


def prefixes(stacks: dict[str, int]) -> dict[str, int]:
    """What flamegraph.pl draws, worked out the plain way: every prefix of every stack, with the
    samples of the stacks under it; the root ("") has them all."""
    counted: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")
        counted[""] += count
        for depth in range(1, len(frames) + 1):
            counted[";".join(frames[:depth])] += count
    return dict(counted)


# folded


def test_folded_is_written_sorted_as_flamegraph_pl_reads_it_and_reads_back() -> None:
    stacks = {"main;work;hot": 70, "main;idle": 10, "main;operator new(unsigned long)": 3, "main;work;cold": 30}
    text = folded.write(stacks)
    assert text.splitlines() == ["main;idle 10", "main;operator new(unsigned long) 3", "main;work;cold 30",
                                 "main;work;hot 70"]
    assert folded.read(text, "cpu.folded") == stacks


def test_folded_reading_skips_blank_lines_and_comments_and_adds_a_stack_twice() -> None:
    text = "# sampler profile\r\n\nmain;a 2\r\n   \nmain;a\t3\n# main;b 9\nmain;c 0\n"
    assert folded.read(text, "cpu.folded") == {"main;a": 5}


def test_a_line_break_in_a_name_cannot_forge_a_line() -> None:
    text = folded.write({"main;evil\nforged 99": 1})
    assert text.count("\n") == 1 and folded.read(text, "x") == {"main;evil\\nforged 99": 1}


@pytest.mark.parametrize("line", ["main;work", "main;work 1.5", "main;work -3", "12", "main;work 1234567890123456789"])
def test_a_line_that_is_not_a_stack_and_a_count_names_the_file_and_line(line: str) -> None:
    with pytest.raises(folded.FoldedError) as caught:
        folded.read(f"main;ok 1\n\n{line}\n", "cpu.folded")
    message = str(caught.value)
    assert message.startswith("cpu.folded line 3: not 'STACK COUNT'") and "\n" not in message
    assert isinstance(caught.value, UsageError)  # the CLI's one line, exit code 2, no traceback


def test_a_hostile_line_is_shown_escaped_and_cut() -> None:
    with pytest.raises(folded.FoldedError) as caught:
        folded.read("\x1b]0;owned\x07" + "A" * 500 + "\n", "cpu.folded")
    message = str(caught.value)
    assert "\x1b" not in message and "\x07" not in message and "\\x1b]0;owned" in message and len(message) < 300


def test_a_file_too_large_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(folded.FoldedError, match=r"more than 1,000,000 lines of folded stacks: not read"):
        folded.read("a 1\n" * 1_000_001, "big.folded")
    monkeypatch.setattr(folded, "MAX_BYTES", 1000)
    with pytest.raises(folded.FoldedError, match="of folded stacks: not read"):
        folded.read("a 1\n" * 300, "big.folded")
    path = tmp_path / "big.folded"
    path.write_text("a 1\n" * 300)
    with pytest.raises(folded.FoldedError, match=r"big.folded: 0 MB, more than 0 MB of folded stacks: not read"):
        folded.load(str(path))


def test_loading_a_file(tmp_path: Path) -> None:
    path = tmp_path / "cpu.folded"
    path.write_bytes(b"main;caf\xe9 4\nmain;ok 1\n")  # not UTF-8: read, not refused
    assert folded.load(str(path)) == {"main;caf\ufffd": 4, "main;ok": 1}
    with pytest.raises(folded.FoldedError, match="no such file"):
        folded.load(str(tmp_path / "nope.folded"))
    with pytest.raises(folded.FoldedError, match="not a regular file"):
        folded.load(str(tmp_path))


# the flame graph


def test_frames_merge_common_prefixes_and_are_as_wide_as_their_samples() -> None:
    # GIVEN stacks that share prefixes, a function at two depths, and a name that sorts between
    # "a" and "a;..." as text (flamegraph.pl's string sort would split the "a" frame in two)
    stacks = {**PROFILE, "other;work": 5, "a": 2, "a!;x": 3, "a;b": 4, "main;work;hot;hot": 6}
    # WHEN drawn 1200 pixels wide
    frames = frames_of(flamegraph.svg(stacks, "Flame Graph"))
    # THEN one frame per path from the root, with the samples of the stacks under it
    assert paths_of(frames) == prefixes(stacks)
    total = sum(stacks.values())
    scale = (1200 - 2 * flamegraph.XPAD) / total
    for frame in frames:
        assert frame.width == pytest.approx(frame.samples * scale, abs=0.006)
        assert frame.percent == pytest.approx(100 * frame.samples / total, abs=0.006)
    # AND the root at the bottom, each frame one row above its caller; callees left to right by name
    rows = {f.depth: f.y for f in frames}
    assert all(rows[d] - rows[d + 1] == flamegraph.FRAME_HEIGHT for d in range(max(rows)))
    [root] = [f for f in frames if f.depth == 0]
    assert root.name == "all" and root.samples == total and root.x == flamegraph.XPAD
    row1 = [f.name for f in sorted(frames, key=lambda f: f.x) if f.depth == 1]
    assert row1 == ["a", "a!", "main", "other"]


def test_names_are_drawn_where_they_fit_and_cut_with_two_dots() -> None:
    long = "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>"
    frames = {f.name: f for f in frames_of(flamegraph.svg({f"main;{long}": 100, "main;tiny": 1, "main;wide": 989},
                                                            "t"))}
    assert frames["main"].label == "main" and frames["wide"].label == "wide"
    assert frames["tiny"].label == ""  # 1.18 px: no room for a letter
    label = frames[long].label
    assert label.endswith("..") and long.startswith(label[:-2]) and len(label) >= 3
    assert len(label) * flamegraph.FONT_SIZE * flamegraph.FONT_WIDTH <= frames[long].width


def test_a_function_keeps_its_warm_colour() -> None:
    one = {f.name: f.fill for f in frames_of(flamegraph.svg(PROFILE, "one"))}
    two = {f.name: f.fill for f in frames_of(flamegraph.svg({"x;hot": 1, "main": 5}, "two", width=800))}
    assert one["hot"] == two["hot"] and one["main"] == two["main"]
    for fill in one.values():
        red, green, blue = map(int, re.findall(r"\d+", fill))
        assert fill.startswith("rgb(") and red >= 205 and green <= 230 and blue <= 55


def test_a_hostile_name_is_text_and_nothing_else() -> None:
    # GIVEN a name from a symbol table that closes the text, opens a script, and carries
    # terminal escapes, a bell, a bidi override and a NUL; and in the title too
    text = flamegraph.svg({f"main;{HOSTILE}": 50, "main;ok": 50}, f"title {HOSTILE}", f"sub {HOSTILE}")
    # THEN the SVG is well-formed XML, with our one script and no other element from the name
    root = ET.fromstring(text)
    assert len(root.findall(f".//{SVG}script")) == 1
    assert "<script>alert" not in text and "</text><script>" not in text
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202e]", text)
    # AND the name reads back as its text, control characters taken out
    shown = "</text><script>alert(1)</script>&\"'[31mx"
    frames = {f.name: f for f in frames_of(text)}
    assert shown in frames and frames[shown].label == shown and frames[shown].samples == 50
    title = root.find(f"{SVG}text[@id='title']")
    assert title is not None and title.text == f"title {shown}"


def test_a_long_name_is_cut_in_its_tooltip() -> None:
    frames = frames_of(flamegraph.svg({"main;" + "N" * 5000: 1}, "t"))
    [name] = [f.name for f in frames if f.depth == 2]
    assert len(name) == 300 and name.endswith("..")


def test_at_most_50000_frames_are_drawn_the_coarsest_first() -> None:
    # GIVEN 1000 stacks 61 frames deep, each its own path: 61,000 frames, each 1.18 px wide
    stacks = {";".join([f"s{i}", *(f"f{d}" for d in range(60))]): 1 for i in range(1000)}
    # WHEN drawn
    drawing = flamegraph.draw(stacks, "deep")
    # THEN 50,000 frames are drawn (the root among them), the rest left out, said so
    frames = frames_of(drawing.text)
    assert drawing.frames == len(frames) == flamegraph.MAX_FRAMES
    assert drawing.left_out == 61_001 - flamegraph.MAX_FRAMES
    # AND every frame drawn has its callers drawn: the deepest frames went first
    assert paths_of(frames).keys() <= prefixes(stacks).keys()
    assert max(f.depth for f in frames) < 61
    assert len(drawing.text) < 20_000_000


def test_frames_narrower_than_a_tenth_of_a_pixel_are_left_out() -> None:
    drawing = flamegraph.draw({"main;big": 100_000, "main;small": 1}, "t")
    assert {f.name for f in frames_of(drawing.text)} == {"all", "main", "big"} and drawing.left_out == 1


def test_no_samples_is_a_graph_that_says_so() -> None:
    drawing = flamegraph.draw({}, "empty")
    assert drawing.frames == 0 and "no samples" in drawing.text
    ET.fromstring(drawing.text)


# speedscope

REQUIRED = {
    "FileFormat.File": ["$schema", "profiles", "shared"],
    "shared": ["frames"],
    "FileFormat.Frame": ["name"],
    "FileFormat.SampledProfile": ["endValue", "name", "samples", "startValue", "type", "unit", "weights"],
}
"""The required fields of https://www.speedscope.app/file-format-schema.json (the types of
speedscope's src/lib/file-format-spec.ts): the file, its shared part, a frame, a sampled profile."""
UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def test_speedscope_has_the_schemas_required_fields_and_every_sample() -> None:
    stacks = {**PROFILE, f"main;{HOSTILE}": 4}
    document = json.loads(speedscope.document(stacks, "sampler profile of PID 42"))
    assert all(field in document for field in REQUIRED["FileFormat.File"])
    assert document["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    assert all(field in document["shared"] for field in REQUIRED["shared"])
    names = [frame["name"] for frame in document["shared"]["frames"]]
    assert all(set(REQUIRED["FileFormat.Frame"]) <= set(frame) for frame in document["shared"]["frames"])
    assert len(names) == len(set(names)) == 6
    [profile] = document["profiles"]
    assert all(field in profile for field in REQUIRED["FileFormat.SampledProfile"])
    assert profile["type"] == "sampled" and profile["unit"] in UNITS and profile["unit"] == "none"
    assert profile["name"] == "sampler profile of PID 42"
    # THEN the samples, outermost frame first, are the stacks, and their weights sum to the total
    assert len(profile["samples"]) == len(profile["weights"]) == len(stacks)
    total = sum(stacks.values())
    assert profile["startValue"] == 0 and profile["endValue"] == sum(profile["weights"]) == total
    read = {";".join(names[i] for i in sample): weight for sample, weight in zip(profile["samples"],
                                                                                   profile["weights"])}
    assert read == {**PROFILE, "main;</text><script>alert(1)</script>&\"'[31mx": 4}


# to a file, and sampler report


@pytest.mark.parametrize("name, starts", [("cpu.svg", "<?xml"), ("CPU.SVG", "<?xml"), ("cpu.folded", "main;idle 10"),
                                          ("cpu.speedscope.json", '{"$schema"')])
def test_the_suffix_picks_the_format(tmp_path: Path, name: str, starts: str) -> None:
    line = render.to_file(PROFILE, str(tmp_path / name), "Flame Graph", "110 samples")
    assert line.startswith(f"{tmp_path / name}: ") and "110 samples in 3 stacks" in line and "\n" not in line
    assert (tmp_path / name).read_text().startswith(starts)


def test_another_suffix_names_the_three(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        render.to_file(PROFILE, str(tmp_path / "cpu.json"), "t", "")
    assert all(suffix in str(caught.value) for suffix in (".svg", ".folded", ".speedscope.json"))
    assert not (tmp_path / "cpu.json").exists()
    with pytest.raises(OutputError, match=r"cannot write --out .*/no/cpu\.svg: .*No such file") as caught:
        render.to_file(PROFILE, str(tmp_path / "no" / "cpu.svg"), "t", "")
    assert caught.value.hint == "choose a path in a writable directory"  # (no --out -: a profile is a file)


def test_report_of_a_folded_file(tmp_path: Path) -> None:
    # GIVEN a folded file with a recursion (hot calls hot)
    path = tmp_path / "cpu.folded"
    path.write_text(folded.write({**PROFILE, "main;work;hot;hot": 5}))
    # WHEN reported, with a flame graph
    text = render.report_folded(str(path), str(tmp_path / "cpu.svg"), 3)
    # THEN the stacks and samples, the top functions by self and by total samples
    lines = text.splitlines()
    assert lines[0] == f"{path}: 115 samples in 4 stacks, 5 functions"
    own = lines[lines.index("Top 3 by self samples (the function itself running):") + 2:][:3]
    assert [line.split() for line in own] == [["75", "65.2%", "hot"], ["30", "26.1%", "cold"],
                                              ["10", "8.7%", "idle"]]
    anywhere = lines[lines.index("Top 3 by total samples (the function anywhere in the stack):") + 2:][:3]
    # hot is in 75 samples' stacks: the 5 of hot;hot are counted once
    assert [line.split() for line in anywhere] == [["115", "100.0%", "main"], ["105", "91.3%", "work"],
                                                   ["75", "65.2%", "hot"]]
    assert lines[-1].startswith(f"plot: {tmp_path / 'cpu.svg'}: a flame graph of 115 samples in 4 stacks")
    assert paths_of(frames_of((tmp_path / "cpu.svg").read_text()))["main;work;hot"] == 75


def test_report_refusals(tmp_path: Path) -> None:
    path = tmp_path / "empty.folded"
    path.write_text("# nothing\n")
    with pytest.raises(folded.FoldedError, match="no stacks in it"):
        render.report_folded(str(path), None, 10)
    with pytest.raises(UsageError, match=r"\.speedscope\.json"):
        render.report_folded(str(tmp_path / "absent.folded"), str(tmp_path / "cpu.png"), 10)
