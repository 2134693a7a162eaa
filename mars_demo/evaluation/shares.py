"""How a run's questions are split: into batches, and the batches into shares.

The selected questions, in the data's order, are cut into batches of ``batch_questions``
(batch ``b`` holds questions ``b*B`` to ``(b+1)*B - 1``), whatever runs them. A batch's samples
are drawn with its own seed, :func:`batch_seed` (from the run's seed and the batch's number),
and a share takes whole batches: share ``K`` of ``N`` holds the batches ``b`` with
``b % N == K - 1`` (round robin, so the shares are as large as can be, ±1 batch). So a batch
has the same questions and the same random draws in one process, in each of 2 or 8 processes
(``accelerate launch``, ``torchrun``) and in each ``--shard K/N``: the records do not depend on
how many processes made them.

>>> [b for b, _ in share(batches(list(range(7)), 2), 2, 2)]
[1, 3]
>>> batch_seed(0, 0) == batch_seed(0, 0) != batch_seed(0, 1)
True
"""

from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np

T = TypeVar("T")


def batches(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in consecutive batches of ``size`` (the last one may be shorter)."""
    size = max(1, int(size))
    return [list(items[first:first + size]) for first in range(0, len(items), size)]


def batch_seed(seed: int, batch: int) -> int:
    """The seed of batch number ``batch`` of a run seeded ``seed``: numpy's ``SeedSequence``
    of the pair, so that neighbouring seeds and batches give unrelated draws, as an integer
    from 0 to 2**30 - 1 (a seed every server takes, also as ``seed + i``, which an
    OpenAI-compatible server's sample ``i`` is drawn with)."""
    state = np.random.SeedSequence([int(seed) % 2**32, int(batch)]).generate_state(1)[0]
    return int(state) >> 2


def share(all_batches: Sequence[Sequence[T]], k: int, n: int) -> list[tuple[int, list[T]]]:
    """(number, batch) of the batches of share ``k`` of ``n`` (``k`` from 1)."""
    if not 1 <= k <= n:
        raise ValueError(f"a share is K/N with 1 <= K <= N; got {k}/{n}")
    return [(b, list(batch)) for b, batch in enumerate(all_batches) if b % n == k - 1]


def empty_share(k: int, n: int, questions: int, size: int) -> str:
    """What to say of share ``k`` of ``n`` that holds no batch: how many batches the
    ``questions`` make in batches of ``size``, which numbers of shares every share gets
    questions with, and the batch size that fills ``n`` shares.

    >>> print(empty_share(2, 2, 3, 16))  # doctest: +NORMALIZE_WHITESPACE
    share 2/2 holds no questions: the 3 selected questions make 1 batch of --batch-questions
    16 and share K of N takes every N-th batch from batch K, so every share gets questions for
    N up to 1 only (for 2 shares: --batch-questions 2 or fewer). Its report says so, and
    --merge takes it with the other shares.
    """
    size = max(1, int(size))
    made = len(batches(range(questions), size))
    if n > questions:
        fill = f"no batch size gives {n} shares of {questions} questions each a question"
    else:  # n shares all get a batch when ceil(questions / size) >= n
        most = -(-questions // (n - 1)) - 1 if n > 1 else size
        fill = f"for {n} shares: --batch-questions {most} or fewer"
    return (f"share {k}/{n} holds no questions: the {questions} selected questions make {made} "
            f"batch{'es' if made != 1 else ''} of --batch-questions {size} and share K of N "
            f"takes every N-th batch from batch K, so every share gets questions for N up to "
            f"{made} only ({fill}). Its report says so, and --merge takes it with the other "
            "shares.")


def parse_shard(text: str) -> tuple[int, int]:
    """"2/8" -> (2, 8); anything else raises ValueError saying what is expected."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise ValueError(f"--shard takes K/N with 1 <= K <= N (e.g. 1/4); got {text!r}")
    return k, n
