"""Hugging Face ZeroGPU (``mars_demo/hosting/zerogpu.py``, the "GPU work" of ``mars_demo/ui/work/worker.py``).

No ZeroGPU Space here. The claims that can be checked off one are checked two ways:

- in this process: the durations, the start-up options, the pieces of the GPU path (events,
  errors that cross a process, the platform's refusals, the request context of a worker);
- in a fresh process per state of the ``spaces`` package (``tests/zerogpu_probe.py``): ``app.py``
  starts as it does there, then the page's requests run through the Controller it built. With a
  recording stand-in for ``spaces`` the probe tells which model calls ran inside a decorated
  function; with the real package in ZeroGPU mode (its scheduler stood in for, no GPU) the GPU
  work runs in forked processes exactly as on a Space, streaming, cancel and errors included;
  without the package, or with it off a Space, the app runs as it always did.
"""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import pytest
from ui_helpers import FakeEngine

from mars_demo import serve as app
from mars_demo.errors import AnalysisCancelled
from mars_demo.hosting import zerogpu
from mars_demo.settings import Settings
from mars_demo.ui.page.controller import error_message
from mars_demo.ui.work import worker
from mars_demo.ui.work.host import EngineHost

PROBE = Path(__file__).with_name("zerogpu_probe.py")
QUESTION = "Which planet is known as the Red Planet?"
DECORATED = ["analyze_on_gpu", "score_on_gpu"]  # every function that runs the models
LONG = Settings(samples=20, max_new_tokens=512)  # the probe's cancelled request


# --- where the platform is ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "t", " True "])
def test_a_zerogpu_space_is_recognized_as_the_spaces_package_reads_it(value):
    assert zerogpu.requested({"SPACES_ZERO_GPU": value})


@pytest.mark.parametrize("value", ["", "false", "0", "no", "yes"])
def test_anything_else_is_not_zerogpu(value):
    assert not zerogpu.requested({"SPACES_ZERO_GPU": value})
    assert not zerogpu.requested({})


