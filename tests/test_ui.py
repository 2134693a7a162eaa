"""The page without a browser: it builds without models, and every handler works when called directly.

A fake engine (tests/ui_helpers.py) stands in for the real one, so no model is loaded here.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time

import gradio as gr
import pytest
from ui_helpers import FakeEngine, make_answer, make_result

from mars_demo import texts
from mars_demo.downloads import DownloadStore
from mars_demo.errors import AnalysisOutOfMemory, InvalidModelOutput, ModelLoadError
from mars_demo.hosting.access import Access
from mars_demo.settings import MAX_QUESTION_CHARS, OptionError, Settings
from mars_demo.ui import build_demo, launch_options, load_examples
from mars_demo.ui.draw import explain, plots, render, tables
from mars_demo.ui.page.controller import (
    ASK_OUTPUTS,
    COMMAND_LINE_MODEL,
    SCORING_VIEW_OUTPUTS,
    Controller,
    model_choices,
)
from mars_demo.ui.work.host import EngineHost

QUESTION = "Which planet is known as the Red Planet?"
DEFAULT_OPTIONS = (5, 0.5, 64, 0, "auto", "model", "sum", "equal", "strict")
XSS_QUESTION = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> Which planet?'
XSS_ANSWER = "<img src=x onerror=alert(1)>"


SWITCH_ALLOWED = Access(allow_model_switch=True)  # app.py --allow-model-switch


def make_controller(engine: FakeEngine | None = None, access: Access = SWITCH_ALLOWED) -> Controller:
    return Controller(EngineHost(engine or FakeEngine()), access)


def ask(
    controller: Controller, question: str = QUESTION, scoring: str = "mars", options=DEFAULT_OPTIONS
) -> list[dict]:
    return list(controller.ask(question, scoring, *options))


def value(update):
    """The value of an output: gr.update(...) dicts carry it under "value"."""
    return update["value"] if isinstance(update, dict) else update


def visible(update) -> bool:
    """Shown: a visible update, or (error and warnings boxes) non-empty HTML."""
    if isinstance(update, dict):
        return update.get("visible") is True
    return bool(update)


def token_colors(html: str) -> list[str]:
    """Each token's shade (CSS --w: the share of the heaviest color in its background)."""
    return re.findall(r'class="mars-tok"[^>]*style="--w: ([^"]+)"', html)


def active_columns(html: str) -> set[str]:
    return set(re.findall(r'data-col="(\w+)" class="mars-active"', html)) | set(
        re.findall(r'data-col="(\w+)" data-label="[^"]*" class="mars-active"', html)
    )


# --- the page ----------------------------------------------------------------------------------


def test_the_verdict_and_its_answer_read_one_after_the_other():
    """The progress line ("Done. Total ... s" once done) comes after the answer and its
    warnings, not between the verdict and the answer."""
    config = build_demo(FakeEngine()).get_config_file()
    order = [c["props"].get("elem_id") for c in sorted(config["components"], key=lambda c: c["id"])]
    place = {name: order.index(name) for name in
             ("mars-verdict", "mars-answer", "mars-warnings", "mars-progress")}
    assert place["mars-verdict"] < place["mars-answer"] < place["mars-warnings"] < (
        place["mars-progress"]), place


def test_page_builds_without_loading_any_model():
    engine = FakeEngine()
    demo = build_demo(engine, access=SWITCH_ALLOWED)
    config = demo.get_config_file()
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    for elem_id in (
        "mars-question",
        "mars-ask",
        "mars-scoring",
        "mars-answer",
        "mars-progress",
        "mars-error",
        "mars-warnings",
        "mars-uncertainty-table",
        "mars-uncertainty-plot",
        "mars-phrases",
        "mars-samples",
        "mars-clusters-plot",
        "mars-nli-plot",
        "mars-download",
        "mars-settings",
        "mars-model",
        "mars-examples",
    ):
        assert elem_id in ids, elem_id
    assert engine.calls == [] and engine.switched == []
    public = [d["api_name"] for d in config["dependencies"] if d.get("api_visibility") == "public"]
    assert public == ["analyze", "score"]  # the API page lists only the two endpoints
    assert demo._queue.max_size == 32
    assert launch_options()["css_paths"][0].is_file()


