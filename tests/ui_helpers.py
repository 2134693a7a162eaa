"""Helpers of the UI tests: hand-made answers and results, a fake engine, and ``app.py`` served
with tiny models.

``tests/test_app_client.py`` and ``tests/test_browser.py`` share one server through
:func:`shared_app_url`.

The numbers follow the paper's formulas (``mars_demo.core`` is not used, so these helpers stay an
independent check): u from phrase scores with "sum" normalization and "equal" distribution,
w_l = 1/(2L) + u_l/2, LN = mean log p, MARS = sum w_l log p_l.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from mars_demo.result import (
    AnalysisResult,
    NLIResult,
    Pair,
    Phrase,
    Scores,
    Token,
    Uncertainty,
)
from mars_demo.result import ScoredAnswer as Answer
from mars_demo.settings import Settings, clean_question
from mars_demo.ui.work.host import READY_LOG
from mars_demo.verdict import verdict

REPO_ROOT = Path(__file__).resolve().parents[1]


def make_answer(
    pieces: Sequence[str], logprobs: Sequence[float], phrases: Sequence[tuple[Sequence[int], float]]
) -> Answer:
    """An answer made of token ``pieces``; ``phrases``: (token indices, importance score).

    >>> make_answer(["It", " is", " Mars"], [-0.1, -0.1, -0.5], [([0, 1], 0.1), ([2], 0.9)]).text
    'It is Mars'
    """
    text = "".join(pieces)
    tokens, pos = [], 0
    for i, (piece, lp) in enumerate(zip(pieces, logprobs)):
        tokens.append(Token(id=100 + i, text=piece, start=pos, end=pos + len(piece), logprob=lp))
        pos += len(piece)
    n = len(tokens)
    total = sum(score for _, score in phrases)
    u = [0.0] * n
    phrase_of_token = [-1] * n
    result_phrases = []
    for k, (members, score) in enumerate(phrases):
        weight = score / total
        for i in members:
            u[i] = weight / len(members)
            phrase_of_token[i] = k
        start, end = tokens[members[0]].start, tokens[members[-1]].end
        while text[start].isspace():
            start += 1
        result_phrases.append(
            Phrase(
                text=text[start:end],
                start=start,
                end=end,
                score=score,
                weight=weight,
                tokens=list(members),
            )
        )
    w = [1 / (2 * n) + x / 2 for x in u]
    return Answer(
        text=text,
        tokens=tokens,
        phrases=result_phrases,
        token_importance=u,
        mars_weights=w,
        scores=Scores(
            length_normalized=sum(logprobs) / n,
            mars=sum(wl * lp for wl, lp in zip(w, logprobs)),
        ),
        phrase_of_token=phrase_of_token,
        finish_reason="stop",
    )


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def make_result(
    question: str = "Which planet is known as the Red Planet?",
    greedy: Answer | None = None,
    warnings: Sequence[str] = (),
) -> AnalysisResult:
    """A consistent result: greedy "It is Mars.", four samples in two meaning clusters."""
    greedy = greedy or make_answer(
        ["It", " is", " Mars", "."], [-0.05, -0.1, -0.9, -0.02], [([0, 1], 0.05), ([2, 3], 0.95)]
    )
    samples = [
        make_answer(["Mars", "."], [-0.3, -0.01], [([0, 1], 1.0)]),
        make_answer(
            ["The", " Red", " Planet", " is", " Mars"],
            [-0.2, -0.4, -0.1, -0.05, -0.6],
            [([0, 1, 2], 0.3), ([3], 0.05), ([4], 0.9)],
        ),
        make_answer(["Jupiter"], [-2.5], [([0], 1.0)]),
        make_answer(["It", "'s", " Mars"], [-0.4, -0.3, -0.8], [([0, 1], 0.1), ([2], 0.9)]),
    ]
    cluster_ids = [0, 0, 1, 0]
    texts = [s.text for s in samples]
    labels = [
        ["entailment" if cluster_ids[i] == cluster_ids[j] else "contradiction" for j in range(4)]
        for i in range(4)
    ]
    labels[1][3] = "neutral"

    def unc(kind: str) -> tuple[float, float, float]:
        scores = [getattr(s.scores, kind) for s in samples]
        clusters = sorted(set(cluster_ids))
        se = -sum(
            _logsumexp([sc for sc, c in zip(scores, cluster_ids) if c == k]) for k in clusters
        ) / len(clusters)
        return -getattr(greedy.scores, kind), -sum(scores) / len(scores), se

    ln, mars = unc("length_normalized"), unc("mars")
    result = AnalysisResult(
        question=question,
        prompt=f"Question: {question}\nAnswer:",
        prompt_token_ids=[1, 2, 3],
        greedy=greedy,
        samples=samples,
        nli=NLIResult(answers=texts, labels=labels),
        cluster_ids=cluster_ids,
        uncertainty=Uncertainty(
            confidence=Pair(ln[0], mars[0]),
            entropy=Pair(ln[1], mars[1]),
            semantic_entropy=Pair(ln[2], mars[2]),
        ),
        settings=Settings().to_dict(),
        timings_s={
            "generate": 0.5,
            "logprobs": 0.01,
            "importance": 0.1,
            "alignment": 0.001,
            "nli": 0.2,
            "uncertainty": 0.001,
        },
        warnings=list(warnings),
    )
    result.verdict = verdict(result)  # as the engine computes it for every analysis
    return result


class FakeEngine:
    """The Engine interface with hand-made results. ``fail_with``: raise it on the next analyze."""

    def __init__(
        self,
        ready: bool = True,
        result: AnalysisResult | None = None,
        load_gate: threading.Event | None = None,
    ) -> None:
        self.settings = Settings(llm="cpu-small", importance="imp-dir", nli="nli-dir")
        self._ready = ready
        self.result = result
        self.fail_with: BaseException | None = None
        # load() waits until the test sets it, however long that takes: a page tested "while the
        # models load" must see them loading for the whole test, also on a slow machine. (A
        # 10-second cap here let a loaded machine's test see them loaded half-way through.)
        # The page's loading thread is a daemon, so a gate never set blocks no exit.
        self.load_gate = load_gate
        self.load_error: BaseException | None = None
        self.calls: list[tuple[str, Settings]] = []
        self.switched: list[Settings] = []
        # what the verdicts cite (the page sets them, as on the real engine)
        self.calibration = None
        self.reference = None

    @property
    def ready(self) -> bool:
        return self._ready

    def describe(self) -> dict:
        return {
            "device": "cpu",
            "llm": "Qwen/Qwen2.5-0.5B-Instruct",
            "llm_preset": "Qwen2.5 0.5B Instruct (CPU)",
            "importance": self.settings.importance,
            "nli": self.settings.nli,
            "cpu_fallback": True,
            "load_in_4bit": False,
            "ready": self._ready,
        }

    def load(self, progress: Callable[[str, float], None] | None = None) -> None:
        if progress:
            progress("loading llm", 0.0)
        if self.load_gate is not None:
            self.load_gate.wait()
        if self.load_error is not None:
            raise self.load_error
        if progress:
            progress("loading llm", 1.0)
        self._ready = True

    def switch(
        self, settings: Settings, progress: Callable[[str, float], None] | None = None
    ) -> None:
        self._ready = False
        self.switched.append(settings)
        self.settings = settings
        self.load(progress)

    def analyze(
        self,
        question: str,
        settings: Settings | None = None,
        *,
        progress=None,
        on_text=None,
        should_stop=None,
    ) -> AnalysisResult:
        question = clean_question(question)  # the engine's door, as Engine.analyze has it
        self.calls.append((question, settings))
        if self.fail_with is not None:
            err, self.fail_with = self.fail_with, None
            raise err
        result = self.result or make_result(question)
        result.question = question
        result.verdict = verdict(result, self.calibration, self.reference)  # as the engine
        if on_text:
            for end in range(1, len(result.greedy.text) + 1, 3):
                on_text(result.greedy.text[:end])
            on_text(result.greedy.text)
        if progress:
            for stage in ("generate", "importance", "nli", "uncertainty"):
                progress(stage, 0.0)
                progress(stage, 1.0)
        return result


    def score(
        self,
        answers: Any,
        settings: Settings | None = None,
        *,
        progress=None,
        should_stop=None,
        reuse: AnalysisResult | None = None,
        cap=None,
    ) -> AnalysisResult:
        """A hand-made result about the answers' question (their scores are not computed)."""
        question = getattr(answers, "question", None) or "Pasted answers?"
        self.calls.append((question, settings))
        if self.fail_with is not None:
            err, self.fail_with = self.fail_with, None
            raise err
        result = make_result(question)
        result.verdict = verdict(result, self.calibration, self.reference)  # as the engine
        return result


