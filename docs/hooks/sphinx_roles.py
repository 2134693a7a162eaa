"""Griffe extension: the docstrings' reStructuredText habits, read as Markdown by mkdocstrings.

The package's docstrings are Google style with Sphinx cross-reference roles
(``:func:`mars` ``) and doctest examples (``>>>`` lines, run by pytest). Markdown reads a role as
literal text and a ``>>>`` line as three nested quotes; this extension rewrites each docstring
before it is rendered: a role becomes inline code of its target, and each run of doctest lines
(prompt lines and the output after them, up to a blank line) becomes a ``pycon`` code block.
The source files are not touched.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj|const):`~?([^`]+)`")


def markdown_of(text: str) -> str:
    """A docstring's text with roles as inline code and doctests fenced.

    >>> markdown_of("See :func:`~a.b.mars` and :mod:`x`.")
    'See `mars` and `x`.'
    >>> markdown_of("Example:\\n\\n>>> 1 + 1\\n2\\n\\nAfter.").splitlines()
    ['Example:', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'After.']
    """
    text = ROLE.sub(lambda m: "`" + _shown(m.group(0), m.group(1)) + "`", text)
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


def _shown(role: str, target: str) -> str:
    """``~a.b.c`` shows ``c``; anything else shows the target as written."""
    return target.rsplit(".", 1)[-1] if role.split("`", 1)[1].startswith("~") else target


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the loaded objects (see the module's docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value)