def test_examples_include_the_papers_questions():
    questions = load_examples()
    for q in (
        "Which planet is known as the Red Planet?",
        "What is the capital city of Japan?",
        "Which element has the chemical symbol 'O'?",
        "What is the tallest building in the world?",
    ):
        assert q in questions
    assert len(questions) > 4
    assert "How many times does the letter r appear in the word strawberry?" in questions
    assert "Who was the second person to walk on the Moon?" not in questions  # usually right


# --- ask ---------------------------------------------------------------------------------------


def test_ask_shows_the_whole_analysis():
    controller = make_controller()
    updates = ask(controller)
    first, final = updates[0], updates[-1]
    assert "mars-streaming" in first["answer"] and not visible(first["results"])
    assert set(ASK_OUTPUTS) <= set(final)
    result = final["result"]
    assert result.question == QUESTION
    assert visible(final["results"]) and not visible(final["error"])
    assert len(token_colors(final["answer"])) == len(result.greedy.tokens)
    assert "Mars" in final["answer"]
    for key in ("confidence", "entropy", "semantic_entropy"):
        assert f'data-measure="{key}"' in final["uncertainty_table"]
    assert final["samples"].count("data-sample=") == len(result.samples)
    assert final["phrases"].count("data-phrase=") == len(result.greedy.phrases)
    assert "Total" in final["progress"] and 'data-stage="nli"' in final["progress"]
    for name in ("uncertainty_plot", "clusters_plot", "nli_plot"):
        assert final[name].data, name


def test_ask_passes_the_page_settings_to_the_engine():
    engine = FakeEngine()
    ask(
        make_controller(engine),
        options=(3, 0.7, 20, 42, "paper", "token", "softmax", "max", "lenient"),
    )
    question, settings = engine.calls[-1]
    assert question == QUESTION
    assert (settings.samples, settings.temperature, settings.max_new_tokens, settings.seed) == (
        3,
        0.7,
        20,
        42,
    )
    assert (settings.prompt, settings.importance_method, settings.normalization) == (
        "paper",
        "token",
        "softmax",
    )
    assert (settings.distribution, settings.cluster_rule) == ("max", "lenient")
    assert (settings.llm, settings.importance, settings.nli) == (
        engine.settings.llm,
        "imp-dir",
        "nli-dir",
    )
    ask(
        make_controller(engine),
        options=(5.0, 0.5, 64.0, 0.0, "auto", "model", "sum", "equal", "strict"),
    )
    assert engine.calls[-1][1].prompt is None and engine.calls[-1][1].samples == 5


def test_the_answer_streams_before_the_analysis_ends():
    class Slow(FakeEngine):
        def analyze(self, question, settings=None, *, progress=None, on_text=None,
                    should_stop=None):
            for partial in ("It", "It is", "It is Mars."):
                on_text(partial)
                time.sleep(0.15)
            progress("importance", 0.5)
            time.sleep(0.15)
            return super().analyze(question, settings, progress=progress)

    updates = ask(make_controller(Slow()))
    streamed = [u["answer"] for u in updates[1:-1]]
    assert any(">It is<" in a or "It is<span" in a for a in streamed)
    assert all("mars-streaming" in a for a in streamed)
    assert any(
        'data-stage="importance"' in u["progress"] and "mars-stage-active" in u["progress"]
        for u in updates[1:-1]
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("", "question is empty"),
        ("   ", "question is empty"),
        ("x" * (MAX_QUESTION_CHARS + 1), str(MAX_QUESTION_CHARS)),
    ],
)
def test_bad_question_shows_a_message_and_runs_nothing(question, expected):
    engine = FakeEngine()
    updates = ask(make_controller(engine), question=question)
    assert len(updates) == 1
    assert visible(updates[0]["error"]) and expected in value(updates[0]["error"])
    assert engine.calls == []
    # no answer of an earlier question is left under the new one
    assert updates[0]["answer"] == render.placeholder_html() and updates[0]["result"] is None
    assert not visible(updates[0]["results"]) and not visible(updates[0]["download"])


