"""Pure math of MARS: scores, uncertainties, semantic clusters and token-phrase alignment.

Imports only numpy, scipy and the standard library, and does no work at import time.
"""

from . import alignment, clustering, scoring, uncertainty

__all__ = ["alignment", "clustering", "scoring", "uncertainty"]
