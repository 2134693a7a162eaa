"""The CCP stage (``ccp``, :mod:`mars_demo.methods.ccp`): the NLI model's verdicts between each
greedy token and each of its top alternatives (saved with the token, ``alternatives``), both
ways, as CCP's authors compute them (lm-polygraph's
``stat_calculators/greedy_alternatives_nli.py``): both texts stripped of punctuation, spaces and
newlines; the model asked (greedy word, alternative) and (alternative, greedy word) for every
alternative, identical words included (the authors ask the model for those too); the label the
arg-max. The method combines the two verdicts (:func:`mars_demo.core.token_level.combine_nli`).
Saved in the analysis as ``method_inputs["ccp"]`` so that ``score`` recomputes CCP without
models::

    {"nli_model": id, "words": [[greedy word, alternative words...] per token],
     "labels": [[greedy word -> alternative, per alternative] per token],
     "backward_labels": [[alternative -> greedy word, per alternative] per token],
     "pairs": number of distinct pairs the model judged}

The first entry of each row of labels is the greedy token's own, "entailment" without a call
(CCP counts the greedy token for itself and never reads it; lm-polygraph asks the model for it
and does not read it either). When the answer ended on an end-of-sequence token whose
alternatives were kept (``end_token``), its row comes last in each list, under ``"end_words"``,
``"end_labels"`` and ``"end_backward_labels"``; ``--end-token include`` reads it.

Cost: one NLI pass over about ``2 L (k - 1)`` short pairs per answer (k alternatives per token,
deduplicated), every job's in one batch.
"""

from __future__ import annotations

import string

from ...models import registry
from ...optional.ccp import SPEC
from ...recipes import Resolved
from ...settings import resolve_nli
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext

KEY = SPEC.saved  # the entry of the analysis' method_inputs ("ccp")
_STRIP = string.punctuation + " \n"


def strip_word(text: str) -> str:
    """A token's text as CCP's NLI reads it: punctuation, spaces and newlines stripped.

    >>> strip_word(" Paris,"), strip_word("<|im_end|>")
    ('Paris', 'im_end')
    """
    return str(text).strip(_STRIP)


def words_of(job: ScoringJob) -> list[list[str]] | None:
    """Each greedy token's alternatives as stripped words (the token first); None when the
    greedy answer's tokens carry no alternatives."""
    tokens = job.scored[0].tokens
    if not tokens or any(not t.alternatives for t in tokens):
        return None
    return [[strip_word(a[0]) for a in t.alternatives] for t in tokens]


def end_words_of(job: ScoringJob) -> list[str] | None:
    """The end token's alternatives as stripped words (the end token first), None when the
    greedy answer did not end on one or its alternatives were not kept."""
    end = job.scored[0].end_token
    if end is None or not end.alternatives:
        return None
    return [strip_word(a[0]) for a in end.alternatives]


def both_ways(row: list[str]) -> list[tuple[str, str]]:
    """The (premise, hypothesis) pairs CCP's NLI judges for one token: the greedy word against
    each alternative and back, identical words included.

    >>> both_ways(["Paris", "Lyon", "Paris"])
    [('Paris', 'Lyon'), ('Lyon', 'Paris'), ('Paris', 'Paris'), ('Paris', 'Paris')]
    """
    return [pair for w in row[1:] for pair in ((row[0], w), (w, row[0]))]


class CCPStage(OptionalModelStage):
    """The NLI verdicts of each job's greedy alternatives, both ways (``ccp_outputs``; ``{}``
    unless CCP is asked). A job whose greedy tokens carry no alternatives gets ``{}`` (CCP is
    then left out with a warning saying so)."""

    name = "ccp"
    reads = ("scored", "reuse")
    spec = SPEC
    adds = (SPEC.output,)

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        words = words_of(job) if job.scored is not None else None
        if job.reuse is None or words is None:
            return {} if words is None and job.scored is not None else None
        entry = job.reuse.method_inputs.get(KEY)
        if (entry and entry.get("words") == words and entry.get("backward_labels") is not None
                and entry.get("end_words") == end_words_of(job)
                and entry.get("nli_model") == resolve_nli(run.settings.nli,
                                                          registry.cuda_available())):
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
            words, end = words_of(job), end_words_of(job)
            plans.append((words, end))
            for row in (words or []) + ([end] if words is not None and end else []):
                pairs += both_ways(row)
        distinct = list(dict.fromkeys(pairs))
        judged = ctx.nli.judge(distinct) if distinct else None
        label = {p: judged.labels[k] for k, p in enumerate(distinct)} if judged else {}

        def verdicts(row: list[str]) -> tuple[list[str], list[str]]:
            return (["entailment"] + [label[(row[0], w)] for w in row[1:]],
                    ["entailment"] + [label[(w, row[0])] for w in row[1:]])

        for job, (words, end) in zip(jobs, plans):
            if words is None:
                continue
            rows = [verdicts(row) for row in words]
            entry = {"nli_model": ctx.nli.model_id, "words": words,
                     "labels": [f for f, _ in rows], "backward_labels": [b for _, b in rows]}
            mine = {p for row in words for p in both_ways(row)}
            if end:
                forward, backward = verdicts(end)
                entry.update(end_words=end, end_labels=forward, end_backward_labels=backward)
                mine |= set(both_ways(end))
            entry["pairs"] = len(mine)
            job.ccp_outputs = entry
