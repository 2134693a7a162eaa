"""How close the NLI step runs to the device's arithmetic ceiling: the floating-point operations
of the matrix products of one NLI judgement of the benchmark's answers (counted by torch's
``FlopCounterMode``), divided by the measured NLI stage time, against the rate of one plain
matrix product of the NLI model's own width and dtype on the same device. A share near 100%
says that batching or padding can no longer make the step faster: only fewer operations, or
cheaper ones (lower precision, which changes verdicts), would."""

from __future__ import annotations

import statistics
import time
from typing import Any


def nli_compute(nli, question: str, texts: list[str], nli_s: float, cuda: bool,
                greedy: str | None = None) -> dict[str, Any]:
    """The NLI model's matrix-product GFLOP for what the analysis' NLI stage judges: the
    verdicts among ``texts`` and, with ``greedy`` (semantic density's pairs, asked by
    default), the greedy answer against each distinct sample, in the stage's one call; its
    rate given the stage's median time ``nli_s``, and the device's rate on a plain product of
    the model's shape (:func:`matmul_rate`)."""
    from torch.utils.flop_counter import FlopCounterMode

    from ...engine.stages.nli import greedy_text_pairs

    extra = [] if greedy is None else greedy_text_pairs(question, greedy, texts)[1]

    # the counter's module tracker hooks tensors that require grad, which it cannot do under the
    # NLI step's inference mode: the parameters are frozen while counting, then restored
    params = list(nli.model.parameters())
    wanted = [q.requires_grad for q in params]
    try:
        for q in params:
            q.requires_grad_(False)
        with FlopCounterMode(display=False) as counter:
            judged = nli.matrices_and_pairs([question], [texts], extra)[1]
    finally:
        for q, flag in zip(params, wanted):
            q.requires_grad_(flag)
    gflop = counter.get_total_flops() / 1e9
    rate = gflop / nli_s if nli_s > 0 else float("nan")
    peak = matmul_rate(nli.model, cuda)
    return {"gflop": gflop, "seconds": nli_s, "gflop_per_s": rate, "greedy_pairs": len(extra),
            "forward_passes": judged.passes,
            "matmul_gflop_per_s": peak, "share_of_matmul_rate": rate / peak}


def matmul_rate(model, cuda: bool, rows: int = 2048, repeats: int = 10) -> float:
    """GFLOP/s of ``(rows x hidden) @ (hidden x intermediate)`` in the model's dtype on its
    device (the shape of its feed-forward layers), the median of ``repeats`` after 3 warm-ups."""
    import torch

    param = next(model.parameters())
    hidden = model.config.hidden_size
    wide = getattr(model.config, "intermediate_size", 4 * hidden)
    a = torch.randn(rows, hidden, dtype=param.dtype, device=param.device)
    b = torch.randn(hidden, wide, dtype=param.dtype, device=param.device)
    times = []
    with torch.inference_mode():
        for k in range(3 + repeats):
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            a @ b
            if cuda:
                torch.cuda.synchronize()
            if k >= 3:
                times.append(time.perf_counter() - t)
    return 2 * rows * hidden * wide / statistics.median(times) / 1e9
