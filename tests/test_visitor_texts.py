"""A page speaks to its visitors: none of its texts names a command-line flag, an environment
variable or a command (mars_demo/texts/__init__.py); the host's own texts never reach a page."""

from __future__ import annotations

import re
from pathlib import Path

from mars_demo import texts
from mars_demo.ui import launch

UI = Path(__file__).resolve().parents[1] / "mars_demo" / "ui"
#: what a host instruction looks like: a flag, a command, an environment variable
HOST_WORDS = re.compile(
    r"(?<![\w-])--[a-z][a-z0-9-]+|\bpython\b|\bapp\.py\b|\bpip install\b|\bMARS_DEMO_\w+|\$[A-Z_]{3,}")


def strings(value):
    """Every string in a text constant (a string, or a dict, list or tuple of them)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def visitor_texts() -> dict[str, list[str]]:
    return {name: list(strings(getattr(texts, name))) for name in dir(texts)
            if name.isupper() and name != "HOST_ONLY" and name not in texts.HOST_ONLY}


def test_no_text_a_page_shows_holds_a_flag_a_variable_or_a_command():
    found = {name: match.group(0) for name, values in visitor_texts().items()
             for value in values if (match := HOST_WORDS.search(value))}
    assert not found, found


def test_the_check_finds_host_instructions():
    """The pattern catches what the page used to show (so the test above can fail)."""
    for said in ("(Host: start the app with <code>--calibration FILE</code>.)",
                 "Start the app with --runs (or a --calibration file)",
                 "Restart the app with other models (python app.py --llm ...)",
                 "Open a run made by `python -m mars_demo evaluate --data SOURCE`",
                 "set MARS_DEMO_RUNS"):
        assert HOST_WORDS.search(said), said
    assert not HOST_WORDS.search("Higher = less trustworthy -- as the paper says; e.g. 3 -- 4")


def test_the_hosts_texts_exist_and_no_page_module_uses_them():
    assert all(isinstance(getattr(texts, name), str) for name in texts.HOST_ONLY)
    used = {path.name: set(re.findall(r"texts\.([A-Z_]+)", path.read_text(encoding="utf-8")))
            for path in UI.rglob("*.py")}
    leaks = {module: names & set(texts.HOST_ONLY) for module, names in used.items()
             if names & set(texts.HOST_ONLY)}
    assert not leaks, leaks
    assert not set(launch.PAGE_TEXTS) & set(texts.HOST_ONLY)  # the page's script's texts
