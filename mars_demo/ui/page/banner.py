"""The page's banner: the models' loading (while it lasts), the models and the device by the names
visitors see, the page's links (:mod:`~mars_demo.ui.page.links`) and the CPU fallback's note.
:meth:`~mars_demo.ui.page.controller.Controller.banner_html` calls it with the page's host,
access and redactor."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mars_demo import texts
from mars_demo.hosting.access import Access
from mars_demo.methods import OWN_MODELS, optional_models
from mars_demo.ui.draw import render
from mars_demo.ui.guards.redact import Redactor
from mars_demo.ui.page import links
from mars_demo.ui.work.host import EngineHost


def banner_html(host: EngineHost, access: Access, redactor: Redactor,
                share_url: Callable[[], str | None] | None) -> str:
    status = host.status()
    info = host.describe()
    lines: list[tuple[str, str]] = []
    if status.state == "loading":
        message = (
            texts.BANNER_LOADING.format(stage=status.stage, percent=status.percent)
            if status.stage
            else texts.BANNER_LOADING_START
        )
        lines.append(("warn", render.esc(message)))
    elif status.state == "failed":
        lines.append(("error", render.esc(redactor.text(
            texts.BANNER_LOAD_FAILED.format(error=status.error)))))
    lines.append(("info", models_line(info, host, access, redactor)))
    lines.append(("links", links.links_html(os.environ, share_url)))
    if info.get("cpu_fallback"):
        lines.append(("warn", render.esc(texts.BANNER_CPU_FALLBACK)))
    return render.banner_html(lines)


def models_line(info: dict[str, Any], host: EngineHost, access: Access,
                redactor: Redactor) -> str:
    """The models and device, by the names visitors see: the host's names where given, a
    preset's label, a Hub id as given or a local model by its folder's name only (public or
    not)."""
    names = access.model_names
    llm = names.get("llm") or info.get("llm_preset") or redactor.page_name("llm", info["llm"])
    return texts.BANNER_MODELS.format(
        llm=render.esc(llm),
        importance=render.esc(redactor.page_name("importance", info["importance"])),
        nli=render.esc(redactor.page_name("nli", info["nli"])),
        optional="".join(
            texts.BANNER_OPTIONAL_MODEL.format(
                label=render.esc(label), name=render.esc(redactor.page_name(key, value)))
            for key, label, value in offered_models(host, access)),
        device=render.esc(info["device"]),
        quant=texts.BANNER_4BIT if info.get("load_in_4bit") else "",
    )


def offered_models(host: EngineHost, access: Access) -> list[tuple[str, str, Any]]:
    """(key, label, id or path) of each optional model (:data:`OWN_MODELS`) that this page's
    analyses may run: one a method of the engine's settings or of those visitors may ask for
    (:attr:`Access.methods`) needs. None when no such method is offered."""
    settings = host.engine.settings
    used = optional_models(tuple(settings.method_ids) + tuple(sorted(access.methods)))
    return [(m.field, m.label, getattr(settings, m.field)) for m in OWN_MODELS
            if m.field in used]