# --- app.py as a subprocess --------------------------------------------------------------------

APP_START_TIMEOUT_S = 180  # imports + loading the tiny models; generous for a 2-core CI machine


APP_LOGS: dict[str, list[str]] = {}  # URL of a running app.py -> the lines it logged so far
APP_PIDS: dict[str, int] = {}  # URL of a running app.py -> its process id


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(
    models: dict, *extra_args: str, wait_for_models: bool = True, env: dict | None = None
):
    """Start ``python app.py`` on 127.0.0.1 with the tiny models; yield its URL once the models
    are loaded (with ``wait_for_models=False``: once it serves HTTP, loaded or not); stop it
    afterwards. ``extra_args`` come last, so ``"--llm", other`` replaces the tiny LLM. The
    server's log is in the failure message if it dies, and in ``APP_LOGS[url]`` while it runs.
    ``env``: variables added to (or, with value None, removed from) the server's environment,
    e.g. ``{"SPACE_ID": "x/y"}`` for a public page."""
    port = free_port()
    cmd = [
        sys.executable,
        str(REPO_ROOT / "app.py"),
        "--llm",
        str(models["llm"]),
        "--importance",
        str(models["importance"]),
        "--nli",
        str(models["nli"]),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]
    env_vars = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "MARS_DEMO_SHARE": "0",
    }
    env_vars.pop("SPACE_ID", None)  # a public page only when a test asks for one
    # the example analyses it keeps: its own folder, not the home's cache
    examples = tempfile.mkdtemp(prefix="mars-examples-")
    env_vars["MARS_DEMO_EXAMPLE_CACHE"] = examples
    for name, value in (env or {}).items():
        if value is None:
            env_vars.pop(name, None)
        else:
            env_vars[name] = value
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env_vars, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            log.append(line)
            if READY_LOG in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not wait_for_models:
        ready.set()
    try:
        deadline = time.monotonic() + APP_START_TIMEOUT_S
        while not ready.is_set():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("app.py did not start:\n" + "".join(log[-60:]))
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}"
        APP_LOGS[url] = log
        APP_PIDS[url] = proc.pid
        while True:  # the models are ready; wait for the HTTP server too
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("app.py does not serve:\n" + "".join(log[-60:]))
                time.sleep(0.2)
        yield url
    finally:
        APP_LOGS.pop(f"http://127.0.0.1:{port}", None)
        APP_PIDS.pop(f"http://127.0.0.1:{port}", None)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(examples, ignore_errors=True)


