"""The documentation: a short README (the Space's card) and the MkDocs site under docs/.

The README once held everything; its sections moved into the site. Each of its old headings
must still be a heading somewhere (README or docs/), the site must build with ``--strict`` (no
broken link, no page left out of the navigation, no docstring the API reference cannot read),
and the commands the pages show must be ones the command line accepts.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: every heading of the README before it became a Space card (1,118 lines), and the bold
#: lead-ins that named a part of a section; each is a heading of the README or of a docs page
OLD_README_HEADINGS = (
    "MARS Demo",
    "Quick start",
    "The app",
    "A public page",
    "The API",
    "A chance of being right (calibration)",
    "The Evaluation view",
    "Limits and bad input",
    "Hosting it on a Space: ZeroGPU or a paid GPU",
    "The command line",
    "Offline, with tiny models",
    "The library",
    "Score answers from anywhere",
    "Evaluating MARS on your data",
    "Serving the LLM from vLLM (or any OpenAI-compatible server)",
    "vLLM on a CPU, end to end",
    "Speed",
    "Layout",
    "The formulas",
    "The paper's code, point by point",
    # bold lead-ins of the old README, headings now
    "Compared with other methods",
    "How far to trust a judge",
    "What the judge decides",
    "Re-judge a run",
    "Compare two runs",
    "Every method side by side",
    "Reproducing a Table-1 row",
    "Cost per question",
)
README_MAX_LINES = 300  # after the Space's YAML header


def headings(markdown: str) -> list[str]:
    """The ATX headings of a Markdown text, outside fenced code blocks.

    >>> headings("# A\\n\\n```bash\\n# not one\\n```\\n## B ##\\ntext # no")
    ['A', 'B']
    """
    out, fenced = [], False
    for line in markdown.splitlines():
        if re.match(r"\s*(```|~~~)", line):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(m.group(1))
    return out


def pages() -> dict[str, str]:
    """docs/ page (relative path) -> its text."""
    return {p.relative_to(DOCS).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(DOCS.rglob("*.md"))}


def _doctest_failures(func) -> int:
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(func, globs={func.__name__: func}):
        runner.run(test)
    return runner.summarize(verbose=False).failed


def test_headings_finds_headings_only():
    assert _doctest_failures(headings) == 0
    assert headings("```\n# x\n```\n### The API\n") == ["The API"]
    assert "Quick start" not in headings("Quick start\n")


def test_every_old_readme_heading_is_still_a_heading():
    found = set(headings((ROOT / "README.md").read_text(encoding="utf-8")))
    for text in pages().values():
        found.update(headings(text))
    missing = [h for h in OLD_README_HEADINGS if h not in found]
    assert not missing, missing


def test_the_readme_is_a_short_card_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    header = re.match(r"---\n.*?\n---\n", readme, re.S)
    assert header
    body = readme[header.end():]
    assert len(body.splitlines()) <= README_MAX_LINES, len(body.splitlines())
    assert "pip install -e . && python app.py" in body  # installs the package too
    assert "pip install -r requirements-dev.txt && python -m pytest" in body
    assert "](assets/screenshot.png)" in body
    for example in ("python app.py", "mars_demo ask", "mars_demo score", "mars_demo evaluate",
                    "from mars_demo import"):
        assert example in body, example


def test_the_readme_links_only_to_files_that_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local
    assert [link for link in local if not (ROOT / link).exists()] == []


def _nav_pages(nav) -> list[str]:
    out = []
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def site_config() -> dict:
    """mkdocs.yml, read without its !!python tags (only the build needs them)."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader)


def test_the_navigation_holds_every_page_once():
    nav = _nav_pages(site_config()["nav"])
    assert len(nav) == len(set(nav))
    assert sorted(nav) == sorted(pages()), set(nav) ^ set(pages())


