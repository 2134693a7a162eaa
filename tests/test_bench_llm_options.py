"""``python -m mars_demo.bench --llm-options``: every LLM option measured or refused with its
reason, on the tiny shape (its figures mean nothing; the code paths are the GPU run's)."""

from __future__ import annotations

import json

import pytest
import torch

from mars_demo.devtools.bench import llm_options as sweep
from mars_demo.devtools.bench.cli import main
from mars_demo.devtools.bench.spec import BenchError


def test_unknown_options_are_refused_naming_the_known_ones():
    assert sweep.parse_options("nf4:dynamic, none:static-compiled") == [
        ("nf4", "dynamic"), ("none", "static-compiled")]
    with pytest.raises(BenchError, match="unknown option 'int4:dynamic'; known: nf4:dynamic"):
        sweep.parse_options("int4:dynamic")


def test_the_report_names_each_failed_option_and_why():
    data = {"device": "cpu", "llm_like": "x", "samples": 5, "answer_tokens": 8, "repeats": 1,
            "torch": "2", "transformers": "4", "torchao": None, "bitsandbytes": None,
            "options": [{"option": "torchao-int4:dynamic", "error": "ModelLoadError: no GPU"}],
            "nli_precision": {"error": "no option generated two distinct answers"}}
    text = sweep.format_report(data)
    assert "| torchao-int4:dynamic | failed, see below |" in text
    assert "- torchao-int4:dynamic: ModelLoadError: no GPU" in text
    assert "NLI: no option generated two distinct answers" in text


@pytest.mark.slow  # compiles the tiny LLM with torch.compile
def test_the_sweep_measures_each_option_and_records_the_refused_ones(tmp_path, capsys):
    out = tmp_path / "options.json"
    code = main(["--llm-options", "--llm-shape", "tiny", "--repeats", "1", "--samples", "2",
                 "--answer-tokens", "6", "--models-dir", str(tmp_path / "models"),
                 "--options", "none:dynamic,none:static-compiled,torchao-int4:dynamic",
                 "--json", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    rows = {r["option"]: r for r in data["options"]}
    assert list(rows) == ["none:dynamic", "none:static-compiled", "torchao-int4:dynamic"]
    dynamic, compiled = rows["none:dynamic"], rows["none:static-compiled"]
    assert not dynamic["compiled"] and compiled["compiled"]
    cpu = not torch.cuda.is_available()
    # in float32 the compiled steps pick the same tokens (in bf16 a near-tie may go either way)
    assert compiled["same_greedy_as_dynamic"] is True or not cpu
    for row in (dynamic, compiled):  # generated log-probs = an eager forward's, to the dtype's
        assert row["results_match"] and row["max_logprob_diff"] <= row["tolerance"]
        if cpu:
            assert row["compute_dtype"] == "float32" and row["tolerance"] == 1e-4
        assert row["step_ms_batch1"] > 0 and row["step_ms_batch6"] > 0
        assert row["answer_tokens"]["batch1"] >= 2 and row["rows"] == 3
    if cpu:
        assert "needs a CUDA GPU" in rows["torchao-int4:dynamic"]["error"]
        nli = data["nli_precision"]  # on a CPU "auto" is float32: nothing may change
        assert nli["auto_dtype"] == "float32" and nli["pairs"] >= 2
        assert nli["changed_verdicts"] == 0 and not nli["keep_float32"]
    report = capsys.readouterr().out
    assert "Options that did not run:" in report and "- torchao-int4:dynamic:" in report


def test_a_spent_time_budget_skips_the_options_left(tmp_path):
    data = sweep.run_sweep("tiny", [("none", "dynamic")], repeats=1, samples=1,
                           answer_tokens=2, seed=0, models_dir=str(tmp_path), budget_s=-1.0,
                           json_path=None, log=lambda msg: None)
    assert data["options"] == [{"option": "none:dynamic",
                                "error": "skipped: the time budget of -1 s was spent"}]


def test_the_benchmarks_models_build_where_flair_is_missing(tmp_path, monkeypatch):
    """The lent GPU machine has no flair: the benchmark builds no phrase chunker (it never runs
    BEM), while the factory's default still builds one and so needs flair."""
    import sys

    from mars_demo.devtools.bench.models import build_all
    from mars_demo.devtools.tiny import make_tiny_models

    monkeypatch.setitem(sys.modules, "flair", None)  # import flair -> ImportError
    build_all(str(tmp_path / "bench"), "tiny", 0)
    assert (tmp_path / "bench" / "DONE.json").is_file()
    assert (tmp_path / "bench" / "main" / "nli" / "config.json").is_file()
    assert not (tmp_path / "bench" / "main" / "chunker").exists()
    with pytest.raises(ImportError):
        make_tiny_models(tmp_path / "with-chunker")
