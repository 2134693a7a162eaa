"""The similarity stage of the SAR and CoCoA methods (``token_sar``, ``sentence_sar``, ``sar``;
Duan et al. 2024, :mod:`mars_demo.core.sar`; ``cocoa_*``, :mod:`mars_demo.core.cocoa`): what
the sentence-similarity cross-encoder says of each job's answers (the job's ``similarities``),
saved in the analysis as ``method_inputs["sar"]`` so that the methods are recomputed from the
JSON alone. The entry holds three parts, each only where an asked method reads it (the need of
the same name, :data:`mars_demo.methods.NEEDS`), so CoCoA asked alone sends the model its 2m
greedy pairs and none of SAR's token-drop pairs:

- ``token_similarities`` (TokenSAR, SAR): for each sample, one number per LLM token, the
  similarity of "question answer" with "question answer-without-that-token"
  (:func:`mars_demo.core.sar.relevance_pairs`); TokenSAR's relevance is one minus it.
- ``sample_similarity`` (SentenceSAR, SAR): m x m, row j column k the similarity of
  "question s_j" with "question s_k" (both orders are asked: a cross-encoder need not be
  symmetric; 1 on the diagonal, which SentenceSAR does not read).
- ``greedy_similarity`` (CoCoA): ``{"forward": [g(greedy, s_k)], "backward": [g(s_k,
  greedy)]}``, the bare answers as lm-polygraph's ``greedy_cross_encoder_similarity.py`` pairs
  them (``greedy``: the greedy answer's text).

The model is loaded only when such a method is asked for and no earlier result of the same
answers (``reuse``) already holds every part asked, by the same model; the parts an earlier
result holds are kept and only the missing ones computed.
"""

from __future__ import annotations

from ...core.sar import relevance_pairs
from ...methods import METHODS
from ...optional.similarity import SPEC
from ...recipes import Resolved
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext

KEY = SPEC.saved  # the entry of the analysis' method_inputs ("sar")
#: the entry's parts, in the order their pairs are sent; each is also the need of its readers
PARTS = ("token_similarities", "sample_similarity", "greedy_similarity")


def parts_asked(run: Resolved) -> tuple[str, ...]:
    """The parts (:data:`PARTS`) that the asked methods read."""
    needs = set().union(*(METHODS[m].needs for m in run.settings.method_ids))
    return tuple(p for p in PARTS if p in needs)


def pairs_of(question: str, samples, greedy: str,
             parts=PARTS) -> tuple[list[tuple[str, str]], list[int]]:
    """The text pairs of one job's ``parts`` (the token pairs of each sample, the ordered
    sample pairs, then the greedy answer with each sample both ways) and how many token pairs
    each sample has (none where ``token_similarities`` is not asked)."""
    pairs: list[tuple[str, str]] = []
    counts = []
    if "token_similarities" in parts:
        for answer in samples:
            spans = [(t.start, t.end) for t in answer.tokens]
            mine = relevance_pairs(question, answer.text, spans) if spans else []
            pairs.extend(mine)
            counts.append(len(mine))
    if "sample_similarity" in parts:
        texts = [f"{question} {a.text}" for a in samples]
        pairs.extend((texts[j], texts[k]) for j in range(len(texts))
                     for k in range(len(texts)) if j != k)
    if "greedy_similarity" in parts:
        pairs.extend((greedy, a.text) for a in samples)
        pairs.extend((a.text, greedy) for a in samples)
    return pairs, counts


def entry_of(question: str, samples, greedy: str, values: list[float], counts: list[int],
             model_id: str, parts=PARTS) -> dict:
    """``method_inputs["sar"]`` from the similarities of :func:`pairs_of`'s pairs (the same
    ``parts``)."""
    entry: dict = {"similarity_model": model_id, "question": question,
                   "answers": [a.text for a in samples], "greedy": greedy}
    at, m = 0, len(samples)
    if "token_similarities" in parts:
        entry["token_similarities"] = []
        for n in counts:
            entry["token_similarities"].append(values[at:at + n])
            at += n
    if "sample_similarity" in parts:
        matrix = [[1.0] * m for _ in range(m)]
        for j in range(m):
            for k in range(m):
                if j != k:
                    matrix[j][k] = values[at]
                    at += 1
        entry["sample_similarity"] = matrix
    if "greedy_similarity" in parts:
        entry["greedy_similarity"] = {"forward": list(values[at:at + m]),
                                      "backward": list(values[at + m:at + 2 * m])}
        at += 2 * m
    if at != len(values):
        raise ValueError(f"{len(values)} similarities for {at} pairs")
    return entry


class SimilarityStage(OptionalModelStage):
    """The similarity model's parts of each job (``similarities``; ``{}`` when no method reads
    one). The model's batches hold every job's pairs, sorted by length; each job's warnings
    count its own pairs only."""

    name = "similarity"
    reads = ("scored", "question", "reuse")
    spec = SPEC
    adds = (SPEC.output,)

    @staticmethod
    def _earlier(job: ScoringJob, run: Resolved) -> dict:
        """The entry of an earlier result of these answers, question and greedy answer by the
        model the settings name, else ``{}``."""
        if job.reuse is None:
            return {}
        entry = job.reuse.method_inputs.get(KEY)
        if (entry and entry.get("similarity_model") == run.settings.similarity
                and entry.get("question") == job.question
                and entry.get("answers") == [a.text for a in job.answers.samples]
                and entry.get("greedy") == job.answers.greedy.text):
            return dict(entry)
        return {}

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        """An earlier result's entry of these answers by this model that holds every part
        asked now, else None."""
        entry = self._earlier(job, run)
        if entry and all(entry.get(p) is not None for p in parts_asked(run)):
            return entry
        return None

    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        asked = parts_asked(ctx.run)
        earlier = [self._earlier(job, ctx.run) for job in jobs]
        missing = [tuple(p for p in asked if e.get(p) is None) for e in earlier]
        groups = [pairs_of(job.question, job.scored[1:], job.scored[0].text, parts)
                  for job, parts in zip(jobs, missing)]
        said = ctx.model("similarity").grouped_similarities([pairs for pairs, _ in groups])
        for job, old, parts, (_, counts), (values, warnings) in zip(
                jobs, earlier, missing, groups, said):
            new = entry_of(job.question, job.scored[1:], job.scored[0].text, values, counts,
                           ctx.run.settings.similarity, parts)
            job.similarities = {**old, **new}
            job.warnings.extend(w for w in warnings if w not in job.warnings)
