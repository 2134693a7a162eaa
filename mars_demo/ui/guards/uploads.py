"""What visitors send as files (Gradio 6.17; covered by tests/test_hostile_routes.py and
tests/test_hostile.py): a file input names a file the visitor uploaded, never an address or a
server path, whatever route delivers it; and Gradio's upload progress keeps entries only for
uploads that were made.

- :func:`refused_files` finds, in an event's data, the file inputs whose path is an address
  (``https://...``, any scheme) or lies outside Gradio's upload folder. Gradio would download an
  address into its cache (from any public host, with no size cap, resolving its name first) and
  reads a server path it was given. The queue's door (:class:`~mars_demo.ui.guards.limits.QueueDoor`)
  refuses them at once (HTTP 400); :func:`guard_file_inputs` refuses them again where every
  route's events run (``Blocks.process_api``), before Gradio's downloader: a non-queued event
  (``/run/``), or anything that reaches an event past the door.
- :class:`BoundedUploadProgress` replaces Gradio's ``file_upload_statuses``, which made an entry
  (an ``asyncio.Event``, in a ``defaultdict``) for every id ``/upload_progress`` was asked about
  and kept it for good: 1,200 requests with 60 KB ids grew the server by about 70 MiB. Now an id
  no upload carries has an entry only while a request waits for it (Gradio waits 3 s, then answers
  404), an upload's entry goes when its progress was read, and at most
  :data:`MAX_TRACKED_UPLOADS` uploads nobody asked about are kept (the oldest go first).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from gradio.route_utils import FileUploadProgress

from mars_demo import texts

_URL = re.compile(r"^\s*[a-zA-Z][a-zA-Z0-9+.-]*://")
MAX_TRACKED_UPLOADS = 1000  # uploads whose progress nobody read, kept at most


def upload_folder() -> Path:
    """Gradio's upload folder (and cache), where every uploaded file lies, its links resolved."""
    from gradio.utils import get_upload_folder

    return Path(os.path.realpath(get_upload_folder()))


def refused_files(data: Any, folder: Path | None = None) -> list[str]:
    """The paths among the file inputs of an event's ``data`` that are no upload: dicts whose
    "path" (what Gradio reads the file from) is an address (a scheme such as ``https://``) or
    does not lie in ``folder`` (default :func:`upload_folder`) once ``..`` and links are
    resolved. Found without recursion. (Their "url" is where the page shows the file, the
    server's own address: not read.)

    >>> folder = Path("/srv/uploads")
    >>> refused_files([None, {"path": "https://example.org/x", "meta": {}}], folder)
    ['https://example.org/x']
    >>> refused_files([{"path": "/srv/uploads/ab/r.json"}, {"path": "/etc/passwd"}], folder)
    ['/etc/passwd']
    """
    folder = folder if folder is not None else upload_folder()
    found, stack = [], [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            path = item.get("path")
            if isinstance(path, str) and not _is_upload(path, folder):
                found.append(path)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _is_upload(path: str, folder: Path) -> bool:
    if _URL.match(path) or "\0" in path:
        return False
    return Path(os.path.realpath(path)).is_relative_to(folder)


def guard_file_inputs(demo: Any) -> None:
    """Make every event of ``demo`` refuse a file input that is no upload (:func:`refused_files`)
    before Gradio preprocesses it: ``process_api``, where the events of every route run, is
    wrapped once (the host's own calls from Python, ``explicit_call``, are not checked)."""
    if getattr(demo, "mars_file_inputs", False):
        return
    process_api = demo.process_api

    async def guarded(block_fn: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("explicit_call") and refused_files(inputs):
            from gradio.exceptions import Error

            raise Error(texts.ACCESS_NO_URLS, print_exception=False)
        return await process_api(block_fn, inputs, *args, **kwargs)

    demo.process_api = guarded
    demo.mars_file_inputs = True


# --- upload progress ------------------------------------------------------------------------------


def bounded_upload_progress() -> Any:
    """Put a :class:`BoundedUploadProgress` in the place of Gradio's ``file_upload_statuses``
    (which its routes read by that name), once per process; returns it."""
    import gradio.routes

    current = gradio.routes.file_upload_statuses
    if not isinstance(current, BoundedUploadProgress):
        gradio.routes.file_upload_statuses = BoundedUploadProgress()
    return gradio.routes.file_upload_statuses


class BoundedUploadProgress(FileUploadProgress):
    """Gradio 6.17's ``FileUploadProgress`` (``gradio/route_utils.py``) without its entry per id
    asked about: an upload's progress is tracked from its first part; a request for an id no
    upload carries waits on an event that goes when the last request for it ends; an upload's
    entries go when its progress stream ends (``stop_tracking``), else beyond the newest
    :data:`MAX_TRACKED_UPLOADS`."""

    def __init__(self) -> None:
        super().__init__()
        self._signals: dict[str, asyncio.Event] = {}  # not a defaultdict
        self._waiting: Counter[str] = Counter()

    def track(self, upload_id: str) -> None:
        if upload_id in self._statuses:
            return
        self._signals.setdefault(upload_id, asyncio.Event())  # made here if nobody waits yet
        super().track(upload_id)
        while len(self._statuses) > MAX_TRACKED_UPLOADS:
            self.stop_tracking(next(iter(self._statuses)))

    async def is_tracked(self, upload_id: str) -> bool:
        if upload_id in self._statuses:
            return True
        signal = self._signals.setdefault(upload_id, asyncio.Event())
        self._waiting[upload_id] += 1
        try:
            return await signal.wait()
        finally:
            self._waiting[upload_id] -= 1
            if self._waiting[upload_id] <= 0:
                del self._waiting[upload_id]
                if upload_id not in self._statuses:
                    self._signals.pop(upload_id, None)

    def stop_tracking(self, upload_id: str) -> None:
        super().stop_tracking(upload_id)
        if not self._waiting.get(upload_id):
            self._signals.pop(upload_id, None)
