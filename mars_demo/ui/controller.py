"""The page's event handlers, as plain Python that tests can call without a browser.

Each handler returns (or yields) a dict ``{output name: value}``; outputs it leaves out stay as
they are. :mod:`mars_demo.ui.layout` turns the names into Gradio components.

Errors never escape a UI handler: they become a visible message, and the server keeps serving. The
API handler raises ``gr.Error`` instead, which ``gradio_client`` reports to the caller.

The error and warnings boxes stay "visible" and are emptied instead of hidden: with Gradio 6.17, an
update that makes a hidden component visible is not shown when the same yield skips other outputs
(``gr.skip()``). Only the results column and the download button are hidden and shown, and they are
shown only by :meth:`Controller.show`, which sets every output.

No ``from __future__ import annotations`` here: ``gr.api`` reads the API handler's type hints,
return type included, at runtime.
"""

import asyncio
import contextvars
import inspect
import json
import logging
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.errors import (
    AnalysisCancelled,
    AnalysisOutOfMemory,
    InvalidModelOutput,
    ModelLoadError,
)
from mars_demo.result import AnalysisResult
from mars_demo.settings import (
    CPU_DEFAULT_PRESET,
    GPU_DEFAULT_PRESET,
    LLM_PRESETS,
    PROMPTS,
    OptionError,
    Settings,
    clean_question,
)
from mars_demo.answers import AnswerSet
from mars_demo.ui import controls, plots, render, trust
from mars_demo.access import Access
from mars_demo.downloads import DownloadFolder
from mars_demo.ui.host import EngineHost, EngineNotReady, Progress

log = logging.getLogger(__name__)

DEFAULTS = Settings()  # default analysis options (the API's defaults too)
STREAM_INTERVAL_S = 0.05  # at most ~20 page updates per second while the answer streams
# While the analysis reports nothing (sampling, NLI) the page still gets an update (the same
# again) this often: Gradio notices a closed tab or a cancel only between two updates of a
# streaming event, and closing the handler is what stops the analysis (see Controller.ask).
HEARTBEAT_S = 0.5
DOWNLOADS_KEPT = 32  # JSON downloads kept on disk; older ones are deleted
COMMAND_LINE_MODEL = "command-line"  # the model switch's value for the LLM app.py was started with
API_PROMPTS = ("auto", *PROMPTS)  # the prompt values of the page and the API ("auto" = None)
OWN_MAX_SAMPLES = 20  # sampled answers pasted on the page
OWN_MAX_CHARS = 20_000  # all pasted answers together (or the answer-set JSON)

ASK_OUTPUTS = (
    "result",  # gr.State: the AnalysisResult shown on the page (None before the first one)
    "error",
    "progress",
    "answer",
    "results",  # the column with everything below the answer (hidden until there is a result)
    "uncertainty_table",
    "uncertainty_plot",
    "phrases",
    "samples",
    "clusters_plot",
    "nli_plot",
    "warnings",
    "download",
    "trust",  # the line under the answer: its chance of being right (mars_demo/ui/trust.py)
    "tokens",  # the token-by-token table (an accordion of the results column)
    "context",  # the prompt and settings behind the result (an accordion)
)
RESCORE_OUTPUTS = (
    "error",  # only set when rendering fails; a successful rescore leaves it as it is
    "answer",
    "uncertainty_table",
    "uncertainty_plot",
    "phrases",
    "samples",
    "clusters_plot",
    "tokens",
)
SWITCH_OUTPUTS = ("switch_status", "banner")
BANNER_OUTPUTS = ("banner", "timer")
CANCELLED_LOG = "analysis cancelled; the models are free"  # logged when a cancel stopped one

# The cancel check of the API request running in this thread (see Controller.api_endpoint).
_API_SHOULD_STOP: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "mars_api_should_stop", default=None
)


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")  # only torch itself can raise its OOM error
    return torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError)


_PATH = re.compile(r"(?<![\w.:/])(?:~|[A-Za-z]:)?[/\\](?:[^\s/\\'\"]+[/\\])+")


