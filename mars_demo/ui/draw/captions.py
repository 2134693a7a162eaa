"""What the charts say, in words and tables (their text alternative), and the one-line summary
of each folded section of the results. Pure functions: no gradio, no models; every text from an
answer is escaped.
"""

from __future__ import annotations

from mars_demo import texts
from mars_demo.result import SCORINGS, AnalysisResult
from mars_demo.ui.draw.methods_panel import shown_methods
from mars_demo.ui.draw.plots import cluster_name
from mars_demo.ui.draw.render import esc, fmt, percent
from mars_demo.verdict import placement

SUMMARY_PHRASE_CHARS = 24  # the heaviest phrase in a folded section's label, cut to this


def _table(head: list[str], rows: list[list[str]], cls: str) -> str:
    """A small table of already-escaped cells; the first cell of each row is its header."""
    th = "".join(f'<th scope="col">{h}</th>' for h in head)
    body = "".join(
        "<tr>" + f'<th scope="row">{row[0]}</th>' + "".join(f"<td>{c}</td>" for c in row[1:])
        + "</tr>" for row in rows)
    return (f'<div class="mars-table-wrap"><table class="mars-table {cls}">'
            f"<thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>")


def uncertainty_caption_html() -> str:
    return f'<p class="mars-small mars-caption">{esc(texts.PLOT_UNCERTAINTY_CAPTION)}</p>'


def clusters_table_html(result: AnalysisResult, scoring: str) -> str:
    """The clusters chart in words: its heading, and a table of each meaning cluster, its
    sampled answers and its share of the probability mass under both scorings."""
    heading = f'<h3 class="mars-chart-title">{esc(texts.PLOT_CLUSTERS_TITLE)}</h3>'
    if not result.samples or len(result.cluster_ids) != len(result.samples):
        return heading + f'<p class="mars-muted">{esc(texts.SAMPLES_NONE)}</p>'
    masses = {key: result.cluster_masses(key) for key in SCORINGS}
    answers = placement(result).clusters
    rows = []
    for c in sorted(set(result.cluster_ids)):
        members = [b for b, cid in enumerate(result.cluster_ids) if cid == c]
        rows.append([
            esc(cluster_name(c, answers)),
            esc(", ".join(f"#{b + 1}" for b in members)),
            *(("<b>{}</b>" if key == scoring else "{}").format(esc(percent(masses[key][c])))
              for key in SCORINGS),
        ])
    head = [esc(h) for h in texts.CLUSTERS_TABLE_COLUMNS]
    return (heading + f'<p class="mars-small">{esc(texts.PLOT_CLUSTERS_NOTE)}</p>'
            + _table(head, rows, "mars-clusters-table"))


def nli_table_html(result: AnalysisResult) -> str:
    """The NLI heatmap as a table (folded): each sampled answer as premise, its verdict on
    every other one as hypothesis."""
    heading = f'<h3 class="mars-chart-title">{esc(texts.PLOT_NLI_TITLE)}</h3>'
    n = len(result.nli.answers)
    if n < 2:
        return heading + f'<p class="mars-muted">{esc(texts.NLI_TABLE_NONE)}</p>'
    labels = result.nli.labels
    head = [esc(texts.NLI_TABLE_CORNER)] + [f"#{j + 1}" for j in range(n)]
    rows = [[f"#{i + 1}"] + [
        "–" if i == j else esc(texts.NLI_TABLE_NOT_JUDGED) if labels[i][j] is None
        else esc(texts.PLOT_NLI_LABELS.get(labels[i][j], labels[i][j]))
        for j in range(n)] for i in range(n)]
    return (heading + f'<details class="mars-chart-table"><summary>{esc(texts.NLI_TABLE_SUMMARY)}'
            f"</summary>{_table(head, rows, 'mars-nli-table')}</details>")


# --- the one-line summaries of the folded sections -----------------------------------------------


def methods_summary(result: AnalysisResult) -> str:
    count = len(shown_methods(result))
    if not count:
        return texts.METHODS_SUMMARY_NONE
    return texts.METHODS_SUMMARY.format(count=count, s="" if count == 1 else "s")


def phrases_summary(result: AnalysisResult) -> str:
    phrases = result.greedy.phrases
    if not phrases:
        return texts.PHRASES_SUMMARY_NONE
    top = max(phrases, key=lambda p: p.weight)
    phrase = " ".join(top.text.split())
    if len(phrase) > SUMMARY_PHRASE_CHARS:  # a label stays one line or two, even on a phone
        phrase = phrase[:SUMMARY_PHRASE_CHARS - 1] + "…"
    return texts.PHRASES_SUMMARY.format(count=len(phrases), s="" if len(phrases) == 1 else "s",
                                        phrase=phrase, weight=fmt(top.weight, 2))


def samples_summary(result: AnalysisResult) -> str:
    b = len(result.samples)
    k = len(set(result.cluster_ids[:b]))
    return texts.SAMPLES_SUMMARY.format(
        samples=b, answers="answer" if b == 1 else "answers",
        meanings=k, meaning_word="meaning" if k == 1 else "meanings")
