"""Render the docs' diagrams: each ``docs/diagrams/NAME.mmd`` (Mermaid source, the one place to
edit a diagram) to ``docs/diagrams/NAME.svg``, the static image the pages show.

    python scripts/render_diagrams.py            # render every .mmd whose .svg is stale
    python scripts/render_diagrams.py --all      # render every .mmd
    python scripts/render_diagrams.py --check    # only say which .svg are stale (exit 1 if any)

The site loads no script to draw diagrams (the docs must read offline), so the SVGs are committed.
Each starts with a comment holding the SHA-256 of its source and the Mermaid version that drew it;
``tests/test_docs.py`` fails when a source changed and its SVG was not rendered again.

Rendering uses the real Mermaid library in headless Chromium (Debian's ``/usr/bin/chromium``, as
the browser tests use) through Playwright (``requirements-dev.txt``). Mermaid comes from npm into a
cache folder, not into the repository; once:

    npm install --prefix ~/.cache/mars-demo/mermaid mermaid@11

(or point ``MARS_DEMO_MERMAID`` at another ``mermaid.min.js``). ``--check`` needs neither.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "docs" / "diagrams"
CHROMIUM = "/usr/bin/chromium"
MERMAID_DIR = Path.home() / ".cache" / "mars-demo" / "mermaid"
#: the npm package's browser bundle: a classic script that defines ``window.mermaid``
MERMAID_JS = MERMAID_DIR / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
INSTALL = f"npm install --prefix {MERMAID_DIR} mermaid@11"

#: the neutral theme (grey boxes, dark strokes and text) on a white card: the SVG carries its own
#: background, so it reads on Material's light and dark (slate) schemes alike. Labels are SVG
#: text, not HTML in a foreignObject: an <img> shows them with the reader's fonts, and wide
#: fonts (Verdana, DejaVu Sans, the ones boxes are measured with here) keep each label in its box.
FONT = "Verdana, 'DejaVu Sans', Geneva, sans-serif"
MERMAID_CONFIG = {
    "startOnLoad": False,
    "theme": "neutral",
    "securityLevel": "strict",
    "htmlLabels": False,
    "flowchart": {"htmlLabels": False, "useMaxWidth": False},
    "block": {"useMaxWidth": False},
    "themeVariables": {"fontFamily": FONT, "fontSize": "15px", "background": "#ffffff"},
}
BACKGROUND = "#ffffff"

#: the first line of every rendered SVG (``sha256`` of the .mmd's bytes)
STAMP = "<!-- rendered by scripts/render_diagrams.py from {source}: sha256 {digest}, mermaid {version} -->"
STAMP_RE = re.compile(r"<!-- rendered by scripts/render_diagrams\.py from (?P<source>\S+): "
                      r"sha256 (?P<digest>[0-9a-f]{64}), mermaid (?P<version>\S+) -->")


def source_digest(source: Path) -> str:
    """SHA-256 of a diagram source's bytes, hex."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def stamp_of(svg: Path) -> dict[str, str] | None:
    """The stamp of a rendered SVG (source, digest, version), or None if it has none."""
    if not svg.is_file():
        return None
    m = STAMP_RE.search(svg.read_text(encoding="utf-8")[:500])
    return m.groupdict() if m else None


def sources() -> list[Path]:
    return sorted(DIAGRAMS.glob("*.mmd"))


def stale(source: Path) -> str | None:
    """Why ``source``'s SVG must be rendered again, or None when it is up to date."""
    svg = source.with_suffix(".svg")
    stamp = stamp_of(svg)
    if stamp is None:
        return f"{svg.relative_to(ROOT)} is missing" if not svg.is_file() else \
            f"{svg.relative_to(ROOT)} has no source stamp"
    if stamp["digest"] != source_digest(source):
        return f"{source.relative_to(ROOT)} changed since {svg.relative_to(ROOT)} was rendered"
    return None


def mermaid_script() -> tuple[Path, str]:
    """The Mermaid bundle to load and its version; exits saying how to install it if missing."""
    path = Path(os.environ.get("MARS_DEMO_MERMAID", MERMAID_JS))
    if not path.is_file():
        raise SystemExit(f"Mermaid is not installed at {path}; install it once with\n    {INSTALL}\n"
                         "(or set MARS_DEMO_MERMAID to a mermaid.min.js)")
    package = path.parent.parent / "package.json"
    version = json.loads(package.read_text(encoding="utf-8"))["version"] if package.is_file() \
        else "unknown"
    return path, version


def finish(svg: str, source: Path, version: str) -> str:
    """Mermaid's SVG as a standalone file: a fixed size (an <img> needs one), a white card, the
    stamp; refuses one that is not well-formed XML (a browser would show a broken image)."""
    root = re.match(r"<svg\b[^>]*>", svg)
    assert root, svg[:200]
    tag = root.group(0)
    box = re.search(r'viewBox="([-\d.]+) ([-\d.]+) ([\d.]+) ([\d.]+)"', tag)
    assert box, tag
    width, height = (math.ceil(float(v)) for v in box.groups()[2:])
    tag = re.sub(r'\s(width|height|style)="[^"]*"', "", tag)
    tag = tag.replace("<svg", f'<svg width="{width}" height="{height}" '
                      f'style="background-color: {BACKGROUND}"', 1)
    x, y = box.group(1), box.group(2)
    card = f'<rect x="{x}" y="{y}" width="100%" height="100%" fill="{BACKGROUND}"/>'
    body = tag + card + svg[root.end():]
    ET.fromstring(body)  # well-formed, or this raises
    stamp = STAMP.format(source=source.relative_to(ROOT).as_posix(), digest=source_digest(source),
                         version=version)
    return stamp + "\n" + body + "\n"


def render(targets: list[Path]) -> None:
    from playwright.sync_api import sync_playwright

    script, version = mermaid_script()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox",
                                                                     "--disable-gpu"])
        page = browser.new_page()
        # nothing from the network: Mermaid is the local bundle, the diagrams fetch nothing
        page.route("**/*", lambda route: route.abort()
                   if not route.request.url.startswith(("about:", "data:")) else route.continue_())
        page.set_content("<!doctype html><html><body></body></html>")
        page.add_script_tag(content=script.read_text(encoding="utf-8"))
        page.evaluate("config => mermaid.initialize(config)", MERMAID_CONFIG)
        for source in targets:
            name = source.stem
            svg = page.evaluate("async ([id, text]) => (await mermaid.render(id, text)).svg",
                                [f"mars-diagram-{name}", source.read_text(encoding="utf-8")])
            out = source.with_suffix(".svg")
            out.write_text(finish(svg, source, version), encoding="utf-8")
            print(f"wrote {out.relative_to(ROOT)} (mermaid {version})")
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", action="store_true", help="render every diagram, stale or not")
    group.add_argument("--check", action="store_true",
                       help="render nothing; exit 1 if an SVG is stale")
    args = parser.parse_args(argv)
    reasons = {source: stale(source) for source in sources()}
    todo = [s for s, why in reasons.items() if why or args.all]
    if args.check:
        for source in todo:
            print(reasons[source], file=sys.stderr)
        return 1 if todo else 0
    if todo:
        render(todo)
    else:
        print("every diagram is up to date (--all renders them anyway)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
