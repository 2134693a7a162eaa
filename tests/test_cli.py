"""The CLI end to end in a subprocess, exactly as a user runs it, fully offline."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which planet is known as the Red Planet?"


def run_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mars_demo", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture(scope="module")
def cli_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-models")
    proc = run_cli("make-tiny-models", str(out))
    assert proc.returncode == 0, proc.stderr
    for name in ("llm", "importance", "nli"):
        assert f"{name}: {out / name}" in proc.stdout
        assert (out / name / "config.json").is_file()
    return out


def model_args(d: Path) -> list[str]:
    return ["--llm", str(d / "llm"), "--importance", str(d / "importance"), "--nli", str(d / "nli")]


def test_ask_json_holds_the_whole_analysis(cli_models):
    proc = run_cli("ask", QUESTION, *model_args(cli_models), "--samples", "3",
                   "--max-new-tokens", "8", "--seed", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["question"] == QUESTION
    assert len(d["samples"]) == 3 and len(d["cluster_ids"]) == 3
    assert len(d["nli"]["labels"]) == 3
    assert d["settings"]["samples"] == 3 and d["settings"]["seed"] == 3
    assert d["settings"]["llm"] == str(cli_models / "llm")
    for name in ("confidence", "entropy", "semantic_entropy"):
        for kind in ("length_normalized", "mars"):
            assert math.isfinite(d["uncertainty"][name][kind])
    g = d["greedy"]
    assert len(g["tokens"]) == len(g["mars_weights"]) == len(g["token_importance"])


def test_ask_report_is_readable(cli_models):
    proc = run_cli("ask", QUESTION, *model_args(cli_models), "--samples", "2",
                   "--max-new-tokens", "6", "--prompt", "paper")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"Question: {QUESTION}")
    for part in ("Answer:", "Phrases", "Samples", "Confidence", "Entropy", "Semantic entropy",
                 "higher = less trustworthy"):
        assert part in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["ask", "   "], "question is empty"),
        (["ask", "hi", "--samples", "0"], "samples must be an integer from 1 to 20"),
        (["ask", "hi", "--temperature", "-1"], "temperature must be a number from"),
        (["ask", "hi", "--distribution", "median"], "invalid choice"),
        (["ask", "hi", "--llm", "/no/such/dir"], "no directory '/no/such/dir'"),
        (["ask", "x" * 1001], "question is 1001 characters long; the limit is 1000"),
        (["ask", "\u200b\u202e\u2060"], "question is empty once control and invisible"),
        (["ask", "hi", "--samples", "1000"], "samples must be an integer from 1 to 20"),
        (["make-tiny-models", "/proc/no-such-place"], "cannot write the tiny models to"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, cli_models):
    extra = [] if args[0] != "ask" or "--llm" in args else model_args(cli_models)
    proc = run_cli(*args, *extra, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr
