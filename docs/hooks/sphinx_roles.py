"""Griffe extension: the docstrings' reStructuredText habits, read as Markdown by mkdocstrings.

The package's docstrings are Google style with Sphinx cross-reference roles
(``:func:`mars` ``, ``:meth:`title <a.b.C.d>` ``) and doctest examples (``>>>`` lines, run by
pytest). Markdown reads a role as literal text and a ``>>>`` line as three nested quotes; this
extension rewrites each docstring before it is rendered: a role becomes a link to its target
(an ``autoref`` of mkdocs-autorefs, marked optional: a target the reference does not document
is shown as code, with its full name on hover), its relative target (``.runs.RunError``,
``Engine.score``) read from the docstring's module, and each run of doctest lines (prompt lines
and the output after them, up to a blank line) becomes a ``pycon`` code block. The source files
are not touched.
"""

from __future__ import annotations

import re
from typing import Callable

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


def markdown_of(text: str, module: str = "", package: str = "",
                resolve: Callable[[str], str | None] = lambda name: None) -> str:
    """A docstring's text with roles as links and doctests fenced; ``module`` and ``package``:
    where the docstring lives, for relative targets; ``resolve``: a name seen from the
    docstring's object (a member of its class or module, an imported name) as a full name, or
    None.

    >>> markdown_of("See :func:`~a.b.mars` and :mod:`x`.")
    'See <autoref identifier="a.b.mars" optional><code>mars</code></autoref> and <autoref identifier="x" optional><code>x</code></autoref>.'
    >>> markdown_of(":meth:`run <.b.C.run>`", "p.a", "p")
    '<autoref identifier="p.b.C.run" optional><code>run</code></autoref>'
    >>> markdown_of("Example:\\n\\n>>> 1 + 1\\n2\\n\\nAfter.").splitlines()
    ['Example:', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'After.']
    """
    text = ROLE.sub(lambda m: _link(m.group(1), module, package, resolve), text)
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(indent + "```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(indent + "```")
    return "\n".join(out)


def _link(content: str, module: str, package: str,
          resolve: Callable[[str], str | None]) -> str:
    """One role's link: ``title <target>`` shows the title, ``~a.b.c`` shows ``c``, anything
    else the target as written."""
    found = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content)
    title, target = (found.group(1), found.group(2)) if found else (None, content)
    short = target.startswith("~")
    target = target.lstrip("~")
    shown = title or (target.rsplit(".", 1)[-1] if short else target.lstrip("."))
    full = (None if target.startswith(".") else resolve(target)) or _absolute(target, module,
                                                                               package)
    return f'<autoref identifier="{full}" optional><code>{shown}</code></autoref>'


def _absolute(target: str, module: str, package: str) -> str:
    """``target`` as a full name: ``.x`` is in ``package``, ``..x`` one up; a name without the
    package's top name is tried in ``module`` (``Engine.score`` in ``mars_demo.engine.engine``)."""
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        base = package.split(".")
        base = base[: len(base) - dots + 1] if dots > 1 else base
        return ".".join([*base, target.lstrip(".")])
    top = (module or package).split(".")[0]
    if module and top and target.split(".")[0] != top:
        return f"{module}.{target}"
    return target


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the loaded objects (see the module's docstring)."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            module = obj.module
            package = module.path if module.is_package else module.path.rsplit(".", 1)[0]
            obj.docstring.value = markdown_of(obj.docstring.value, module.path, package,
                                              _resolver(obj))


def _resolver(obj: griffe.Object) -> Callable[[str], str | None]:
    """Names as the docstring of ``obj`` sees them: members of its class (or of itself, a
    class), then of its module; an imported name is followed to where it is defined."""
    scopes = [s for s in (obj if obj.is_class else None,
                          obj.parent if obj.parent is not None and obj.parent.is_class else None,
                          obj.module) if s is not None]

    def resolve(name: str) -> str | None:
        first, _, rest = name.partition(".")
        for scope in scopes:
            member = scope.members.get(first)
            if member is not None:
                base = member.target_path if member.is_alias else member.path
                return base + ("." + rest if rest else "")
        return None

    return resolve
