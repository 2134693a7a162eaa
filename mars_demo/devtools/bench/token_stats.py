"""What the token-level methods' inputs cost in generation: the log-probs alone against the
log-probs with each token's entropy and KL from uniform (:mod:`mars_demo.models.distributions`),
on random logits of the benchmark LLM's vocabulary and the analysis' rows and steps. These run
in the "log-probs" stage, not in the methods', so they are measured apart."""

from __future__ import annotations

import statistics
import time


def token_stats_cost(vocab: int, rows: int, steps: int, repeats: int = 5,
                     seed: int = 0) -> dict[str, float]:
    """Median seconds of the log-probs alone (a logsumexp and a gather per step, as before the
    token statistics) and of :func:`~mars_demo.models.distributions.token_stats`, and their
    ratio, on ``steps`` random ``rows x vocab`` logits."""
    import torch

    from ...models.distributions import token_stats

    gen = torch.Generator().manual_seed(seed)
    logits = [torch.randn(rows, vocab, generator=gen) * 3 for _ in range(steps)]
    ids = torch.randint(0, vocab, (rows, steps), generator=gen)

    def logprobs_alone():
        for t in range(steps):
            step = logits[t].float()
            step.gather(1, ids[:, t:t + 1]) - torch.logsumexp(step, dim=1, keepdim=True)

    def timed(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return float(statistics.median(times))

    alone = timed(logprobs_alone)
    full = timed(lambda: token_stats(ids, logits))
    return {"vocab": vocab, "rows": rows, "steps": steps, "logprobs_s": alone,
            "with_entropy_and_kl_s": full, "ratio": full / alone if alone else None}
