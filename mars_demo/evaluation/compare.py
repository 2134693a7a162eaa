"""Two runs compared over the questions they share: B - A with a paired bootstrap interval.

``evaluate compare RUN_A RUN_B`` reads both runs through :mod:`.runs`, matches their questions
by text (so two runs of different subsets or data files are compared on what they share), and
for every metric and every method both runs hold computes metric(B) - metric(A) on the shared
questions, each run with its own verdicts and uncertainties. The interval is a paired bootstrap:
each resample draws one set of shared questions and evaluates both runs on it, so what the runs
have in common (the same hard questions) does not widen it. Warnings name what differs besides
the method: the data, the judges, the models, the settings, the questions not shared. The
methods compared are the rows of :mod:`.methods_table` (the measures, and the other methods)
that both runs hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..methods import BASE_MODELS, OWN_MODELS
from . import METRIC_TITLES, METRICS
from . import methods_table
from . import metrics as metric_math
from .report import judge_text, method_label
from .runs import Run


def _keys(run: Run) -> list[str]:
    """A key per record: its question text (whitespace collapsed), numbered when a question
    occurs twice; the index for a record without its question."""
    seen: dict[str, int] = {}
    keys = []
    for r in run.records:
        text = " ".join(r.question.split()) if r.question is not None else f"#{r.index}"
        seen[text] = seen.get(text, 0) + 1
        keys.append(text if seen[text] == 1 else f"{text} ({seen[text]})")
    return keys


def _warnings(a: Run, b: Run, shared: int) -> list[str]:
    out = []
    fa, fb = a.manifest.data_fingerprint, b.manifest.data_fingerprint
    if a.report.data != b.report.data or fa != fb:
        out.append(f"the runs used different data (A: {a.report.data}, B: {b.report.data}"
                   + ("; same name, other content" if a.report.data == b.report.data else "")
                   + "): only the questions they share are compared")
    if len(a.records) != shared or len(b.records) != shared:
        out.append(f"the runs share {shared} questions (A has {len(a.records)}, B "
                   f"{len(b.records)}); every figure below is on those {shared}")
    if a.report.judge != b.report.judge:
        out.append(f"the runs were judged differently (A: {judge_text(a.report.judge)}, B: "
                   f"{judge_text(b.report.judge)}): a difference may come from the verdicts, "
                   "not from the uncertainty")
    ma, mb = a.report.models, b.report.models
    # an optional model (SAR's similarity model...) where both runs ran it: a run without it
    # has none of its methods' values to compare
    keys = BASE_MODELS + tuple(m.field for m in OWN_MODELS
                               if ma.get(m.field) and mb.get(m.field))
    models = [f"{k}: {ma.get(k)} vs {mb.get(k)}" for k in keys if ma.get(k) != mb.get(k)]
    if models:
        out.append("the runs used different models (" + "; ".join(models) + ")")
    return out


def compare_runs(a: Run, b: Run, name_a: str, name_b: str, *, resamples: int = 1000,
                 seed: int = 0) -> dict[str, Any]:
    """The comparison as JSON: both runs' accuracy on the shared questions, the warnings, the
    settings that differ, and ``metrics[metric][measure][scoring]`` = ``{"a", "b",
    "b_minus_a": {"value", "ci95", ...}}``. Raises ValueError when no question is shared."""
    keys_a, keys_b = _keys(a), _keys(b)
    where_b = {k: i for i, k in enumerate(keys_b)}
    pairs = [(i, where_b[k]) for i, k in enumerate(keys_a) if k in where_b]
    if not pairs:
        raise ValueError(f"{name_a} and {name_b} have no question in common")
    ra = [a.records[i] for i, _ in pairs]
    rb = [b.records[j] for _, j in pairs]
    ca = np.array([r.correct for r in ra])
    cb = np.array([r.correct for r in rb])
    settings_a, settings_b = a.report.settings, b.report.settings
    differ = {k: [settings_a.get(k), settings_b.get(k)]
              for k in sorted(set(settings_a) | set(settings_b))
              if settings_a.get(k) != settings_b.get(k)}
    metrics: dict[str, Any] = {}
    for name in METRICS:
        metric = metric_math.METRIC_FUNCTIONS[name]
        metrics[name] = {}
        in_b = set(methods_table.rows(rb))
        for m, s in methods_table.rows(ra):
            if (m, s) not in in_b:
                continue
            ua, ub = methods_table.values(ra, m, s), methods_table.values(rb, m, s)
            values = []
            for u, c in ((ua, ca), (ub, cb)):
                try:
                    values.append(metric(u, c))
                except metric_math.UndefinedMetric:
                    values.append(None)
            diff = metric_math.paired_difference(name, ub, ua, cb, correct_b=ca,
                                                 resamples=resamples, seed=seed)
            metrics[name].setdefault(m, {})[s] = {"a": values[0], "b": values[1],
                                                  "b_minus_a": diff.to_dict()}
    return {
        "a": {"run": name_a, "data": a.report.data, "n": len(a.records),
              "accuracy_shared": float(ca.mean()), "judge": a.report.judge,
              "models": a.report.models},
        "b": {"run": name_b, "data": b.report.data, "n": len(b.records),
              "accuracy_shared": float(cb.mean()), "judge": b.report.judge,
              "models": b.report.models},
        "shared": len(pairs), "warnings": _warnings(a, b, len(pairs)),
        "settings_differ": differ,
        "bootstrap": {"resamples": resamples, "seed": seed, "interval": "percentile 2.5-97.5",
                      "paired": "over the shared questions"},
        "metrics": metrics,
    }


def _value(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 100:.2f}"


def _diff(entry: dict[str, Any]) -> str:
    if entry.get("value") is None:
        return "n/a" + (f" ({entry['reason']})" if entry.get("reason") else "")
    text = f"{entry['value'] * 100:+.2f}"
    if entry.get("ci95"):
        lo, hi = entry["ci95"]
        text += f" [{lo * 100:+.2f}, {hi * 100:+.2f}]"
    return text


def markdown(c: dict[str, Any]) -> str:
    """The comparison for people: the runs, the warnings, then per metric a table of A, B and
    B - A with its paired 95% interval (x100)."""
    a, b = c["a"], c["b"]
    lines = [f"# {a['run']} vs {b['run']}", "",
             f"| | A: {a['run']} | B: {b['run']} |", "|---|---|---|",
             f"| data | {a['data']} | {b['data']} |", f"| n | {a['n']} | {b['n']} |",
             f"| accuracy on the {c['shared']} shared | {a['accuracy_shared'] * 100:.1f}% | "
             f"{b['accuracy_shared'] * 100:.1f}% |"]
    optional = [m.field for m in OWN_MODELS
                if a["models"].get(m.field) or b["models"].get(m.field)]
    for key in BASE_MODELS + tuple(optional):
        lines.append(f"| {key} | {a['models'].get(key) or 'none'} | "
                     f"{b['models'].get(key) or 'none'} |")
    lines.append(f"| judge | {judge_text(a['judge'])} | {judge_text(b['judge'])} |")
    if c["settings_differ"]:
        lines += ["", "Settings that differ: " + ", ".join(
            f"{k} ({va!r} vs {vb!r})" for k, (va, vb) in c["settings_differ"].items())]
    for w in c["warnings"]:
        lines += ["", f"Warning: {w}"]
    boot = c["bootstrap"]
    lines += ["", f"B - A with the 95% paired bootstrap interval over the {c['shared']} shared "
              f"questions ({boot['resamples']} resamples, seed {boot['seed']}); values x100."]
    for name in METRICS:
        table = c["metrics"].get(name) or {}
        lines += ["", f"## {METRIC_TITLES[name]}", "", "| Method | A | B | B - A |",
                  "|---|---|---|---|"]
        rows = [(m, s) for s in dict.fromkeys(s for row in table.values() for s in row)
                for m in table if s in table[m]]
        for m, s in rows:
            e = table[m][s]
            lines.append(f"| {method_label(m, s)} | {_value(e['a'])} | {_value(e['b'])} | "
                         f"{_diff(e['b_minus_a'])} |")
    return "\n".join(lines) + "\n"