def test_bad_setting_shows_the_allowed_range():
    engine = FakeEngine()
    updates = ask(
        make_controller(engine), options=(0, 0.5, 64, 0, "auto", "model", "sum", "equal", "strict")
    )
    assert "samples must be an integer from 1 to 20" in value(updates[0]["error"])
    assert engine.calls == []


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (MemoryError(), texts.ERROR_OUT_OF_MEMORY),
        (
            AnalysisOutOfMemory("Ran out of memory during the analysis; try fewer samples"),
            "Ran out of memory during the analysis",
        ),
        (ModelLoadError("Could not load the LLM: 'x' is gated"), "Could not load the LLM"),
        (OptionError("question is empty: type a question"), "question is empty"),
        (RuntimeError("boom <b>"), "RuntimeError: boom &lt;b&gt;"),
        (
            InvalidModelOutput(
                "The LLM x produced invalid scores (NaN or infinity), so no uncertainty can be "
                "computed; load it in full precision (without 4-bit) or pick another model."
            ),
            "load it in full precision (without 4-bit) or pick another model",
        ),
    ],
)
def test_engine_errors_become_messages_and_the_next_request_works(error, expected):
    engine = FakeEngine()
    controller = make_controller(engine)
    engine.fail_with = error
    failed = ask(controller)[-1]
    assert visible(failed["error"]) and expected in value(failed["error"])
    assert failed["answer"] == render.placeholder_html()
    if type(error) is not RuntimeError:  # known errors get their own message
        assert "Something went wrong" not in value(failed["error"])
    ok = ask(controller)[-1]
    assert not visible(ok["error"]) and ok["result"].question == QUESTION


# --- scoring toggle ----------------------------------------------------------------------------


def test_toggle_recolors_tokens_and_moves_the_highlight_without_recomputing():
    engine = FakeEngine()
    controller = make_controller(engine)
    result = ask(controller)[-1]["result"]
    calls = len(engine.calls)
    mars = controller.show_scoring(result, "mars")
    ln = controller.show_scoring(result, "length_normalized")
    assert set(mars) == set(ln) == set(SCORING_VIEW_OUTPUTS) - {"error"}  # errors stay as they are
    assert len(engine.calls) == calls  # nothing recomputed

    ln_colors, mars_colors = token_colors(ln["answer"]), token_colors(mars["answer"])
    assert len(set(ln_colors)) == 1  # uniform 1/L
    assert len(set(mars_colors)) > 1 and ln_colors != mars_colors
    heaviest = max(range(len(result.greedy.tokens)), key=lambda i: result.greedy.mars_weights[i])
    assert (
        f'data-token="{heaviest}" data-weight="{result.greedy.mars_weights[heaviest]:.4f}"'
        in mars["answer"]
    )

    for name in ("uncertainty_table", "samples", "phrases"):
        assert active_columns(mars[name]) == {"mars"}, name
        assert active_columns(ln[name]) == {"length_normalized"}, name
    assert (
        'data-scoring="mars"' in mars["answer"]
        and 'class="mars-score mars-active" data-scoring="mars"' in mars["answer"]
    )
    assert 'class="mars-score mars-active" data-scoring="length_normalized"' in ln["answer"]
    mars_opacity = {bar.name: bar.opacity for bar in mars["uncertainty_plot"].data}
    assert (
        mars_opacity[texts.SCORING_NAMES["mars"]]
        > mars_opacity[texts.SCORING_NAMES["length_normalized"]]
    )
    ln_opacity = {bar.name: bar.opacity for bar in ln["clusters_plot"].data}
    assert (
        ln_opacity[texts.SCORING_NAMES["length_normalized"]]
        > ln_opacity[texts.SCORING_NAMES["mars"]]
    )


def test_toggle_before_any_result_changes_nothing():
    assert make_controller().show_scoring(None, "mars") == {}


