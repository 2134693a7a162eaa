"""The similarity stage of the SAR methods (``token_sar``, ``sentence_sar``, ``sar``; Duan et
al. 2024, :mod:`mars_demo.core.sar`): what SAR's sentence-similarity cross-encoder says of each
job's sampled answers (the job's ``similarities``), saved in the analysis as
``method_inputs["sar"]`` so that the methods are recomputed from the JSON alone.

- ``token_similarities``: for each sample, one number per LLM token, the similarity of
  "question answer" with "question answer-without-that-token"
  (:func:`mars_demo.core.sar.relevance_pairs`); TokenSAR's relevance is one minus it.
- ``sample_similarity``: m x m, row j column k the similarity of "question s_j" with
  "question s_k" (both orders are asked: a cross-encoder need not be symmetric; 1 on the
  diagonal, which SentenceSAR does not read).
- ``greedy_similarity``: CoCoA's, ``{"forward": [g(greedy, s_k)], "backward": [g(s_k,
  greedy)]}``, the bare answers as lm-polygraph's ``greedy_cross_encoder_similarity.py`` pairs
  them (``greedy``: the greedy answer's text).

The model is loaded only when a SAR method is asked for and no earlier result of the same
answers (``reuse``) already holds what the same model said.
"""

from __future__ import annotations

from ...core.sar import relevance_pairs
from ...recipes import Resolved
from ..job import ScoringJob
from .base import OptionalModelStage, ScoringContext

KEY = "sar"  # the entry of the analysis' method_inputs


def pairs_of(question: str, samples, greedy: str) -> tuple[list[tuple[str, str]], list[int]]:
    """Every text pair of one job (the token pairs of each sample, the ordered sample pairs,
    then the greedy answer with each sample both ways) and how many token pairs each sample
    has."""
    pairs: list[tuple[str, str]] = []
    counts = []
    for answer in samples:
        spans = [(t.start, t.end) for t in answer.tokens]
        mine = relevance_pairs(question, answer.text, spans) if spans else []
        pairs.extend(mine)
        counts.append(len(mine))
    texts = [f"{question} {a.text}" for a in samples]
    pairs.extend((texts[j], texts[k]) for j in range(len(texts))
                 for k in range(len(texts)) if j != k)
    pairs.extend((greedy, a.text) for a in samples)
    pairs.extend((a.text, greedy) for a in samples)
    return pairs, counts


def entry_of(question: str, samples, greedy: str, values: list[float], counts: list[int],
             model_id: str) -> dict:
    """``method_inputs["sar"]`` from the similarities of :func:`pairs_of`'s pairs."""
    token_similarities, at = [], 0
    for n in counts:
        token_similarities.append(values[at:at + n])
        at += n
    m = len(samples)
    matrix = [[1.0] * m for _ in range(m)]
    for j in range(m):
        for k in range(m):
            if j != k:
                matrix[j][k] = values[at]
                at += 1
    forward, backward = values[at:at + m], values[at + m:at + 2 * m]
    return {"similarity_model": model_id, "question": question,
            "answers": [a.text for a in samples], "token_similarities": token_similarities,
            "sample_similarity": matrix, "greedy": greedy,
            "greedy_similarity": {"forward": list(forward), "backward": list(backward)}}


class SimilarityStage(OptionalModelStage):
    """SAR's similarities of each job's samples (``similarities``; ``{}`` when no SAR method
    is asked). The model's batches hold every job's pairs, sorted by length; each job's
    warnings count its own pairs only."""

    name = "similarity"
    reads = ("scored", "question", "reuse")
    adds = ("similarities",)
    progress = "uncertainty"
    timing = "methods"
    need, model, output = "similarity_model", "similarity", "similarities"

    def reused(self, job: ScoringJob, run: Resolved) -> dict | None:
        """The similarities of an earlier result of these answers and question by the model the
        settings name, else None."""
        if job.reuse is None:
            return None
        entry = job.reuse.method_inputs.get(KEY)
        if (entry and entry.get("similarity_model") == run.settings.similarity
                and entry.get("question") == job.question
                and entry.get("answers") == [a.text for a in job.answers.samples]
                and entry.get("greedy") == job.answers.greedy.text
                and entry.get("greedy_similarity") is not None):
            return dict(entry)
        return None

    def compute(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        groups = [pairs_of(job.question, job.scored[1:], job.scored[0].text) for job in jobs]
        said = ctx.model("similarity").grouped_similarities([pairs for pairs, _ in groups])
        for job, (_, counts), (values, warnings) in zip(jobs, groups, said):
            job.similarities = entry_of(job.question, job.scored[1:], job.scored[0].text, values,
                                        counts, ctx.run.settings.similarity)
            job.warnings.extend(w for w in warnings if w not in job.warnings)