def test_off_a_space_the_installed_package_leaves_a_function_unchanged(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    import spaces  # the real package: requirements.txt lists it

    def work(x):
        return x

    assert zerogpu.spaces_module() is spaces
    assert zerogpu.gpu(duration=lambda x: 1)(work) is work
    assert not zerogpu.active()


def test_without_the_package_a_function_is_left_unchanged(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.setitem(sys.modules, "spaces", None)  # `import spaces` raises ImportError

    def work(x):
        return x

    assert zerogpu.gpu(duration=lambda x: 1)(work) is work
    assert not zerogpu.active()


def test_a_zerogpu_space_without_the_package_refuses_to_start(monkeypatch):
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setitem(sys.modules, "spaces", None)
    with pytest.raises(RuntimeError, match="'spaces' package is not installed"):
        zerogpu.gpu(duration=lambda: 1)


# --- the GPU time a request asks for ----------------------------------------------------------


def test_the_analysis_duration_is_the_documented_estimate():
    s = Settings(samples=5, max_new_tokens=64)
    # 20 s start, 64 steps x (1 + 0.1 x 5) x 0.05 s, 6 answers x 0.05 s, 30 NLI pairs x 0.02 s
    assert zerogpu.analysis_seconds(None, QUESTION, s) == 26  # ceil(20 + 4.8 + 0.3 + 0.6)


def test_the_analysis_duration_grows_with_samples_tokens_and_the_recipe():
    seconds = lambda **options: zerogpu.analysis_seconds(None, QUESTION, Settings(**options))
    assert seconds(samples=1, max_new_tokens=16) < seconds(samples=10, max_new_tokens=16)
    assert seconds(samples=5, max_new_tokens=16) < seconds(samples=5, max_new_tokens=256)
    # paper-code answers take up to 128 tokens, whatever was asked
    assert seconds(samples=5, max_new_tokens=32) < seconds(samples=5, max_new_tokens=32,
                                                           recipe="paper-code")
    assert seconds(samples=5, max_new_tokens=128) == seconds(samples=5, max_new_tokens=32,
                                                             recipe="paper-code")
    assert seconds(samples=20, max_new_tokens=512) > 3 * seconds(samples=1, max_new_tokens=8)


def test_the_scoring_duration_grows_with_the_answers_and_a_rescore_asks_less():
    def seconds(samples, reuse=None):
        answers = {"question": QUESTION, "samples": [{"text": "Mars"}] * samples}
        return zerogpu.scoring_seconds(None, answers, Settings(), reuse)

    assert seconds(2) < seconds(10) < seconds(20)
    assert seconds(20, reuse=object()) < seconds(20)
    # a malformed answer set is scheduled as an empty one: the engine then says what is wrong
    assert zerogpu.scoring_seconds(None, {"question": QUESTION}, Settings()) == seconds(0)


# --- the pieces of the GPU path ---------------------------------------------------------------


def test_a_worker_thread_sees_its_creators_request_context():
    """ZeroGPU reads Gradio's request (the visitor's quota token) from a context variable."""
    request = contextvars.ContextVar("request", default=None)
    request.set("the visitor's request")
    task = worker.Worker(lambda progress, on_text, should_stop: request.get(), "test-context")
    task.thread.join(30)
    assert task.events.get_nowait() == ("done", "the visitor's request")


def test_an_error_that_cannot_cross_a_process_arrives_with_its_type_and_message():
    class Local(Exception):  # a local class does not pickle
        pass

    def fail(progress, on_text, should_stop):
        raise Local("the GPU ran out of patience")

    elsewhere = worker.GpuCall(engine=0, pid=os.getpid() + 1, call=0)  # another process
    events = list(worker._events(elsewhere, fail))
    kind, exc = events[-1]
    assert kind == "error" and type(exc) is RuntimeError
    assert str(exc) == "Local: the GPU ran out of patience"

    here = worker.GpuCall(engine=0, pid=os.getpid(), call=0)  # the same process: as raised
    kind, exc = list(worker._events(here, fail))[-1]
    assert kind == "error" and type(exc) is Local


def test_the_platforms_refusal_is_shown_as_the_platform_says_it():
    message = "You have exceeded your free ZeroGPU quota (26s requested vs. 12s left)."

    def refused():  # what the spaces wrapper raises when it may not schedule the work
        raise gr.Error(message, title="ZeroGPU quota exceeded")
        yield  # a generator, as the wrapper is

    with pytest.raises(zerogpu.GpuRefused) as caught:
        worker._follow(refused(), None, None, None)
    assert str(caught.value) == message
    assert error_message(caught.value) == message


def test_a_cancel_closes_the_gpu_work_and_raises():
    closed = []

    def events():
        try:
            while True:
                yield "wait", None
        finally:
            closed.append(True)

    with pytest.raises(AnalysisCancelled):
        worker._follow(events(), None, None, lambda: True)
    assert closed == [True]


def test_gpu_work_reports_progress_text_and_result_through_the_callbacks():
    engine = FakeEngine()
    stages, texts = [], []
    result = worker.gpu_analyze(EngineHost(engine), QUESTION, Settings(),
                                progress=lambda stage, fraction: stages.append((stage, fraction)),
                                on_text=texts.append)
    assert result.question == QUESTION
    assert texts[-1] == result.greedy.text and len(texts) > 1  # streamed, in order
    assert [stage for stage, fraction in stages if fraction == 1.0] == [
        "generate", "importance", "nli", "uncertainty"]
    (question, settings), = engine.calls
    assert question == QUESTION and settings.models() == engine.settings.models()
    assert worker._CANCEL_CHECKS == {}  # nothing left behind by the call


# --- app.py's options on ZeroGPU --------------------------------------------------------------


def test_on_zerogpu_the_llm_loads_unquantized_unless_asked():
    zero = {"SPACES_ZERO_GPU": "true"}
    assert app.parse_args([], env=zero).settings.load_in_4bit is False
    assert app.parse_args(["--4bit"], env=zero).settings.load_in_4bit is True
    assert app.parse_args([], env={**zero, "MARS_DEMO_LOAD_IN_4BIT": "yes"}).settings.load_in_4bit


def test_elsewhere_4bit_stays_automatic_and_can_be_set():
    assert app.parse_args([], env={}).settings.load_in_4bit is None  # 4-bit on CUDA
    assert app.parse_args(["--no-4bit"], env={}).settings.load_in_4bit is False
    assert app.parse_args([], env={"MARS_DEMO_LOAD_IN_4BIT": "0"}).settings.load_in_4bit is False
    assert app.parse_args(["--4bit"], env={"MARS_DEMO_LOAD_IN_4BIT": "0"}).settings.load_in_4bit


def test_a_bad_4bit_variable_is_refused(capsys):
    with pytest.raises(SystemExit):
        app.parse_args([], env={"MARS_DEMO_LOAD_IN_4BIT": "maybe"})
    assert "MARS_DEMO_LOAD_IN_4BIT must be one of" in capsys.readouterr().err


# --- the app in a fresh process, per state of `spaces` ------------------------------------------


@pytest.fixture(scope="module")
def probe(tiny_models, tmp_path_factory):
    runs: dict[str, dict] = {}

    def run(mode: str) -> dict:
        if mode not in runs:
            out = tmp_path_factory.mktemp(f"zerogpu-{mode}")
            env = {k: v for k, v in os.environ.items() if not k.startswith("SPACES_")}
            done = subprocess.run(
                [sys.executable, str(PROBE), mode, str(tiny_models["llm"]),
                 str(tiny_models["importance"]), str(tiny_models["nli"]), str(out)],
                capture_output=True, text=True, timeout=600, env=env,
                cwd=Path(__file__).resolve().parents[1],
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
            assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-6000:]
            runs[mode] = json.loads(lines[-1][len("PROBE "):])
        return runs[mode]

    return run


@pytest.mark.parametrize("mode", ["absent", "inactive", "fake", "real"])
def test_the_page_works_in_every_state_of_spaces(probe, mode):
    r = probe(mode)
    assert r["ask"]["question"] == QUESTION and r["ask"]["error"] == ""
    assert r["ask"]["streamed"] >= 1  # the answer streamed before the result
    assert r["streaming"]["texts"] >= 2 and r["streaming"]["last_text_is_greedy"]
    assert {"generate", "importance", "nli", "uncertainty"} <= set(r["streaming"]["stages"])
    assert r["streaming"]["samples"] == 3
    assert r["api"] == QUESTION
    assert r["pasted"] == {"samples": 3, "error": ""}
    assert r["rescore"] == {"normalization": "softmax", "error": ""}
    # the engine's own error and message, raised inside the GPU work
    assert r["inner_error"] == {"type": "AnswerSetError",
                                "message": "the answer set has no greedy answer ('greedy')"}
    assert r["compiles"] == []  # ZeroGPU does not allow torch.compile


@pytest.mark.parametrize("mode", ["absent", "inactive", "fake", "real"])
def test_a_cancel_stops_the_gpu_work_in_every_state_of_spaces(probe, mode):
    cancel = probe(mode)["cancel"]
    assert cancel["raised"] == "AnalysisCancelled"
    # cancelled at its first token: a few steps instead of 512 (the tiny LLM never stops early)
    assert 1 <= cancel["llm_forwards"] <= 5
    assert cancel["next_question"] == QUESTION  # the models are free again


@pytest.mark.parametrize("mode", ["absent", "inactive"])
def test_off_zerogpu_the_app_starts_as_it_always_did(probe, mode):
    r = probe(mode)
    assert r["spaces_imported"] is (mode == "inactive")
    assert r["decorated"] == []  # the GPU functions are the plain functions
    # the page opened while the models loaded in the background thread
    assert r["launched"]["loaded_in"] in ([], ["mars-load-models"])
    assert {load["thread"] for load in r["loads"]} == {"mars-load-models"}
    assert r["engine_load_in_4bit"] is None  # 4-bit where CUDA is, as before


def test_exactly_the_functions_that_run_the_models_are_decorated(probe):
    """With a recording ``spaces``: every forward pass of every torch module ran inside a
    decorated function, and every model was loaded outside them, at start-up, in the main
    thread, before the page was launched."""
    r = probe("fake")
    assert sorted(r["decorated"]) == DECORATED
    assert r["forwards"]["total"]["outside"] == 0
    assert r["forwards"]["total"]["inside"] > 0
    assert all(not load["inside"] for load in r["loads"]) and len(r["loads"]) == 3
    assert r["launched"] == {"engine_ready": True, "status": "ready", "loaded_in": ["MainThread"]}
    assert r["auto_wrap_disabled"]  # no Gradio event is decorated behind the project's back
    assert r["engine_load_in_4bit"] is False


def test_each_gpu_call_asks_for_the_duration_of_its_request(probe):
    analyses = probe("fake")["decorated"]["analyze_on_gpu"]
    assert zerogpu.analysis_seconds(None, QUESTION, LONG) in analyses
    assert zerogpu.analysis_seconds(None, QUESTION, LONG) == max(analyses)
    assert min(analyses) == zerogpu.analysis_seconds(None, QUESTION,
                                                     Settings(samples=1, max_new_tokens=3))


def test_on_zerogpu_the_gpu_work_runs_in_the_packages_forked_processes(probe):
    """The real ``spaces`` in ZeroGPU mode: the app's process ran no model at all; the package
    reported the start-up, scheduled each call with its duration, let another process use the
    GPU, and released it when the work ended, cancelled or not."""
    r = probe("real")
    assert r["decorated"] == DECORATED
    assert r["launched"] == {"engine_ready": True, "status": "ready", "loaded_in": ["MainThread"]}
    assert r["forwards"]["total"] == {"inside": 0, "outside": 0, "llm_here": 0}
    calls = r["scheduler"]
    assert calls[0][0] == "/startup-report"
    allowed = {int(params["pid"]) for path, params in calls if path == "/allow"}
    assert allowed and r["parent_pid"] not in allowed
    schedules = [p for path, p in calls if path == "/schedule"]
    releases = [p for path, p in calls if path == "/release"]
    assert len(schedules) == len(releases) and all(p["fail"] == "false" for p in releases)
    durations = {int(p["durationSeconds"]) for p in schedules}
    assert zerogpu.analysis_seconds(None, QUESTION, LONG) in durations
