"""The page: its Gradio components, section by section; their events are wired to
:class:`~mars_demo.ui.page.controller.Controller` in :mod:`mars_demo.ui.page.events`.

Stable element ids (``mars-*``) are part of the page's contract: the browser tests and the CSS use
them instead of Gradio's generated ``component-N`` ids.

Many users: every event that runs the models (Ask, Load model, the ``/analyze`` API) shares the
concurrency group :data:`~mars_demo.ui.page.events.ENGINE_QUEUE` with a limit of 1, so one GPU runs one analysis at a time
and two requests never interleave inside a model call (the engine's own lock makes sure of it too).
Up to :data:`QUEUE_MAX_SIZE` (32) more requests wait in Gradio's queue, in order; beyond that
Gradio refuses a request with "queue full". On a public page each client holds at most a few of
those places, whatever events it calls (:func:`mars_demo.ui.guards.limits.limit_queue`). Every other
queued event (the scoring toggle's re-render, the banner, the Evaluation view's "Show") touches no
model and shares the group :data:`~mars_demo.ui.page.events.VIEW_QUEUE`, also one at a time, so that however many of them
come they take one core from the engine at most. What a visitor sees (the
last result) lives only in that visitor's session state (``gr.State``); the controller and the
engine hold no per-user data. A visitor who closes the tab, or a client that cancels, stops its
running analysis at the next generated token or stage (see
:meth:`~mars_demo.ui.page.controller.Controller.ask`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.hosting.access import Access
from mars_demo.settings import MAX_QUESTION_CHARS
from mars_demo.ui.draw import methods_panel, render
from mars_demo.ui.guards.limits import limit_queue
from mars_demo.ui.page import ASSETS, links, panels
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.page.events import ENGINE_QUEUE, wire_events
from mars_demo.ui.page.example_store import ExampleStore
from mars_demo.ui.views import eval_view
from mars_demo.ui.work import controls
from mars_demo.ui.work.host import EngineHost, EngineLike
from mars_demo.ui.work.pasted import OWN_MAX_CHARS

EXAMPLES_PATH = ASSETS / "examples.json"
QUEUE_MAX_SIZE = 32  # requests waiting in Gradio's queue; more are refused with "queue full"
# (tests/test_load.py sends 16 users at once, all of whom must fit)
BANNER_POLL_S = 1.0  # how often the banner refreshes while the models load
DEFAULT_SCORING = "mars"
# Choices not offered unless the host set up BEM's models (--bem and --chunker).
UNAVAILABLE_WITHOUT_BEM = {"importance_method": ("bem",)}
# The settings accordion's rows of option controls (every name of controls.PAGE_OPTIONS once).
OPTION_ROWS = (
    ("samples", "temperature"),
    ("max_new_tokens", "seed"),
    ("prompt", "importance_method"),
    ("normalization", "distribution", "cluster_rule"),
    ("recipe",),
)


def load_examples(path: Path = EXAMPLES_PATH) -> list[str]:
    """The example questions of ``ui/assets/examples.json``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [item["question"] for item in data["examples"]]


