"""What the page says stands on its evidence (without a browser): the example analyses kept
once and served whole, never filled by anything else; the expected wait from recent analyses;
every verdict a new analysis (an id); the served run's level records and the uncertainty table's
places among its answers; the Evaluation view's one-sentence answer."""

from __future__ import annotations

import re

import pytest
from ui_helpers import FakeEngine, make_result

from mars_demo import texts
from mars_demo.evaluation.checks import DIFF
from mars_demo.evaluation.reference import RunValues, differences
from mars_demo.evaluation.schema import Entry, Report
from mars_demo.settings import Settings
from mars_demo.ui.draw import tables, trust
from mars_demo.ui.draw.render import esc
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.page.example_store import ExampleStore
from mars_demo.ui.page.waits import RecentWaits, kind
from mars_demo.ui.views.eval_view import model_id, run_verdict
from mars_demo.ui.work import controls
from mars_demo.ui.work.host import EngineHost
from mars_demo.verdict import LevelRecord, verdict

EXAMPLE = "Which planet is known as the Red Planet?"
DEFAULTS = tuple(controls.page_default(name) for name in controls.PAGE_OPTIONS)


def controller(engine=None, folder=None, reference=None) -> Controller:
    return Controller(EngineHost(engine or FakeEngine()), reference=reference,
                      examples=ExampleStore(folder, [EXAMPLE]))


def ask(ctrl: Controller, question: str = EXAMPLE, options=DEFAULTS) -> list[dict]:
    return list(ctrl.ask(question, "mars", *options))


def test_an_example_is_analyzed_once_and_then_shown_whole_at_once(tmp_path):
    engine = FakeEngine()
    first = ask(controller(engine, tmp_path))
    assert len(engine.calls) == 1 and len(first) > 1  # streamed as any analysis
    assert len(list(tmp_path.glob("*.json"))) == 1
    # a later visitor, also after a restart (a new page over the same folder): no model call,
    # one update with the whole analysis
    again = ask(controller(engine, tmp_path))
    assert len(engine.calls) == 1 and len(again) == 1
    shown = again[0]
    assert shown["result"].question == EXAMPLE and "data-level=" in shown["verdict"]
    assert "data-measure=" in shown["uncertainty_table"]
    assert esc(texts.EXAMPLE_KEPT) in shown["progress"]


def test_an_example_kept_by_a_page_that_worded_its_verdicts_otherwise_is_made_again(
        tmp_path, monkeypatch):
    """The store outlives the page's versions (a Space's cache folder): an analysis kept when the
    verdicts read otherwise holds a verdict in the old words, so a page whose verdict texts
    differ does not serve it."""
    from mars_demo.ui.page import example_store

    engine = FakeEngine()
    ask(controller(engine, tmp_path))
    assert len(engine.calls) == 1
    monkeypatch.setattr(texts, "VERDICT_ALL", texts.VERDICT_ALL + " (worded otherwise)")
    monkeypatch.setattr(example_store, "VERDICT_WORDS", example_store.verdict_words())
    again = ask(controller(engine, tmp_path))
    assert len(engine.calls) == 2 and len(again) > 1  # analyzed again, not served
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_nothing_but_an_example_with_the_default_settings_fills_the_store(tmp_path):
    engine = FakeEngine()
    ctrl = controller(engine, tmp_path)
    ask(ctrl, "Who wrote Faust?")  # a visitor's own question
    other = list(DEFAULTS)
    other[controls.PAGE_OPTIONS.index("seed")] = 7  # an example with other settings
    ask(ctrl, EXAMPLE, other)
    engine.fail_with = RuntimeError("out of luck")  # an example whose analysis failed
    failed = ask(ctrl)
    assert "out of luck" in failed[-1]["error"]
    assert list(tmp_path.glob("*")) == []
    # and with no folder nothing is kept: every example is analyzed
    plain = FakeEngine()
    ask(controller(plain)), ask(controller(plain))
    assert len(plain.calls) == 2


