"""Encoding (first, second) text pairs for a cross-encoder, with truncation reported, and
batching them by length so that padding stays small."""

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


def tokenize_pairs(tokenizer, firsts: list[str], seconds: list[str] | None, max_length: int):
    """Tokenize text pairs once, unpadded: ``(encoding, truncated, unknown)``.

    ``encoding`` maps each of the tokenizer's fields (``input_ids``, ``attention_mask``, ...) to
    one list of ids per pair; batch them with :func:`pad_rows`. Pairs longer than
    ``max_length`` are tokenized again with truncation (longest text first), exactly as
    :func:`encode_pairs` cuts them, and listed in ``truncated``; ``unknown`` lists the pairs
    holding the tokenizer's unknown token ([UNK]).
    """
    enc = dict(tokenizer(firsts, seconds, truncation=False, padding=False))
    truncated = [i for i, ids in enumerate(enc["input_ids"]) if len(ids) > max_length]
    if truncated:
        cut = tokenizer([firsts[i] for i in truncated],
                        None if seconds is None else [seconds[i] for i in truncated],
                        truncation=True, max_length=max_length, padding=False)
        for key in enc:
            rows = list(enc[key])
            for k, i in enumerate(truncated):
                rows[i] = cut[key][k]
            enc[key] = rows
    unk = tokenizer.unk_token_id
    unknown = [] if unk is None else [i for i, ids in enumerate(enc["input_ids"]) if unk in ids]
    return enc, truncated, unknown


def pad_rows(tokenizer, enc: dict, rows: list[int]):
    """The rows ``rows`` of a :func:`tokenize_pairs` encoding as padded tensors, padded the way
    the tokenizer pads (its side, pad id and pad token type); padding is masked."""
    import torch

    width = max(len(enc["input_ids"][i]) for i in rows)
    fill = {"input_ids": tokenizer.pad_token_id or 0, "attention_mask": 0,
            "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0) or 0}
    left = getattr(tokenizer, "padding_side", "right") == "left"
    out = {}
    for key, values in enc.items():
        if key not in fill:
            continue
        padded = []
        for i in rows:
            row = list(values[i])
            pad = [fill[key]] * (width - len(row))
            padded.append(pad + row if left else row + pad)
        out[key] = torch.tensor(padded, dtype=torch.long)
    return out


def length_batches(lengths: list[int], most_pairs: int = 64,
                   most_tokens: int = 8192) -> list[list[int]]:
    """Indices of ``lengths`` (tokens per pair) grouped into batches for the forward passes:
    sorted by length (stable), each batch at most ``most_pairs`` pairs and at most
    ``most_tokens`` padded tokens (pairs x its longest pair; a pair longer than that alone is a
    batch of one).

    >>> length_batches([9, 3, 8, 3, 4], most_pairs=2)
    [[1, 3], [4, 2], [0]]
    >>> length_batches([5, 5, 5, 20], most_tokens=20)
    [[0, 1, 2], [3]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending, so the newest pair is the batch's longest
        if batch and (len(batch) == most_pairs or (len(batch) + 1) * lengths[i] > most_tokens):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches
