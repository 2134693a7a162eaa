"""Parsing the answers of an OpenAI-compatible ``/v1/completions`` server: the choice's text,
its tokens and their log-probs, the characters each token covers, and the answer cut at its stop
string exactly as an in-process answer is (:mod:`mars_demo.models.decoding`).

When the server returns its tokens as ids (vLLM's ``return_tokens_as_token_ids``: "token_id:N")
and the served model's tokenizer is known here, the answer is decoded from those ids exactly as an
in-process answer is (the same decoder, the same text, token pieces and ids; a special token such as
"<|endoftext|>" generated inside the answer is in its text). Otherwise token texts and character
spans come from the server's ``tokens`` / ``text_offset``, checked against the returned text; a
token that is only part of a UTF-8 character has an empty span, and the token that completes the
character carries it (as in-process). Pure Python: no HTTP here (:mod:`mars_demo.models.endpoint`
sends the requests).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..answers import Answer
from ..errors import EndpointError
from .decoding import IncrementalDecoder, cut_answer, trim_answer

_TOKEN_ID = re.compile(r"token_id:(\d+)")


@dataclass
class ServerChoice:
    """One parsed ``/completions`` choice (its answer as the server returned it), before the
    stop strings are applied."""

    text: str  # the text the server returned
    pieces: list[str]  # per token: its characters of ``text`` (tokens past its end: own string)
    in_text: int  # tokens [0, in_text) lie inside ``text``
    logprobs: list[float]
    finish_reason: str  # the server's
    token_ids: list[int] | None = None  # when the server gave them (see the module doc)
    textless: list[int] | None = None  # tokens in the text without text of their own
    # per token, the server's top log-probs ({token text: logprob}); None: not returned
    top_logprobs: list[dict[str, float] | None] | None = None


def _bad(base_url: str, what: str) -> EndpointError:
    return EndpointError(
        f"The LLM server at {base_url} returned {what}; MARS needs the token log-probs of "
        "/v1/completions (`logprobs`), which vLLM and llama.cpp's server return: check the server "
        "and its version."
    )


def parse_choice(data: Any, base_url: str, tokenizer: Any = None) -> ServerChoice:
    """The choice of a ``/completions`` answer; ``tokenizer`` (the served model's, when known)
    decodes tokens the server returned as ids."""
    try:
        choice = data["choices"][0]
        text = choice["text"]
        finish = choice.get("finish_reason") or "stop"
    except (KeyError, IndexError, TypeError):
        raise _bad(base_url, "a completion without choices or text") from None
    if not isinstance(text, str):
        raise _bad(base_url, "a completion whose text is not a string")
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        raise _bad(base_url, "no token log-probs")
    tokens, offsets, values = lp.get("tokens"), lp.get("text_offset"), lp.get("token_logprobs")
    if not (isinstance(tokens, list) and isinstance(values, list) and len(tokens) == len(values)):
        raise _bad(base_url, "malformed token log-probs (tokens and token_logprobs differ)")
    if not all(isinstance(t, str) for t in tokens):
        raise _bad(base_url, "malformed token log-probs (a token is not a string)")
    try:
        logprobs = [float(v) for v in values]
    except (TypeError, ValueError):
        raise _bad(base_url, "a token without a log-prob") from None
    if finish not in ("stop", "length"):
        raise EndpointError(
            f"The LLM server at {base_url} ended an answer with finish_reason {finish!r}; "
            "retry, or check the server's log."
        )
    ids = token_ids_of(tokens) if tokenizer is not None else None
    tops = _top_logprobs(lp.get("top_logprobs"), len(tokens), tokenizer)
    if ids is not None:
        choice_ = _choice_of_ids(text, ids, logprobs, finish, tokenizer, base_url)
        choice_.top_logprobs = tops
        return choice_
    starts = _token_starts(text, tokens, offsets)
    if starts is None:
        raise _bad(base_url, "token texts and offsets that do not match the answer text (with "
                             "vLLM: a special token it left out of the text?)")
    # Tokens inside the text: those starting before its end, and empty ones at its very end (a
    # lone byte of a character the server could not render). A non-empty token at or past the
    # end holds the stop string or is an end-of-sequence token the text does not show.
    n_in = 0
    for tok, a in zip(tokens, starts):
        if a > len(text) or (a == len(text) and clean_token(tok)):
            break
        n_in += 1
    pieces = []
    for i, (tok, a) in enumerate(zip(tokens, starts)):
        if i < n_in:
            b = starts[i + 1] if i + 1 < n_in else len(text)
            piece = text[a:b]
            if i == n_in - 1 and len(tok) > len(piece) and tok.startswith(piece):
                piece = tok  # the token runs past the returned text: the stop string is in it
            pieces.append(piece)
        else:
            pieces.append(tok)
    return ServerChoice(text=text, pieces=pieces, in_text=n_in, logprobs=logprobs,
                        finish_reason=finish, textless=_textless(tokens, pieces, n_in),
                        top_logprobs=tops)


def _top_logprobs(tops: Any, n: int, tokenizer: Any) -> list[dict[str, float] | None] | None:
    """The server's top log-probs of each token as ``{text: logprob}`` (tokens returned as
    "token_id:N" decoded with ``tokenizer``); None when it returned none, or not one per token."""
    if not isinstance(tops, list) or len(tops) != n:
        return None
    out: list[dict[str, float] | None] = []
    for top in tops:
        if not isinstance(top, dict) or not top:
            out.append(None)
            continue
        entry: dict[str, float] = {}
        for key, value in top.items():
            try:
                v = float(value)
            except (TypeError, ValueError):
                continue
            m = _TOKEN_ID.fullmatch(str(key))
            if m is not None and tokenizer is not None:
                key = tokenizer.decode([int(m.group(1))], skip_special_tokens=False)
            entry[str(key)] = max(entry.get(str(key), -math.inf), v)
        out.append(entry or None)
    return out


def token_stats_of(answer: ServerChoice, pieces: list[str], keep: int,
                   alternatives: int) -> tuple[dict[str, list], int | None]:
    """The kept tokens' entropies from the server's top log-probs (:func:`~mars_demo.core.
    token_level.top_k_entropy`: the rest of the mass one outcome, a lower bound) and, with
    ``alternatives``, their top alternatives (the token first); and the k the server returned.
    Nothing when it returned no top log-probs for some kept token."""
    from ..core.token_level import top_k_entropy

    tops = (answer.top_logprobs or [])[:keep]
    if keep == 0 or len(tops) < keep or any(t is None for t in tops):
        return {}, None
    stats: dict[str, list] = {"entropy": [top_k_entropy(list(t.values()))[0] for t in tops]}
    if alternatives:
        stats["alternatives"] = [_alternatives_of(piece, lp, top, alternatives)
                                 for piece, lp, top in zip(pieces, answer.logprobs, tops)]
    return stats, max(len(t) for t in tops)


def _alternatives_of(piece: str, logprob: float, top: dict[str, float], n: int) -> list[list]:
    """One token's top ``n`` alternatives from the server's top log-probs, the token first."""
    others = sorted(((k, v) for k, v in top.items() if k != piece), key=lambda kv: -kv[1])
    return [[piece, min(float(logprob), 0.0)]] + [[k, min(v, 0.0)] for k, v in others[:n - 1]]


def end_token_of(answer: ServerChoice, keep: int, alternatives: int) -> dict | None:
    """The end-of-sequence token a server's answer of ``keep`` tokens ended on, as
    :attr:`~mars_demo.answers.Answer.end_token`: the server's token right after the answer's
    text, with its log-prob and, where the server returned its top log-probs, its entropy
    (a lower bound, as the answer's own) and alternatives. None when the server returned no
    token past the text (llama.cpp's server leaves the end token out)."""
    from ..core.token_level import top_k_entropy

    if keep >= len(answer.pieces) or keep >= len(answer.logprobs) or not answer.pieces[keep]:
        return None
    piece, lp = answer.pieces[keep], float(answer.logprobs[keep])
    out: dict = {"id": (answer.token_ids or [None] * len(answer.pieces))[keep], "text": piece,
                 "logprob": min(lp, 0.0)}
    top = (answer.top_logprobs or [None] * len(answer.pieces))[keep]
    if top:
        out["entropy"] = top_k_entropy(list(top.values()))[0]
        if alternatives:
            out["alternatives"] = _alternatives_of(piece, lp, top, alternatives)
    return out


def _textless(tokens: list[str], pieces: list[str], n_in: int) -> list[int]:
    """The tokens inside the text that the server returned without any text of theirs: runs of
    empty token strings that neither end in a character (a split UTF-8 character: its last
    byte's token carries it) nor pass U+FFFD on to the next token. llama.cpp's server leaves out
    special tokens and bytes that form no character so; in-process they show as their text
    ("<|endoftext|>") or U+FFFD."""
    out: list[int] = []
    i = 0
    while i < n_in:
        if tokens[i] != "":
            i += 1
            continue
        j = i
        while j < n_in and tokens[j] == "":
            j += 1
        carried = j < n_in and pieces[j] != tokens[j] and pieces[j].startswith("\ufffd")
        if not carried and not any(pieces[i:j]):
            out += range(i, j)
        i = j
    return out


def token_ids_of(tokens: list[str]) -> list[int] | None:
    """The ids of tokens returned as "token_id:N" (all of them), else None."""
    ids = []
    for tok in tokens:
        m = _TOKEN_ID.fullmatch(tok)
        if m is None:
            return None
        ids.append(int(m.group(1)))
    return ids or None


def _choice_of_ids(text: str, ids: list[int], logprobs: list[float], finish: str, tokenizer,
                   base_url: str) -> ServerChoice:
    """The choice decoded from its token ids as in-process (:func:`~.decoding.build_answer`):
    an answer the server stopped at a special token (end of sequence) ends before it; a stop
    string is cut later, by :func:`to_answer`."""
    special = set(getattr(tokenizer, "all_special_ids", None) or ())
    special |= {i for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()
                if getattr(t, "special", False)}
    n_in = len(ids) - 1 if finish == "stop" and ids and ids[-1] in special else len(ids)
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.push(t) for t in ids[:n_in]]
    tail = decoder.flush()
    if tail and pieces:
        pieces[-1] += tail
    pieces += [tokenizer.decode([t], skip_special_tokens=False) for t in ids[n_in:]]
    decoded = "".join(pieces[:n_in])
    # The server's text ends before a stop string and may hold back an incomplete character at
    # the token limit; it must still be where the decoded answer starts (whitespace aside).
    if not "".join(decoded.split()).startswith("".join(text.split())):
        raise EndpointError(
            f"The LLM server at {base_url} returned tokens that the tokenizer given with --llm "
            "does not decode to the server's text: give the served model's own tokenizer (its "
            "Hub id or directory) with --llm."
        )
    return ServerChoice(text=decoded, pieces=pieces, in_text=n_in, logprobs=logprobs,
                        finish_reason=finish, token_ids=ids)


def clean_token(tok: str) -> bool:
    """A token string that is its own text (not part of a character, not a byte escape)."""
    return bool(tok) and "\ufffd" not in tok and not tok.startswith("bytes:")


def _token_starts(text: str, tokens: list[str], offsets) -> list[int] | None:
    """Start of every token in ``text`` (non-decreasing; tokens past its end: ``len(text)`` or
    more).

    First the server's ``text_offset`` (relative to the first token), accepted when it agrees
    with the text; else the token strings matched in order, characters skipped by partial
    tokens (empty or replacement-character strings) going to the last of them."""
    n = len(text)
    if isinstance(offsets, list) and len(offsets) == len(tokens) and tokens:
        try:
            rel = [int(o) - int(offsets[0]) for o in offsets]
        except (TypeError, ValueError):
            rel = None
        if rel is not None and all(b >= a for a, b in zip(rel, rel[1:])) and all(
            a >= n or not clean_token(t) or text.startswith(t, a) or t.startswith(text[a:])
            for t, a in zip(tokens, rel)
        ):
            return rel
    starts: list[int] = []
    pos = 0
    pending: list[int] = []
    for i, tok in enumerate(tokens):
        if pos >= n:
            starts.append(n)
            continue
        if not clean_token(tok):
            pending.append(i)
            starts.append(pos)
            continue
        if text.startswith(tok, pos) or tok.startswith(text[pos:]):
            starts.append(pos)
            pos += len(tok)
            pending = []
            continue
        j = text.find(tok, pos)
        if j == -1 and pending and n - pos <= 4 * len(pending):
            # The text ends in characters of the partial tokens (bytes that never formed a
            # character, shown as U+FFFD); this token lies past the text (the stop string).
            starts.append(n)
            pos = n
            pending = []
            continue
        if j == -1 or not pending or j - pos > 4 * len(pending):
            return None
        # The skipped characters [pos, j) were completed by the last partial token: every
        # partial token starts at pos, so the last one's piece runs up to this token's start j.
        # Bytes that never formed a character (U+FFFD only) show up, as in-process, with the
        # token that follows them: this one starts at pos.
        gap = text[pos:j]
        starts.append(pos if gap and set(gap) == {"\ufffd"} else j)
        pos = j + len(tok)
        pending = []
    return starts


def parse_echo(data: Any, base_url: str, echoed: str, tokenizer: Any = None):
    """An echo request's tokens, their start offsets, log-probs, the top-1 log-prob at each
    place, and the top log-probs there as ``{text: logprob}`` (None where the server gave none;
    ``tokenizer`` decodes tokens returned as ids)."""
    try:
        choice = data["choices"][0]
        text = choice["text"]
        lp = choice["logprobs"]
        tokens, offsets, values = lp["tokens"], lp["text_offset"], lp["token_logprobs"]
        tops = lp.get("top_logprobs") or [None] * len(tokens)
    except (KeyError, IndexError, TypeError):
        raise _bad(base_url, "no prompt log-probs for an echo request") from None
    if not isinstance(text, str) or not text.startswith(echoed):
        raise _bad(base_url, "an echo that does not start with the prompt and answer")
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(offsets, list)
            and len(tokens) == len(values) == len(offsets)):
        raise _bad(base_url, "malformed echo log-probs")
    starts = [int(o) for o in offsets]
    lps = [None if v is None else float(v) for v in values]
    top1 = []
    for t in tops:
        top1.append(max(float(v) for v in t.values()) if isinstance(t, dict) and t else None)
    full = _top_logprobs(tops, len(tokens), tokenizer) or [None] * len(tokens)
    return tokens, starts, lps, top1, full


