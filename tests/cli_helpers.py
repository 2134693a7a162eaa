"""Running the command line inside a test: its exit code and what it printed, and the flags
that point it at the tiny models (tests/conftest.py's ``tiny_models``)."""

from __future__ import annotations

import contextlib
import io

from mars_demo.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    """``mars-demo ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def launched_run(launcher: list[str], *args: str, timeout: float = 300):
    """``LAUNCHER -m mars_demo ARGS`` (``accelerate launch ...``, ``torchrun ...``: several
    processes) from the repository, offline, each process on as many torch threads as this one
    (so that it sums float32 in the same order as a run made here): the finished process
    (stdout and stderr as text)."""
    import os
    import subprocess
    from pathlib import Path

    import torch

    root = Path(__file__).resolve().parents[1]
    threads = str(torch.get_num_threads())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root),
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": threads,
           "MKL_NUM_THREADS": threads}
    return subprocess.run([*launcher, "-m", "mars_demo", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def killed_after(args: list[str], results, lines: int = 2) -> None:
    """``python -m mars_demo ARGS`` from the repository, killed (SIGKILL) as soon as
    ``results`` holds ``lines`` finished lines (the test fails when it ends on its own)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "mars_demo", *args], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while proc.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= lines:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]


def model_flags(models) -> list[str]:
    """--llm, --importance and --nli of the tiny models."""
    return ["--llm", str(models["llm"]), "--importance", str(models["importance"]),
            "--nli", str(models["nli"])]



def evaluate_facts(out, models, limit: int, *flags: str) -> list[dict]:
    """``evaluate`` of the first ``limit`` questions of data/facts_answers.jsonl (pre-generated
    answers: no LLM) into ``out`` with the tiny importance and NLI models and ``flags``; the
    run's records (it must succeed)."""
    import json
    from pathlib import Path

    answers = Path(__file__).resolve().parents[1] / "data" / "facts_answers.jsonl"
    code, _, err = cli("evaluate", "run", "--data", str(answers), "--out", str(out), "--limit",
                       str(limit), "--seed", "3", "--judge", "em", "--bootstrap", "50",
                       "--no-plots", "--importance", str(models["importance"]),
                       "--nli", str(models["nli"]), *flags)
    assert code == 0, err
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]

def check_methods_only(data: dict, path, method_ids, asked: str, message: str) -> None:
    """``score FILE --methods-only`` of the saved analysis ``data`` (at ``path``) gives the same
    values of ``method_ids`` (within 1e-9) and keeps its ``method_inputs``; the same analysis
    without them refuses ``--methods asked`` (exit status 2) with ``message``."""
    import json

    code, out, err = cli("score", str(path), "--methods-only", "--json")
    assert code == 0, err
    again = json.loads(out)
    for method_id in method_ids:
        for variant, value in data["methods"][method_id].items():
            assert abs(again["methods"][method_id][variant] - value) <= 1e-9
    assert again["method_inputs"] == data["method_inputs"]
    old = {k: v for k, v in data.items() if k != "method_inputs"}
    path.with_name("old.json").write_text(json.dumps(old), encoding="utf-8")
    code, out, err = cli("score", str(path.with_name("old.json")), "--methods-only",
                         "--methods", asked)
    assert code == 2 and message in err, err


def check_model_needed_only_when_asked(settings, data: dict, question: str, model: str,
                                       saved: str, cases) -> None:
    """The optional ``model`` (a stage model, e.g. "lars") is planned exactly for the methods
    of ``cases`` (``(methods, needed)`` pairs) on the saved analysis ``data``; a rescore with
    the free methods alone saves nothing under ``method_inputs[saved]``."""
    from mars_demo.engine import Engine, stages
    from mars_demo.engine import job as job_module
    from mars_demo.methods import FREE
    from mars_demo.recipes import resolve
    from mars_demo.result import AnalysisResult

    result = AnalysisResult.from_dict(data)
    planned = stages.plan(job_module.RESULT_NEEDS)
    jobs = [job_module.ScoringJob(answers=result.answer_set(), question=question, reuse=None,
                                  logprob_source="generation")]
    for methods, needed in cases:
        run = resolve(settings.replace(methods=methods))
        assert (model in stages.models_needed(planned, jobs, run)) == needed, methods
    free = Engine(settings).rescore(result)
    assert list(free.methods) == list(FREE) and saved not in free.method_inputs
