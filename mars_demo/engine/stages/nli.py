"""The NLI stage: the verdict and the (entailment, neutral, contradiction) probabilities of every
ordered pair of sampled answers, all questions' needed pairs in one batched pass, one judgement
per pair (the label the arg-max of the probabilities; identical texts the model's or the recipe's
rule, :attr:`~mars_demo.recipes.Recipe.identical_texts`); those of an earlier result of the same
answers are reused as they are when they are one judgement per pair under the same rule.

When a method that reads it is asked for (Semantic Density, :mod:`mars_demo.methods.density`),
the same pass also judges "question greedy answer" (premise) against "question sample" for each
distinct sample text, semantic density's extra pairs, saved in the analysis as
``method_inputs["greedy_nli"]`` so that ``score`` recomputes it without models::

    {"nli_model": id, "question": ..., "greedy": text, "answers": [sample texts],
     "probabilities": [[e, n, c] per sample], "pairs": number of pairs the model judged}

Each distinct sample text is judged, one identical to the greedy answer too (as lm-polygraph's
``ConcatGreedySemanticMatrixCalculator`` judges every distinct sample); an earlier result's entry
of the same answers and NLI model is reused.
"""

from __future__ import annotations

from typing import Sequence

from ...core.clustering import one_judgement
from ...methods import METHODS
from ...models import registry
from ...recipes import Resolved
from ...result import NLIResult
from ...settings import resolve_nli
from ..job import ScoringJob
from .base import ScoringContext


def reusable(job: ScoringJob, run: Resolved) -> bool:
    """Whether the job's earlier result (``reuse``) holds NLI verdicts valid for it now: the
    same question, the same sample texts, the same NLI model and recipe, and their
    probabilities, one judgement per pair (an analysis of schema 2 has only the labels, and
    one of schema 3 may hold a rule's label beside the model's probabilities: their NLI runs
    again)."""
    reuse, s = job.reuse, run.settings
    return (
        reuse is not None
        and reuse.nli.probabilities is not None
        and reuse.question == job.answers.question
        and reuse.nli.answers == [a.text for a in job.answers.samples]
        and reuse.settings.get("nli") == resolve_nli(s.nli, registry.cuda_available())
        and bool(reuse.settings.get("nli_int8", False)) == s.nli_int8
        and reuse.settings.get("recipe", "default") == s.recipe
        # verdicts of the clustering's pairs alone serve the same rule only
        and (reuse.settings.get("nli_pairs", "all") == "all"
             or (s.nli_pairs == "clustering" and reuse.settings.get("cluster_rule")
                 == s.cluster_rule))
        and one_judgement_each(reuse.nli, run.recipe.identical_texts)
    )


def one_judgement_each(nli: NLIResult, identical: str) -> bool:
    """Whether a saved NLI record is what :func:`~mars_demo.core.clustering.one_judgement`
    makes of its probabilities under ``identical``: every label the arg-max of its
    probabilities, the identical texts' pairs decided (and listed) as the rule says."""
    try:
        made = one_judgement(nli.answers, nli.probabilities, identical)
    except (TypeError, ValueError):  # a record of another shape: judged again
        return False
    return made == (nli.labels, nli.probabilities, nli.by_rule)


GREEDY_KEY = "greedy_nli"


def greedy_asked(run: Resolved) -> bool:
    """Whether an asked method reads the greedy-to-sample NLI."""
    return any("greedy_nli" in METHODS[m].needs for m in run.settings.method_ids)


def greedy_reused(job: ScoringJob, run: Resolved) -> dict | None:
    """The greedy-to-sample entry of an earlier result of these answers by the NLI model the
    settings name, else None."""
    if job.reuse is None:
        return None
    entry = job.reuse.method_inputs.get(GREEDY_KEY)
    if (entry and entry.get("nli_model") == resolve_nli(run.settings.nli,
                                                        registry.cuda_available())
            and entry.get("question") == job.question
            and entry.get("greedy") == job.answers.greedy.text
            and entry.get("answers") == [a.text for a in job.answers.samples]):
        return dict(entry)
    return None


def greedy_pairs(job: ScoringJob) -> tuple[list[str], list[tuple[str, str]]]:
    """The distinct sample texts and their pairs with the greedy answer."""
    return greedy_text_pairs(job.question, job.scored[0].text, [a.text for a in job.scored[1:]])


