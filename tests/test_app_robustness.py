"""What a public Space gets: odd questions, bad options, a full queue, many sessions, a model that
cannot load. Each must end in a clear message or a correct analysis, never a traceback, and the
server must keep serving.

The page's own events are private (``gradio_client`` refuses them), so they are sent the way the
browser sends them (:func:`ui_helpers.page_event`). ``app.py`` runs with the tiny models; the
queue and rendering tests serve a page over a :class:`ui_helpers.FakeEngine` in this process.
Timeouts below only keep a hung server from hanging the run; nothing asserts on time.
"""

from __future__ import annotations

import contextlib
import html
import math
import re
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError
from ui_helpers import (
    FakeEngine,
    free_port,
    page_event,
    running_app,
)

from mars_demo import texts
from mars_demo.ui import build_demo, launch_options
from mars_demo.ui.draw import explain, render

WAIT_S = 180  # generous: a tiny analysis takes about a second
QUESTION = "Which planet is known as the Red Planet?"
SMALL = {"samples": 2, "max_new_tokens": 4}  # small: the tests are not about the models
# The page's Ask inputs after (question, scoring): samples, temperature, max new tokens, seed,
# prompt, importance method, normalization, distribution, clustering rule.
PAGE_OPTIONS = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]
NOTHING_TYPED = "question is empty once control and invisible"

# (typed question, the question the analysis must be about; None = refused with ``message``)
ODD_QUESTIONS = [
    pytest.param("Which\x00 planet\x07 is\x1b red?\x7f", "Which planet is red?", id="control"),
    pytest.param("\u200b\u200c\u200d\u2060\ufeff", None, id="zero-width-only"),
    pytest.param("\u200fما هو الكوكب الأحمر؟\u200f", "ما هو الكوكب الأحمر؟", id="arabic-rtl"),
    pytest.param("\u202bמהו הכוכב האדום?\u202c", "מהו הכוכב האדום?", id="hebrew-rtl"),
    pytest.param("Which planet is red? 🔴🪐", "Which planet is red? 🔴🪐", id="emoji"),
    pytest.param("哪颗行星被称为红色星球？", "哪颗行星被称为红色星球？", id="chinese"),
    pytest.param(
        "Какая планета называется Красной?", "Какая планета называется Красной?", id="russian"
    ),
    pytest.param(
        "Question: x? Answer: y. Question: z?",
        "Question: x? Answer: y. Question: z?",
        id="prompt-breaking",
    ),
    pytest.param(
        "Question: x?\nAnswer: y.\n\nQuestion: z?",
        "Question: x? Answer: y. Question: z?",
        id="prompt-breaking-lines",
    ),
]


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text
    assert "Something went wrong" not in text, text  # an expected case, not an unexpected error


def check_analysis(data: dict, expected: str) -> None:
    """A finished analysis of ``expected``, with finite numbers and the question in the prompt."""
    assert data["question"] == expected
    assert data["prompt"].count(expected.rstrip("?")) == 1, data["prompt"]
    assert data["greedy"]["tokens"] and len(data["samples"]) == SMALL["samples"]
    for pair in data["uncertainty"].values():
        assert all(math.isfinite(v) for v in pair.values()), data["uncertainty"]


# --- (a) odd questions, on the page and through the API -----------------------------------------


@pytest.mark.parametrize(("typed", "expected"), ODD_QUESTIONS)
def test_odd_questions_through_the_api(client, typed, expected):
    if expected is None:
        with pytest.raises(AppError) as refused:
            client.predict(typed, **SMALL, api_name="/analyze")
        assert NOTHING_TYPED in str(refused.value)
        no_traceback(str(refused.value))
        return
    check_analysis(client.predict(typed, **SMALL, api_name="/analyze"), expected)


