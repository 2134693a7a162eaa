"""Every command the README and the docs show runs as written (tests/doc_commands.py says how a
block is read and run): in a clean checkout, installed by the README's first command into an
environment of its own, offline, with the model flags each page says to add offline. A block
that cannot run here says why on the line above it, and that reason is all that spares it."""

from __future__ import annotations

import doctest
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import doc_commands
import pytest
from doc_commands import Shell, all_blocks, blocks_of, commands

ROOT = Path(__file__).resolve().parents[1]
FIRST = "pip install -e . && python app.py"  # the README's first command


def test_the_reading_of_blocks_and_commands():
    assert doctest.testmod(doc_commands).failed == 0
    text = ("Offline, add `--llm /m/llm --nli /m/nli` to them.\n\n```bash\n"
            "python -m mars_demo ask \"Q\" \\\n    --json > a.json  # the analysis\n"
            "python -m mars_demo evaluate run --data d --out r\n"
            "python -m mars_demo evaluate calibrate r\n```\n")
    (block,) = blocks_of("p.md", text)
    shown = [doc_commands.adapted(c, block.offline_flags) for c in commands(block.text)]
    assert shown == [
        'python -m mars_demo ask "Q" --json --llm /m/llm --nli /m/nli > a.json  # the analysis',
        "python -m mars_demo evaluate run --data d --out r --llm /m/llm --nli /m/nli",
        "python -m mars_demo evaluate calibrate r"]


def test_every_block_runs_or_says_why_not():
    found = all_blocks(ROOT)
    assert len(found) >= 25, [b.where for b in found]
    assert {b.page for b in found} >= {"README.md", "docs/getting-started.md",
                                       "docs/library.md", "docs/serving.md"}
    for block in found:
        assert block.not_run is None or len(block.not_run) > 15, block.where  # a reason
    ran = [b for b in found if b.not_run is None]
    assert len(ran) >= 15
    shown = [c for b in ran if b.lang == "bash" for c in commands(b.text)]
    assert FIRST in shown  # the install story runs first, in the test below too
    for needed in ("mars-demo ask", "evaluate run", "evaluate calibrate", "score ",
                   "llama_cpp.server", "mkdocs build"):
        assert any(needed in c for c in shown), needed
    assert any("llm=(model, tokenizer)" in b.text for b in ran if b.lang == "python")


def _clean_checkout(dest: Path) -> Path:
    """The files of this checkout that git tracks or would track (no build output, no runs),
    as they are in the working tree, copied to ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _environment(venv: Path) -> dict[str, str]:
    """A virtual environment of its own that sees this one's packages (a .pth naming its
    site-packages), so the README's install adds only the package; the variables the commands
    run with: that environment first on PATH, offline."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    inner = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                 "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True).stdout.strip())
    (inner / "outer-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture
def tmp_outputs():
    """The folders under /tmp the docs' commands write (/tmp/tiny, /tmp/site...): those that
    were not there before are removed after the test."""
    named = {m for b in all_blocks(ROOT) if b.not_run is None
             for m in re.findall(r"/tmp/[\w.-]+", b.text)}
    before = {p for p in named if os.path.exists(p)}
    yield sorted(named)
    for path in named - before:
        shutil.rmtree(path, ignore_errors=True)


def run_documented(shell: Shell) -> list[str]:
    """Run every block that runs, in the pages' order; returns where each ran."""
    ran = []
    for block in all_blocks(ROOT):
        if block.not_run is None:
            shell.run_block(block)
            ran.append(block.where)
    return ran


def test_every_readme_and_docs_command_runs_as_written(tmp_path, tmp_outputs):
    checkout = _clean_checkout(tmp_path / "checkout")
    shell = Shell(cwd=checkout, env=_environment(tmp_path / "venv"),
                  scratch=Path(tmp_path / "scratch"))
    shell.scratch.mkdir()
    ran = run_documented(shell)
    assert ran[0].startswith("README.md")  # the install came first
    # the README's first command installed the package: the command exists, and the library
    # imports from any folder (the python blocks ran from empty folders)
    assert shutil.which("mars-demo", path=shell.env["PATH"]).startswith(str(tmp_path))
    assert (checkout / "runs" / "facts" / "calibration.json").is_file()
    assert (checkout / "analyses.jsonl").read_text().count("\n") == 40
