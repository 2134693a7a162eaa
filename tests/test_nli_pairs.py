"""``nli_pairs="clustering"``: the NLI model judges only the pairs the first-member clustering
reads (TruthTorchLM's cost), one round per cluster; the clusters, the verdicts it asked and the
measures are those of the full matrix; the methods that read every pair are left out (refused
when asked), the page shows the pairs not judged as such, and re-scoring with another rule
judges again."""

from __future__ import annotations

import pytest
from forced_answers import QUESTION, forced, loaded_engine

from mars_demo.errors import OptionError
from mars_demo.methods import compute_methods
from mars_demo.settings import Settings
from mars_demo.ui.draw import captions, plots

SAMPLES = ["Mars", "It is Mars", "Venus", "the red planet Mars", "Jupiter, the giant"]
MEASURES = "confidence,entropy,semantic_entropy,semantic_density"


@pytest.fixture(scope="module")
def engine(tiny_settings):
    return loaded_engine(tiny_settings.replace(samples=5))


def analyze(engine, monkeypatch, **changes):
    llm = engine.models.llm
    monkeypatch.setattr(llm, "generate_rows", forced(llm, "Mars", SAMPLES))
    asked = []
    judge = engine.models.nli.judge
    monkeypatch.setattr(engine.models.nli, "judge",
                        lambda pairs, *a, **k: asked.append(list(pairs)) or judge(pairs, *a, **k))
    result = engine.analyze(QUESTION, engine.settings.replace(samples=5, **changes))
    return result, asked


@pytest.mark.parametrize("rule", ["strict", "lenient"])
def test_the_clustering_pairs_give_the_full_matrixs_clusters_and_measures(engine, monkeypatch,
                                                                          rule):
    full, all_asked = analyze(engine, monkeypatch, cluster_rule=rule, methods=MEASURES)
    part, part_asked = analyze(engine, monkeypatch, cluster_rule=rule, methods=MEASURES,
                               nli_pairs="clustering")
    assert part.cluster_ids == full.cluster_ids
    assert part.uncertainty == full.uncertainty
    assert part.methods["semantic_density"] == pytest.approx(full.methods["semantic_density"],
                                                             abs=1e-6)
    judged = [(i, j) for i in range(5) for j in range(5)
              if i != j and part.nli.labels[i][j] is not None]
    # exactly the pairs first-member reads: each answer both ways against the first member of
    # every cluster before its own, and of its own unless it is that first member
    ids = full.cluster_ids
    firsts = {c: ids.index(c) for c in set(ids)}
    assert len(judged) == sum(2 * (c + (firsts[c] != i)) for i, c in enumerate(ids))
    for i, j in judged:  # the verdicts it asked are the model's, as in the full matrix
        assert part.nli.labels[i][j] == full.nli.labels[i][j]
        assert part.nli.probabilities[i][j] == pytest.approx(full.nli.probabilities[i][j],
                                                             abs=1e-5)
    assert sum(map(len, part_asked)) < sum(map(len, all_asked))
    assert 1 <= len(part_asked) <= len(set(ids))  # at most one round per cluster
    assert part.settings["nli_pairs"] == "clustering"


def test_methods_that_read_every_pair_are_left_out_or_refused(engine, monkeypatch):
    s = Settings(nli_pairs="clustering")
    assert "eigv" not in s.method_ids and "semantic_entropy" in s.method_ids
    with pytest.raises(OptionError, match="eigv, degree read every pair"):
        Settings(nli_pairs="clustering", methods="eigv,degree,msp")
    part, _ = analyze(engine, monkeypatch, nli_pairs="clustering")
    assert "eigv" not in part.methods and "num_sets" in part.methods
    with pytest.raises(ValueError, match="NLI probabilities of every pair.*nli-pairs all"):
        compute_methods(part.to_dict(), ["eigv"])


def test_the_page_shows_the_pairs_not_judged(engine, monkeypatch):
    part, _ = analyze(engine, monkeypatch, nli_pairs="clustering", methods=MEASURES,
                      cluster_rule="lenient")
    i, j = next((i, j) for i in range(5) for j in range(5) if part.nli.labels[i][j] is None)
    heatmap = plots.nli_figure(part).data[0]
    assert heatmap.z[i][j] is None and heatmap.text[i][j] == ""
    assert "not judged" in heatmap.customdata[i][j]
    assert "not judged" in captions.nli_table_html(part)


def test_rescoring_with_another_rule_judges_the_pairs_it_reads(engine, monkeypatch):
    lenient, _ = analyze(engine, monkeypatch, nli_pairs="clustering", methods=MEASURES,
                         cluster_rule="lenient")
    strict, _ = analyze(engine, monkeypatch, nli_pairs="clustering", methods=MEASURES)
    assert any(None in row for row in lenient.nli.labels)  # a pair lenient did not need
    again = engine.rescore(lenient, cluster_rule="strict", nli_pairs="clustering",
                           methods=MEASURES)
    assert again.cluster_ids == strict.cluster_ids
    assert again.nli.labels == strict.nli.labels
