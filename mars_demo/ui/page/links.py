"""The page's links: the paper, the paper's published code, this page's documentation and code,
and a link to share the page, where there is one.

The paper and its code have fixed addresses. This page's own documentation and code have one
where the page runs as a Hugging Face Space (``SPACE_ID``, "owner/name": the Space's repository
holds both); a page served from a checkout elsewhere has no address for them that the page can
stand behind, so it names none. The share link is the Space's page, or the public gradio.live
link of ``--share`` once Gradio has made it; a page only its host opens has none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from mars_demo import texts
from mars_demo.ui.draw.render import esc

PAPER_URL = "https://arxiv.org/abs/2402.11756"
PAPER_CODE_URL = "https://github.com/Ybakman/LLM_Uncertainty"  # the authors' published code
SPACE_NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


def space_url(env: Mapping[str, str]) -> str | None:
    """The Space's page (``SPACE_ID`` "owner/name"), or None off a Space."""
    space = env.get("SPACE_ID", "").strip()
    return f"https://huggingface.co/spaces/{space}" if SPACE_NAME.match(space) else None


def links(env: Mapping[str, str], share_url: str | None = None) -> list[tuple[str, str, str]]:
    """(key, words, address) of each link the page shows, in order."""
    found = [("paper", texts.LINK_PAPER, PAPER_URL)]
    space = space_url(env)
    if space is not None:
        found += [("docs", texts.LINK_DOCS, f"{space}/blob/main/docs/index.md"),
                  ("code", texts.LINK_CODE, f"{space}/tree/main"),
                  ("paper-code", texts.LINK_PAPER_CODE_DOC,
                   f"{space}/blob/main/docs/paper-code.md")]
    else:
        found.append(("paper-code", texts.LINK_PAPER_CODE, PAPER_CODE_URL))
    share = share_url if share_url and share_url.startswith("https://") else space
    if share:
        found.append(("share", texts.LINK_SHARE, share))
    return found


def links_html(env: Mapping[str, str], share_url: Callable[[], str | None] | None = None) -> str:
    """The links as one line of the banner (each opens in a new tab)."""
    return texts.LINKS_LINE.format(links=" · ".join(
        f'<a href="{esc(url)}" target="_blank" rel="noopener" data-link="{key}">{esc(words)}</a>'
        for key, words, url in links(env, share_url() if share_url else None)))


def recipe_link(env: Mapping[str, str]) -> str:
    """Markdown under the recipe control: where each recipe's choices are listed."""
    key, words, url = next(link for link in links(env) if link[0] == "paper-code")
    return texts.RECIPE_LINK.format(link=f"[{words}]({url})")
