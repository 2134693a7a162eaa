"""The house's floors (docs/architecture.md, "Layout"): each part of the library imports only
parts on its own floor or below, and no two files import each other in a circle. Read from the
code's own imports (``ast``, also those inside functions), so a new import that runs up a floor
fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mars_demo"

#: part -> floor (docs/architecture.md's Layout table, from the ground up); a part is a module
#: or a folder
FLOORS = {
    "errors": 0, "progress": 0, "texts": 0, "downloads": 0,
    "core": 1,
    "optional": 2, "options": 2, "answers": 2, "messages": 2,
    "settings": 3, "result": 3, "recipes": 3, "methods": 3, "verdict": 3, "readable": 3,
    "models": 4,
    "engine": 5,
    "flags": 5,  # the command-line flags of the option schema (--llm-backend's from the models' registry)
    "hosting": 6,  # the page's hosting: what a visitor may do, who a visitor is, ZeroGPU
    "evaluation": 7,
    "ui": 8,
    "devtools": 9,  # beside the library: nothing below the command line imports it
    "cli": 10, "__main__": 10, "bench": 10, "serve": 10, "terminal": 10, "__init__": 10,
}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The mars_demo modules ``path`` imports (absolute names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("mars_demo"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if not name.startswith("mars_demo"):
                continue
            out.add(name)
            out.update(f"{name}.{a.name}" for a in node.names)  # `from . import x` names modules
    return out


def _files() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py")}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _graph() -> dict[str, set[str]]:
    files = _files()
    graph = {}
    for name, path in files.items():
        # `from .. import texts` names the package itself too: only the module counts
        graph[name] = {m for m in _imports(path) if m in files and m not in (name, "mars_demo")}
    return graph


def test_every_part_has_a_floor():
    parts = {_part(m) for m in _files()}
    assert parts <= set(FLOORS), sorted(parts - set(FLOORS))


def test_no_import_runs_up_a_floor():
    up = []
    for name, targets in _graph().items():
        for target in targets:
            if FLOORS[_part(target)] > FLOORS[_part(name)]:
                up.append(f"{name} -> {target}")
    assert not up, up


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every loop a depth-first walk of ``graph`` meets, as the list of its nodes."""
    state: dict[str, int] = {}
    circles = []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return circles


def test_the_circle_finder_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_import_circle():
    files = _files()
    # a package's __init__ only hands names on: its arrows are not part of a circle
    graph = {n: {t for t in ts if files[t].name != "__init__.py"} for n, ts in _graph().items()}
    assert not _circles(graph)


def test_the_rule_sees_an_upward_import(tmp_path):
    """The reader finds relative imports inside functions (as the lazy ones are)."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from ..engine import Engine\n    from . import prompts\n")
    fake = PACKAGE / "models" / "_layers_probe.py"
    assert not fake.exists()
    fake.write_text(src.read_text())
    try:
        found = _imports(fake)
    finally:
        fake.unlink()
    assert {"mars_demo.engine", "mars_demo.engine.Engine", "mars_demo.models.prompts"} <= found


#: the page's folders, from the ground up (docs/architecture.md, "The page's folders"): a module
#: of mars_demo/ui imports modules of its own folder or of a lower one, never of a higher one
UI_FLOORS = {"guards": 0, "draw": 1, "views": 2, "work": 2, "page": 3, "launch": 4,
             "__init__": 5}


def _ui_part(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["mars_demo", "ui"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def test_every_ui_module_has_a_floor():
    parts = {_ui_part(m) for m in _files()} - {None}
    assert parts <= set(UI_FLOORS), sorted(parts - set(UI_FLOORS))


def test_no_ui_import_runs_up_or_across_a_floor():
    """The public page's guards import nothing of the page; drawing imports neither the page,
    the views nor the work; the views and the work import neither each other nor the page."""
    wrong = []
    for name, targets in _graph().items():
        here = _ui_part(name)
        if here is None:
            continue
        for target in targets:
            there = _ui_part(target)
            if there is None or there == here:
                continue
            if UI_FLOORS[there] >= UI_FLOORS[here]:
                wrong.append(f"{name} -> {target}")
    assert not wrong, wrong
