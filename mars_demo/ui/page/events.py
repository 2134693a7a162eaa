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
from mars_demo.access import ENGINE_GROUP, VIEW_GROUP
from mars_demo.ui.work import controls
from mars_demo.ui.page.controller import (
    BANNER_OUTPUTS,
    SWITCH_OUTPUTS,
    Controller,
    ask_outputs,
    scoring_view_outputs,
)
from mars_demo.ui.hosting.kept_renders import RenderCache

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


def wire_events(demo: gr.Blocks, controller: Controller, parts: dict[str, Any],
            option_controls: dict[str, gr.components.Component]) -> None:
    """Ask, the scoring and coloring toggles, the scoring options, pasted answers, the model switch and the
    banner, wired to the controller's handlers."""

    def outputs(names: Sequence[str]) -> list:
        return [parts[name] for name in names]

    question, ask, scoring, answer, result = (
        parts[name] for name in ("question", "ask", "scoring", "answer", "result"))
    ask_names, view_names = ask_outputs(), scoring_view_outputs()  # the panels as declared now
    options = [option_controls[name] for name in controls.PAGE_OPTIONS]
    # The one re-render from the stored result (no model; each view of a result rendered once,
    # ui/hosting/kept_renders.py): on either toggle, and whenever a result is stored (an Ask's, pasted
    # answers', a re-score's), with the toggles as they are then, which the visitor may have
    # flipped while the answer streamed. It is registered here alone: no event chains
    # ``.then(show_scoring)`` after an analysis (one client ran four re-renders at once that
    # way), and it shares VIEW_QUEUE, one at a time, with every other event that runs no model.
    rerender = gr.on(
        [scoring.change, parts["shade"].change, result.change],
        packed_once(RenderCache(controller.show_scoring), view_names),
        inputs=[result, scoring, parts["shade"]],
        outputs=outputs(view_names),
        api_visibility="private",
        concurrency_id=VIEW_QUEUE,
        concurrency_limit=1,
        show_progress="hidden",
    )
    # Ask says it is working, and takes no click, until the analysis has ended (either way):
    # set in the browser at the press (PRESS_JS, a js-only event: no request), registered before
    # the Ask on the same trigger; the Ask's chain then only makes Ask ready again, since the
    # re-render above follows the stored result. tests/test_hostile_sessions.py sends
    # `_ask_ready` as a request outside the queue.
    # The press also cancels, in this browser, a re-render of the last result still on its way
    # (Ask is ready once the analysis has ended, and the re-render that follows its stored
    # result may come back after a quick next press): it would draw the last answer again under
    # the new question.
    busy = dict(api_visibility="private", queue=False, show_progress="hidden")
    press = outputs(PRESS_OUTPUTS)
    gr.on([ask.click, question.submit], None, inputs=[question], outputs=press, js=PRESS_JS,
          cancels=[rerender], **busy)
    for button, text in parts["examples"]:  # one click: the question, then the analysis
        button.click(None, outputs=[question, *press], js=_example_js(text), cancels=[rerender],
                     **busy)
    pressed = [ask.click, question.submit, *(button.click for button, _ in parts["examples"])]
    # ... and the server forgets the stored result at the press (a request outside the queue,
    # before the Ask): a re-render reads the stored result when it runs, and one sent before the
    # press but run after it (a slow network; the cancel above knows no event id yet) would
    # otherwise draw the last answer under the new question while the new analysis waits for
    # the engine. The Ask's first update clears it too, but only once the engine takes it.
    gr.on(pressed, _forget_result, outputs=[result], **busy)
    gr.on(
        pressed,
        packed(controller.ask, ask_names),
        inputs=[question, scoring, *options],
        outputs=outputs(ask_names),
        api_visibility="private",
        concurrency_id=ENGINE_QUEUE,
        concurrency_limit=1,
        show_progress=QUEUE_STATUS,
        show_progress_on=[answer],
    ).then(_ask_ready, outputs=[ask], **busy)
    # A scoring option changed: score the answers on screen again (models, so the queue).
    # A quick check outside the queue first: with nothing on screen, or nothing changed,
    # no event joins the queue (nor counts against the visitor's one place in it).
    gr.on(
        [option_controls[name].change for name in controls.RESCORING_OPTIONS],
        controller.rescore_wanted,
        inputs=[result, *options],
        outputs=None,
        api_visibility="private",
        queue=False,
        show_progress="hidden",
    ).success(
        packed_once(controller.rescore_options, ask_names),
        inputs=[result, scoring, *options],
        outputs=outputs(ask_names),
        api_visibility="private",
        concurrency_id=ENGINE_QUEUE,
        concurrency_limit=1,
        show_progress="hidden",
    )
    parts["own_score"].click(
        packed(controller.score_own, ask_names),
        inputs=[question, parts["own_greedy"], parts["own_samples"], parts["own_json"], scoring,
                *options],
        outputs=outputs(ask_names),
        api_visibility="private",
        concurrency_id=ENGINE_QUEUE,
        concurrency_limit=1,
        show_progress=QUEUE_STATUS,
        show_progress_on=[answer],
    )
    switch = parts.get("switch")
    if switch:  # only when the host allowed it: otherwise the handler does not exist at all
        switch["load"].click(
            packed(controller.switch_model, SWITCH_OUTPUTS),
            inputs=[switch["model"]],
            outputs=outputs(SWITCH_OUTPUTS),
            api_visibility="private",
            concurrency_id=ENGINE_QUEUE,
            concurrency_limit=1,
            show_progress="hidden",
        )
    refresh_banner = packed_once(controller.banner, BANNER_OUTPUTS)
    for trigger in (demo.load, parts["timer"].tick):
        trigger(
            refresh_banner,
            outputs=outputs(BANNER_OUTPUTS),
            api_visibility="private",
            concurrency_id=VIEW_QUEUE,
            concurrency_limit=1,
            show_progress="hidden",
        )


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