_SHARED_APP: dict[str, str] = {}


def shared_app_url(request: pytest.FixtureRequest, models: dict) -> str:
    """URL of one ``app.py`` server per test session, stopped when pytest finishes."""
    if "url" not in _SHARED_APP:
        stack = contextlib.ExitStack()
        _SHARED_APP["url"] = stack.enter_context(running_app(models))
        request.config.add_cleanup(stack.close)
    return _SHARED_APP["url"]


# --- the page's own events, the way the browser sends them ---------------------------------------


class PageEventError(RuntimeError):
    """A page event ended with an error (the handler raised)."""


def event_of(config: dict, api_name: str) -> dict:
    """The dependency (event) of the page's ``/config`` called ``api_name``."""
    return next(d for d in config["dependencies"] if d["api_name"] == api_name)


def queue_join(
    url: str,
    api_name: str,
    data: Sequence[Any] = (),
    session_hash: str | None = None,
    http: Any = None,
    headers: Any = None,
    config: dict | None = None,
) -> Any:
    """Join the queue with one of the page's events the way the browser does
    (``/gradio_api/queue/join``); returns the ``httpx`` response (its ``event_id`` on success).
    ``http``: an ``httpx.Client`` (e.g. bound to another loopback address); ``headers``: added
    to the request (a list of pairs may repeat a header)."""
    import httpx

    http = http or httpx
    config = config or http.get(f"{url}/config", timeout=30).json()
    dep = event_of(config, api_name)
    targets = [t for t in dep["targets"] if t[0] is not None]
    return http.post(
        f"{url}/gradio_api/queue/join",
        json={
            "data": list(data),
            "fn_index": dep["id"],
            "trigger_id": targets[0][0] if targets else None,
            "session_hash": session_hash or uuid.uuid4().hex[:11],
            "event_data": None,
        },
        headers=headers,
        timeout=30,
    )