def build_demo(
    engine: EngineLike,
    *,
    load: bool = True,
    load_here: bool = False,
    queue_max_size: int = QUEUE_MAX_SIZE,
    access: Access | None = None,
    calibration: Any = None,
    runs_dir: str | Path | None = None,
    methods_run: Any = None,
    example_cache: str | Path | None = None,
    warm_examples: bool = True,
) -> gr.Blocks:
    """Build the page around ``engine``.

    With ``load`` (the default) the engine's models start loading in a background thread right
    away, unless they are loaded already; the page opens meanwhile and says so. With
    ``load_here`` they load in this thread before the page is built (what a ZeroGPU Space needs,
    see :mod:`mars_demo.hosting.zerogpu`); a failure shows on the page all the same. Launch the result
    with :func:`launch_options` (the page's CSS). No model is loaded when ``engine.ready``.
    ``queue_max_size``: requests that may wait in Gradio's queue (tests use a small one).
    ``access``: what visitors may do (:mod:`mars_demo.hosting.access`); the default is a local page
    without the model switch. ``calibration``: an
    :class:`~mars_demo.evaluation.calibration.Calibration` whose chance of being right is shown
    under each answer (checked against the engine's models by the caller, see
    :mod:`mars_demo.serve`). ``runs_dir``: a folder of evaluation runs the Evaluation view offers
    by name. ``methods_run``: the :class:`~mars_demo.ui.draw.methods_panel.Reference` (a run's values,
    or why there is none) among whose answers the "Compared with other methods" panel places
    each value; by default the run of :func:`~mars_demo.ui.draw.methods_panel.reference_folder`.
    ``example_cache``: the folder where the example questions' analyses are kept once made
    (:mod:`mars_demo.ui.page.example_store`; None: none are kept). ``warm_examples``: analyze
    those the folder lacks in the background once the models are loaded
    (:mod:`mars_demo.ui.page.example_warm`; not on ZeroGPU).
    """
    access = access or Access()
    host = EngineHost(engine)
    if load_here:
        host.load_here()
    elif load and not engine.ready:
        host.start_loading()
    if methods_run is None:
        methods_run = methods_panel.load_reference(*methods_panel.reference_folder(None, runs_dir))
    basis = json.dumps([calibration.describe() if calibration is not None else None,
                        methods_run.run.name if methods_run.run is not None else None])
    controller = Controller(host, access, calibration=calibration, reference=methods_run,
                            examples=ExampleStore(example_cache, load_examples(), basis))
    if warm_examples:
        controller.warmer.start()

    with gr.Blocks(title=texts.TITLE, analytics_enabled=False, delete_cache=(3600, 3600)) as demo:
        parts: dict[str, Any] = {}
        _header(controller, parts)
        _question(parts)
        options = _settings(controller, access, parts)
        _results(parts)
        _own_answers(parts)  # another way in, for those who have answers already
        wire_events(demo, controller, parts, options)
        controller.api.serve(demo, ENGINE_QUEUE)
        # The Evaluation view, at the end of the page (mars_demo/ui/views/eval_view.py).
        eval_view.build(eval_view.EvaluationView(runs_dir, public=access.public))
    controller.share_url = lambda: getattr(demo, "share_url", None)  # the banner's share link

    # A public page takes calls only through the queue (no direct /run/ routes that would skip
    # its size and the per-client limit).
    demo.queue(default_concurrency_limit=1, max_size=queue_max_size, api_open=not access.public)
    limit_queue(demo, access)
    demo.mars_access = access  # type: ignore[attr-defined]  # read by launch_options(demo)
    return demo


# --- the page's sections, top to bottom ----------------------------------------------------------


def _header(controller: Controller, parts: dict[str, Any]) -> None:
    """The title and what the page does, the models' banner and the timer that refreshes it
    while they load."""
    gr.Markdown(f"# {texts.TITLE}\n\n{texts.INTRO}", elem_id="mars-intro")
    parts["banner"] = gr.HTML(controller.banner_html(), elem_id="mars-banner")
    parts["timer"] = gr.Timer(BANNER_POLL_S,
                              active=controller.host.status().state == "loading")


def _question(parts: dict[str, Any]) -> None:
    """The question box, Ask, the link that skips to the answer, and the example questions."""
    with gr.Row(equal_height=True, elem_id="mars-ask-row"):
        parts["question"] = gr.Textbox(
            label=texts.QUESTION_LABEL,
            placeholder=texts.QUESTION_PLACEHOLDER,
            lines=1,
            max_lines=4,
            max_length=MAX_QUESTION_CHARS,  # the browser stops there; the server checks too
            scale=5,
            min_width=240,
            elem_id="mars-question",
        )
        parts["ask"] = gr.Button(
            texts.ASK_BUTTON, variant="primary", scale=1, min_width=96, elem_id="mars-ask"
        )
    # the next tab stop after Ask: to the verdict, past the examples and the settings
    gr.HTML(f'<a class="mars-skip" href="#mars-verdict">{render.esc(texts.SKIP_TO_ANSWER)}</a>',
            elem_id="mars-skip", padding=False)
    parts["examples"] = _example_buttons(load_examples())


def _settings(controller: Controller, access: Access, parts: dict[str, Any]
              ) -> dict[str, gr.components.Component]:
    """The settings accordion: the option controls (by name), the public page's note and the
    model switch where the host allowed it."""
    option_controls: dict[str, gr.components.Component] = {}
    with gr.Accordion(texts.SETTINGS_LABEL, open=False, elem_id="mars-settings"):
        for row in OPTION_ROWS:
            with gr.Row():
                for name in row:
                    option_controls[name] = controls.control(
                        name, exclude=() if access.bem else UNAVAILABLE_WITHOUT_BEM.get(name, ())
                    )
            if row == OPTION_ROWS[1] and access.max_sample_tokens is not None:
                gr.HTML(_work_note(access.max_sample_tokens), elem_id="mars-work-note",
                        padding=False)
        gr.Markdown(links.recipe_link(os.environ), elem_id="mars-recipe-link",
                    elem_classes="mars-small")
        if access.allow_model_switch:
            parts["switch"] = _model_switch(controller)
            parts["switch_status"] = parts["switch"]["status"]
        if access.public:
            gr.Markdown(_public_note(access), elem_id="mars-public-note",
                        elem_classes="mars-small")
    return option_controls


