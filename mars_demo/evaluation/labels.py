"""The names of the uncertainty methods and of the models in evaluation tables, figures and
pages.

:func:`row_label` names a row ``(name, variant)`` of an evaluation by the registry's own label
(:mod:`mars_demo.methods`; MARS's three measures are methods too), so a method has one name
everywhere (the page's panel, the CLI, the report); :func:`model_id` names a run's model as the
page's Evaluation view and report.md's columns do (the full path stays in run.json).

>>> row_label("eigv", "value"), row_label("confidence", "length_normalized")
('Eigenvalue (entail.)', 'Confidence (LN)')
>>> model_id("/srv/runs/tiny-trained/llm"), model_id("Qwen/Qwen2.5-7B-Instruct")
('tiny-trained/llm', 'Qwen/Qwen2.5-7B-Instruct')
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from ..methods import row_label
from ..optional import OWN_MODELS

__all__ = ["GENERIC_FOLDERS", "model_id", "row_label"]

#: a local model folder with one of these names is named with its parent folder too
#: ("tiny-trained/llm", not "llm")
GENERIC_FOLDERS = frozenset({"llm", "importance", "nli", "model", "models", "bem", "chunker",
                             *(m.field for m in OWN_MODELS)})


def model_id(value: Any) -> str:
    """A run's model by its id: a Hub id as it is; a local folder or file by its last part, and
    its parent's where the last part only names a role ("tiny-trained/llm")."""
    text = str(value)
    if not (text.startswith(("/", "~", ".", "\\")) or os.path.isabs(text)):
        return text
    parts = pathlib.PurePath(os.path.normpath(text)).parts
    if len(parts) >= 2 and parts[-1].lower() in GENERIC_FOLDERS:
        return f"{parts[-2]}/{parts[-1]}"
    return parts[-1] if parts else "a local model"