def test_token_tooltip_has_text_probability_phrase_and_weight():
    result = make_result()
    html = render.answer_tokens_html(result.greedy, "mars")
    title = re.search(r'data-token="2"[^>]*data-tip="([^"]*)"', html).group(1)
    assert f'aria-label="{title}"' in html  # the same details for screen readers
    # in words: the token, its chance, its share of the weight, its phrase
    assert title.startswith("\u201cMars\u201d: the model gave it a 41% chance as it wrote it.")
    assert round(100 * math.exp(-0.9)) == 41
    share = result.greedy.mars_weights[2]
    assert f"It carries {share:.0%} of the answer&#x27;s weight under MARS scoring (25% if " \
        "every token weighed the same)." in title
    assert ("Part of \u201cMars.\u201d, which the importance model rates 0.95 for the meaning "
            "(it gets 95% of the importance).") in title
    assert "log" not in title and "0.0" not in title  # no jargon, no raw numbers
    assert html.count('class="mars-phrase"') == 2  # phrase boundaries are marked


def test_phrase_table_shares_sum_to_one_under_both_scorings():
    answer = make_result().greedy
    for scoring in render.SCORINGS:
        shares, outside = tables.score_shares(answer, scoring)
        assert sum(shares) + outside == pytest.approx(1.0)
    ln, _ = tables.score_shares(answer, "length_normalized")
    assert ln[1] == pytest.approx((-0.9 - 0.02) / (-0.05 - 0.1 - 0.9 - 0.02))
    html = tables.phrase_table_html(answer, "mars")
    assert "0.950" in html and "Mars." in html


def test_cluster_masses_follow_logsumexp_and_are_normalized():
    result = make_result()
    masses = result.cluster_masses("length_normalized")
    raw = {
        c: sum(
            math.exp(s.scores.length_normalized)
            for s, k in zip(result.samples, result.cluster_ids)
            if k == c
        )
        for c in (0, 1)
    }
    total = sum(raw.values())
    assert masses == pytest.approx({c: m / total for c, m in raw.items()})


def test_nli_plot_shows_every_verdict_with_labelled_axes():
    result = make_result()
    fig = plots.nli_figure(result)
    heat = fig.data[0]
    assert len(heat.z) == len(result.nli.answers)
    assert heat.z[1][3] == plots.NLI_ORDER.index("neutral") and heat.z[0][
        2
    ] == plots.NLI_ORDER.index("contradiction")
    assert fig.layout.yaxis.title.text == texts.PLOT_NLI_PREMISE
    assert fig.layout.xaxis.title.text == texts.PLOT_NLI_HYPOTHESIS


# --- escaping ----------------------------------------------------------------------------------


