"""Random-weight models with the real models' shapes, built offline."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
from typing import Any, Callable

from .spec import SPECS, BenchError



def build_llm(path: pathlib.Path, shape: str, seed: int, quantized: bool) -> str:
    """A Qwen2 causal LM of ``shape`` with the real vocabulary size and the tiny tokenizer.

    A model meant for 4-bit loading (the 7B shape) is created in bfloat16, never in fp32 (7.6B
    parameters = 15.2 GB instead of 30 GB): directly on the GPU when it has room for it, else in
    CPU memory; it is saved as bf16 safetensors and the engine then loads it in 4-bit NF4 exactly
    as it loads a Hub model. Other shapes are built in float32 on the CPU, as the engine runs them.
    Returns where it was built ("cuda:bfloat16", "cpu:bfloat16" or "cpu:float32").
    """
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    from .. import tiny

    spec = SPECS[shape]
    tok = tiny.build_llm_tokenizer()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    config = tiny.llm_config(
        shape, vocab_size=max(spec["vocab"], len(tok)), eos_token_id=eos, pad_token_id=pad,
        bos_token_id=pad,
    )
    config.tie_word_embeddings = spec["tie_embeddings"]
    dtype = torch.bfloat16 if quantized else torch.float32
    device = "cpu"
    if quantized and torch.cuda.is_available():
        with torch.device("meta"):
            n_params = sum(p.numel() for p in Qwen2ForCausalLM(config).parameters())
        free, _ = torch.cuda.mem_get_info()
        if free > 1.1 * 2 * n_params:  # bf16 weights plus a margin
            device = "cuda"
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=dtype)
    model.eval()
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return f"{device}:{str(dtype).replace('torch.', '')}"


def build_all(models_dir: str, shape: str, seed: int) -> None:
    """Write every model of ``shape`` under ``models_dir`` (run in a child process)."""
    from ..tiny import make_tiny_models

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = SPECS[shape]
    root = pathlib.Path(models_dir)
    built_on = build_llm(root / "llm", shape, seed, spec["load_in_4bit"])
    # The project's factory builds the importance and NLI models (its small LLM is not used).
    # (no phrase chunker: the benchmark never runs BEM, so it runs where flair is missing)
    make_tiny_models(root / "main", seed=seed, llm_shape="tiny",
                     importance_shape=spec["importance"], nli_shape=spec["nli"], chunker=False)
    if spec["other_nli"] != spec["nli"]:
        make_tiny_models(root / "other", seed=seed, llm_shape="tiny",
                         importance_shape="tiny", nli_shape=spec["other_nli"], chunker=False)
    (root / "DONE.json").write_text(
        json.dumps({"shape": shape, "seed": seed, "llm_built_on": built_on}), encoding="utf-8"
    )


def build_models(models_dir: str | os.PathLike, shape: str, seed: int = 0,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """Build the benchmark's random models (or reuse them) and return their directories (and,
    under "llm_built_on", where and in which dtype the LLM's random weights were made).

    They are built in a separate process, so that this process's peak memory (RSS) measures the
    analysis, not the building; a directory holding a finished build of the same shape and seed
    is reused.
    """
    import subprocess

    root = pathlib.Path(models_dir)
    stamp = root / "DONE.json"
    want = {"shape": shape, "seed": seed}
    done = json.loads(stamp.read_text(encoding="utf-8")) if stamp.is_file() else {}
    if {k: done.get(k) for k in want} != want:
        log(f"building random {shape}-shaped models in {root} ...")
        t = time.perf_counter()
        root.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        package_root = str(pathlib.Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        code = ("import sys; from mars_demo.devtools.bench.models import build_all; "
                "build_all(sys.argv[1], sys.argv[2], int(sys.argv[3]))")
        proc = subprocess.run([sys.executable, "-c", code, str(root), shape, str(seed)], env=env)
        if proc.returncode != 0:
            raise BenchError(f"building the models failed (exit code {proc.returncode})")
        log(f"built in {time.perf_counter() - t:.0f} s")
    other = "other" if SPECS[shape]["other_nli"] != SPECS[shape]["nli"] else "main"
    built_on = json.loads(stamp.read_text(encoding="utf-8")).get("llm_built_on")
    return {
        "llm_built_on": built_on,
        "llm": root / "llm",
        "importance": root / "main" / "importance",
        "nli": root / "main" / "nli",
        "other_nli": root / other / "nli",
    }


