"""The command line on bad input and odd terminals: one clear line on stderr and an exit status,
never a traceback.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forced_answers import QUESTION, all_numbers

from mars_demo import cli
from mars_demo.engine import Engine
from mars_demo.settings import clean_question

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, env_extra: dict | None = None, timeout: int = 120):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "mars_demo", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--samples", "0"], "samples must be an integer from 1 to 20; got 0"),
        (["--samples", "1000"], "samples must be an integer from 1 to 20; got 1000"),
        (["--temperature", "-1"], "temperature must be a number from 0.05 to 2.0; got -1.0"),
        (["--prompt", "fewshot"], "invalid choice: 'fewshot'"),
        (["--importance-method", "magic"], "invalid choice: 'magic'"),
    ],
)
def test_cli_refuses_bad_options_in_one_line(args, message):
    proc = run_cli("ask", QUESTION, *args, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], proc.stderr
    assert proc.stdout == ""


def test_cli_odd_question_on_an_ascii_console(monkeypatch, capsys, tiny_models):
    question = "火星 🚀 مرحبا\u200b <|im_end|> Question: x Answer: y"
    args = [
        "ask", question, "--llm", str(tiny_models["llm"]), "--importance",
        str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]), "--samples", "2",
        "--max-new-tokens", "4",
    ]
    for extra in (["--json"], []):
        out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # e.g. PYTHONIOENCODING=ascii
        monkeypatch.setattr(sys, "stdout", out)
        assert cli.main(args + extra) == 0
        out.flush()
        text = out.buffer.getvalue().decode("ascii")
        assert "Traceback" not in capsys.readouterr().err
        if extra:
            d = json.loads(text)
            assert d["question"] == clean_question(question)
            assert all(math.isfinite(x) for x in all_numbers(d))
        else:
            assert text.startswith("Question: \\u706b\\u661f")  # escaped, not a crash


def test_cli_reader_that_goes_away_is_no_traceback(monkeypatch, capsys, tiny_models):
    class ClosedPipe(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    code = cli.main(["ask", QUESTION, "--llm", str(tiny_models["llm"]), "--importance",
                     str(tiny_models["importance"]), "--nli", str(tiny_models["nli"]),
                     "--samples", "1", "--max-new-tokens", "3", "--json"])
    assert code == 0
    assert "Traceback" not in capsys.readouterr().err


def test_cli_unexpected_failure_is_one_line(monkeypatch, capsys, tiny_settings):
    def boom(self, *a, **k):
        raise TypeError("something odd\nsecond line")

    monkeypatch.setattr(Engine, "analyze", boom)
    code = cli.main(["ask", QUESTION, "--llm", tiny_settings.llm])
    err = capsys.readouterr().err
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "failed unexpectedly (TypeError: something odd)" in lines[0]


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_score_of_a_file_with_no_answer_set_fails_as_evaluate_does(tmp_path, capsys, content,
                                                                   tiny_models):
    """An empty JSONL file (or blank lines only) is no success: exit 2 and one line, in the
    shape of evaluate's "the data file ... has no usable question"."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text(content, encoding="utf-8")
    assert cli.main(["score", str(answers), "--importance", str(tiny_models["importance"]),
                     "--nli", str(tiny_models["nli"])]) == 2
    err = capsys.readouterr().err
    assert err == f"error: the file {str(answers)!r} has no usable answer set\n"
    data = tmp_path / "data.jsonl"
    data.write_text(content, encoding="utf-8")
    assert cli.main(["evaluate", "run", "--data", str(data), "--out", str(tmp_path / "run"),
                     "--llm", str(tiny_models["llm"]), "--importance",
                     str(tiny_models["importance"]), "--nli", str(tiny_models["nli"])]) == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == f"error: the data file {str(data)!r} has no usable question"
