"""MkDocs hook: fills docs/methods.md's list of methods from the registry when the site is built
(``hooks: [docs/hooks/methods_list.py]`` in mkdocs.yml), so a new method is listed with no
edit of the page."""

from __future__ import annotations


def on_page_markdown(markdown: str, page=None, **kwargs) -> str:
    from mars_demo.methods.listing import fill

    return fill(markdown)
