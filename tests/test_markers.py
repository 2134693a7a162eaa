"""The one rule that marks slow tests (markers.py, called by tests/conftest.py): what it marks,
that what it looks for still exists, and that ``pytest -m "not slow"`` leaves those tests out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import markers
import tomllib
from markers import calls_in, marks_for

TESTS = Path(__file__).resolve().parent


def test_marks_come_from_fixtures_calls_and_kinds():
    assert marks_for(["tmp_path", "tiny_models"], {"make_tiny_models"}) == set()
    assert marks_for(["client", "app_url", "tiny_models"], set()) == {"slow"}
    assert marks_for(["llama_server", "tiny_gguf"], set()) == {"slow", "endpoint"}
    assert marks_for(["vllm_url"], set()) == {"slow", "endpoint"}
    assert marks_for(["trained_tiny_models"], set()) == {"slow"}
    assert marks_for([], calls_in("with running_app(tiny_models, '--share') as url: pass")) \
        == {"slow"}
    assert marks_for([], calls_in("make_tiny_models(out, trained=True)")) == {"slow"}
    assert marks_for([], calls_in("make_tiny_models(out, trained=False)")) == set()
    assert marks_for([], calls_in("with sync_api.sync_playwright() as p: pass")) \
        == {"slow", "browser"}
    assert marks_for([], calls_in("launched_run(['torchrun'], 'evaluate')")) == {"slow"}
    assert marks_for([], set(), ["browser"]) == {"slow", "browser"}  # a module's own pytestmark
    assert marks_for([], set(), ["endpoint", "parametrize"]) == {"slow", "endpoint", "parametrize"}


def test_names_in_strings_and_comments_are_no_calls():
    code = 'x = "running_app(url)"  # llama_server(\nprint(x)'
    assert calls_in(code) == {"print"}


def test_every_mark_of_the_rule_is_registered():
    given = {m for marks in [*markers.MARKS_BY_FIXTURE.values(),
                             *markers.MARKS_BY_FIXTURE_PREFIX.values(),
                             *markers.MARKS_BY_CALL.values(),
                             *markers.MARKS_BY_KEYWORD.values()] for m in marks}
    given |= {"slow", *markers.SLOW_KINDS}
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    registered = {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert given <= registered


def test_what_the_rule_looks_for_still_exists():
    """A renamed fixture or helper would silently make its tests fast: each name must still be
    defined in the tests (or be the library call it names)."""
    code = "\n".join(p.read_text(encoding="utf-8") for p in TESTS.glob("*.py"))
    for name in markers.MARKS_BY_FIXTURE:
        assert f"def {name}(" in code, name
    from playwright import sync_api

    assert callable(sync_api.sync_playwright)  # the calls of a library the rule looks for
    from mars_demo.devtools.bench import processes

    assert callable(processes.run_in_processes)
    for name in set(markers.MARKS_BY_CALL) - {"sync_playwright", "run_in_processes"}:
        assert f"def {name}(" in code, name
    factory = TESTS.parent / "mars_demo" / "devtools" / "tiny" / "factory.py"
    assert "    trained: bool = False," in factory.read_text()  # make_tiny_models(trained=True)


def test_not_slow_leaves_out_servers_and_training_and_keeps_the_rest():
    """Collect three test files with ``-m "not slow"`` in a fresh pytest: the API tests of the
    shared app.py and the tests of the trained models are left out, the pure tests stay."""
    files = ["test_app_client.py", "test_tiny_trained.py", "test_core_scoring.py"]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "not slow", *(f"tests/{f}" for f in files)],
        cwd=TESTS.parent, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    kept = [line.removeprefix("tests/") for line in out.stdout.splitlines() if "::" in line]
    assert not [t for t in kept if t.startswith("test_app_client.py")]
    trained = [t for t in kept if t.startswith("test_tiny_trained.py")]
    assert "test_tiny_trained.py::test_importance_targets_and_parsing" in trained
    assert not [t for t in trained if "pipeline" in t or "greedy_answers" in t]
    assert len([t for t in kept if t.startswith("test_core_scoring.py")]) > 10


def test_torch_runs_on_the_threads_the_variable_asks_for():
    """MARS_TEST_TORCH_THREADS (read by conftest.py) sets torch's threads for the session and for
    the processes it starts: CI's second run of the ``float_order`` tests relies on it."""
    import os

    import torch

    asked = os.environ.get("MARS_TEST_TORCH_THREADS")
    if asked:
        assert torch.get_num_threads() == int(asked)
        assert os.environ["OMP_NUM_THREADS"] == asked  # what a started server or CLI reads
        return
    env = {**os.environ, "MARS_TEST_TORCH_THREADS": "1"}
    here = f"{Path(__file__).name}::test_torch_runs_on_the_threads_the_variable_asks_for"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", here],
                          cwd=TESTS, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch threads: 1 (MARS_TEST_TORCH_THREADS)" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", here],
                         cwd=TESTS, env={**env, "MARS_TEST_TORCH_THREADS": "two"},
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "must be a positive integer" in bad.stdout + bad.stderr
