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

What it says of an analysis (:meth:`LarsModel.read`) is saved as ``method_inputs["lars"]`` by the
stage its declaration (:data:`SPEC`) derives, so that the LARS methods
(:mod:`mars_demo.methods.lars`) are recomputed from the JSON alone: ``{"lars_model": id,
"question": ..., "answers": [greedy text, sample texts...], "number_of_bins": b, "edges": [...]
or None, "inputs": [LARS's answer segment of each answer], "logits": [one float per answer]}``.
An answer's segment is each LLM token's text (the saved token's text: the answer's characters
it covers) followed by the bin token of its probability, exp of its saved log-prob (temperature
1). An earlier analysis' entry is reused where the same model read the same segments.
"""

from __future__ import annotations

import math

from ..core.lars import lars_answer_text, probability_bin
from ..errors import ModelLoadError
from .pairs import PairClassifier, split_groups
from .spec import OptionalModel, ReadsAnswers


def bin_token(i: int) -> str:
    """The special token of probability bin ``i``.

    >>> bin_token(3)
    '[prob_token_3]'
    """
    return f"[prob_token_{i}]"


def segments(answers, number_of_bins: int, edges) -> list[str]:
    """LARS's answer segment of each answer (probabilities from its log-probs; one a hair above
    0, as answer sets accept, is probability 1)."""
    return [lars_answer_text(a.token_texts, [min(1.0, math.exp(lp)) for lp in a.logprobs],
                             edges, number_of_bins) for a in answers]


class LarsModel(PairClassifier, ReadsAnswers):
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
        (:meth:`~mars_demo.optional.pairs.PairClassifier.grouped_first_logits`)."""
        firsts = [q for q, texts in questions for _ in texts]
        seconds = [t for _, texts in questions for t in texts]
        sizes = [len(texts) for _, texts in questions]
        logits, said = self.grouped_first_logits(firsts, seconds,
                                                 "answers (with the question)", sizes)
        values = logits.tolist()
        if not all(math.isfinite(v) for v in values):  # broken weights
            raise ValueError(f"the LARS model {self.model_id} gave {values}")
        return split_groups(values, sizes, said)

    def read(self, items) -> list[tuple[dict, list[str]]]:
        """LARS's logits of each question's answers (:class:`~.spec.ReadsAnswers`): every
        question's segments in shared batches, sorted by length; each question's warnings
        count its own answers only."""
        inputs = [segments(answers, self.number_of_bins, self.edges) for _, answers in items]
        said = self.grouped_logits([(q, texts) for (q, _), texts in zip(items, inputs)])
        out = []
        for (_, answers), texts, (logits, warnings) in zip(items, inputs, said):
            partial = sum(1 for a in answers for t in a.token_texts if t == "")
            if partial:
                total = sum(len(a.token_texts) for a in answers)
                warnings.append(
                    f"LARS read {partial} of {total} tokens of these answers as empty text: each "
                    "is part of a character that the next token completes, so LARS saw only its "
                    "probability bin (LARS's own code reads such a token as the replacement "
                    "character).")
            out.append(({"number_of_bins": self.number_of_bins, "edges": self.edges,
                         "inputs": texts, "logits": logits}, warnings))
        return out

    @classmethod
    def same_reading(cls, entry: dict, question: str, answers) -> bool:
        """Whether the saved entry read the segments these answers give under its bins (their
        log-probs, not only their texts)."""
        try:
            return entry.get("inputs") == segments(answers, entry["number_of_bins"],
                                                   entry["edges"])
        except (KeyError, TypeError, ValueError):  # an entry of another shape: score again
            return False


SPEC = OptionalModel(
    field="lars", need="lars_model", label="LARS", saved="lars", holds="logits of the LARS model",
    model_key="lars_model", family="lars", output="lars_outputs", cls=LarsModel,
    default="duygunuryldz/LARS",
    help="LARS's trained scorer of the LARS methods (lars, lars_entropy, "
    "lars_semantic_entropy): a Hub id or a local directory; loaded only when one of them is "
    "asked for", page_label="LARS model")
