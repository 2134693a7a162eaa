"""Pure math of MARS and its neighbours: scores, uncertainties, semantic clusters, token-phrase
alignment, and the other uncertainty methods (graph, kernel, lexical, SAR, P(True), LARS's input).

Imports only numpy, scipy and the standard library, and does no work at import time
(:mod:`.lexical` imports rouge-score when first called).
"""

from . import (
    alignment,
    clustering,
    graph,
    kernel,
    lars,
    lexical,
    p_true,
    sar,
    scoring,
    uncertainty,
)

__all__ = [
    "alignment",
    "clustering",
    "graph",
    "kernel",
    "lars",
    "lexical",
    "p_true",
    "sar",
    "scoring",
    "uncertainty",
]
