"""LARS, the trained scorer of Yaldiz et al. 2024 (:mod:`mars_demo.core.lars`): one logit per
answer, sigmoid(logit) = the probability that the answer is correct.

The model is a sequence classifier with one output (``num_labels=1``; the released
``duygunuryldz/LARS`` is a RoBERTa-base) whose config names ``number_of_bins`` and, optionally,
``edges`` (the quantiles that bin a token probability; without them a probability p falls in bin
``int(p * bins)``), and whose tokenizer holds the bin tokens ``[prob_token_0]`` ...
``[prob_token_{bins-1}]`` as whole tokens. A model that lacks any of these is refused when it
loads: its logit would not be LARS's. It reads the bare question and the answer segment of
:func:`~mars_demo.core.lars.lars_answer_text` as the tokenizer's two segments; pairs longer than
its window are cut to fit and reported. Load it through
:func:`mars_demo.models.registry.load_optional`, which caches it.
"""

from __future__ import annotations

import math

from ..core.lars import probability_bin
from ..errors import ModelLoadError
from ._pairs import PairClassifier, split_groups


def bin_token(i: int) -> str:
    """The special token of probability bin ``i``.

    >>> bin_token(3)
    '[prob_token_3]'
    """
    return f"[prob_token_{i}]"


class LarsModel(PairClassifier):
    """LARS scoring answers (:meth:`logits`); ``model_id`` names it, ``number_of_bins`` and
    ``edges`` (None: even bins) say how it bins token probabilities."""

    reader = "LARS"

    def __init__(self, model, tokenizer, model_id: str) -> None:
        config = model.config
        if int(getattr(config, "num_labels", 0)) != 1:
            raise ModelLoadError(
                f"the LARS model {model_id!r} has {config.num_labels} outputs; LARS has one "
                f"(num_labels=1, the logit of a correct answer), e.g. duygunuryldz/LARS"
            )
        bins = getattr(config, "number_of_bins", None)
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
            raise ModelLoadError(
                f"the LARS model {model_id!r} has no number_of_bins (an integer >= 1) in its "
                f"config (got {bins!r}); LARS's config names how many probability bins its "
                f"input uses, e.g. duygunuryldz/LARS"
            )
        edges = getattr(config, "edges", None)
        try:
            if edges is not None:
                edges = [float(e) for e in edges]
            probability_bin(0.5, edges, bins)  # checks the edges (numbers, not decreasing)
        except (TypeError, ValueError) as err:
            raise ModelLoadError(
                f"the LARS model {model_id!r} has unusable edges in its config: {err}"
            ) from err
        missing = [bin_token(i) for i in range(bins)
                   if tokenizer.tokenize(bin_token(i)) != [bin_token(i)]]
        if missing:
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise ModelLoadError(
                f"the LARS model {model_id!r}'s tokenizer does not hold {shown} as whole tokens "
                f"({len(missing)} of its {bins} bin tokens); LARS reads each token probability "
                f"as one such special token, e.g. duygunuryldz/LARS"
            )
        super().__init__(model, tokenizer, model_id)
        self.number_of_bins = bins
        self.edges = edges

    def logits(self, question: str, answer_texts: list[str],
               warnings: list[str] | None = None) -> list[float]:
        """LARS's logit (float64) of each answer segment
        (:func:`~mars_demo.core.lars.lars_answer_text`, with this model's bins) after the bare
        ``question``. When ``warnings`` is given, inputs cut to fit the model's window, or
        holding characters its tokenizer does not know, add one line each
        (:meth:`grouped_logits` with one question)."""
        [(logits, said)] = self.grouped_logits([(question, list(answer_texts))])
        if warnings is not None:
            warnings.extend(said)
        return logits

    def grouped_logits(self, questions: list[tuple[str, list[str]]]
                       ) -> list[tuple[list[float], list[str]]]:
        """For each ``(question, answer segments)``: LARS's logit of each segment after the
        question, and that question's warnings; every question's inputs are sorted by length
        into shared batches
        (:meth:`~mars_demo.models._pairs.PairClassifier.grouped_first_logits`)."""
        firsts = [q for q, texts in questions for _ in texts]
        seconds = [t for _, texts in questions for t in texts]
        sizes = [len(texts) for _, texts in questions]
        logits, said = self.grouped_first_logits(firsts, seconds,
                                                 "answers (with the question)", sizes)
        values = logits.tolist()
        if not all(math.isfinite(v) for v in values):  # broken weights
            raise ValueError(f"the LARS model {self.model_id} gave {values}")
        return split_groups(values, sizes, said)
