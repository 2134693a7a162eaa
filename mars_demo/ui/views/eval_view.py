"""The page's Evaluation view: an evaluation run's metric tables and its ROC and rejection curves.

A run is made by ``python -m mars_demo evaluate run --data SOURCE --out RUN_DIR``. The view opens
its ``report.json`` (the tables: every method's AUROC, AUPRC, PRR and AURAC with the 95%
bootstrap interval, and the paired MARS - LN differences, x100 like the paper's Table 1; the
judge, its threshold and its judge-check agreement; the held-out calibration quality when the
run was calibrated; the table of every method ranked by AUROC, with each row's paired AUROC
difference from the best MARS row; the report's warnings) and, for the curves, its
``results.jsonl`` (each question's correctness and uncertainties; report.json holds no curve;
the ROC curves of the top methods are drawn too). Both come from an upload
(at most :data:`MAX_BYTES`, Gradio's upload limit too) or from a run of the folder given to
``app.py --runs DIR``. Both are read by :mod:`mars_demo.evaluation.runs`, the one reader of
runs; this module only opens files (with their size limit) and renders.

Whatever a visitor uploads is untrusted: the reader checks it strictly (finite numbers in range,
the expected keys), every string is escaped before it goes into HTML, a bad file gets one clear
message, and nothing of it is kept on the server beyond Gradio's upload cache, so it affects no
other visitor.

:class:`EvaluationView` holds the handlers (plain Python, testable without a browser);
:func:`build` makes the Gradio components.
"""

from __future__ import annotations

import collections
import hashlib
import os
import pathlib
import re
import threading
from typing import Any

from mars_demo import texts
from mars_demo.evaluation import METRIC_TITLES, METRICS, methods_table
from mars_demo.evaluation.checks import DIFF, RunFileError
from mars_demo.evaluation.labels import model_id, row_label
from mars_demo.evaluation.runs import RESULTS, parse_records, parse_report
from mars_demo.evaluation.sample_size import caution
from mars_demo.evaluation.schema import Entry, Report
from mars_demo.hosting.access import VIEW_GROUP
from mars_demo.methods import OWN_MODELS
from mars_demo.result import MEASURES
from mars_demo.ui.draw.render import error_html, esc
from mars_demo.ui.views.eval_charts import SPLIT, TEXTS, curves, page_outputs

MAX_BYTES = 1_000_000  # the page's upload limit per file (layout.MAX_UPLOAD)
MAX_LINES = 100_000  # results.jsonl lines read from a run folder
CACHE_SIZE = 8  # runs whose page (tables and serialized charts) is kept, by their files' hashes
OUTPUTS = ("eval_error", "eval_verdict", "eval_table", "eval_note", "eval_roc",
           "eval_rejection", "eval_roc_methods")
SLOTS = len(MEASURES)  # charts per row of SPLIT (the measures of a run)
CHARTS = (*SPLIT, "eval_roc_methods")  # each under its heading, hidden while it has no curves
ReportError = RunFileError  # a report or results file that cannot be shown (one line: why)


def _read_text(path: str | os.PathLike, limit: int | None, name: str) -> str:
    size = os.path.getsize(path)
    if limit is not None and size > limit:
        raise ReportError(texts.EVAL_TOO_BIG.format(name=name, size=size, limit=limit))
    try:
        return pathlib.Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ReportError(f"{name} is not UTF-8 text") from err


# --- rendering ------------------------------------------------------------------------------


def _cell(entry: Entry | None, signed: bool = False) -> str:
    if entry is None:
        return '<span class="mars-muted">–</span>'
    if entry.value is None:
        return f'<span class="mars-muted">n/a ({esc(entry.reason or "undefined")})</span>'

    def num(value: float, fmt: str = "{:.2f}") -> str:
        return fmt.format(value * 100).replace("-", "−")

    text = num(entry.value, "{:+.2f}" if signed else "{:.2f}")
    if entry.ci95:
        lo, hi = entry.ci95
        text += f' <span class="mars-muted">[{num(lo)}, {num(hi)}]</span>'
        if lo == hi:  # every resample gave the same value: too few answers, not certainty
            text += f' <span class="mars-eval-zero-width">{esc(texts.EVAL_ZERO_WIDTH)}</span>'
    return text  # "−" in the numbers only: the markup's own hyphens (class names) stay


