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
import functools
import json
import logging
import queue
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
from mars_demo.models import ModelLoadError
from mars_demo.models.llm import InvalidModelOutput
from mars_demo.pipeline import AnalysisCancelled, AnalysisOutOfMemory
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
from mars_demo.ui import plots, render
from mars_demo.ui.host import EngineHost, EngineNotReady, Progress

log = logging.getLogger(__name__)

DEFAULTS = Settings()  # default analysis options (the API's defaults too)
STREAM_INTERVAL_S = 0.05  # at most ~20 page updates per second while the answer streams
# While the analysis reports nothing (sampling, NLI) the page still gets an update (the same
# again) this often: Gradio notices a closed tab or a cancel only between two updates of a
# streaming event, and closing the handler is what stops the analysis (see Controller.ask).
HEARTBEAT_S = 0.5
DOWNLOADS_KEPT = 32  # JSON downloads kept on disk; older ones are deleted
API_PROMPTS = ("auto", *PROMPTS)  # the prompt values of the page and the API ("auto" = None)

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
)
RESCORE_OUTPUTS = (
    "error",  # only set when rendering fails; a successful rescore leaves it as it is
    "answer",
    "uncertainty_table",
    "uncertainty_plot",
    "phrases",
    "samples",
    "clusters_plot",
)
SWITCH_OUTPUTS = ("switch_status", "banner")
BANNER_OUTPUTS = ("banner", "timer")
CANCELLED_LOG = "analysis cancelled; the models are free"  # logged when a cancel stopped one

# The cancel check of the API request running in this thread (see Controller.api_endpoint).
_API_SHOULD_STOP: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "mars_api_should_stop", default=None
)


