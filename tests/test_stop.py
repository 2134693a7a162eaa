"""What a server leaves when it stops: its download folder goes with it (a normal exit, Ctrl-C,
SIGTERM), a folder left by a server that was killed goes when the next one starts, and the files
Gradio made for the page in its cache folder (the downloads it served, the uploads) go when it
stops, however it stops. Timeouts only keep a hung server from hanging the run.
"""

from __future__ import annotations

import os
import time
import uuid

import httpx
from ui_helpers import event_of, page_event, running_app

from mars_demo import texts
from mars_demo.downloads import LOCK_NAME, PREFIX, DownloadFolder, cleanup_stale_downloads

QUESTION = "Which planet is known as the Red Planet?"
PAGE_OPTIONS = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]


def test_download_folders_of_dead_servers_go_and_live_ones_stay(tmp_path):
    dead = tmp_path / f"{PREFIX}dead"
    dead.mkdir()
    (dead / LOCK_NAME).write_text("12345\n")
    old = tmp_path / f"{PREFIX}older-version"
    old.mkdir()
    (old / "file").write_text("x")
    for path in (old / "file", old):
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    fresh = tmp_path / f"{PREFIX}older-version-in-use"
    fresh.mkdir()
    live = DownloadFolder(parent=tmp_path)  # held by this process, like a running server
    unrelated = tmp_path / "something-else"
    unrelated.mkdir()
    removed = cleanup_stale_downloads(tmp_path)
    assert sorted(removed) == sorted([dead, old])
    assert live.path.is_dir() and fresh.is_dir() and unrelated.is_dir()
    live.remove()
    assert not live.path.exists()


def test_the_server_removes_stale_folders_at_start_and_its_own_when_it_stops(tiny_models, tmp_path):
    stale = tmp_path / f"{PREFIX}killed-before"
    stale.mkdir()
    (stale / LOCK_NAME).write_text("999999\n")
    with running_app(tiny_models, env={"TMPDIR": str(tmp_path)}) as url:
        assert not stale.exists()
        (own,) = list(tmp_path.glob(PREFIX + "*"))
        answer = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS])
        written = list(own.rglob(texts.DOWNLOAD_FILENAME))
        assert written and answer["mars-error"] == ""
    assert not own.exists()  # SIGTERM (running_app's terminate) is a clean stop
    assert not list(tmp_path.glob(PREFIX + "*"))


def test_a_stop_by_sigterm_leaves_no_file_of_the_page_behind(tiny_models, tmp_path):
    """A public page (a Space) that served a download and took an upload, stopped by SIGTERM
    while an analysis waits or runs. Before, SIGTERM ended the process without its server's
    shutdown, where Gradio removes the files it made for the page: the served download's copy
    and the upload stayed in Gradio's cache folder for good. Now the stop is the server's normal
    shutdown: its download folder and every file it made in Gradio's cache are gone."""
    cache = tmp_path / "gradio"
    env = {"SPACE_ID": "someone/mars-demo", "TMPDIR": str(tmp_path), "GRADIO_TEMP_DIR": str(cache)}
    headers = {"X-Forwarded-For": "81.2.96.1"}
    with running_app(tiny_models, env=env) as url:
        (own,) = list(tmp_path.glob(PREFIX + "*"))
        answer = page_event(url, "ask", [QUESTION, "mars", *PAGE_OPTIONS], headers=headers)
        served = answer["mars-download"]["value"]["path"]
        uploaded = httpx.post(f"{url}/gradio_api/upload", headers=headers, timeout=60,
                              files={"files": ("report.json", b"{}", "application/json")})
        assert uploaded.status_code == 200, uploaded.text
        made = [served, *uploaded.json()]
        assert all(path.startswith(str(cache)) and os.path.isfile(path) for path in made), made
        config = httpx.get(f"{url}/config", timeout=60).json()
        waiting = httpx.post(f"{url}/gradio_api/queue/join", headers={"X-Forwarded-For": "81.2.96.2"},
                             timeout=60, json={
                                 "data": ["Why is the sky blue?", "mars", *PAGE_OPTIONS],
                                 "fn_index": event_of(config, "ask")["id"],
                                 "session_hash": uuid.uuid4().hex[:11], "event_data": None})
        assert waiting.status_code == 200, waiting.text
    # running_app sent SIGTERM (and would have killed it after 15 s)
    assert not own.exists()
    left = sorted(str(path.relative_to(cache)) for path in cache.rglob("*")
                  if path.is_file() or path.parent == cache and path.name != "vibe_edit_history")
    assert left == [], left
