"""The page's API (``/analyze`` and ``/score``): the same work as the page's buttons, for
``gradio_client`` and raw HTTP, returning the analysis JSON (as visitors may see it, through the
page's one :class:`~mars_demo.ui.guards.redact.Redactor`).

No ``from __future__ import annotations`` here: ``gr.api`` reads the API function's type hints,
return type included, at runtime.
"""

import asyncio
import contextvars
import inspect
import json
import threading
from collections.abc import Callable
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.result import AnalysisResult
from mars_demo.settings import OptionError, Settings
from mars_demo.ui.work import controls, worker
from mars_demo.ui.work.pasted import pasted_answers

# The cancel check of the API request running in this thread (see Api.endpoint).
_API_SHOULD_STOP: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "mars_api_should_stop", default=None
)


class Api:
    """The API functions of one page, over its :class:`~mars_demo.ui.page.controller.Controller`
    (its engine, access, calibration and redaction)."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller

    def serve(self, demo: gr.Blocks, concurrency_id: str) -> None:
        """Add /analyze and /score to ``demo`` (inside its ``with``), in the engine's queue
        (``concurrency_id``) with the page's own events, each parameter described."""
        for api_name in ("analyze", "score"):
            endpoint = self.endpoint(api_name)
            gr.api(endpoint, api_name=api_name, concurrency_id=concurrency_id,
                   concurrency_limit=1)
            describe_api_parameters(demo, api_name, endpoint)

    def analyze(self, question: str, **options: Any) -> dict[str, Any]:
        """Analyze one question (see texts.API_ANALYZE_DOC); ``options`` are the API's
        parameters (:data:`controls.API_OPTIONS`). Errors become ``gr.Error``."""
        c = self.controller
        try:  # the question is cleaned once, at the engine's door
            settings = self._settings(options)
            c.access.check_work(settings)
            result = worker.gpu_analyze(c.host, question, settings,
                                        should_stop=_API_SHOULD_STOP.get())
        except Exception as exc:
            raise self._error(exc) from exc
        return self.with_calibration(result)

    def score(self, answers: Any, **options: Any) -> dict[str, Any]:
        """Score an answer set (see texts.API_SCORE_DOC). Errors become ``gr.Error``."""
        c = self.controller
        try:
            # the page's limits (size, samples, question, work) for a JSON object too
            if isinstance(answers, str):
                text = answers
            else:
                try:
                    text = json.dumps(answers)
                except ValueError as err:  # e.g. an integer of more than 4300 digits
                    raise OptionError(texts.OWN_BAD_JSON.format(error=str(err)[:120])) from err
            answer_set = pasted_answers(None, None, None, text)
            c.access.check_score_work(answer_set)
            settings = self._settings(options)
            result = worker.gpu_score(c.host, answer_set, settings,
                                      should_stop=_API_SHOULD_STOP.get(), cap=c.access.work_cap)
        except Exception as exc:
            raise self._error(exc) from exc
        return self.with_calibration(result)

    def with_calibration(self, result: AnalysisResult) -> dict[str, Any]:
        """The API's analysis JSON as visitors get it (redacted once), with a ``calibration``
        field when the server has one: the verdict's (its chance of being right and where it
        was measured, or why it gives none)."""
        data = self.controller.redactor().result_dict(result.to_dict())
        if self.controller.calibration is not None:
            verdict = data.get("verdict") or {}
            data["calibration"] = verdict.get("calibration")
        return data

    def _settings(self, options: dict[str, Any]) -> Settings:
        unknown = sorted(set(options) - set(controls.API_OPTIONS))
        if unknown:
            raise OptionError(f"unknown parameter(s) {', '.join(unknown)}")
        return self.controller.settings_from(*options.values(), names=tuple(options))

    def _error(self, exc: BaseException) -> gr.Error:
        # a cancel was logged by the worker the engine ran in, once the models were free
        return gr.Error(self.controller.message(exc))

    def endpoint(self, name: str = "analyze") -> Callable[..., Any]:
        """The API function ``gr.api`` serves: :meth:`analyze` (``name`` "analyze") or
        :meth:`score` ("score") with every parameter of the schema in its signature, type
        hints and docstring, as a coroutine.

        The work runs in a thread. When the request is cancelled (``Job.cancel()`` of
        ``gradio_client``, Gradio's ``/cancel``), Gradio cancels this coroutine's task; the
        analysis is then told to stop at its next generated token or stage, so the models are
        free for the next request at once instead of finishing an answer nobody will read.
        """
        work = {"analyze": self.analyze, "score": self.score}[name]
        first = {
            "analyze": inspect.Parameter("question", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                         annotation=str),
            "score": inspect.Parameter("answers", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                       annotation=str),
        }[name]
        signature, _ = controls.api_signature([first])

        async def endpoint(*args: Any, **kwargs: Any) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            head = values.pop(first.name)
            stop = threading.Event()
            token = _API_SHOULD_STOP.set(stop.is_set)  # asyncio.to_thread copies the context
            try:
                return await asyncio.to_thread(work, head, **values)
            except asyncio.CancelledError:
                stop.set()
                raise
            finally:
                _API_SHOULD_STOP.reset(token)

        endpoint.__name__ = f"api_{name}"
        doc = texts.API_ANALYZE_DOC if name == "analyze" else texts.API_SCORE_DOC
        if self.controller.calibration is not None:
            doc += texts.API_CALIBRATION_DOC
        return controls.with_api_signature(endpoint, [first], doc)


def describe_api_parameters(demo: gr.Blocks, api_name: str, fn: Callable[..., Any]) -> None:
    """Put each parameter's description (from ``fn``'s docstring, "name: text" lines) into the
    API page: ``/gradio_api/info`` reads it from the input's JSON schema
    (``additional_description``), not from the docstring."""
    _, described, _ = gr.utils.get_function_description(fn)
    names = list(inspect.signature(fn).parameters)
    block_fn = next(f for f in demo.fns.values() if f.api_name == api_name)
    for name, component in zip(names, block_fn.inputs):
        info = dict(component.api_info())
        info["additional_description"] = described.get(name, "")
        component._api_info = info  # gr.api's input component (gradio.components.api_component.Api)