def test_question_and_answer_text_are_escaped_everywhere():
    evil = make_answer(
        [XSS_ANSWER, " is", " Mars"], [-0.5, -0.1, -0.2], [([0], 0.5), ([1, 2], 0.5)]
    )
    result = make_result(
        question=XSS_QUESTION, greedy=evil, warnings=[f"Greedy answer: odd token {XSS_ANSWER}"]
    )
    result.samples[0] = evil
    result.nli.answers[0] = evil.text
    engine = FakeEngine(result=result)
    final = ask(make_controller(engine), question=XSS_QUESTION)[-1]
    html_outputs = [final[k] for k in ("answer", "uncertainty_table", "phrases", "samples")] + [
        value(final["warnings"])
    ]
    for html in html_outputs:
        assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in final["answer"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in final["answer"]
    assert (
        "&lt;img" in final["samples"]
        and "&lt;img" in final["phrases"]
        and "&lt;img" in value(final["warnings"])
    )
    for name in ("clusters_plot", "nli_plot"):
        assert "<img" not in final[name].to_json(), name
    streaming = render.streaming_html(XSS_QUESTION, XSS_ANSWER)
    assert "<script" not in streaming and "<img" not in streaming
    assert "<b>" not in render.error_html("<b>bold</b>")


# --- download, warnings ------------------------------------------------------------------------


def test_download_file_holds_the_whole_analysis():
    controller = make_controller()  # its download folder lives as long as the controller (the page)
    final = ask(controller)[-1]
    assert visible(final["download"])
    path = value(final["download"])
    assert path.endswith(texts.DOWNLOAD_FILENAME)
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == final["result"].to_dict()


def test_download_store_keeps_only_the_latest_files():
    store = DownloadStore(keep=2)
    paths = [store.write(make_result().to_dict(), texts.DOWNLOAD_FILENAME) for _ in range(3)]
    assert [os.path.exists(p) for p in paths] == [False, True, True]


def test_warnings_are_shown_only_when_there_are_some():
    quiet = ask(make_controller())[-1]
    assert not visible(quiet["warnings"])
    noisy_engine = FakeEngine(result=make_result(warnings=[f"warning {i}" for i in range(5)]))
    noisy = ask(make_controller(noisy_engine))[-1]
    assert visible(noisy["warnings"])
    html = value(noisy["warnings"])
    assert all(f"warning {i}" in html for i in range(5)) and "<details>" in html


# --- models ------------------------------------------------------------------------------------


def test_model_switch_calls_engine_switch_and_updates_the_banner():
    engine = FakeEngine()
    controller = make_controller(engine)
    updates = list(controller.switch_model("qwen2.5-7b-instruct"))
    assert [s.llm for s in engine.switched] == ["qwen2.5-7b-instruct"]
    assert engine.switched[0].importance == "imp-dir"  # only the LLM changes
    assert (
        "Qwen2.5 7B Instruct" in updates[-1]["switch_status"]
        and "Loaded" in updates[-1]["switch_status"]
    )
    assert "banner" in updates[-1]
    assert any("loading llm" in u["switch_status"] for u in updates)


def test_failed_switch_says_why_and_blocks_analysis_until_a_model_loads():
    engine = FakeEngine()
    controller = make_controller(engine)
    engine.load_error = ModelLoadError(
        "Could not load the LLM: 'meta-llama/Llama-2-7b-hf' is a gated repository"
    )
    updates = list(controller.switch_model("llama-2-7b"))
    assert (
        "gated repository" in updates[-1]["switch_status"]
        and "mars-error" in updates[-1]["switch_status"]
    )
    assert "gated repository" in updates[-1]["banner"]
    message = value(ask(controller)[0]["error"])
    assert "could not be loaded" in message and "gated repository" in message
    engine.load_error = None
    list(controller.switch_model("cpu-small"))
    assert ask(controller)[-1]["result"] is not None


def test_model_choices_name_the_current_model():
    choices, current = model_choices(Settings(), cuda=False)
    assert current == "cpu-small" and ("Qwen2.5 0.5B Instruct (CPU)", "cpu-small") in choices
    assert model_choices(Settings(), cuda=True)[1] == "qwen2.5-7b-instruct"
    assert (
        model_choices(Settings(llm="Qwen/Qwen2.5-7B-Instruct"), cuda=True)[1]
        == "qwen2.5-7b-instruct"
    )
    choices, current = model_choices(Settings(llm="/models/tiny-llm"), cuda=False)
    # the path is in the label only: the values are what Gradio lists when it refuses a value
    assert current == COMMAND_LINE_MODEL and choices[-1] == (
        "/models/tiny-llm (from the command line)", COMMAND_LINE_MODEL)
    assert any("(gated)" in label for label, _ in choices)


def test_page_opened_while_models_load_says_so_then_works():
    gate = threading.Event()
    engine = FakeEngine(ready=False, load_gate=gate)
    host = EngineHost(engine)
    thread = host.start_loading()
    controller = Controller(host)
    banner = controller.banner()
    assert "Loading the models" in banner["banner"]
    assert banner["timer"].active is True
    assert "still loading" in value(ask(controller)[0]["error"])
    with pytest.raises(gr.Error, match="still loading"):
        controller.api.analyze(QUESTION)
    gate.set()
    thread.join(10)
    assert host.status().state == "ready"
    assert controller.banner()["timer"].active is False
    assert ask(controller)[-1]["result"] is not None


def test_banner_names_the_models_and_the_cpu_fallback():
    html = make_controller().banner_html()
    assert "Qwen2.5 0.5B Instruct (CPU)" in html and "imp-dir" in html and "cpu" in html
    assert texts.BANNER_CPU_FALLBACK in html


def test_failed_start_up_load_is_shown_on_the_page():
    engine = FakeEngine(ready=False)
    engine.load_error = ModelLoadError("Could not load the NLI model: no directory 'nli-dir'")
    host = EngineHost(engine)
    host.start_loading().join(10)
    controller = Controller(host)
    assert "no directory" in controller.banner_html()
    assert "no directory" in value(ask(controller)[0]["error"])


# --- API ---------------------------------------------------------------------------------------


def test_api_returns_the_engines_json_with_default_settings():
    engine = FakeEngine()
    data = make_controller(engine).api.analyze(QUESTION)
    assert data == make_result(QUESTION).to_dict()
    assert set(data) >= {
        "question",
        "prompt",
        "prompt_token_ids",
        "greedy",
        "samples",
        "nli",
        "cluster_ids",
        "uncertainty",
        "settings",
        "timings_s",
        "warnings",
    }
    settings = engine.calls[-1][1]
    assert settings == engine.settings.replace()  # the defaults, with the engine's models
    json.dumps(data)  # plain JSON


def test_api_takes_the_settings_as_optional_parameters():
    engine = FakeEngine()
    make_controller(engine).api.analyze(
        QUESTION,
        samples=2,
        temperature=1.0,
        max_new_tokens=8,
        seed=3,
        prompt="chat",
        importance_method="token",
        normalization="softmax",
        distribution="min",
        cluster_rule="lenient",
    )
    s = engine.calls[-1][1]
    assert (s.samples, s.temperature, s.max_new_tokens, s.seed, s.prompt) == (2, 1.0, 8, 3, "chat")
    assert (s.importance_method, s.normalization, s.distribution, s.cluster_rule) == (
        "token",
        "softmax",
        "min",
        "lenient",
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"question": ""}, "question is empty"),
        ({"question": QUESTION, "samples": 99}, "samples must be"),
        ({"question": QUESTION, "cluster_rule": "loose"}, "cluster_rule must be one of"),
        ({"question": QUESTION, "prompt": "fewshot"}, "prompt must be one of auto, paper, chat;"),
    ],
)
def test_api_bad_input_raises_a_clear_gradio_error(kwargs, expected):
    with pytest.raises(gr.Error, match=expected):
        make_controller().api.analyze(**kwargs)


