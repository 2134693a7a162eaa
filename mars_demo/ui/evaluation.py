"""The page's Evaluation view: an evaluation run's AUROC table and its ROC and rejection curves.

A run is made by ``python -m mars_demo evaluate --data SOURCE --out RUN_DIR``. The view opens
its ``report.json`` (the table: measure x length-normalized / MARS, value and 95% bootstrap
interval, and the paired MARS - LN difference, x100 like the paper's Table 1) and, for the
curves, its ``results.jsonl`` (each question's correctness and uncertainties; report.json holds
no curve). Both come from an upload (at most :data:`MAX_BYTES`, Gradio's upload limit too) or
from a run of the folder given to ``app.py --runs DIR``.

Whatever a visitor uploads is untrusted: it is parsed strictly (finite numbers in range, the
expected keys), every string is escaped before it goes into HTML, a bad file gets one clear
message, and the uploaded file is deleted from the server as soon as it is read; nothing of it is
kept on the server, so it affects no other visitor.

:class:`EvaluationView` holds the handlers (plain Python, testable without a browser);
:func:`build` makes the Gradio components.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any

from mars_demo import texts
from mars_demo.evaluation import MEASURES, SCORINGS
from mars_demo.ui.render import error_html, esc

MAX_BYTES = 1_000_000  # the page's upload limit per file (layout.MAX_UPLOAD)
MAX_LINES = 100_000  # results.jsonl lines read from a run folder
DIFF = "mars_minus_length_normalized"
SHOWN_CHARS = 200  # a string of the report (data set, model) is cut there
OUTPUTS = ("eval_error", "eval_table", "eval_note", "eval_roc", "eval_rejection",
           "eval_report", "eval_results")


class ReportError(ValueError):
    """A report or results file that cannot be shown; the message says why, in one line."""


# --- reading, strictly ------------------------------------------------------------------------


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _read_text(path: str | os.PathLike, limit: int | None, name: str) -> str:
    size = os.path.getsize(path)
    if limit is not None and size > limit:
        raise ReportError(texts.EVAL_TOO_BIG.format(name=name, size=size, limit=limit))
    try:
        return pathlib.Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ReportError(f"{name} is not UTF-8 text") from err


def _loads(text: str, name: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as err:
        raise ReportError(f"{name} is nested too deeply") from err
    except ValueError as err:  # JSONDecodeError included
        raise ReportError(f"{name} is not valid JSON ({str(err)[:120]})") from err


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReportError(f"{where} is not a number")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise ReportError(f"{where} = {value:.4g} is outside [{low:g}, {high:g}]")
    return value


def _entry(raw: Any, where: str, low: float) -> dict[str, Any]:
    """``{"value", "ci95"}`` checked; a metric that was undefined keeps its reason."""
    if not isinstance(raw, dict):
        raise ReportError(f"{where} is missing")
    if raw.get("value") is None:
        return {"value": None, "ci95": None, "reason": str(raw.get("reason") or "undefined")}
    value = _number(raw["value"], where, low, 1.0)
    ci = raw.get("ci95")
    if ci is not None:
        if not isinstance(ci, list) or len(ci) != 2:
            raise ReportError(f"{where}.ci95 is not [low, high]")
        ci = [_number(v, f"{where}.ci95", low, 1.0) for v in ci]
    return {"value": value, "ci95": ci}


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def parse_report(text: str, name: str = "report.json") -> dict[str, Any]:
    """The parts of a report.json the view shows, checked. Raises :class:`ReportError`."""
    data = _loads(text, name)
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise ReportError(f"{name} has no \"metrics\" (is it an evaluation run's report.json?)")
    auroc = data["metrics"].get("auroc")
    if not isinstance(auroc, dict):
        raise ReportError(f"{name} has no metrics.auroc")
    table = {}
    for m in MEASURES:
        row = auroc.get(m)
        if not isinstance(row, dict):
            raise ReportError(f"{name} has no metrics.auroc.{m}")
        table[m] = {s: _entry(row.get(s), f"metrics.auroc.{m}.{s}", 0.0) for s in SCORINGS}
        table[m][DIFF] = _entry(row.get(DIFF), f"metrics.auroc.{m}.{DIFF}", -1.0)
    n = data.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 10**9:
        raise ReportError(f"{name}: n is not a number of questions")
    accuracy = data.get("accuracy")
    accuracy = None if accuracy is None else _number(accuracy, "accuracy", 0.0, 1.0)
    models = data.get("models") if isinstance(data.get("models"), dict) else {}
    judge = data.get("judge") if isinstance(data.get("judge"), dict) else {}
    boot = data.get("bootstrap") if isinstance(data.get("bootstrap"), dict) else {}
    return {
        "auroc": table,
        "n": n,
        "accuracy": accuracy,
        "data": _text(data.get("data", "?")),
        "models": {k: _text(models.get(k)) for k in ("llm", "importance", "nli")},
        "judge": _text(judge.get("name", "?"))
        + (f" ≥ {_text(judge['threshold'])}" if judge.get("threshold") is not None else ""),
        "resamples": _text(boot.get("resamples", "?")),
    }


def parse_results(text: str, name: str = "results.jsonl") -> list[dict[str, Any]]:
    """Each line's ``correct`` and ``uncertainty`` (what the curves need), checked."""
    records = []
    # split at "\n" only: JSON leaves U+2028/U+2029 unescaped inside strings
    for i, line in enumerate(text.split("\n", MAX_LINES + 1)[: MAX_LINES + 1], 1):
        if not line.strip():
            continue
        if i > MAX_LINES:
            raise ReportError(f"{name} has more than {MAX_LINES} lines")
        row = _loads(line, f"{name} line {i}")
        if not isinstance(row, dict) or not isinstance(row.get("correct"), bool):
            raise ReportError(f"{name} line {i} has no \"correct\": true/false")
        unc = row.get("uncertainty")
        if not isinstance(unc, dict):
            raise ReportError(f"{name} line {i} has no \"uncertainty\"")
        try:
            values = {m: {s: _number(unc[m][s], f"{name} line {i}: uncertainty.{m}.{s}",
                                     -1e12, 1e12) for s in SCORINGS} for m in MEASURES}
        except (KeyError, TypeError) as err:
            raise ReportError(f"{name} line {i} lacks uncertainty {err}") from err
        records.append({"correct": row["correct"], "uncertainty": values})
    if not records:
        raise ReportError(f"{name} has no results")
    return records


