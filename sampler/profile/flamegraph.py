"""An SVG flame graph of folded stacks, drawn by sampler itself (no flamegraph.pl, no inferno).

The conventions are flamegraph.pl's: the root ("all") at the bottom, each frame above its
caller, as wide as its samples; frames with the same path from the root are one frame (the
stacks sorted frame by frame, callees left to right by name); warm colours from a hash of the
name, so a function keeps its colour from one graph to the next; a ``<title>`` tooltip per
frame ("NAME (N samples, P%)"); the name inside the frame where it fits, cut with ".."
otherwise. Everything is drawn in the file itself: a small inline script adds click-to-zoom,
a search and the details line, but a viewer without script still shows every frame, name and
tooltip.

Bounded for any input: frames narrower than MIN_WIDTH_PX and deeper than MAX_DEPTH are left
out, and at most MAX_FRAMES are drawn, the widest first (a frame is never narrower than one
above it, so no frame is drawn without its callers). Every name is escaped for XML after
names.clean; no name reaches the script but through the DOM's text.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sampler.profile.names import clean

MAX_FRAMES = 50_000
"""The most frames drawn (about 12 MB of SVG); past it, the narrowest are left out."""
MAX_DEPTH = 1024
"""The deepest frame drawn (1024 frames are 16,000 pixels high)."""
MIN_WIDTH_PX = 0.1
"""A frame narrower than this is left out (as flamegraph.pl's --minwidth)."""
FONT_SIZE = 12
FONT_WIDTH = 0.59
"""A character's average width, in font sizes (Verdana's, as flamegraph.pl assumes)."""
FRAME_HEIGHT = 16
XPAD = 10
"""Blank pixels left and right of the frames."""
TITLE_Y = FONT_SIZE * 2
SUBTITLE_Y = FONT_SIZE * 4 - 4
BOTTOM = FONT_SIZE * 2 + 10
"""Below the root: the details line."""


@dataclass(frozen=True)
class Frame:
    depth: int
    """0 for the root ("all"), 1 for the outermost function of a stack."""
    name: str
    start: int
    """Samples left of it: its left edge."""
    samples: int


@dataclass(frozen=True)
class Drawing:
    text: str
    """The SVG."""
    frames: int
    """The frames drawn (the root included)."""
    left_out: int
    """The frames too narrow or too deep to draw, or past MAX_FRAMES."""
    samples: int


def svg(stacks: Mapping[str, int], title: str, subtitle: str = "", width: int = 1200) -> str:
    """The flame graph of ``stacks`` (folded stack -> samples) as a self-contained SVG document,
    ``width`` pixels wide; ``title`` and ``subtitle`` at its top."""
    return draw(stacks, title, subtitle, width).text


def draw(stacks: Mapping[str, int], title: str, subtitle: str = "", width: int = 1200) -> Drawing:
    """svg(), with how many frames it drew and left out."""
    width = max(int(width), 200)
    total = sum(count for stack, count in stacks.items() if count > 0 and stack)
    scale = (width - 2 * XPAD) / total if total else 0.0
    kept, left_out = _widest(_merged(stacks), MIN_WIDTH_PX / scale if scale else 0.0)
    depth = max((f.depth for f in kept), default=0)
    top = (SUBTITLE_Y if subtitle else TITLE_Y) + FONT_SIZE + 8
    height = top + (depth + 1) * FRAME_HEIGHT + BOTTOM
    out = [_header(width, height, title, subtitle)]
    if not total:
        out.append(f'<text x="{width / 2:g}" y="{top + FRAME_HEIGHT}" text-anchor="middle">no samples</text>\n')
    out.append('<g id="frames">\n')
    for frame in sorted(kept, key=lambda f: (f.depth, f.start)):
        out.append(_frame(frame, total, scale, height - BOTTOM))
    out.append("</g>\n")
    out.append(_SCRIPT.replace("@WIDTH@", str(width)).replace("@XPAD@", str(XPAD))
               .replace("@CHAR@", f"{FONT_SIZE * FONT_WIDTH:g}"))
    out.append("</svg>\n")
    return Drawing("".join(out), len(kept), left_out, total)


def _merged(stacks: Mapping[str, int]) -> Iterator[Frame]:
    """Every frame of the graph (each path from the root once, with the samples of every stack
    on it), the root last. As flamegraph.pl merges them: the stacks sorted frame by frame, the
    frames a stack shares with the one before it go on, the others end there and new ones start."""
    # frame by frame, without a list per stack: as text with the separator below every other
    # character (a NUL in a name may only split a frame in two)
    ordered = sorted((stack.replace(";", "\0"), stack, count) for stack, count in stacks.items() if count > 0 and stack)
    total = 0
    names: list[str] = []  # the frames open now, outermost first, and where each started
    starts: list[int] = []
    for _, stack, count in ordered:
        frames = stack.split(";")
        shared = 0
        while shared < min(len(names), len(frames)) and names[shared] == frames[shared]:
            shared += 1
        while len(names) > shared:
            start = starts.pop()
            yield Frame(len(names), names.pop(), start, total - start)
        names += frames[shared:]
        starts += [total] * (len(frames) - shared)
        total += count
    while names:
        start = starts.pop()
        yield Frame(len(names), names.pop(), start, total - start)
    if total:
        yield Frame(0, "all", 0, total)


def _widest(frames: Iterator[Frame], min_samples: float) -> tuple[list[Frame], int]:
    """The MAX_FRAMES widest of ``frames`` at least ``min_samples`` wide and at most MAX_DEPTH
    deep, and how many others there were. Ties go to the shallower frame, then the left one: a
    frame is never wider than its caller, so the callers of every frame kept are kept."""
    heap: list[tuple[tuple[int, int, int], Frame]] = []
    left_out = 0
    for frame in frames:
        if frame.samples < min_samples or frame.depth > MAX_DEPTH:
            left_out += 1
            continue
        item = ((frame.samples, -frame.depth, -frame.start), frame)  # unique: no two frames compared
        if len(heap) < MAX_FRAMES:
            heapq.heappush(heap, item)
        else:
            heapq.heappushpop(heap, item)
            left_out += 1
    return [frame for _, frame in heap], left_out


def _frame(frame: Frame, total: int, scale: float, base: int) -> str:
    """One frame: a group with its tooltip, its rectangle and its name where it fits; its place
    in samples (data-x, data-w) and its depth (data-d) for the script's zoom."""
    x = XPAD + frame.start * scale
    width = frame.samples * scale
    y = base - (frame.depth + 1) * FRAME_HEIGHT
    name = clean(frame.name)
    info = f"{name} ({frame.samples:,} samples, {100 * frame.samples / total:.2f}%)"
    return (f'<g data-d="{frame.depth}" data-x="{frame.start}" data-w="{frame.samples}">'
            f"<title>{escape(info)}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{width:.2f}" height="{FRAME_HEIGHT - 1}" fill="{colour(name)}" '
            f'rx="2" ry="2"/>'
            f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT // 2 + 4}">{escape(fit(name, width))}</text></g>\n')


def colour(name: str) -> str:
    """A warm colour for ``name`` (red 205-255, green 0-230, blue 0-55: from red to yellow, as
    flamegraph.pl's "hot" palette), the same for the same name in every graph."""
    green, blue, red = hashlib.blake2b(name.encode("utf-8", "replace"), digest_size=3).digest()
    return f"rgb({205 + red * 50 // 255},{green * 230 // 255},{blue * 55 // 255})"


def fit(name: str, width: float) -> str:
    """``name`` as it fits in a frame ``width`` pixels wide: whole, cut with "..", or nothing
    where fewer than three characters fit."""
    chars = int((width - 6) / (FONT_SIZE * FONT_WIDTH))
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[:chars - 2] + ".."


def escape(text: str) -> str:
    """``text`` for XML, as an element's text or inside either quote of an attribute."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#39;"))


def _header(width: int, height: int, title: str, subtitle: str) -> str:
    middle = f"{width / 2:g}"
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<svg version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'xmlns="http://www.w3.org/2000/svg">',
        "<!-- A flame graph written by sampler: the root at the bottom, each frame above its caller, as wide "
        "as its samples. Click a frame to zoom, Search to find a function (with script). -->",
        '<defs><linearGradient id="background" x1="0" y1="0" x2="0" y2="1">'
        '<stop stop-color="#eeeeee" offset="5%"/><stop stop-color="#eeeeb0" offset="95%"/></linearGradient></defs>',
        "<style>",
        f'text {{ font-family: Verdana, "DejaVu Sans", sans-serif; font-size: {FONT_SIZE}px; fill: #000; }}',
        f"#title {{ text-anchor: middle; font-size: {FONT_SIZE + 5}px; }}",
        "#subtitle { text-anchor: middle; fill: #444; }",
        "#search, #matched { text-anchor: end; }",
        "#search, #unzoom, #frames > g { cursor: pointer; }",
        "#frames > g:hover > rect { stroke: #000; stroke-width: 0.5; }",
        "#frames text { pointer-events: none; }",
        ".hide { display: none; }",
        ".parent { opacity: 0.5; }",
        "</style>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="url(#background)"/>',
        f'<text id="title" x="{middle}" y="{TITLE_Y}">{escape(clean(title))}</text>',
    ]
    if subtitle:
        lines.append(f'<text id="subtitle" x="{middle}" y="{SUBTITLE_Y}">{escape(clean(subtitle))}</text>')
    lines += [
        f'<text id="details" x="{XPAD}" y="{height - 10}"> </text>',
        f'<text id="matched" x="{width - XPAD}" y="{height - 10}"> </text>',
        f'<text id="unzoom" class="hide" x="{XPAD}" y="{TITLE_Y}">Reset Zoom</text>',
        f'<text id="search" class="hide" x="{width - XPAD}" y="{TITLE_Y}">Search</text>',
    ]
    return "\n".join(lines) + "\n"


_SCRIPT = """<script type="text/ecmascript"><![CDATA[
"use strict";
(function () {
  // Names come from the title elements' text only: nothing of a name is ever code.
  var W = @WIDTH@, PAD = @XPAD@, CHAR = @CHAR@;
  var byId = function (id) { return document.getElementById(id); };
  var details = byId("details"), unzoom = byId("unzoom"), search = byId("search"), matched = byId("matched");
  var all = [], root = null, searching = false;
  Array.prototype.forEach.call(byId("frames").children, function (g) {
    var info = g.querySelector("title").textContent;
    var f = {g: g, rect: g.querySelector("rect"), text: g.querySelector("text"), info: info,
             name: info.slice(0, info.lastIndexOf(" (")), d: +g.getAttribute("data-d"),
             x: +g.getAttribute("data-x"), w: +g.getAttribute("data-w")};
    f.fill = f.rect.getAttribute("fill");
    if (f.d === 0) { root = f; }
    all.push(f);
    g.addEventListener("click", function () { zoom(f); });
    g.addEventListener("mouseover", function () { details.textContent = "Function: " + f.info; });
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  function place(f, x, w) {
    f.rect.setAttribute("x", x.toFixed(2));
    f.rect.setAttribute("width", w.toFixed(2));
    f.text.setAttribute("x", (x + 3).toFixed(2));
    var n = Math.floor((w - 6) / CHAR);
    f.text.textContent = n < 3 ? "" : f.name.length <= n ? f.name : f.name.slice(0, n - 2) + "..";
  }
  function zoom(z) {  // z across the width; its callers below it faded, the rest hidden
    var scale = (W - 2 * PAD) / z.w;
    all.forEach(function (f) {
      var c = f.g.classList;
      if (f.d < z.d && f.x <= z.x && f.x + f.w >= z.x + z.w) {
        c.remove("hide"); c.add("parent"); place(f, PAD, W - 2 * PAD);
      } else if (f.d >= z.d && f.x >= z.x && f.x + f.w <= z.x + z.w && f.w * scale >= 0.1) {
        c.remove("hide", "parent"); place(f, PAD + (f.x - z.x) * scale, f.w * scale);
      } else {
        c.add("hide");
      }
    });
    unzoom.classList.toggle("hide", z === root);
  }
  function unmark() {
    all.forEach(function (f) { f.rect.setAttribute("fill", f.fill); });
    matched.textContent = " "; search.textContent = "Search"; searching = false;
  }
  function find() {
    if (searching) { unmark(); return; }
    var term = window.prompt("Search for a function (a regular expression)", "");
    if (!term) { return; }
    var re;
    try { re = new RegExp(term); } catch (e) { matched.textContent = "not a regular expression"; return; }
    var spans = [], covered = 0, end = 0;
    all.forEach(function (f) {
      if (f !== root && re.test(f.name)) {
        f.rect.setAttribute("fill", "rgb(230,0,230)");
        spans.push([f.x, f.x + f.w]);
      }
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    spans.forEach(function (s) { if (s[1] > end) { covered += s[1] - Math.max(s[0], end); end = s[1]; } });
    matched.textContent = "Matched: " + (root ? 100 * covered / root.w : 0).toFixed(1) + "%";
    search.textContent = "Reset Search"; searching = true;
  }
  if (root) {
    unzoom.addEventListener("click", function () { zoom(root); });
    search.addEventListener("click", find);
    search.classList.remove("hide");
    document.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { zoom(root); unmark(); }
      else if ((e.ctrlKey && e.key === "f") || e.key === "F3") { e.preventDefault(); find(); }
    });
  }
})();
]]></script>
"""
