"""Model adapters: the LLM, the importance functions and the NLI model.

Importing this package is cheap: torch and transformers are imported when a model is loaded.
"""

from .loading import release

__all__ = ["release"]
