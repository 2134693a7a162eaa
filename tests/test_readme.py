"""The README is the Space's configuration and the first thing users run: keep it true."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from mars_demo import settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def space_header() -> dict:
    match = re.match(r"---\n(.*?)\n---\n", README, re.S)
    assert match, "README.md must start with the Space's YAML header"
    return yaml.safe_load(match.group(1))


def test_space_header_has_every_key_a_space_needs():
    header = space_header()
    for key in ("title", "emoji", "colorFrom", "colorTo", "sdk", "sdk_version", "app_file",
                "license", "short_description", "models", "suggested_hardware"):
        assert header.get(key), key
    assert header["sdk"] == "gradio"
    assert (ROOT / header["app_file"]).is_file()
    assert len(header["short_description"]) <= 60  # the Hub refuses longer ones
    assert (ROOT / "LICENSE").is_file() and header["license"] == "mit"


def test_space_sdk_version_is_the_gradio_the_project_pins():
    import gradio

    assert space_header()["sdk_version"] == gradio.__version__


def test_space_header_lists_every_model_the_app_can_load():
    listed = set(space_header()["models"])
    loadable = {
        settings.DEFAULT_IMPORTANCE,
        settings.DEFAULT_NLI,
        settings.CPU_NLI,
        settings.DEFAULT_BEM,
        settings.DEFAULT_CHUNKER,
        *(preset.model_id for preset in settings.LLM_PRESETS.values()),
    }
    assert loadable <= listed, sorted(loadable - listed)


def test_ci_runs_the_readme_test_command():
    command = "pip install -r requirements-dev.txt && python -m pytest"
    assert command in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pip install -q -r requirements-dev.txt" in ci
    dev = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert "-e ." in dev  # the tests install the package with the app's needs
    assert re.search(r"^python -m pytest\b", ci, re.M)
    # and the batched-against-single model comparisons again on one torch thread (conftest.py)
    assert re.search(r"^MARS_TEST_TORCH_THREADS=1 python -m pytest .*-m float_order$", ci, re.M)


def test_the_space_installs_no_test_tools_and_builds_nothing():
    runtime = (ROOT / "requirements.txt").read_text()
    for heavy in ("llama-cpp-python", "pytest", "playwright"):
        assert heavy not in runtime, heavy