def hide_paths(text: str) -> str:
    """``text`` with the folders of absolute paths left out (a file or model keeps its last
    part), for the messages of a public page.

    >>> hide_paths("cannot load '/srv/models/tiny-llm' (OSError)")
    "cannot load 'tiny-llm' (OSError)"
    """
    return _PATH.sub("", text)


def error_message(exc: BaseException, public: bool = False) -> str:
    """The sentence the user sees for an exception of an analysis or a model switch; on a
    ``public`` page without the server's folders (:func:`hide_paths`)."""
    text = _error_message(exc)
    return hide_paths(text) if public else text


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, OptionError):
        return texts.ERROR_BAD_INPUT.format(error=str(exc).rstrip("."))
    if isinstance(exc, (EngineNotReady, ModelLoadError)):
        return str(exc)
    if is_out_of_memory(exc):
        return texts.ERROR_OUT_OF_MEMORY
    if isinstance(exc, (AnalysisOutOfMemory, InvalidModelOutput)):  # the message says what to do
        return str(exc)
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


def public_model_name(model: Any) -> str:
    """A model's name for a public page: a Hub id as it is, a local path by its last part.

    >>> public_model_name("/srv/models/tiny-llm/"), public_model_name("org/name")
    ('tiny-llm', 'org/name')
    """
    text = str(model)
    if text.startswith(("/", "~", ".", "\\")) or os.path.isabs(text) or os.path.exists(text):
        return os.path.basename(os.path.normpath(text)) or "local model"
    return text


#: Settings of an analysis JSON that a public page does not hand out: where the server keeps
#: its models and which server generates its answers are the host's business.
PRIVATE_SETTINGS = ("llm_endpoint", "bem", "chunker")


def for_visitors(data: dict[str, Any], public: bool) -> dict[str, Any]:
    """An analysis JSON as a page hands it out (download, API): on a ``public`` page its
    models by name only (:func:`public_model_name`) and without :data:`PRIVATE_SETTINGS`."""
    if not public:
        return data
    settings = dict(data.get("settings") or {})
    for key in ("llm", "importance", "nli"):
        if settings.get(key) is not None:
            settings[key] = public_model_name(settings[key])
    for key in PRIVATE_SETTINGS:
        settings.pop(key, None)
    return {**data, "settings": settings}


class Worker:
    """Runs ``task(progress, on_text, should_stop)`` in a daemon thread.

    ``events`` is the queue of what it reports: ("progress", (stage, fraction)) and ("text",
    partial answer) while it runs, then ("done", its return value) or ("error", the exception).
    :meth:`cancel` makes ``should_stop()`` True, so an analysis ends at its next generated token
    or stage (with ``AnalysisCancelled``) and frees the models.
    """

    def __init__(
        self,
        task: Callable[[Progress, Callable[[str], None], Callable[[], bool]], Any],
        name: str,
    ) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._work, args=(task,), name=name, daemon=True)
        self.thread.start()

    def _work(self, task: Callable[..., Any]) -> None:
        events = self.events
        try:
            value = task(
                lambda stage, fraction: events.put(("progress", (stage, fraction))),
                lambda text: events.put(("text", text)),
                self._stop.is_set,
            )
        except BaseException as exc:
            if isinstance(exc, AnalysisCancelled):
                log.info(CANCELLED_LOG)
            events.put(("error", exc))
            if not isinstance(exc, Exception):
                raise
        else:
            events.put(("done", value))

    def cancel(self) -> None:
        self._stop.set()


class DownloadStore:
    """Writes each analysis as a JSON file for the download button; keeps the latest few.

    Gradio copies a file into its own cache when it sends it, so older files can go. The folder
    is removed when the process exits, and by the next server if this one died
    (:mod:`mars_demo.downloads`).
    """

    def __init__(self, keep: int = DOWNLOADS_KEPT) -> None:
        self.folder = DownloadFolder()
        self.root = self.folder.path
        log.info("download folder: %s", self.root)
        self._dirs: deque[Path] = deque()
        self._keep = keep
        self._lock = threading.Lock()

    def write(self, result: AnalysisResult, public: bool = False) -> str:
        with self._lock:
            folder = Path(tempfile.mkdtemp(dir=self.root))
            path = folder / texts.DOWNLOAD_FILENAME
            path.write_text(json.dumps(for_visitors(result.to_dict(), public),
                                       ensure_ascii=False, indent=2), encoding="utf-8")
            self._dirs.append(folder)
            while len(self._dirs) > self._keep:
                shutil.rmtree(self._dirs.popleft(), ignore_errors=True)
            return str(path)


