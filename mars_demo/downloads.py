"""The page's download folders: one per server process, removed when it stops, and left-overs of
servers that died (killed, crashed, power loss) removed when the next one starts.

Each folder ``mars-demo-downloads-*`` in the temp directory holds a lock file that its server
keeps locked (``fcntl.flock``) while it runs, plus its process id. A starting server removes
every such folder whose lock it can take (its owner is gone) and leaves the others alone: they
belong to another live server. A folder without a lock file (from an older version) is removed
once nothing in it changed for :data:`UNLOCKED_STALE_S`.

Pure Python (no gradio).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "mars-demo-downloads-"
LOCK_NAME = ".owner.lock"  # locked by the live server; holds its pid
UNLOCKED_STALE_S = 3600.0
DOWNLOADS_KEPT = 32  # JSON downloads kept on disk; older ones are deleted

try:
    import fcntl
except ImportError:  # Windows: fall back on the pid in the lock file
    fcntl = None  # type: ignore[assignment]


class DownloadFolder:
    """A fresh ``mars-demo-downloads-*`` folder, locked by this process, removed at exit (normal
    exit, Ctrl-C, or SIGTERM once :func:`exit_on_sigterm` was called) or by :meth:`remove`."""

    def __init__(self, parent: str | os.PathLike | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        self._lock_file = open(self.path / LOCK_NAME, "w")  # noqa: SIM115  (held until removal)
        if fcntl is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock_file.write(f"{os.getpid()}\n")
        self._lock_file.flush()
        self._removed = False
        self._guard = threading.Lock()
        atexit.register(self.remove)

    def remove(self) -> None:
        with self._guard:
            if self._removed:
                return
            self._removed = True
        try:
            self._lock_file.close()  # releases the lock
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


class DownloadStore:
    """Writes each analysis JSON for the page's download button into this server's
    :class:`DownloadFolder`; keeps the latest ``keep``.

    Gradio copies a file into its own cache when it sends it, so older files can go."""

    def __init__(self, keep: int = DOWNLOADS_KEPT) -> None:
        self.folder = DownloadFolder()
        self.root = self.folder.path
        log.debug("download folder: %s", self.root)
        self._dirs: deque[Path] = deque()
        self._keep = keep
        self._lock = threading.Lock()

    def write(self, data: dict[str, Any], filename: str) -> str:
        """Write ``data`` (JSON, as the visitor may see it) as ``filename``; its path."""
        with self._lock:
            folder = Path(tempfile.mkdtemp(dir=self.root))
            path = folder / filename
            path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
            self._dirs.append(folder)
            while len(self._dirs) > self._keep:
                shutil.rmtree(self._dirs.popleft(), ignore_errors=True)
            return str(path)


def _owner_alive(folder: Path) -> bool:
    """Whether a live process holds ``folder``'s lock (or, without flock, its pid runs)."""
    lock = folder / LOCK_NAME
    if fcntl is not None:
        try:
            with open(lock, "r+") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return True  # locked: its server runs
                fcntl.flock(handle, fcntl.LOCK_UN)
                return False
        except OSError:
            return True  # cannot even open it: not ours to remove
    try:
        pid = int(lock.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    return True


def _newest_change(folder: Path) -> float:
    newest = folder.stat().st_mtime
    for path in folder.rglob("*"):
        try:
            newest = max(newest, path.stat().st_mtime)
        except OSError:
            pass
    return newest


def cleanup_stale_downloads(parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove the download folders of servers that are gone; returns the removed folders."""
    root = Path(parent or tempfile.gettempdir())
    removed = []
    for folder in sorted(root.glob(PREFIX + "*")):
        try:
            if not folder.is_dir() or folder.is_symlink():
                continue
            if (folder / LOCK_NAME).exists():
                if _owner_alive(folder):
                    continue
            elif time.time() - _newest_change(folder) < UNLOCKED_STALE_S:
                continue  # an older server's folder, maybe still in use
            shutil.rmtree(folder)
            removed.append(folder)
        except OSError as exc:
            log.warning("could not remove the stale download folder %s: %s", folder, exc)
    if removed:
        log.info("removed %d stale download folder(s) of stopped servers", len(removed))
    return removed


def exit_on_sigterm() -> None:
    """Make SIGTERM (``kill``, a container stop) a normal exit, so that the ``atexit`` cleanup
    runs; Python's default for SIGTERM ends the process without it. Main thread only."""

    def handler(signum, frame):  # noqa: ARG001
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
