"""Encoding (first, second) text pairs for a cross-encoder, with truncation reported; batching
them by length so that padding stays small; and a sequence classifier whose first logit is read
over such pairs (:class:`PairClassifier`)."""

from __future__ import annotations

BATCH = 32  # pairs per forward pass
MAX_LENGTH = 512  # the window when the tokenizer states none (or an absurd one)
#: padded tokens per forward pass of a pair classifier on a GPU, where a large batch keeps it busy
BATCH_TOKENS = 8192
#: ... and on a CPU, where a batch whose activations outgrow the caches costs more per pair: on 2
#: cores, deberta-base over 30 pairs of 145-168 tokens took 6.6 s in one batch and 4.45 s in
#: batches of 1536 tokens (9 pairs), the same verdicts (docs/benchmark.md, "NLI batches on a CPU")
CPU_BATCH_TOKENS = 1536


def tokens_per_batch(device) -> int:
    """The padded tokens of one forward pass of a pair classifier on ``device`` (a torch device):
    :data:`CPU_BATCH_TOKENS` on a CPU, :data:`BATCH_TOKENS` elsewhere."""
    return CPU_BATCH_TOKENS if device.type == "cpu" else BATCH_TOKENS


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


def split_groups(values: list, sizes: list[int],
                 said: list[list[str]]) -> list[tuple[list, list[str]]]:
    """``values`` cut into consecutive groups of ``sizes``, each with its warnings ``said``."""
    out, at = [], 0
    for n, lines in zip(sizes, said):
        out.append((values[at:at + n], lines))
        at += n
    return out


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

    def grouped_first_logits(self, firsts: list[str], seconds: list[str], items: str,
                             sizes: list[int]):
        """The first output logit (a float64 tensor, one per pair, in the order given) over the
        ``(first, second)`` pairs, and the warnings of each group of pairs: the pairs are
        ``sizes[0]`` pairs of the first group (one question's, say), then ``sizes[1]`` of the
        next, ... All are tokenized once and sorted by length into batches of at most
        :data:`BATCH` pairs and :func:`tokens_per_batch` padded tokens (:func:`length_batches`;
        padding is masked), so groups share forward passes; a group's warnings (pairs cut to
        fit the window, or holding characters the tokenizer does not know: one line each) count
        its own pairs only. ``items`` names what the pairs are, e.g. "text pairs"."""
        import torch

        if sum(sizes) != len(firsts):
            raise ValueError(f"the groups hold {sum(sizes)} pairs, not {len(firsts)}")
        out = torch.zeros(len(firsts), dtype=torch.float64)
        if not firsts:
            return out, [[] for _ in sizes]
        enc, truncated, unk = tokenize_pairs(self.tokenizer, firsts, seconds, self.max_length)
        device = next(self.model.parameters()).device
        for rows in length_batches([len(ids) for ids in enc["input_ids"]], BATCH,
                                   tokens_per_batch(device)):
            batch = pad_rows(self.tokenizer, enc, rows)
            with torch.no_grad():
                logits = self.model(**{k: v.to(device) for k, v in batch.items()}).logits
            out[rows] = logits[:, 0].double().cpu()
        said, at = [], 0
        for n in sizes:
            cut = sum(1 for i in truncated if at <= i < at + n)
            unknown = sum(1 for i in unk if at <= i < at + n)
            lines = []
            if cut:
                lines.append(f"{self.reader} read {cut} of {n} {items} cut to its window of "
                             f"{self.max_length} tokens.")
            if unknown:
                lines.append(f"{self.reader}'s tokenizer does not know some characters of "
                             f"{unknown} of {n} {items}; it read them as unknown tokens.")
            said.append(lines)
            at += n
        return out, said
