"""A cancelled request (closed tab, cancelled client) stops its analysis and frees the models.

Levels: the engine (``should_stop`` -> ``AnalysisCancelled``, counted in LLM forward passes, no
timing), the page's handlers called directly (closing the generator stops the worker thread), the
API coroutine (a cancelled task stops the analysis), and ``app.py`` itself: a browser-like client
that goes away mid-answer, and ``gradio_client``'s ``Job.cancel()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid

import httpx
import pytest
from gradio_client import Client
from gradio_client.utils import Status
from ui_helpers import APP_LOGS, FakeEngine

from mars_demo.engine import Engine
from mars_demo.errors import AnalysisCancelled
from mars_demo.models.llm import stop_criterion
from mars_demo.ui.page.controller import ASK_OUTPUTS, Controller
from mars_demo.ui.page.events import packed
from mars_demo.ui.work.host import EngineHost
from mars_demo.ui.work.worker import CANCELLED_LOG, HEARTBEAT_S

QUESTION = "Which planet is known as the Red Planet?"
WAIT_S = 120  # generous bound for things that take well under a second when all is well
# Settings whose analysis takes long with the tiny models (they never stop before the token
# limit): ~50 s on 2 CPU cores if the cancel did not stop it.
LONG = {"samples": 20, "max_new_tokens": 512}


@contextlib.contextmanager
def forward_calls(model, on_call=None):
    """Count the forward passes of ``model``; ``on_call(n)`` runs before the n-th one."""
    count = [0]

    def hook(module, args):
        count[0] += 1
        if on_call is not None:
            on_call(count[0])

    handle = model.register_forward_pre_hook(hook)
    try:
        yield count
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def engine(tiny_settings):
    engine = Engine(tiny_settings)
    engine.load()
    return engine


def analysis_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "mars-analyze"}


# --- engine ------------------------------------------------------------------------------------


def test_stop_criterion_finishes_every_row_once_asked():
    import torch

    flag = [False]
    criterion = stop_criterion(lambda: flag[0])
    ids = torch.zeros((3, 5), dtype=torch.long)
    assert criterion(ids, None).tolist() == [False, False, False]
    flag[0] = True
    done = criterion(ids, None)
    assert done.dtype == torch.bool and done.tolist() == [True, True, True]


@pytest.mark.parametrize("prompt", ["chat", "paper"])  # paper: with transformers' stop strings
def test_engine_stops_at_the_next_token_and_frees_the_models(engine, prompt):
    llm = engine.models.llm
    s = engine.settings.replace(samples=5, max_new_tokens=64, prompt=prompt)
    stages: list[str] = []
    with forward_calls(llm.model) as calls:
        with pytest.raises(AnalysisCancelled):
            engine.analyze(
                QUESTION,
                s,
                progress=lambda stage, fraction: stages.append(stage),
                should_stop=lambda: calls[0] >= 1,  # true once the first token is computed
            )
    assert calls[0] == 1  # the first step of the batch (greedy row + samples); no more tokens
    assert stages == ["generate"]  # importance, NLI and uncertainty never started
    assert not engine.busy

    with forward_calls(llm.model) as calls:
        result = engine.analyze(QUESTION, s)  # the models are free: the next request works
    assert result.question == QUESTION and len(result.samples) == 5
    # the uncancelled run: one batched call, as many steps as its longest answer needs
    longest = max(len(a.tokens) for a in [result.greedy, *result.samples])
    assert longest <= calls[0] <= s.max_new_tokens


def test_engine_stops_between_stages(engine):
    importance = engine.models.importance.model
    flag = [False]

    def progress(stage, fraction):
        if (stage, fraction) == ("generate", 1.0):
            flag[0] = True

    with forward_calls(importance) as calls:
        with pytest.raises(AnalysisCancelled):
            engine.analyze(QUESTION, progress=progress, should_stop=lambda: flag[0])
    assert calls[0] == 0
    assert not engine.busy


def test_engine_cancelled_before_it_starts_runs_no_model(engine):
    with forward_calls(engine.models.llm.model) as calls:
        with pytest.raises(AnalysisCancelled):
            engine.analyze(QUESTION, should_stop=lambda: True)
    assert calls[0] == 0


# --- the page's handler ------------------------------------------------------------------------


def ask_args(question: str, samples: int, max_new_tokens: int) -> tuple:
    return (question, "mars", samples, 0.5, max_new_tokens, 0, "auto", "model", "sum", "equal",
            "strict",
            "default")


def test_closing_the_page_handler_stops_the_analysis(engine, monkeypatch):
    """What Gradio does when the tab is closed or the event cancelled: ``close()`` the
    handler's generator. The worker thread must end and free the models before ``close()``
    returns. The model's second step lasts until the worker is told to stop (as a step in
    flight ends on its own), so ``close()`` waits for that step alone."""
    from mars_demo.ui.work import worker as worker_module

    host = EngineHost(engine)
    controller = Controller(host)
    entered, gate = threading.Event(), threading.Event()
    cancel = worker_module.Worker.cancel

    def cancel_ends_the_step(self):
        cancel(self)
        gate.set()

    monkeypatch.setattr(worker_module.Worker, "cancel", cancel_ends_the_step)

    def hold_second_step(n):  # keep the analysis inside generation until the page is closed
        if n == 2:
            entered.set()
            gate.wait(WAIT_S)

    before = analysis_threads()
    with forward_calls(engine.models.llm.model, hold_second_step) as calls:
        try:
            handler = packed(controller.ask, ASK_OUTPUTS)(*ask_args(QUESTION, **LONG))
            first = next(handler)
            assert first[ASK_OUTPUTS.index("result")] is None  # the analysis started
            assert entered.wait(WAIT_S)
            (worker,) = analysis_threads() - before
            assert not gate.is_set()
            handler.close()  # GeneratorExit at the handler's yield
            assert gate.is_set()  # the worker was told to stop ...
            assert not worker.is_alive()  # ... and had ended when close() returned
        finally:
            gate.set()
        worker.join(WAIT_S)
        assert not worker.is_alive()
    assert calls[0] == 2  # stopped right after the step that was running
    assert not engine.busy

    updates = list(controller.ask(*ask_args(QUESTION, 2, 4)))
    assert updates[-1]["result"].question == QUESTION  # the next request completes


class SilentEngine(FakeEngine):
    """Reports nothing while it runs (like sampling or NLI) until told to stop."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped = threading.Event()

    def analyze(self, question, settings=None, *, progress=None, on_text=None, should_stop=None):
        deadline = time.monotonic() + WAIT_S
        while not should_stop():
            if time.monotonic() > deadline:
                raise TimeoutError("never told to stop")
            time.sleep(0.01)
        self.stopped.set()
        raise AnalysisCancelled("the analysis was cancelled")


