"""A model-backed method with its model is three files: a probe optional model declared beside
its class (``mars_demo/optional/probe.py``), its entry in the list of optional models
(``mars_demo/optional/__init__.py``) and its method's family file
(``mars_demo/methods/probe.py``), written into a copy of the package and run there in a fresh
process. Everything else is derived from the declaration: the flag and the page's flags, the
Settings field, the methods' need and family, the scoring stage and the job's field, the saved
entry, loading and reuse, a public page's redaction, the banner and the evaluation view's line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MODEL = '''"""A probe optional model: how long each answer is, as a model would say it."""

import os

from .spec import OptionalModel, ReadsAnswers


class ProbeModel(ReadsAnswers):
    def __init__(self, model_id):
        self.model_id = model_id

    @classmethod
    def from_pretrained(cls, source, model_id):
        with open(os.path.join(source, "loads"), "a") as f:  # each load leaves a line
            f.write("loaded\\n")
        return cls(model_id)

    def read(self, items):
        return [({"lengths": [len(a.text) for a in answers]}, ["The probe read the answers."])
                for _, answers in items]


SPEC = OptionalModel(
    field="probe", need="probe_model", label="probe", saved="probe",
    holds="answer lengths of the probe model", model_key="probe_model", family="probe",
    output="probe_outputs", cls=ProbeModel, default="org/probe",
    help="the probe model of probe_method: a local directory", page_label="Probe model")
'''

FAMILY = '''"""The probe method: how much longer the samples are than the greedy answer."""

from .base import method


def _probe(x, _):
    lengths = x.saved["probe"]["lengths"]
    return sum(lengths[1:]) / (len(lengths) - 1) - lengths[0]


METHODS = (method("probe_method", "Probe method", "how much longer the samples are",
                  ["samples", "probe_model"], False, "a test", _probe),)
'''

CHECK = '''"""Run in the copy: what the probe reaches, as JSON on stdout."""
import contextlib, io, json, sys
from pathlib import Path

import mars_demo
from mars_demo.cli import build_parser, main
from mars_demo.settings import Settings

llm, importance, nli, probe, work, facts = sys.argv[1:]
found = {"package": mars_demo.__file__}


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


sub = next(a for a in build_parser()._actions if a.dest == "command")
found["ask_help"] = " ".join(sub.choices["ask"].format_help().split())
from mars_demo import serve
found["app_help"] = " ".join(serve.build_parser().format_help().split())
found["default"] = Settings().probe
models = ["--llm", llm, "--importance", importance, "--nli", nli]
code, out, err = run("ask", "Which planet is known as the Red Planet?", *models, "--samples",
                     "3", "--max-new-tokens", "6", "--methods", "probe_method", "--probe", probe,
                     "--json")
found["ask"] = [code, json.loads(out) if code == 0 else err]
saved = Path(work) / "analysis.json"
saved.write_text(out)
code, out, err = run("score", str(saved), "--methods-only", "--json")
found["methods_only"] = [code, json.loads(out)["methods"] if code == 0 else err]

from mars_demo.engine import Engine
from mars_demo.models import registry
from mars_demo.result import AnalysisResult
registry.release(set())  # nothing cached: a load would be seen
result = AnalysisResult.from_dict(found["ask"][1])
again = Engine(Settings(llm=llm, importance=importance, nli=nli, probe=probe,
                        methods="probe_method")).rescore(result, normalization="softmax")
found["reused"] = [again.methods["probe_method"], again.method_inputs["probe"]]
found["loads"] = (Path(probe) / "loads").read_text().count("loaded")

import dataclasses
from mars_demo.hosting.access import Access, public_access
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost
engine = Engine(Settings(llm=llm, importance=importance, nli=nli, probe=probe))
offered = dataclasses.replace(public_access(), methods=public_access().methods | {"probe_method"})
found["banner"] = Controller(EngineHost(engine), offered).banner_html()
found["banner_plain"] = Controller(EngineHost(engine), public_access()).banner_html()

run_dir = Path(work) / "run"
code, out, err = run("evaluate", "run", "--data", facts, "--out", str(run_dir), "--limit", "3",
                     "--judge", "em", "--bootstrap", "20", "--no-plots", "--importance",
                     importance, "--nli", nli, "--methods", "probe_method", "--probe", probe)
found["evaluate"] = [code, err]
from mars_demo.evaluation.runs import read_run
from mars_demo.ui.views.eval_view import table_html
report = read_run(run_dir).report
found["view"] = table_html(report)
found["view_models"] = report.models
print(json.dumps(found))
'''


@pytest.fixture(scope="module")
def probed(tiny_models, tmp_path_factory):
    """What the probe reaches, found by ``CHECK`` in a copy of the package with the three
    files."""
    work = tmp_path_factory.mktemp("optional-probe")
    copy = work / "copy"
    shutil.copytree(ROOT / "mars_demo", copy / "mars_demo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "mars_demo" / "optional" / "probe.py").write_text(MODEL, encoding="utf-8")
    listed = copy / "mars_demo" / "optional" / "__init__.py"
    text = listed.read_text(encoding="utf-8")
    assert "from . import ccp, lars, similarity\n" in text and "ccp.SPEC)" in text
    listed.write_text(text.replace("from . import ccp, lars, similarity\n",
                                   "from . import ccp, lars, probe, similarity\n")
                      .replace("ccp.SPEC)", "ccp.SPEC, probe.SPEC)"), encoding="utf-8")
    (copy / "mars_demo" / "methods" / "probe.py").write_text(FAMILY, encoding="utf-8")
    (copy / "check.py").write_text(CHECK, encoding="utf-8")
    folder = work / "probe-model"
    folder.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(copy),
           "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(copy / "check.py"), str(tiny_models["llm"]),
         str(tiny_models["importance"]), str(tiny_models["nli"]), str(folder), str(work),
         str(ROOT / "data" / "facts_answers.jsonl")],
        cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["package"].startswith(str(copy))
    return found | {"folder": str(folder)}


def test_its_flags_and_settings_field_come_from_its_declaration(probed):
    assert "--probe PROBE the probe model of probe_method: a local directory; default: " \
           "org/probe" in probed["ask_help"]
    assert "--probe PROBE" in probed["app_help"] and "MARS_DEMO_PROBE" in probed["app_help"]
    assert "--probe-name NAME the probe model's name on the page" in probed["app_help"]
    assert probed["default"] == "org/probe"


def test_an_analysis_runs_its_stage_and_saves_what_the_model_said(probed):
    code, data = probed["ask"]
    assert code == 0, data
    entry = data["method_inputs"]["probe"]
    lengths = [len(data["greedy"]["text"])] + [len(s["text"]) for s in data["samples"]]
    assert entry == {"probe_model": probed["folder"], "question": data["question"],
                     "answers": [data["greedy"]["text"]] + [s["text"] for s in data["samples"]],
                     "lengths": lengths}
    expected = sum(lengths[1:]) / len(data["samples"]) - lengths[0]
    assert data["methods"] == {"probe_method": {"value": pytest.approx(expected)}}
    assert data["settings"]["probe"] == probed["folder"]
    assert "The probe read the answers." in data["warnings"]
    assert probed["methods_only"] == [0, data["methods"]]  # from the JSON alone


def test_a_rescore_reuses_its_entry_without_loading_it(probed):
    _, data = probed["ask"]
    assert probed["reused"] == [data["methods"]["probe_method"], data["method_inputs"]["probe"]]
    assert probed["loads"] == 1  # the analysis loaded it once; the rescore did not


def test_the_banner_and_the_evaluation_view_name_it(probed):
    assert "probe <b>probe-model</b>" in probed["banner"]
    assert "/probe-model" not in probed["banner"]  # a public page shows no server folder
    assert "probe-model" not in probed["banner_plain"]  # its method is not offered there
    assert probed["evaluate"][0] == 0, probed["evaluate"][1]
    assert probed["view_models"]["probe"] == probed["folder"]
    assert ", probe probe-model." in probed["view"]  # the run's models line, by folder