def _own_answers(parts: dict[str, Any]) -> None:
    """Score your own answers: pasted text, or an answer set as JSON."""
    with gr.Accordion(texts.OWN_LABEL, open=False, elem_id="mars-own"):
        gr.Markdown(texts.OWN_EXPLAIN, elem_classes="mars-small")
        parts["own_greedy"] = gr.Textbox(
            label=texts.OWN_GREEDY_LABEL,
            placeholder=texts.OWN_GREEDY_PLACEHOLDER,
            lines=1,
            max_lines=4,
            max_length=OWN_MAX_CHARS,
            elem_id="mars-own-greedy",
        )
        parts["own_samples"] = gr.Textbox(
            label=texts.OWN_SAMPLES_LABEL,
            placeholder=texts.OWN_SAMPLES_PLACEHOLDER,
            lines=4,
            max_lines=20,
            max_length=OWN_MAX_CHARS,
            elem_id="mars-own-samples",
        )
        parts["own_json"] = gr.Code(
            label=texts.OWN_JSON_LABEL,
            language="json",
            lines=3,
            max_lines=12,
            # copy only: a download of what one pasted is of no use, and Gradio nests its link
            # and button into one target too small to tap (WCAG 2.5.8)
            buttons=["copy"],
            elem_id="mars-own-json",
        )
        parts["own_score"] = gr.Button(texts.OWN_BUTTON, elem_id="mars-own-score")


def _results(parts: dict[str, Any]) -> None:
    """The results (mars_demo/ui/page/panels.py): the answer's section always (its heading, errors,
    the verdict, then the progress and the queue line, then the answer), the scoring toggle,
    the other sections in a column shown with the first result (the table, then the details,
    each folded under a one-line summary); the download last."""
    parts["error"] = None  # made under the answer section's heading, see _progress
    for section in panels.SECTIONS:
        if section.always:
            # the progress line (and its "Done. Total ...") after the answer and its warnings:
            # the verdict and the answer it judges read one after the other
            _section(section, parts, before=_errors, after={"warnings": _progress})
    with gr.Row(elem_id="mars-view-row"):  # side by side on a wide screen, stacked on a phone
        parts["scoring"] = gr.Radio(
            [(texts.SCORING_NAMES[key], key) for key in render.SCORINGS],
            value=DEFAULT_SCORING,
            label=texts.SCORING_LABEL,
            elem_id="mars-scoring",
        )
        parts["shade"] = gr.Radio(  # what the answer's token colors show (render.SHADES)
            [(texts.SHADE_NAMES[key], key) for key in render.SHADES],
            value=render.DEFAULT_SHADE,
            label=texts.SHADE_LABEL,
            elem_id="mars-shade",
        )
    with gr.Column(visible=False, elem_id="mars-results") as parts["results"]:
        details = False
        for section in panels.SECTIONS:
            if section.always:
                continue
            if section.folded and not details:  # the folds under one heading, in order
                _heading(texts.DETAILS_HEADING)
                details = True
            _section(section, parts)
        parts["download"] = gr.DownloadButton(
            texts.DOWNLOAD_BUTTON, visible=False, elem_id="mars-download"
        )
    parts["result"] = gr.State(None)


def _errors(parts: dict[str, Any]) -> None:
    parts["error"] = gr.HTML(elem_id="mars-error")


def _progress(parts: dict[str, Any]) -> None:
    """The progress of the stages and, while the visitor waits in the queue, the queue line
    (filled in the browser, ui/assets/page.js: its place is a live status, its seconds not)."""
    parts["progress"] = gr.HTML(elem_id="mars-progress")
    gr.HTML('<p class="mars-queue-line" hidden></p>', elem_id="mars-queue-line", padding=False)


def _heading(title: str, hidden: bool = False) -> None:
    """A heading of the page (``hidden``: for screen readers only)."""
    gr.HTML(f"<h2>{render.esc(title)}</h2>", padding=False,
            elem_classes=["mars-section-title", *(["mars-sr-heading"] if hidden else [])])