def test_a_silent_analysis_still_yields_so_gradio_can_close_it():
    engine = SilentEngine()
    before = analysis_threads()
    handler = Controller(EngineHost(engine)).ask(*ask_args(QUESTION, 2, 4))
    next(handler)
    (worker,) = analysis_threads() - before
    heartbeat = next(handler)  # comes within HEARTBEAT_S although the engine reported nothing
    assert "mars-streaming" in heartbeat["answer"]
    assert not engine.stopped.is_set()
    handler.close()
    assert engine.stopped.wait(WAIT_S)
    worker.join(WAIT_S)
    assert not worker.is_alive()
    assert HEARTBEAT_S <= 1.0


def test_an_analysis_that_ends_normally_is_not_cancelled():
    engine = FakeEngine()
    seen = []
    original = engine.analyze

    def analyze(*args, should_stop=None, **kwargs):
        result = original(*args, **kwargs)
        seen.append(should_stop())
        return result

    engine.analyze = analyze
    updates = list(Controller(EngineHost(engine)).ask(*ask_args(QUESTION, 2, 4)))
    assert seen == [False] and updates[-1]["result"] is not None


def test_a_cancelled_api_request_stops_the_analysis():
    """Gradio cancels the API coroutine's task on ``/cancel``; the analysis must stop."""
    engine = SilentEngine()
    endpoint = Controller(EngineHost(engine)).api.endpoint()

    async def cancel_while_running():
        task = asyncio.ensure_future(endpoint(QUESTION, 2))
        await asyncio.sleep(0.2)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_while_running())
    assert engine.stopped.wait(WAIT_S)


