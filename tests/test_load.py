"""Many users at once: ``app.py`` with tiny models, 16 ``gradio_client`` users asking together.

Every user has its own client (its own session) and its own question. All of them must get their
own analysis back (never another user's question), none may be lost, and the server must still
answer afterwards. The test prints what it measured (run pytest with ``-s`` to see it), records it
with ``record_property`` and, when ``$MARS_DEMO_ARTIFACTS`` names a folder, writes it there as
``load_test.json``. Nothing here depends on how fast the machine is: the only limits are generous
timeouts that keep a hung server from hanging the test run.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradio_client import Client

from mars_demo.ui import QUEUE_MAX_SIZE

USERS = 16
SAMPLES = 2  # small settings: the test is about the queue, not the models
MAX_NEW_TOKENS = 6
CONNECT_TIMEOUT_S = 120  # all users connected and at the starting line
RESULT_TIMEOUT_S = 300  # every answer back (~16 short analyses one after the other on 2 cores)


def question_of(user: int) -> str:
    # The number is followed by ":", so no user's question is a part of another's ("1:" vs "11:").
    return f"Question number {user}: which planet is red?"


def test_the_queue_fits_the_load_test():
    assert QUEUE_MAX_SIZE >= USERS


def test_sixteen_users_at_once_each_get_their_own_answer(app_url, record_property):
    questions = [question_of(user) for user in range(1, USERS + 1)]
    start_line = threading.Barrier(USERS, timeout=CONNECT_TIMEOUT_S)
    started: list[float] = []

    def user(question: str) -> tuple[dict, float, float]:
        client = Client(app_url, verbose=False)
        start_line.wait()  # everybody asks at the same moment
        begin = time.perf_counter()
        started.append(begin)
        job = client.submit(
            question, samples=SAMPLES, max_new_tokens=MAX_NEW_TOKENS, api_name="/analyze"
        )
        data = job.result(timeout=RESULT_TIMEOUT_S)
        end = time.perf_counter()
        return data, end - begin, end

    with ThreadPoolExecutor(max_workers=USERS, thread_name_prefix="load-user") as pool:
        futures = [pool.submit(user, q) for q in questions]
        outcomes = [f.result(timeout=CONNECT_TIMEOUT_S + RESULT_TIMEOUT_S) for f in futures]

    assert len(outcomes) == USERS  # none lost
    for own, (data, _, _) in zip(questions, outcomes):
        assert data["question"] == own
        assert own.rstrip("?") in data["prompt"]
        others = [q for q in questions if q != own]
        assert not [q for q in others if q.rstrip("?") in data["prompt"]], data["prompt"]
        assert len(data["samples"]) == SAMPLES
        assert data["settings"]["max_new_tokens"] == MAX_NEW_TOKENS
        assert data["greedy"]["tokens"]  # a finished analysis, not a partial one
        assert set(data["uncertainty"]) == {"confidence", "entropy", "semantic_entropy"}

    latencies = [latency for _, latency, _ in outcomes]
    wall = max(end for _, _, end in outcomes) - min(started)
    stats = {
        "users": USERS,
        "samples": SAMPLES,
        "max_new_tokens": MAX_NEW_TOKENS,
        "wall_s": round(wall, 3),
        "requests_per_s": round(USERS / wall, 3),
        "latency_mean_s": round(statistics.mean(latencies), 3),
        "latency_max_s": round(max(latencies), 3),
        "latency_min_s": round(min(latencies), 3),
        "cpu_count": os.cpu_count(),
    }
    print(
        f"\nload test: {USERS} users, {USERS / wall:.2f} requests/s "
        f"({wall:.2f} s for all), latency mean {stats['latency_mean_s']:.2f} s, "
        f"max {stats['latency_max_s']:.2f} s"
    )
    for key, value in stats.items():
        record_property(key, value)
    folder = os.environ.get("MARS_DEMO_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "load_test.json").write_text(json.dumps(stats, indent=2) + "\n")

    # The server is still up and serves the next request.
    after = Client(app_url, verbose=False).predict(
        "Which planet is known as the Red Planet?", samples=1, max_new_tokens=3,
        api_name="/analyze",
    )
    assert after["question"] == "Which planet is known as the Red Planet?"
