"""How the engine reports progress: one callable type and the stages it names, in order.

A ``Progress`` is called as ``progress(stage, fraction)`` with ``stage`` one of :data:`STAGES`
(or a model-loading label) and ``fraction`` in [0, 1]. The page turns these into its progress
line; the CLI and the library ignore them unless given one.
"""

from __future__ import annotations

from typing import Callable

Progress = Callable[[str, float], None]

STAGES = ("generate", "importance", "nli", "uncertainty")  # progress stages, in order


def quiet(stage: str, fraction: float) -> None:
    """A :data:`Progress` that reports nothing."""
    return None
