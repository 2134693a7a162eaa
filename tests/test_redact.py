"""What of the server a visitor may read (mars_demo/ui/guards/redact.py), and how the page's answers
read in the figures: hand-made results and a fake engine, no model."""

from __future__ import annotations

import html
import json

import pytest
from ui_helpers import FakeEngine, make_answer, make_result

from mars_demo.errors import ModelLoadError
from mars_demo.hosting.access import Access, public_access
from mars_demo.settings import Settings
from mars_demo.ui.draw import plots
from mars_demo.ui.guards.redact import Redactor, hide_paths, public_model_name
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost

LLM = "/srv/secret/models/tiny-llm"
SETTINGS = Settings(llm=LLM, importance="/srv/secret/imp", nli="org/nli",
                    llm_endpoint="http://10.0.0.7:8000/v1")
WARNING = ("sample 2: no log-probs were given, so they were computed by a teacher-forced pass "
           f"of {LLM}")


def test_a_public_redactor_replaces_the_hosts_paths_and_urls_by_the_names_visitors_see():
    redactor = Redactor.for_page(public_access(model_names={"llm": "Tiny LLM"}), SETTINGS)
    assert redactor.text(WARNING).endswith("teacher-forced pass of Tiny LLM")
    assert redactor.text("cannot reach http://10.0.0.7:8000/v1") == "cannot reach the LLM server"
    assert redactor.text("no file '/var/lib/other/thing.bin'") == "no file 'thing.bin'"
    assert redactor.model_name("importance", "/srv/secret/imp") == "imp"
    assert redactor.model_name("nli", "org/nli") == "org/nli"


def test_a_page_only_the_host_opens_shows_everything_but_uses_the_hosts_names():
    redactor = Redactor.for_page(Access(model_names={"llm": "Tiny LLM"}), SETTINGS)
    assert redactor.text(WARNING) == WARNING
    assert redactor.model_name("llm", LLM) == "Tiny LLM"
    assert redactor.model_name("importance", "/srv/secret/imp") == "/srv/secret/imp"


def test_every_part_of_a_result_is_redacted_and_the_original_is_kept():
    result = make_result(warnings=[WARNING])
    result.settings = {**result.settings, **SETTINGS.to_dict()}
    result.nli.warnings = [f"NLI input cut for {LLM}"]
    shown = Redactor.for_page(public_access(), SETTINGS).result(result)
    text = json.dumps(shown.to_dict())
    assert "/srv/secret" not in text and "10.0.0.7" not in text
    assert shown.settings["llm"] == "tiny-llm" and "llm_endpoint" not in shown.settings
    assert shown.warnings[0].endswith("teacher-forced pass of tiny-llm")
    assert shown.question == result.question and shown.greedy.text == result.greedy.text
    assert result.settings["llm"] == LLM  # the page keeps the original to re-score


def test_the_page_shows_no_server_path_in_results_errors_or_the_banner():
    engine = FakeEngine(result=make_result(warnings=[WARNING]))
    engine.settings = engine.settings.replace(llm=LLM)
    controller = Controller(EngineHost(engine), public_access())
    shown = list(controller.ask("Which planet?", "mars", 2, 0.5, 4, 0, "auto", "model", "sum",
                                "equal", "strict", "default"))[-1]
    for key in ("warnings", "context", "answer", "error"):
        assert "/srv/secret" not in html.unescape(str(shown[key])), key
    with open(shown["download"]["value"], encoding="utf-8") as f:
        assert "/srv/secret" not in f.read()
    message = controller.message(ModelLoadError(f"cannot load '{LLM}': no config.json"))
    assert message == "cannot load 'tiny-llm': no config.json"
    assert "/srv/secret" not in controller.banner_html()