def test_before_the_first_token_the_wait_of_recent_analyses_like_it_is_said():
    waits = RecentWaits(keep=3)
    assert waits.words() == ""
    for seconds in (2.0, 40.0, 3.0, 5.0):  # the oldest drops out; the median resists the 40 s
        waits.add(seconds)
    assert waits.expected() == (5.0, 3)
    assert waits.words() == texts.VERDICT_EXPECTED.format(seconds="5.0", count=3)
    # analyses of another kind (more or longer answers) are not promised these times
    short, long = kind(Settings(samples=5)), kind(Settings(samples=20, max_new_tokens=256))
    waits.add(8.0, short)
    assert waits.words(long) == "" and "about 8.0 s" in waits.words(short)
    assert "5 sampled answers of up to 64 tokens" in waits.words(short)
    # once a running analysis is well past the time said (half as long again), the line says so
    assert "taking longer" not in waits.words(short, elapsed=7.0)
    assert "taking longer" not in waits.words(short, elapsed=11.9)  # past the median alone
    assert "taking longer: 12 s so far" in waits.words(short, elapsed=12.1)
    assert "This one is taking longer: 59 s so far." in waits.words(short, elapsed=59.2)
    ctrl = controller()
    first = ask(ctrl)[0]  # no analysis yet: the verdict is being worked out, no time promised
    assert "Working out the verdict" in first["verdict"] and "took about" not in first["verdict"]
    second = ask(ctrl, "Who wrote Hamlet?")[0]
    assert re.search(r"Analyses like this one \(5 sampled answers of up to 64 tokens\) took "
                     r"about [\d.]+ s here lately \(the median of the last 1\)",
                     second["verdict"]), second["verdict"]
    more = list(DEFAULTS)
    more[controls.PAGE_OPTIONS.index("samples")] = 12
    third = ask(ctrl, "Who wrote Faust?", more)[0]  # 12 samples: none like it yet
    assert "took about" not in third["verdict"], third["verdict"]


def test_each_verdict_is_a_new_analysis_even_in_the_same_words():
    ctrl = controller()
    ids = [re.search(r'data-analysis="(\w+)"', ask(ctrl, "Who wrote Hamlet?")[-1]["verdict"])
           .group(1) for _ in range(2)]
    assert ids[0] != ids[1]


def test_the_served_run_says_how_answers_at_this_level_fared_and_places_each_value():
    result = make_result()
    level = verdict(result).level
    other = "consistent" if level != "consistent" else "unsure"
    run = RunValues("facts-run", "facts.jsonl", 40,
                    values={("confidence", "mars"): [0.0, 0.1, 10.0, 11.0],
                            ("confidence", "length_normalized"): [5.0]},
                    levels={level: LevelRecord(level, 29, 40, 0.57, 0.84, "facts-run"),
                            other: LevelRecord(other, 2, 20, 0.03, 0.30, "facts-run")},
                    judge="rouge ≥ 0.3", lenient=True)
    result.verdict = verdict(result, reference=run)  # as an engine given the run makes it
    html = trust.verdict_html(result, analysis="a1")
    assert esc(f"On the evaluation run facts-run (judged by rouge ≥ 0.3), 52% of its 60 answers "
               f"were right; of those the page called {texts.VERDICT_BADGES[level].lower()}, "
               "72% (n = 40; 95% interval 57% to 84%).") in html
    assert esc(texts.VERDICT_RUN_LENIENT.format(judge="rouge ≥ 0.3")) in html
    assert 'data-analysis="a1"' in html and 'data-tone="' in html
    table = tables.uncertainty_table_html(result, "mars", run)
    confidence = result.uncertainty.confidence.mars  # 0.1 < it < 10: above half of the run
    assert 0.1 < confidence < 10
    assert "less trustworthy than 50% of the run&#x27;s answers" in table
    assert "the evaluation run &quot;facts-run&quot;" in table
    # without a run: the values alone, no invented scale
    plain = tables.uncertainty_table_html(result, "mars")
    assert "less trustworthy than" not in plain and "no fixed scale" in plain


