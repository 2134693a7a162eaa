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


def run_cli(*args: str, timeout: int = 300, stdin: str | None = None
            ) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mars_demo", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, input=stdin,
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
    for part in ("Answer:", "Verdict:", "Confidence", "Entropy", "Semantic entropy",
                 "higher = less trustworthy", "--details"):
        assert part in out
    assert "Tokens by phrase" not in out  # the details are one flag away
    detailed = run_cli("ask", QUESTION, *model_args(cli_models), "--samples", "2",
                       "--max-new-tokens", "6", "--prompt", "paper", "--details")
    assert detailed.stdout.startswith(out.rsplit("\nMore with --details", 1)[0])
    for part in ("Tokens by phrase", "Samples (meaning", "length-normalized      MARS", "Time (s)"):
        assert part in detailed.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["ask", "   "], "question is empty"),
        (["ask", "hi", "--samples", "0"], "samples must be an integer from 1 to 20"),
        (["ask", "hi", "--temperature", "-1"], "temperature must be a number from"),
        (["ask", "hi", "--distribution", "median"], "invalid choice"),
        (["ask", "hi", "--llm", "/no/such/dir"], "the LLM /no/such/dir (--llm: no such folder"),
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


# --- score: answers made anywhere -----------------------------------------------------------------


def score_args(d: Path) -> list[str]:
    return ["--importance", str(d / "importance"), "--nli", str(d / "nli")]


@pytest.fixture(scope="module")
def asked(cli_models, tmp_path_factory) -> Path:
    proc = run_cli("ask", QUESTION, *model_args(cli_models), "--samples", "3",
                   "--max-new-tokens", "8", "--normalization", "softmax", "--json")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path_factory.mktemp("asked") / "analysis.json"
    path.write_text(proc.stdout, encoding="utf-8")
    return path


def test_score_reproduces_ask_json_without_an_llm(cli_models, asked):
    before = json.loads(asked.read_text(encoding="utf-8"))
    # --llm points nowhere: scoring must not need it
    proc = run_cli("score", str(asked), *score_args(cli_models), "--llm", "/no/such/llm", "--json")
    assert proc.returncode == 0, proc.stderr
    after = json.loads(proc.stdout)
    assert after["settings"]["normalization"] == "softmax"  # the file's recorded option
    for name in ("confidence", "entropy", "semantic_entropy"):
        for kind in ("length_normalized", "mars"):
            assert abs(after["uncertainty"][name][kind] - before["uncertainty"][name][kind]) < 1e-6
    # a flag given wins over the recorded option, and changes the MARS numbers only
    proc = run_cli("score", "-", *score_args(cli_models), "--normalization", "sum", "--json",
                   stdin=asked.read_text(encoding="utf-8"))
    assert proc.returncode == 0, proc.stderr
    resum = json.loads(proc.stdout)
    assert resum["settings"]["normalization"] == "sum"
    assert resum["uncertainty"]["entropy"]["length_normalized"] == pytest.approx(
        before["uncertainty"]["entropy"]["length_normalized"], abs=1e-9)


def test_score_jsonl_streams_good_lines_and_reports_bad_ones(cli_models, asked, tmp_path):
    good = json.dumps(json.loads(asked.read_text(encoding="utf-8")))
    hand = json.dumps({"question": "Red planet?",
                       "greedy": {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.2}]},
                       "samples": [{"text": "Venus", "tokens": [{"text": "Venus", "logprob": -1}]}]})
    bad_logprob = hand.replace("-0.2", "0.7")
    lines = [good, "{not json", "", hand, bad_logprob]
    path = tmp_path / "sets.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("score", str(path), *score_args(cli_models))
    assert proc.returncode == 1  # some lines failed
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [d["question"] for d in out] == [QUESTION, "Red planet?"]
    assert "error: line 2: not valid JSON" in proc.stderr
    assert "error: line 5: greedy answer, token 1 ('Mars'): logprob 0.7 is positive" in proc.stderr
    assert "scored 2 of 4 answer sets" in proc.stderr
    assert "2 bad line(s) skipped: 2, 5" in proc.stderr
    assert "4/4" in proc.stderr  # the progress bar reached the end
    assert "Traceback" not in proc.stderr


