"""The optional models: the models only some uncertainty methods run, each declared once
(:class:`~.spec.OptionalModel`, ``SPEC``) beside its class, and listed in
:data:`OPTIONAL_MODELS`; the pair-classifier base they share with the importance and NLI
models (:mod:`.pairs`).

- :mod:`.similarity`: SAR's sentence-similarity cross-encoder (SAR, CoCoA);
- :mod:`.lars`: LARS's trained scorer;
- :mod:`.ccp`: CCP's pass of the analysis' NLI model over the greedy tokens' alternatives.

Why here, below the option schema: the option, the :class:`~mars_demo.settings.Settings`
field and the methods' needs are derived from each declaration, and those live on the floors
above (:mod:`mars_demo.options`, :mod:`mars_demo.settings`, :mod:`mars_demo.methods`); a
declaration holds its class itself (no module name resolved at run time), so the class sits
here too. What this package may import: :mod:`mars_demo.core` and :mod:`mars_demo.errors`;
torch and transformers only inside functions, as everywhere.
"""

from __future__ import annotations

from . import ccp, lars, similarity
from .spec import OptionalModel, ReadsAnswers

#: The optional models, in the order they are named (flags, banner, the methods' families).
OPTIONAL_MODELS: tuple[OptionalModel, ...] = (similarity.SPEC, lars.SPEC, ccp.SPEC)
#: The optional models with a model of their own (a Settings field, a flag, a loader, a line
#: of the banner and of a run's models).
OWN_MODELS: tuple[OptionalModel, ...] = tuple(m for m in OPTIONAL_MODELS if m.own)

__all__ = ["OPTIONAL_MODELS", "OWN_MODELS", "OptionalModel", "ReadsAnswers"]
