"""The teacher-forced pass of the in-process LLM: the log-probs of answers given as text, read at
the answers' own positions only (:func:`forced_logprobs`, used by
:meth:`mars_demo.models.llm.LLM.teacher_forced`).

What it costs does not grow with the prompt times the answers, nor with the longest answer times
the vocabulary at every position:

- the prompt, which every answer continues, is read **once** (one row), and its key/value cache is
  what each answer's tokens attend to; its logits are taken at its last position only, which
  predicts every answer's first token;
- the answers are read in batches of similar length (sorted by length), each batch right-padded
  to its own longest answer only, and no batch holds more than :data:`BATCH_TOKENS` tokens with
  the prompt it attends to, nor more than :data:`LOGIT_POSITIONS` answer positions; an answer
  longer than that is read :data:`LOGIT_POSITIONS` positions at a time, its cache growing, so no
  forward pass computes the logits of more positions;
- each position's distribution is read one position at a time (its log-softmax in float32:
  the chosen token's log-prob, the entropy and the KL from uniform that the token-level methods
  read, :func:`mars_demo.models.distributions.token_stats`), never the whole vocabulary at every
  position at once.

The log-probs are those of one forward pass over prompt + answer (the same model, the same
positions): equal up to float rounding, since the prompt's keys and values are computed in another
batch shape than the answer's (tests/test_teacher_forced.py compares both within 1e-5).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence

from . import distributions

BATCH_TOKENS = 8192  # prompt + answer tokens of one batch's rows (the key/value cache it holds)
LOGIT_POSITIONS = 256  # answer positions of one batch (its logits: positions x vocabulary)


def batches(lengths: Sequence[int], prompt: int, *, tokens: int = BATCH_TOKENS,
            positions: int = LOGIT_POSITIONS) -> list[list[int]]:
    """The indices of ``lengths`` (answer lengths in tokens) in batches: sorted by length, each
    batch as large as the budgets allow: its rows x (``prompt`` + its longest answer) at most
    ``tokens``, its rows x its longest answer at most ``positions`` (always at least one row).

    >>> batches([3, 50, 4, 3], prompt=10, tokens=60, positions=1000)
    [[0, 3, 2], [1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out: list[list[int]] = []
    for i in order:
        if out:
            rows = len(out[-1]) + 1
            longest = lengths[i]  # sorted: the newest is the longest
            if rows * (prompt + longest) <= tokens and rows * longest <= positions:
                out[-1].append(i)
                continue
        out.append([i])
    return out


def _kept(model, n: int) -> dict:
    """``logits_to_keep=n`` where the model's forward takes it (transformers 4.45 and later),
    so its head runs at the last ``n`` positions only."""
    try:
        accepted = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    return {"logits_to_keep": n} if "logits_to_keep" in accepted else {}


def _read(logits, ids: Sequence[int], into: dict[str, list[float]]) -> None:
    """Append to ``into`` the log-prob of each of ``ids`` from its row of ``logits`` (positions x
    vocabulary, any float dtype), with that position's entropy and KL from uniform."""
    import torch

    logprobs, stats = distributions.token_stats(torch.tensor([list(ids)]),
                                                [row.unsqueeze(0) for row in logits])
    into["logprobs"] += logprobs[0]
    into["entropy"] += stats["entropy"][0]
    into["kl_uniform"] += stats["kl_uniform"][0]


def forced_logprobs(model, prompt_ids: Sequence[int], answers: Sequence[Sequence[int]], *,
                    pad_id: int, device) -> list[dict[str, list[float]]]:
    """For every answer (``answers``: token ids after ``prompt_ids``) and each of its tokens,
    log P(token | prompt, the answer's tokens before it) at temperature 1 (``"logprobs"``), and
    the entropy and KL from uniform of that position's distribution (``"entropy"``,
    ``"kl_uniform"``), in float32.

    The prompt is read once (``use_cache``); each batch of answers (:func:`batches`) attends to a
    copy of its key/value cache repeated for the batch's rows, with position ids that continue
    the prompt's, at most :data:`LOGIT_POSITIONS` positions per forward pass. An answer of one
    token needs only the prompt's last logits."""
    import torch

    if not prompt_ids:
        raise ValueError("a teacher-forced pass needs a prompt of at least one token")
    prompt = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    with torch.inference_mode():
        out = model(input_ids=prompt, attention_mask=torch.ones_like(prompt), use_cache=True,
                    **_kept(model, 1))
        first = out.logits[0, -1:]  # predicts every answer's first token
        cache = out.past_key_values
        del out
        result: list[dict[str, list[float]]] = [
            {"logprobs": [], "entropy": [], "kl_uniform": []} for _ in answers]
        for i, ids in enumerate(answers):
            _read(first, [ids[0]], result[i])
        p = len(prompt_ids)
        rest = [len(ids) - 1 for ids in answers]  # tokens fed after the prompt: all but the last
        todo = [i for i in range(len(answers)) if rest[i] > 0]
        for batch in batches([rest[i] for i in todo], p, tokens=BATCH_TOKENS,
                             positions=LOGIT_POSITIONS):
            rows = [todo[j] for j in batch]
            width = max(rest[i] for i in rows)
            input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), p + width), dtype=torch.long)
            mask[:, :p] = 1
            for r, i in enumerate(rows):  # right padding: the real tokens keep their positions
                input_ids[r, :rest[i]] = torch.tensor(answers[i][:-1], dtype=torch.long)
                mask[r, p:p + rest[i]] = 1
            batch_cache = copy.deepcopy(cache)
            batch_cache.batch_repeat_interleave(len(rows))
            # a long answer is read a few positions at a time (its cache grows), so its logits
            # never exceed LOGIT_POSITIONS positions at once
            step = max(1, LOGIT_POSITIONS // len(rows))
            for start in range(0, width, step):
                end = min(width, start + step)
                positions = torch.arange(p + start, p + end, dtype=torch.long)
                logits = model(input_ids=input_ids[:, start:end].to(device),
                               attention_mask=mask[:, :p + end].to(device),
                               position_ids=positions.expand(len(rows), -1).to(device),
                               past_key_values=batch_cache, use_cache=True).logits
                for r, i in enumerate(rows):
                    last = min(end, rest[i])
                    if last > start:
                        _read(logits[r, :last - start], answers[i][1 + start:1 + last],
                              result[i])
                del logits
            del batch_cache
    return result