@pytest.mark.parametrize(("typed", "expected"), ODD_QUESTIONS)
def test_odd_questions_on_the_page(app_url, typed, expected):
    shown = page_event(app_url, "ask", [typed, "mars", *PAGE_OPTIONS])
    for value in shown.values():
        if isinstance(value, str):
            no_traceback(value)
    if expected is None:
        assert NOTHING_TYPED in shown["mars-error"]
        # no earlier answer left under the new question
        assert shown["mars-answer"] == render.placeholder_html()
        return
    assert shown["mars-error"] == ""
    answer = shown["mars-answer"]
    assert f'<p class="mars-question">{render.esc(expected)}</p>' in answer
    assert 'class="mars-tok"' in answer or texts.ANSWER_EMPTY in answer  # the final, colored one
    assert "mars-streaming" not in answer


# --- (b) options out of range -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"samples": 0}, "samples must be an integer from 1 to 20; got 0"),
        ({"samples": 1000}, "samples must be an integer from 1 to 20; got 1000"),
        ({"temperature": -1}, "temperature must be a number from 0.05 to 2.0; got -1"),
        ({"distribution": "uniform"}, "distribution must be one of equal, max, min; got 'uniform'"),
        ({"normalization": "l2"}, "normalization must be one of sum, softmax, sum-softmax; got 'l2'"),
        ({"prompt": "fewshot"}, "prompt must be one of auto, paper, chat; got 'fewshot'"),
    ],
)
def test_the_api_refuses_options_out_of_range_naming_the_allowed_ones(client, options, message):
    with pytest.raises(AppError, match=re.escape(message)) as refused:
        client.predict(QUESTION, **{**SMALL, **options}, api_name="/analyze")
    no_traceback(str(refused.value))
    assert client.predict(QUESTION, **SMALL, api_name="/analyze")["question"] == QUESTION


# --- a page served in this process, over a fake engine ------------------------------------------


@contextlib.contextmanager
def served(engine: FakeEngine, **build_options):
    """``build_demo(engine)`` launched on 127.0.0.1; yields (demo, url)."""
    demo = build_demo(engine, **build_options)
    port = free_port()
    demo.launch(
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        quiet=True,
        **launch_options(),
    )
    try:
        yield demo, f"http://127.0.0.1:{port}"
    finally:
        demo.close()


class BlockingEngine(FakeEngine):
    """Each analysis waits for ``gate``; ``entered`` is set once one has started."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def analyze(self, question, settings=None, **kwargs):
        self.entered.set()
        self.gate.wait(WAIT_S)
        return super().analyze(question, settings, **kwargs)


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# --- (c) a full queue ---------------------------------------------------------------------------


def test_a_full_queue_refuses_the_next_request_and_the_server_keeps_serving():
    queue_size = 2
    engine = BlockingEngine()
    with served(engine, queue_max_size=queue_size) as (demo, url):
        try:
            client = Client(url, verbose=False)
            running = client.submit("Question 0?", api_name="/analyze")
            assert engine.entered.wait(WAIT_S)  # one analysis runs (the engine's limit is 1)
            waiting = [client.submit(f"Question {i}?", api_name="/analyze") for i in (1, 2)]
            wait_until(lambda: len(demo._queue) == queue_size, "the queue to fill")

            one_too_many = client.submit("Question 3?", api_name="/analyze")
            with pytest.raises(QueueError, match="(?i)queue is full"):
                one_too_many.result(timeout=WAIT_S)
            config = httpx.get(f"{url}/config", timeout=30).json()
            analyze = next(d for d in config["dependencies"] if d["api_name"] == "analyze")
            raw = httpx.post(
                f"{url}/gradio_api/queue/join",
                json={"data": ["Question 4?"], "fn_index": analyze["id"], "session_hash": "x1"},
                timeout=30,
            )
            assert raw.status_code == 503 and "Queue is full" in raw.text, raw.text
            assert httpx.get(url, timeout=30).status_code == 200  # the page still opens
        finally:
            engine.gate.set()
        done = [job.result(timeout=WAIT_S) for job in (running, *waiting)]
        assert [d["question"] for d in done] == ["Question 0?", "Question 1?", "Question 2?"]
        # (the two waiting jobs were sent from two threads: either may have joined first)
        assert sorted(q for q, _ in engine.calls) == ["Question 0?", "Question 1?", "Question 2?"]
        assert Client(url, verbose=False).predict("Afterwards?", api_name="/analyze")[
            "question"
        ] == "Afterwards?"


# --- a renderer that fails ----------------------------------------------------------------------


def test_a_failing_renderer_is_a_message_on_the_page_and_the_next_ask_works(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("renderer bug")

    with served(FakeEngine()) as (_, url):
        with monkeypatch.context() as patch:
            patch.setattr(explain, "answer_html", broken)
            failed = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS])
        assert "ZeroDivisionError: renderer bug" in failed["mars-error"]
        assert failed["mars-answer"] == render.placeholder_html()
        ok = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS])
        assert ok["mars-error"] == "" and render.esc(QUESTION) in ok["mars-answer"]


# --- (d) every session sees only its own result -------------------------------------------------


def toggle_event(url: str) -> str:
    """api_name of the scoring toggle's change event."""
    config = httpx.get(f"{url}/config", timeout=30).json()
    scoring = next(
        c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "mars-scoring"
    )
    return next(
        d["api_name"] for d in config["dependencies"] if [scoring, "change"] in d["targets"]
    )