def greedy_text_pairs(question: str, greedy: str, texts: list[str]
                      ) -> tuple[list[str], list[tuple[str, str]]]:
    """The distinct ``texts`` (one equal to ``greedy`` included), and their (premise,
    hypothesis) pairs "question greedy" -> "question text".

    >>> greedy_text_pairs("Q?", "Mars", ["Mars", "Venus", "Venus"])
    (['Mars', 'Venus'], [('Q? Mars', 'Q? Mars'), ('Q? Mars', 'Q? Venus')])
    """
    distinct = list(dict.fromkeys(texts))
    return distinct, [(f"{question} {greedy}", f"{question} {t}") for t in distinct]


def greedy_entry(job: ScoringJob, model_id: str, distinct: list[str], judged, start: int) -> dict:
    found = {t: judged.probabilities[start + k] for k, t in enumerate(distinct)}
    texts = [a.text for a in job.scored[1:]]
    return {"nli_model": model_id, "question": job.question, "greedy": job.scored[0].text,
            "answers": texts, "pairs": len(distinct),
            "probabilities": [list(found[t]) for t in texts]}


class NLIStage:
    """NLI verdicts and probabilities among each job's samples (``nli``) and the model that
    gave them (``nli_model_id``), in the recipe's input format. Every ordered pair of all
    questions goes through one :meth:`NLIModel.judge` call (each distinct pair once, in
    length-sorted batches); with ``nli_pairs`` "clustering" only the pairs the first-member
    clustering reads, one call per round (:meth:`NLIModel.clustering_matrices`), the others
    None."""

    name = "nli"
    reads = ("scored", "question", "reuse")
    adds = ("nli", "nli_model_id", "greedy_nli")
    progress = "nli"
    timing = "nli"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        greedy = greedy_asked(run) and any(greedy_reused(job, run) is None for job in jobs)
        return () if all(reusable(job, run) for job in jobs) and not greedy else ("nli",)

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        fmt, identical = ctx.run.recipe.nli_input_format, ctx.run.recipe.identical_texts
        fresh = []
        for job in jobs:
            texts = [a.text for a in job.scored[1:]]
            if reusable(job, ctx.run):  # the same NLI model already judged these answers
                reuse = job.reuse
                job.nli = NLIResult(answers=texts, labels=reuse.nli.labels,
                                    warnings=list(reuse.nli.warnings),
                                    probabilities=reuse.nli.probabilities,
                                    by_rule=list(reuse.nli.by_rule))
                job.nli_model_id = reuse.settings["nli"]
            else:
                job.nli = NLIResult(answers=texts, labels=[], warnings=[])
                job.nli_model_id = ctx.nli.model_id
                fresh.append(job)
        extra: list[tuple[str, str]] = []
        greedy_jobs = []
        for job in jobs:
            job.greedy_nli = {}
            if greedy_asked(ctx.run):
                entry = greedy_reused(job, ctx.run)
                if entry is not None:
                    job.greedy_nli = entry
                    continue
                distinct, pairs = greedy_pairs(job)
                greedy_jobs.append((job, distinct, len(extra)))
                extra += pairs
        if fresh or greedy_jobs:
            questions, answers = [j.question for j in fresh], [j.nli.answers for j in fresh]
            if (ctx.run.settings.nli_pairs == "clustering"
                    and ctx.run.recipe.clustering_algorithm == "first-member"):
                matrices, judged = ctx.nli.clustering_matrices(
                    questions, answers, ctx.run.settings.cluster_rule, extra, input_format=fmt,
                    identical=identical)
            else:  # every pair (the all-pairs algorithm reads every one anyway)
                matrices, judged = ctx.nli.matrices_and_pairs(questions, answers, extra,
                                                              input_format=fmt,
                                                              identical=identical)
            for job, m in zip(fresh, matrices):
                job.nli.labels = m.labels
                job.nli.probabilities = m.probabilities
                job.nli.by_rule = m.by_rule
                job.nli.warnings.extend(m.warnings)
            for job, distinct, start in greedy_jobs:
                job.greedy_nli = greedy_entry(job, ctx.nli.model_id, distinct, judged, start)
                cut = [k for k in judged.truncated if start <= k < start + len(distinct)]
                if cut:
                    job.warnings.append(
                        f"The NLI model cut {len(cut)} of the greedy answer's comparisons with "
                        "the samples to fit its window; semantic density is less reliable.")
