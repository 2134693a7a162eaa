"""The alignment stage: every answer's phrases mapped onto its LLM tokens, the token importance
u, the MARS weights and both scores of the answer (:func:`score_answer`)."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from ...answers import Answer
from ...core import alignment, scoring
from ...models.importance import PhraseScoring
from ...recipes import Resolved
from ...result import Phrase, ScoredAnswer, Scores, Token, end_token_of
from ...settings import Settings
from ..job import ScoringJob
from .base import ScoringContext


def score_answer(answer: Answer, ph: PhraseScoring, s: Settings,
                 rule: str = "default") -> tuple[ScoredAnswer, list[str]]:
    """One answer scored: its phrases aligned to its tokens (``rule``: "default" or the
    published code's "paper-code", see ``core.alignment.align_phrases``), the token importance
    u by the settings' method, normalization and distribution, the MARS weights and both
    scores. Returns the scored answer and the warnings (sentences) about it."""
    notes: list[str] = []
    n_tok = len(answer.token_ids)
    logprobs = np.asarray(answer.logprobs, dtype=float)
    paper = None
    if ph.spans and rule == "paper-code":
        # The published mapping: a whitespace-only token joins the phrase before it, phrases
        # sharing a token merge (mean of raw scores) before normalization.
        paper = alignment.align_phrases(answer.text, answer.spans, ph.spans, ph.scores, rule=rule)
        ph = dataclasses.replace(ph, spans=list(paper.phrase_spans),
                                 scores=list(paper.phrase_scores))
    phrases = [
        Phrase(text=answer.text[a:b], start=a, end=b, score=float(sc), weight=0.0)
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
        al = paper or alignment.align_tokens_to_phrases(answer.text, answer.spans, ph.spans)
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
        for i, k in enumerate(phrase_of_token):
            phrases[k].tokens.append(i)
            phrases[k].weight += float(u[i])
    w = scoring.mars_weights(u)
    stats = answer.token_stats
    tokens = [
        Token(id=i, text=answer.text[a:b] if b > a else txt, start=a, end=b, logprob=float(lp),
              **{key: values[n] for key, values in stats.items() if n < len(values)})
        for n, (i, (a, b), txt, lp) in enumerate(zip(answer.token_ids, answer.spans,
                                                     answer.token_texts, answer.logprobs))
    ]
    scored = ScoredAnswer(
        text=answer.text,
        tokens=tokens,
        phrases=phrases,
        token_importance=[float(x) for x in u],
        mars_weights=[float(x) for x in w],
        scores=Scores(
            length_normalized=scoring.length_normalized(logprobs),
            mars=scoring.mars(logprobs, u),
        ),
        phrase_of_token=phrase_of_token,
        finish_reason=answer.finish_reason,
        entropy_top_k=answer.entropy_top_k,
        end_token=end_token_of(answer),
    )
    return scored, notes


class AlignmentStage:
    """Every answer scored (``scored``: the greedy answer first, then the samples); one
    warning line per distinct warning, naming the answers it concerns."""

    name = "alignment"
    reads = ("answers", "phrasings")
    adds = ("scored",)
    progress = None  # quick: no progress stage of its own
    timing = "alignment"

    def models(self, jobs: Sequence[ScoringJob], run: Resolved) -> tuple[str, ...]:
        return ()

    def __call__(self, jobs: list[ScoringJob], ctx: ScoringContext) -> None:
        rule = ctx.run.recipe.alignment_rule
        for job in jobs:
            answers = job.answers
            scored = []
            notes_of: dict[str, list[str]] = {}  # one line per distinct warning, naming answers
            for name, answer, ph in zip(answers.names, answers.answers, job.phrasings):
                done, notes = score_answer(answer, ph, ctx.run.settings, rule)
                scored.append(done)
                for note in answer.warnings + ph.warnings + notes:
                    notes_of.setdefault(note, []).append(name)
            job.warnings += [f"{', '.join(who)}: {note}" for note, who in notes_of.items()]
            job.scored = scored