def _section(section: panels.Section, parts: dict[str, Any],
             before: Callable[[dict[str, Any]], None] | None = None,
             after: dict[str, Callable[[dict[str, Any]], None]] | None = None) -> None:
    """One section of :data:`panels.SECTIONS` and its panels: folded (an accordion whose label
    the analysis updates with its summary) or under its heading. Panels with a ``column`` sit
    side by side, one column per name, and stack on a narrow screen. ``before``: what comes
    between the heading and the panels; ``after``: what comes after a panel, by its key."""
    members = [p for p in panels.PANELS if p.section == section.key]
    if section.folded:
        with gr.Accordion(section.title, open=False,
                          elem_id=section.elem_id or None) as parts[section.output]:
            _panels(members, parts)
        return
    if section.title:
        _heading(section.title, hidden=section.always)
    if before is not None:
        before(parts)
    for panel in members if after else ():
        _panels([panel], parts)
        if panel.key in after:
            after[panel.key](parts)
    if not after:
        _panels(members, parts)


def _panels(members: Sequence[panels.Panel], parts: dict[str, Any]) -> None:
    i = 0
    while i < len(members):
        if not members[i].column:
            parts[members[i].key] = panels.component(members[i])
            i += 1
            continue
        j = i
        while j < len(members) and members[j].column:
            j += 1
        side_by_side = members[i:j]
        with gr.Row(equal_height=False):
            for column in dict.fromkeys(p.column for p in side_by_side):
                with gr.Column(min_width=300):
                    for panel in side_by_side:
                        if panel.column == column:
                            parts[panel.key] = panels.component(panel)
        i = j


def _example_buttons(questions: Sequence[str]) -> list[tuple[gr.Button, str]]:
    """One button per example question, with its question: a click asks it (the events are
    wired with Ask's in :func:`_events`).

    Not ``gr.Examples``: its click asks the server for the example's value (``load_example``,
    a round trip), so an Ask clicked before the answer came back, e.g. while the models load
    and the server is slow, sent the empty box. And its ``gr.Dataset`` threw "Cannot read
    properties of undefined (reading '0')" on some loads: ``Dataset.svelte`` (Gradio 6.17)
    keeps the last ``get_component_meta`` result that resolves, not the latest one asked for,
    and its inner ``{#await component_meta[i][0]...}`` is re-evaluated before the guard
    ``component_meta[i]`` around it, once for every example.
    """
    buttons = []
    with gr.Column(elem_id="mars-examples"):
        with gr.Row(elem_id="mars-example-buttons"):
            gr.HTML(f'<span class="mars-small">{render.esc(texts.EXAMPLES_LABEL)}</span>',
                    elem_id="mars-examples-label", padding=False, min_width=0)
            for text in questions:
                buttons.append((gr.Button(text, size="sm", variant="secondary", scale=0,
                                          min_width=0, elem_classes="mars-example"), text))
    return buttons


def _model_switch(controller: Controller) -> dict[str, gr.components.Component]:
    """The language-model switch (a local page whose host allowed it): dropdown, button, status."""
    choices, current = controller.model_choices()
    with gr.Row(elem_id="mars-model-row"):
        model = gr.Dropdown(
            choices,
            value=current,
            label=texts.MODEL_LABEL,
            info=texts.MODEL_INFO,
            scale=3,
            elem_id="mars-model",
        )
        load = gr.Button(
            texts.LOAD_MODEL_BUTTON,
            scale=1,
            min_width=140,
            size="md",
            elem_id="mars-load-model",
        )
    status = gr.HTML(elem_id="mars-switch-status")
    return {"model": model, "load": load, "status": status}


def _work_note(limit: int) -> str:
    """The line under the sliders of a public page: the cap on sampled answers x max new tokens
    and the sliders' product (ui/assets/page.js keeps it up to date as they move)."""
    samples, tokens = (controls.OPTIONS[name].default for name in ("samples", "max_new_tokens"))
    work = f"{samples} × {tokens} = {samples * tokens}"
    text = texts.ACCESS_WORK_NOTE.format(limit=limit, work=work)
    return (f'<p class="mars-small mars-work-note" data-limit="{limit}" role="status">'
            f"{render.esc(text)}</p>")


def _public_note(access: Access) -> str:
    if access.max_sample_tokens is None:
        return texts.ACCESS_PUBLIC_NOTE_NO_LIMIT
    return texts.ACCESS_PUBLIC_NOTE.format(limit=access.max_sample_tokens)