def token_end(i: int, starts: list[int], tokens: list[str], limit: int) -> int:
    return starts[i + 1] if i + 1 < len(starts) else min(limit, starts[i] + len(tokens[i]))


def to_answer(answer: ServerChoice, stops, *, finish: str | None = None,
              extra_warnings: list[str] | None = None,
              limit: int | None = None, keep_stop: bool = False,
              alternatives: int = 0) -> tuple[Answer, str]:
    """Apply the stop strings to a server answer; mirrors ``decoding.build_answer``.

    ``limit`` (max new tokens): llama-cpp-python may return a few tokens more while it completes
    a multi-byte character; the answer keeps at most ``limit`` tokens, as in-process.
    Returns the Answer and the answer's text before stripping (cut at the stop string)."""
    pieces = answer.pieces
    in_text = answer.in_text
    ids: list[int | None] = list(answer.token_ids or [None] * len(pieces))
    if limit is not None and len(pieces) > limit:
        pieces, in_text = pieces[:limit], min(in_text, limit)
        if cut_answer(pieces, stops, keep_stop)[1] is None:
            finish = "length"
    keep, cut = cut_answer(pieces, stops, keep_stop)
    if cut is None:
        keep = in_text  # tokens past the text (an end-of-sequence token) are not scored
        finish = finish or answer.finish_reason
    else:
        finish = "stop"
    warnings = list(extra_warnings or [])
    lost = sum(1 for i in answer.textless or () if i < keep)
    if lost:
        warnings.append(
            f"The LLM server returned {lost} token(s) of this answer without any text (special "
            "tokens such as <|endoftext|>, or bytes that form no character; llama.cpp's server "
            "leaves them out): they are scored, but the answer's text does not show them."
        )
    if keep == 0:
        # Stopped at once: the answer is empty and its score is that of stopping here, the stop
        # token itself (as in-process).
        if not pieces:
            raise EndpointError(
                "The LLM server gave an empty answer without returning its stop token, so the "
                "answer has nothing to score; retry with another seed or question."
            )
        gen = Answer(
            text="",
            token_ids=ids[:1],
            token_texts=[pieces[0]],
            spans=[(0, 0)],
            logprobs=[float(answer.logprobs[0])],
            finish_reason=finish,
            warnings=warnings + [
                "The model gave an empty answer (it stopped at once); its score is the "
                f"probability of stopping with {pieces[0]!r}."
            ],
        )
        return gen, ""
    stripped, spans, notes, text = trim_answer(pieces[:keep], cut, finish)
    warnings += notes
    gen = Answer(
        text=stripped,
        token_ids=ids[:keep],
        token_texts=[stripped[a:b] for a, b in spans],
        spans=spans,
        logprobs=[float(x) for x in answer.logprobs[:keep]],
        finish_reason=finish,
        warnings=warnings,
    )
    gen.token_stats, gen.entropy_top_k = token_stats_of(answer, pieces, keep, alternatives)
    if cut is None and finish == "stop":
        gen.end_token = end_token_of(answer, keep, alternatives)
    return gen, text  # text: the answer before stripping, what teacher forcing re-scores