def entry(value, low, high):
    return Entry(value, (low, high))


@pytest.mark.parametrize("diffs,answer", [
    ({"confidence": (0.012, -0.008, 0.031), "semantic_entropy": (-0.005, -0.02, 0.011)},
     "No clear difference (every interval holds zero)"),
    ({"confidence": (0.04, 0.01, 0.07), "semantic_entropy": (0.03, 0.005, 0.06)}, "Yes"),
    ({"confidence": (-0.04, -0.07, -0.01), "semantic_entropy": (0.0, -0.01, 0.01)},
     "No (worse for some measures; the others show no clear difference)"),
])
def test_the_evaluation_view_answers_its_question_in_one_sentence(diffs, answer):
    report = Report(data="facts.jsonl", n=40, accuracy=0.7, judge={}, settings={},
                    models={"llm": "/srv/models/tiny-trained/llm"}, resamples=200,
                    metrics={"auroc": {m: {"length_normalized": entry(0.7, 0.6, 0.8),
                                           "mars": entry(0.7, 0.6, 0.8),
                                           DIFF: entry(*d)}
                                       for m, d in diffs.items()}})
    sentence = run_verdict(report)
    assert sentence.startswith(f"Does MARS help here? {answer}: on these 40 questions "
                               "(tiny-trained/llm), MARS scoring moved the AUROC by "), sentence
    first = diffs["confidence"]
    assert (f"{first[0] * 100:+.1f} points for Confidence [{first[1] * 100:+.1f}, "
            f"{first[2] * 100:+.1f}]").replace("-", "−") in sentence
    assert sentence.endswith("(paired 95% intervals).")


def test_a_run_names_its_models_by_their_ids():
    assert model_id("Qwen/Qwen2.5-7B-Instruct") == "Qwen/Qwen2.5-7B-Instruct"
    assert model_id("/tmp/tiny-trained/llm") == "tiny-trained/llm"
    assert model_id("/srv/gguf/SmolLM2-135M-Instruct.Q4_1.gguf") == \
        "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_setting_the_run_did_not_keep_is_said_so_not_as_none():
    result = make_result()
    run = RunValues("facts", "facts.jsonl", 22, settings={"temperature": None})
    said = differences(result, run)
    assert said and all("None" not in line for line in said), said
    here = result.settings["temperature"]
    assert f"temperature {here} here, {texts.METHODS_RUN_UNRECORDED} in the run" in said, said


# --- one account of the meanings: the verdict, the fold, the clusters and the samples ----------


def placed_result(greedy: str, samples: list[tuple[str, int]], entails: list[int] = ()):
    """A result whose greedy answer is ``greedy``, its samples (text, cluster) and, for the
    samples in ``entails``, the NLI model's verdict that the greedy answer entails them (the
    semantic-density pairs the analysis holds), with its verdict made as the engine makes it."""
    import dataclasses

    from ui_helpers import make_answer

    base = make_result()
    result = dataclasses.replace(
        base, greedy=make_answer([greedy], [-0.1], [([0], 1.0)]),
        samples=[make_answer([t], [-0.2 - 0.1 * b], [([0], 1.0)])
                 for b, (t, _) in enumerate(samples)],
        cluster_ids=[c for _, c in samples])
    result.method_inputs = {"greedy_nli": {
        "nli_model": "nli", "question": result.question, "greedy": greedy,
        "answers": [t for t, _ in samples], "pairs": len(samples),
        "probabilities": [[0.9, 0.05, 0.05] if b in entails else [0.1, 0.8, 0.1]
                          for b in range(len(samples))]}}
    result.verdict = verdict(result)
    return result


