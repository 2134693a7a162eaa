"""``--nli-int8``: the NLI model with its linear layers in int8 on the CPU (torch's dynamic
quantization), an operator's choice measured by ``python -m mars_demo.bench --nli-choices``
(mars_demo/devtools/bench/nli_choices.py): its own cached model, recorded in every analysis, and
verdicts of one model never reused for the other."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import cli

from mars_demo.devtools.bench import nli_choices
from mars_demo.models import registry
from mars_demo.models.nli import NLIModel

QUESTION = "Which planet is known as the Red Planet?"


def test_int8_quantizes_every_linear_layer_and_keeps_the_probabilities_close(tiny_models):
    import torch

    path = str(tiny_models["nli"])
    plain = NLIModel.from_pretrained(path, path)
    small = NLIModel.from_pretrained(path, path, dtype="int8")
    linear = [m for m in plain.model.modules() if isinstance(m, torch.nn.Linear)]
    quantized = [m for m in small.model.modules()
                 if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert linear and len(quantized) == len(linear)
    pairs = [(f"{QUESTION} Mars", f"{QUESTION} {t}") for t in ("Mars", "Venus", "It is Mars")]
    a, b = plain.judge(pairs), small.judge(pairs)
    assert np.abs(np.array(a.probabilities) - np.array(b.probabilities)).max() < 0.05
    assert a.probabilities != b.probabilities  # int8 arithmetic, not the float32 model again


def test_the_option_loads_its_own_model_and_is_recorded(tiny_settings, tiny_models, tmp_path):
    plain, small = tiny_settings, tiny_settings.replace(nli_int8=True)
    assert registry.nli_dtype(plain) == "auto" and registry.nli_dtype(small) == "int8"
    assert registry.nli_for(small) is not registry.nli_for(plain)
    assert not registry.same_models(small, plain, "nli")
    flags = ["--llm", str(tiny_models["llm"]), "--importance", str(tiny_models["importance"]),
             "--nli", str(tiny_models["nli"]), "--samples", "3", "--max-new-tokens", "6"]
    code, out, err = cli("ask", QUESTION, *flags, "--nli-int8", "--json")
    assert code == 0, err
    asked = json.loads(out)
    assert asked["settings"]["nli_int8"] is True
    saved = tmp_path / "asked.json"
    saved.write_text(out, encoding="utf-8")
    # scored again with the float32 model: the int8 verdicts are not reused
    code, out, err = cli("score", str(saved), *flags[2:6], "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["settings"]["nli_int8"] is False
    assert again["nli"]["probabilities"] != asked["nli"]["probabilities"]


def test_the_choices_benchmark_counts_changes_and_agreement(trained_tiny_models, tiny_models):
    """The benchmark's parts on the trained tiny NLI model (effect) and the random tiny one
    (time): float32 changes nothing against itself, every count is within its total."""
    rows = nli_choices.labelled_sets()
    assert len(rows["facts_answers"]) == 40 and len(rows["judge_check"]) == 88
    models = nli_choices._pair(trained_tiny_models["nli"])
    found = nli_choices.effect(models, rows["judge_check"][:12])
    assert found["float32"]["verdicts_changed"] == 0
    assert found["float32"]["questions_with_other_clusters"] == 0
    # the CPU's smaller batches against one batch of all: padding is masked, no verdict moves
    assert found["one-batch"]["verdicts_changed"] == 0
    assert found["one-batch"]["clusters_agree_with_labels"] == found["float32"][
        "clusters_agree_with_labels"]
    for choice in nli_choices.CHOICES:
        assert 0 <= found[choice]["verdicts_changed"] <= found["pairs"]
        assert 0 <= found[choice]["clusters_agree_with_labels"] <= 1
    times = nli_choices.timing(nli_choices._pair(tiny_models["nli"]), 1)
    assert times["float32"]["speedup"] == 1.0 and times["int8"]["median_s"] > 0
    text = nli_choices.format_report({
        "machine": {"cpu_count": 2, "torch_threads": 2, "load_avg_start": [0.5],
                    "load_avg_end": [0.6]},
        "effect": {"judge_check": found}, "time": times})
    assert "int8" in text and "no-question" in text and "one-batch" in text