def test_the_api_coroutine_keeps_the_api_signature():
    import inspect

    controller = Controller(EngineHost(FakeEngine()))
    from mars_demo.ui.work import controls

    endpoint = controller.api.endpoint()
    assert inspect.iscoroutinefunction(endpoint)
    params = inspect.signature(endpoint).parameters
    assert list(params) == ["question", *controls.API_OPTIONS]
    assert params["samples"].default == 5 and params["prompt"].default == "auto"
    for name in params:  # every parameter is described in the docstring Gradio reads
        assert f"\n    {name}: " in endpoint.__doc__, name
    assert asyncio.run(endpoint(QUESTION, 2))["question"] == QUESTION


# --- app.py ------------------------------------------------------------------------------------


def cancelled_count(url: str) -> int:
    return sum(CANCELLED_LOG in line for line in APP_LOGS[url])


def wait_for_cancel(url: str, count: int) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if cancelled_count(url) >= count:
            return True
        time.sleep(0.1)
    return False


def test_closing_the_tab_stops_the_analysis(app_url):
    """A browser-like client: joins the queue for the page's Ask event, reads the streamed
    answer for a moment, then goes away (the closed tab)."""
    config = httpx.get(f"{app_url}/config", timeout=30).json()
    ask = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    session = uuid.uuid4().hex[:11]
    before = cancelled_count(app_url)
    joined = httpx.post(
        f"{app_url}/gradio_api/queue/join",
        json={
            "data": list(ask_args(QUESTION, **LONG)),
            "fn_index": ask["id"],
            "trigger_id": ask["targets"][0][0],
            "session_hash": session,
            "event_data": None,
        },
        timeout=30,
    )
    assert joined.status_code == 200, joined.text
    streamed = 0
    with httpx.stream(
        "GET", f"{app_url}/gradio_api/queue/data", params={"session_hash": session}, timeout=60
    ) as stream:
        for line in stream.iter_lines():
            assert '"msg":"process_completed"' not in line, line  # it must still be running
            streamed += '"msg":"process_generating"' in line
            if streamed >= 3:  # the answer is streaming: close the tab
                break
    assert wait_for_cancel(app_url, before + 1), "".join(APP_LOGS[app_url][-30:])
    data = Client(app_url, verbose=False).predict(
        QUESTION, samples=1, max_new_tokens=3, api_name="/analyze"
    )
    assert data["question"] == QUESTION


def test_a_cancelled_client_job_stops_the_analysis(app_url):
    client = Client(app_url, verbose=False)
    before = cancelled_count(app_url)
    job = client.submit(QUESTION, api_name="/analyze", **LONG)
    deadline = time.monotonic() + WAIT_S
    while job.status().code != Status.PROCESSING:
        assert not job.done() and time.monotonic() < deadline, job.status()
        time.sleep(0.05)
    time.sleep(0.3)  # let it get into generation
    job.cancel()
    assert wait_for_cancel(app_url, before + 1), "".join(APP_LOGS[app_url][-30:])
    data = Client(app_url, verbose=False).predict(
        QUESTION, samples=1, max_new_tokens=3, api_name="/analyze"
    )
    assert data["question"] == QUESTION