def test_the_site_fetches_nothing_at_build_time():
    config = site_config()
    assert config["theme"]["font"] is False  # no Google Fonts
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config["plugins"]]
    assert set(plugins) <= {"search", "mkdocstrings"}, plugins  # none that downloads


def test_the_docs_tools_are_test_tools():
    dev = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    runtime = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    for tool in ("mkdocs", "mkdocs-material", "mkdocstrings[python]"):
        assert re.search(rf"^{re.escape(tool)}(?![\w-])", dev, re.M), tool
        assert tool not in runtime  # the Space builds no docs


def _module(path: Path):
    """A script or hook of the repository (not a package), imported from its file."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _roles():
    return _module(DOCS / "hooks" / "sphinx_roles.py")


def test_docstrings_are_rewritten_for_markdown():
    roles = _roles()
    assert doctest.testmod(roles).failed == 0
    text = ("Args:\n    x: see :meth:`~a.B.c`.\n\n    >>> f(1)\n    2\n    >>> f(\n    ...   2)\n"
            "    3\n\nAfter.")
    assert roles.markdown_of(text) == (
        'Args:\n    x: see <autoref identifier="a.B.c" optional><code>c</code></autoref>.\n\n'
        "    ```pycon\n    >>> f(1)\n    2\n    >>> f(\n    ...   2)\n    3\n    ```\n\nAfter.")


def build_site(out: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` into ``out`` (never into the repository)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly(tmp_path):
    site = tmp_path / "site"
    done = build_site(site)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    assert not (ROOT / "site").exists()
    for page in pages():
        name = page.removesuffix(".md")
        html = site / ("index.html" if name == "index" else
                       (name.removesuffix("/index") if name.endswith("/index") else name)
                       + "/index.html")
        assert html.is_file(), html
    assert (site / "assets" / "screenshot.png").read_bytes() == \
        (ROOT / "assets" / "screenshot.png").read_bytes()
    reference = "\n".join(p.read_text(encoding="utf-8")
                          for p in (site / "reference").rglob("*.html"))
    assert 'id="mars_demo.core.scoring.mars"' in reference  # the docstrings are rendered
    assert 'id="mars_demo.evaluation.metrics' in reference
    assert ":func:`" not in reference and ":class:`" not in reference  # roles rewritten
    # ... as links: the Sphinx "title <target>" form too
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="[^"]*#mars_demo\.models'
                     r'\.llm\.LLM\.generate_many"[^>]*><code>LLM\.generate_many</code></a>',
                     reference)
    package = (site / "reference" / "package" / "index.html").read_text(encoding="utf-8")
    for name, kind in (("max_new_tokens", "int"), ("normalization", "str")):  # from the schema
        assert re.search(rf"<b><code>{name}</code></b>\s*\(<code><span title=\"{kind}\">"
                         rf"{kind}</span></code>\)", package), name
    assert "token limit per answer; allowed: 1 to 512; default: 64." in package
    assert "<blockquote>" not in reference  # no doctest or "> 0" read as a quote
    architecture = (site / "architecture" / "index.html").read_text(encoding="utf-8")
    for svg in sorted(DIAGRAMS.glob("*.svg")):  # each diagram shown as its static image
        assert f'src="../diagrams/{svg.name}"' in architecture, svg.name
        assert (site / "diagrams" / svg.name).read_bytes() == svg.read_bytes()
    assert not list(site.rglob("*.mmd"))  # the sources stay out of the site
    assert "fonts.googleapis.com" not in (site / "index.html").read_text(encoding="utf-8")
    external = {page.relative_to(site).as_posix(): found for page in site.rglob("*.html")
                if (found := external_assets(page.read_text(encoding="utf-8")))}
    assert external == {}, external


def external_assets(html: str) -> list[str]:
    """What a page would load from another host when read: scripts, stylesheets, images,
    frames; and an element of class ``mermaid``, which makes Material fetch Mermaid from a CDN.

    >>> external_assets('<script src="https://unpkg.com/x.js"></script><img src="../a.svg">'
    ...                 '<link rel="stylesheet" href="//fonts.example/css"><a href="https://x">')
    ['https://unpkg.com/x.js', '//fonts.example/css']
    >>> external_assets('<pre class="mermaid"><code>graph</code></pre>')
    ['class="mermaid" (Mermaid from a CDN)']
    >>> external_assets('<div class="language-mermaid highlight"><pre>graph</pre></div>')
    []
    """
    found = re.findall(r'<(?:script|img|iframe|source|link)\b[^>]*?\s(?:src|href)="'
                       r'((?:[a-z]+:)?//[^"]*)"', html, re.I)
    if re.search(r'class="(?:[^"]*\s)?mermaid[\s"]', html):  # not language-mermaid: code shown
        found.append('class="mermaid" (Mermaid from a CDN)')
    return found


def test_external_assets_finds_what_a_page_would_fetch():
    assert _doctest_failures(external_assets) == 0
    assert external_assets('<link rel="canonical" href="/x/"><script src="../a.js"></script>') == []


# --- the diagrams: static SVGs from their Mermaid sources ----------------------------------------

DIAGRAMS = DOCS / "diagrams"


def _render_diagrams():
    return _module(ROOT / "scripts" / "render_diagrams.py")


def test_every_diagram_is_rendered_from_its_current_source():
    """Each docs/diagrams/NAME.mmd has its NAME.svg, stamped with the source's SHA-256: a
    source edited without rendering again fails here, naming the script to run."""
    render = _render_diagrams()
    sources = sorted(DIAGRAMS.glob("*.mmd"))
    assert {s.stem for s in sources} >= {"layers", "flow"}
    assert sorted(p.stem for p in DIAGRAMS.glob("*.svg")) == [s.stem for s in sources]
    stale = [why for source in sources if (why := render.stale(source))]
    assert not stale, ("; ".join(stale) + ": run `python scripts/render_diagrams.py` "
                       "(it says how to install Mermaid if it is missing)")
    for source in sources:
        svg = source.with_suffix(".svg").read_text(encoding="utf-8")
        stamp = render.stamp_of(source.with_suffix(".svg"))
        assert stamp["source"] == f"docs/diagrams/{source.name}"
        assert re.fullmatch(r"\d+\.\d+\.\d+", stamp["version"]), stamp  # the real Mermaid's
        root = ET.fromstring(svg.split("\n", 1)[1])  # a well-formed standalone image
        assert root.get("width") and root.get("height")  # an <img> needs a size
        assert "foreignObject" not in svg  # labels are SVG text, shown by any <img>
        assert "http://" not in svg.replace("http://www.w3.org/", "")  # loads nothing
        assert "https://" not in svg


def test_the_stale_check_sees_an_edited_source(tmp_path, monkeypatch):
    render = _render_diagrams()  # what the test above relies on, on a diagram of its own
    monkeypatch.setattr(render, "ROOT", tmp_path)
    source = tmp_path / "a.mmd"
    source.write_text("flowchart TB\n  a --> b\n", encoding="utf-8")
    assert "missing" in render.stale(source)
    stamp = render.STAMP.format(source="a.mmd", digest=render.source_digest(source),
                                version="11.0.0")
    source.with_suffix(".svg").write_text(stamp + "\n<svg/>\n", encoding="utf-8")
    assert render.stale(source) is None
    source.write_text("flowchart TB\n  a --> c\n", encoding="utf-8")
    assert "changed" in render.stale(source)
    monkeypatch.setattr(render, "DIAGRAMS", tmp_path)
    assert render.main(["--check"]) == 1  # renders nothing, needs no Mermaid


# --- the commands the pages show --------------------------------------------------------------

#: the programs whose shown commands are checked (``python -m mars_demo.bench`` is not one)
PROGRAMS = ("python -m mars_demo", "mars-demo", "python app.py")


def shown_commands(markdown: str) -> list[str]:
    """The ``python -m mars_demo ...``, ``mars-demo ...`` and ``python app.py ...`` commands of a
    text's bash code blocks, continuation lines joined, comments and shell redirections left
    out, each command of a pipe or a ``&&`` on its own.

    >>> shown_commands("```bash\\npython -m mars_demo ask 'Q' \\\\\\n    --json | python -m "
    ...                "mars_demo score - > out.jsonl  # c\\npip install x && python app.py\\n```")
    ["python -m mars_demo ask 'Q' --json", 'python -m mars_demo score -', 'python app.py']
    """
    out = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line)
            for part in re.split(r"\||&&", line):
                part = re.sub(r"\s*(>|&).*$", "", part).strip()
                if any(part == p or part.startswith(p + " ") for p in PROGRAMS):
                    out.append(part)
    return out


def _all_commands() -> list[tuple[str, str]]:
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8"), **pages()}
    return [(name, command) for name, text in texts.items() for command in shown_commands(text)]


def test_shown_commands_are_found():
    assert _doctest_failures(shown_commands) == 0
    commands = [c for _, c in _all_commands()]
    assert len(commands) >= 20, commands
    for sub in ("ask", "score", "evaluate", "make-tiny-models"):
        assert any(c.startswith(f"python -m mars_demo {sub} ") for c in commands), sub
    assert any(c.startswith("python app.py --") for c in commands)


@pytest.mark.parametrize("where,command", _all_commands())
def test_every_shown_command_is_one_the_cli_accepts(where, command):
    """Each command parses with the parser of its program (nothing runs)."""
    if command.startswith("python app.py"):
        from mars_demo.serve import build_parser as page_parser  # app.py's, from the schema

        parser, argv = page_parser(), shlex.split(command)[2:]
    else:
        from mars_demo.cli import build_parser

        words = shlex.split(command)
        parser, argv = build_parser(), words[1 if words[0] == "mars-demo" else 3:]
    try:
        parser.parse_args(argv)
    except SystemExit as exc:  # argparse's refusal
        pytest.fail(f"{where}: {command!r} is refused ({exc.code})")


# --- the counts and files the pages name ------------------------------------------------------

def _texts() -> dict[str, str]:
    return {"README.md": (ROOT / "README.md").read_text(encoding="utf-8"),
            "data/README.md": (ROOT / "data" / "README.md").read_text(encoding="utf-8"),
            **{f"docs/{k}": v for k, v in pages().items()}}


def test_the_data_files_the_pages_name_exist():
    named = {(where, path) for where, text in _texts().items()
             for path in re.findall(r"\b((?:mars_demo/)?data/[\w.-]+\.(?:jsonl|json|py))", text)}
    assert len(named) >= 10
    assert [n for n in named if not (ROOT / n[1]).is_file()] == []


def test_the_counts_the_pages_give_are_the_real_ones():
    """Each "N facts", "N general-knowledge questions" and "N answers to M questions" is what
    the file holds."""
    import json

    def rows(name: str) -> list[dict]:
        return [json.loads(x) for x in (ROOT / "data" / name).read_text().splitlines()]

    facts = len(json.loads((ROOT / "mars_demo" / "data" / "tiny_facts.json").read_text())["facts"])
    checks = [(r"\b(\d+) facts\b", facts), (r"\b(\d+) general-knowledge questions", 40)]
    assert len(rows("facts.jsonl")) == 40
    for name in ("judge_check.jsonl", "judge_check_holdout.jsonl", "judge_check_holdout2.jsonl"):
        found = rows(name)
        questions = len({r["question"] for r in found})
        checks.append((rf"{re.escape(name)}`?:? (\d+) answers to {questions} questions",
                       len(found)))
    seen = 0
    for where, text in _texts().items():
        for pattern, real in checks:
            for said in re.findall(pattern, text):
                seen += 1
                assert int(said) == real, (where, pattern, said, real)
    assert seen >= 10
