"""Encoding (first, second) text pairs for a cross-encoder, with truncation reported, and a
sequence classifier whose first logit is read over such pairs (:class:`PairClassifier`)."""

from __future__ import annotations

BATCH = 32  # pairs per forward pass
MAX_LENGTH = 512  # the window when the tokenizer states none (or an absurd one)


def encode_pairs(tokenizer, firsts: list[str], seconds: list[str] | None, max_length: int):
    """Tokenize text pairs into padded tensors of at most ``max_length`` tokens.

    With ``seconds=None`` each of ``firsts`` is one single-segment text instead of a pair.

    Returns ``(encoding, truncated, unknown)``: ``truncated`` lists the indices of the pairs that
    were longer than ``max_length`` and were cut to fit (longest text first), ``unknown`` those
    whose tokens include the tokenizer's unknown token ([UNK]: characters it cannot represent).
    The common case, where every pair fits, tokenizes once.
    """
    enc = tokenizer(firsts, seconds, truncation=False, padding=True, return_tensors="pt")
    truncated: list[int] = []
    if enc["input_ids"].shape[1] > max_length:
        lengths = enc["attention_mask"].sum(dim=1).tolist()
        truncated = [i for i, n in enumerate(lengths) if n > max_length]
        enc = tokenizer(
            firsts, seconds, truncation=True, max_length=max_length, padding=True,
            return_tensors="pt",
        )
    unk = tokenizer.unk_token_id
    if unk is None:
        return enc, truncated, []
    unknown = (enc["input_ids"] == unk).any(dim=1).nonzero().flatten().tolist()
    return enc, truncated, unknown



class PairClassifier:
    """A sequence classifier with one output read over text pairs (SAR's cross-encoder, LARS):
    the model, its tokenizer, the name it was asked by (``model_id``) and its window
    (``max_length``: the tokenizer's, at most :data:`MAX_LENGTH`)."""

    reader = "The model"  # how a warning names it

    def __init__(self, model, tokenizer, model_id: str) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        limit = getattr(tokenizer, "model_max_length", MAX_LENGTH) or MAX_LENGTH
        self.max_length = int(min(limit, MAX_LENGTH))

    @classmethod
    def from_pretrained(cls, source: str, model_id: str):
        """Load the model saved in ``source`` (a Hub id or a directory), uncached; float32, on
        CUDA when there is one."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source)
        if torch.cuda.is_available():
            model = model.to("cuda")
        return cls(model.eval(), tokenizer, model_id)

    def first_logits(self, firsts: list[str], seconds: list[str], items: str,
                     warnings: list[str] | None = None):
        """The first output logit (a float64 tensor, one per pair) over the ``(first, second)``
        pairs, :data:`BATCH` pairs per forward pass. When ``warnings`` is given, pairs cut to
        fit the window, or holding characters the tokenizer does not know, add one line each
        (``items`` names what the pairs are, e.g. "text pairs")."""
        import torch

        out, cut, unknown = [], 0, 0
        device = next(self.model.parameters()).device
        for start in range(0, len(firsts), BATCH):
            enc, truncated, unk = encode_pairs(self.tokenizer, firsts[start:start + BATCH],
                                               seconds[start:start + BATCH], self.max_length)
            cut, unknown = cut + len(truncated), unknown + len(unk)
            with torch.no_grad():
                logits = self.model(**{k: v.to(device) for k, v in enc.items()}).logits
            out.append(logits[:, 0].double().cpu())
        if warnings is not None:
            if cut:
                warnings.append(
                    f"{self.reader} read {cut} of {len(firsts)} {items} cut to its window of "
                    f"{self.max_length} tokens.")
            if unknown:
                warnings.append(
                    f"{self.reader}'s tokenizer does not know some characters of {unknown} of "
                    f"{len(firsts)} {items}; it read them as unknown tokens.")
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)