def test_api_out_of_memory_is_an_error_and_the_next_call_works():
    engine = FakeEngine()
    controller = make_controller(engine)
    engine.fail_with = MemoryError()
    with pytest.raises(gr.Error, match="ran out of memory"):
        controller.api.analyze(QUESTION)
    assert controller.api.analyze(QUESTION)["question"] == QUESTION


# --- progress ----------------------------------------------------------------------------------


def test_progress_bar_follows_the_stages_and_shows_their_times():
    running = render.progress_html(render.StageProgress("nli", 0.5))
    assert 'aria-valuenow="62"' in running  # (2 + 0.5) / 4
    assert re.search(r'mars-stage-done" data-stage="importance"', running)
    assert re.search(r'mars-stage-active" data-stage="nli"', running)
    loading = render.progress_html(render.StageProgress("loading LLM", 0.25))
    assert 'aria-valuenow="0"' in loading and "loading LLM (25%)" in loading
    done = render.progress_html(timings_s={"load": 1.0, "generate": 2.5, "nli": 0.25})
    assert "2.50 s" in done and "Load models" in done and "Total 3.75 s" in done


# --- audit fixes: stale warnings, the toggle during an Ask, rendering errors, empty answers ------


def test_a_new_ask_and_an_error_clear_the_last_warnings():
    engine = FakeEngine(result=make_result(warnings=["the last question's warning"]))
    controller = make_controller(engine)
    assert "the last question" in value(ask(controller)[-1]["warnings"])
    engine.result = make_result()  # no warnings: the next analysis streams with none shown
    updates = ask(controller)
    assert "warnings" in updates[0] and not visible(updates[0]["warnings"])
    engine.fail_with = RuntimeError("boom")
    updates = ask(controller)
    assert "warnings" in updates[0] and not visible(updates[0]["warnings"])
    assert visible(updates[-1]["error"]) and not visible(updates[-1]["warnings"])


