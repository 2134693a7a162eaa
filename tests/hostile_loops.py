"""One hostile client's loops of cheap events, in a process of its own (tests/test_hostile_load.py
starts it), so that its own work never slows the measuring process: ``python
tests/hostile_loops.py URL SESSION CLIENT`` runs until its standard input closes, then prints what
it did as JSON.

Two threads re-send the Evaluation view's "Show" of the run "big" as fast as the page lets them,
each reading its result whole (as a page does, without parsing it); four send the scoring
toggle's re-render in SESSION (whose result the client made) without reading them. A refusal is
sent again after a moment. The process runs at a lower priority: an attacker's own work is done
on its own machine, and here it must not take the cores the page is measured on.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from test_hostile import via_proxy  # noqa: E402
from test_hostile_memory import CachedConfig  # noqa: E402
from ui_helpers import queue_join  # noqa: E402

SHOWS, TOGGLES = 2, 4  # threads of each loop
PAUSE_S = 0.05  # after a refusal


def main(url: str, session: str, client: str) -> None:
    os.nice(10)  # the attacker's own work is on its own machine: not measured against the page
    stop = threading.Event()
    done = {"shown": 0, "sent": 0, "refused": 0}
    headers = via_proxy(client)

    def show() -> None:
        with CachedConfig(timeout=120) as http:
            config = http.get(f"{url}/config").json()
            while not stop.is_set():
                session = uuid.uuid4().hex[:11]
                joined = queue_join(url, "evaluation_show", ["big", None, None],
                                    session_hash=session, http=http, headers=headers,
                                    config=config)
                if joined.status_code != 200:
                    done["refused"] += 1
                    time.sleep(PAUSE_S)
                    continue
                with http.stream("GET", f"{url}/gradio_api/queue/data", headers=headers,
                                 params={"session_hash": session}) as stream:
                    for line in stream.iter_lines():  # read whole, as a page does; not parsed
                        if '"msg":"process_completed"' in line:
                            done["shown"] += 1
                            break

    def toggle(k: int) -> None:
        with CachedConfig(timeout=120) as http:
            config, i = http.get(f"{url}/config").json(), k
            while not stop.is_set():
                scoring = ("mars", "length_normalized")[i % 2]
                joined = queue_join(url, "show_scoring", [None, scoring, "weight"],
                                    session_hash=session, http=http, headers=headers,
                                    config=config)
                if joined.status_code == 200:
                    done["sent"] += 1
                    i += 1
                else:
                    done["refused"] += 1
                    time.sleep(PAUSE_S)

    threads = [threading.Thread(target=show, daemon=True) for _ in range(SHOWS)]
    threads += [threading.Thread(target=toggle, args=(k,), daemon=True) for k in range(TOGGLES)]
    for thread in threads:
        thread.start()
    print("started", flush=True)
    sys.stdin.read()  # until the measuring process closes it
    stop.set()
    for thread in threads:
        thread.join(120)
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
