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


def parse_shard(text: str) -> tuple[int, int]:
    """"2/8" -> (2, 8); anything else raises ValueError saying what is expected."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise ValueError(f"--shard takes K/N with 1 <= K <= N (e.g. 1/4); got {text!r}")
    return k, n
