"""Evaluation over labelled questions: does an uncertainty predict wrong answers?

- :mod:`.metrics`: AUROC, AUPRC, PRR, AURAC, bootstrap intervals (numpy + scikit-learn only).
- :mod:`.judges`: is the greedy answer correct? A package with one module per judge, each
  one registry entry (name, what it needs, its threshold): the ``contains`` judge that reads
  sentences (:mod:`.judges.contains`, with its helper modules), exact match, token F1,
  ROUGE-L, NLI, an LLM judge.
- :mod:`.judge_check`: a judge's agreement with human labels (``evaluate check-judge``).
- :mod:`.calibration`: isotonic map from an uncertainty to P(correct), saved as JSON, with its
  cross-validated Brier score and calibration error; ``calibrate`` fits it on a run.
- :mod:`.data`: labelled questions from a local JSONL file or a Hugging Face data set.
- :mod:`.records` and :mod:`.schema`: a run's files as typed objects (:class:`~.records.Record`
  a line of results.jsonl, :class:`~.schema.Report` report.json), each with its ``to_dict``
  and checked ``from_dict``, so the writer and every reader share one form;
  :mod:`.checks` checks the values.
- :mod:`.runs`: the one reader of a run directory (run.json, results.jsonl, report.json), used
  by ``evaluate compare``, ``calibrate``, ``rejudge`` and the page's Evaluation view.
- :mod:`.run`: the ``evaluate`` command: results.jsonl (resumable); :mod:`.report` computes and
  writes report.json/.md and the plots; :mod:`.rejudge` re-judges a run; :mod:`.compare`
  compares two runs.
- :mod:`.methods_table`: every measure and method of a run in one table ranked by AUROC, each
  row's paired difference from the best MARS row; :mod:`.labels` names its rows.

Importing this package imports nothing heavy; each module imports what it needs.
"""

from ..result import MEASURES, SCORINGS  # noqa: F401  (re-exported: one list of each)

METRICS = ("auroc", "auprc", "prr", "aurac")
METRIC_TITLES = {"auroc": "AUROC", "auprc": "AUPRC", "prr": "PRR", "prr_0.5": "PRR@50%",
                 "aurac": "AURAC"}
