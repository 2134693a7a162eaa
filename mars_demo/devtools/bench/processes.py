"""Evaluation in several processes: ``python -m mars_demo.bench --evaluate --processes 1,2
[--llm-shape cpu|7b] [--questions N] [--batch-questions B] [--samples S] [--answer-tokens T]
[--json PATH]``.

Questions per second of a whole ``evaluate`` run (:func:`mars_demo.evaluation.run.evaluate`:
generation, scoring, the judge, results.jsonl, the merge and the report) in 1 and in 2 (or
more) processes, one after the other in one benchmark run on the same machine, the same ``N``
questions and the same random-weight models with real shapes (those of
:mod:`mars_demo.devtools.bench`, every answer forced to ``T`` tokens). Each process count is
started by ``torchrun --standalone --nproc_per_node P`` (what ``accelerate launch`` runs
underneath); in each process the models are loaded and warmed up (2 questions, untimed) before
the processes start together, so the figure is the run's throughput, not Python's start-up.
On CPUs every count gets all the cores (``OMP_NUM_THREADS`` = cores / P); on one GPU the
processes share it. It also checks that the runs' records are the same (the greedy answers
and samples of every question).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from .models import build_models
from .spec import SCHEMA, SPECS, BenchError, questions

DEFAULT_PROCESSES = (1, 2)


def _worker(spec_path: str) -> int:
    """One process of a run (started by torchrun): load, warm up, wait for the others, run
    ``evaluate``; the main process writes the seconds to the spec's ``timing`` file."""
    import torch

    from ...evaluation.judges import make_judge
    from ...evaluation.parallel import processes
    from ...evaluation.run import EvalConfig, evaluate
    from .instrument import Instrument
    from .run import load_engine

    job = json.loads(pathlib.Path(spec_path).read_text(encoding="utf-8"))
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and not torch.cuda.is_available():
        torch.set_num_threads(int(threads))
    here = processes()
    settings, engine, _ = load_engine(job["paths"], SPECS[job["shape"]], job["samples"],
                                      job["answer_tokens"], job["seed"], lambda m: None)
    llm = engine.models.llm
    inst = Instrument(llm, engine.models.importance, engine.models.nli, len(llm.tokenizer))
    try:
        engine.score_many(engine.generate_many(questions(2)))  # warm-up, untimed
        if here is not None:
            here.wait()
        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
        sync()
        t0 = time.perf_counter()
        config = EvalConfig(data=job["data"], out=job["out"], judge=make_judge("em"),
                            settings=settings, resamples=10, plots=False,
                            batch_questions=job["batch_questions"], messages=lambda m: None)
        report = evaluate(config, engine=engine, processes=here)
        sync()
        seconds = time.perf_counter() - t0
    finally:
        inst.close()
    if report is not None:  # the main process
        pathlib.Path(job["timing"]).write_text(json.dumps(
            {"seconds": seconds, "n": report.n, "threads": torch.get_num_threads(),
             "device": str(llm.device)}), encoding="utf-8")
    return 0


def _records(run_dir: pathlib.Path) -> list[tuple[int, str, list[str]]]:
    out = []
    for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.append((r["index"], r["greedy"], [s["text"] for s in r["analysis"]["samples"]]))
    return out


