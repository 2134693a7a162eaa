"""The analysis of one question in two halves: generate the answers, then score them.

>>> from mars_demo import analyze, score                           # doctest: +SKIP
>>> result = analyze("Which planet is known as the Red Planet?")   # doctest: +SKIP
>>> result.uncertainty.confidence.mars                             # doctest: +SKIP
>>> score(result.to_dict(), normalization="softmax")               # doctest: +SKIP

:meth:`Engine.generate` is the LLM's part (:mod:`.generation`): one greedy answer and N samples
with their token log-probs, read from the logits of generation (no extra LLM pass).
:meth:`Engine.score` is everything after it (:mod:`.stages`), for answers from anywhere (this
engine, an OpenAI-compatible server, a file): the importance model scores all answers in one
batched pass, the NLI model judges all needed ordered pairs in one batched pass, then clusters
and the six uncertainties. Models come from :mod:`mars_demo.models.registry`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from typing import Any, Callable

from ..answers import AnswerSet, WorkCap
from ..options import GIVEN_MODELS, MODEL_FIELDS, REQUEST_FIELDS, SCORING_FIELDS, documented
from ..errors import (
    AnalysisCancelled,
    AnalysisOutOfMemory,
    GenerationCancelled,
    ModelLoadError,
    is_out_of_memory,
)
from ..models import backends, given, registry
from ..models.registry import Models
from ..progress import Progress
from ..progress import quiet as _quiet
from ..recipes import Resolved, resolve
from ..result import AnalysisResult
from ..settings import Settings, check_names, clean_question, for_answers, resolve_nli
from . import generation, job, stages
from .door import as_answer_set, at_door, door, saved_analysis

# One analysis at a time per process: the models are shared, and two requests must never
# interleave inside one model call. analyze() holds it across generate and score.
_RUN_LOCK = threading.Lock()


class Engine:
    """Loaded models plus :meth:`generate`, :meth:`score` and :meth:`analyze` (both).

    Models are loaded once and shared (cached by id). Every method takes a
    :class:`~mars_demo.settings.Settings` (default: the engine's) and loads only what it needs:
    :meth:`score` of answers that carry their log-probs never loads the LLM. Errors: ``OptionError``
    for bad input, ``ModelLoadError`` when a model cannot be loaded, ``AnalysisOutOfMemory``
    when memory runs out, ``AnalysisCancelled`` once ``should_stop()`` is True (asked before each
    stage and after every generated token), all in :mod:`mars_demo.errors`.
    """

    @documented(MODEL_FIELDS + REQUEST_FIELDS)
    def __init__(self, settings: Settings | None = None, *, calibration: Any = None,
                 reference: Any = None, **options: Any) -> None:
        """An engine with ``settings`` (default: the defaults), changed by ``options``; no
        model is loaded yet.

        Args:
            settings: the models and options (default: the defaults).
            calibration: a calibration (:func:`mars_demo.evaluation.calibration.load`) whose
                chance of being right every verdict gives where it covers the answer.
            reference: an evaluation run's values
                (:func:`mars_demo.evaluation.reference.load_run`) whose record at each verdict
                level every verdict says.

        Keyword Args:
            **options: the options of mars_demo.options (one line each below).
        """
        changes = _given(options)
        self.settings = (settings or Settings()).replace(**changes) if changes else (
            settings or Settings())
        #: what every verdict may cite beyond its analysis (mars_demo.verdict.verdict)
        self.calibration = calibration
        self.reference = reference
        self._models: Models | None = None
        self._load_lock = threading.Lock()

    # ---- models --------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._models is not None

    @property
    def models(self) -> Models | None:
        """The models of :meth:`load` (None before it): ``models.llm``, ``.importance``,
        ``.nli``."""
        return self._models

    @property
    def busy(self) -> bool:
        """Whether an analysis runs in this process now (one at a time, on any engine)."""
        return _RUN_LOCK.locked()

    def describe(self) -> dict[str, Any]:
        """What the page's banner says of the models: the device, the LLM as its backend
        describes it (``llm``, ``llm_preset``, ``cpu_fallback``, ``load_in_4bit``; the backend
        itself as ``llm_backend``), the importance and NLI models, and whether they are loaded."""
        cuda = registry.cuda_available()
        s = self.settings
        backend = backends.backend_for(s)
        loaded = self._models.llm if self._models is not None else None
        return {"device": "cuda" if cuda else "cpu", **backend.describe(s, cuda, loaded),
                "llm_backend": backend.name, "importance": s.importance,
                "nli": resolve_nli(s.nli, cuda), "ready": self.ready}

    def load(self, progress: Progress | None = None, settings: Settings | None = None) -> None:
        """Load (or fetch from the cache) every model the settings name; they become the
        engine's settings."""
        with self._load_lock:
            settings = settings or self.settings
            registry.check_available(settings, ("llm", "importance", "nli"))
            self._models = registry.load_all(settings, progress or _quiet)
            self.settings = settings

    def switch(self, settings: Settings, progress: Progress | None = None) -> None:
        """Use other models: free the ones no longer needed *before* loading the new ones.

        Models that the new settings name too (say the importance and NLI models when only the
        LLM changes) stay loaded. If the new models fail to load, the engine has none (the
        error says why) until a later :meth:`load` or :meth:`switch` succeeds.
        """
        with _RUN_LOCK, self._load_lock:
            self._models = None
            try:
                keep = registry.cache_keys(settings)
            except ModelLoadError:
                keep = set()  # the new models cannot load anyway: free everything
            registry.release(keep)
            self.settings = settings
            registry.check_available(settings, ("llm", "importance", "nli"))
            self._models = registry.load_all(settings, progress or _quiet)

    def _check(self, s: Settings, which: list[str]) -> None:
        """Every model of ``which`` that ``s`` names is here or downloadable, or one error
        names all that are not (:func:`~mars_demo.models.registry.check_available`); the
        engine's own loaded models count as here."""
        if self._models is not None:
            which = [w for w in which if w not in ("llm", "importance", "nli")
                     or not registry.same_models(s, self.settings, w)]
        registry.check_available(s, which)

    def _model(self, which: str, s: Settings, progress: Progress) -> Any:
        return registry.model_for(which, s, progress, self._models, self.settings)

    # ---- analysis ------------------------------------------------------------------------
    def analyze(self, question: str | None = None, settings: Settings | None = None, *,
                messages: list[dict[str, str]] | None = None,
                progress: Progress | None = None,
                on_text: Callable[[str], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                **options: Any) -> AnalysisResult:
        """Generate the answers, then score them: :meth:`generate`, then :meth:`score`
        (``question`` or ``messages``, ``on_text`` and ``options`` as there)."""
        question, messages = door(question, messages)
        run = resolve(self._settings(settings, options))
        progress = progress or _quiet
        with _RUN_LOCK, _guarded():
            self._check(run.settings, registry.analysis_models(run.settings))
            answers = generation.generate_one(
                lambda: self._model("llm", run.settings, progress), question, run, progress,
                _checker(should_stop), on_text, should_stop, messages)
            return self._score([answers], run, progress, should_stop, [None])[0]

    def generate(self, question: str | None = None, settings: Settings | None = None, *,
                 messages: list[dict[str, str]] | None = None,
                 progress: Progress | None = None,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 **options: Any) -> AnswerSet:
        """The greedy answer and the samples, with their token log-probs: the LLM's part only.

        The question is ``question``, or the last of chat ``messages`` (role/content dicts: a
        system prompt and earlier turns before it, kept in the answer set and the analysis);
        either is cleaned here, once (:func:`~mars_demo.engine.door.door`). ``on_text``
        receives the greedy answer's text as it grows; ``options`` change ``settings`` for this
        call (the options of :mod:`mars_demo.options`; an unknown one raises ``OptionError``)."""
        question, messages = door(question, messages)
        run = resolve(self._settings(settings, options))
        progress = progress or _quiet
        with _RUN_LOCK, _guarded():
            self._check(run.settings, ["llm"])
            return generation.generate_one(
                lambda: self._model("llm", run.settings, progress), question, run, progress,
                _checker(should_stop), on_text, should_stop, messages)

    def _settings(self, settings: Settings | None, options: dict[str, Any]) -> Settings:
        """``settings`` (default: the engine's) changed by a call's ``options``, checked by
        name (``OptionError`` naming an unknown one)."""
        changes = _given(options)
        base = settings or self.settings
        return base.replace(**changes) if changes else base

    def score(self, answers: "AnswerSet | AnalysisResult | dict[str, Any]",
              settings: Settings | None = None, *, progress: Progress | None = None,
              should_stop: Callable[[], bool] | None = None,
              reuse: AnalysisResult | None = None, cap: WorkCap | None = None,
              **options: Any) -> AnalysisResult:
        """Everything after generation: importance, alignment, NLI, clustering, the six
        uncertainties, warnings and timings.

        ``answers`` is an :class:`~mars_demo.answers.AnswerSet`, its JSON form, or an earlier
        :class:`AnalysisResult` or its JSON (re-scored with other options). No LLM is loaded
        unless an answer comes without log-probs: those are computed by a teacher-forced pass of
        the settings' LLM, and the result says so; or a method that needs an extra LLM pass
        (``p_true``) is asked for and ``reuse`` does not already hold it. ``reuse``: an
        earlier result of the same answers whose NLI verdicts are taken as they are (same NLI
        model, same answers), so a re-score with another normalization, distribution or
        cluster rule costs no NLI pass (and whose P(True) pass is reused likewise); None: the
        analysis given as ``answers`` itself, if it is one. To judge a saved analysis' answers
        afresh, give its answers alone (:meth:`AnalysisResult.answer_set`).
        A bad answer set raises :class:`~mars_demo.errors.AnswerSetError` (a ``ValueError``)
        naming the answer and token at fault. ``cap``: the most a teacher-forced pass may cost,
        checked in the LLM's tokens before it runs (a public page's; ``OptionError`` saying
        which limit and by how much). ``options`` change ``settings`` for this call.
        """
        answer_set = at_door(as_answer_set(answers))
        run = resolve(self._settings(settings, options))
        reuse = saved_analysis(answers) if reuse is None else reuse
        with _RUN_LOCK, _guarded():
            return self._score([answer_set], run, progress or _quiet, should_stop, [reuse],
                               cap)[0]

    def generate_many(self, questions: list[str], settings: Settings | None = None, *,
                      progress: Progress | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      **options: Any) -> list[AnswerSet]:
        """:meth:`generate` for several questions at once, one :class:`AnswerSet` each.

        In-process, all questions' greedy answers and samples come from ONE batched
        ``generate`` call (:meth:`LLM.generate_many <mars_demo.models.llm.LLM.generate_many>`:
        left-padded prompts, row 0 of each question's block greedy). Each greedy answer is the
        one :meth:`generate` gives (up to float rounding); the samples are reproducible for the
        same seed, settings and batch, but may differ from those of another batch size, since
        the random draws are shared by the batch. With ``llm_endpoint`` the questions'
        requests are sent concurrently (bounded), so the server (vLLM) batches them. Nothing
        streams. The batch's generation seconds are shared equally in each ``timings_s``.
        A bad question raises ``OptionError`` before any work.
        """
        run = resolve(self._settings(settings, options))
        cleaned = [clean_question(q) for q in questions]
        if not cleaned:
            return []
        progress = progress or _quiet
        with _RUN_LOCK, _guarded():
            self._check(run.settings, ["llm"])
            return generation.generate_many(
                lambda: self._model("llm", run.settings, progress), cleaned, run, progress,
                _checker(should_stop), should_stop)

    def score_many(self, answer_sets: "list[AnswerSet | AnalysisResult | dict[str, Any]]",
                   settings: Settings | None = None, *, progress: Progress | None = None,
                   should_stop: Callable[[], bool] | None = None,
                   **options: Any) -> list[AnalysisResult]:
        """:meth:`score` for several answer sets at once, one :class:`AnalysisResult` each,
        equal to one :meth:`score` per answer set (up to float rounding).

        The importance model scores all questions' answers in one batched pass (each answer
        paired with its own question; the ``bem`` method runs one question after another, with
        the same results), the NLI model judges all questions' needed pairs in one batched
        ``verdicts`` call (the recipe's input format as in :meth:`score`); alignment, clustering
        and the uncertainties are per question. A batch's stage seconds are shared equally in
        each result's ``timings_s``. A bad answer set raises
        :class:`~mars_demo.errors.AnswerSetError` before any model runs. A saved analysis among
        them reuses what it holds, as in :meth:`score`.
        """
        sets = [at_door(as_answer_set(a)) for a in answer_sets]
        run = resolve(self._settings(settings, options))
        if not sets:
            return []
        reuses = [saved_analysis(a) for a in answer_sets]
        with _RUN_LOCK, _guarded():
            return self._score(sets, run, progress or _quiet, should_stop, reuses)

    def rescore(self, result: AnalysisResult, settings: Settings | None = None,
                **changes: Any) -> AnalysisResult:
        """``result``'s answers scored again with other scoring options (``changes``: e.g.
        ``normalization="softmax"``; an unknown name raises ``OptionError``); the LLM is not
        called and NLI verdicts are reused. The verdict is computed again with the rest."""
        return self.score(result, self._settings(settings, changes), reuse=result)

    def _score(self, answer_sets: list[AnswerSet], run: Resolved, progress: Progress,
               should_stop, reuses: list[AnalysisResult | None],
               cap: WorkCap | None = None) -> list[AnalysisResult]:
        """The scoring stages over the answer sets (one job each); see :mod:`.stages`."""
        check, s = _checker(should_stop), run.settings
        planned = stages.plan(job.RESULT_NEEDS)
        drafts = [job.ScoringJob(a, a.question, r, a.logprob_source)
                  for a, r in zip(answer_sets, reuses)]
        self._check(s, (["llm"] if any(a.missing_logprobs for a in answer_sets) else [])
                    + stages.models_needed(planned, drafts, run))
        jobs = job.prepare(answer_sets, reuses, run, lambda: self._model("llm", s, progress),
                           progress, check, cap)
        check()
        t = time.perf_counter()
        loaded = {name: self._model(name, s, progress)
                  for name in stages.models_needed(planned, jobs, run)}
        load_s = (time.perf_counter() - t) / len(jobs)
        if load_s * len(jobs) > generation.LOAD_SHOWN_S:
            for j in jobs:
                j.timings["load"] = j.timings.get("load", 0.0) + load_s
        base = {k: v for k, v in loaded.items() if k in stages.BASE}
        optional = {k: v for k, v in loaded.items() if k not in stages.BASE}
        stages.run(planned, jobs, stages.ScoringContext(run, **base, optional=optional),
                   progress, check)
        toys = [job.mark_toys(j, loaded) for j in jobs]
        results = [job.to_result(j, run, self.calibration, self.reference) for j in jobs]
        for result, roles in zip(results, toys):
            if roles:  # what the warnings say, for a re-score (the LLM's) and for readers
                result.settings["toy_models"] = roles
        return results


def _checker(should_stop: Callable[[], bool] | None) -> Callable[[], None]:
    """A function that raises :class:`AnalysisCancelled` once ``should_stop()`` is True."""

    def check() -> None:
        if should_stop is not None and should_stop():
            raise AnalysisCancelled("the analysis was cancelled")

    return check


@contextlib.contextmanager
def _guarded():
    """Turn a cancelled generation into :class:`AnalysisCancelled` and running out of memory
    into :class:`AnalysisOutOfMemory` (after releasing the memory)."""
    try:
        yield
    except GenerationCancelled as err:
        raise AnalysisCancelled("the analysis was cancelled") from err
    except ModelLoadError:
        raise  # already says what to do (a load that ran out of memory included)
    except (MemoryError, RuntimeError) as err:
        if not is_out_of_memory(err):
            raise
        # The failing frames' locals (activations, logits) would keep the memory alive for as
        # long as the exception lives: drop them before emptying the caches.
        traceback.clear_frames(err.__traceback__)
        registry.free_memory()
        raise AnalysisOutOfMemory(
            "Ran out of memory during the analysis; memory was released. Try fewer samples or "
            f"fewer max new tokens. ({type(err).__name__})"
        ) from err


#: the keywords of :func:`score`: which models, and how answers are scored
SCORE_OPTIONS = MODEL_FIELDS + SCORING_FIELDS + ("prompt",)


@documented(MODEL_FIELDS + REQUEST_FIELDS)
def analyze(question: str | None = None, *, messages: list[dict[str, str]] | None = None,
            progress: Progress | None = None,
            on_text: Callable[[str], None] | None = None,
            should_stop: Callable[[], bool] | None = None, calibration: Any = None,
            **options: Any) -> AnalysisResult:
    """Analyze one question: generate the greedy answer and the samples, then score them
    (:meth:`Engine.analyze` of an engine made from ``options``).

    Models are loaded on the first call and cached for later ones (a model given as a loaded
    ``(model, tokenizer)`` pair is used as it is).

    Args:
        question: the question, at most 1,000 characters.
        messages: instead of ``question``, chat messages (``{"role", "content"}`` dicts, roles
            system, user, assistant), the question last (a user message): the chat prompt
            renders them all (a system prompt replaces the default instruction); the analysis
            keeps them (``messages``).
        calibration: a calibration (:func:`mars_demo.evaluation.calibration.load`) that the
            verdict's chance of being right comes from.
        progress: called as ``progress(stage, fraction)`` at the start (0.0) and end (1.0)
            of each stage.
        on_text: called with the greedy answer's text as it grows.
        should_stop: asked before each stage and after each generated token; True stops the
            analysis (:class:`~mars_demo.errors.AnalysisCancelled`).

    Keyword Args:
        **options: the options of mars_demo.options (one line each below).

    Returns:
        The analysis: answers, token weights, clusters, the uncertainties
        (:class:`~mars_demo.result.AnalysisResult`; ``to_dict()`` is its JSON).

    Raises:
        OptionError: an unknown option or a value out of its range (the message names it).
        ModelLoadError: a model cannot be loaded (every missing one named, with its option).
    """
    return Engine(_settings_of(options), calibration=calibration).analyze(
        question, messages=messages, progress=progress, on_text=on_text,
        should_stop=should_stop)


@documented(SCORE_OPTIONS)
def score(answers: Any, *, progress: Progress | None = None, calibration: Any = None,
          **options: Any) -> AnalysisResult:
    """Score answers from anywhere: everything after generation (see :meth:`Engine.score`).

    The models and scoring options not given are those the analysis recorded (its
    ``settings``: the importance and NLI models that scored it, see
    :func:`~mars_demo.settings.for_answers`), then the defaults; the result's ``settings`` name
    the models used. No LLM is loaded unless log-probs are missing or a method needs an extra
    LLM pass.

    Args:
        answers: an :class:`~mars_demo.answers.AnswerSet`, its JSON form (the names of the
            analysis JSON: question, greedy, samples, each with text and tokens of text and
            logprob), or an earlier analysis (an :class:`AnalysisResult` or its JSON) to score
            again with other ``options``: what it saved of the same models (the NLI verdicts
            and probabilities, an extra pass's outputs) is reused as it is, nothing judged
            again; give ``analysis.answer_set()`` to judge its answers afresh.
        progress: called as ``progress(stage, fraction)``.
        calibration: a calibration the verdict's chance of being right comes from (as in
            :func:`analyze`).

    Keyword Args:
        **options: the options of mars_demo.options (one line each below).

    Returns:
        The analysis of the answers (:class:`~mars_demo.result.AnalysisResult`).
    """
    settings = for_answers(_recorded(answers), _given(options))
    return Engine(settings, calibration=calibration).score(answers, progress=progress)


def _recorded(answers: Any) -> dict[str, Any] | None:
    """What an earlier analysis recorded of its settings (None for a bare answer set)."""
    if isinstance(answers, AnalysisResult):
        return answers.settings
    if isinstance(answers, dict) and isinstance(answers.get("settings"), dict):
        return answers["settings"]
    return None


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked by name, with a model given as a loaded ``(model, tokenizer)`` pair
    replaced by the id that names it (:func:`mars_demo.models.given.give`)."""
    check_names(options)
    return {name: given.give(name, value) if name in GIVEN_MODELS and isinstance(
        value, (tuple, list)) else value for name, value in options.items()}


def _settings_of(options: dict[str, Any]) -> Settings:
    return Settings(**_given(options))
