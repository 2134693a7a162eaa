"""MARS Demo: see why an LLM answer should or should not be trusted.

Meaning-Aware Response Scoring (Bakman et al., ACL 2024) weighs each token of an answer by the
importance of its phrase to the answer's meaning. This package generates answers (or takes
answers made anywhere else), scores them with length-normalized scoring and with MARS, clusters
samples by meaning and computes Confidence, Entropy and Semantic Entropy under both scorings.

Importing the package is cheap: models and heavy libraries load on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["analyze", "score", "Engine", "Settings", "AnalysisResult", "AnswerSet",
           "__version__"]


def __getattr__(name: str) -> Any:  # lazy public API, keeps `import mars_demo` light
    if name in ("analyze", "score", "Engine"):
        from . import engine

        return getattr(engine, name)
    if name == "AnswerSet":
        from .answers import AnswerSet

        return AnswerSet
    if name == "Settings":
        from .settings import Settings

        return Settings
    if name == "AnalysisResult":
        from .result import AnalysisResult

        return AnalysisResult
    raise AttributeError(f"module 'mars_demo' has no attribute {name!r}")