def as_int(value: Any) -> Any:
    """Numbers from sliders and the API may arrive as 5.0; Settings wants integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")  # only torch itself can raise its OOM error
    return torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError)


def error_message(exc: BaseException) -> str:
    """The sentence the user sees for an exception of an analysis or a model switch."""
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
        choices.append((texts.MODEL_CUSTOM.format(model=current), current))
    return choices, current


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
    is removed when the process exits.
    """

    def __init__(self, keep: int = DOWNLOADS_KEPT) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="mars-demo-downloads-")
        self.root = Path(self._tmp.name)
        self._dirs: deque[Path] = deque()
        self._keep = keep
        self._lock = threading.Lock()

    def write(self, result: AnalysisResult) -> str:
        with self._lock:
            folder = Path(tempfile.mkdtemp(dir=self.root))
            path = folder / texts.DOWNLOAD_FILENAME
            path.write_text(
                json.dumps(result.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
            )
            self._dirs.append(folder)
            while len(self._dirs) > self._keep:
                shutil.rmtree(self._dirs.popleft(), ignore_errors=True)
            return str(path)


class Controller:
    """Event handlers of one page, over one :class:`EngineHost`."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host
        self.downloads = DownloadStore()

    # --- settings -------------------------------------------------------------------------------

    def settings_from(
        self,
        samples: Any,
        temperature: Any,
        max_new_tokens: Any,
        seed: Any,
        prompt: Any,
        importance_method: Any,
        normalization: Any,
        distribution: Any,
        cluster_rule: Any,
    ) -> Settings:
        """The engine's settings (its models) with the page's analysis options. Raises OptionError."""
        if prompt is not None and prompt not in API_PROMPTS:  # Settings would list only paper, chat
            raise OptionError(f"prompt must be one of {', '.join(API_PROMPTS)}; got {prompt!r}")
        return self.host.engine.settings.replace(
            samples=as_int(samples),
            temperature=temperature,
            max_new_tokens=as_int(max_new_tokens),
            seed=as_int(seed),
            prompt=None if prompt in (None, "auto") else prompt,
            importance_method=importance_method,
            normalization=normalization,
            distribution=distribution,
            cluster_rule=cluster_rule,
        )

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
            question = clean_question(question)
            settings = self.settings_from(*options)
            self.host.check_ready()
        except (OptionError, EngineNotReady) as exc:
            yield {
                "error": render.error_html(error_message(exc))
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

    @staticmethod
    def _failed(exc: BaseException) -> dict[str, Any]:
        """The update of an analysis that ended with ``exc``: the message, and no stale result
        (the first update of the Ask already hid the last one)."""
        return {
            "error": render.error_html(error_message(exc)),
            "progress": "",
            "answer": render.placeholder_html(),
            "warnings": "",
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
            **self._rendered(result, scoring),
        }
        try:
            update["download"] = gr.update(value=self.downloads.write(result), visible=True)
        except Exception as exc:  # e.g. a full disk: the analysis is still worth showing
            log.error("writing the JSON download failed", exc_info=exc)
            update["download"] = gr.update(value=None, visible=False)
            update["error"] = render.error_html(
                texts.ERROR_DOWNLOAD.format(error=f"{type(exc).__name__}: {exc}")
            )
        return update

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
            return {"error": render.error_html(error_message(exc))}

    @staticmethod
    def _rendered(result: AnalysisResult, scoring: str) -> dict[str, Any]:
        return {
            "answer": render.answer_html(result, scoring),
            "uncertainty_table": render.uncertainty_table_html(result, scoring),
            "uncertainty_plot": plots.uncertainty_figure(result, scoring),
            "phrases": render.phrase_table_html(result.greedy, scoring),
            "samples": render.samples_table_html(result, scoring),
            "clusters_plot": plots.clusters_figure(result, scoring),
        }

    # --- models ---------------------------------------------------------------------------------

    def model_choices(self) -> tuple[list[tuple[str, str]], str]:
        return model_choices(self.host.engine.settings, self.host.describe()["device"] == "cuda")

    def switch_model(self, model: str) -> Iterator[dict[str, Any]]:
        """Free the current LLM and load ``model`` (a preset name, Hub id or directory)."""
        try:
            settings = self.host.engine.settings.replace(llm=model)
        except OptionError as exc:
            yield {"switch_status": render.error_html(error_message(exc))}
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
                    "switch_status": render.error_html(error_message(payload)),
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
        lines.append(("info", self._models_line(info)))
        if info.get("cpu_fallback"):
            lines.append(("warn", render.esc(texts.BANNER_CPU_FALLBACK)))
        return render.banner_html(lines)

    @staticmethod
    def _models_line(info: dict[str, Any]) -> str:
        llm = info.get("llm_preset") or info["llm"]
        return texts.BANNER_MODELS.format(
            llm=render.esc(llm),
            importance=render.esc(info["importance"]),
            nli=render.esc(info["nli"]),
            device=render.esc(info["device"]),
            quant=texts.BANNER_4BIT if info.get("load_in_4bit") else "",
        )

    def banner(self) -> dict[str, Any]:
        """The banner, and whether to keep polling it (while the models load)."""
        loading = self.host.status().state == "loading"
        return {"banner": self.banner_html(), "timer": gr.Timer(active=loading)}

    # --- API ------------------------------------------------------------------------------------

    def api_analyze(
        self,
        question: str,
        samples: int = DEFAULTS.samples,
        temperature: float = DEFAULTS.temperature,
        max_new_tokens: int = DEFAULTS.max_new_tokens,
        seed: int = DEFAULTS.seed,
        prompt: str = "auto",
        importance_method: str = DEFAULTS.importance_method,
        normalization: str = DEFAULTS.normalization,
        distribution: str = DEFAULTS.distribution,
        cluster_rule: str = DEFAULTS.cluster_rule,
    ) -> dict[str, Any]:
        """Analyze one question with MARS and return the whole analysis as JSON.

        The result has the fields of mars_demo.result.AnalysisResult.to_dict(): question, prompt,
        prompt_token_ids, greedy, samples, nli, cluster_ids, uncertainty, settings, timings_s,
        warnings, schema_version. Uncertainty values: higher = less trustworthy.

        Parameters:
            question: the question, at most 1000 characters
            samples: number of sampled answers, 1 to 20
            temperature: sampling temperature of the samples, 0.05 to 2.0
            max_new_tokens: token limit per answer, 1 to 512
            seed: random seed, 0 to 2**32 - 1
            prompt: "auto", "paper" (few-shot) or "chat" (chat template)
            importance_method: "model", "token" or "bem"
            normalization: "sum" or "softmax"
            distribution: "equal", "max" or "min"
            cluster_rule: "strict" or "lenient"
        """
        try:
            question = clean_question(question)
            settings = self.settings_from(
                samples,
                temperature,
                max_new_tokens,
                seed,
                prompt,
                importance_method,
                normalization,
                distribution,
                cluster_rule,
            )
            result = self.host.analyze(question, settings, should_stop=_API_SHOULD_STOP.get())
        except Exception as exc:
            if isinstance(exc, AnalysisCancelled):
                log.info(CANCELLED_LOG)
            raise gr.Error(error_message(exc)) from exc
        return result.to_dict()

    def api_endpoint(self) -> Callable[..., Any]:
        """:meth:`api_analyze` as the coroutine that ``gr.api`` serves (same parameters, types
        and docstring).

        The analysis runs in a thread. When the request is cancelled (``Job.cancel()`` of
        ``gradio_client``, Gradio's ``/cancel``), Gradio cancels this coroutine's task; the
        analysis is then told to stop at its next generated token or stage, so the models are
        free for the next request at once instead of finishing an answer nobody will read.
        """
        analyze = self.api_analyze

        @functools.wraps(analyze)
        async def endpoint(*args: Any, **kwargs: Any) -> dict[str, Any]:
            stop = threading.Event()
            token = _API_SHOULD_STOP.set(stop.is_set)  # asyncio.to_thread copies the context
            try:
                return await asyncio.to_thread(analyze, *args, **kwargs)
            except asyncio.CancelledError:
                stop.set()
                raise
            finally:
                _API_SHOULD_STOP.reset(token)

        return endpoint