def page_event(
    url: str,
    api_name: str,
    data: Sequence[Any] = (),
    session_hash: str | None = None,
    timeout_s: float = APP_START_TIMEOUT_S,
    http: Any = None,
    headers: Any = None,
) -> dict[str, Any]:
    """Run one of the page's events (``api_name`` as in ``/config``: "ask", "rescore_1"...) in
    the browser session ``session_hash`` (a new one if None), through Gradio's queue like the
    page does (``gradio_client`` refuses the page's private events). Returns its last output,
    ``{elem_id (or "type-id" without one): value}``; a skipped output is an update dict.
    ``gr.State`` inputs may be None: the server uses the session's own state. ``http`` and
    ``headers`` as in :func:`queue_join`."""
    import httpx

    http = http or httpx
    config = http.get(f"{url}/config", timeout=30).json()
    dep = event_of(config, api_name)
    names = {
        c["id"]: c.get("props", {}).get("elem_id") or f"{c['type']}-{c['id']}"
        for c in config["components"]
    }
    session_hash = session_hash or uuid.uuid4().hex[:11]
    joined = queue_join(url, api_name, data, session_hash, http=http, headers=headers,
                        config=config)
    if joined.status_code != 200:
        raise PageEventError(f"HTTP {joined.status_code}: {joined.text}")
    event_id = joined.json()["event_id"]
    with http.stream(
        "GET",
        f"{url}/gradio_api/queue/data",
        params={"session_hash": session_hash},
        headers=headers,
        timeout=timeout_s,
    ) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[len("data:") :])
            if message.get("event_id") != event_id or message.get("msg") != "process_completed":
                continue
            output = message.get("output") or {}
            if not message.get("success", True) or "error" in output and output["error"]:
                raise PageEventError(str(output.get("error")))
            return {names[i]: v for i, v in zip(dep["outputs"], output["data"])}
    raise PageEventError(f"the event stream of {api_name} ended without a result")


def check_public_model_name(data: dict, role: str, path: str, entry: str, field: str) -> None:
    """A public page shows the optional model ``role`` (a local folder ``path``) of an analysis
    ``data`` by its folder's name, in the settings and in ``method_inputs[entry][field]``, never
    by its path; the host's display name replaces it where one is given."""
    from mars_demo.ui.guards.redact import Redactor

    folder = path.rstrip("/").rsplit("/", 1)[-1]
    shown = Redactor(public=True, models=[(role, path)]).result_dict(data)
    assert shown["method_inputs"][entry][field] == folder
    assert shown["settings"][role] == folder
    assert path not in json.dumps(shown)
    named = Redactor(public=True, names={role: "Shown Name"}).result_dict(data)
    assert named["method_inputs"][entry][field] == "Shown Name"

