"""The page's re-scoring and "Score your own answers", on the real engine with tiny models."""

from __future__ import annotations

import json

import pytest

from mars_demo import texts
from mars_demo.engine import Engine
from mars_demo.models.nli import NLIModel
from mars_demo.result import AnalysisResult
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work import controls
from mars_demo.ui.work.host import EngineHost
from mars_demo.ui.work.pasted import OWN_MAX_SAMPLES

QUESTION = "Which planet is known as the Red Planet?"
DEFAULTS = {"samples": 3, "temperature": 0.5, "max_new_tokens": 8, "seed": 0, "prompt": "auto",
            "importance_method": "model", "normalization": "sum", "distribution": "equal",
            "cluster_rule": "strict", "recipe": "default"}


def page_options(**changes) -> list:
    values = {**DEFAULTS, **changes}
    return [values[name] for name in controls.PAGE_OPTIONS]


@pytest.fixture(scope="module")
def controller(tiny_settings) -> Controller:
    engine = Engine(tiny_settings)
    engine.load()
    return Controller(EngineHost(engine))


@pytest.fixture(scope="module")
def shown(controller) -> AnalysisResult:
    updates = list(controller.ask(QUESTION, "mars", *page_options()))
    result = updates[-1]["result"]
    assert isinstance(result, AnalysisResult)
    return result


def test_every_page_option_has_a_control_built_from_the_schema(controller):
    from mars_demo.options import OPTIONS

    for name in controls.PAGE_OPTIONS:
        c = controls.control(name)
        opt = OPTIONS[name]
        if opt.bounds is not None:
            assert (c.minimum, c.maximum) == opt.bounds
        else:
            values = [v for _, v in c.choices if v != controls.AUTO]
            assert set(values) <= set(opt.choices) and len(values) >= 2
            if name != "normalization":  # sum-softmax is for the CLI and API (own temperature)
                assert set(values) == set(opt.choices)
        assert c.value == (controls.AUTO if opt.default is None else opt.default)
        assert c.label == texts.OPTION_TEXTS[name][0]


def test_a_scoring_option_change_rescores_the_answer_on_screen(controller, shown, monkeypatch):
    llm = controller.host.engine.models.llm
    calls = {"llm": 0, "nli": 0}
    forward = llm.model.forward
    judge = NLIModel.judge

    def count_llm(*a, **k):
        calls["llm"] += 1
        return forward(*a, **k)

    def count_nli(self, *a, **k):
        calls["nli"] += 1
        return judge(self, *a, **k)

    monkeypatch.setattr(llm.model, "forward", count_llm)
    monkeypatch.setattr(NLIModel, "judge", count_nli)
    update = controller.rescore_options(shown, "mars", *page_options(distribution="max"))
    again = update["result"]
    assert again.settings["distribution"] == "max"
    assert [a.text for a in again.samples] == [a.text for a in shown.samples]
    assert again.greedy.token_importance != shown.greedy.token_importance
    assert "Re-scored the same answers with distribution max" in update["progress"]
    assert update["answer"] and update["uncertainty_table"]
    assert calls == {"llm": 0, "nli": 0}
    # the same options as the answer on screen: nothing to do
    assert controller.rescore_options(shown, "mars", *page_options()) == {}
    # nothing on screen yet: the options apply to the next Ask
    assert controller.rescore_options(None, "mars", *page_options(distribution="max")) == {}


def test_a_bad_option_on_rescore_is_a_message(controller, shown):
    update = controller.rescore_options(shown, "mars", *page_options(cluster_rule="loose"))
    assert set(update) == {"error"} and "cluster_rule must be one of" in update["error"]


def test_pasted_answers_are_scored_by_the_loaded_model(controller):
    updates = list(controller.score_own(
        QUESTION, "Mars is the red planet.", "Mars.\nIt is Mars.\n\nJupiter.", "", "mars",
        *page_options()))
    result = updates[-1]["result"]
    assert [a.text for a in result.samples] == ["Mars.", "It is Mars.", "Jupiter."]
    assert result.settings["logprob_source"] == "teacher-forced"
    assert "teacher-forced" in updates[-1]["warnings"]
    assert len(result.cluster_ids) == 3 and updates[-1]["answer"]


def test_a_pasted_answer_set_with_logprobs_is_used_as_given(controller):
    data = {"greedy": {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.25}]},
            "samples": [{"text": "Venus", "tokens": [{"text": "Venus", "logprob": -1.5}]}]}
    updates = list(controller.score_own(QUESTION, "", "", json.dumps(data), "mars",
                                        *page_options()))
    result = updates[-1]["result"]
    assert result.question == QUESTION  # taken from the question box
    assert result.settings["logprob_source"] == "given"
    assert result.uncertainty.confidence.length_normalized == pytest.approx(0.25)


@pytest.mark.parametrize(
    "greedy, samples, answer_json, message",
    [
        ("Mars", "", "", texts.OWN_NO_SAMPLES),
        ("", "Mars", "", texts.OWN_NO_GREEDY),
        ("Mars", "\n".join(["Mars"] * (OWN_MAX_SAMPLES + 1)), "",
         f"at most {OWN_MAX_SAMPLES} sampled answers"),
        ("", "", "{not json", "the answer set is not valid JSON"),
        ("", "", json.dumps({"greedy": "Mars", "samples": [
            {"text": "Mars", "tokens": [{"text": "Mars", "logprob": 3}]}]}),
         "sample 1, token 1 ('Mars'): logprob 3 is positive"),
        ("Mars", "x" * 30_000, "", "the limit on this page is 20000"),
    ],
)
def test_bad_pasted_answers_get_a_message_and_keep_the_page(controller, greedy, samples,
                                                            answer_json, message):
    updates = list(controller.score_own(QUESTION, greedy, samples, answer_json, "mars",
                                        *page_options()))
    assert len(updates) == 1 and updates[0]["result"] is None  # no earlier answer stays
    assert message in updates[0]["error"].replace("&#x27;", "'")


def test_the_score_api_takes_an_answer_set(controller):
    data = {"question": QUESTION, "greedy": "Mars", "samples": ["Mars", "Venus"]}
    out = controller.api.score(json.dumps(data), normalization="softmax")
    assert out["settings"]["normalization"] == "softmax"
    assert out["settings"]["logprob_source"] == "teacher-forced"
    import gradio as gr

    with pytest.raises(gr.Error, match="at least one sampled answer"):
        controller.api.score(json.dumps({"question": QUESTION, "greedy": "Mars", "samples": []}))
    with pytest.raises(gr.Error, match="temperature must be a number from 0.05 to 2.0; got an "
                                       "integer of about 401 digits"):
        controller.api.score(json.dumps(data), temperature=10**400)


def test_every_timing_the_engine_reports_has_a_name_on_the_page():
    from mars_demo.engine.stages import SCORING
    from mars_demo.ui.draw import render

    for key in ("load", "generate", "logprobs", "teacher_forced",
                *(stage.timing for stage in SCORING)):
        html = render.progress_html(timings_s={key: 0.5})
        assert f">{key}<" not in html, key  # a raw engine key would show up as the name
