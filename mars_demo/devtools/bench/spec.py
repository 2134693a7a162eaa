"""What the benchmark imitates: the models' shapes per ``--llm-shape``, and the targets."""

from __future__ import annotations

import json
import pathlib
from typing import Any

SCHEMA = 1
QUESTION = "Which planet is known as the Red Planet?"
GIB = 1024**3

#: Per LLM shape: what it imitates, the real vocabulary size, the other models' shapes, defaults.
#: "tiny" is internal (tests): it exercises every code path in seconds; its figures mean nothing.
SPECS: dict[str, dict[str, Any]] = {
    "cpu": dict(
        llm_like="Qwen/Qwen2.5-0.5B-Instruct (CPU preset)", vocab=151_936, tie_embeddings=True,
        importance="base", nli="base", nli_like="microsoft/deberta-base-mnli (CPU preset)",
        other_nli="large", other_nli_like="microsoft/deberta-large-mnli (default)",
        answer_tokens=32, load_in_4bit=False, needs_cuda=False,
    ),
    "7b": dict(
        llm_like="Qwen/Qwen2.5-7B-Instruct (GPU default, 4-bit NF4)", vocab=152_064,
        tie_embeddings=False, importance="base", nli="large",
        nli_like="microsoft/deberta-large-mnli (default)", other_nli="base",
        other_nli_like="microsoft/deberta-base-mnli (CPU preset)",
        answer_tokens=128, load_in_4bit=True, needs_cuda=True,
    ),
    "tiny": dict(
        llm_like="tiny test model (internal)", vocab=1_536, tie_embeddings=False,
        importance="tiny", nli="tiny", nli_like="tiny test NLI", other_nli="tiny",
        other_nli_like="tiny test NLI (again)", answer_tokens=8, load_in_4bit=False,
        needs_cuda=False,
    ),
}

#: Targets of the issue. ``applies`` = the LLM shape (and device) a hard limit is stated for.
AFTER_GENERATION_LIMIT = {"7b": 0.02, "cpu": 0.30}
#: 7B shape on a GPU: the whole analysis at most this many times a greedy-only answer.
ANALYSIS_OVER_GREEDY_LIMIT_7B = 1.15
IMPORTANCE_LIMIT_7B = 0.03
MIN_SPEEDUP = 3.0
#: The free methods (:data:`mars_demo.methods.FREE`) add at most this share to after generation.
METHODS_LIMIT = 0.05
#: The NLI step reaches at least this share of one plain matrix product's rate on the device
#: (CPU preset shapes on the CPU; :mod:`.ceiling`).
NLI_MATMUL_SHARE = 0.75
#: A "16 GB" card (T4) exposes 15 GiB; the CUDA context (not seen by torch's allocator) takes
#: about 0.5 GiB, so the allocator may reserve at most 14.5 GiB.
GPU_BUDGET_BYTES = int(14.5 * GIB)


class BenchError(RuntimeError):
    """The benchmark cannot run as asked (one line for the user)."""


FACTS = pathlib.Path(__file__).resolve().parents[3] / "data" / "facts.jsonl"
FALLBACK_QUESTIONS = (  # when the repository's data file is not there (an installed package)
    "What is the capital city of Australia?", "Which planet is known as the Red Planet?",
    "Who wrote the play Hamlet?", "What is the chemical symbol for gold?",
)


def questions(n: int) -> list[str]:
    """``n`` questions: those of data/facts.jsonl in order, cycled (numbered) when n is
    larger, so every question of a run is distinct."""
    if FACTS.is_file():
        base = [json.loads(x)["question"] for x in FACTS.read_text(encoding="utf-8").split("\n")
                if x.strip()]
    else:
        base = list(FALLBACK_QUESTIONS)
    out = []
    for i in range(n):
        q = base[i % len(base)]
        out.append(q if i < len(base) else f"{q.rstrip('?')} (variant {i // len(base)})?")
    return out
