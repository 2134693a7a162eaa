"""The engine's cores are the engine's: one client's loops of cheap events (the Evaluation view's
"Show" of a 1 MB run, the scoring toggle's re-render of a 20-sample result) slow another visitor's
analyses by little. Measured side by side in one run against ``app.py`` on loopback (the tiny
models): the visitor's ``/analyze`` median with the loops beside it, over its median without
them, alternating, so that the machine's own load falls on both. A ratio, never a time.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from test_hostile import PAGE_OPTIONS, QUESTION, api_data, call, call_result, via_proxy, write_run
from ui_helpers import APP_PIDS, page_event, running_app

ATTACKER, VISITOR = "81.2.88.1", "81.2.88.2"
#: the visitor's median with the loops / without them. The aim is 1.5 (0.86 to 1.47 measured on
#: two quiet cores); the bound leaves the noise of a shared two-core runner room (2.0 to 3.1 under
#: a load average of 5 to 8) and still fails the old code's 8.6.
MAX_RATIO = 2.0
ROUNDS, CALLS = 3, 4  # rounds of (without, with), the visitor's analyses in each half
SAMPLES = "\n".join(f"Sample {i}: Mars is the red planet, the fourth planet from the Sun."
                    for i in range(20))


@pytest.fixture(scope="module")
def space(tiny_models, tmp_path_factory):
    """``app.py`` as a Space with the tiny models and a run of about 1 MB to show."""
    runs = tmp_path_factory.mktemp("runs")
    write_run(runs / "big", 3500)
    with running_app(tiny_models, "--runs", str(runs),
                     env={"SPACE_ID": "someone/mars-demo"}) as url:
        yield url


@contextlib.contextmanager
def loops(url: str, session: str) -> Iterator[dict]:
    """One client's loops of cheap events (tests/hostile_loops.py) in a process of its own while
    the block runs; the dict yielded is filled with what they did once they stop."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("hostile_loops.py")),
                             url, session, ATTACKER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    done: dict = {}
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(1.0)  # the loops are on
        yield done
    finally:
        out, _ = proc.communicate("", timeout=180)  # closing its input stops it
        done.update(json.loads(out.strip().splitlines()[-1]) if out.strip() else {})


def analyses(url: str, n: int, http: httpx.Client) -> list[float]:
    """The seconds each of ``n`` analyses of the visitor took, one after another."""
    data = api_data(url, "analyze", QUESTION, samples=3, max_new_tokens=8)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        sent = call(url, "analyze", data, http, headers=via_proxy(VISITOR))
        assert sent.status_code == 200, sent.text
        call_result(url, "analyze", sent.json()["event_id"], http, headers=via_proxy(VISITOR))
        times.append(time.perf_counter() - start)
    return times


@pytest.mark.slow  # app.py with the tiny models, about a minute of measuring
def test_one_clients_cheap_loops_barely_slow_another_visitors_analyses(space):
    """Before, one client's Shows (two at a time) took another visitor's /analyze median from
    0.48 to 6.93 s, and its toggle re-renders (registered four times, four at once) from 2.79
    to 8.81 s: they ran beside the engine without a limit. Now every event that runs no model
    shares one group that runs one at a time, a client may keep it busy a quarter of the time,
    and a run's charts are kept by its files' hash."""
    session = uuid.uuid4().hex[:11]
    attacker = page_event(space, "score_own", [QUESTION, "Mars", SAMPLES, "", "mars",
                                               *PAGE_OPTIONS],
                          session_hash=session, headers=via_proxy(ATTACKER))
    assert "mars-error" in attacker and not attacker["mars-error"], attacker.get("mars-error")
    without, with_loops, loops_done = [], [], []
    server = psutil.Process(APP_PIDS[space])
    busy = {"without": [0.0, 0.0], "with": [0.0, 0.0]}  # the server's CPU seconds, wall seconds

    @contextlib.contextmanager
    def phase(name: str) -> Iterator[None]:
        cpu, wall = sum(server.cpu_times()[:2]), time.perf_counter()
        yield
        busy[name][0] += sum(server.cpu_times()[:2]) - cpu
        busy[name][1] += time.perf_counter() - wall

    with httpx.Client(timeout=120) as http:
        analyses(space, 1, http)  # warm
        for _ in range(ROUNDS):
            with phase("without"):
                without += analyses(space, CALLS, http)
            with loops(space, session) as done, phase("with"):
                with_loops += analyses(space, CALLS, http)
            loops_done.append(done)
    ratio = statistics.median(with_loops) / statistics.median(without)
    print(json.dumps({"median_without_s": round(statistics.median(without), 3),
                      "median_with_s": round(statistics.median(with_loops), 3),
                      "ratio": round(ratio, 2), "loops": loops_done,
                      "server_cores": {k: round(c / w, 2) for k, (c, w) in busy.items()}}))
    # they ran: the client's loops were served in every round, and both kinds over the rounds
    # (in one round its Shows may take the client's whole share of the queue, as in CI once:
    # shown 7, toggles sent 0, refused 134)
    assert all(done["shown"] + done["sent"] for done in loops_done), loops_done
    assert sum(d["shown"] for d in loops_done) and sum(d["sent"] for d in loops_done), loops_done
    assert ratio <= MAX_RATIO, (without, with_loops, loops_done)
