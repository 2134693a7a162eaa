"""From generated token ids to answer text: the incremental decoder that gives every token its
characters, where an answer ends (stop strings), how its text is trimmed, and the streamer that
reports the greedy answer as it grows.

Shared by both LLM adapters (a server's answer is cut and trimmed exactly as an in-process one).
The tokenizer is passed in; nothing here imports torch or transformers.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..answers import Answer


class IncrementalDecoder:
    """Decode tokens one at a time into text pieces whose concatenation is the full text.

    Each step decodes a window of at most a few tokens (the previous piece as context, so that
    tokenizers which drop a leading space keep it right), so offsets cost O(L), not O(L^2).
    A token that only completes part of a multi-byte character yields an empty piece; the token
    that completes the character carries it.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window
        self.read = 0  # tokens before this are already turned into text

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            piece = after[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)
            return piece
        return ""

    def flush(self) -> str:
        """Text of tokens still held back (an incomplete character at the very end)."""
        if self.read == len(self.ids):
            return ""
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return after[len(before) :]


def cut_answer(pieces: list[str], stop_strings: Sequence[str],
                keep_stop: bool = False) -> tuple[int, int | None]:
    """Find where the answer ends at the first stop string.

    Returns (number of tokens kept, character position where the answer text ends, or None when
    no stop string occurs). By default the stop string is not part of the answer: the token
    holding its start is dropped with all after it, unless it also holds answer characters before
    the stop string (then it stays and its text is clipped). With ``keep_stop`` the stop string
    ends the answer and belongs to it (the published MARS code kept its "." end-of-sequence token,
    scored): every token that starts before the stop string's end is kept, and the text ends
    right after the stop string.
    """
    text = "".join(pieces)
    hits = [(text.find(s), -len(s), s) for s in stop_strings if s and s in text]
    if not hits:
        return len(pieces), None
    cut, _, stop = min(hits)  # the earliest; the longest of those starting there
    if keep_stop:
        cut += len(stop)
    pos = 0
    for i, piece in enumerate(pieces):
        if keep_stop:
            if pos >= cut:
                return i, cut
        elif pos + len(piece) > cut:
            return (i + 1 if pos < cut else i), cut
        pos += len(piece)
    return len(pieces), cut  # keep_stop with the stop string at the very end


