"""The list of methods for people: the docs' table (``docs/methods.md`` between
:data:`START` and :data:`END`, filled when the docs are built, by ``docs/hooks/methods_list.py``)
and ``python -m mars_demo methods``, both from :data:`~.registry.METHODS`, so a new entry is
listed without an edit here."""

from __future__ import annotations

from .base import NEEDS
from .registry import METHODS, is_free

START, END = "<!-- methods-list:start -->", "<!-- methods-list:end -->"


def rows() -> list[dict[str, str]]:
    """One row per method: id, label, variants, cost (free or what it runs), reads, source,
    peer (lm-polygraph's file) and explain."""
    out = []
    for m in METHODS.values():
        extra = [n for n in sorted(m.needs) if not NEEDS[n].free]
        out.append({
            "id": m.id, "label": m.label,
            "variants": "LN and MARS" if m.scored else "one value",
            "cost": "free" if is_free(m) else "opt-in: " + ", ".join(extra),
            "reads": ", ".join(sorted(m.needs)), "source": m.source,
            "peer": m.reference or "-", "explain": m.explain, "family": m.family})
    return out


def markdown() -> str:
    """The table of every method, in the registry's order."""
    lines = ["| id | method | values | cost | reads | source | lm-polygraph | what it measures |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows():
        lines.append(f"| `{r['id']}` | {r['label']} | {r['variants']} | {r['cost']} | "
                     f"{r['reads']} | {r['source']} | {r['peer']} | {r['explain']} |")
    return "\n".join(lines)


def fill(page: str) -> str:
    """``page`` (a docs page's markdown) with the table between :data:`START` and :data:`END`
    (unchanged when it has no such markers)."""
    if START not in page or END not in page:
        return page
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{markdown()}\n{END}{tail}"


def text() -> str:
    """``python -m mars_demo methods``: one block per method."""
    out = []
    for r in rows():
        out.append(f"{r['id']} ({r['label']}; {r['variants']}; {r['cost']})\n"
                   f"    {r['explain']}\n    reads: {r['reads']}; source: {r['source']}"
                   + (f"; lm-polygraph {r['peer']}" if r["peer"] != "-" else ""))
    return "\n".join(out)
