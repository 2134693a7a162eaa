"""The CCP stage (``ccp``, :mod:`mars_demo.methods.ccp`): the NLI model's verdict of each greedy
token against each of its top alternatives (saved with the token, ``alternatives``), as
lm-polygraph's ``stat_calculators/greedy_alternatives_nli.py``: both texts stripped of
punctuation, spaces and newlines, premise the greedy token, label the arg-max. Saved in the
analysis as ``method_inputs["ccp"]`` so that ``score`` recomputes CCP without models::

    {"nli_model": id, "words": [[greedy word, alternative words...] per token],
     "labels": [[label per alternative, the greedy token's own first] per token],
     "pairs": number of distinct pairs the model judged}

Identical words are "entailment" without a call. Cost: one NLI pass over about L * (k - 1)
short pairs per answer (k alternatives per token, deduplicated), every job's in one batch.
"""

from __future__ import annotations

import string

from ...recipes import Resolved
from ...settings import resolve_nli
from ...models import registry
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext

KEY = "ccp"
_STRIP = string.punctuation + " \n"


def words_of(job: ScoringJob) -> list[list[str]] | None:
    """Each greedy token's alternatives as stripped words (the token first); None when the
    greedy answer's tokens carry no alternatives."""
    tokens = job.scored[0].tokens
    if not tokens or any(not t.alternatives for t in tokens):
        return None
    return [[str(a[0]).strip(_STRIP) for a in t.alternatives] for t in tokens]


class CCPStage(OptionalModelStage):
    """The NLI verdicts of each job's greedy alternatives (``ccp_outputs``; ``{}`` unless CCP is
    asked). A job whose greedy tokens carry no alternatives gets ``{}`` (CCP is then left out
    with a warning saying so)."""

    name = "ccp"
    reads = ("scored", "reuse")
    adds = ("ccp_outputs",)
    progress = "uncertainty"
    timing = "methods"  # the methods' cost, pass included
    need, model, output = "alternatives_nli", "nli", "ccp_outputs"

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        words = words_of(job) if job.scored is not None else None
        if job.reuse is None or words is None:
            return {} if words is None and job.scored is not None else None
        entry = job.reuse.method_inputs.get(KEY)
        if (entry and entry.get("words") == words and entry.get("nli_model")
                == resolve_nli(run.settings.nli, registry.cuda_available())):
            return dict(entry)
        return None

    def models(self, jobs, run):
        # the alternatives are known once the answers are: a job without them needs no model
        if self.asked(run) and any(
                a.token_stats.get("alternatives") for a in (j.answers.greedy for j in jobs)):
            return (self.model,)
        return ()

    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        pairs: list[tuple[str, str]] = []
        plans = []
        for job in jobs:
            words = words_of(job)
            plans.append(words)
            for row in words or []:
                pairs += [(row[0], w) for w in row[1:] if w != row[0]]
        distinct = list(dict.fromkeys(pairs))
        judged = ctx.nli.judge(distinct) if distinct else None
        label = {p: judged.labels[k] for k, p in enumerate(distinct)} if judged else {}
        for job, words in zip(jobs, plans):
            if words is None:
                continue
            labels = [["entailment" if w == row[0] else label[(row[0], w)] for w in row]
                      for row in words]
            mine = {(row[0], w) for row in words for w in row[1:] if w != row[0]}
            job.ccp_outputs = {"nli_model": ctx.nli.model_id, "words": words,
                               "labels": labels, "pairs": len(mine)}
