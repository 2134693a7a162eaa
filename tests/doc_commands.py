"""The README's and the docs' code blocks as a reader runs them (tests/test_doc_commands.py).

A ``bash`` or ``python`` block runs as written, unless the line just above it says why not
(``<!-- not run by the tests: REASON -->``: it needs GPUs, the Hub, a server of its own...). A
page that says "Offline, add `FLAGS`" (the model flags of the tiny models) has those flags added
to each of its later commands that load models and name no ``--llm`` of their own: the
readers' own offline spelling, nothing else is changed. A bash block runs command by command,
in order, in one clean checkout (a command a later page repeats runs once): ``export`` lines hold for the commands after them, a command
ending in ``&`` runs in the background until its block is done, and a server (``python app.py``,
``mkdocs serve``) runs until it says it serves. A python block runs in the checkout from a file
kept elsewhere, so that its script's folder, not the checkout, is first on the import path: the
package comes from where the README's first command installed it.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run by the tests: (.+?) -->\s*$")
OFFLINE = re.compile(r"[Oo]ffline, add\s+`(--llm [^`]+)`")
LANGS = ("bash", "python")
#: the commands that load models, so take a page's offline flags
LOADS_MODELS = re.compile(r"(?:\bpython -m mars_demo|\bmars-demo|-m mars_demo) "
                          r"(?:ask|score|evaluate run|evaluate rejudge)\b|\bpython app\.py\b")
#: a server's command -> what it prints once it serves
SERVERS = {"python app.py": "Running on local URL", "mkdocs serve": "Serving on"}


@dataclass(frozen=True)
class Block:
    """One code block of a page: where it is, its language and text, why it is not run (None:
    it runs), and the offline model flags its page gives (None: none)."""

    page: str
    line: int
    lang: str
    text: str
    not_run: str | None
    offline_flags: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path) -> list[str]:
    """README.md, then the docs pages in the site's navigation order (the order a reader
    follows: Getting started makes the tiny models the later pages use)."""

    def walk(nav) -> list[str]:
        out = []
        for entry in nav:
            for value in (entry.values() if isinstance(entry, dict) else [entry]):
                out += walk(value) if isinstance(value, list) else [f"docs/{value}"]
        return out

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
    config = yaml.load((root / "mkdocs.yml").read_text(encoding="utf-8"), Loader)
    return ["README.md", *walk(config["nav"])]


def blocks_of(page: str, text: str) -> list[Block]:
    """The bash and python blocks of one page's Markdown ``text``.

    >>> [(b.lang, b.not_run, b.offline_flags) for b in blocks_of("p.md",
    ...     "Offline, add `--llm x`.\\n<!-- not run by the tests: GPUs -->\\n```bash\\na\\n```\\n"
    ...     "```python\\nb\\n```\\n```json\\n{}\\n```\\n")]
    [('bash', 'GPUs', '--llm x'), ('python', None, '--llm x')]
    """
    out = []
    for fence in FENCE.finditer(text):
        if fence.group(1) not in LANGS:
            continue
        before = text[: fence.start()]
        above = before.rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(above)
        flags = OFFLINE.findall(before)
        out.append(Block(page, before.count("\n") + 1, fence.group(1), fence.group(2),
                         reason.group(1) if reason else None, flags[-1] if flags else None))
    return out


def all_blocks(root: Path) -> list[Block]:
    return [b for page in pages(root)
            for b in blocks_of(page, (root / page).read_text(encoding="utf-8"))]


def commands(script: str) -> list[str]:
    r"""The commands of a bash block: continuation lines joined, comment lines left out.

    >>> commands("# a comment\na \\\n    --b  # c\n\nd &\n")
    ['a --b  # c', 'd &']
    """
    joined = re.sub(r"\\\n\s*", "", script)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def adapted(command: str, flags: str | None) -> str:
    """``command`` with ``flags`` added to each of its parts (split at ``|`` and ``&&``) that
    loads models and names no ``--llm``: before an output redirection, else at the end.

    >>> adapted('python -m mars_demo ask "Q" --json | python -m mars_demo score - > o  # c',
    ...         "--llm m")
    'python -m mars_demo ask "Q" --json --llm m | python -m mars_demo score - --llm m > o  # c'
    >>> adapted("python -m mars_demo ask Q --llm other", "--llm m")
    'python -m mars_demo ask Q --llm other'
    """
    if not flags:
        return command
    body, comment = re.match(r"(.*?)((?:\s+#.*)?)$", command).groups()
    parts = re.split(r"(\s\|\s|\s&&\s)", body)
    for i in range(0, len(parts), 2):
        part = parts[i]
        if LOADS_MODELS.search(part) and "--llm" not in part:
            head, redirect = re.match(r"(.*?)((?:\s+>.*)?)$", part).groups()
            parts[i] = f"{head.rstrip()} {flags}{redirect}"
    return "".join(parts) + comment


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Shell:
    """Where the commands run: the checkout (``cwd``), the environment (``env``, changed by
    ``export`` lines) and a folder for the python blocks' files and every command's output."""

    cwd: Path
    env: dict[str, str]
    scratch: Path
    timeout_s: float = 900.0
    #: the commands run so far: a page that repeats one (Getting started repeats the README's)
    #: does not run it twice
    done: set[str] = field(default_factory=set)

    def run_block(self, block: Block) -> None:
        """Run ``block`` as written (see the module's docstring); AssertionError naming the
        command, its status and the end of its output when one fails."""
        if block.lang == "python":
            script = self.scratch / f"block-{block.page.replace('/', '-')}-{block.line}.py"
            script.write_text(block.text, encoding="utf-8")
            self._run(f"python {shlex.quote(str(script))}", block, self.cwd)
            return
        background: list[subprocess.Popen] = []
        try:
            for command in commands(block.text):
                command = adapted(command, block.offline_flags)
                if command in self.done:
                    continue
                self.done.add(command)
                if command.startswith("export "):
                    for name, value in (a.split("=", 1) for a in shlex.split(command)[1:]):
                        self.env[name] = value
                elif command.endswith("&"):
                    background.append(self._start(command[:-1], block, "background"))
                elif any(server in command for server in SERVERS):
                    self._serve(command, block)
                else:
                    self._run(command, block, self.cwd)
        finally:
            for proc in background:
                _stop(proc)

    def _run(self, command: str, block: Block, cwd: Path) -> None:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd,
                              env=self.env, capture_output=True, text=True,
                              timeout=self.timeout_s)
        assert done.returncode == 0, _failed(block, command, done.returncode,
                                             done.stdout + done.stderr)

    def _start(self, command: str, block: Block, name: str) -> subprocess.Popen:
        log = open(self.scratch / f"{name}-{block.line}-{time.monotonic_ns()}.log", "w+")
        return subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.cwd, env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _serve(self, command: str, block: Block) -> None:
        """A server's command: it must say it serves before it exits or times out."""
        ready = next(mark for server, mark in SERVERS.items() if server in command)
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.cwd,
                                env={**self.env, "GRADIO_SERVER_PORT": str(free_port())},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        seen: list[str] = []
        reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
        reader.start()
        started = time.monotonic()
        try:
            while not any(ready in line for line in seen):
                assert proc.poll() is None, _failed(block, command, proc.returncode,
                                                    "".join(seen))
                assert time.monotonic() - started < self.timeout_s, _failed(
                    block, command, "still not serving", "".join(seen))
                time.sleep(0.5)
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own, and everything it started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _failed(block: Block, command: str, status, output: str) -> str:
    return f"{block.where}: `{command}` ended with {status}:\n{output[-4000:]}"