def test_the_toggles_re_render_is_registered_once_and_follows_every_stored_result():
    """A toggle flipped while the answer streams must still win: the one re-render of the stored
    result runs on either toggle and whenever a result is stored (the result state's change:
    an Ask's, pasted answers', a re-score's), reading the result and the toggles then. It is
    registered once, in the view group, one at a time (four registrations without a limit let
    one client run four at once)."""
    from mars_demo.hosting.access import VIEW_GROUP

    demo = build_demo(FakeEngine())
    config = demo.get_config_file()
    by_id = {c["id"]: c for c in config["components"]}

    def elem(dep_ids):
        return [by_id[i]["props"].get("elem_id") or by_id[i]["type"] for i in dep_ids]

    renders = [fn for fn in demo.fns.values() if fn.name == "show_scoring"]
    assert len(renders) == 1
    render_fn = renders[0]
    assert (render_fn.concurrency_id, render_fn.concurrency_limit) == (VIEW_GROUP, 1)
    assert {(elem([block])[0], event) for block, event in render_fn.targets} == {
        ("mars-scoring", "change"), ("mars-shade", "change"), ("state", "change")}
    assert elem([b._id for b in render_fn.inputs]) == ["state", "mars-scoring", "mars-shade"]
    outputs = elem([b._id for b in render_fn.outputs])
    assert "mars-answer" in outputs and "mars-error" in outputs
    ask_dep = next(d for d in config["dependencies"] if d["api_name"] == "ask")
    follow = [d for d in config["dependencies"] if d.get("trigger_after") == ask_dep["id"]]
    assert [d["api_name"] for d in follow] == ["_ask_ready"]  # no second re-render
    # what it computes: the stored result in the toggle's current scoring
    controller = make_controller()
    final = ask(controller, scoring="mars")[-1]
    assert 'data-scoring="mars"' in final["answer"]
    flipped = controller.show_scoring(final["result"], "length_normalized")
    assert 'data-scoring="length_normalized"' in flipped["answer"]


def test_a_failing_renderer_becomes_a_message_and_the_next_ask_works(monkeypatch):
    engine = FakeEngine()
    controller = make_controller(engine)

    def broken(*args, **kwargs):
        raise ValueError("renderer bug <b>")

    with monkeypatch.context() as patch:
        patch.setattr(explain, "answer_html", broken)
        updates = ask(controller)  # must not raise
        final = updates[-1]
        assert "ValueError: renderer bug &lt;b&gt;" in value(final["error"])
        assert final["answer"] == render.placeholder_html()
        assert "result" not in final and not visible(updates[0]["results"])
        assert controller.show_scoring(make_result(), "mars") == {
            "error": render.error_html(
                texts.ERROR_UNEXPECTED.format(error="ValueError: renderer bug <b>")
            )
        }
    ok = ask(controller)[-1]
    assert not visible(ok["error"]) and ok["result"].question == QUESTION


def test_a_download_that_cannot_be_written_still_shows_the_analysis(monkeypatch):
    controller = make_controller()

    def full_disk(result, public=False):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(controller.downloads, "write", full_disk)
    final = ask(controller)[-1]
    assert final["result"].question == QUESTION and visible(final["results"])
    assert not visible(final["download"])
    assert "No space left on device" in value(final["error"])
    assert "could not be written" in value(final["error"])