# --- rendering ------------------------------------------------------------------------------


def _cell(entry: dict[str, Any], signed: bool = False) -> str:
    if entry["value"] is None:
        return f'<span class="mars-muted">n/a ({esc(entry["reason"])})</span>'

    def num(value: float, fmt: str = "{:.2f}") -> str:
        return fmt.format(value * 100).replace("-", "−")

    text = num(entry["value"], "{:+.2f}" if signed else "{:.2f}")
    if entry["ci95"]:
        lo, hi = entry["ci95"]
        text += f' <span class="mars-muted">[{num(lo)}, {num(hi)}]</span>'
    return text  # "−" in the numbers only: the markup's own hyphens (class names) stay


def _local_name(text: str) -> str:
    """A local path by its last part (a public page does not show the server's folders)."""
    if text.startswith(("/", "~", ".", "\\")) or os.path.isabs(text):
        return os.path.basename(os.path.normpath(text)) or "a local file"
    return text


def table_html(report: dict[str, Any], public: bool = False) -> str:
    """The AUROC table of a :func:`parse_report` result, x100 like the paper's Table 1.
    ``public``: local paths (data set, models) are shown by their last part only."""
    if public:
        report = {**report, "data": _local_name(report["data"]),
                  "models": {k: _local_name(v) for k, v in report["models"].items()}}
    acc = "?" if report["accuracy"] is None else f"{report['accuracy'] * 100:.1f}%"
    head = (f"<p><b>{esc(report['data'])}</b>: n = {report['n']} questions, accuracy {acc} "
            f"(judge {esc(report['judge'])}). LLM {esc(report['models']['llm'])}, importance "
            f"{esc(report['models']['importance'])}, NLI {esc(report['models']['nli'])}.</p>")
    rows = "".join(
        f"<tr><th scope=\"row\">{esc(texts.MEASURE_NAMES[m])}</th>"
        f"<td>{_cell(report['auroc'][m]['length_normalized'])}</td>"
        f"<td>{_cell(report['auroc'][m]['mars'])}</td>"
        f"<td>{_cell(report['auroc'][m][DIFF], signed=True)}</td></tr>"
        for m in MEASURES
    )
    note = (f"AUROC x100 of the uncertainty for predicting a wrong answer, with the 95% "
            f"percentile bootstrap interval ({esc(report['resamples'])} resamples); the last "
            "column is the paired bootstrap of MARS minus length-normalized.")
    return (f'<div class="mars-eval">{head}<div class="mars-table-wrap">'
            '<table class="mars-table mars-eval-table"><thead><tr><th scope="col">Measure</th>'
            '<th scope="col">Length-normalized</th><th scope="col">MARS</th>'
            f'<th scope="col">MARS − LN</th></tr></thead><tbody>{rows}</tbody></table></div>'
            f'<p class="mars-small">{note}</p></div>')


