"""The sentence-similarity cross-encoder of SAR (:mod:`mars_demo.core.sar`): how alike two texts
are, a number in [0, 1].

The model is a sequence classifier with one output (``num_labels=1``), trained on STS-B
regression targets scaled to [0, 1], such as ``cross-encoder/stsb-roberta-large`` (the SAR
paper's). Its similarity of ``(a, b)`` is the sigmoid of that one logit, as the cross-encoder
is used in the paper's code (sentence-transformers' ``CrossEncoder`` applies that sigmoid to a
one-output model unless its config names another activation: such a model is refused, since its
output would not be a similarity in [0, 1]). It reads the pair as the tokenizer's two segments; pairs longer than
its window are cut to fit and reported. Load it through
:func:`mars_demo.models.registry.load_similarity`, which caches it.
"""

from __future__ import annotations

from ..errors import ModelLoadError
from ._pairs import length_batches, pad_rows, tokenize_pairs

BATCH = 32  # pairs per forward pass
MAX_LENGTH = 512  # the window when the tokenizer states none (or an absurd one)


def activation_of(config) -> str | None:
    """The output activation a sentence-transformers cross-encoder's config names, if any
    (``sbert_ce_default_activation_function``, or ``sentence_transformers.activation_fn`` in
    newer saves).

    >>> from types import SimpleNamespace
    >>> activation_of(SimpleNamespace(sbert_ce_default_activation_function="torch.nn.Identity"))
    'torch.nn.Identity'
    """
    named = getattr(config, "sbert_ce_default_activation_function", None)
    if named is None:
        named = (getattr(config, "sentence_transformers", None) or {}).get("activation_fn")
    return None if named is None else str(named)


class SimilarityModel:
    """A cross-encoder scoring text pairs (:meth:`similarities`); ``model_id`` names it."""

    def __init__(self, model, tokenizer, model_id: str) -> None:
        if int(getattr(model.config, "num_labels", 0)) != 1:
            raise ModelLoadError(
                f"the similarity model {model_id!r} has {model.config.num_labels} outputs; a "
                f"sentence-similarity cross-encoder has one (num_labels=1), e.g. "
                f"cross-encoder/stsb-roberta-large"
            )
        named = activation_of(model.config)
        if named is not None and named.rsplit(".", 1)[-1] != "Sigmoid":
            raise ModelLoadError(
                f"the similarity model {model_id!r} names the activation {named!r} for its "
                f"output; SAR reads the sigmoid of a cross-encoder's one logit (a similarity in "
                f"[0, 1]), e.g. cross-encoder/stsb-roberta-large"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        limit = getattr(tokenizer, "model_max_length", MAX_LENGTH) or MAX_LENGTH
        self.max_length = int(min(limit, MAX_LENGTH))

    @classmethod
    def from_pretrained(cls, source: str, model_id: str) -> "SimilarityModel":
        """Load the model saved in ``source`` (a Hub id or a directory), uncached; float32, on
        CUDA when there is one."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source)
        if torch.cuda.is_available():
            model = model.to("cuda")
        return cls(model.eval(), tokenizer, model_id)

    def similarities(self, pairs: list[tuple[str, str]],
                     warnings: list[str] | None = None) -> list[float]:
        """The similarity in [0, 1] of each ``(first, second)`` pair, in the order given. The
        pairs are tokenized once and sorted by length into batches of at most :data:`BATCH`
        (so padding stays small; padding is masked). When ``warnings`` is given, a pair cut to
        fit the model's window, or holding characters its tokenizer does not know, adds one
        line to it."""
        import torch

        if not pairs:
            return []
        enc, truncated, unk = tokenize_pairs(self.tokenizer, [a for a, _ in pairs],
                                             [b for _, b in pairs], self.max_length)
        cut, unknown = len(truncated), len(unk)
        out: list[float] = [0.0] * len(pairs)
        device = next(self.model.parameters()).device
        for rows in length_batches([len(ids) for ids in enc["input_ids"]], BATCH):
            batch = pad_rows(self.tokenizer, enc, rows)
            with torch.no_grad():
                logits = self.model(**{k: v.to(device) for k, v in batch.items()}).logits
            values = torch.sigmoid(logits[:, 0].double()).tolist()
            if not all(0.0 <= v <= 1.0 for v in values):  # NaN logits (broken weights)
                raise ValueError(f"the similarity model {self.model_id} gave {values}")
            for i, value in zip(rows, values):
                out[i] = value
        if warnings is not None:
            if cut:
                warnings.append(
                    f"The similarity model read {cut} of {len(pairs)} text pairs cut to its "
                    f"window of {self.max_length} tokens.")
            if unknown:
                warnings.append(
                    f"The similarity model's tokenizer does not know some characters of "
                    f"{unknown} of {len(pairs)} text pairs; it read them as unknown tokens.")
        return out
