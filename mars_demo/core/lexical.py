"""Lexical similarity among the sampled answers (Fomicheva et al. 2020; Kuhn et al. 2023).

The mean pairwise ROUGE-L F-measure of the sampled answers, as used as a baseline by Kuhn et al.
(ICLR 2023, "Semantic Uncertainty") and Lin, Trivedi and Sun (TMLR 2024). Uncertainty is its
negative: higher = less trustworthy. It reads only the answer texts.

ROUGE-L comes from the ``rouge-score`` package (imported on first use: it loads nltk). Its
tokenizer lowercases and keeps only ASCII letters and digits, so it suits English answers: an
answer with none of them (e.g. Chinese) scores 0 against every answer, even an identical one.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np


def rouge_l(first: str, second: str, use_stemmer: bool = False) -> float:
    """ROUGE-L F-measure of two texts, in [0, 1] (symmetric in its arguments).

    Example: "the cat sat" and "the cats sat" share 2 of 3 words (no stemming).

    >>> round(rouge_l("the cat sat", "the cats sat"), 4)
    0.6667
    >>> rouge_l("the cat sat", "the cats sat", use_stemmer=True)
    1.0
    """
    return _scorer(use_stemmer)(first, second)


def _scorer(use_stemmer: bool):
    """A function (first, second) -> ROUGE-L F-measure."""
    from rouge_score import rouge_scorer  # loads nltk (about 2 s): only when asked

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=bool(use_stemmer))
    return lambda first, second: float(scorer.score(first, second)["rougeL"].fmeasure)


def lexical_similarity(texts, use_stemmer: bool = False) -> float:
    """Negated mean pairwise ROUGE-L among the sampled answers (``lexical_similarity``).

    ``U = -(2 / (m (m - 1))) * sum_{i<j} ROUGE-L_F(s_i, s_j)`` over the m answers, within
    [-1, 0]; higher = less trustworthy. Every pair of samples counts, identical ones too (they
    score 1), as the papers define it and lm-polygraph computes it; the papers' code skips pairs
    of identical texts, so there repeated answers add no agreement. ROUGE-L's F-measure is
    symmetric, so unordered pairs give the mean of ordered ones. One answer has no pair: it
    agrees with itself, U = -1 (the similarity of 1 that Lin et al.'s code gives when it has
    no pair).

    ``use_stemmer=False`` (default) is the papers' code (Hugging Face ``evaluate``'s ROUGE,
    which does not stem); ``use_stemmer=True`` (Porter stemmer) is lm-polygraph's
    ``LexicalSimilarity("rougeL")``, which otherwise computes the same value.

    Args:
        texts: the m >= 1 sampled answers, strings.
        use_stemmer: stem words before matching (so "cats" matches "cat").

    Example: "Paris" and "Paris, France" have ROUGE-L F = 2/3; with "Lyon" the other two
    pairs score 0, so U = -(2/3) / 3.

    >>> round(lexical_similarity(["Paris", "Paris, France", "Lyon"]), 4)
    -0.2222
    """
    answers = _texts(texts)
    if len(answers) == 1:
        return -1.0
    score = _scorer(use_stemmer)
    similarities = [score(a, b) for a, b in combinations(answers, 2)]
    return 0.0 - float(np.mean(similarities))  # 0.0 - x: no -0.0


def _texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise ValueError(f"texts must be a sequence of answers, got one string {texts!r}")
    try:
        answers = list(texts)
    except TypeError as error:
        raise ValueError(f"texts must be a sequence of strings, got {texts!r}") from error
    if not answers:
        raise ValueError("texts is empty; expected at least one answer")
    for i, text in enumerate(answers):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] = {text!r} is not a string")
    return answers
