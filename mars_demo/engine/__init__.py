"""The engine: an analysis is generation (:mod:`.generation`), then the scoring stages
(:mod:`.stages`) over one typed job per answer set (:mod:`.job`); :class:`Engine` holds the
models and the public API. Models are loaded by :mod:`mars_demo.models.registry`.
"""

from .door import as_answer_set
from .engine import Engine, analyze, score

__all__ = ["Engine", "analyze", "score", "as_answer_set"]
