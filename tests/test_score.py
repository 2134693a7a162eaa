"""Answers in, analysis out: ``mars_demo.score`` on answers made anywhere, and re-scoring."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

import mars_demo
from mars_demo.answers import Answer, AnswerSet
from mars_demo.engine import Engine
from mars_demo.errors import AnswerSetError
from mars_demo.models import registry
from mars_demo.models.contract import Prompt
from mars_demo.models.nli import NLIModel
from mars_demo.result import AnalysisResult

QUESTION = "Which planet is known as the Red Planet?"
MEASURES = ("confidence", "entropy", "semantic_entropy")
SCORINGS = ("length_normalized", "mars")


def uncertainties(result: AnalysisResult) -> dict[tuple[str, str], float]:
    u = result.uncertainty
    return {(m, k): getattr(getattr(u, m), k) for m in MEASURES for k in SCORINGS}


@pytest.fixture(scope="module")
def analysis(tiny_settings) -> AnalysisResult:
    return Engine(tiny_settings).analyze(QUESTION)


def hand_made() -> dict:
    return {
        "question": QUESTION,
        "greedy": {"text": "It is Mars", "tokens": [
            {"text": "It", "logprob": -0.5}, {"text": " is", "logprob": -0.2},
            {"text": " Mars", "logprob": -0.1}]},
        "samples": [
            {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.3}]},
            {"text": "Venus", "tokens": [{"text": "Ven", "logprob": -2.0},
                                         {"text": "us", "logprob": -0.01}]},
        ],
    }


# --- JSON in = JSON out ------------------------------------------------------------------------


def test_the_analysis_json_scores_to_the_same_uncertainties_without_an_llm(
    analysis, tiny_settings, no_llm
):
    data = json.loads(json.dumps(analysis.to_dict()))
    again = mars_demo.score(data, importance=tiny_settings.importance, nli=tiny_settings.nli)
    before, after = uncertainties(analysis), uncertainties(again)
    for key in before:
        assert after[key] == pytest.approx(before[key], abs=1e-6), key
    assert again.greedy.mars_weights == pytest.approx(analysis.greedy.mars_weights, abs=1e-9)
    assert again.cluster_ids == analysis.cluster_ids
    assert again.settings["logprob_source"] == "generation"  # as the analysis recorded
    # what made the answers is kept; what scored them is recorded
    assert again.settings["llm"] == analysis.settings["llm"]
    assert again.settings["temperature"] == analysis.settings["temperature"]
    assert again.settings["nli"] == tiny_settings.nli
    assert "generate" not in again.timings_s


def test_an_analysis_result_object_is_an_answer_set_too(analysis, tiny_settings, no_llm):
    again = Engine(tiny_settings).score(analysis)
    assert uncertainties(again) == pytest.approx(uncertainties(analysis), abs=1e-6)


def test_a_hand_made_answer_set_is_scored_with_offsets_from_its_token_texts(
    tiny_settings, no_llm
):
    result = Engine(tiny_settings).score(hand_made())
    assert result.settings["logprob_source"] == "given"
    g = result.greedy
    assert [(t.start, t.end) for t in g.tokens] == [(0, 2), (2, 5), (5, 10)]
    assert [t.id for t in g.tokens] == [None, None, None]
    assert g.scores.length_normalized == pytest.approx((-0.5 - 0.2 - 0.1) / 3)
    # Confidence is minus the greedy score; Entropy minus the mean sample score
    assert result.uncertainty.confidence.length_normalized == pytest.approx(0.8 / 3)
    ln = [-0.3, (-2.0 - 0.01) / 2]
    assert result.uncertainty.entropy.length_normalized == pytest.approx(-sum(ln) / 2)
    json.dumps(result.to_dict())  # plain JSON (token ids may be null)


def test_a_first_token_with_the_space_after_the_prompt_is_accepted(tiny_settings, no_llm):
    data = hand_made()
    data["samples"][0] = {"text": "Mars", "tokens": [{"text": " Mars", "logprob": -0.3}]}
    result = Engine(tiny_settings).score(data)
    tok = result.samples[0].tokens[0]
    assert (tok.start, tok.end) == (0, 4)


def test_given_offsets_are_used_and_checked():
    data = hand_made()
    data["greedy"]["tokens"] = [
        {"text": "It", "logprob": -0.5, "start": 0, "end": 2},
        {"text": " is", "logprob": -0.2, "start": 2, "end": 5},
        {"text": " Mars", "logprob": -0.1, "start": 5, "end": 10},
    ]
    assert AnswerSet.from_dict(data).greedy.spans == [(0, 2), (2, 5), (5, 10)]
    data["greedy"]["tokens"][2]["end"] = 11
    with pytest.raises(AnswerSetError, match="greedy answer, token 3: start 5, end 11"):
        AnswerSet.from_dict(data)


def mutate(path: str, value) -> dict:
    data = hand_made()
    target = data
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if k.isdigit() else target[k]
    last = keys[-1]
    if value is KeyError:
        del target[int(last) if last.isdigit() else last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        (mutate("samples.1.tokens.0.logprob", KeyError), "sample 2, token 1 ('Ven'): has no logprob"),
        (mutate("samples.1.tokens.0.logprob", None), "sample 2, token 1 ('Ven'): has no logprob"),
        (mutate("greedy.tokens.1.logprob", float("nan")),
         "greedy answer, token 2 (' is'): logprob must be a finite number"),
        (mutate("greedy.tokens.1.logprob", float("-inf")),
         "greedy answer, token 2 (' is'): logprob must be a finite number"),
        (mutate("greedy.tokens.1.logprob", "-0.2"),
         "greedy answer, token 2 (' is'): logprob must be a finite number"),
        (mutate("greedy.tokens.1.logprob", -(10**400)),
         "greedy answer, token 2 (' is'): logprob must be a finite number"),
        (mutate("samples.0.tokens.0.logprob", 0.5),
         "sample 1, token 1 ('Mars'): logprob 0.5 is positive"),
        (mutate("samples.0.tokens", []), "sample 1: has no tokens"),
        (mutate("samples", []), "at least one sampled answer"),
        (mutate("samples", KeyError), "at least one sampled answer"),
        (mutate("greedy", KeyError), "no greedy answer"),
        (mutate("question", "  "), "no question"),
        (mutate("greedy.tokens.2.text", " Venus"),
         "greedy answer, token 3 (' Venus'): the token texts do not spell the answer's text"),
        (mutate("samples.1.text", "Venusian"),
         "sample 2: the token texts spell 'Venus', which is only the beginning"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_a_bad_answer_set_gets_one_error_naming_answer_and_token(data, message):
    with pytest.raises(AnswerSetError) as err:
        AnswerSet.from_dict(data)
    assert message in str(err.value)
    assert len(str(err.value)) < 400  # one readable line, no 400-digit echo


def test_a_tiny_positive_logprob_is_rounding_not_an_error():
    data = mutate("samples.0.tokens.0.logprob", 1e-9)
    assert AnswerSet.from_dict(data).samples[0].logprobs == [0.0]


# --- answers without log-probs: a teacher-forced pass --------------------------------------------


def test_answers_given_as_text_are_scored_by_a_teacher_forced_pass(tiny_settings):
    engine = Engine(tiny_settings)
    data = {"question": QUESTION, "greedy": "Mars is red", "samples": ["Mars", "It is Mars"]}
    result = engine.score(data)
    assert result.settings["logprob_source"] == "teacher-forced"
    assert any("no log-probs were given" in w and "teacher-forced" in w
               for w in result.warnings)
    # The log-probs are the LLM's own: check them against an independent forward pass.
    llm = registry.load_llm(tiny_settings.llm)
    prompt, prompt_ids, preset, _ = llm.build_prompt(QUESTION, None)
    assert result.prompt == prompt and result.prompt_token_ids == prompt_ids
    for answer in [result.greedy, *result.samples]:
        ids = [t.id for t in answer.tokens]
        assert llm.tokenizer.decode(ids).strip() == answer.text
        with torch.inference_mode():
            ids_t = torch.tensor([prompt_ids + ids], device=llm.device)  # GPU too
            logits = llm.model(ids_t).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        expected = [float(logp[len(prompt_ids) - 1 + i, tid]) for i, tid in enumerate(ids)]
        assert [t.logprob for t in answer.tokens] == pytest.approx(expected, abs=1e-4)
        assert "".join(t.text for t in answer.tokens) == answer.text


def test_teacher_forcing_gives_generation_its_own_logprobs(tiny_settings, analysis):
    """Answers generated here, given back as text, get the log-probs generation gave them
    (where the tokenizer reads the text back as the same tokens)."""
    llm = registry.load_llm(tiny_settings.llm)
    prompt = Prompt(analysis.prompt, analysis.prompt_token_ids, "chat", [])
    compared = 0
    for answer in [analysis.greedy, *analysis.samples]:
        ids = [t.id for t in answer.tokens]
        if llm.tokenizer(answer.text, add_special_tokens=False)["input_ids"] != ids:
            continue  # random weights make odd token sequences that re-tokenize differently
        forced = llm.teacher_forced(prompt, [Answer.text_only(answer.text)])[0]
        assert forced.logprobs == pytest.approx([t.logprob for t in answer.tokens], abs=1e-4)
        compared += 1
    single = analysis.greedy.tokens[0]
    forced = llm.teacher_forced(prompt, [Answer.text_only(llm.tokenizer.decode([single.id]))])[0]
    if forced.token_ids == [single.id]:
        compared += 1
        assert forced.logprobs[0] == pytest.approx(single.logprob, abs=1e-4)
    assert compared >= 1


def test_a_mixed_set_forces_only_the_answers_without_logprobs(tiny_settings):
    data = hand_made()
    data["samples"].append("Mars, the fourth planet")
    result = Engine(tiny_settings).score(data)
    assert result.samples[0].tokens[0].logprob == -0.3  # given, kept
    assert result.settings["logprob_source"] == "given+teacher-forced"
    assert any(w.startswith("Sample 3: no log-probs were given") for w in result.warnings)


# --- re-scoring without generating again ----------------------------------------------------------


def test_rescoring_calls_neither_the_llm_nor_the_nli_model(tiny_settings, analysis, monkeypatch):
    engine = Engine(tiny_settings)
    engine.load()
    calls = {"llm": 0, "nli": 0}
    llm_forward = engine.models.llm.model.forward
    nli_judge = NLIModel.judge

    def counted_forward(*args, **kwargs):
        calls["llm"] += 1
        return llm_forward(*args, **kwargs)

    def counted_matrix(self, *args, **kwargs):
        calls["nli"] += 1
        return nli_judge(self, *args, **kwargs)

    monkeypatch.setattr(engine.models.llm.model, "forward", counted_forward)
    monkeypatch.setattr(NLIModel, "judge", counted_matrix)
    base = uncertainties(analysis)
    changed = {}
    for change in ({"normalization": "softmax"}, {"distribution": "max"},
                   {"cluster_rule": "lenient"}, {"importance_method": "token"}):
        again = engine.rescore(analysis, **change)
        assert again.settings[next(iter(change))] == next(iter(change.values()))
        changed[json.dumps(change)] = uncertainties(again) != base
    assert calls == {"llm": 0, "nli": 0}
    # the scoring options do change the MARS numbers, not the length-normalized ones
    again = engine.rescore(analysis, normalization="softmax")
    assert again.uncertainty.entropy.length_normalized == pytest.approx(
        analysis.uncertainty.entropy.length_normalized)
    assert any(changed.values())
    # the analysis scored as it is reuses its verdicts; its answers alone (no earlier result)
    # are judged again (semantic density's greedy-to-sample pairs in the same call)
    engine.score(analysis)
    assert calls == {"llm": 0, "nli": 0}
    engine.score(analysis.answer_set())
    assert calls == {"llm": 0, "nli": 1}


def test_rescoring_keeps_the_generation_warnings(tiny_settings, analysis):
    cut = [w for w in analysis.warnings if "max-new-tokens" in w]
    again = Engine(tiny_settings).rescore(analysis, distribution="min")
    assert [w for w in again.warnings if "max-new-tokens" in w] == cut


def test_score_refuses_unknown_options():
    with pytest.raises(ValueError, match="unknown option"):
        mars_demo.score(hand_made(), normalisation="sum")


def test_the_answer_set_round_trips(analysis):
    answers = analysis.answer_set()
    again = AnswerSet.from_dict(json.loads(json.dumps(answers.to_dict())))
    assert again.greedy.spans == answers.greedy.spans
    assert again.greedy.logprobs == answers.greedy.logprobs
    assert [s.text for s in again.samples] == [s.text for s in answers.samples]
    assert again.prompt_token_ids == analysis.prompt_token_ids
    # mutating the copy leaves the result alone
    copy.deepcopy(answers).greedy.logprobs[0] = 0.0
    assert math.isfinite(analysis.greedy.tokens[0].logprob)


def test_scoring_loads_no_llm_into_the_cache(tiny_settings, analysis):
    registry.release()
    Engine(tiny_settings).score(analysis.to_dict())
    assert not [k for k in registry.loaded_keys() if k[0] == "llm"]