def curves(records: list[dict[str, Any]]) -> tuple[Any, Any, list[str]]:
    """The run's ROC and rejection figures (:func:`mars_demo.evaluation.report.figures`),
    sized for the page."""
    from mars_demo.evaluation.report import figures

    roc, rej, warnings = figures(records)
    for fig in (roc, rej):
        fig.update_layout(width=None, height=380, autosize=True,
                          margin=dict(l=50, r=20, t=70, b=50))
    return roc, rej, warnings


# --- the handlers ---------------------------------------------------------------------------


def run_names(runs_dir: str | os.PathLike | None) -> list[str]:
    """The runs (folders holding a report.json) directly under ``runs_dir``, by name."""
    if not runs_dir:
        return []
    root = pathlib.Path(runs_dir)
    return sorted(p.name for p in root.iterdir() if (p / "report.json").is_file())


class EvaluationView:
    """Handlers of the Evaluation view. ``runs_dir``: the folder of ``app.py --runs`` (its
    runs are offered by name; no other path is ever opened)."""

    def __init__(self, runs_dir: str | os.PathLike | None = None,
                 max_bytes: int = MAX_BYTES, public: bool = False) -> None:
        self.runs_dir = pathlib.Path(runs_dir) if runs_dir else None
        self.max_bytes = max_bytes
        self.public = public

    def runs(self) -> list[str]:
        return run_names(self.runs_dir)

    def show(self, run: Any, report_file: Any, results_file: Any) -> dict[str, Any]:
        """Render a run: the uploaded report.json (and results.jsonl) if given, else the run
        named ``run`` of ``runs_dir``. Uploaded files are left to Gradio's cache cleanup: Gradio
        stores uploads by content, so two visitors who upload the same file share it, and
        deleting it for one would break the other's Show."""
        return self._show(run, report_file, results_file)

    def _show(self, run: Any, report_file: Any, results_file: Any) -> dict[str, Any]:
        cleared = {"eval_report": None, "eval_results": None}
        empty = {"eval_table": "", "eval_note": "", "eval_roc": None, "eval_rejection": None}
        try:
            if report_file:
                report = parse_report(_read_text(report_file, self.max_bytes, "report.json"))
                results_text, source = None, None
                if results_file:
                    results_text = _read_text(results_file, self.max_bytes, "results.jsonl")
                    source = "the uploaded results.jsonl"
            elif results_file:
                raise ReportError(texts.EVAL_NOTHING)
            elif run:
                folder = self._run_folder(run)
                report = parse_report(_read_text(folder / "report.json", None, "report.json"))
                results_text, source = None, None
                if (folder / "results.jsonl").is_file():
                    results_text = _read_text(folder / "results.jsonl", None, "results.jsonl")
                    source = f"the run's results.jsonl ({run})"
            else:
                raise ReportError(texts.EVAL_NOTHING)
        except ReportError as err:
            message = str(err)
            if not message.startswith(("Choose", "There is no")):
                message = texts.EVAL_BAD_REPORT.format(error=message)
            return {"eval_error": error_html(message), **empty, **cleared}
        except OSError as err:
            return {"eval_error": error_html(texts.EVAL_BAD_REPORT.format(
                error=type(err).__name__)), **empty, **cleared}
        update = {"eval_error": "", "eval_table": table_html(report, self.public), **cleared,
                  "eval_roc": None, "eval_rejection": None}
        if results_text is None:
            update["eval_note"] = _note(texts.EVAL_NO_CURVES)
            return update
        try:
            records = parse_results(results_text)
        except ReportError as err:
            update["eval_note"] = error_html(texts.EVAL_BAD_RESULTS.format(error=str(err)))
            return update
        if len(records) != report["n"]:
            update["eval_note"] = error_html(texts.EVAL_MISMATCH.format(
                n_results=len(records), n_report=report["n"]))
            return update
        roc, rej, warnings = curves(records)
        note = texts.EVAL_CURVES_FROM.format(source=source, n=len(records))
        update.update(eval_roc=roc, eval_rejection=rej,
                      eval_note=_note(" ".join([note, *warnings])))
        return update

    def _run_folder(self, run: Any) -> pathlib.Path:
        if not isinstance(run, str) or run not in self.runs():
            raise ReportError(texts.EVAL_UNKNOWN_RUN.format(name=str(run)[:60]))
        return self.runs_dir / run


