"""The sentence-similarity cross-encoder of SAR (:mod:`mars_demo.core.sar`): how alike two texts
are, a number in [0, 1].

The model is a sequence classifier with one output (``num_labels=1``), trained on STS-B
regression targets scaled to [0, 1], such as ``cross-encoder/stsb-roberta-large`` (the SAR
paper's). Its similarity of ``(a, b)`` is the sigmoid of that one logit, as the cross-encoder
is used in the paper's code (sentence-transformers' ``CrossEncoder`` applies that sigmoid to a
one-output model unless its config names another activation: such a model is refused, since its
output would not be a similarity in [0, 1]). It reads the pair as the tokenizer's two segments;
pairs longer than its window are cut to fit and reported. Load it through
:func:`mars_demo.models.registry.load_optional`, which caches it. Its declaration, :data:`SPEC`,
is the ``similarity`` option's; its stage is :mod:`mars_demo.engine.stages.similarity` (the
parts of its entry each method reads).
"""

from __future__ import annotations

from ..errors import ModelLoadError
from .pairs import PairClassifier, split_groups
from .spec import OptionalModel


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


class SimilarityModel(PairClassifier):
    """A cross-encoder scoring text pairs (:meth:`similarities`); ``model_id`` names it."""

    reader = "The similarity model"

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
        super().__init__(model, tokenizer, model_id)

    def similarities(self, pairs: list[tuple[str, str]],
                     warnings: list[str] | None = None) -> list[float]:
        """The similarity in [0, 1] of each ``(first, second)`` pair. When ``warnings`` is
        given, pairs cut to fit the model's window, or holding characters its tokenizer does not
        know, add one line each (:meth:`grouped_similarities` with one group)."""
        [(values, said)] = self.grouped_similarities([pairs])
        if warnings is not None:
            warnings.extend(said)
        return values

    def grouped_similarities(self, groups: list[list[tuple[str, str]]]
                             ) -> list[tuple[list[float], list[str]]]:
        """Each group's similarities in [0, 1] (one per pair, in order) and its warnings, with
        every group's pairs sorted by length into shared batches
        (:meth:`~mars_demo.optional.pairs.PairClassifier.grouped_first_logits`)."""
        import torch

        pairs = [pair for group in groups for pair in group]
        logits, said = self.grouped_first_logits([a for a, _ in pairs], [b for _, b in pairs],
                                                 "text pairs", [len(g) for g in groups])
        out = torch.sigmoid(logits).tolist()
        if not all(0.0 <= v <= 1.0 for v in out):  # NaN logits (broken weights)
            raise ValueError(f"the similarity model {self.model_id} gave {out}")
        return split_groups(out, [len(g) for g in groups], said)


SPEC = OptionalModel(
    field="similarity", need="similarity_model", label="similarity (SAR)", saved="sar",
    holds="similarities of the SAR cross-encoder", model_key="similarity_model", family="sar",
    output="similarities", cls=SimilarityModel, default="cross-encoder/stsb-roberta-large",
    help="sentence-similarity cross-encoder of the SAR and CoCoA methods (token_sar, "
    "sentence_sar, sar, cocoa_msp, cocoa_ppl, cocoa_mte): a Hub id or a local directory; "
    "loaded only when one of them is asked for",
    page_label="Similarity model",
    parts=(("token_similarities", "token-drop similarities of the similarity model "
            "(SAR's token relevance)"),
           ("sample_similarity", "similarities of the sampled answers with each other"),
           ("greedy_similarity", "similarities of the greedy answer with the samples")))
