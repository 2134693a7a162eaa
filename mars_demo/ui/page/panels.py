"""The page's result panels, each declared once: its component, its renderer, whether the
scoring toggle re-renders it, and the section of the page it sits in.

:data:`PANELS` is the one list the page loops over: :mod:`~mars_demo.ui.page.layout` builds a
component per panel inside its section (:data:`SECTIONS`), :mod:`~mars_demo.ui.page.controller` fills
every panel after an analysis (the outputs of Ask) and the re-rendered ones when the scoring
toggle changes (the outputs of the toggle). A new panel is one :class:`Panel` entry here (and its
renderer, a function of a :class:`Shown`), nothing else; a collapsed section names itself in one
line (its ``summary``) while closed.

The renderers are plain functions of a finished analysis; only :func:`component` touches Gradio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mars_demo import texts
from mars_demo.result import AnalysisResult
from mars_demo.ui.draw import captions, explain, methods_panel, plots, render, tables, trust


@dataclass(frozen=True)
class Shown:
    """What a renderer reads: ``result`` as visitors may see it (redacted; its verdict
    included), the ``original`` (to compare with the methods panel's run, which names models),
    the active ``scoring``, the answer's coloring and what the page was started with."""

    result: AnalysisResult
    scoring: str
    original: AnalysisResult | None = None
    reference: methods_panel.Reference = field(default_factory=methods_panel.Reference)
    #: what the answer's token colors show (:data:`mars_demo.ui.draw.render.SHADES`)
    shade: str = render.DEFAULT_SHADE
    #: the id of this showing of an analysis (the verdict's ``data-analysis``)
    analysis: str = ""

    @property
    def made(self) -> AnalysisResult:
        """The result as it was made (the original where there is one)."""
        return self.original if self.original is not None else self.result


@dataclass(frozen=True)
class Panel:
    """One result panel. ``key``: its output's name; ``kind``: "html" or "plot" (its Gradio
    component, :func:`component`); ``elem_id``: its stable id on the page (tests and CSS use
    it); ``render``: its value for a finished analysis (None: static, ``value`` only);
    ``rescored``: re-rendered when the scoring toggle changes; ``section``: a key of
    :data:`SECTIONS`; ``column``: panels of a section with a column name sit side by side in
    a row, one column per name (stacked on a phone); ``value``: the value before any analysis;
    ``label``: a plot's name (not shown: its caption is on the page)."""

    key: str
    kind: str
    elem_id: str
    render: Callable[[Shown], Any] | None
    rescored: bool
    section: str
    column: str = ""
    value: Any = None
    label: str = ""


@dataclass(frozen=True)
class Section:
    """A part of the results. ``title``: its heading, or a folded section's label;
    ``folded``: collapsed until opened, its label followed by ``summary`` (one line from the
    analysis); ``always``: shown before any analysis (the answer); the others appear with the
    first result."""

    key: str
    title: str = ""
    folded: bool = False
    summary: Callable[[Shown], str] | None = None
    always: bool = False
    elem_id: str = ""

    @property
    def output(self) -> str:
        """The output name of a folded section's label (updated with its summary)."""
        return f"{self.key}_fold"


# --- renderers that are more than one call ------------------------------------------------------


def _methods(shown: Shown) -> str:
    run = shown.reference.run
    unlike = methods_panel.differences(shown.made, run) if run is not None else []
    return methods_panel.methods_panel_html(shown.result, shown.scoring, shown.reference,
                                            unlike=unlike)


def _verdict(shown: Shown) -> str:
    return trust.verdict_html(shown.result, analysis=shown.analysis)


# --- the sections and the panels, in page order ---------------------------------------------------

SECTIONS: tuple[Section, ...] = (
    Section("answer", title=texts.ANSWER_SECTION_HEADING, always=True),
    Section("uncertainty", title=texts.UNCERTAINTY_HEADING),
    Section("methods", title=texts.METHODS_HEADING, folded=True,
            summary=lambda s: captions.methods_summary(s.result), elem_id="mars-methods-box"),
    Section("phrases", title=texts.PHRASES_HEADING, folded=True,
            summary=lambda s: captions.phrases_summary(s.result), elem_id="mars-phrases-box"),
    Section("samples", title=texts.SAMPLES_HEADING, folded=True,
            summary=lambda s: captions.samples_summary(s.result), elem_id="mars-samples-box"),
    Section("tokens", title=texts.TOKENS_LABEL, folded=True, elem_id="mars-tokens-box"),
    Section("context", title=texts.CONTEXT_LABEL, folded=True, elem_id="mars-context-box"),
    Section("formulas", title=texts.FORMULAS_LABEL, folded=True, elem_id="mars-formulas-box"),
)

PANELS: tuple[Panel, ...] = (
    # the verdict first: in the first screen whatever the answer's length
    Panel("verdict", "html", "mars-verdict", _verdict, rescored=False, section="answer"),
    Panel("answer", "html", "mars-answer",
          lambda s: explain.answer_html(s.result, s.scoring, s.shade),
          rescored=True, section="answer", value=render.placeholder_html()),
    Panel("warnings", "html", "mars-warnings", lambda s: render.warnings_html(s.result.warnings),
          rescored=False, section="answer"),
    Panel("uncertainty_table", "html", "mars-uncertainty-table",
          lambda s: tables.uncertainty_table_html(s.result, s.scoring, s.reference.run),
          rescored=True,
          section="uncertainty"),
    Panel("uncertainty_plot", "plot", "mars-uncertainty-plot",
          lambda s: plots.uncertainty_figure(s.result, s.scoring), rescored=True,
          section="uncertainty", label=texts.PLOT_UNCERTAINTY_TITLE),
    Panel("uncertainty_caption", "html", "mars-uncertainty-caption", None, rescored=False,
          section="uncertainty", value=captions.uncertainty_caption_html()),
    Panel("methods_panel", "html", "mars-methods-panel", _methods, rescored=True,
          section="methods"),
    Panel("phrases", "html", "mars-phrases",
          lambda s: tables.phrase_table_html(s.result.greedy, s.scoring, s.result.settings),
          rescored=True, section="phrases"),
    Panel("samples", "html", "mars-samples",
          lambda s: tables.samples_table_html(s.result, s.scoring), rescored=True,
          section="samples"),
    # each chart under its heading and its numbers in words (its text alternative)
    Panel("clusters_table", "html", "mars-clusters-table",
          lambda s: captions.clusters_table_html(s.result, s.scoring), rescored=True,
          section="samples", column="clusters"),
    Panel("clusters_plot", "plot", "mars-clusters-plot",
          lambda s: plots.clusters_figure(s.result, s.scoring), rescored=True,
          section="samples", column="clusters", label=texts.PLOT_CLUSTERS_TITLE),
    Panel("nli_table", "html", "mars-nli-table", lambda s: captions.nli_table_html(s.result),
          rescored=False, section="samples", column="nli"),
    Panel("nli_plot", "plot", "mars-nli-plot", lambda s: plots.nli_figure(s.result),
          rescored=False, section="samples", column="nli", label=texts.PLOT_NLI_TITLE),
    Panel("tokens", "html", "mars-tokens",
          lambda s: tables.token_table_html(s.result.greedy, s.scoring), rescored=True,
          section="tokens"),
    Panel("context", "html", "mars-context", lambda s: explain.context_html(s.result),
          rescored=False, section="context"),
    Panel("formulas", "html", "mars-formulas", None, rescored=False, section="formulas",
          value=explain.formulas_html()),
)


def outputs() -> tuple[str, ...]:
    """The output names an analysis fills: every rendered panel, every folded section's label
    (of :data:`PANELS` and :data:`SECTIONS` as they are when called)."""
    return (tuple(p.key for p in PANELS if p.render is not None)
            + tuple(s.output for s in SECTIONS if s.folded and s.summary is not None))


def rescored_outputs() -> tuple[str, ...]:
    """The output names the scoring toggle re-renders."""
    return tuple(p.key for p in PANELS if p.render is not None and p.rescored)


def rendered(shown: Shown, *, only_rescored: bool = False) -> dict[str, Any]:
    """``{output: value}`` of every panel (``only_rescored``: of those the toggle re-renders)
    and, for a whole analysis, every folded section's label with its summary."""
    values: dict[str, Any] = {p.key: p.render(shown) for p in PANELS
                              if p.render is not None and (p.rescored or not only_rescored)}
    if not only_rescored:
        for section in SECTIONS:
            if section.folded and section.summary is not None:
                values[section.output] = fold_label(section, section.summary(shown))
    return values


def fold_label(section: Section, summary: str) -> Any:
    """A folded section's label update: its title and the summary of this analysis."""
    import gradio as gr

    return gr.Accordion(label=f"{section.title}: {summary}" if summary else section.title)


def component(panel: Panel) -> Any:
    """The Gradio component of ``panel`` (inside the layout's current block)."""
    import gradio as gr

    if panel.kind == "plot":
        return gr.Plot(panel.value, label=panel.label, show_label=False, elem_id=panel.elem_id,
                       elem_classes="mars-plot")
    if panel.kind == "html":
        return gr.HTML(panel.value, elem_id=panel.elem_id)
    raise ValueError(f"panel {panel.key}: unknown kind {panel.kind!r} (html or plot)")
