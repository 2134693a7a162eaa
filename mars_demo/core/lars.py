"""LARS's input text and output score (Yaldiz et al. 2024, "Do Not Design, Learn: A Trainable
Scoring Function for Uncertainty Estimation in Generative LLMs").

LARS is a trained scorer (a RoBERTa sequence classifier, Hugging Face id ``duygunuryldz/LARS``)
that reads the question and the answer's tokens, each followed by a special token naming the bin
of its probability, and outputs one logit: sigmoid(logit) is the probability that the answer is
correct. The format here is the one of the authors' library, TruthTorchLM 0.1.19
(``truth_methods/lars.py``: ``prepare_answer_text``, ``_find_bin``, ``tokenize_input``); the
model itself runs elsewhere. Feed the text as the SECOND segment of a pair encoding whose first
segment is the bare question (``tokenizer(question, text, truncation=True)``); the bin tokens
``[prob_token_0]`` ... are special tokens of LARS's tokenizer, so they stay whole.
"""

from __future__ import annotations

import numpy as np

from . import _validation as check


def probability_bin(probability: float, edges, number_of_bins: int) -> int:
    """The bin of a token probability, as LARS was trained (TruthTorchLM's ``_find_bin``).

    With ``edges`` (LARS's ``config.edges``: increasing quantiles of training probabilities):
    ``numpy.digitize(p, edges)``, i.e. the number of edges <= p, capped at
    ``number_of_bins - 1``. Without edges (``None``): ``int(p * number_of_bins)``, capped alike.

    Example: edges [0, 0.5, 0.9] over 3 bins.

    >>> [probability_bin(p, [0.0, 0.5, 0.9], 3) for p in (0.2, 0.5, 0.95)]
    [1, 2, 2]
    >>> probability_bin(0.3, None, 4)
    1
    """
    bins = _bin_count(number_of_bins)
    p = check.float_vector([probability], "probability")[0]
    if not 0 <= p <= 1:
        raise ValueError(f"probability = {p} is not in [0, 1]")
    if edges is None:
        return min(int(p * bins), bins - 1)
    cuts = check.float_vector(edges, "edges")
    steps = np.diff(cuts)
    if np.any(steps < 0):
        i = int(np.flatnonzero(steps < 0)[0])
        raise ValueError(f"edges must not decrease; edges[{i + 1}] = {cuts[i + 1]} < {cuts[i]}")
    return min(int(np.digitize(p, cuts, right=False)), bins - 1)


def lars_answer_text(token_texts, token_probabilities, edges, number_of_bins: int) -> str:
    """LARS's answer segment: each token's text followed by ``[prob_token_{bin}]``.

    ``token_texts`` are the answer's LLM tokens one by one as text (TruthTorchLM:
    ``tokenizer.decode([token])`` of each generated token, or an API's token strings);
    ``token_probabilities`` their probabilities (not log), temperature 1.

    Example:

    >>> lars_answer_text(["It", " is", " Mars"], [0.9, 0.6, 0.2], None, 4)
    'It[prob_token_3] is[prob_token_2] Mars[prob_token_0]'
    """
    if isinstance(token_texts, str):
        raise ValueError(f"token_texts must be a sequence of strings, got {token_texts!r}")
    texts = [check.text(t, f"token_texts[{i}]") for i, t in enumerate(token_texts)]
    probabilities = check.float_vector(token_probabilities, "token_probabilities")
    check.same_length(texts, "token_texts", probabilities, "token_probabilities")
    return "".join(
        f"{text}[prob_token_{probability_bin(p, edges, number_of_bins)}]"
        for text, p in zip(texts, probabilities)
    )


def lars_log_score(logit: float) -> float:
    """LARS's answer score as a natural log: ``log sigmoid(logit)``, <= 0.

    The log of LARS's probability that the answer is correct. As a sequence score it can
    replace length-normalized or MARS scores in :mod:`mars_demo.core.uncertainty` (TruthTorchLM
    does so for its LARS entropy and semantic entropy); its negation is LARS's confidence
    uncertainty (higher = less trustworthy).

    >>> round(lars_log_score(0.0), 4)
    -0.6931
    """
    value = check.float_vector([logit], "logit")[0]
    return float(-np.logaddexp(0.0, -value))


def _bin_count(number_of_bins) -> int:
    if isinstance(number_of_bins, bool) or not isinstance(number_of_bins, (int, np.integer)):
        raise ValueError(f"number_of_bins must be an integer >= 1, got {number_of_bins!r}")
    if number_of_bins < 1:
        raise ValueError(f"number_of_bins must be an integer >= 1, got {number_of_bins!r}")
    return int(number_of_bins)
