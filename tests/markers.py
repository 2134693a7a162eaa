"""The one rule that marks tests by what they start (tests/conftest.py calls it at collection).

``pytest -m "not slow"`` is the everyday loop; ``python -m pytest`` (the README's command, and CI)
runs everything. A test is marked by the fixtures it uses (directly or through other fixtures)
and by the calls in its own code and in the code of those of its fixtures that live in tests/,
so that a test added anywhere gets its marks without anyone remembering them:

* ``slow``: it starts a server (``app.py``, llama.cpp's, vLLM's), a browser, several processes
  (``accelerate launch``, ``torchrun``), trains models, compiles an LLM (``torch.compile``) or
  builds the documentation site;
* ``browser``: it drives a real headless Chromium;
* ``endpoint``: it talks to a real OpenAI-compatible LLM server;
* ``float_order``: it compares a model's pass over a batch with its pass over one input
  (``numeric_checks.float32_order``); CI runs these again on one torch thread.

``browser`` and ``endpoint`` imply ``slow``, also when a module sets them itself
(``pytestmark``). The markers are registered in pyproject.toml.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from pathlib import Path

#: a fixture -> the marks of every test that uses it
MARKS_BY_FIXTURE = {
    "app_url": ("slow",),  # the session's shared app.py server (`client` uses it)
    "llama_server": ("slow", "endpoint"),  # llama.cpp's OpenAI-compatible server
    "trained_tiny_models": ("slow",),  # trains the tiny models (make-tiny-models --trained)
    # the real LLM loaded from its GGUF file (transformers converts its tokenizer: a minute)
    "smollm2_llm": ("slow",),
}
#: a fixture whose name starts so -> marks (tests/test_vllm.py's vLLM server and its models)
MARKS_BY_FIXTURE_PREFIX = {"vllm": ("slow", "endpoint")}
#: a function called (by name or as an attribute) in a test's or fixture's code -> marks
MARKS_BY_CALL = {
    "running_app": ("slow",),  # an app.py server of the test's own
    "llama_server": ("slow", "endpoint"),
    "vllm_server": ("slow", "endpoint"),
    "sync_playwright": ("slow", "browser"),  # a headless Chromium
    "launched_run": ("slow",),  # accelerate launch / torchrun: several processes
    "run_in_processes": ("slow",),  # the benchmark's runs through torchrun
    "build_site": ("slow",),  # mkdocs build --strict of the docs site (tests/test_docs.py)
    "require_peers": ("slow",),  # the peers' own code (lm-polygraph, TruthTorchLM) in their venv
    # `ask --llm FILE.gguf` in a process of its own: the GGUF tokenizer's conversion (a minute)
    "gguf_ask": ("slow",),
    # every command of the README and the docs, as written (tests/test_doc_commands.py)
    "run_documented": ("slow",),
    # numeric_checks.float32_order: compares a batched model pass with a single one, so CI runs
    # it again on one torch thread (MARS_TEST_TORCH_THREADS=1, another float32 summation order)
    "float32_order": ("float_order",),
}
#: a keyword given to any call -> marks
MARKS_BY_KEYWORD = {
    "trained=True": ("slow",),  # make_tiny_models(..., trained=True) trains the tiny models
    # load_llm(..., decoding="static-compiled"): torch.compile of the LLM's forward (about a
    # minute on 2 CPU cores for the tiny model)
    "decoding='static-compiled'": ("slow",),
}
#: marks that make a test slow wherever they come from
SLOW_KINDS = ("browser", "endpoint")
TESTS = Path(__file__).resolve().parent


def marks_for(fixtures, calls, marks=()) -> set[str]:
    """The marks of a test that uses ``fixtures`` (names, all of them), whose code and fixtures'
    code make ``calls`` (see :func:`calls_in`), and that already has ``marks``.

    >>> sorted(marks_for(["tmp_path", "client", "app_url"], set()))
    ['slow']
    >>> sorted(marks_for([], {"running_app", "str"}, ["browser"]))
    ['browser', 'slow']
    """
    out = set(marks)
    for name in fixtures:
        out.update(MARKS_BY_FIXTURE.get(name, ()))
        for prefix, extra in MARKS_BY_FIXTURE_PREFIX.items():
            if name.startswith(prefix):
                out.update(extra)
    for call in calls:
        out.update(MARKS_BY_CALL.get(call, ()))
        out.update(MARKS_BY_KEYWORD.get(call, ()))
    if out & set(SLOW_KINDS):
        out.add("slow")
    return out


def calls_in(code: str) -> set[str]:
    """The names of the functions ``code`` calls, and its constant keyword arguments as
    "name=value" (strings and comments do not count).

    >>> sorted(calls_in("with api.sync_playwright() as p: make(out, trained=True)  # running_app("))
    ['make', 'sync_playwright', 'trained=True']
    """
    out = set()
    for node in ast.walk(ast.parse(textwrap.dedent(code))):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                out.add(func.id)
            elif isinstance(func, ast.Attribute):
                out.add(func.attr)
            out.update(f"{k.arg}={k.value.value!r}" for k in node.keywords
                       if k.arg and isinstance(k.value, ast.Constant))
    return out


@functools.lru_cache(maxsize=None)
def _calls_of(func) -> frozenset[str]:
    """:func:`calls_in` of a test or fixture function defined under tests/ (none for others)."""
    try:
        path = inspect.getsourcefile(func)
        if path is None or TESTS not in Path(path).resolve().parents:
            return frozenset()
        return frozenset(calls_in(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()


def mark_tests(items) -> None:
    """Add the marks of :func:`marks_for` to each collected test."""
    for item in items:
        funcs = [getattr(item, "function", None)]
        # the fixtures the item resolved to (pytest has no public accessor at collection time)
        info = getattr(item, "_fixtureinfo", None)
        for defs in (info.name2fixturedefs.values() if info is not None else ()):
            funcs += [d.func for d in defs]
        calls = set().union(*(_calls_of(f) for f in funcs if f is not None))
        have = {m.name for m in item.iter_markers()}
        for mark in sorted(marks_for(getattr(item, "fixturenames", ()), calls, have) - have):
            item.add_marker(mark)