def _local_name(text: str) -> str:
    """A local path by its last part (a public page does not show the server's folders)."""
    if text.startswith(("/", "~", ".", "\\")) or os.path.isabs(text):
        return os.path.basename(os.path.normpath(text)) or "a local file"
    return text


def method_name(measure: str, scoring: str) -> str:
    """"Semantic Entropy + MARS", "Confidence (LN)"; another method as the evaluation names it
    (:func:`~mars_demo.evaluation.labels.row_label`: "Eigenvalue (entail.)")."""
    if measure not in texts.MEASURE_NAMES:
        return row_label(measure, scoring)
    name = texts.MEASURE_NAMES[measure]
    return name + texts.EVAL_SCORING_SUFFIX.get(scoring, f" ({scoring.replace('_', ' ')})")


def _head(report: Report, public: bool) -> str:
    data = _local_name(report.data) if public else report.data
    models = {k: (model_id(v) if v else v) for k, v in report.models.items()}
    acc = "?" if report.accuracy is None else f"{report.accuracy * 100:.1f}%"
    labels = report.labels or {}
    if labels.get("given") and not labels.get("judged"):
        verdicts = texts.EVAL_ALL_LABELS_GIVEN.format(given=labels["given"])
    else:
        verdicts = f"judge {report.judge_text()}" + (texts.EVAL_LABELS_GIVEN.format(
            given=labels["given"], judged=labels["judged"]) if labels.get("given") else "")
    parts = [f"<p><b>{esc(data)}</b>: n = {report.n} questions, accuracy {acc} "
             f"({esc(verdicts)}). Language model {esc(models.get('llm'))}, "
             f"importance model {esc(models.get('importance'))}, NLI model "
             f"{esc(models.get('nli'))}"
             + "".join(f", {esc(m.label)} {esc(models[m.field])}" for m in OWN_MODELS
                       if models.get(m.field))  # SAR's similarity model, where the run ran SAR
             + ".</p>"]
    check = report.judge_check
    if check:
        parts.append('<p class="mars-small">' + esc(texts.EVAL_JUDGE_CHECK.format(
            agreement=check["agreement"] * 100, file=check["file"], n=check["n"],
            accepts=check["false_accepts"], rejects=check["false_rejects"])) + "</p>")
    return "".join(parts)


def _td(label: str, html: str) -> str:
    """A cell labelled by its column's header (shown where a phone stacks the rows as cards)."""
    return f'<td data-label="{esc(label)}"><span>{html}</span></td>'


def _metric_table(report: Report) -> str:
    shown = [m for m in METRICS if m in report.metrics]
    head = "".join(f'<th scope="col">{METRIC_TITLES[m]}</th>' for m in shown)
    rows = "".join(
        f'<tr><th scope="row">{esc(method_name(m, s))}</th>'
        + "".join(_td(METRIC_TITLES[name], _cell(report.metrics[name].get(m, {}).get(s)))
                  for name in shown)
        + "</tr>"
        for m, s in report.rows())
    return ('<div class="mars-table-wrap"><table class="mars-table mars-eval-table mars-stack">'
            f'<thead><tr><th scope="col">Method</th>{head}</tr></thead><tbody>{rows}</tbody>'
            "</table></div>")


