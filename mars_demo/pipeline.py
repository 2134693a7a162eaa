"""The whole analysis of one question: generate, score (LN and MARS), cluster, uncertainties.

>>> from mars_demo import analyze                                  # doctest: +SKIP
>>> result = analyze("Which planet is known as the Red Planet?")   # doctest: +SKIP
>>> result.uncertainty.confidence.mars                             # doctest: +SKIP

The LLM makes one greedy answer and N samples (one batched ``generate`` call for the samples);
token log-probs come from the logits of generation (no extra LLM pass); the importance model scores
all answers in one batched pass; the NLI model judges all needed ordered pairs in one batched pass.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .core import alignment, clustering, scoring, uncertainty
from .models.llm import GenerationCancelled
from .models.loading import ModelLoadError, cuda_available, free_memory, release
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
    LLM_PRESETS,
    OptionError,
    Settings,
    clean_question,
    resolve_llm,
    resolve_nli,
)

Progress = Callable[[str, float], None]
STAGES = ("generate", "importance", "nli", "uncertainty")  # progress stages, in order

# One analysis at a time per process: the models are shared, and two requests must never
# interleave inside one model call.
_RUN_LOCK = threading.Lock()


class AnalysisOutOfMemory(RuntimeError):
    """The analysis ran out of (GPU) memory; memory was released and the engine still works."""


class AnalysisCancelled(Exception):
    """``should_stop`` said the request was cancelled (e.g. its browser tab was closed): the
    analysis stopped at the next generated token or stage and the models are free again."""


@dataclass
class _Models:
    llm: Any
    importance: Any  # ImportanceModel or BEMImportance
    nli: Any


def _quiet(stage: str, fraction: float) -> None:
    return None


def _never() -> bool:
    return False


class Engine:
    """Loaded models plus :meth:`analyze`. Models are loaded once and shared (cached by id)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._models: _Models | None = None
        self._load_lock = threading.Lock()

    # ---- models --------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._models is not None

    def describe(self) -> dict[str, Any]:
        cuda = cuda_available()
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

    def _load(self, s: Settings, progress: Progress) -> _Models:
        from .models.importance import BEMImportance, ImportanceModel
        from .models.llm import LLM
        from .models.nli import NLIModel

        cuda = cuda_available()
        llm_id, preset = resolve_llm(s.llm, cuda)
        llm = LLM.load(llm_id, preset, s.load_in_4bit, progress)
        if s.importance_method == "bem":
            importance = BEMImportance.load(s.bem, s.chunker, progress)
        else:
            importance = ImportanceModel.load(s.importance, progress)
        nli = NLIModel.load(resolve_nli(s.nli, cuda), progress)
        return _Models(llm, importance, nli)

    def _models_for(self, s: Settings, progress: Progress) -> _Models:
        same = (
            self._models is not None
            and (s.llm, s.load_in_4bit, s.nli, s.importance_method == "bem")
            == (self.settings.llm, self.settings.load_in_4bit, self.settings.nli,
                self.settings.importance_method == "bem")
            and (s.importance, s.bem, s.chunker)
            == (self.settings.importance, self.settings.bem, self.settings.chunker)
        )
        if same:
            return self._models  # type: ignore[return-value]
        return self._load(s, progress)

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
        """Run the whole analysis. Raises ``OptionError`` for bad input, ``ModelLoadError`` when
        a model cannot be loaded and :class:`AnalysisOutOfMemory` when memory runs out.

        ``should_stop`` (called from this thread) is asked before each stage and after every
        generated token; once it returns True the analysis ends there with
        :class:`AnalysisCancelled`, which releases the models for the next request.
        """
        s = settings or self.settings
        question = clean_question(question)
        progress = progress or _quiet
        with _RUN_LOCK:
            try:
                return self._analyze(question, s, progress, on_text, should_stop)
            except GenerationCancelled as err:
                raise AnalysisCancelled("the analysis was cancelled") from err
            except ModelLoadError:
                raise  # already says what to do (a load that ran out of memory included)
            except (MemoryError, RuntimeError) as err:
                if not _is_out_of_memory(err):
                    raise
                raise self._oom(err) from err

    @staticmethod
    def _oom(err: BaseException) -> AnalysisOutOfMemory:
        # The failing frames' locals (activations, logits) would keep the memory alive for as
        # long as the exception lives: drop them before emptying the caches.
        traceback.clear_frames(err.__traceback__)
        free_memory()
        return AnalysisOutOfMemory(
            "Ran out of memory during the analysis; memory was released. Try fewer samples or "
            f"fewer max new tokens. ({type(err).__name__})"
        )

    def _analyze(
        self, question: str, s: Settings, progress: Progress, on_text, should_stop=None
    ) -> AnalysisResult:
        timings: dict[str, float] = {}
        warnings: list[str] = []
        stopped = should_stop or _never

        def check() -> None:
            if stopped():
                raise AnalysisCancelled("the analysis was cancelled")

        check()  # cancelled while it waited for the models
        t = time.perf_counter()
        models = self._models_for(s, progress)
        if time.perf_counter() - t > 0.05:
            timings["load"] = time.perf_counter() - t
        llm = models.llm

        check()
        progress("generate", 0.0)
        prompt, prompt_ids, prompt_preset, w = llm.build_prompt(question, s.prompt)
        warnings += w
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
        )
        progress("generate", 1.0)
        gens = [greedy] + samples
        names = ["Greedy answer"] + [f"Sample {i + 1}" for i in range(len(samples))]

        check()
        progress("importance", 0.0)
        t = time.perf_counter()
        texts = [g.text for g in gens]
        if s.importance_method == "bem":
            phrasings = models.importance.score(question, texts)
        else:
            phrasings = models.importance.score(question, texts, method=s.importance_method)
        timings["importance"] = time.perf_counter() - t
        progress("importance", 1.0)

        t = time.perf_counter()
        answers = []
        notes_of: dict[str, list[str]] = {}  # one line per distinct warning, naming its answers
        for name, gen, ph in zip(names, gens, phrasings):
            answer, notes = self._score_answer(gen, ph, s)
            answers.append(answer)
            for note in gen.warnings + ph.warnings + notes:
                notes_of.setdefault(note, []).append(name)
        warnings += [f"{', '.join(who)}: {note}" for note, who in notes_of.items()]
        timings["alignment"] = time.perf_counter() - t

        check()
        progress("nli", 0.0)
        t = time.perf_counter()
        sample_texts = [a.text for a in answers[1:]]
        labels = models.nli.matrix(question, sample_texts, warnings)
        timings["nli"] = time.perf_counter() - t
        progress("nli", 1.0)

        check()
        progress("uncertainty", 0.0)
        t = time.perf_counter()
        cluster_ids = clustering.semantic_clusters(labels, rule=s.cluster_rule)
        unc = _uncertainty(answers[0], answers[1:], cluster_ids)
        timings["uncertainty"] = time.perf_counter() - t
        progress("uncertainty", 1.0)

        cuda = cuda_available()
        used = s.to_dict()
        used.update(
            llm=llm.model_id,
            nli=models.nli.model_id,
            prompt=prompt_preset,
            device="cuda" if cuda else "cpu",
            load_in_4bit=llm.quantized,
        )
        return AnalysisResult(
            question=question,
            prompt=prompt,
            prompt_token_ids=list(prompt_ids),
            greedy=answers[0],
            samples=answers[1:],
            nli=NLIResult(answers=sample_texts, labels=labels),
            cluster_ids=cluster_ids,
            uncertainty=unc,
            settings=used,
            timings_s={k: round(v, 6) for k, v in timings.items()},
            warnings=warnings,
        )

    @staticmethod
    def _score_answer(gen, ph, s: Settings) -> tuple[Answer, list[str]]:
        """Align phrases to tokens, compute u, w and both scores of one answer."""
        notes: list[str] = []
        n_tok = len(gen.token_ids)
        logprobs = np.asarray(gen.logprobs, dtype=float)
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
            al = alignment.align_tokens_to_phrases(gen.text, gen.spans, ph.spans)
            notes += al.warnings
            aligned = sorted(set(al.phrase_of_token))
            if len(aligned) < len(phrases):
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


