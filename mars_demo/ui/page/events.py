"""The page's events: Ask, the scoring and colouring toggles, the scoring options, pasted
answers, the model switch and the banner, wired to :class:`~mars_demo.ui.page.controller.Controller`'s
handlers (the components are built by :mod:`mars_demo.ui.page.layout`).

Every event that runs the models shares the concurrency group :data:`ENGINE_QUEUE` (one at a
time); every other queued event shares :data:`VIEW_QUEUE` (one at a time too). What the press of
Ask does at once happens in the browser (:data:`PRESS_JS`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.hosting.access import ENGINE_GROUP, VIEW_GROUP
from mars_demo.ui.guards.kept_renders import RenderCache
from mars_demo.ui.page.controller import (
    BANNER_OUTPUTS,
    SWITCH_OUTPUTS,
    Controller,
    ask_outputs,
    scoring_view_outputs,
)
from mars_demo.ui.work import controls

ENGINE_QUEUE = ENGINE_GROUP  # concurrency group of every event that runs the models: one at a time
VIEW_QUEUE = VIEW_GROUP  # concurrency group of every other queued event: one at a time too
# What the press of Ask (a click, a tap, Enter, an example) changes at once, in the browser
# (window.marsPress of ui/assets/page.js): Ask busy, the last result gone, the verdict line
# "being worked out", the view on it. These events come before the analysis on the same trigger:
# Gradio 6 runs one trigger's events in order, and one after a streaming event waits for its end.
PRESS_OUTPUTS = ("ask", "verdict", "answer", "warnings", "error", "progress", "results")
PRESS_JS = ("(question) => window.marsPress ? window.marsPress(question, "
            + json.dumps(PRESS_OUTPUTS) + ") : undefined")
# Events that wait in the engine's queue show the visitor their place in the queue and the wait
# over the answer box (Gradio's status, in words by ui/assets/page.js). Once the handler runs, its
# own progress bar (mars-progress) takes over.
QUEUE_STATUS = "full"


def packed(
    method: Callable[..., Iterator[dict[str, Any]]], names: Sequence[str]
) -> Callable[..., Iterator[tuple]]:
    """A generator handler yielding tuples in ``names`` order; missing names are left unchanged.

    Closing the handler (Gradio does when the visitor leaves or cancels) closes ``method``'s
    generator at once, so its cleanup runs then (it stops a running analysis).
    """

    def handler(*args: Any) -> Iterator[tuple]:
        with contextlib.closing(method(*args)) as updates:
            for update in updates:
                yield tuple(update.get(name, gr.skip()) for name in names)

    handler.__name__ = method.__name__
    return handler


def packed_once(
    method: Callable[..., dict[str, Any]], names: Sequence[str]
) -> Callable[..., tuple]:
    def handler(*args: Any) -> tuple:
        update = method(*args)
        return tuple(update.get(name, gr.skip()) for name in names)

    handler.__name__ = method.__name__
    return handler


#: the keywords of every event that runs the models (one at a time, in the engine's queue) and of
#: every other queued event (one at a time too); neither is offered in the API
ON_ENGINE = dict(api_visibility="private", concurrency_id=ENGINE_QUEUE, concurrency_limit=1)
ON_VIEW = dict(api_visibility="private", concurrency_id=VIEW_QUEUE, concurrency_limit=1)
#: the keywords of an event outside the queue: a browser-side change, or a quick request
OUTSIDE = dict(api_visibility="private", queue=False, show_progress="hidden")


def wire_events(demo: gr.Blocks, controller: Controller, parts: dict[str, Any],
                option_controls: dict[str, gr.components.Component]) -> None:
    """Ask, the scoring and coloring toggles, the scoring options, pasted answers, the model
    switch and the banner, wired to the controller's handlers: one function each below."""
    wiring = _Wiring(controller, parts, [option_controls[name] for name in controls.PAGE_OPTIONS])
    rerender = _wire_rerender(wiring)
    _wire_ask(wiring, rerender)
    _wire_rescore(wiring, option_controls)
    _wire_own_answers(wiring)
    _wire_switch(wiring)
    _wire_banner(demo, wiring)


class _Wiring:
    """What every event's wiring reads: the controller, the page's components by name, the
    scoring options' controls, and the panels as declared now."""

    def __init__(self, controller: Controller, parts: dict[str, Any], options: list) -> None:
        self.controller, self.parts, self.options = controller, parts, options
        self.ask_names, self.view_names = ask_outputs(), scoring_view_outputs()

    def outputs(self, names: Sequence[str]) -> list:
        return [self.parts[name] for name in names]


def _wire_rerender(w: _Wiring) -> Any:
    """The one re-render from the stored result (no model; each view of a result rendered once,
    ui/guards/kept_renders.py): on either toggle, and whenever a result is stored (an Ask's,
    pasted answers', a re-score's), with the toggles as they are then, which the visitor may
    have flipped while the answer streamed. It is registered here alone: no event chains
    ``.then(show_scoring)`` after an analysis (one client ran four re-renders at once that
    way), and it shares VIEW_QUEUE, one at a time, with every other event that runs no model."""
    scoring, shade, result = w.parts["scoring"], w.parts["shade"], w.parts["result"]
    return gr.on(
        [scoring.change, shade.change, result.change],
        packed_once(RenderCache(w.controller.show_scoring), w.view_names),
        inputs=[result, scoring, shade], outputs=w.outputs(w.view_names),
        show_progress="hidden", **ON_VIEW)