def run_in_processes(llm_shape: str = "cpu", *,
                     processes: tuple[int, ...] = DEFAULT_PROCESSES,
        n_questions: int = 8, batch_questions: int = 2, samples: int = 5,
        answer_tokens: int = 32, models_dir: str | os.PathLike | None = None, seed: int = 0,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmark for each process count; returns its JSON-ready figures."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if llm_shape not in SPECS:
        raise BenchError(f"unknown --llm-shape {llm_shape!r}; use cpu or 7b")
    if (n_questions < 1 or samples < 2 or answer_tokens < 1 or batch_questions < 1
            or not processes or min(processes) < 1):
        raise BenchError("need --questions >= 1, --samples >= 2, --answer-tokens >= 1, "
                         "--batch-questions >= 1 and process counts >= 1")
    import platform

    import torch

    cuda = torch.cuda.is_available()
    spec = SPECS[llm_shape]
    if spec["needs_cuda"] and not cuda:
        raise BenchError(f"--llm-shape {llm_shape} needs a CUDA GPU; none is visible here. "
                         "Use --llm-shape cpu.")
    load_avg_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory(prefix="mars-bench-processes-") as tmp:
        work = pathlib.Path(tmp)
        paths = build_models(models_dir or work / "models", llm_shape, seed, log)
        data = work / "questions.jsonl"
        data.write_text("".join(json.dumps({"question": q, "answers": ["x"]}) + "\n"
                                for q in questions(n_questions)), encoding="utf-8")
        cores = os.cpu_count() or 1
        rows, records = [], {}
        for count in processes:
            job = {"paths": {k: str(v) for k, v in paths.items()}, "shape": llm_shape,
                   "samples": samples, "answer_tokens": answer_tokens, "seed": seed,
                   "data": str(data), "out": str(work / f"run-{count}"),
                   "batch_questions": batch_questions, "timing": str(work / f"t-{count}.json")}
            spec_path = work / f"job-{count}.json"
            spec_path.write_text(json.dumps(job), encoding="utf-8")
            env = {**os.environ, "OMP_NUM_THREADS": str(max(1, cores // count)),
                   "PYTHONPATH": os.pathsep.join(p for p in (
                       str(pathlib.Path(__file__).resolve().parents[3]),
                       os.environ.get("PYTHONPATH")) if p)}
            log(f"{count} process(es): {n_questions} questions ...")
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", str(count), "-m", "mars_demo.devtools.bench.processes",
                 "--worker", str(spec_path)], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - started
            if done.returncode != 0:
                raise BenchError(f"the run in {count} process(es) failed: "
                                 f"{done.stderr.strip()[-1500:]}")
            timing = json.loads(pathlib.Path(job["timing"]).read_text(encoding="utf-8"))
            records[count] = _records(pathlib.Path(job["out"]))
            rows.append({"processes": count, "seconds": timing["seconds"],
                         "questions": timing["n"],
                         "questions_per_s": timing["n"] / timing["seconds"],
                         "threads_per_process": timing["threads"],
                         "device": timing["device"], "command_seconds": wall})
            log(f"{count} process(es): {timing['n'] / timing['seconds']:.3f} questions/s")
    base = next((r for r in rows if r["processes"] == 1), None)
    for r in rows:
        r["speedup_vs_1"] = (r["questions_per_s"] / base["questions_per_s"]) if base else None
    first = records[rows[0]["processes"]]
    return {
        "schema": SCHEMA, "mode": "evaluate-processes", "command": None,
        "machine": {"device": "cuda" if cuda else "cpu",
                    "gpu": torch.cuda.get_device_name(0) if cuda else None,
                    "gpus": torch.cuda.device_count() if cuda else 0, "cpu_count": cores,
                    "platform": platform.platform(), "torch": torch.__version__,
                    "load_avg_start": list(load_avg_start) if load_avg_start else None,
                    "load_avg_end": list(os.getloadavg()) if hasattr(os, "getloadavg")
                    else None},
        "shapes": {"llm": llm_shape, "llm_like": spec["llm_like"],
                   "importance": spec["importance"], "nli": spec["nli"],
                   "nli_like": spec["nli_like"]},
        "settings": {"questions": n_questions, "batch_questions": batch_questions,
                     "samples": samples, "answer_tokens": answer_tokens, "seed": seed,
                     "processes": list(processes), "prompt": "chat", "judge": "em"},
        "runs": rows,
        "records_identical_across_processes": all(r == first for r in records.values()),
    }


def format_report(d: dict[str, Any]) -> str:
    m, sh, se = d["machine"], d["shapes"], d["settings"]
    where = (f"{m['gpus']} x {m['gpu']}" if m["gpu"] else f"{m['cpu_count']} CPU cores")
    lines = [
        f"MARS evaluation in several processes on {m['device']} ({where})",
        f"LLM like {sh['llm_like']}; importance BERT-{sh['importance']}; NLI "
        f"deberta-{sh['nli']}",
        f"{se['questions']} questions in batches of {se['batch_questions']}, greedy + "
        f"{se['samples']} samples x {se['answer_tokens']} new tokens (forced) each; the whole "
        "evaluate run after the models are loaded and warm",
        "",
        f"{'processes':>10}{'threads each':>14}{'seconds':>10}{'questions/s':>13}"
        f"{'speed-up':>10}{'command s':>11}",
    ]
    for r in d["runs"]:
        lines.append(f"{r['processes']:>10}{r['threads_per_process']:>14}{r['seconds']:>10.1f}"
                     f"{r['questions_per_s']:>13.3f}"
                     f"{(r['speedup_vs_1'] or 0):>9.2f}x{r['command_seconds']:>11.1f}")
    lines.append("records identical at every process count: "
                 + ("yes" if d["records_identical_across_processes"] else "NO"))
    return "\n".join(lines)


if __name__ == "__main__":  # a worker process, started by run() through torchrun
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2]))
    sys.exit("this module's workers are started by python -m mars_demo.bench --evaluate "
             "--processes 1,2")
