"""The page's event handlers, as plain Python that tests can call without a browser.

Each handler returns (or yields) a dict ``{output name: value}``; outputs it leaves out stay as
they are. :mod:`mars_demo.ui.page.layout` turns the names into Gradio components. The work itself runs
in a :class:`~mars_demo.ui.work.worker.Worker` thread; the API functions are in :mod:`mars_demo.ui.work.api`.

Errors never escape a UI handler: they become a visible message, and the server keeps serving.
Every text a visitor gets (results, warnings, errors, the banner, the download) goes through the
page's one :class:`~mars_demo.ui.guards.redact.Redactor`.

The error and warnings boxes stay "visible" and are emptied instead of hidden: with Gradio 6.17, an
update that makes a hidden component visible is not shown when the same yield skips other outputs
(``gr.skip()``). Only the results column and the download button are hidden and shown, and they are
shown only by :meth:`Controller.show`, which sets every output.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.downloads import DownloadStore
from mars_demo.errors import (
    AnalysisCancelled,
    AnalysisOutOfMemory,
    InvalidModelOutput,
    ModelLoadError,
    is_out_of_memory,
)
from mars_demo.hosting.access import Access
from mars_demo.hosting.zerogpu import GpuRefused
from mars_demo.result import AnalysisResult
from mars_demo.settings import (
    CPU_DEFAULT_PRESET,
    GPU_DEFAULT_PRESET,
    LLM_PRESETS,
    PROMPTS,
    OptionError,
    Settings,
)
from mars_demo.ui.draw import methods_panel, render, trust
from mars_demo.ui.guards.redact import Redactor
from mars_demo.ui.page import banner, panels, waits
from mars_demo.ui.page.example_store import ExampleStore
from mars_demo.ui.page.example_warm import ExampleWarmer
from mars_demo.ui.page.waits import RecentWaits
from mars_demo.ui.work import controls, worker
from mars_demo.ui.work.api import Api
from mars_demo.ui.work.host import EngineHost, EngineNotReady
from mars_demo.ui.work.pasted import pasted_answers

log = logging.getLogger(__name__)

DEFAULTS = Settings()  # default analysis options (the API's defaults too)
COMMAND_LINE_MODEL = "command-line"  # the model switch's value for the LLM app.py was started with
API_PROMPTS = ("auto", *PROMPTS)  # the prompt values of the page and the API ("auto" = None)

#: What the page's own handlers set besides the result panels.
STATUS_OUTPUTS = (
    "result",  # gr.State: the AnalysisResult shown on the page (None before the first one)
    "error",
    "progress",
    "results",  # the column with everything below the answer (hidden until there is a result)
    "download",
)


def ask_outputs() -> tuple[str, ...]:
    """The outputs of Ask (and of every event that shows a whole analysis): the status, then
    every panel of mars_demo/ui/page/panels.py and the labels of its folded sections."""
    return STATUS_OUTPUTS + panels.outputs()


def scoring_view_outputs() -> tuple[str, ...]:
    """The outputs of the scoring toggle: the panels it re-renders ("error" only when that
    fails)."""
    return ("error", *panels.rescored_outputs())


ASK_OUTPUTS = ask_outputs()  # as the page's panels are declared
SCORING_VIEW_OUTPUTS = scoring_view_outputs()
SWITCH_OUTPUTS = ("switch_status", "banner")
BANNER_OUTPUTS = ("banner", "timer")


def error_message(exc: BaseException) -> str:
    """The sentence the user sees for an exception of an analysis or a model switch (before
    the page's redaction)."""
    if isinstance(exc, OptionError):
        return texts.ERROR_BAD_INPUT.format(error=str(exc).rstrip("."))
    if isinstance(exc, (EngineNotReady, ModelLoadError)):
        return str(exc)
    if isinstance(exc, (AnalysisOutOfMemory, InvalidModelOutput, GpuRefused)):  # says what to do
        return str(exc)
    if is_out_of_memory(exc):
        return texts.ERROR_OUT_OF_MEMORY
    if isinstance(exc, AnalysisCancelled):
        return texts.ERROR_CANCELLED
    log.error("analysis failed", exc_info=exc)
    return texts.ERROR_UNEXPECTED.format(error=f"{type(exc).__name__}: {exc}")


def model_choices(settings: Settings, cuda: bool) -> tuple[list[tuple[str, str]], str]:
    """Dropdown choices (label, value) of the language model, and the current value."""
    choices = [
        (preset.label + (texts.MODEL_GATED if preset.gated else ""), key)
        for key, preset in LLM_PRESETS.items()
    ]
    current = settings.llm
    if current is None:
        current = GPU_DEFAULT_PRESET if cuda else CPU_DEFAULT_PRESET
    by_id = {preset.model_id: key for key, preset in LLM_PRESETS.items()}
    current = by_id.get(current, current)
    if current not in LLM_PRESETS:
        # The value is a fixed word, not the model's path: Gradio lists the choices' values when
        # it refuses another value, and that message must not show the server's folders.
        choices.append((texts.MODEL_CUSTOM.format(model=current), COMMAND_LINE_MODEL))
        current = COMMAND_LINE_MODEL
    return choices, current


class Controller:
    """Event handlers of one page, over one :class:`EngineHost`."""

    def __init__(self, host: EngineHost, access: Access | None = None,
                 calibration: Any = None,
                 reference: methods_panel.Reference | None = None,
                 examples: ExampleStore | None = None) -> None:
        self.host = host
        self.access = access or Access()
        self.calibration = calibration  # evaluation.calibration.Calibration, or None
        # the run the methods panel places values among (or why there is none)
        self.reference = reference or methods_panel.Reference()
        # the engine's verdicts cite this page's calibration and run: it judges, the page shows
        host.judge_with(calibration, self.reference.run)
        # the example questions' analyses, made once (none kept without a folder)
        self.examples = examples or ExampleStore(None, ())
        self.waits = RecentWaits()  # how long analyses took lately (said before the first token)
        # the examples analyzed in the background, started by the host (build_demo)
        self.warmer = ExampleWarmer(host, self.examples, self.page_defaults, self.waits)
        self.downloads = DownloadStore()
        self.api = Api(self)
        self._command_line_llm = host.engine.settings.llm  # COMMAND_LINE_MODEL of the switch
        self.share_url: Callable[[], str | None] = lambda: None  # --share's link, once made

    def redactor(self) -> Redactor:
        """The page's one redaction of what visitors get (for the engine's models now)."""
        return Redactor.for_page(self.access, self.host.engine.settings, self.host.describe())

    def message(self, exc: BaseException) -> str:
        """The message a visitor sees for ``exc`` (:func:`error_message`, redacted)."""
        return self.redactor().text(error_message(exc))

    # --- settings -------------------------------------------------------------------------------

    def settings_from(self, *values: Any, names: tuple[str, ...] = controls.PAGE_OPTIONS
                      ) -> Settings:
        """The engine's settings (its models) with the request's options: ``values`` in
        ``names`` order (the page's controls, or the API's parameters). Raises OptionError."""
        options = dict(zip(names, values))
        prompt = options.get("prompt")
        if prompt is not None and prompt not in API_PROMPTS:  # Settings would list only paper, chat
            raise OptionError(f"prompt must be one of {', '.join(API_PROMPTS)}; got {prompt!r}")
        changes = {name: controls.from_page(name, value) for name, value in options.items()}
        if "methods" in changes and changes["methods"] is None:
            del changes["methods"]  # "auto": the page's own methods (the host's --methods)
        settings = self.host.engine.settings.replace(**changes)
        self.access.check_models(settings)
        return settings

    def page_defaults(self) -> Settings:
        """The settings of an Ask with every control as the page opens (the example store's
        options)."""
        return self.settings_from(*(controls.page_default(name) for name in controls.PAGE_OPTIONS))

    # --- ask ------------------------------------------------------------------------------------

    def ask(self, question: Any, scoring: str, *options: Any) -> Iterator[dict[str, Any]]:
        """Analyze ``question``: stream the greedy answer, then show the whole analysis.

        ``options`` are the settings in :meth:`settings_from` order. The question goes to the
        engine as typed: its door cleans it, once (a bad one comes back as the engine's
        message, before anything is shown).

        The analysis runs in the one worker thread of its GPU function; this generator relays
        the events it reports (:func:`~mars_demo.ui.work.worker.analysis_events`,
        :func:`~mars_demo.ui.work.worker.relay`). When Gradio closes the generator before the end
        (the visitor closed the tab or the request was cancelled: Gradio then calls
        ``close()``, which raises ``GeneratorExit`` at the current ``yield``), the events are
        closed and the worker told to stop, so the models do not stay busy for a page nobody
        reads.
        """
        try:
            render.check_scoring(scoring)  # a raw API call's bad value: refused before any work
            settings = self.settings_from(*options)
            self.access.check_work(settings)
            self.host.check_ready()
        except (OptionError, EngineNotReady, ValueError) as exc:
            yield self.refused(exc)
            return
        defaults = self.page_defaults()
        kept = (self.examples.get(question, settings, defaults) if isinstance(question, str)
                else None)
        if kept is not None:  # an example made before: all of it at once
            yield self._shown(kept, scoring, note=texts.EXAMPLE_KEPT)
            return
        events = worker.analysis_events(self.host, question, settings)
        result = yield from self._finish(events, str(question), scoring, waits.kind(settings))
        if result is not None and self.examples.wants(result.question, settings, defaults):
            self.examples.put(result.question, settings, defaults, result)

    def _finish(self, events: Iterator[worker.Event], question: str, scoring: str,
                like: Any = None) -> Generator[dict[str, Any], None, AnalysisResult | None]:
        """Relay a running analysis, then show its result (or its error); returns the result
        (None after an error). Its running time joins :attr:`waits` under ``like``
        (:func:`~mars_demo.ui.page.waits.kind`), whose expected wait it says while it runs."""
        started = time.monotonic()
        try:
            kind, payload = yield from worker.relay(
                events, question,
                working=lambda elapsed: trust.working_html(self.waits.words(like, elapsed)))
        finally:
            events.close()  # stops the analysis when closed early; a no-op once it is done
        if kind in ("error", "refused"):  # refused: nothing shown yet, no stale result stays
            yield self._failed(payload) if kind == "error" else self.refused(payload)
            return None
        self.waits.add(time.monotonic() - started, like)
        yield self._shown(payload, scoring)
        return payload

    def _shown(self, result: AnalysisResult, scoring: str, note: str = "") -> dict[str, Any]:
        """:meth:`show`, with ``note`` in the progress line; a rendering bug becomes a message
        (it must not escape: the page keeps serving)."""
        try:
            update = self.show(result, scoring)
        except Exception as exc:
            return self._failed(exc)
        if note:
            update["progress"] = self._note(note)
        return update

    def refused(self, exc: BaseException) -> dict[str, Any]:
        """The update of a request refused before anything started: the message, and no answer
        of an earlier question left under the new one."""
        return {
            **self._failed(exc),
            "result": None,
            "results": gr.update(visible=False),
            "download": gr.update(value=None, visible=False),
        }

    def _failed(self, exc: BaseException) -> dict[str, Any]:
        """The update of an analysis that ended with ``exc``: the message, and no stale result
        (the first update of the Ask already hid the last one)."""
        return {
            "error": render.error_html(self.message(exc)),
            "progress": "",
            "answer": render.placeholder_html(),
            "warnings": "",
            "verdict": "",
        }

    def show(self, result: AnalysisResult, scoring: str) -> dict[str, Any]:
        """Every output for a finished analysis (as visitors may see it: :meth:`redactor`,
        which redacts it once: the panels and the download read the same redacted JSON).
        Raises what a renderer raises (see :meth:`ask`); a download that cannot be written only
        hides the button and says so."""
        redactor = self.redactor()
        data = redactor.result_dict(result.to_dict())
        visible = AnalysisResult.from_dict(data) if redactor.changes else result
        shown = self.shown(result, scoring, analysis=uuid.uuid4().hex[:12], visible=visible)
        update = {
            "result": result,  # the original, to re-score; it stays on the server
            "error": "",
            "progress": render.progress_html(timings_s=shown.result.timings_s),
            "results": gr.update(visible=True),
            **panels.rendered(shown),
        }
        try:
            path = self.downloads.write(data, texts.DOWNLOAD_FILENAME)
            update["download"] = gr.update(value=path, visible=True)
        except Exception as exc:  # e.g. a full disk: the analysis is still worth showing
            log.error("writing the JSON download failed", exc_info=exc)
            update["download"] = gr.update(value=None, visible=False)
            update["error"] = render.error_html(redactor.text(
                texts.ERROR_DOWNLOAD.format(error=f"{type(exc).__name__}: {exc}")))
        return update

    def shown(self, result: AnalysisResult, scoring: str,
              shade: str = render.DEFAULT_SHADE, analysis: str = "",
              visible: AnalysisResult | None = None) -> panels.Shown:
        """What the panels render: ``result`` as visitors may see it (``visible``, else
        redacted here by :meth:`redactor`), the original, ``scoring``, the answer's coloring
        (``shade``, checked: a raw call's bad value is a message, not a rendering), this page's
        methods run, and the id of this showing of an analysis (``analysis``: the page
        announces each one)."""
        visible = visible if visible is not None else self.redactor().result(result)
        return panels.Shown(visible, render.check_scoring(scoring), original=result,
                            reference=self.reference, shade=render.check_shade(shade),
                            analysis=analysis)

    # --- scoring toggle -------------------------------------------------------------------------

    def show_scoring(self, result: AnalysisResult | None, scoring: str,
                     shade: str = render.DEFAULT_SHADE) -> dict[str, Any]:
        """Re-render what depends on the scoring (and the answer's coloring, ``shade``) from
        the stored result (nothing is recomputed).

        Runs on the toggles and whenever a result is stored (after an Ask, with the toggles'
        values then, which the visitor may have flipped while the answer streamed). A rendering
        error becomes a message.
        """
        if result is None:
            return {}
        try:
            return panels.rendered(self.shown(result, scoring, shade=shade), only_rescored=True)
        except Exception as exc:
            return {"error": render.error_html(self.message(exc))}

    # --- scoring options: re-score the answers on screen ---------------------------------------

    def rescore_wanted(self, result: AnalysisResult | None, *options: Any) -> None:
        """Whether a scoring option's change has answers to re-score: returns when it does;
        raises a hidden ``gr.Error`` (which stops the chained :meth:`rescore_options`) when
        nothing is on screen or no option differs from the result's. Cheap; runs outside the
        queue."""
        try:
            wanted = result is not None and bool(self._changed(result, self.settings_from(*options)))
        except OptionError:
            wanted = True  # rescore_options shows the message
        if not wanted:
            raise gr.Error("nothing to re-score", visible=False, print_exception=False)

    @staticmethod
    def _changed(result: AnalysisResult, settings: Settings) -> dict[str, Any]:
        """The scoring options whose value in ``settings`` differs from the result's."""
        return {
            name: getattr(settings, name)
            for name in controls.RESCORING_OPTIONS
            if result.settings.get(name, getattr(DEFAULTS, name)) != getattr(settings, name)
        }

    def rescore_options(self, result: AnalysisResult | None, scoring: str,
                        *options: Any) -> dict[str, Any]:
        """Score the answers on screen again with the page's scoring options (importance method,
        normalization, distribution, cluster rule, recipe): the LLM is not called and the NLI
        verdicts are reused. Nothing on screen: nothing to do (the options apply to the next
        Ask). ``options`` are the page's controls in :data:`controls.PAGE_OPTIONS` order."""
        if result is None:
            return {}
        try:
            settings = self.settings_from(*options)
            changed = self._changed(result, settings)
            if not changed:
                return {}
            self.host.check_ready()
            again = worker.gpu_score(self.host, result, settings, reuse=result)
        except Exception as exc:
            return {"error": render.error_html(self.message(exc))}
        try:
            update = self.show(again, scoring)
        except Exception as exc:
            return self._failed(exc)
        note = texts.RESCORED_NOTE.format(
            changes=", ".join(f"{k.replace('_', ' ')} {v}" for k, v in changed.items()))
        update["progress"] = self._note(note)
        return update

    # --- score your own answers --------------------------------------------------------------

    def score_own(self, question: Any, greedy: Any, samples: Any, answer_json: Any,
                  scoring: str, *options: Any) -> Iterator[dict[str, Any]]:
        """Score pasted answers (:func:`~mars_demo.ui.work.pasted.pasted_answers`) and show them
        like a generated analysis."""
        try:
            render.check_scoring(scoring)
            answers = pasted_answers(question, greedy, samples, answer_json)
            self.access.check_score_work(answers)
            settings = self.settings_from(*options)
            self.host.check_ready()
        except (OptionError, EngineNotReady, ValueError) as exc:
            yield self.refused(exc)
            return
        events = worker.score_events(self.host, answers, settings, cap=self.access.work_cap)
        yield from self._finish(events, answers.question, scoring,
                                waits.kind(settings, given=len(answers.samples)))

    # --- models ---------------------------------------------------------------------------------

    def model_choices(self) -> tuple[list[tuple[str, str]], str]:
        return model_choices(self.host.engine.settings, self.host.describe()["device"] == "cuda")

    def switch_model(self, model: str) -> Iterator[dict[str, Any]]:
        """Free the current LLM and load ``model``: a preset name, or :data:`COMMAND_LINE_MODEL`
        (the LLM app.py was started with). Anything else is refused, and so is every switch
        unless the host allowed it (``Access.allow_model_switch``): the layout does not even
        register this handler then, this check is the second lock."""
        if not self.access.allow_model_switch:
            yield {"switch_status": render.error_html(texts.ACCESS_SWITCH_OFF)}
            return
        if model == COMMAND_LINE_MODEL:
            model = self._command_line_llm
        elif model not in LLM_PRESETS:
            shown = model if isinstance(model, str) else type(model).__name__
            yield {
                "switch_status": render.error_html(
                    texts.ACCESS_UNKNOWN_MODEL.format(model=shown[:60])
                )
            }
            return
        try:
            settings = self.host.engine.settings.replace(llm=model)
        except OptionError as exc:
            yield {"switch_status": render.error_html(self.message(exc))}
            return
        name = LLM_PRESETS[model].label if model in LLM_PRESETS else model
        events = worker.Worker(
            lambda progress, _text, _stop: worker.switch_models(self.host, settings, progress),
            "mars-switch-model",
        ).events
        yield {
            "switch_status": self._note(texts.SWITCH_STARTED.format(model=name)),
            "banner": self.banner_html(),
        }
        while True:
            kind, payload = events.get()
            if kind == "progress":
                stage, fraction = payload
                percent = round(min(max(fraction, 0.0), 1.0) * 100)
                yield {
                    "switch_status": self._note(
                        texts.SWITCH_PROGRESS.format(model=name, stage=stage, percent=percent)
                    )
                }
            elif kind == "error":
                yield {
                    "switch_status": render.error_html(self.message(payload)),
                    "banner": self.banner_html(),
                }
                return
            elif kind == "done":
                if self.warmer.started:  # the examples of the new models, in the background
                    self.warmer.start()
                yield {
                    "switch_status": self._note(texts.SWITCH_DONE.format(model=name)),
                    "banner": self.banner_html(),
                }
                return

    @staticmethod
    def _note(message: str) -> str:
        return f'<div class="mars-note" role="status">{render.esc(message)}</div>'

    # --- banner ---------------------------------------------------------------------------------

    def banner_html(self) -> str:
        """The banner: the models' loading, the models and device, the links (:mod:`banner`)."""
        return banner.banner_html(self.host, self.access, self.redactor(), self.share_url)

    def banner(self) -> dict[str, Any]:
        """The banner, and whether to keep polling it (while the models load)."""
        loading = self.host.status().state == "loading"
        return {"banner": self.banner_html(), "timer": gr.Timer(active=loading)}