def _wire_ask(w: _Wiring, rerender: Any) -> None:
    """Ask (its button, Enter, an example). It says it is working, and takes no click, until the
    analysis has ended (either way): set in the browser at the press (PRESS_JS, a js-only
    event: no request), registered before the Ask on the same trigger; the Ask's chain then only
    makes Ask ready again, since the re-render follows the stored result.
    tests/test_hostile_sessions.py sends ``_ask_ready`` as a request outside the queue.

    The press also cancels, in this browser, a re-render of the last result still on its way
    (Ask is ready once the analysis has ended, and the re-render that follows its stored result
    may come back after a quick next press): it would draw the last answer again under the new
    question."""
    question, ask, answer = w.parts["question"], w.parts["ask"], w.parts["answer"]
    press = w.outputs(PRESS_OUTPUTS)
    gr.on([ask.click, question.submit], None, inputs=[question], outputs=press, js=PRESS_JS,
          cancels=[rerender], **OUTSIDE)
    for button, text in w.parts["examples"]:  # one click: the question, then the analysis
        button.click(None, outputs=[question, *press], js=_example_js(text), cancels=[rerender],
                     **OUTSIDE)
    pressed = [ask.click, question.submit, *(button.click for button, _ in w.parts["examples"])]
    # ... and the server forgets the stored result at the press (a request outside the queue,
    # before the Ask): a re-render reads the stored result when it runs, and one sent before the
    # press but run after it (a slow network; the cancel above knows no event id yet) would
    # otherwise draw the last answer under the new question while the new analysis waits for
    # the engine. The Ask's first update clears it too, but only once the engine takes it.
    gr.on(pressed, _forget_result, outputs=[w.parts["result"]], **OUTSIDE)
    gr.on(
        pressed,
        packed(w.controller.ask, w.ask_names),
        inputs=[question, w.parts["scoring"], *w.options], outputs=w.outputs(w.ask_names),
        show_progress=QUEUE_STATUS, show_progress_on=[answer], **ON_ENGINE,
    ).then(_ask_ready, outputs=[ask], **OUTSIDE)


def _wire_rescore(w: _Wiring, option_controls: dict[str, gr.components.Component]) -> None:
    """A scoring option changed: score the answers on screen again (models, so the queue). A
    quick check outside the queue first: with nothing on screen, or nothing changed, no event
    joins the queue (nor counts against the visitor's one place in it)."""
    result = w.parts["result"]
    gr.on(
        [option_controls[name].change for name in controls.RESCORING_OPTIONS],
        w.controller.rescore_wanted, inputs=[result, *w.options], outputs=None, **OUTSIDE,
    ).success(
        packed_once(w.controller.rescore_options, w.ask_names),
        inputs=[result, w.parts["scoring"], *w.options], outputs=w.outputs(w.ask_names),
        show_progress="hidden", **ON_ENGINE,
    )


def _wire_own_answers(w: _Wiring) -> None:
    """Score your own answers: the pasted greedy answer and samples, or an answer set's JSON."""
    p = w.parts
    p["own_score"].click(
        packed(w.controller.score_own, w.ask_names),
        inputs=[p["question"], p["own_greedy"], p["own_samples"], p["own_json"], p["scoring"],
                *w.options],
        outputs=w.outputs(w.ask_names),
        show_progress=QUEUE_STATUS, show_progress_on=[p["answer"]], **ON_ENGINE,
    )


def _wire_switch(w: _Wiring) -> None:
    """The model switch, only where the host allowed it: otherwise its handler does not exist."""
    switch = w.parts.get("switch")
    if switch:
        switch["load"].click(
            packed(w.controller.switch_model, SWITCH_OUTPUTS),
            inputs=[switch["model"]], outputs=w.outputs(SWITCH_OUTPUTS),
            show_progress="hidden", **ON_ENGINE,
        )


def _wire_banner(demo: gr.Blocks, w: _Wiring) -> None:
    """The banner (the models, their loading), at each page load and each tick of its timer."""
    refresh_banner = packed_once(w.controller.banner, BANNER_OUTPUTS)
    for trigger in (demo.load, w.parts["timer"].tick):
        trigger(refresh_banner, outputs=w.outputs(BANNER_OUTPUTS), show_progress="hidden",
                **ON_VIEW)


def _forget_result() -> None:
    """The stored result, forgotten at the press of Ask (:func:`wire_events`)."""
    return None


def _ask_ready() -> Any:
    """Ask takes presses again: after the analysis, whichever way it ended."""
    return gr.Button(value=texts.ASK_BUTTON, interactive=True)


def _example_js(text: str) -> str:
    """The press of an example, in the browser: its question into the box (no server round
    trip) and the press's outputs (:data:`PRESS_JS`); nothing while an analysis runs."""
    question = json.dumps(text)
    return (f"() => {{ if (!window.marsPress) return [{question}]; "
            f"const pressed = window.marsPress({question}, {json.dumps(PRESS_OUTPUTS)}); "
            f"return pressed ? [{question}, ...pressed] : undefined; }}")
