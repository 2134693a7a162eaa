"""The names of the uncertainty methods in evaluation tables, figures and pages.

One function, :func:`row_label`, names a row ``(name, variant)`` of an evaluation by the
registry's own label (:mod:`mars_demo.methods`; MARS's three measures are methods too), so a
method has one name everywhere (the page's panel, the CLI, the report).

>>> row_label("eigv", "value"), row_label("confidence", "length_normalized")
('Eigenvalue (entail.)', 'Confidence (LN)')
"""

from __future__ import annotations

from ..methods import row_label

__all__ = ["row_label"]
