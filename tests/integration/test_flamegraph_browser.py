"""sampler's flame graph in a real browser: headless Chromium opens the SVG, and what it shows is
read back, the DOM after its script ran and a screenshot's pixels. A graph that drew nothing,
drew it elsewhere or drew it only with script fails here."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from sampler.profile import flamegraph, render

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROFILE = {"main;work;hot": 70, "main;work;cold": 30, "main;idle": 10}
SVG = "{http://www.w3.org/2000/svg}"
Browser = Callable[..., str]


@pytest.fixture
def chromium(tmp_path: Path) -> Browser:
    """Runs headless Chromium with ARGS and a fresh profile folder, and returns its stdout; a failure when
    it is missing (make setup installs it)."""
    assert os.access(CHROMIUM, os.X_OK), "chromium is missing (make setup installs it)"

    def run(*args: str) -> str:
        profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
        result = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    return run


def frames_in(dom: ET.Element) -> dict[str, dict[str, str]]:
    """Each frame of the DOM by its tooltip's name: its rectangle's attributes, its tooltip, the
    name drawn."""
    group = dom.find(f"{SVG}g[@id='frames']")
    assert group is not None, "no frames in the DOM"
    frames = {}
    for g in group.findall(f"{SVG}g"):
        title, rect, label = g.find(f"{SVG}title"), g.find(f"{SVG}rect"), g.find(f"{SVG}text")
        assert title is not None and rect is not None and label is not None
        tooltip = title.text or ""
        frames[tooltip[:tooltip.rindex(" (")]] = {**rect.attrib, "tooltip": tooltip, "label": label.text or ""}
    return frames


def rgb(fill: str) -> tuple[int, int, int]:
    red, green, blue = (int(v) for v in fill.removeprefix("rgb(").removesuffix(")").split(","))
    return red, green, blue


def near(pixel: tuple[int, ...], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 6 for a, b in zip(pixel[:3], colour))


def columns_of(image: Image.Image, y: int, colour: tuple[int, int, int]) -> list[int]:
    """The x of each pixel of row ``y`` that has ``colour``."""
    return [x for x in range(image.width) if near(image.getpixel((x, y)), colour)]  # type: ignore[arg-type]


@pytest.mark.parametrize("script", [True, False], ids=["with script", "without script"])
def test_the_browser_shows_every_frame_where_its_samples_put_it(chromium: Browser, tmp_path: Path,
                                                                script: bool) -> None:
    # GIVEN the flame graph of a known profile, written as `sampler profile --out cpu.svg` writes it
    path = tmp_path / "cpu.svg"
    line = render.to_file(PROFILE, str(path), "Flame Graph", "110 samples, 3 threads, 10 s at 99 Hz, cost 0.4%")
    assert "a flame graph of 110 samples in 3 stacks (6 frames)" in line
    if script:
        # WHEN Chromium opens it: the DOM as it has it after load and the script
        dom = ET.fromstring(chromium("--dump-dom", path.as_uri()).strip())
        search = dom.find(f"{SVG}text[@id='search']")  # the script shows its Search button
        assert search is not None and "hide" not in search.get("class", "")
    else:  # --dump-dom runs script: the frames' places as the file has them
        dom = ET.parse(path).getroot()
    # THEN every frame is there with its name, drawn in it, and its tooltip
    frames = frames_in(dom)
    assert set(frames) == {"all", "main", "work", "hot", "cold", "idle"}
    assert all(frame["label"] == name for name, frame in frames.items())
    assert frames["hot"]["tooltip"] == "hot (70 samples, 63.64%)"
    title = dom.find(f"{SVG}text[@id='title']")
    assert title is not None and title.text == "Flame Graph"
    # WHEN Chromium draws it: opened itself, its script run; or as an <img> of a page, where an
    # SVG's script never runs (every frame is drawn by the file itself)
    page = tmp_path / "page.html"
    page.write_text('<!DOCTYPE html><html><body style="margin: 0"><img src="cpu.svg"></body></html>')
    png = tmp_path / "cpu.png"
    chromium(f"--screenshot={png}", "--window-size=1200,600", (path if script else page).as_uri())
    image = Image.open(png).convert("RGB")
    scale = image.width / 1200  # 1 unless the browser draws at another device scale

    def row(name: str) -> int:  # the pixel row through the middle of a frame
        return round((float(frames[name]["y"]) + 7) * scale)

    # THEN the row of `main` is its one warm colour across the full width (but for its name)
    main = rgb(frames["main"]["fill"])
    assert main[0] >= 205 and main[0] > main[1] and main[0] > main[2]
    drawn = columns_of(image, row("main"), main)
    assert len(drawn) >= 0.9 * 1180 * scale, f"{len(drawn)} pixels of main's colour {main}"
    assert min(drawn) <= 11 * scale and max(drawn) >= 1188 * scale
    # AND `hot` covers 70% of `work`, at its right; `cold` the 30% left of it
    work = columns_of(image, row("work"), rgb(frames["work"]["fill"]))
    hot = columns_of(image, row("hot"), rgb(frames["hot"]["fill"]))
    cold = columns_of(image, row("cold"), rgb(frames["cold"]["fill"]))
    work_width = max(work) - min(work) + 1
    assert (max(hot) - min(hot) + 1) / work_width == pytest.approx(0.70, abs=0.01)
    assert (max(cold) - min(cold) + 1) / work_width == pytest.approx(0.30, abs=0.01)
    assert max(hot) == pytest.approx(max(work), abs=1) and min(cold) == pytest.approx(min(work), abs=1)
    # AND nothing of a frame's colour above `idle` (it calls nothing) or above the top frames
    colours = [rgb(frame["fill"]) for frame in frames.values()]
    idle = columns_of(image, row("idle"), rgb(frames["idle"]["fill"]))
    above = round((float(frames["hot"]["y"]) - flamegraph.FRAME_HEIGHT + 7) * scale)
    for y, xs in ((row("hot"), range(min(idle), max(idle) + 1)), (above, range(image.width))):
        assert not [x for x in xs if any(near(image.getpixel((x, y)), c) for c in colours)]  # type: ignore[arg-type]
    # AND the title is written at the top, in the middle
    dark = [(x, y) for x in range(500, 700) for y in range(5, 30)
            if sum(image.getpixel((x, y))) < 250]  # type: ignore[arg-type]
    assert len(dark) > 30, "no title drawn"
    # AND the Search button at the top right, shown by the script only
    button = [(x, y) for x in range(round(1130 * scale), round(1190 * scale)) for y in range(5, 30)
              if sum(image.getpixel((x, y))) < 250]  # type: ignore[arg-type]
    assert bool(button) is script


def test_a_hostile_name_is_text_in_the_browser(chromium: Browser, tmp_path: Path) -> None:
    # GIVEN a function whose name (a target's symbol table chose it) closes the text and opens a script
    name = "</text><script>document.title='owned'</script><text>&\"'"
    path = tmp_path / "cpu.svg"
    render.to_file({**PROFILE, f"main;{name}": 100}, str(path), "Flame Graph", "")
    # WHEN Chromium opens it and has run the script
    dom = ET.fromstring(chromium("--dump-dom", path.as_uri()).strip())
    # THEN the only script is sampler's own, and the name is the frame's text, drawn whole
    assert len(dom.findall(f".//{SVG}script")) == 1 and dom.find(f"{SVG}title") is None
    frames = frames_in(dom)
    assert frames[name]["label"] == name and frames[name]["tooltip"].startswith(f"{name} (100 samples")


CLICKS = """<!DOCTYPE html><html><body>
<object id="graph" data="cpu.svg" type="image/svg+xml"></object><pre id="out"></pre>
<script>
// Clicks in the graph as a user would, and writes down what each frame became.
var graph = document.getElementById("graph");
graph.addEventListener("load", function () {
  var svg = graph.contentDocument, steps = {};
  var frames = Array.prototype.slice.call(svg.getElementById("frames").children);
  function named(name) {
    return frames.filter(function (g) { return g.querySelector("title").textContent.indexOf(name + " (") === 0; })[0];
  }
  function seen() {
    var shown = {};
    frames.forEach(function (g) {
      var title = g.querySelector("title").textContent, rect = g.querySelector("rect");
      shown[title.slice(0, title.indexOf(" ("))] = {
        x: +rect.getAttribute("x"), width: +rect.getAttribute("width"), fill: rect.getAttribute("fill"),
        class: g.getAttribute("class") || "", label: g.querySelector("text").textContent};
    });
    return {frames: shown, unzoom: svg.getElementById("unzoom").getAttribute("class"),
            matched: svg.getElementById("matched").textContent};
  }
  named("work").dispatchEvent(new MouseEvent("click", {bubbles: true}));
  steps.zoomed = seen();
  svg.getElementById("unzoom").dispatchEvent(new MouseEvent("click", {bubbles: true}));
  steps.unzoomed = seen();
  graph.contentWindow.prompt = function () { return "^(hot|cold)$"; };
  svg.getElementById("search").dispatchEvent(new MouseEvent("click", {bubbles: true}));
  steps.searched = seen();
  document.getElementById("out").textContent = JSON.stringify(steps);
});
</script></body></html>
"""


def test_a_click_zooms_and_search_finds(chromium: Browser, tmp_path: Path) -> None:
    # GIVEN the graph of the known profile, in a page that clicks in it as a user would
    path = tmp_path / "cpu.svg"
    path.write_text(flamegraph.svg(PROFILE, "Flame Graph"))
    page = tmp_path / "clicks.html"
    page.write_text(CLICKS)
    # WHEN Chromium runs the page (its script may reach the graph's file: --allow-file-access-from-files)
    dom = chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), f"the page wrote nothing: {dom[-2000:]}"
    steps = json.loads(html.unescape(found.group(1)))
    # THEN a click on `work` spreads it over the full width, hot and cold in it 70:30; its callers
    # stay below it, faded; idle is hidden; Reset Zoom is shown
    zoomed = steps["zoomed"]["frames"]
    assert zoomed["work"]["x"] == flamegraph.XPAD and zoomed["work"]["width"] == 1180
    assert zoomed["cold"]["width"] == pytest.approx(0.3 * 1180, abs=0.01)
    assert zoomed["hot"]["width"] == pytest.approx(0.7 * 1180, abs=0.01) and zoomed["hot"]["label"] == "hot"
    assert zoomed["main"]["class"] == zoomed["all"]["class"] == "parent" and zoomed["main"]["width"] == 1180
    assert zoomed["idle"]["class"] == "hide" and "hide" not in steps["zoomed"]["unzoom"]
    # AND Reset Zoom puts every frame back where the file has it
    original = frames_in(ET.parse(path).getroot())
    for name, frame in steps["unzoomed"]["frames"].items():
        assert (frame["x"], frame["width"]) == (float(original[name]["x"]), float(original[name]["width"]))
        assert "hide" not in frame["class"] and "parent" not in frame["class"]
    assert "hide" in steps["unzoomed"]["unzoom"]
    # AND a search marks the frames it matches and says their share of the samples
    searched = steps["searched"]
    assert {name for name, f in searched["frames"].items() if f["fill"] == "rgb(230,0,230)"} == {"hot", "cold"}
    assert searched["matched"] == "Matched: 90.9%"