def _note(message: str) -> str:
    return f'<div class="mars-note" role="status">{esc(message)}</div>'


def build(view: EvaluationView) -> None:
    """The view's components and event, inside the current ``gr.Blocks`` (an accordion at the
    end of the page)."""
    import gradio as gr

    runs = view.runs()
    limit = f"{view.max_bytes // 1000} KB" if view.max_bytes < 10**6 else (
        f"{view.max_bytes / 10**6:g} MB")
    with gr.Accordion(texts.EVAL_TAB, open=False, elem_id="mars-eval"):
        gr.Markdown(texts.EVAL_EXPLAIN.format(limit=limit), elem_classes="mars-small")
        with gr.Row():
            run = gr.Dropdown(runs, value=runs[0] if runs else None, label=texts.EVAL_RUN_LABEL,
                              visible=bool(runs), elem_id="mars-eval-run")
            report = gr.File(label=texts.EVAL_REPORT_LABEL, file_types=[".json"],
                             type="filepath", elem_id="mars-eval-report")
            results = gr.File(label=texts.EVAL_RESULTS_LABEL, file_types=[".jsonl", ".json"],
                              type="filepath", elem_id="mars-eval-results")
        button = gr.Button(texts.EVAL_OPEN_BUTTON, elem_id="mars-eval-show")
        error = gr.HTML(elem_id="mars-eval-error")
        table = gr.HTML(elem_id="mars-eval-table")
        note = gr.HTML(elem_id="mars-eval-note")
        roc = gr.Plot(show_label=False, visible=False, elem_id="mars-eval-roc",
                      elem_classes="mars-plot")
        rejection = gr.Plot(show_label=False, visible=False, elem_id="mars-eval-rejection",
                            elem_classes="mars-plot")
    components = {"eval_error": error, "eval_table": table, "eval_note": note, "eval_roc": roc,
                  "eval_rejection": rejection, "eval_report": report, "eval_results": results}

    def handler(run_name: Any, report_file: Any, results_file: Any) -> tuple:
        update = view.show(run_name, report_file, results_file)
        for name in ("eval_roc", "eval_rejection"):  # a plot without curves takes no room
            fig = update[name]
            update[name] = gr.update(value=fig, visible=bool(fig is not None and fig.data))
        return tuple(update.get(name, gr.skip()) for name in OUTPUTS)

    button.click(handler, inputs=[run, report, results],
                 outputs=[components[name] for name in OUTPUTS], api_name="evaluation_show",
                 api_visibility="private",
                 concurrency_id="evaluation", concurrency_limit=2, show_progress="minimal")
