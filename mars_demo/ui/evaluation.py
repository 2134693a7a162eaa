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

import os
import pathlib
import re
from typing import Any

from mars_demo import texts
from mars_demo.evaluation import METRIC_TITLES, METRICS
from mars_demo.evaluation.labels import row_label
from mars_demo.evaluation.checks import DIFF, RunFileError
from mars_demo.evaluation.records import Record
from mars_demo.evaluation.runs import RESULTS, parse_records, parse_report
from mars_demo.evaluation.schema import Entry, Report
from mars_demo.methods import OWN_MODELS
from mars_demo.result import MEASURES
from mars_demo.ui.plots import GRID
from mars_demo.ui.render import error_html, esc

MAX_BYTES = 1_000_000  # the page's upload limit per file (layout.MAX_UPLOAD)
MAX_LINES = 100_000  # results.jsonl lines read from a run folder
OUTPUTS = ("eval_error", "eval_table", "eval_note", "eval_roc", "eval_rejection",
           "eval_roc_methods")
#: the figures of one column per measure (report.figures): drawn one chart per measure, side by
#: side where there is room and stacked on a phone
SPLIT = ("eval_roc", "eval_rejection")
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
    models = {k: (_local_name(v) if public and v else v) for k, v in report.models.items()}
    acc = "?" if report.accuracy is None else f"{report.accuracy * 100:.1f}%"
    labels = report.labels or {}
    if labels.get("given") and not labels.get("judged"):
        verdicts = texts.EVAL_ALL_LABELS_GIVEN.format(given=labels["given"])
    else:
        verdicts = f"judge {report.judge_text()}" + (texts.EVAL_LABELS_GIVEN.format(
            given=labels["given"], judged=labels["judged"]) if labels.get("given") else "")
    parts = [f"<p><b>{esc(data)}</b>: n = {report.n} questions, accuracy {acc} "
             f"({esc(verdicts)}). LLM {esc(models.get('llm'))}, "
             f"importance {esc(models.get('importance'))}, NLI {esc(models.get('nli'))}"
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
    rows = "".join(
        f'<tr><td data-col="index">{k}</td><th scope="row">{esc(row.label)}</th>'
        + "".join(_td(METRIC_TITLES[m], _cell(row.metrics[m])) for m in shown)
        + _td(texts.EVAL_METHODS_VS_BEST, _cell(row.vs_best, signed=True)) + "</tr>"
        for k, row in enumerate(report.methods_table.rows, 1))
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


def table_html(report: Report, public: bool = False) -> str:
    """The metric tables of a :func:`~mars_demo.evaluation.runs.parse_report` result, x100
    like the paper's Table 1. ``public``: local paths (data set, models) are shown by their
    last part only."""
    note = texts.EVAL_TABLE_NOTE.format(resamples=esc(report.resamples or "?"))
    return (f'<div class="mars-eval">{_head(report, public)}{_metric_table(report)}'
            f'<p class="mars-small">{note}</p>{_paired_table(report)}{_methods_table(report)}'
            f"{_calibration(report)}"
            f"{_warnings(report, public)}</div>")


def curves(records: list[Record], report: Report | None = None) -> tuple[Any, Any, Any, list[str]]:
    """The run's ROC and rejection figures (:func:`mars_demo.evaluation.report.figures`) and
    the ROC curves of the report's top methods
    (:func:`mars_demo.evaluation.methods_table.roc_figure`; None without a methods table),
    sized for the page."""
    from mars_demo.evaluation.methods_table import roc_figure
    from mars_demo.evaluation.report import figures

    roc, rej, warnings = figures(records)
    top = None
    if report is not None and report.methods_table.rows:
        top, more = roc_figure(records, [(r.name, r.variant)
                                         for r in report.methods_table.rows])
        warnings += more
    for fig in (roc, rej, top):
        if fig is not None:
            # see-through, so the theme's background shows and the page's CSS (.mars-plot)
            # writes the axes' text in the theme's text color, light or dark
            fig.update_layout(width=None, height=380, autosize=True,
                              margin=dict(l=50, r=20, t=70, b=50),
                              paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)")
            fig.update_xaxes(gridcolor=GRID, zerolinecolor=GRID)
            fig.update_yaxes(gridcolor=GRID, zerolinecolor=GRID)
    if top is not None:  # its heading is on the page (texts.EVAL_TOP_TITLE)
        top.update_layout(height=480, title=None, margin=dict(t=24))
    return roc, rej, top, warnings


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
        empty = {"eval_table": "", "eval_note": "", "eval_roc": None, "eval_rejection": None,
                 "eval_roc_methods": None}
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
        update = {"eval_error": "", "eval_table": table_html(report, self.public),
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


def _note(message: str) -> str:
    return f'<div class="mars-note" role="status">{esc(message)}</div>'


def _elem(name: str) -> str:
    """The page id of a chart's output name: eval_roc -> mars-eval-roc."""
    return "mars-" + name.replace("_", "-")


def split_columns(fig: Any) -> list[Any]:
    """A figure of one row of subplots (:func:`mars_demo.evaluation.report.figures`) as one
    figure per subplot, titled by its subplot's title, each with its own legend and the axis
    titles of the first: charts that sit side by side where the page is wide and stack on a
    phone, instead of three squeezed into one. None or no traces: no figure."""
    import plotly.graph_objects as go

    if fig is None or not fig.data:
        return []
    layout = fig.layout
    titles = [a.text for a in layout.annotations or ()]
    x_title = layout.xaxis.title.text if layout.xaxis.title else None
    y_title = layout.yaxis.title.text if layout.yaxis.title else None
    columns: dict[str, list[Any]] = {}
    for trace in fig.data:
        columns.setdefault(trace.xaxis or "x", []).append(trace)
    out = []
    for k, (axis, traces) in enumerate(sorted(columns.items(), key=lambda kv: _axis_number(kv[0]))):
        x_axis = layout["xaxis" + axis[1:]]
        y_axis = layout["yaxis" + axis[1:]]
        one = go.Figure()
        for trace in traces:
            one.add_trace(trace.update(xaxis="x", yaxis="y", showlegend=True))
        one.update_layout(
            title={"text": titles[k] if k < len(titles) else "", "x": 0.02, "font": {"size": 15}},
            template=layout.template, height=360, autosize=True, width=None,
            margin=dict(l=56, r=16, t=48, b=56),
            legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
            paper_bgcolor=layout.paper_bgcolor, plot_bgcolor=layout.plot_bgcolor,
        )
        one.update_xaxes(title_text=x_title, range=x_axis.range, gridcolor=x_axis.gridcolor,
                         zerolinecolor=x_axis.zerolinecolor)
        one.update_yaxes(title_text=y_title, range=y_axis.range, gridcolor=y_axis.gridcolor,
                         zerolinecolor=y_axis.zerolinecolor)
        out.append(one)
    return out


def _axis_number(axis: str) -> int:
    return int(axis[1:] or 1)


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
            run = gr.Dropdown(runs, value=runs[0] if runs else None, label=texts.EVAL_RUN_LABEL,
                              visible=bool(runs), elem_id="mars-eval-run")
            report = gr.File(label=texts.EVAL_REPORT_LABEL, file_types=[".json"],
                             type="filepath", elem_id="mars-eval-report")
            results = gr.File(label=texts.EVAL_RESULTS_LABEL, file_types=[".jsonl", ".json"],
                              type="filepath", elem_id="mars-eval-results")
        button = gr.Button(texts.EVAL_OPEN_BUTTON, elem_id="mars-eval-show")
        components["eval_error"] = gr.HTML(elem_id="mars-eval-error")
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
        update = view.show(run_name, report_file, results_file)
        for name in SPLIT:  # one chart per measure; a row without curves takes no room
            figures = split_columns(update[name])
            update[name] = gr.update(visible=bool(figures))
            for k in range(1, SLOTS + 1):
                fig = figures[k - 1] if k <= len(figures) else None
                update[f"{name}_{k}"] = gr.update(value=fig, visible=fig is not None)
        fig = update["eval_roc_methods"]
        update["eval_roc_methods"] = gr.update(visible=bool(fig is not None and fig.data))
        update["eval_roc_methods_1"] = fig
        return tuple(update.get(name, gr.skip()) for name in names)

    button.click(handler, inputs=[run, report, results],
                 outputs=[components[name] for name in names], api_name="evaluation_show",
                 api_visibility="private",
                 concurrency_id="evaluation", concurrency_limit=2, show_progress="minimal")
