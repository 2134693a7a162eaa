"""Evaluation in several processes: ``python -m mars_demo.bench --evaluate --processes 1,2
[--llm-shape cpu|7b] [--questions N] [--batch-questions B] [--samples S] [--answer-tokens T]
[--repeats R] [--json PATH]``.

Questions per second of a whole ``evaluate`` run (:func:`mars_demo.evaluation.run.evaluate`:
generation, scoring, the judge, results.jsonl, the merge and the report) in 1 and in 2 (or
more) processes, one after the other in one benchmark run on the same machine, the same ``N``
questions and the same random-weight models with real shapes (those of
:mod:`mars_demo.devtools.bench`, every answer forced to ``T`` tokens). Each process count is
started by ``torchrun --standalone --nproc_per_node P`` (what ``accelerate launch`` runs
underneath); in each process the models are loaded and warmed up (2 questions, untimed) before
the processes start together, so the figure is the run's throughput, not Python's start-up.
On CPUs every count gets all the cores (``OMP_NUM_THREADS`` = cores / P); on one GPU the
processes share it. With ``--repeats R`` the counts take turns R times and each keeps its best
round (with every round's time and the load average before it, for a shared machine). It also
checks that the runs' records are the same (the greedy answers and samples of every question).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
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


def _one_run(count: int, job: dict[str, Any], work: pathlib.Path) -> dict[str, Any]:
    """``evaluate`` in ``count`` processes through torchrun: its timing and records."""
    spec_path = work / f"job-{count}.json"
    spec_path.write_text(json.dumps(job), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // count)),
           "PYTHONPATH": os.pathsep.join(p for p in (
               str(pathlib.Path(__file__).resolve().parents[3]),
               os.environ.get("PYTHONPATH")) if p)}
    shutil.rmtree(job["out"], ignore_errors=True)  # a repeat starts a new run
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
         str(count), "-m", "mars_demo.devtools.bench.processes", "--worker", str(spec_path)],
        env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"the run in {count} process(es) failed: "
                         f"{done.stderr.strip()[-1500:]}")
    timing = json.loads(pathlib.Path(job["timing"]).read_text(encoding="utf-8"))
    return {**timing, "command_seconds": wall, "load_avg_1min_before": load,
            "records": _records(pathlib.Path(job["out"]))}


def run_in_processes(llm_shape: str = "cpu", *,
                     processes: tuple[int, ...] = DEFAULT_PROCESSES, n_questions: int = 8,
                     batch_questions: int = 2, samples: int = 5, answer_tokens: int = 32,
                     repeats: int = 1, models_dir: str | os.PathLike | None = None,
                     seed: int = 0, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmark: ``repeats`` rounds, each running every process count once (so a
    machine that gets busier or quieter weighs on every count alike); each count's figure is
    its best round. Returns the JSON-ready figures."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if llm_shape not in SPECS:
        raise BenchError(f"unknown --llm-shape {llm_shape!r}; use cpu or 7b")
    if (n_questions < 1 or samples < 2 or answer_tokens < 1 or batch_questions < 1
            or repeats < 1 or not processes or min(processes) < 1):
        raise BenchError("need --questions >= 1, --samples >= 2, --answer-tokens >= 1, "
                         "--batch-questions >= 1, --repeats >= 1 and process counts >= 1")
    import platform

    import torch

    cuda = torch.cuda.is_available()
    spec = SPECS[llm_shape]
    if spec["needs_cuda"] and not cuda:
        raise BenchError(f"--llm-shape {llm_shape} needs a CUDA GPU; none is visible here. "
                         "Use --llm-shape cpu.")
    load_avg_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    runs: dict[int, list[dict[str, Any]]] = {count: [] for count in processes}
    with tempfile.TemporaryDirectory(prefix="mars-bench-processes-") as tmp:
        work = pathlib.Path(tmp)
        paths = build_models(models_dir or work / "models", llm_shape, seed, log)
        data = work / "questions.jsonl"
        data.write_text("".join(json.dumps({"question": q, "answers": ["x"]}) + "\n"
                                for q in questions(n_questions)), encoding="utf-8")
        for k in range(repeats):
            for count in processes:
                log(f"round {k + 1}/{repeats}, {count} process(es): {n_questions} questions ...")
                job = {"paths": {name: str(v) for name, v in paths.items()},
                       "shape": llm_shape, "samples": samples, "answer_tokens": answer_tokens,
                       "seed": seed, "data": str(data), "out": str(work / f"run-{count}"),
                       "batch_questions": batch_questions,
                       "timing": str(work / f"t-{count}.json")}
                runs[count].append(_one_run(count, job, work))
                last = runs[count][-1]
                log(f"{count} process(es): {last['n'] / last['seconds']:.3f} questions/s")
    rows = []
    for count, done in runs.items():
        best = min(done, key=lambda r: r["seconds"])
        rows.append({"processes": count, "seconds": best["seconds"], "questions": best["n"],
                     "questions_per_s": best["n"] / best["seconds"],
                     "threads_per_process": best["threads"], "device": best["device"],
                     "command_seconds": best["command_seconds"],
                     "every_round_seconds": [r["seconds"] for r in done],
                     "load_avg_1min_before": [r["load_avg_1min_before"] for r in done]})
    base = next((r for r in rows if r["processes"] == 1), None)
    for r in rows:
        r["speedup_vs_1"] = (r["questions_per_s"] / base["questions_per_s"]) if base else None
    every = [r["records"] for done in runs.values() for r in done]
    return {
        "schema": SCHEMA, "mode": "evaluate-processes", "command": None,
        "machine": {"device": "cuda" if cuda else "cpu",
                    "gpu": torch.cuda.get_device_name(0) if cuda else None,
                    "gpus": torch.cuda.device_count() if cuda else 0,
                    "cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "torch": torch.__version__,
                    "load_avg_start": list(load_avg_start) if load_avg_start else None,
                    "load_avg_end": list(os.getloadavg()) if hasattr(os, "getloadavg")
                    else None},
        "shapes": {"llm": llm_shape, "llm_like": spec["llm_like"],
                   "importance": spec["importance"], "nli": spec["nli"],
                   "nli_like": spec["nli_like"]},
        "settings": {"questions": n_questions, "batch_questions": batch_questions,
                     "samples": samples, "answer_tokens": answer_tokens, "seed": seed,
                     "processes": list(processes), "repeats": repeats, "prompt": "chat",
                     "judge": "em"},
        "runs": rows,
        "records_identical_across_processes": all(r == every[0] for r in every),
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
        f"evaluate run after the models are loaded and warm; the best of {se['repeats']} "
        "round(s), each running every count once",
        "",
        f"{'processes':>10}{'threads each':>14}{'seconds':>10}{'questions/s':>13}"
        f"{'speed-up':>10}{'command s':>11}   every round's seconds (load before)",
    ]
    for r in d["runs"]:
        rounds = ", ".join(f"{t:.1f} ({load:.1f})" if load is not None else f"{t:.1f}"
                           for t, load in zip(r["every_round_seconds"],
                                              r["load_avg_1min_before"]))
        lines.append(f"{r['processes']:>10}{r['threads_per_process']:>14}{r['seconds']:>10.1f}"
                     f"{r['questions_per_s']:>13.3f}"
                     f"{(r['speedup_vs_1'] or 0):>9.2f}x{r['command_seconds']:>11.1f}   "
                     + rounds)
    lines.append("records identical at every process count: "
                 + ("yes" if d["records_identical_across_processes"] else "NO"))
    return "\n".join(lines)


if __name__ == "__main__":  # a worker process, started by run() through torchrun
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(_worker(sys.argv[2]))
    sys.exit("this module's workers are started by python -m mars_demo.bench --evaluate "
             "--processes 1,2")