def _cache_keys(s: Settings, cuda: bool) -> set[tuple]:
    """The model-cache keys of every model that ``s`` needs (see ``loading.load_cached``)."""
    from .models.importance import BEMImportance, ImportanceModel
    from .models.llm import LLM
    from .models.nli import NLIModel

    llm_id, _ = resolve_llm(s.llm, cuda)
    keys = {LLM.cache_key(llm_id, s.load_in_4bit), NLIModel.cache_key(resolve_nli(s.nli, cuda))}
    if s.importance_method == "bem":
        keys |= BEMImportance.cache_keys(s.bem, s.chunker)
    else:
        keys.add(ImportanceModel.cache_key(s.importance))
    return keys


def _is_out_of_memory(err: BaseException) -> bool:
    if isinstance(err, MemoryError):
        return True
    try:
        import torch

        if isinstance(err, torch.cuda.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):  # pragma: no cover - torch is a hard dependency
        pass
    return "out of memory" in str(err).lower()


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
    unknown = sorted(set(options) - set(Settings.__dataclass_fields__))
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(unknown)}; known: "
            f"{', '.join(Settings.__dataclass_fields__)}"
        )
    settings = Settings(**options)
    return Engine(settings).analyze(
        question, progress=progress, on_text=on_text, should_stop=should_stop
    )


__all__ = [
    "Engine",
    "analyze",
    "AnalysisCancelled",
    "AnalysisOutOfMemory",
    "ModelLoadError",
    "STAGES",
]