def test_score_report_and_bad_files(cli_models, asked, tmp_path):
    proc = run_cli("score", str(asked), *score_args(cli_models))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"Question: {QUESTION}")
    missing = run_cli("score", str(tmp_path / "nope.json"), *score_args(cli_models))
    assert missing.returncode == 2 and "error: cannot read" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"question": "q", "greedy": "a", "samples": []}), encoding="utf-8")
    proc = run_cli("score", str(bad), *score_args(cli_models))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: the answer set needs at least one sampled answer ('samples': a non-empty list)")


def test_every_option_of_the_schema_is_a_flag():
    from mars_demo import options

    ask_help = run_cli("ask", "--help").stdout
    score_help = run_cli("score", "--help").stdout
    for opt in options.MODEL_OPTIONS + options.REQUEST_OPTIONS:
        flag = "--4bit" if opt.kind is bool else opt.flag
        assert flag in ask_help, flag
        if opt.stage != "generation" or opt.name == "prompt":
            assert flag in score_help, flag
    assert "--samples" not in score_help  # generation options mean nothing when scoring


# --- the report: compact and safe for a terminal ----------------------------------------------------


def _report_of(result):
    from mars_demo.cli import format_report

    return format_report(result, details=True)


def test_the_report_names_each_phrase_once_above_its_tokens():
    from ui_helpers import make_answer, make_result

    greedy = make_answer(
        ["The", " Red", " Planet", " is", " Mars"],
        [-0.2, -0.4, -0.1, -0.05, -0.6],
        [([0, 1, 2], 0.3), ([3], 0.05), ([4], 0.9)],
    )
    report = _report_of(make_result(greedy=greedy))
    lines = report.splitlines()
    tokens = lines[lines.index(next(x for x in lines if x.startswith("Tokens by phrase"))):
                   lines.index(next(x for x in lines if x.startswith("Samples (meaning")))]
    assert sum("The Red Planet" in line for line in tokens) == 1  # once, not on every token
    headers = [line for line in lines if line.startswith("  phrase ")]
    assert headers == [
        "  phrase 1 'The Red Planet': importance 0.300, phrase weight 0.240",
        "  phrase 2 'is': importance 0.050, phrase weight 0.040",
        "  phrase 3 'Mars': importance 0.900, phrase weight 0.720",
    ]
    start = lines.index(headers[0])
    assert [line.split()[0] for line in lines[start + 1 : start + 4]] == ["'The'", "'", "'"]
    assert "Red'" in lines[start + 2] and "Planet'" in lines[start + 3]


def test_the_report_escapes_control_and_direction_characters():
    import unicodedata

    from ui_helpers import make_answer, make_result

    nasty = "\x1b[2J\x1b[31mMars\x07\r\u202eder\u200b"
    greedy = make_answer([nasty, " x"], [-0.1, -0.2], [([0, 1], 1.0)])
    result = make_result(question=f"Which planet{nasty}?", greedy=greedy,
                         warnings=[f"greedy: odd {nasty}"])
    result.samples[0] = make_answer([nasty], [-0.3], [([0], 1.0)])
    report = _report_of(result)
    for ch in report:
        assert ch == "\n" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"), repr(ch)
    assert "\\x1b[2J\\x1b[31mMars\\x07\\r\\u202eder\\u200b" in report
    assert report.count("\\x1b[2J") >= 5  # question, answer, phrase, sample, warning


def test_help_names_the_command_as_it_was_called(monkeypatch):
    """The installed script shows `mars-demo` in its help; `python -m mars_demo` shows that."""
    from mars_demo.cli import build_parser

    monkeypatch.setattr("sys.argv", ["/venv/bin/mars-demo", "--help"])
    assert build_parser().format_usage().startswith("usage: mars-demo ")
    monkeypatch.setattr("sys.argv", ["/repo/mars_demo/__main__.py", "--help"])
    assert build_parser().format_usage().startswith("usage: python -m mars_demo ")
