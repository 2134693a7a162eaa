"""The NLI step's CPU choices, measured: ``python -m mars_demo.bench --nli-choices [--repeats R]
[--models-dir DIR] [--json PATH]``.

The NLI step dominates the time after generation on a CPU, and batching cannot gain more (it
runs at most of the plain matrix-product rate, docs/benchmark.md): only fewer or cheaper
operations can. Each choice is timed and its effect on the verdicts and clusters counted:

* ``float32``: today's (the engine's CPU default, the published code's precision), its pairs in
  passes of at most ``CPU_BATCH_TOKENS`` padded tokens (:mod:`mars_demo.optional.pairs`);
* ``one-batch``: the same, all of a question's pairs in one pass (the GPU's budget, and the
  CPU's before 2026-11-29): what the CPU's smaller batches save;
* ``int8``: the same model with its linear layers in int8 (``--nli-int8``: torch's dynamic
  quantization, :meth:`mars_demo.models.nli.NLIModel.from_pretrained`);
* ``no-question``: the answers judged without the question in front of each (shorter pairs).
  The published MARS code and Kuhn et al.'s semantic entropy put the question in front, so the
  engine has no such option; it is measured for what it would save and change.

**Effect**, on the project's labelled data: every question's answers of ``data/facts_answers.jsonl``
(40 questions, the greedy answer and 5 samples) and of ``data/judge_check.jsonl`` (88 questions,
473 answers labelled right or wrong), judged by the trained tiny NLI model (``make-tiny-models
--trained``, trained on question + answer pairs) as the engine judges them (every ordered pair,
one :meth:`~mars_demo.models.nli.NLIModel.matrices` call): the verdicts that differ from
float32's, the questions whose semantic clusters differ, and how often the clusters agree with
the labels (two right answers in one cluster, a right and a wrong one apart).

**Time**, at the CPU preset's shape (a random deberta-base-shaped model, built offline): one
question's NLI step as the engine makes it (the 25 ordered pairs of 5 samples and semantic
density's 5 pairs of the greedy answer with them), the median of ``R`` runs after a warm-up.
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .report import run_and_emit, x2
from .spec import SCHEMA

CHOICES = ("float32", "one-batch", "int8", "no-question")
DATA = Path(__file__).resolve().parents[3] / "data"
#: one question's answers at the CPU preset's shape (the speed benchmark's question)
QUESTION = "Which planet is known as the Red Planet?"
SAMPLES = ("Mars is known as the Red Planet because of its reddish appearance.",
           "The Red Planet is Mars.",
           "Mars, the fourth planet from the Sun, is called the Red Planet.",
           "It is Mars, named for the Roman god of war.",
           "The planet known as the Red Planet is Mars, due to iron oxide on its surface.")
GREEDY = "Mars is known as the Red Planet."


def labelled_sets() -> dict[str, list[dict[str, Any]]]:
    """Each labelled set's questions: the question, its answers and (where labelled) whether
    each is right."""
    facts = [json.loads(x) for x in (DATA / "facts_answers.jsonl").read_text().splitlines()]
    out = {"facts_answers": [{"question": r["question"],
                              "answers": [r["greedy"]["text"], *(s["text"] for s in r["samples"])],
                              "correct": None} for r in facts]}
    grouped: dict[str, dict[str, Any]] = {}
    for line in (DATA / "judge_check.jsonl").read_text().splitlines():
        r = json.loads(line)
        g = grouped.setdefault(r["question"], {"question": r["question"], "answers": [],
                                               "correct": []})
        g["answers"].append(r["answer"])
        g["correct"].append(bool(r["correct"]))
    out["judge_check"] = list(grouped.values())
    return out


def _matrices(nli, rows: list[dict[str, Any]], with_question: bool):
    questions = [r["question"] if with_question else "" for r in rows]
    return nli.matrices(questions, [r["answers"] for r in rows])


def one_batch(nli):
    """``nli`` batching as on a GPU (at most ``BATCH_TOKENS`` padded tokens a pass): the same
    model, another budget."""
    from ...optional.pairs import BATCH_TOKENS

    one = copy.copy(nli)
    one.batch_tokens = BATCH_TOKENS
    return one


def effect(models: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each choice's verdicts and clusters on ``rows`` against float32's (see the module doc)."""
    from ...core.clustering import semantic_clusters

    judged = {"float32": _matrices(models["float32"], rows, True),
              "int8": _matrices(models["int8"], rows, True),
              "no-question": _matrices(models["float32"], rows, False),
              "one-batch": _matrices(one_batch(models["float32"]), rows, True)}
    clusters = {c: [semantic_clusters(m.labels) for m in ms] for c, ms in judged.items()}
    out: dict[str, Any] = {"questions": len(rows),
                           "pairs": sum(len(r["answers"]) ** 2 for r in rows)}
    for choice in CHOICES:
        changed = sum(a != b for m, f in zip(judged[choice], judged["float32"])
                      for row_m, row_f in zip(m.labels, f.labels) for a, b in zip(row_m, row_f))
        out[choice] = {
            "verdicts_changed": changed,
            "questions_with_other_clusters": sum(
                a != b for a, b in zip(clusters[choice], clusters["float32"])),
            "clusters_agree_with_labels": _agreement(rows, clusters[choice]),
        }
    return out