def test_an_empty_answer_says_so():
    empty = make_answer([""], [-0.7], [])  # the engine's empty answer: one zero-width token
    assert empty.text == "" and len(empty.tokens) == 1
    assert texts.ANSWER_EMPTY in render.answer_tokens_html(empty, "mars")
    assert texts.ANSWER_EMPTY in render.answer_tokens_html(empty, "length_normalized")
    result = make_result(greedy=empty)
    result.samples[2] = empty
    assert texts.ANSWER_EMPTY in explain.answer_html(result, "mars")
    assert texts.ANSWER_EMPTY in tables.samples_table_html(result, "mars")
    assert texts.ANSWER_EMPTY not in explain.answer_html(make_result(), "mars")


def test_question_box_limit_and_the_shared_model_note():
    config = build_demo(FakeEngine(), access=SWITCH_ALLOWED).get_config_file()
    props = {c["props"].get("elem_id"): c["props"] for c in config["components"]}
    assert props["mars-question"]["max_length"] == MAX_QUESTION_CHARS
    assert props["mars-model"]["info"] == texts.MODEL_INFO
    assert "all visitors" in texts.MODEL_INFO


def test_the_queue_size_can_be_set_for_tests_only():
    assert build_demo(FakeEngine(), queue_max_size=2)._queue.max_size == 2
    assert build_demo(FakeEngine())._queue.max_size == 32


def test_a_request_that_waited_during_a_model_switch_uses_the_new_models():
    """The page builds a request's settings before it holds the engine; a switch that ran in
    between must not make the request load the old models again."""
    engine = FakeEngine()
    host = EngineHost(engine)
    controller = Controller(host)
    waiting = controller.settings_from(3, 0.7, 8, 4, "paper", "token", "softmax", "max", "lenient")
    new_models = engine.settings.replace(llm="qwen2.5-7b-instruct", nli="other-nli", bem="b")
    host.switch(new_models)
    host.analyze("Which planet is red?", waiting)
    (_, used), = engine.calls
    for name in ("llm", "importance", "nli", "bem", "chunker", "load_in_4bit"):
        assert getattr(used, name) == getattr(new_models, name), name
    # the request's own analysis options are kept
    assert (used.samples, used.temperature, used.max_new_tokens, used.seed) == (3, 0.7, 8, 4)
    assert (used.prompt, used.importance_method, used.normalization) == ("paper", "token", "softmax")
    assert (used.distribution, used.cluster_rule) == ("max", "lenient")


@pytest.mark.parametrize(
    "value, shown, percent",
    [(-0.0, "0.000", "0.0%"), (-0.0001, "0.000", "0.0%"), (0.0, "0.000", "0.0%"),
     (-0.0006, "−0.001", "-0.1%"), (-6.4271, "−6.427", "-642.7%")],
)
def test_numbers_never_show_a_negative_zero(value, shown, percent):
    assert render.fmt(value) == shown
    assert render.percent(value) == percent


def test_every_font_face_the_page_declares_has_every_basic_latin_glyph():
    """Gradio's bundled semibold faces hold two basic-Latin glyphs; a theme that declares them
    draws bold text letter by letter from two fonts."""
    from fontTools.ttLib import TTFont
    from gradio.themes.utils.fonts import LocalFont, font_file_path

    theme = launch_options()["theme"]
    faces = [
        (font.name, weight)
        for font in [*theme._font, *theme._font_mono]
        if isinstance(font, LocalFont)
        for weight in font.weights
    ]
    assert {name for name, _ in faces} == {"Source Sans Pro", "IBM Plex Mono"}
    for name, weight in faces:
        glyphs = TTFont(font_file_path(name, weight)).getBestCmap()
        missing = [chr(c) for c in range(0x21, 0x7F) if c not in glyphs]
        assert not missing, (name, weight, "".join(missing))


def test_the_bundled_semibold_faces_are_still_incomplete():
    """Why the theme declares no 600 face: if Gradio ever ships complete semibold files, this
    fails and the workaround in launch.FONT_WEIGHTS can go."""
    from fontTools.ttLib import TTFont
    from gradio.themes.utils.fonts import font_file_path

    glyphs = TTFont(font_file_path("Source Sans Pro", 600)).getBestCmap()
    assert not all(ord(c) in glyphs for c in "MARS Demo")
