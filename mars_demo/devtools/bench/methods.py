"""What the uncertainty methods cost (:mod:`mars_demo.methods`), timed on a benchmark analysis.

- Free methods (samples and NLI probabilities only, no model call): each one's median seconds
  over ``repeats`` recomputations from the analysis' saved inputs
  (:func:`mars_demo.methods.compute_from`), the same call the engine's methods stage makes.
- Opt-in methods (``--opt-in-methods``): the engine scores the same answers again with only
  that method asked and the earlier result given as ``reuse`` (so importance and NLI are not
  redone); the seconds its ``methods`` timing took, pass or model call included. The methods of
  one family share its pass (SAR's and CoCoA's similarity model, LARS, CCP's NLI of the
  alternatives, EigenScore's LLM pass), so each family is timed together
  (:func:`opt_in_groups`, from the registry).
- Semantic density's extra NLI pairs ride in the NLI stage's batched pass; their number beside
  the samples' pairs is reported apart (:func:`extra_nli_pairs`), not in the free methods'
  share.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import time
from typing import Any

def opt_in_groups() -> dict[str, tuple[str, ...]]:
    """The opt-in methods timed together: one group per family file of the registry (its
    methods share one extra pass or model), each P(True) method alone (one pass each); a new
    opt-in method is timed with no edit here."""
    from ...methods import METHODS, is_free

    groups: dict[str, list[str]] = {}
    for m in METHODS.values():
        if is_free(m):
            continue
        key = m.id if "llm_pass" in m.needs else m.family
        groups.setdefault(key, []).append(m.id)
    return {", ".join(ids): tuple(ids) for ids in groups.values()}


def extra_nli_pairs(result) -> dict[str, int]:
    """Semantic density's extra NLI pairs (the greedy answer against each distinct sample) and
    the samples' own pairs the NLI stage judged with them, from an analysis."""
    texts = [s.text for s in result.samples]
    distinct = len(set(texts))
    entry = result.method_inputs.get("greedy_nli") or {}
    return {"greedy_pairs": int(entry.get("pairs", 0)),
            "sample_pairs": distinct * distinct}  # every ordered pair, each text with itself
SIMILARITY_LIKE = "cross-encoder/stsb-roberta-large (SAR)"
LARS_LIKE = "duygunuryldz/LARS (roberta-base)"


def free_method_costs(result, repeats: int = 20) -> dict[str, float]:
    """Median seconds of each free method recomputed from ``result``'s saved inputs."""
    from ...methods import FREE, compute_from, inputs_of

    inputs = inputs_of(result)
    costs = {}
    for method_id in FREE:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            compute_from(inputs, [method_id])
            times.append(time.perf_counter() - t)
        costs[method_id] = float(statistics.median(times))
    return costs


def build_similarity(path: pathlib.Path, shape: str, seed: int, tokenizer_dir) -> None:
    """A random RoBERTa cross-encoder with one output, ``shape`` "large" (stsb-roberta-large)
    or "tiny", with the tokenizer saved in ``tokenizer_dir`` (random weights cost the same
    compute); kept and reused when ``path`` already holds one of that shape."""
    import torch
    from transformers import AutoTokenizer, RobertaConfig, RobertaForSequenceClassification

    from ..tiny.configs import nli_config

    done = path / "config.json"
    if done.is_file() and json.loads(done.read_text(encoding="utf-8")).get("bench_shape") == shape:
        return
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    base = nli_config(shape, vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    config = RobertaConfig(
        vocab_size=len(tok), hidden_size=base.hidden_size,
        num_hidden_layers=base.num_hidden_layers,
        num_attention_heads=base.num_attention_heads,
        intermediate_size=base.intermediate_size, max_position_embeddings=514,
        pad_token_id=tok.pad_token_id, num_labels=1,
    )
    config.bench_shape = shape
    torch.manual_seed(seed)
    model = RobertaForSequenceClassification(config).eval()
    model.save_pretrained(path)
    tok.save_pretrained(path)


def opt_in_method_costs(engine, settings, answers, result, similarity: str,
                        lars: str) -> dict[str, Any]:
    """Seconds of each group of :func:`opt_in_groups`: the answers scored again with only those
    methods asked, the earlier ``result`` reused (its importance and NLI are not redone)."""
    from ...methods import METHODS

    costs: dict[str, Any] = {}
    for name, ids in opt_in_groups().items():
        asked = settings.replace(methods=ids, similarity=similarity, lars=lars)
        these, earlier = answers, result
        if any("alternatives_nli" in METHODS[m].needs for m in ids):
            # CCP reads the greedy tokens' alternatives, which generation keeps only when it
            # is asked for: its answers are generated again with it (not timed)
            these = engine.generate(answers.question, asked)
            earlier = engine.score(these, settings)
        engine.score(these, asked, reuse=earlier)  # warm-up: loads the model, if any
        again = engine.score(these, asked, reuse=earlier)
        costs[name] = {"seconds": again.timings_s.get("methods", 0.0),
                       "values": {m: again.methods.get(m) for m in ids}}
    return costs
