"""The greedy-NLI stage of Semantic Density (``semantic_density``, :mod:`mars_demo.methods.density`):
the NLI model's (entailment, neutral, contradiction) probabilities of "question greedy answer"
(premise) against "question sample" for each sample, the extra NLI pairs of that method, saved
in the analysis as ``method_inputs["greedy_nli"]`` so that ``score`` recomputes it without
models::

    {"nli_model": id, "question": ..., "greedy": text, "answers": [sample texts],
     "probabilities": [[e, n, c] per sample], "pairs": number of pairs the model judged}

A sample whose text is the greedy answer's gets (1, 0, 0) without a call; each distinct sample
text is judged once (lm-polygraph judges the distinct samples). Runs only when a method that
reads it is asked for, and reuses an earlier result's entry of the same answers and NLI model.
"""

from __future__ import annotations

from typing import Sequence

from ...methods import METHODS
from ...models import registry
from ...models.nli import SAME
from ...recipes import Resolved
from ...settings import resolve_nli
from ..job import ScoringJob
from .base import ScoringContext

KEY = "greedy_nli"


def asked(run: Resolved) -> bool:
    return any("greedy_nli" in METHODS[m].needs for m in run.settings.method_ids)


def reused(job: ScoringJob, run: Resolved) -> dict | None:
    """The entry of an earlier result of these answers by the NLI model the settings name."""
    if job.reuse is None:
        return None
    entry = job.reuse.method_inputs.get(KEY)
    if (entry and entry.get("nli_model") == resolve_nli(run.settings.nli,
                                                        registry.cuda_available())
            and entry.get("question") == job.question
            and entry.get("greedy") == job.answers.greedy.text
            and entry.get("answers") == [a.text for a in job.answers.samples]):
        return dict(entry)
    return None


class GreedyNLIStage:
    """NLI of each job's greedy answer against its samples (``greedy_nli``; ``{}`` when no
    method reads it); every job's pairs in one :meth:`NLIModel.judge` call."""

    name = "greedy_nli"
    reads = ("scored", "question", "reuse")
    adds = ("greedy_nli",)
    progress = "uncertainty"
    timing = "greedy_nli"  # its own key: the extra NLI pairs are reported apart

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        if asked(run) and any(reused(job, run) is None for job in jobs):
            return ("nli",)
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        for job in jobs:
            job.greedy_nli = {}
        if not asked(ctx.run):
            return
        fresh, pairs, plans = [], [], []
        for job in jobs:
            entry = reused(job, ctx.run)
            if entry is not None:
                job.greedy_nli = entry
                continue
            greedy = job.scored[0].text
            texts = [a.text for a in job.scored[1:]]
            distinct = [t for k, t in enumerate(texts) if t != greedy and t not in texts[:k]]
            plans.append((len(pairs), distinct))
            pairs += [(f"{job.question} {greedy}", f"{job.question} {t}") for t in distinct]
            fresh.append(job)
        if not fresh:
            return
        judged = ctx.nli.judge(pairs, ctx.run.recipe.nli_input_format)
        for job, (start, distinct) in zip(fresh, plans):
            found = {t: judged.probabilities[start + k] for k, t in enumerate(distinct)}
            greedy = job.scored[0].text
            texts = [a.text for a in job.scored[1:]]
            cut = [k for k in judged.truncated if start <= k < start + len(distinct)]
            if cut:
                job.warnings.append(
                    f"The NLI model cut {len(cut)} of the greedy answer's comparisons with the "
                    "samples to fit its window; semantic density is less reliable.")
            job.greedy_nli = {
                "nli_model": ctx.nli.model_id, "question": job.question, "greedy": greedy,
                "answers": texts, "pairs": len(distinct),
                "probabilities": [list(SAME) if t == greedy else list(found[t])
                                  for t in texts]}
