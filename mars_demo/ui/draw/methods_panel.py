"""The page's "Compared with other methods" panel: every method of the result's ``methods``
(:mod:`mars_demo.methods`) with what it measures and its value(s), under the uncertainty table
(less the rows that table shows already: :data:`IN_THE_TABLE`).

Raw values of different methods are on different scales. Where the app has an evaluation run
(``--runs``, or a ``--calibration`` file inside its run's folder; :mod:`mars_demo.evaluation.reference`
reads it), each value is also placed among that run's answers: the share of the run's values of
the same method and variant that are strictly lower ("less trustworthy than 82% of the run's
answers"); equal values are not counted as lower, their share is given apart. Rendering is pure
(no gradio, no models); every text from a result or a run is escaped.
"""

from __future__ import annotations

from mars_demo import texts
from mars_demo.evaluation.reference import (  # noqa: F401  (the names this panel has always offered)
    SAME,
    Place,
    Reference,
    RunValues,
    differences,
    is_run,
    load_reference,
    place,
    place_words,
    reference_folder,
    run_values,
    whole_percent,
)
from mars_demo.methods import METHODS
from mars_demo.result import MEASURES, AnalysisResult
from mars_demo.ui.draw.render import esc, fmt
from mars_demo.ui.draw.tables import Cell, placed_cell, table

COLUMNS = ("method", "length_normalized", "mars", "value")
#: methods whose values the uncertainty table above the panel shows already
IN_THE_TABLE = frozenset(MEASURES) | {"semantic_entropy_normalized"}


# --- the HTML ---------------------------------------------------------------------------------


def shown_methods(result: AnalysisResult) -> list[str]:
    """The methods the panel lists, in :data:`METHODS` order (a newer JSON's unknown ones
    last): those of the result that the uncertainty table does not show already
    (:data:`IN_THE_TABLE`)."""
    ids = [m for m in METHODS if m in result.methods]
    ids += sorted(m for m in result.methods if m not in METHODS)
    return [m for m in ids if m not in IN_THE_TABLE]


def _value_cell(value: float, where: Place | None, run: RunValues | None) -> Cell:
    return placed_cell(value, where, run, "mars-method")


def methods_panel_html(result: AnalysisResult, scoring: str, reference: Reference | None = None,
                       unlike: list[str] | tuple[str, ...] = ()) -> str:
    """The panel: one row per method of ``result.methods`` that the uncertainty table does not
    show (:func:`shown_methods`, in :data:`METHODS` order: label, what it measures, LN and MARS values or one value), each value placed among the run's
    answers when ``reference`` has a run. ``unlike``: how the run's answers were made
    otherwise (:func:`differences`), which the panel says."""
    reference = reference or Reference()
    run = reference.run
    notes = [texts.METHODS_EXPLAIN]
    if run is None:
        notes.append(texts.METHODS_NOT_COMPARABLE)
    else:
        notes.append(texts.METHODS_RUN.format(n=run.n, run=run.name, data=run.data))
        if unlike:
            notes.append(texts.METHODS_RUN_OTHER.format(what="; ".join(unlike)))
    head = "".join(f'<p class="mars-explain">{esc(n)}</p>' for n in notes[:2])
    extra = [n for n in (reference.note, *notes[2:]) if n]
    head += "".join(f'<p class="mars-small mars-methods-note">{esc(n)}</p>' for n in extra)
    ids = shown_methods(result)
    if not ids:
        return head + f'<p class="mars-muted">{esc(texts.METHODS_NONE)}</p>'
    rows = []
    for method_id in ids:
        method = METHODS.get(method_id)
        label, explain = (method.label, method.explain) if method else (method_id, "")
        cells = {"method": Cell(f'<span class="mars-measure">{esc(label)}</span>'
                                f'<span class="mars-small">{esc(explain)}</span>')}
        for variant, value in result.methods[method_id].items():
            if variant in COLUMNS[1:]:
                where = run.place(method_id, variant, value) if run else None
                cells[variant] = _value_cell(value, where, run)
        rows.append((f' data-method="{esc(method_id)}"', cells))
    # a column no row fills is left out (without SAR's methods, none reads the scorings)
    filled = {key for _, cells in rows for key in cells}
    columns = [(key, header) for key, header in zip(COLUMNS, texts.METHODS_COLUMNS)
               if key == "method" or key in filled]
    return head + table(columns, rows, "mars-methods mars-stack", scoring)
