"""The one object the scoring stages work on: a :class:`ScoringJob` per answer set.

A job starts with the answer set and what is known about it (:func:`prepare`: log-probs
filled in where missing, the warnings so far; the question was cleaned at the engine's door); each stage of
:mod:`mars_demo.engine.stages` reads some of its fields and fills others, as the stage declares;
:func:`to_result` turns a finished job into the :class:`~mars_demo.result.AnalysisResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..answers import AnswerSet, WorkCap
from ..models import registry, toy
from ..models.importance import PhraseScoring
from ..optional import OPTIONAL_MODELS
from ..progress import Progress
from ..recipes import Resolved
from ..result import AnalysisResult, NLIResult, ScoredAnswer, Uncertainty
from ..settings import GENERATION_FIELDS
from ..verdict import verdict
from .generation import teacher_force

#: The fields a job has when it is made; the stages fill the others.
INPUTS = ("answers", "question", "reuse", "logprob_source", "warnings", "timings")
#: What the optional models and passes save in the analysis (its ``method_inputs``): entry ->
#: the job field its stage fills (``{}`` when none of its methods is asked). The P(True) passes
#: fill ``method_inputs`` itself, one entry per method.
SAVED = {**{m.saved: m.output for m in OPTIONAL_MODELS},  # each optional model's
         "greedy_nli": "greedy_nli", "eigenscore": "embeddings"}
#: The fields :func:`to_result` reads besides the inputs: what the stages must fill.
RESULT_NEEDS = ("scored", "nli", "nli_model_id", "cluster_ids", "uncertainty", "methods",
                "method_inputs", *SAVED.values())


@dataclass
class ScoringJob:
    """One answer set on its way through the scoring stages.

    The fields of :data:`INPUTS` are set when the job is made; every other field is None until
    the stage that declares it in its ``adds`` fills it. ``warnings`` and ``timings`` are logs
    any stage may add to: a warning the user sees, the seconds a stage took.
    """

    answers: AnswerSet  # every answer with its tokens and log-probs
    question: str  # cleaned at the engine's door (clean_question)
    reuse: AnalysisResult | None  # an earlier result of these answers whose NLI may be reused
    logprob_source: str  # "generation", "given", "teacher-forced", "endpoint", ...
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # filled by the stages
    phrasings: list[PhraseScoring] | None = None  # importance: phrases and scores per answer
    scored: list[ScoredAnswer] | None = None  # alignment: greedy answer first, then samples
    nli: NLIResult | None = None  # nli: verdicts among the samples
    nli_model_id: str | None = None  # nli: the model that made (or once made) them
    cluster_ids: list[int] | None = None  # clustering: one meaning cluster per sample
    uncertainty: Uncertainty | None = None  # uncertainty: the measures under both scorings
    # llm_pass: what the extra LLM passes gave ({method id: {"logprob": x, "prompt": ...}})
    method_inputs: dict[str, dict] | None = None
    # each optional model's stage: what the model said of the answers ({} when none of its
    # methods is asked), saved as method_inputs[its declaration's saved]; one field per
    # declaration of mars_demo.optional, named by its ``output``: "similarities" (SAR's and
    # CoCoA's similarities, "sar"), "lars_outputs" (LARS's logits, "lars"), "ccp_outputs"
    # (the NLI verdicts of the greedy tokens' alternatives, "ccp")
    __annotations__.update({m.output: "dict | None" for m in OPTIONAL_MODELS})
    locals().update({m.output: None for m in OPTIONAL_MODELS})
    # nli: NLI of the greedy answer against each sample ({} unless a method reads it), saved
    # as method_inputs["greedy_nli"]
    greedy_nli: dict | None = None
    # embeddings: the samples' middle-layer embeddings ({} unless EigenScore is asked), saved
    # as method_inputs["eigenscore"]
    embeddings: dict | None = None
    methods: dict[str, dict[str, float]] | None = None  # methods: {id: {variant: value}}


def prepare(answer_sets: list[AnswerSet], reuses: list[AnalysisResult | None], run: Resolved,
            llm: Callable[[], object], progress: Progress,
            check: Callable[[], None], cap: WorkCap | None = None) -> list[ScoringJob]:
    """One job per answer set (its question cleaned at the engine's door): the recipe's warnings, and the log-probs of
    answers given as text alone computed by a teacher-forced pass of ``llm()`` (loaded only
    then; within ``cap``, see :func:`~.generation.teacher_force`)."""
    s = run.settings
    jobs = []
    for answers, reuse in zip(answer_sets, reuses):
        timings: dict[str, float] = dict(answers.timings_s)
        warnings: list[str] = list(answers.warnings)
        made_with = (answers.generation or {}).get("recipe")
        if made_with is None:  # answers from elsewhere: the scoring options are as asked
            warnings += run.overrides(("cluster_rule", "normalization"))
        elif made_with != s.recipe:
            warnings.append(
                f"These answers were generated with the {made_with} recipe; only their "
                f"scoring follows the {s.recipe} recipe."
            )
        check()
        logprob_source = answers.logprob_source
        if answers.missing_logprobs:
            t = time.perf_counter()
            answers, note, logprob_source = teacher_force(answers, llm(), run, cap)
            warnings.append(note)
            timings["teacher_forced"] = time.perf_counter() - t
        jobs.append(ScoringJob(answers=answers, question=answers.question, reuse=reuse,
                               logprob_source=logprob_source, warnings=warnings,
                               timings=timings))
    return jobs


def to_result(job: ScoringJob, run: Resolved, calibration: object = None,
              reference: object = None) -> AnalysisResult:
    """The analysis of a job that went through every stage: the scored answers, NLI verdicts,
    clusters and uncertainties, with the settings that made them (the recipe's applied, and
    how the answers were generated as far as known), and the verdict on its answer
    (:func:`mars_demo.verdict.verdict`, with ``calibration`` and ``reference`` where given)."""
    answers, scored = job.answers, job.scored
    used = run.settings.to_dict()
    generated = answers.generation or {}
    for name in GENERATION_FIELDS + ("llm", "load_in_4bit", "quantization", "decoding",
                                     "llm_endpoint", "llm_backend", "device"):
        used[name] = generated.get(name)  # what made these answers (None: not known)
    used["generated_with_recipe"] = generated.get("recipe")
    used["samples"] = len(scored) - 1
    used.pop("llm_api_key_env", None)  # a variable's name is no setting of the result
    used.pop("llm_timeout", None)  # how long to wait changes no answer
    used.update(nli=job.nli_model_id, logprob_source=job.logprob_source,
                methods=list(run.settings.method_ids))
    if used["device"] is None:
        used["device"] = "cuda" if registry.cuda_available() else "cpu"
    result = AnalysisResult(
        question=job.question,
        prompt=answers.prompt or "",
        prompt_token_ids=list(answers.prompt_token_ids or []),
        greedy=scored[0],
        samples=scored[1:],
        nli=job.nli,
        cluster_ids=job.cluster_ids,
        uncertainty=job.uncertainty,
        settings=used,
        timings_s={k: round(v, 6) for k, v in job.timings.items()},
        warnings=job.warnings + job.nli.warnings,
        methods=job.methods,
        method_inputs=all_method_inputs(job),
        messages=list(answers.messages) if answers.messages else None,
    )
    result.verdict = verdict(result, calibration, reference)
    return result


def mark_toys(job: ScoringJob, loaded: dict[str, object]) -> list[str]:
    """The roles of the toy models (:mod:`mars_demo.models.toy`) this job's analysis used: the
    LLM that made its answers (as their generation recorded), the scoring models ``loaded``
    for it and, where an earlier result's NLI verdicts are reused without the NLI model, that
    result's. Said in one warning, the job's first (what the rest says comes from those
    models); returned for the settings."""
    found = set(toy.roles(loaded))
    if (job.answers.generation or {}).get("toy_llm"):
        found.add("llm")
    if job.reuse is not None and "nli" not in loaded:
        found |= {"nli"} & set(job.reuse.settings.get("toy_models") or ())
    job.warnings[:0] = toy.warnings(found)
    return [role for role in toy.WHAT if role in found]


def all_method_inputs(job: ScoringJob) -> dict[str, dict]:
    """What the extra passes gave, as the analysis saves it (``method_inputs``): the LLM
    passes' entries, then each optional stage's under its entry of :data:`SAVED`."""
    out = dict(job.method_inputs or {})
    for entry, name in SAVED.items():
        value = getattr(job, name)
        if value:
            out[entry] = value
    return out