def _agreement(rows: list[dict[str, Any]], clusters: list[list[int]]) -> float | None:
    """The share of labelled pairs (two right answers; a right and a wrong one) that the
    clusters treat as the labels say: together, apart."""
    agree = total = 0
    for r, ids in zip(rows, clusters):
        if r["correct"] is None:
            continue
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                a, b = r["correct"][i], r["correct"][j]
                if a or b:
                    total += 1
                    agree += (ids[i] == ids[j]) == (a and b)
    return agree / total if total else None


def timing(models: dict[str, Any], repeats: int) -> dict[str, Any]:
    """One question's NLI step (the samples' 25 ordered pairs and the greedy answer's 5) for
    each choice: the median seconds of ``repeats`` runs after a warm-up."""
    texts = list(SAMPLES)

    def step(nli, question: str) -> float:
        extra = [(f"{question} {GREEDY}".strip(), f"{question} {t}".strip()) for t in texts]
        t0 = time.perf_counter()
        nli.matrices_and_pairs([question], [texts], extra)
        return time.perf_counter() - t0

    plan = {"float32": (models["float32"], QUESTION), "int8": (models["int8"], QUESTION),
            "no-question": (models["float32"], ""),
            "one-batch": (one_batch(models["float32"]), QUESTION)}
    out: dict[str, Any] = {}
    for choice, (nli, question) in plan.items():
        step(nli, question)
        runs = [step(nli, question) for _ in range(repeats)]
        out[choice] = {"runs_s": runs, "median_s": statistics.median(runs)}
    for choice in CHOICES:
        out[choice]["speedup"] = out["float32"]["median_s"] / out[choice]["median_s"]
    return out


def _pair(path: Path) -> dict[str, Any]:
    from ...models.nli import NLIModel

    return {"float32": NLIModel.from_pretrained(str(path), str(path)),
            "int8": NLIModel.from_pretrained(str(path), str(path), dtype="int8")}


def run(repeats: int = 5, models_dir: str | os.PathLike | None = None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    import platform
    import tempfile

    import torch

    from ..tiny import make_tiny_models

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = tempfile.TemporaryDirectory(prefix="mars-bench-nli-") if models_dir is None else None
    root = Path(tmp.name if tmp else models_dir)
    try:
        load_avg_start = os.getloadavg()
        trained, base = root / "trained", root / "base"
        if not (trained / "DONE").is_file():
            log(f"training the tiny models in {trained} ...")
            make_tiny_models(trained, trained=True, chunker=False)
            (trained / "DONE").write_text("", encoding="utf-8")
        if not (base / "DONE").is_file():
            log(f"building a random deberta-base-shaped NLI model in {base} ...")
            make_tiny_models(base, nli_shape="base", chunker=False)
            (base / "DONE").write_text("", encoding="utf-8")
        log("judging the labelled data ...")
        small = _pair(trained / "nli")
        effects = {name: effect(small, rows) for name, rows in labelled_sets().items()}
        log("timing one question's NLI step at deberta-base's shape ...")
        times = timing(_pair(base / "nli"), repeats)
        return {"schema": SCHEMA, "mode": "nli-choices", "command": None,
                "machine": {"cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "torch": torch.__version__, "platform": platform.platform(),
                            "load_avg_start": list(load_avg_start),
                            "load_avg_end": list(os.getloadavg())},
                "repeats": repeats, "effect": effects, "time": times}
    finally:
        if tmp is not None:
            tmp.cleanup()


def format_report(d: dict[str, Any]) -> str:
    m, t = d["machine"], d["time"]
    lines = [f"The NLI step's CPU choices ({m['cpu_count']} cores, {m['torch_threads']} torch "
             f"threads; load average {m['load_avg_start'][0]:.2f} at the start, "
             f"{m['load_avg_end'][0]:.2f} at the end)", "",
             f"{'choice':<14}{'step s':>9}{'speed-up':>10}  verdicts changed / clusters "
             "changed / clusters agree with labels"]
    for choice in CHOICES:
        parts = []
        for name, e in d["effect"].items():
            c = e[choice]
            agree = c["clusters_agree_with_labels"]
            parts.append(f"{name}: {c['verdicts_changed']}/{e['pairs']}, "
                         f"{c['questions_with_other_clusters']}/{e['questions']}"
                         + (f", {agree:.1%}" if agree is not None else ""))
        lines.append(f"{choice:<14}{t[choice]['median_s']:>9.3f}{x2(t[choice]['speedup']):>10}  "
                     + "; ".join(parts))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m mars_demo.bench --nli-choices",
                                description="The NLI step's CPU choices: time at deberta-base's "
                                "shape, effect on the labelled data's verdicts and clusters.")
    p.add_argument("--nli-choices", action="store_true", required=True)
    p.add_argument("--repeats", type=int, default=5, help="timed runs per choice (default 5)")
    p.add_argument("--models-dir", help="build the models here and reuse them later")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    args = p.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[bench --nli-choices] {msg}", file=sys.stderr, flush=True)

    return run_and_emit(lambda: run(args.repeats, args.models_dir, log), argv, args.json,
                        format_report)