def _paired_table(report: Report) -> str:
    paired = report.paired()
    if not paired:
        return ""
    shown = [m for m in METRICS if m in report.metrics]
    head = "".join(f'<th scope="col">{METRIC_TITLES[m]}</th>' for m in shown)
    rows = "".join(
        f'<tr><th scope="row">{esc(texts.MEASURE_NAMES.get(m, m.replace("_", " ")))}</th>'
        + "".join(_td(METRIC_TITLES[name],
                      _cell(report.metrics[name].get(m, {}).get(DIFF), signed=True))
                  for name in shown) + "</tr>"
        for m in paired)
    return (f'<p class="mars-small">{esc(texts.EVAL_PAIRED_CAPTION)}</p>'
            '<div class="mars-table-wrap"><table class="mars-table mars-eval-diff mars-stack">'
            f'<thead><tr><th scope="col">MARS − LN</th>{head}</tr></thead><tbody>{rows}'
            "</tbody></table></div>")


def _methods_table(report: Report) -> str:
    """The ranked table of every method (report.json's ``methods_table``; a report made
    before it has none)."""
    if not report.methods_table.rows:
        return ""
    shown = ("auroc", "auprc", "prr")
    head = "".join(f'<th scope="col">{METRIC_TITLES[m]}</th>' for m in shown)
    rows, rank = [], 0
    # the rows that tell nothing after the ranked ones (a report made before rows recorded it
    # may list them among those)
    for row in sorted(report.methods_table.rows,
                      key=lambda r: methods_table.unranked(methods_table.reason(r))):
        why = methods_table.reason(row)
        out = methods_table.unranked(why)
        rank += not out
        # a row whose values tell nothing is not ranked: no place, and why, under its name; a
        # row whose interval has no width keeps its place, with the caution under its name
        place = '<span class="mars-muted">–</span>' if out else str(rank)
        said = (texts.EVAL_NOT_RANKED if out else texts.EVAL_CAUTION).format(why=why)
        name = esc(row.label) + (f'<span class="mars-eval-degenerate">{esc(said)}</span>'
                                 if why else "")
        rows.append(
            f'<tr{" data-degenerate" if why else ""}><td data-col="index">{place}</td>'
            f'<th scope="row">{name}</th>'
            + "".join(_td(METRIC_TITLES[m], _cell(row.metrics[m])) for m in shown)
            + _td(texts.EVAL_METHODS_VS_BEST, _cell(row.vs_best, signed=True)) + "</tr>")
    rows = "".join(rows)
    caption = texts.EVAL_METHODS_CAPTION.format(best=report.methods_table.best_label or "none")
    return (f'<p class="mars-small">{esc(caption)}</p>'
            '<div class="mars-table-wrap"><table class="mars-table mars-eval-methods mars-stack">'
            f'<thead><tr><th scope="col">#</th><th scope="col">Method</th>{head}'
            f'<th scope="col">{esc(texts.EVAL_METHODS_VS_BEST)}</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


def _calibration(report: Report) -> str:
    cal = report.calibration
    if not cal:
        return ""
    return '<p class="mars-small">' + esc(texts.EVAL_CALIBRATION.format(
        method=method_name(cal["measure"], cal["scoring"]), folds=cal["folds"],
        brier=cal["brier"], constant=cal["brier_constant"], ece=cal["ece"])) + "</p>"


def _warnings(report: Report, public: bool) -> str:
    if not report.warnings:
        return ""
    def shown(warning: str) -> str:  # a public page names a local file by its last part
        return re.sub(r"(?:/[^\s'\"/]+)+/?", lambda m: _local_name(m.group(0)),
                      warning) if public else warning

    items = "".join(f"<li>{esc(shown(w))}</li>" for w in report.warnings)
    return f'<div class="mars-warnings" role="note"><ul>{items}</ul></div>'


def _points(value: float) -> str:
    return f"{value * 100:+.1f}".replace("-", "−")


def run_verdict(report: Report) -> str:
    """The run's answer to "does MARS help here?", in one sentence: for each measure with both
    scorings, MARS minus length-normalized AUROC in points with its paired 95% interval; "no
    clear difference" where every interval holds zero. Empty when the run has no such pair."""
    parts, helps, hurts = [], 0, 0
    for measure in report.paired():
        entry = report.metrics["auroc"][measure].get(DIFF)
        if entry is None or entry.value is None or not entry.ci95:
            continue
        low, high = entry.ci95
        helps += low > 0
        hurts += high < 0
        parts.append(texts.EVAL_VERDICT_PART.format(
            diff=_points(entry.value), measure=texts.MEASURE_NAMES.get(measure, measure),
            low=_points(low), high=_points(high)))
    if not parts:
        return ""
    if helps and not hurts:
        answer = texts.EVAL_VERDICT_HELPS if helps == len(parts) else texts.EVAL_VERDICT_SOME
    elif hurts and not helps:
        answer = texts.EVAL_VERDICT_HURTS if hurts == len(parts) else texts.EVAL_VERDICT_WORSE
    elif helps and hurts:
        answer = texts.EVAL_VERDICT_MIXED
    else:
        answer = texts.EVAL_VERDICT_UNCLEAR
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return texts.EVAL_VERDICT.format(answer=answer, n=report.n,
                                     llm=model_id(report.models.get("llm") or "?"),
                                     parts=listed)


def caution_html(report: Report) -> str:
    """Why the run's intervals cannot be trusted (too few questions, a class too rare, an
    interval without width: :func:`~mars_demo.evaluation.sample_size.caution`), or nothing."""
    warned = caution(report)
    return (f'<p class="mars-eval-caution" role="note"><strong>{esc(warned)}</strong></p>'
            if warned else "")


def run_verdict_html(report: Report) -> str:
    """The run's one sentence (:func:`run_verdict`), with the caution of a run too small to
    trust its intervals (:func:`caution_html`)."""
    sentence = run_verdict(report)
    if not sentence:
        return ""
    return f'<p class="mars-run-verdict">{esc(sentence)}</p>' + caution_html(report)


def table_html(report: Report, public: bool = False) -> str:
    """The metric tables of a :func:`~mars_demo.evaluation.runs.parse_report` result, x100
    like the paper's Table 1. ``public``: local paths (data set, models) are shown by their
    last part only."""
    note = texts.EVAL_TABLE_NOTE.format(resamples=esc(report.resamples or "?"))
    return (f'<div class="mars-eval">{_head(report, public)}{caution_html(report)}'
            f'{_metric_table(report)}'
            f'<p class="mars-small">{note}</p>{_paired_table(report)}{_methods_table(report)}'
            f"{_calibration(report)}"
            f"{_warnings(report, public)}</div>")


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
        self._cache: collections.OrderedDict[tuple, dict[str, Any]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def shown(self, run: Any, report_file: Any, results_file: Any) -> dict[str, Any]:
        """What the page shows of a run (:meth:`show`, its charts one per column and serialized,
        :func:`page_outputs`), kept for the :data:`CACHE_SIZE` runs shown last by the hashes of
        their files: "Show" pressed again reads and hashes the files, and parses, computes and
        serializes nothing."""
        key = self._key(run, report_file, results_file)
        with self._lock:
            if key is not None and key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        shown = page_outputs(self.show(run, report_file, results_file))
        if key is not None:
            with self._lock:
                self._cache[key] = shown
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return shown

    def _key(self, run: Any, report_file: Any, results_file: Any) -> tuple | None:
        """The cache key of a Show: where its files come from and their SHA-256; None for one
        that shows no run (nothing chosen, a file over the limit, an unknown run)."""
        try:
            if report_file:
                return ("upload", self.public, _digest(report_file, self.max_bytes),
                        _digest(results_file, self.max_bytes) if results_file else None)
            if run and not results_file:
                folder = self._run_folder(run)
                results = folder / "results.jsonl"
                return ("run", run, self.public, _digest(folder / "report.json", None),
                        _digest(results, None) if results.is_file() else None)
        except (ReportError, OSError, ValueError):
            return None
        return None

    def runs(self) -> list[str]:
        return run_names(self.runs_dir)

    def run_choices(self) -> list[tuple[str, str]]:
        """The runs as the view offers them: (its name and its language model's id, name)."""
        choices = []
        for name in self.runs():
            try:
                report = parse_report(_read_text(self.runs_dir / name / "report.json",
                                                 self.max_bytes, "report.json"))
                llm = report.models.get("llm")
            except (ReportError, OSError):
                llm = None
            choices.append((texts.EVAL_RUN_CHOICE.format(run=name, llm=model_id(llm))
                            if llm else name, name))
        return choices

    def show(self, run: Any, report_file: Any, results_file: Any) -> dict[str, Any]:
        """Render a run: the uploaded report.json (and results.jsonl) if given, else the run
        named ``run`` of ``runs_dir``. Uploaded files are left to Gradio's cache cleanup: Gradio
        stores uploads by content, so two visitors who upload the same file share it, and
        deleting it for one would break the other's Show."""
        return self._show(run, report_file, results_file)

    def _show(self, run: Any, report_file: Any, results_file: Any) -> dict[str, Any]:
        empty = {"eval_verdict": "", "eval_table": "", "eval_note": "", "eval_roc": None,
                 "eval_rejection": None, "eval_roc_methods": None}
        try:
            if report_file:
                report = parse_report(_read_text(report_file, self.max_bytes, "report.json"))
                results_text, source = None, None
                if results_file:
                    results_text = _read_text(results_file, self.max_bytes, "results.jsonl")
                    source = "the uploaded results.jsonl"
            elif results_file:
                raise ReportError(texts.EVAL_REPORT_FIRST)
            elif run:
                folder = self._run_folder(run)
                report = parse_report(_read_text(folder / "report.json", None, "report.json"))
                results_text, source = None, None
                if (folder / "results.jsonl").is_file():
                    results_text = _read_text(folder / "results.jsonl", None, "results.jsonl")
                    source = f"the run's results.jsonl ({run})"
            else:  # nothing chosen yet: what to do, not an error
                return {"eval_error": "", **empty, "eval_note": _note(
                    texts.EVAL_NOTHING if self.runs() else texts.EVAL_NOTHING_UPLOAD)}
        except ReportError as err:
            message = str(err)
            if not message.startswith(("Upload", "There is no")):
                message = texts.EVAL_BAD_REPORT.format(error=message)
            return {"eval_error": error_html(message), **empty}
        except OSError as err:
            return {"eval_error": error_html(texts.EVAL_BAD_REPORT.format(
                error=type(err).__name__)), **empty}
        update = {"eval_error": "", "eval_verdict": run_verdict_html(report),
                  "eval_table": table_html(report, self.public),
                  "eval_roc": None, "eval_rejection": None, "eval_roc_methods": None}
        if results_text is None:
            update["eval_note"] = _note(texts.EVAL_NO_CURVES)
            return update
        try:
            records = parse_records(results_text, RESULTS, MAX_LINES)
        except ReportError as err:
            update["eval_note"] = error_html(texts.EVAL_BAD_RESULTS.format(error=str(err)))
            return update
        if len(records) != report.n:
            update["eval_note"] = error_html(texts.EVAL_MISMATCH.format(
                n_results=len(records), n_report=report.n))
            return update
        roc, rej, top, warnings = curves(records, report)
        note = texts.EVAL_CURVES_FROM.format(source=source, n=len(records))
        update.update(eval_roc=roc, eval_rejection=rej, eval_roc_methods=top,
                      eval_note=_note(" ".join([note, *warnings])))
        return update

    def _run_folder(self, run: Any) -> pathlib.Path:
        if not isinstance(run, str) or run not in self.runs():
            raise ReportError(texts.EVAL_UNKNOWN_RUN.format(name=str(run)[:60]))
        return self.runs_dir / run


def _digest(path: str | os.PathLike, limit: int | None) -> str:
    """The SHA-256 of a file; ValueError for one over ``limit`` bytes (not cached: shown as an
    error)."""
    if limit is not None and os.path.getsize(path) > limit:
        raise ValueError("too big")
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _note(message: str) -> str:
    return f'<div class="mars-note" role="status">{esc(message)}</div>'


def _elem(name: str) -> str:
    """The page id of a chart's output name: eval_roc -> mars-eval-roc."""
    return "mars-" + name.replace("_", "-")


def build(view: EvaluationView) -> None:
    """The view's components and event, inside the current ``gr.Blocks`` (an accordion at the
    end of the page)."""
    import gradio as gr

    runs = view.runs()
    limit = f"{view.max_bytes // 1000} KB" if view.max_bytes < 10**6 else (
        f"{view.max_bytes / 10**6:g} MB")
    components: dict[str, Any] = {}
    with gr.Accordion(texts.EVAL_TAB, open=False, elem_id="mars-eval"):
        gr.Markdown(texts.EVAL_EXPLAIN.format(limit=limit), elem_classes="mars-small")
        with gr.Row():
            run = gr.Dropdown(view.run_choices(), value=runs[0] if runs else None,
                              label=texts.EVAL_RUN_LABEL,
                              visible=bool(runs), elem_id="mars-eval-run")
            report = gr.File(label=texts.EVAL_REPORT_LABEL, file_types=[".json"],
                             type="filepath", elem_id="mars-eval-report")
            results = gr.File(label=texts.EVAL_RESULTS_LABEL, file_types=[".jsonl", ".json"],
                              type="filepath", elem_id="mars-eval-results")
        button = gr.Button(texts.EVAL_OPEN_BUTTON, elem_id="mars-eval-show")
        components["eval_error"] = gr.HTML(elem_id="mars-eval-error")
        # the run's answer to the view's question, in one sentence
        components["eval_verdict"] = gr.HTML(elem_id="mars-run-verdict")
        components["eval_table"] = gr.HTML(elem_id="mars-eval-table")
        components["eval_note"] = gr.HTML(elem_id="mars-eval-note")
        for name, title in zip(CHARTS, (texts.EVAL_ROC_TITLE, texts.EVAL_REJECTION_TITLE,
                                        texts.EVAL_TOP_TITLE)):
            with gr.Column(visible=False, elem_id=f"{_elem(name)}-box") as components[name]:
                gr.HTML(f"<h2>{esc(title)}</h2><p class='mars-small'>{esc(texts.EVAL_CURVES_WORDS)}"
                        "</p>", elem_classes="mars-section-title", padding=False)
                if name not in SPLIT:
                    components[f"{name}_1"] = gr.Plot(show_label=False, elem_id=_elem(name),
                                                      elem_classes="mars-plot")
                    continue
                with gr.Row(equal_height=False, elem_id=_elem(name)):
                    for k in range(1, SLOTS + 1):
                        with gr.Column(min_width=300):
                            components[f"{name}_{k}"] = gr.Plot(
                                show_label=False, visible=False, elem_classes="mars-plot",
                                elem_id=f"{_elem(name)}-{k}")
    charts = [f"{name}_{k}" for name in SPLIT for k in range(1, SLOTS + 1)]
    names = (*OUTPUTS, *charts, "eval_roc_methods_1")

    def handler(run_name: Any, report_file: Any, results_file: Any) -> tuple:
        shown = view.shown(run_name, report_file, results_file)  # kept: never changed here
        update = {name: shown[name] for name in TEXTS}
        for name in SPLIT:  # one chart per measure; a row without curves takes no room
            figures = shown[name]
            update[name] = gr.update(visible=bool(figures))
            for k in range(1, SLOTS + 1):
                fig = figures[k - 1] if k <= len(figures) else None
                update[f"{name}_{k}"] = gr.update(value=fig, visible=fig is not None)
        top = shown["eval_roc_methods"]
        update["eval_roc_methods"] = gr.update(visible=bool(top))
        update["eval_roc_methods_1"] = top[0] if top else None
        return tuple(update.get(name, gr.skip()) for name in names)

    # one at a time with every other event that runs no model (mars_demo.hosting.access.VIEW_GROUP)
    button.click(handler, inputs=[run, report, results],
                 outputs=[components[name] for name in names], api_name="evaluation_show",
                 api_visibility="private",
                 concurrency_id=VIEW_GROUP, concurrency_limit=1, show_progress="minimal")