def page_accounts(result) -> dict:
    """What each view of the page says of the answer's meaning: the verdict's count, the fold's
    line, the samples the list marks, the cluster the chart and its table name the answer's."""
    import html

    shown = controller().show(result, "mars")
    fold = html.unescape(re.search(r'<p class="mars-greedy-cluster[^"]*">(.*?)</p>',
                                   shown["answer"]).group(1))
    marked = [int(b) for b, same in re.findall(r'data-sample="(\d+)" data-same="(\d)"',
                                               shown["samples"]) if same == "1"]
    ticks = [str(t) for t in shown["clusters_plot"].data[0].x]
    return {"verdict": html.unescape(shown["verdict"]), "fold": fold, "marked": marked,
            "chart": [t.split("<br>")[0] for t in ticks if "the answer's" in t],
            "table": re.findall(r"(cluster \d+), the answer&#x27;s", shown["clusters_table"])}


def test_an_answer_placed_by_what_it_entails_is_in_the_same_cluster_in_every_view():
    """"Who wrote Romeo and Juliet?": the greedy answer has no sample's words; the NLI model
    finds it entails samples in two clusters. The verdict placed it by them; the fold said
    "the greedy answer is in no cluster here". Now each view names the same cluster and the
    same samples."""
    result = placed_result("Shakespeare wrote it.", [
        ("William Shakespeare", 0), ("Christopher Marlowe", 1), ("Shakespeare", 0),
        ("The Bard", 2), ("Marlowe", 1)], entails=[0, 1, 2])
    e = result.verdict.evidence
    assert (e.placed_by, e.clusters, e.members, e.agreeing) == ("nli", (0,), (0, 2), 2)
    said = page_accounts(result)
    assert "By the NLI model, the 5 other tries give 3 different answers; 2 of them mean the " \
        "same as this one." in said["verdict"]
    assert "in no cluster" not in said["fold"]
    assert ("the NLI model finds that it entails sampled answers #1, #2, #3, so it is placed "
            "in cluster 1, where most of them are, with sampled answers #1, #3") in said["fold"]
    assert said["marked"] == [0, 2] and len(said["marked"]) == e.agreeing
    assert said["chart"] == ["cluster 1, the answer's"] and said["table"] == ["cluster 1"]


def test_a_sample_in_the_answers_words_but_another_cluster_is_the_nli_models_reading():
    """"Capital of France": four samples say "Paris", the NLI model puts the fifth ("Paris is
    the capital city of France") in a cluster of its own. The verdict says so as the NLI
    model's reading, and the list marks the fifth as not of the answer's meaning."""
    result = placed_result("Paris", [("Paris", 0), ("Paris.", 0), ("paris", 0), ("Paris", 0),
                                     ("Paris is the capital city of France", 1)])
    said = page_accounts(result)
    assert ("By the NLI model, 4 of 5 other tries mean the same as this answer; it reads the "
            "other 1 as saying something else.") in said["verdict"]
    assert "the rest say something else" not in said["verdict"]
    assert said["marked"] == [0, 1, 2, 3] and said["chart"] == ["cluster 1, the answer's"]
    assert "so it is placed in cluster 1, with sampled answers #1, #2, #3, #4" in said["fold"]


def test_the_views_read_the_verdicts_placement_not_their_own():
    """A verdict that placed the answer elsewhere (as a saved analysis may carry) is what every
    view shows: none places the answer again."""
    import dataclasses

    result = placed_result("Paris", [("Paris", 0), ("Paris.", 0), ("Lyon", 1), ("Lyon", 1),
                                     ("Nice", 2)])
    moved = dataclasses.replace(result.verdict.evidence, clusters=(1,), matched=(2,),
                                members=(2, 3), agreeing=2)
    result.verdict = dataclasses.replace(result.verdict, evidence=moved)
    said = page_accounts(result)
    assert said["marked"] == [2, 3] and said["chart"] == ["cluster 2, the answer's"]
    assert "placed in cluster 2, with sampled answers #3, #4" in said["fold"]
