"""Evaluation over labelled questions: does an uncertainty predict wrong answers?

- :mod:`.metrics`: AUROC, PRR, AURAC, bootstrap intervals (numpy + scikit-learn only).
- :mod:`.judges`: is the greedy answer correct? Exact match, token F1, ROUGE-L, an LLM judge.
- :mod:`.calibration`: isotonic map from an uncertainty to P(correct), saved as JSON.
- :mod:`.data`: labelled questions from a local JSONL file or a Hugging Face data set.
- :mod:`.run`: the ``evaluate`` command: results.jsonl (resumable), report.json/.md, plots.

Importing this package imports nothing heavy; each module imports what it needs.
"""

from ..result import MEASURES, SCORINGS  # noqa: F401  (re-exported: one list of each)

METRICS = ("auroc", "prr", "aurac")
