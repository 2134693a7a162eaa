"""The analysis of one question in two halves: generate the answers, then score them.

>>> from mars_demo import analyze, score                           # doctest: +SKIP
>>> result = analyze("Which planet is known as the Red Planet?")   # doctest: +SKIP
>>> result.uncertainty.confidence.mars                             # doctest: +SKIP
>>> score(result.to_dict(), normalization="softmax")               # doctest: +SKIP

:meth:`Engine.generate` is the LLM's part: one greedy answer and N samples with their token
log-probs, read from the logits of generation (no extra LLM pass). :meth:`Engine.score` is
everything after it, for answers from anywhere (this engine, an OpenAI-compatible server, a file):
the importance model scores all answers in one batched pass, the NLI model judges all needed
ordered pairs in one batched pass, then clusters and the six uncertainties.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .answers import AnswerSet
from .errors import (
    AnalysisCancelled,
    AnalysisOutOfMemory,
    GenerationCancelled,
    ModelLoadError,
    OptionError,
    is_out_of_memory,
)
from .progress import STAGES, Progress
from .progress import quiet as _quiet
from .core import alignment, clustering, scoring, uncertainty
from .recipes import SETTINGS_FIELDS as RECIPE_FIELDS
from .recipes import apply_recipe, recipe_choices, recipe_notes
from .models.loading import cuda_available, free_memory, load_cached, release
from .result import (
    AnalysisResult,
    Answer,
    NLIResult,
    Pair,
    Phrase,
    Scores,
    Token,
    Uncertainty,
)
from .settings import (
    CPU_DEFAULT_PRESET,
    GENERATION_FIELDS,
    LLM_PRESETS,
    Settings,
    clean_question,
    resolve_llm,
    resolve_nli,
)


# One analysis at a time per process: the models are shared, and two requests must never
# interleave inside one model call. analyze() holds it across generate and score.
_RUN_LOCK = threading.Lock()


@dataclass
class Models:
    """The models an engine has loaded (see :attr:`Engine.models`)."""

    llm: Any  # models.llm.LLM or models.endpoint.EndpointLLM
    importance: Any  # ImportanceModel or BEMImportance
    nli: Any  # NLIModel


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
        free_memory()
        raise AnalysisOutOfMemory(
            "Ran out of memory during the analysis; memory was released. Try fewer samples or "
            f"fewer max new tokens. ({type(err).__name__})"
        ) from err


def as_answer_set(answers: Any) -> AnswerSet:
    """An :class:`AnswerSet` from an answer set, its JSON form or an :class:`AnalysisResult`."""
    if isinstance(answers, AnswerSet):
        return answers
    if isinstance(answers, AnalysisResult):
        return answers.answer_set()
    return AnswerSet.from_dict(answers)


class Engine:
    """Loaded models plus :meth:`generate`, :meth:`score` and :meth:`analyze` (both).

    Models are loaded once and shared (cached by id). Every method takes a
    :class:`~mars_demo.settings.Settings` (default: the engine's) and loads only what it needs:
    :meth:`score` of answers that carry their log-probs never loads the LLM.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
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

    def describe(self) -> dict[str, Any]:
        cuda = cuda_available()
        s = self.settings
        if s.llm_endpoint:  # the LLM runs in a server; this process holds the other models
            served = self._models.llm.model_id if self._models is not None else s.llm_model
            return {
                "device": "cuda" if cuda else "cpu",
                "llm": f"{served or 'the model'} (served over HTTP)",
                "llm_preset": None,
                "importance": s.importance,
                "nli": resolve_nli(s.nli, cuda),
                "cpu_fallback": False,
                "load_in_4bit": False,
                "ready": self.ready,
            }
        llm_id, preset = resolve_llm(self.settings.llm, cuda)
        return {
            "device": "cuda" if cuda else "cpu",
            "llm": llm_id,
            "llm_preset": preset.label if preset else None,
            "importance": self.settings.importance,
            "nli": resolve_nli(self.settings.nli, cuda),
            # "No GPU: running the small CPU preset", chosen automatically or picked by hand
            "cpu_fallback": not cuda and preset is LLM_PRESETS[CPU_DEFAULT_PRESET],
            "load_in_4bit": cuda if self.settings.load_in_4bit is None else self.settings.load_in_4bit,
            "ready": self.ready,
        }

    def load(self, progress: Progress | None = None, settings: Settings | None = None) -> None:
        """Load (or fetch from the cache) every model the settings name; they become the
        engine's settings."""
        with self._load_lock:
            settings = settings or self.settings
            self._models = self._load(settings, progress or _quiet)
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
                keep = _cache_keys(settings, cuda_available())
            except ModelLoadError:
                keep = set()  # the new models cannot load anyway: free everything
            release(keep)
            self.settings = settings
            self._models = self._load(settings, progress or _quiet)

    def _load(self, s: Settings, progress: Progress) -> Models:
        return Models(_load_llm(s, progress), _load_importance(s, progress),
                      _load_nli(s, progress))

    # ---- analysis ------------------------------------------------------------------------
    def analyze(
        self,
        question: str,
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AnalysisResult:
        """Generate the answers, then score them: :meth:`generate`, then :meth:`score`.

        Raises ``OptionError`` for bad input, ``ModelLoadError`` when a model cannot be loaded and
        :class:`AnalysisOutOfMemory` when memory runs out. ``should_stop`` (called from this
        thread) is asked before each stage and after every generated token; once it returns True
        the analysis ends there with :class:`AnalysisCancelled`, which releases the models for
        the next request.
        """
        s = settings or self.settings
        question = clean_question(question)
        with _RUN_LOCK, _guarded():
            answers = self._generate(question, s, progress or _quiet, on_text, should_stop)
            return self._score(answers, s, progress or _quiet, should_stop, None)

    def generate(
        self,
        question: str,
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> AnswerSet:
        """The greedy answer and the samples, with their token log-probs: the LLM's part only.

        ``on_text`` receives the greedy answer's text as it grows. Errors as :meth:`analyze`.
        """
        s = settings or self.settings
        question = clean_question(question)
        with _RUN_LOCK, _guarded():
            return self._generate(question, s, progress or _quiet, on_text, should_stop)

    def score(
        self,
        answers: "AnswerSet | AnalysisResult | dict[str, Any]",
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        reuse: AnalysisResult | None = None,
    ) -> AnalysisResult:
        """Everything after generation: importance, alignment, NLI, clustering, the six
        uncertainties, warnings and timings.

        ``answers`` is an :class:`~mars_demo.answers.AnswerSet`, its JSON form, or an earlier
        :class:`AnalysisResult` (re-scored with other options). No LLM is loaded unless an
        answer comes without log-probs: those are computed by a teacher-forced pass of the
        settings' LLM, and the result says so. ``reuse``: an earlier result of the same
        answers whose NLI verdicts are taken as they are (same NLI model, same answers), so a
        re-score with another normalization, distribution or cluster rule costs no NLI pass.
        A bad answer set raises :class:`~mars_demo.answers.AnswerSetError` (a ``ValueError``)
        naming the answer and token at fault.
        """
        s = settings or self.settings
        answer_set = as_answer_set(answers)
        with _RUN_LOCK, _guarded():
            return self._score(answer_set, s, progress or _quiet, should_stop, reuse)

    def generate_many(
        self,
        questions: list[str],
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[AnswerSet]:
        """:meth:`generate` for several questions at once, one :class:`AnswerSet` each.

        In-process, all questions' greedy answers and samples come from ONE batched
        ``generate`` call (:meth:`LLM.generate_many <mars_demo.models.llm.LLM.generate_many>`:
        left-padded prompts, row 0 of each question's block greedy). Each greedy answer is the
        one :meth:`generate` gives (up to float rounding); the samples are reproducible for the
        same seed, settings and batch, but may differ from those of another batch size, since
        the random draws are shared by the batch. With ``llm_endpoint`` the questions'
        requests are sent concurrently (bounded), so the server (vLLM) batches them. Nothing
        streams. The batch's generation seconds are shared equally in each ``timings_s``.
        Errors as :meth:`analyze`; a bad question raises ``OptionError`` before any work.
        """
        s = settings or self.settings
        cleaned = [clean_question(q) for q in questions]
        if not cleaned:
            return []
        with _RUN_LOCK, _guarded():
            return self._generate_many(cleaned, s, progress or _quiet, should_stop)

    def score_many(
        self,
        answer_sets: "list[AnswerSet | AnalysisResult | dict[str, Any]]",
        settings: Settings | None = None,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[AnalysisResult]:
        """:meth:`score` for several answer sets at once, one :class:`AnalysisResult` each,
        equal to one :meth:`score` per answer set (up to float rounding).

        The importance model scores all questions' answers in one batched pass (each answer
        paired with its own question; the ``bem`` method runs one question after another, with
        the same results), the NLI model judges all questions' needed pairs in one batched
        ``verdicts`` call (the recipe's input format as in :meth:`score`); alignment, clustering
        and the uncertainties are per question. A batch's stage seconds are shared equally in
        each result's ``timings_s``. A bad answer set raises
        :class:`~mars_demo.answers.AnswerSetError` before any model runs.
        """
        s = settings or self.settings
        sets = [as_answer_set(a) for a in answer_sets]
        if not sets:
            return []
        with _RUN_LOCK, _guarded():
            return self._score_many(sets, s, progress or _quiet, should_stop, [None] * len(sets))

    def rescore(self, result: AnalysisResult, settings: Settings | None = None,
                **changes: Any) -> AnalysisResult:
        """``result``'s answers scored again with other scoring options (``changes``: e.g.
        ``normalization="softmax"``); the LLM is not called and NLI verdicts are reused."""
        return self.score(result, (settings or self.settings).replace(**changes), reuse=result)

    # ---- the two halves ------------------------------------------------------------------
    def _generate(self, question: str, s: Settings, progress: Progress, on_text,
                  should_stop) -> AnswerSet:
        asked, s = s, apply_recipe(s)
        rc = recipe_choices(s.recipe)
        timings: dict[str, float] = {}
        check = _checker(should_stop)
        check()  # cancelled while it waited for the models
        t = time.perf_counter()
        llm = self._llm_for(s, progress)
        if time.perf_counter() - t > 0.05:
            timings["load"] = time.perf_counter() - t
        check()
        progress("generate", 0.0)
        prompt, prompt_ids, prompt_preset, warnings = llm.build_prompt(
            question, s.prompt, recipe=s.recipe)
        warnings += _recipe_overrides(asked, s)
        warnings += recipe_notes(s.recipe, bos_token_id=_bos_id(llm))
        greedy, samples = llm.generate(
            prompt_ids,
            samples=s.samples,
            temperature=s.temperature,
            top_p=s.top_p,
            max_new_tokens=s.max_new_tokens,
            seed=s.seed,
            prompt_preset=prompt_preset,
            on_text=on_text,
            timings=timings,
            should_stop=should_stop,
            prompt=prompt,
            top_k=rc["top_k"] or 0,  # 0: no top-k
            keep_stop=rc["keep_stop"],
            banned_strings=tuple(rc["banned_strings"]),
        )
        progress("generate", 1.0)
        return _answer_set(llm, s, question, greedy, samples, prompt, prompt_ids, prompt_preset,
                           warnings, timings)

    def _generate_many(self, questions: list[str], s: Settings, progress: Progress,
                       should_stop) -> list[AnswerSet]:
        """:meth:`_generate` for several questions in one ``generate_many`` call of the LLM."""
        asked, s = s, apply_recipe(s)
        rc = recipe_choices(s.recipe)
        timings: dict[str, float] = {}
        check = _checker(should_stop)
        check()
        t = time.perf_counter()
        llm = self._llm_for(s, progress)
        loaded = time.perf_counter() - t
        check()
        progress("generate", 0.0)
        built = [llm.build_prompt(q, s.prompt, recipe=s.recipe) for q in questions]
        notes = _recipe_overrides(asked, s) + recipe_notes(s.recipe, bos_token_id=_bos_id(llm))
        presets = {preset for _, _, preset, _ in built}
        if len(presets) > 1:  # cannot happen: one LLM, one preset option
            raise OptionError(f"the questions got different prompt presets: {sorted(presets)}")
        outs = llm.generate_many(
            [ids for _, ids, _, _ in built],
            prompts=[prompt for prompt, _, _, _ in built],
            samples=s.samples,
            temperature=s.temperature,
            top_p=s.top_p,
            max_new_tokens=s.max_new_tokens,
            seed=s.seed,
            prompt_preset=built[0][2],
            timings=timings,
            should_stop=should_stop,
            top_k=rc["top_k"] or 0,
            keep_stop=rc["keep_stop"],
            banned_strings=tuple(rc["banned_strings"]),
        )
        progress("generate", 1.0)
        shared = {k: v / len(questions) for k, v in timings.items()}
        if loaded > 0.05:
            shared["load"] = loaded / len(questions)
        return [
            _answer_set(llm, s, q, greedy, samples, prompt, ids, preset, list(w) + notes,
                        dict(shared))
            for q, (prompt, ids, preset, w), (greedy, samples) in zip(questions, built, outs)
        ]

    def _score(self, answers: AnswerSet, s: Settings, progress: Progress, should_stop,
               reuse: AnalysisResult | None) -> AnalysisResult:
        return self._score_many([answers], s, progress, should_stop, [reuse])[0]

    def _score_many(self, answer_sets: list[AnswerSet], s: Settings, progress: Progress,
                    should_stop, reuses: list[AnalysisResult | None]) -> list[AnalysisResult]:
        """Score answer sets: importance of all questions' answers in one pass, NLI of all
        questions' needed pairs in one ``verdicts`` call; alignment, clustering and the
        uncertainties per question. One answer set is :meth:`score`. A batch's stage seconds
        are shared equally among its questions' ``timings_s``."""
        asked, s = s, apply_recipe(s)
        rc = recipe_choices(s.recipe)
        check = _checker(should_stop)
        q = len(answer_sets)
        jobs = []
        for answers, reuse in zip(answer_sets, reuses):
            timings: dict[str, float] = dict(answers.timings_s)
            warnings: list[str] = list(answers.warnings)
            made_with = (answers.generation or {}).get("recipe")
            if made_with is None:  # answers from elsewhere: the scoring options are as asked
                warnings += _recipe_overrides(asked, s, ("cluster_rule", "normalization"))
            elif made_with != s.recipe:
                warnings.append(
                    f"These answers were generated with the {made_with} recipe; only their "
                    f"scoring follows the {s.recipe} recipe."
                )
            question = clean_question(answers.question)
            if question != answers.question:
                answers = dataclasses.replace(answers, question=question)

            check()
            logprob_source = answers.logprob_source
            if answers.missing_logprobs:
                t = time.perf_counter()
                answers, note, logprob_source = self._teacher_force(answers, s, progress)
                warnings.append(note)
                timings["teacher_forced"] = time.perf_counter() - t
            jobs.append(dict(answers=answers, question=question, timings=timings,
                             warnings=warnings, logprob_source=logprob_source, reuse=reuse))

        check()
        t = time.perf_counter()
        importance = self._importance_for(s, progress)
        reusable = [_reusable(j["reuse"], j["answers"], s) for j in jobs]
        nli_model = None if all(reusable) else self._nli_for(s, progress)
        loaded = time.perf_counter() - t
        progress("importance", 0.0)
        t = time.perf_counter()
        questions = [j["question"] for j in jobs]
        texts = [[g.text for g in j["answers"].answers] for j in jobs]
        options = {} if s.importance_method == "bem" else {"method": s.importance_method}
        if q == 1:
            phrasings_of = [importance.score(questions[0], texts[0], **options)]
        else:
            phrasings_of = importance.score_many(questions, texts, **options)
        importance_s = (time.perf_counter() - t) / q
        progress("importance", 1.0)

        t = time.perf_counter()
        for job, phrasings in zip(jobs, phrasings_of):
            answers = job["answers"]
            scored = []
            notes_of: dict[str, list[str]] = {}  # one line per distinct warning, naming answers
            for name, gen, ph in zip(answers.names, answers.answers, phrasings):
                answer, notes = self._score_answer(gen, ph, s, rc["alignment_rule"])
                scored.append(answer)
                for note in gen.warnings + ph.warnings + notes:
                    notes_of.setdefault(note, []).append(name)
            job["warnings"] += [f"{', '.join(who)}: {note}" for note, who in notes_of.items()]
            job["scored"] = scored
        alignment_s = (time.perf_counter() - t) / q

        check()
        progress("nli", 0.0)
        t = time.perf_counter()
        fresh = [k for k, ok in enumerate(reusable) if not ok]
        for k, job in enumerate(jobs):
            job["sample_texts"] = [a.text for a in job["scored"][1:]]
            job["nli_warnings"] = []
            if reusable[k]:  # the same NLI model already judged these answers
                reuse = job["reuse"]
                job["labels"], job["nli_warnings"] = reuse.nli.labels, list(reuse.nli.warnings)
                job["nli_id"] = reuse.settings["nli"]
            else:
                job["nli_id"] = nli_model.model_id
        if len(fresh) == 1:
            job = jobs[fresh[0]]
            job["labels"] = nli_model.matrix(job["question"], job["sample_texts"],
                                             job["nli_warnings"],
                                             input_format=rc["nli_input_format"])
        elif fresh:
            labels = nli_model.matrices(
                [jobs[k]["question"] for k in fresh], [jobs[k]["sample_texts"] for k in fresh],
                [jobs[k]["nli_warnings"] for k in fresh], input_format=rc["nli_input_format"])
            for k, lab in zip(fresh, labels):
                jobs[k]["labels"] = lab
        nli_s = (time.perf_counter() - t) / q
        progress("nli", 1.0)

        check()
        progress("uncertainty", 0.0)
        results = []
        for job in jobs:
            answers, scored, timings = job["answers"], job["scored"], job["timings"]
            if loaded > 0.05:
                timings["load"] = timings.get("load", 0.0) + loaded / q
            timings.update(importance=importance_s, alignment=alignment_s, nli=nli_s)
            warnings = job["warnings"] + job["nli_warnings"]
            t = time.perf_counter()
            cluster_ids = clustering.semantic_clusters(
                job["labels"], rule=s.cluster_rule, algorithm=rc["clustering_algorithm"],
                answers=job["sample_texts"] if rc["cluster_by_text"] else None,
            )
            unc = _uncertainty(scored[0], scored[1:], cluster_ids)
            timings["uncertainty"] = time.perf_counter() - t

            used = s.to_dict()
            generated = answers.generation or {}
            for name in GENERATION_FIELDS + ("llm", "load_in_4bit", "llm_endpoint", "device"):
                used[name] = generated.get(name)  # what made these answers (None: not known)
            used["generated_with_recipe"] = generated.get("recipe")
            used["samples"] = len(scored) - 1
            used.pop("llm_api_key_env", None)  # a variable's name is no setting of the result
            used.pop("llm_timeout", None)  # how long to wait changes no answer
            used.update(nli=job["nli_id"], logprob_source=job["logprob_source"])
            if used["device"] is None:
                used["device"] = "cuda" if cuda_available() else "cpu"
            results.append(AnalysisResult(
                question=job["question"],
                prompt=answers.prompt or "",
                prompt_token_ids=list(answers.prompt_token_ids or []),
                greedy=scored[0],
                samples=scored[1:],
                nli=NLIResult(answers=job["sample_texts"], labels=job["labels"],
                              warnings=job["nli_warnings"]),
                cluster_ids=cluster_ids,
                uncertainty=unc,
                settings=used,
                timings_s={k: round(v, 6) for k, v in timings.items()},
                warnings=warnings,
            ))
        progress("uncertainty", 1.0)
        return results

    def _teacher_force(self, answers: AnswerSet, s: Settings,
                       progress: Progress) -> tuple[AnswerSet, str, str]:
        """Fill in the log-probs of answers given as text alone with a teacher-forced pass of
        the settings' LLM. Returns the completed set, the warning saying so, and the source."""
        llm = self._llm_for(s, progress)
        preset = s.prompt or answers.prompt_preset
        prompt, prompt_ids, preset, prompt_notes = llm.build_prompt(
            answers.question, preset, recipe=s.recipe)
        note_extra = ""
        if answers.prompt_token_ids:
            prompt_ids = list(answers.prompt_token_ids)
            prompt = answers.prompt or prompt
        elif answers.prompt is not None and answers.prompt != prompt:
            note_extra = (
                " The given prompt text was not used (give prompt_token_ids to use it): the "
                f"log-probs follow the {preset} prompt built from the question."
            )
        missing = [i for i, a in enumerate(answers.answers) if not a.has_logprobs]
        forced = llm.teacher_forced(
            prompt_ids, [answers.answers[i] for i in missing], prompt_preset=preset,
            lead="" if prompt[-1:].isspace() else None,
        )
        gens = list(answers.answers)
        for i, gen in zip(missing, forced):
            gens[i] = gen
        who = ", ".join(answers.names[i] for i in missing)
        note = (
            f"{who}: no log-probs were given, so they were computed by a teacher-forced pass of "
            f"{llm.model_id} over the answer's text after the {preset} prompt." + note_extra
        )
        source = "teacher-forced" if len(missing) == len(gens) else (
            f"{answers.logprob_source}+teacher-forced")
        done = dataclasses.replace(
            answers, greedy=gens[0], samples=gens[1:], prompt=prompt,
            prompt_token_ids=list(prompt_ids), prompt_preset=preset,
            warnings=list(answers.warnings) + prompt_notes,
            generation={**(answers.generation or {}), "llm": answers.generation.get("llm")
                        if answers.generation else None, "prompt": preset},
        )
        return done, note, source

    # ---- models, one at a time -----------------------------------------------------------
    def _llm_for(self, s: Settings, progress: Progress):
        if self._models is not None and self._same_models(s, "llm"):
            return self._models.llm
        return _load_llm(s, progress)

    def _importance_for(self, s: Settings, progress: Progress):
        if self._models is not None and self._same_models(s, "importance"):
            return self._models.importance
        return _load_importance(s, progress)

    def _nli_for(self, s: Settings, progress: Progress):
        if self._models is not None and self._same_models(s, "nli"):
            return self._models.nli
        return _load_nli(s, progress)

    def _same_models(self, s: Settings, which: str) -> bool:
        """Whether ``s`` names the same ``which`` model as the loaded ones (self.settings)."""
        e = self.settings
        if which == "llm":
            fields = ("llm", "load_in_4bit", "llm_endpoint", "llm_model", "llm_api_key_env",
                      "llm_timeout")
            return all(getattr(s, f) == getattr(e, f) for f in fields)
        if which == "nli":
            return s.nli == e.nli and _nli_dtype(s) == _nli_dtype(e)
        bem = s.importance_method == "bem"
        if bem != (e.importance_method == "bem"):
            return False
        return (s.bem, s.chunker) == (e.bem, e.chunker) if bem else s.importance == e.importance

    @staticmethod
    def _score_answer(gen, ph, s: Settings, rule: str = "default") -> tuple[Answer, list[str]]:
        """Align phrases to tokens (``rule``: "default" or the published code's "paper-code"),
        compute u, w and both scores of one answer."""
        notes: list[str] = []
        n_tok = len(gen.token_ids)
        logprobs = np.asarray(gen.logprobs, dtype=float)
        paper = None
        if ph.spans and rule == "paper-code":
            # The published mapping: a whitespace-only token joins the phrase before it, phrases
            # sharing a token merge (mean of raw scores) before normalization.
            paper = alignment.align_phrases(gen.text, gen.spans, ph.spans, ph.scores, rule=rule)
            ph = dataclasses.replace(ph, spans=list(paper.phrase_spans),
                                     scores=list(paper.phrase_scores))
        phrases = [
            Phrase(text=gen.text[a:b], start=a, end=b, score=float(sc), weight=0.0)
            for (a, b), sc in zip(ph.spans, ph.scores)
        ]
        if not phrases:
            notes.append(
                "No words to score for importance, so every token weighs the same "
                "(MARS equals length-normalized here)."
            )
            u = np.full(n_tok, 1.0 / n_tok)
            phrase_of_token = [-1] * n_tok
        else:
            al = paper or alignment.align_tokens_to_phrases(gen.text, gen.spans, ph.spans)
            notes += al.warnings
            aligned = sorted(set(al.phrase_of_token))
            if len(aligned) < len(phrases) and paper is None:  # paper-code's warnings say it
                notes.append(
                    "Phrases that share their LLM tokens with a longer phrase were left out of "
                    "the importance weights; the other phrases' weights were renormalized."
                )
            remap = {k: i for i, k in enumerate(aligned)}
            local = [remap[k] for k in al.phrase_of_token]
            scores = [ph.scores[k] for k in aligned]
            if s.importance_method == "bem":
                u = scoring.bem_token_importance(local, scores)
            else:
                u = scoring.token_importance(
                    local, scores, logprobs, mode=s.distribution,
                    normalization=s.normalization, temperature=s.softmax_temperature,
                )
            phrase_of_token = list(al.phrase_of_token)
            for l, k in enumerate(phrase_of_token):
                phrases[k].tokens.append(l)
                phrases[k].weight += float(u[l])
        w = scoring.mars_weights(u)
        tokens = [
            Token(id=i, text=gen.text[a:b] if b > a else txt, start=a, end=b, logprob=float(lp))
            for i, (a, b), txt, lp in zip(gen.token_ids, gen.spans, gen.token_texts, gen.logprobs)
        ]
        answer = Answer(
            text=gen.text,
            tokens=tokens,
            phrases=phrases,
            token_importance=[float(x) for x in u],
            mars_weights=[float(x) for x in w],
            scores=Scores(
                length_normalized=scoring.length_normalized(logprobs),
                mars=scoring.mars(logprobs, u),
            ),
            phrase_of_token=phrase_of_token,
            finish_reason=gen.finish_reason,
        )
        return answer, notes


def _answer_set(llm, s: Settings, question, greedy, samples, prompt, prompt_ids, prompt_preset,
                warnings, timings) -> AnswerSet:
    return AnswerSet(
        question=question,
        greedy=greedy,
        samples=samples,
        prompt=prompt,
        prompt_token_ids=list(prompt_ids),
        prompt_preset=prompt_preset,
        logprob_source=getattr(llm, "logprob_source", "generation"),
        warnings=list(warnings),
        generation={
            **{name: getattr(s, name) for name in GENERATION_FIELDS},
            "prompt": prompt_preset,
            "llm": llm.model_id,
            "load_in_4bit": llm.quantized,
            "llm_endpoint": s.llm_endpoint,
            "device": getattr(llm, "device_name", "cuda" if cuda_available() else "cpu"),
            "recipe": s.recipe,
        },
        timings_s=timings,
    )


def _reusable(reuse: AnalysisResult | None, answers: AnswerSet, s: Settings) -> bool:
    """Whether ``reuse``'s NLI verdicts hold for ``answers`` under ``s`` (same question,
    same sample texts, same NLI model and recipe)."""
    return (
        reuse is not None
        and reuse.question == answers.question
        and reuse.nli.answers == [a.text for a in answers.samples]
        and reuse.settings.get("nli") == resolve_nli(s.nli, cuda_available())
        and reuse.settings.get("recipe", "default") == s.recipe
    )


def _load_llm(s: Settings, progress: Progress):
    """The in-process LLM, or with ``llm_endpoint`` the client of an OpenAI-compatible server
    (then ``llm``, when given, names the served model's tokenizer: its chat template)."""
    if s.llm_endpoint:
        from .models.endpoint import EndpointLLM

        tokenizer, preset = resolve_llm(s.llm, cuda_available()) if s.llm else (None, None)
        return load_cached(
            _endpoint_key(s), "LLM server", s.llm_endpoint,
            lambda: EndpointLLM.load(s.llm_endpoint, s.llm_model, s.llm_api_key_env,
                                     tokenizer=tokenizer, preset=preset, timeout=s.llm_timeout),
            progress,
        )
    from .models.llm import LLM

    llm_id, preset = resolve_llm(s.llm, cuda_available())
    return LLM.load(llm_id, preset, s.load_in_4bit, progress)


def _endpoint_key(s: Settings) -> tuple:
    from .models.endpoint import EndpointLLM

    tokenizer = resolve_llm(s.llm, cuda_available())[0] if s.llm else None
    return (*EndpointLLM.cache_key(s.llm_endpoint, s.llm_model, s.llm_api_key_env, tokenizer),
            s.llm_timeout)


def _load_importance(s: Settings, progress: Progress):
    from .models.importance import BEMImportance, ImportanceModel

    if s.importance_method == "bem":
        return BEMImportance.load(s.bem, s.chunker, progress)
    return ImportanceModel.load(s.importance, progress)


def _load_nli(s: Settings, progress: Progress):
    from .models.nli import NLIModel

    return NLIModel.load(resolve_nli(s.nli, cuda_available()), progress, dtype=_nli_dtype(s))


def _nli_dtype(s: Settings) -> str:
    """The NLI model's dtype for ``s``'s recipe. Without CUDA "auto" is float32 already, so a
    recipe's "float32" is the same model: it shares the loaded one instead of a second copy."""
    dtype = recipe_choices(s.recipe)["nli_dtype"]
    return "auto" if dtype == "float32" and not cuda_available() else dtype


def _recipe_overrides(asked: Settings, used: Settings,
                      fields: tuple[str, ...] = RECIPE_FIELDS) -> list[str]:
    """A warning naming the options (of ``fields``) that the recipe set to another value than
    was asked for."""
    changed = [
        f"{name.replace('_', ' ')} {getattr(used, name)} (not {getattr(asked, name)})"
        for name in fields
        if getattr(asked, name) is not None and getattr(asked, name) != getattr(used, name)
    ]
    if not changed:
        return []
    return [f"The {used.recipe} recipe sets {', '.join(changed)}, as the published code does."]


def _bos_id(llm) -> int | None:
    tokenizer = getattr(llm, "tokenizer", None)
    return getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None


def _cache_keys(s: Settings, cuda: bool) -> set[tuple]:
    """The model-cache keys of every model that ``s`` needs (see ``loading.load_cached``)."""
    from .models.importance import BEMImportance, ImportanceModel
    from .models.llm import LLM
    from .models.nli import NLIModel

    llm_id, _ = resolve_llm(s.llm, cuda)
    llm_key = _endpoint_key(s) if s.llm_endpoint else LLM.cache_key(llm_id, s.load_in_4bit)
    keys = {llm_key, NLIModel.cache_key(resolve_nli(s.nli, cuda), _nli_dtype(s))}
    if s.importance_method == "bem":
        keys |= BEMImportance.cache_keys(s.bem, s.chunker)
    else:
        keys.add(ImportanceModel.cache_key(s.importance))
    return keys


def _uncertainty(greedy: Answer, samples: list[Answer], cluster_ids: list[int]) -> Uncertainty:
    def pair(fn) -> Pair:
        return Pair(length_normalized=fn("length_normalized"), mars=fn("mars"))

    def sample_scores(kind: str) -> list[float]:
        return [getattr(a.scores, kind) for a in samples]

    return Uncertainty(
        confidence=pair(lambda k: uncertainty.confidence(getattr(greedy.scores, k))),
        entropy=pair(lambda k: uncertainty.entropy(sample_scores(k))),
        semantic_entropy=pair(
            lambda k: uncertainty.semantic_entropy(sample_scores(k), cluster_ids)
        ),
    )


def analyze(
    question: str,
    *,
    progress: Progress | None = None,
    on_text: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    **options: Any,
) -> AnalysisResult:
    """Analyze one question with the options of :class:`~mars_demo.settings.Settings`.

    Models are loaded on the first call and cached for later ones.
    """
    settings = _settings_of(options)
    return Engine(settings).analyze(
        question, progress=progress, on_text=on_text, should_stop=should_stop
    )


def score(
    answers: Any,
    *,
    progress: Progress | None = None,
    **options: Any,
) -> AnalysisResult:
    """Score answers from anywhere: everything after generation (see :meth:`Engine.score`).

    ``answers``: an :class:`~mars_demo.answers.AnswerSet`, its JSON form (the names of the
    analysis JSON: question, greedy, samples, each with text and tokens of text and logprob),
    or an :class:`AnalysisResult` to re-score with other ``options`` (those of
    :class:`~mars_demo.settings.Settings`). No LLM is loaded unless log-probs are missing.
    """
    settings = _settings_of(options)
    return Engine(settings).score(answers, progress=progress)


def _settings_of(options: dict[str, Any]) -> Settings:
    unknown = sorted(set(options) - set(Settings.__dataclass_fields__))
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(unknown)}; known: "
            f"{', '.join(Settings.__dataclass_fields__)}"
        )
    return Settings(**options)


__all__ = [
    "Engine",
    "Models",
    "analyze",
    "score",
    "AnswerSet",
    "STAGES",
]
