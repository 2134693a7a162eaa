"""Encoding (first, second) text pairs for a cross-encoder, with truncation reported."""

from __future__ import annotations


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