class Controller:
    """Event handlers of one page, over one :class:`EngineHost`."""

    def __init__(self, host: EngineHost, access: Access | None = None,
                 calibration: Any = None) -> None:
        self.host = host
        self.access = access or Access()
        self.calibration = calibration  # evaluation.calibration.Calibration, or None
        self.downloads = DownloadStore()
        self._command_line_llm = host.engine.settings.llm  # COMMAND_LINE_MODEL of the switch

    def _message(self, exc: BaseException) -> str:
        return error_message(exc, self.access.public)

    # --- settings -------------------------------------------------------------------------------

    def settings_from(self, *values: Any, names: tuple[str, ...] = controls.PAGE_OPTIONS
                      ) -> Settings:
        """The engine's settings (its models) with the request's options: ``values`` in
        ``names`` order (the page's controls, or the API's parameters). Raises OptionError."""
        options = dict(zip(names, values))
        prompt = options.get("prompt")
        if prompt is not None and prompt not in API_PROMPTS:  # Settings would list only paper, chat
            raise OptionError(f"prompt must be one of {', '.join(API_PROMPTS)}; got {prompt!r}")
        settings = self.host.engine.settings.replace(
            **{name: controls.from_page(name, value) for name, value in options.items()}
        )
        self.access.check_models(settings)
        return settings

    # --- ask ------------------------------------------------------------------------------------

    def ask(self, question: Any, scoring: str, *options: Any) -> Iterator[dict[str, Any]]:
        """Analyze ``question``: stream the greedy answer, then show the whole analysis.

        ``options`` are the settings in :meth:`settings_from` order.

        The analysis runs in a :class:`Worker` thread; this generator only relays what it
        reports, at least every :data:`HEARTBEAT_S`. When Gradio closes the generator before the
        end (the visitor closed the tab or the request was cancelled: Gradio then calls
        ``close()``, which raises ``GeneratorExit`` at the current ``yield``), the worker is told
        to stop, so the models do not stay busy for a page nobody reads.
        """
        try:
            render.check_scoring(scoring)  # a raw API call's bad value: refused before any work
            question = clean_question(question)
            settings = self.settings_from(*options)
            self.access.check_work(settings)
            self.host.check_ready()
        except (OptionError, EngineNotReady, ValueError) as exc:
            yield {
                "error": render.error_html(self._message(exc))
            }  # nothing started: keep the last result
            return

        worker = Worker(
            lambda progress, on_text, should_stop: self.host.analyze(
                question, settings, progress=progress, on_text=on_text, should_stop=should_stop
            ),
            "mars-analyze",
        )
        try:
            kind, payload = yield from self._relay(worker, question)
        finally:
            worker.cancel()  # stops the analysis when closed early; a no-op once it is done
        if kind == "error":
            yield self._failed(payload)
            return
        try:
            update = self.show(payload, scoring)
        except Exception as exc:  # a rendering bug must not escape: show it, keep serving
            update = self._failed(exc)
        yield update

    def _failed(self, exc: BaseException) -> dict[str, Any]:
        """The update of an analysis that ended with ``exc``: the message, and no stale result
        (the first update of the Ask already hid the last one)."""
        return {
            "error": render.error_html(self._message(exc)),
            "progress": "",
            "answer": render.placeholder_html(),
            "warnings": "",
            "trust": "",
        }

    @staticmethod
    def _relay(worker: Worker, question: str) -> Generator[dict[str, Any], None, tuple[str, Any]]:
        """Yield the page updates of a running analysis; return its ("done", result) or
        ("error", exception)."""
        yield {
            "result": None,
            "error": "",
            "warnings": "",  # the last question's warnings must not stay beside this one
            "progress": render.progress_html(render.StageProgress()),
            "answer": render.streaming_html(question, ""),
            "results": gr.update(visible=False),
            "download": gr.update(value=None, visible=False),
            "trust": "",
        }
        partial, progress = "", render.StageProgress()
        while True:
            try:
                batch = [worker.events.get(timeout=HEARTBEAT_S)]
            except queue.Empty:
                batch = []  # nothing new: send the same again (a cancelled event can close now)
            else:
                time.sleep(STREAM_INTERVAL_S)
            while True:
                try:
                    batch.append(worker.events.get_nowait())
                except queue.Empty:
                    break
            for kind, payload in batch:
                if kind == "text":
                    partial = payload
                elif kind == "progress":
                    progress = render.StageProgress(*payload)
                else:
                    return kind, payload
            yield {
                "answer": render.streaming_html(question, partial),
                "progress": render.progress_html(progress),
            }

    def show(self, result: AnalysisResult, scoring: str) -> dict[str, Any]:
        """Every output for a finished analysis. Raises what a renderer raises (see :meth:`ask`);
        a download that cannot be written only hides the button and says so."""
        update = {
            "result": result,
            "error": "",
            "progress": render.progress_html(timings_s=result.timings_s),
            "results": gr.update(visible=True),
            "nli_plot": plots.nli_figure(result),
            "warnings": render.warnings_html(result.warnings),
            "context": render.context_html(result),
            **self._rendered(result, scoring),
            "trust": self.trust_html(result),
        }
        try:
            update["download"] = gr.update(value=self.downloads.write(result, self.access.public),
                                       visible=True)
        except Exception as exc:  # e.g. a full disk: the analysis is still worth showing
            log.error("writing the JSON download failed", exc_info=exc)
            update["download"] = gr.update(value=None, visible=False)
            update["error"] = render.error_html(
                texts.ERROR_DOWNLOAD.format(error=f"{type(exc).__name__}: {exc}")
            )
        return update

    def trust_html(self, result: AnalysisResult) -> str:
        """The line under the answer (:func:`mars_demo.ui.trust.trust_html`)."""
        return trust.trust_html(result, self.calibration, public=self.access.public)

    def with_calibration(self, data: dict[str, Any], result: AnalysisResult) -> dict[str, Any]:
        """The API's analysis JSON (:func:`for_visitors`), with a ``calibration`` field when
        the server has one."""
        data = for_visitors(data, self.access.public)
        if self.calibration is not None:
            data["calibration"] = trust.calibration_estimate(result, self.calibration)
            if self.access.public:
                estimate = data["calibration"]
                if estimate.get("reason"):
                    estimate["reason"] = trust.public_reason(estimate)
                if isinstance(estimate.get("models"), dict):
                    estimate["models"] = {k: public_model_name(v) if v is not None else v
                                          for k, v in estimate["models"].items()}
                if isinstance(estimate.get("source"), str):
                    estimate["source"] = hide_paths(estimate["source"])
        return data

    # --- scoring toggle -------------------------------------------------------------------------

    def rescore(self, result: AnalysisResult | None, scoring: str) -> dict[str, Any]:
        """Re-render what depends on the scoring from the stored result (nothing is recomputed).

        Runs on the toggle and once more after every Ask (with the toggle's value then, which the
        visitor may have flipped while the answer streamed). A rendering error becomes a message.
        """
        if result is None:
            return {}
        try:
            return self._rendered(result, scoring)
        except Exception as exc:
            return {"error": render.error_html(self._message(exc))}

    @staticmethod
    def _rendered(result: AnalysisResult, scoring: str) -> dict[str, Any]:
        return {
            "answer": render.answer_html(result, scoring),
            "uncertainty_table": render.uncertainty_table_html(result, scoring),
            "uncertainty_plot": plots.uncertainty_figure(result, scoring),
            "phrases": render.phrase_table_html(result.greedy, scoring, result.settings),
            "samples": render.samples_table_html(result, scoring),
            "clusters_plot": plots.clusters_figure(result, scoring),
            "tokens": render.token_table_html(result.greedy, scoring),
        }

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
            again = self.host.score(result, settings, reuse=result)
        except Exception as exc:
            return {"error": render.error_html(self._message(exc))}
        try:
            update = self.show(again, scoring)
        except Exception as exc:
            return self._failed(exc)
        note = texts.RESCORED_NOTE.format(
            changes=", ".join(f"{k.replace('_', ' ')} {v}" for k, v in changed.items()))
        update["progress"] = self._note(note)
        return update

    # --- score your own answers --------------------------------------------------------------

    @staticmethod
    def own_answer_set(question: Any, greedy: Any, samples: Any, answer_json: Any) -> AnswerSet:
        """The answer set a visitor pasted: the JSON box if filled, else the question and the
        answer boxes (one sample per line). Raises OptionError with what to fix."""
        if isinstance(answer_json, str) and answer_json.strip():
            if len(answer_json) > OWN_MAX_CHARS:
                raise OptionError(texts.OWN_TOO_LONG.format(size=len(answer_json),
                                                            limit=OWN_MAX_CHARS))
            try:
                data = json.loads(answer_json)
            except (json.JSONDecodeError, RecursionError) as err:
                raise OptionError(texts.OWN_BAD_JSON.format(error=str(err)[:120])) from err
            if isinstance(data, dict) and not data.get("question") and isinstance(question, str):
                data["question"] = question
            answers = AnswerSet.from_dict(data)
        else:
            greedy = greedy if isinstance(greedy, str) else ""
            samples = samples if isinstance(samples, str) else ""
            size = len(greedy) + len(samples)
            if size > OWN_MAX_CHARS:
                raise OptionError(texts.OWN_TOO_LONG.format(size=size, limit=OWN_MAX_CHARS))
            lines = [line.strip() for line in samples.splitlines() if line.strip()]
            if not greedy.strip():
                raise OptionError(texts.OWN_NO_GREEDY)
            if not lines:
                raise OptionError(texts.OWN_NO_SAMPLES)
            answers = AnswerSet.from_dict(
                {"question": question, "greedy": greedy.strip(), "samples": lines})
        if len(answers.samples) > OWN_MAX_SAMPLES:
            raise OptionError(texts.OWN_TOO_MANY.format(limit=OWN_MAX_SAMPLES,
                                                        count=len(answers.samples)))
        answers.question = clean_question(answers.question)
        return answers

    def score_own(self, question: Any, greedy: Any, samples: Any, answer_json: Any,
                  scoring: str, *options: Any) -> Iterator[dict[str, Any]]:
        """Score pasted answers and show them like a generated analysis."""
        try:
            render.check_scoring(scoring)
            answers = self.own_answer_set(question, greedy, samples, answer_json)
            settings = self.settings_from(*options)
            self.host.check_ready()
        except (OptionError, EngineNotReady, ValueError) as exc:
            yield {"error": render.error_html(self._message(exc))}
            return
        worker = Worker(
            lambda progress, _text, should_stop: self.host.score(
                answers, settings, progress=progress, should_stop=should_stop),
            "mars-score",
        )
        try:
            kind, payload = yield from self._relay(worker, answers.question)
        finally:
            worker.cancel()
        if kind == "error":
            yield self._failed(payload)
            return
        try:
            update = self.show(payload, scoring)
        except Exception as exc:
            update = self._failed(exc)
        yield update

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
            yield {"switch_status": render.error_html(self._message(exc))}
            return
        name = LLM_PRESETS[model].label if model in LLM_PRESETS else model
        events = Worker(
            lambda progress, _text, _stop: self.host.switch(settings, progress=progress),
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
                    "switch_status": render.error_html(self._message(payload)),
                    "banner": self.banner_html(),
                }
                return
            elif kind == "done":
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
        status = self.host.status()
        info = self.host.describe()
        lines: list[tuple[str, str]] = []
        if status.state == "loading":
            message = (
                texts.BANNER_LOADING.format(stage=status.stage, percent=status.percent)
                if status.stage
                else texts.BANNER_LOADING_START
            )
            lines.append(("warn", render.esc(message)))
        elif status.state == "failed":
            lines.append(("error", render.esc(texts.BANNER_LOAD_FAILED.format(error=status.error))))
        lines.append(("info", self._models_line(info, public=self.access.public)))
        if info.get("cpu_fallback"):
            lines.append(("warn", render.esc(texts.BANNER_CPU_FALLBACK)))
        return render.banner_html(lines)

    @staticmethod
    def _models_line(info: dict[str, Any], public: bool = False) -> str:
        """The models and device. A public page names a local model by its folder's name only:
        the server's paths are nobody else's business."""
        shown = public_model_name if public else str
        llm = info.get("llm_preset") or shown(info["llm"])
        return texts.BANNER_MODELS.format(
            llm=render.esc(llm),
            importance=render.esc(shown(info["importance"])),
            nli=render.esc(shown(info["nli"])),
            device=render.esc(info["device"]),
            quant=texts.BANNER_4BIT if info.get("load_in_4bit") else "",
        )

    def banner(self) -> dict[str, Any]:
        """The banner, and whether to keep polling it (while the models load)."""
        loading = self.host.status().state == "loading"
        return {"banner": self.banner_html(), "timer": gr.Timer(active=loading)}

    # --- API ------------------------------------------------------------------------------------

    def api_analyze(self, question: str, **options: Any) -> dict[str, Any]:
        """Analyze one question (see texts.API_ANALYZE_DOC); ``options`` are the API's
        parameters (:data:`controls.API_OPTIONS`). Errors become ``gr.Error``."""
        try:
            question = clean_question(question)
            settings = self._api_settings(options)
            self.access.check_work(settings)
            result = self.host.analyze(question, settings, should_stop=_API_SHOULD_STOP.get())
        except Exception as exc:
            raise self._api_error(exc) from exc
        return self.with_calibration(result.to_dict(), result)

    def api_score(self, answers: Any, **options: Any) -> dict[str, Any]:
        """Score an answer set (see texts.API_SCORE_DOC). Errors become ``gr.Error``."""
        try:
            # the page's limits (size, samples, question) for a JSON object too
            text = answers if isinstance(answers, str) else json.dumps(answers)
            answers = self.own_answer_set(None, None, None, text)
            settings = self._api_settings(options)
            result = self.host.score(answers, settings, should_stop=_API_SHOULD_STOP.get())
        except Exception as exc:
            raise self._api_error(exc) from exc
        return self.with_calibration(result.to_dict(), result)

    def _api_settings(self, options: dict[str, Any]) -> Settings:
        unknown = sorted(set(options) - set(controls.API_OPTIONS))
        if unknown:
            raise OptionError(f"unknown parameter(s) {', '.join(unknown)}")
        return self.settings_from(*options.values(), names=tuple(options))

    def _api_error(self, exc: BaseException) -> gr.Error:
        if isinstance(exc, AnalysisCancelled):
            log.info(CANCELLED_LOG)
        return gr.Error(self._message(exc))

    def api_endpoint(self, name: str = "analyze") -> Callable[..., Any]:
        """The API function ``gr.api`` serves: :meth:`api_analyze` (``name`` "analyze") or
        :meth:`api_score` ("score") with every parameter of the schema in its signature, type
        hints and docstring, as a coroutine.

        The work runs in a thread. When the request is cancelled (``Job.cancel()`` of
        ``gradio_client``, Gradio's ``/cancel``), Gradio cancels this coroutine's task; the
        analysis is then told to stop at its next generated token or stage, so the models are
        free for the next request at once instead of finishing an answer nobody will read.
        """
        work = {"analyze": self.api_analyze, "score": self.api_score}[name]
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
        if self.calibration is not None:
            doc += texts.API_CALIBRATION_DOC
        return controls.with_api_signature(endpoint, [first], doc)