def trim_answer(pieces: list[str], cut: int | None, finish: str
                ) -> tuple[str, list[tuple[int, int]], list[str], str]:
    """The answer text of the kept token ``pieces``: cut at character ``cut`` (a stop string)
    and stripped of surrounding whitespace, each token's span shifted into it, and the warnings
    the answer's shape calls for (empty, cut off at the token limit, by ``finish``).

    Returns (stripped text, spans, warnings, the text before stripping)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        spans.append((pos, pos + len(piece)))
        pos += len(piece)
    text = "".join(pieces)
    if cut is not None:
        text = text[:cut]
        spans = [(min(a, cut), min(b, cut)) for a, b in spans]
    # Strip surrounding whitespace and shift offsets into the stripped text.
    lead = len(text) - len(text.lstrip())
    stripped = text.strip()
    end = len(stripped)
    spans = [(max(0, min(a - lead, end)), max(0, min(b - lead, end))) for a, b in spans]
    warnings = []
    if not stripped:
        warnings.append(
            "The model gave an empty answer (only whitespace); its score is the probability of "
            "that whitespace."
        )
    if finish == "length":
        warnings.append(
            "The answer hit the max-new-tokens limit and was cut off; raise max new tokens for a "
            "complete answer."
        )
    return stripped, spans, warnings, text


def build_answer(
    tokenizer,
    token_ids: Sequence[int],
    logprobs: Sequence[float],
    eos_ids: set[int],
    stop_strings: Sequence[str],
    keep_stop: bool = False,
) -> Answer:
    """Turn generated ids (prompt excluded) into an :class:`Answer` with exact offsets.

    The answer ends before the first end-of-sequence token, which is not scored, and at the first
    stop string: before it (not scored) or, with ``keep_stop``, after it (its token is kept and
    scored, see :func:`cut_answer`). An answer that ended on the end-of-sequence token keeps it
    on record as its ``end_token`` (id, text, log-prob), at index ``len(answer.logprobs)`` of
    the generated ids.
    """
    ids = [int(t) for t in token_ids]
    n = next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))
    finish = "stop" if n < len(ids) else "length"
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.push(t) for t in ids[:n]]
    tail = decoder.flush()
    if tail and pieces:
        pieces[-1] += tail
    keep, cut = cut_answer(pieces, stop_strings, keep_stop)
    if cut is not None:
        finish = "stop"
    if keep == 0:
        # The model stopped at once: the answer is empty and its probability is that of
        # stopping here, so its only scored token is the stop itself.
        return _empty_answer(tokenizer, ids[0], logprobs[0], finish)
    stripped, spans, warnings, _ = trim_answer(pieces[:keep], cut, finish)
    ended = cut is None and n < len(ids) and n < len(logprobs)  # on the end-of-sequence token
    return Answer(
        text=stripped,
        token_ids=ids[:keep],
        token_texts=[stripped[a:b] for a, b in spans],
        spans=spans,
        logprobs=[float(x) for x in logprobs[:keep]],
        finish_reason=finish,
        warnings=warnings,
        end_token=({"id": ids[n], "text": tokenizer.decode([ids[n]], skip_special_tokens=False),
                    "logprob": float(logprobs[n])} if ended else None),
    )


def _empty_answer(tokenizer, token_id: int, logprob: float, finish: str) -> Answer:
    piece = tokenizer.decode([token_id], skip_special_tokens=False)
    return Answer(
        text="",
        token_ids=[int(token_id)],
        token_texts=[piece],
        spans=[(0, 0)],
        logprobs=[float(logprob)],
        finish_reason=finish,
        warnings=[
            "The model gave an empty answer (it stopped at once); its score is the probability "
            f"of stopping with {piece!r}."
        ],
    )


class TextStreamer:
    """A ``generate`` streamer that reports the greedy answer's text as it grows.

    ``generate`` hands it the whole batch (one new token per row and step); the greedy answer is
    row 0, the other rows are ignored. The answer is reported complete (``on_text`` with its final
    text, cut as :func:`build_answer` cuts it) as soon as row 0 ends at an end-of-sequence
    token or a stop string, even while the sampled rows go on; later tokens of row 0 (padding)
    are ignored.
    """

    def __init__(self, tokenizer, on_text: Callable[[str], None], *, eos_ids: set[int] = frozenset(),
                 stop_strings: Sequence[str] = (), keep_stop: bool = False) -> None:
        self.decoder = IncrementalDecoder(tokenizer)
        self.on_text = on_text
        self.eos_ids = set(eos_ids)
        self.stop_strings = tuple(stop_strings)
        self.keep_stop = keep_stop
        self.pieces: list[str] = []
        self.prompt_seen = False
        self.done = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def put(self, value) -> None:
        if not self.prompt_seen:  # the first call carries the prompt
            self.prompt_seen = True
            return
        row = value[0] if value.dim() > 1 else value[:1]  # (batch,) per step; row 0 = greedy
        for t in row.reshape(-1).tolist():
            self.push(int(t))

    def push(self, token_id: int) -> None:
        """One more token of the greedy answer (a backend that decodes its own steps calls
        this; ``generate`` calls :meth:`put`)."""
        if self.done:
            return
        if token_id in self.eos_ids:
            self._finish()
            return
        piece = self.decoder.push(token_id)
        if piece:
            self.pieces.append(piece)
            if self.stop_strings and cut_answer(
                self.pieces, self.stop_strings, self.keep_stop
            )[1] is not None:
                self._finish()
                return
            self.on_text(self.text.strip())

    def _finish(self) -> None:
        """Report the final text: all tokens so far (and any held-back partial character), cut
        at the first stop string."""
        self.done = True
        tail = self.decoder.flush()
        if tail:
            self.pieces.append(tail)
        cut = cut_answer(self.pieces, self.stop_strings, self.keep_stop)[1]
        self.on_text((self.text if cut is None else self.text[:cut]).strip())

    def end(self) -> None:
        if not self.done:
            self._finish()