def test_each_session_keeps_only_its_own_result(app_url):
    questions = {
        "a": "Session A: which planet is known as the Red Planet?",
        "b": "Session B: what is the capital city of Japan?",
    }
    sessions = {key: uuid.uuid4().hex[:11] for key in questions}
    with ThreadPoolExecutor(max_workers=2) as pool:  # both ask at once
        futures = {
            key: pool.submit(
                page_event, app_url, "ask", [q, "mars", *PAGE_OPTIONS], sessions[key]
            )
            for key, q in questions.items()
        }
        asked = {key: f.result(timeout=2 * WAIT_S) for key, f in futures.items()}
    toggle = toggle_event(app_url)
    for key, own in questions.items():
        other = questions["b" if key == "a" else "a"]
        assert own in asked[key]["mars-answer"] and other not in asked[key]["mars-answer"]
        # The toggle re-renders the result stored in this session's state, and only that one.
        flipped = page_event(app_url, toggle, [None, "length_normalized", "weight"],
                             sessions[key])
        answer = flipped["mars-answer"]
        assert 'data-scoring="length_normalized"' in answer
        assert own in answer and other not in answer
    # a session with no result: nothing to re-render
    fresh = page_event(app_url, toggle, [None, "length_normalized", "weight"])
    assert not isinstance(fresh["mars-answer"], str)  # skipped


# --- (e) a model that cannot load ---------------------------------------------------------------


def test_an_unloadable_model_still_serves_the_page_and_says_what_to_do(tiny_models):
    missing = "/nonexistent/model"
    with running_app(tiny_models, "--llm", missing, wait_for_models=False) as url:
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            assert texts.TITLE in response.read().decode("utf-8")

        deadline = time.monotonic() + WAIT_S
        while True:  # what a page opened now shows: "loading", then the failure
            banner = html.unescape(page_event(url, "banner")["mars-banner"])
            if "could not be loaded" in banner:
                break
            assert "Loading the models" in banner, banner
            assert time.monotonic() < deadline, banner
            time.sleep(0.5)
        said = f"the LLM {missing} (--llm: no such folder or file)"
        assert said in banner and "make-tiny-models" in banner

        with pytest.raises(AppError) as refused:
            Client(url, verbose=False).predict(QUESTION, api_name="/analyze")
        message = str(refused.value)
        assert said in message and "restart it with other models" in message
        no_traceback(message)

        asked = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS])
        shown = html.unescape(asked["mars-error"])
        assert said in shown and "restart it with other models" in shown