@pytest.mark.parametrize("field, folder, method, own_method, label, other", [
    ("similarity", "tiny-sts", "sar", "token_sar", "similarity (SAR)", "LARS"),
    ("lars", "tiny-lars", "lars_entropy", "lars", "LARS", "similarity"),
])
def test_the_banner_names_an_optional_model_only_where_its_methods_can_run(
        field, folder, method, own_method, label, other):
    """SAR's similarity model and LARS are loaded only for their methods: the banner names each
    (by the name visitors see) where the engine's methods or those visitors may ask for include
    one of them, and not the other optional model."""
    import dataclasses

    from mars_demo.methods import FREE

    engine = FakeEngine()
    engine.settings = engine.settings.replace(**{field: f"/srv/secret/models/{folder}"})
    plain = Controller(EngineHost(engine), public_access()).banner_html()
    assert label not in plain and folder not in plain
    offered = dataclasses.replace(public_access(), methods=frozenset(FREE) | {method})
    shown = Controller(EngineHost(engine), offered).banner_html()
    assert f"{label} <b>{folder}</b>" in shown and "/srv/secret" not in shown
    assert other not in shown
    named = dataclasses.replace(offered, model_names={field: "Shown Name"})
    assert f"{label} <b>Shown Name</b>" in Controller(EngineHost(engine), named).banner_html()
    engine.settings = engine.settings.replace(methods=(own_method,))  # the engine's own methods
    # a page only the host opens names it by its folder too: the page shows no server folder
    local = Controller(EngineHost(engine), Access()).banner_html()
    assert f"{label} <b>{folder}</b>" in local and "/srv/secret" not in local


def test_the_models_line_shows_no_server_folder_public_or_not():
    """The banner's Models line names a local model by its folder's last part and a Hub id as
    given, also on a page only the host opens (/tmp/... was shown there)."""
    engine = FakeEngine()
    engine.settings = engine.settings.replace(llm="/tmp/pytest-7/tiny-models0/llm",
                                              importance="/tmp/x/imp/", nli="org/nli")
    for access in (Access(), public_access()):
        banner = Controller(EngineHost(engine), access).banner_html()
        assert "/tmp" not in banner, banner
        assert "importance <b>imp</b>" in banner and "NLI <b>org/nli</b>" in banner


def test_paths_and_names():
    assert hide_paths("see /a/b/c.txt and C:\\x\\y.bin, not 1/2 or km/h") == (
        "see c.txt and y.bin, not 1/2 or km/h")
    assert public_model_name("/srv/m/llm/") == "llm" and public_model_name("Qwen/Qwen2.5") == (
        "Qwen/Qwen2.5")


def test_quotes_in_answers_read_as_quotes_in_the_figures_and_tags_stay_text():
    result = make_result()
    result.samples[0] = make_answer(['"Mars"', "."], [-0.3, -0.01], [([0, 1], 1.0)])
    result.samples[2] = make_answer(["<b>Jupiter</b>"], [-2.5], [([0], 1.0)])
    result.nli.answers = [s.text for s in result.samples]
    bars = plots.clusters_figure(result, "mars").data[0]
    labels, hovers = " ".join(bars.x), " ".join(bars.customdata)
    assert '"Mars".' in hovers and '"Mars' in labels and "&quot;" not in labels + hovers
    assert "&lt;b&gt;Jupiter" in hovers and "<b>Jupiter" not in hovers
    heat = plots.nli_figure(result).data[0]
    assert any('"Mars".' in cell for row in heat.customdata for cell in row)


def test_how_to_read_the_numbers_tells_no_visitor_to_run_a_host_command():
    for public in (True, False):  # host instructions go in the docs, not on the page
        page = Controller(EngineHost(FakeEngine()), Access(public=public))
        shown = page.show(make_result(), "mars")["verdict"]
        assert "lower uncertainty = more trustworthy" in shown
        assert "--calibration" not in shown and "app.py" not in shown


@pytest.mark.parametrize("entry, key", [("eigenscore", "llm"), ("ccp", "nli_model"),
                                        ("greedy_nli", "nli_model"), ("sar", "similarity_model"),
                                        ("lars", "lars_model")])
def test_the_model_named_in_every_saved_pass_is_shown_by_its_public_name(entry, key):
    """Each optional pass' entry names its model (OPTIONAL_MODELS' model_key, or the LLM): a
    public page shows it by the name visitors see, never the host's folder."""
    nli = "/srv/secret/models/nli-large"
    settings = SETTINGS.replace(nli=nli, similarity="/srv/secret/sim", lars="/srv/secret/lars")
    result = make_result()
    result.method_inputs = {entry: {key: {"llm": LLM, "nli_model": nli,
                                          "similarity_model": "/srv/secret/sim",
                                          "lars_model": "/srv/secret/lars"}[key]}}
    shown = Redactor.for_page(public_access(), settings).result(result)
    assert "/srv/secret" not in json.dumps(shown.to_dict())
    assert shown.method_inputs[entry][key] == {"llm": "tiny-llm", "nli_model": "nli-large",
                                               "similarity_model": "sim",
                                               "lars_model": "lars"}[key]
