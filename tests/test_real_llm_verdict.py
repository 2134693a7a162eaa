"""The verdict and a quiet terminal on the suite's real LLM, SmolLM2-135M-Instruct
(tests/real_llm.py): ``ask``, ``ask --json``, ``score --json``, the library and the page say the
same of one analysis of a real answer; ``ask --llm FILE.gguf`` prints none of the model
libraries' notices (transformers' tokenizer paragraph and de-quantizing bars, llama.cpp's
loading log) on stderr unless ``--verbose``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_verdict_everywhere import page_verdict, report_verdict, run

from mars_demo.result import AnalysisResult
from mars_demo.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of France?"
FLAGS = ("--samples", "3", "--max-new-tokens", "16", "--seed", "1")


def scoring_models(tiny_models) -> list[str]:
    return ["--importance", str(tiny_models["importance"]), "--nli", str(tiny_models["nli"])]


def test_every_interface_gives_the_real_answers_one_verdict(smollm2_hf, tiny_models, tmp_path):
    from ui_helpers import FakeEngine

    from mars_demo import score
    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    argv = ("ask", QUESTION, "--llm", str(smollm2_hf), *scoring_models(tiny_models), *FLAGS)
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert "Paris" in data["greedy"]["text"]  # a real answer
    saved = tmp_path / "analysis.json"
    saved.write_text(out, encoding="utf-8")
    made = Verdict.from_dict(data["verdict"])
    code, report, err = run(*argv)
    assert code == 0, err
    assert report_verdict(report) == made.text
    code, out, err = run("score", str(saved), "--json")
    assert code == 0, err
    assert json.loads(out)["verdict"] == data["verdict"]
    assert score(data).verdict == made
    page = Controller(EngineHost(FakeEngine()))
    shown = page.show(AnalysisResult.from_dict(data), "mars")["verdict"]
    assert page_verdict(shown) == report_verdict(report)
    # a real LLM with toy scoring models: the toy models are said, the LLM is not
    toy = [w for w in data["warnings"] if w.startswith("Toy model")]
    assert toy and "the LLM" not in toy[0] and data["settings"]["toy_models"] == ["importance",
                                                                                  "nli"]


def gguf_ask(gguf: Path, tiny_models, *extra: str) -> subprocess.CompletedProcess:
    """``python -m mars_demo ask --llm FILE.gguf`` as a user runs it, in a process of its own."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mars_demo", "ask", QUESTION, "--llm", str(gguf),
         *scoring_models(tiny_models), "--samples", "2", "--max-new-tokens", "8", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("backend", ["llama.cpp", "transformers"])
def test_a_gguf_ask_prints_no_tokenizer_paragraph_or_progress_bar(smollm2_gguf, tiny_models,
                                                                  backend):
    """On either backend a GGUF file may run on (llama.cpp where it imports, as here; the
    transformers fallback), stderr holds the analysis' stages alone; ``--verbose`` lets the
    libraries speak (transformers' paragraph and bars; llama.cpp's loading log)."""
    quiet = gguf_ask(smollm2_gguf, tiny_models, "--llm-backend", backend)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith(f"Question: {QUESTION}")
    # stderr holds the stages of the analysis and nothing else
    assert all(line.startswith("... ") for line in quiet.stderr.splitlines()), quiet.stderr
    assert "\r" not in quiet.stderr
    if backend == "transformers":  # what it silenced: asked with --verbose, both are printed
        loud = gguf_ask(smollm2_gguf, tiny_models, "--llm-backend", backend, "--verbose")
        assert loud.returncode == 0, loud.stderr
        assert "You are using the default legacy behaviour" in loud.stderr
        assert "de-quantizing GGUF tensors" in loud.stderr
