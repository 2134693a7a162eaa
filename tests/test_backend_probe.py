"""A new LLM backend is one module: its adapter class and its declaration. A probe backend
declared in this file alone, once registered, is offered by ``--llm-backend`` (its choices and
help), runs ``ask``, is recorded in the JSON the run prints and named on the page's Models line;
and the engine asks its declared capabilities, never the adapter: the probe's adapter has every
member of the transformers one, but it declares neither embeddings nor a next token's log-prob,
so EigenScore and P(True) are left out with the warnings saying why, and those members are
never called."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli, model_flags

from mars_demo.cli import build_parser
from mars_demo.models import backends
from mars_demo.models.contract import Backend, Capabilities, Load
from mars_demo.models.llm import LLM
from mars_demo.models.sources import check_source
from mars_demo.settings import Settings

QUESTION = "Which planet is known as the Red Planet?"


class ProbeLLM(LLM):
    """The transformers adapter, with the members the probe declares it lacks refused."""

    def last_token_embeddings(self, prompt_ids, answers):
        raise AssertionError("the engine asked for embeddings the backend does not declare")

    def next_token_logprob(self, text, target):
        raise AssertionError("the engine asked for a next token the backend does not declare")


def _load(s: Settings, cuda: bool) -> Load:
    source = check_source(s.llm, "LLM")
    return Load(("probe", source), "LLM", s.llm,
                lambda: ProbeLLM.from_pretrained(source, s.llm, load_in_4bit=False))


PROBE = Backend(
    name="probe",
    summary="a probe of the backend registry",
    chosen="by name only",
    claims=lambda s: False,
    fields=("llm",),
    capabilities=Capabilities(full_distribution=True, prompt_ids=True, embeddings=False,
                              batching=False, teacher_forcing=True, next_token=False),
    load=_load,
    named=lambda s, cuda: [("LLM", "--llm", s.llm)],
    model_name=lambda s, cuda: s.llm,
    describe=lambda s, cuda, loaded: {"llm": f"{s.llm} (probe backend)", "llm_preset": None,
                                      "cpu_fallback": False, "load_in_4bit": False},
)


@pytest.fixture
def probe():
    backends.register(PROBE)
    yield PROBE
    backends.unregister(PROBE.name)


def ask_help() -> str:
    """``ask --help`` without its white space (argparse wraps lines, also at hyphens)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return "".join(sub.choices["ask"].format_help().split())


def test_the_help_offers_every_backend_from_its_declaration(probe):
    text = ask_help()
    assert "--llm-backend{probe,server,llama.cpp,transformers}" in text
    for backend in backends.entries():
        assert "".join(backend.help().split()) in text
    assert "".join("probe (a probe of the backend registry; full distributions, prompt ids, "
                   "teacher forcing; chosen by name only)".split()) in text


def test_a_run_of_the_probe_backend_is_recorded_and_asks_its_capabilities(probe, tiny_models):
    flags = [*model_flags(tiny_models), "--samples", "2", "--max-new-tokens", "6",
             "--methods", "eigenscore,p_true,msp", "--json"]
    code, out, err = cli("ask", QUESTION, *flags, "--llm-backend", "probe")
    assert code == 0, err
    data = json.loads(out)
    assert data["settings"]["llm_backend"] == "probe"
    said = " ".join(data["warnings"])
    assert "EigenScore needs the LLM's hidden states: the LLM's probe backend gives none" in said
    assert "p_true needs the log-prob of one next token" in said
    assert list(data["methods"]) == ["msp"]
    code, out, err = cli("ask", QUESTION, *flags)  # the same model through transformers
    assert code == 0, err
    plain = json.loads(out)
    assert plain["settings"]["llm_backend"] == "transformers"
    assert set(plain["methods"]) == {"eigenscore", "p_true", "msp"}
    assert plain["greedy"] == data["greedy"] and plain["samples"] == data["samples"]


def test_the_page_names_the_probe_backend_on_its_models_line(probe, tiny_settings):
    from mars_demo.engine import Engine
    from mars_demo.hosting.access import Access
    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    engine = Engine(tiny_settings.replace(llm_backend="probe"))
    assert engine.describe()["llm_backend"] == "probe"
    banner = Controller(EngineHost(engine), Access()).banner_html()
    assert "LLM <b>llm (probe backend)</b>" in banner, banner


def test_the_backend_is_chosen_in_one_place(probe, tiny_settings):
    """The settings choose the backend once: by name, else the first that claims them; a name
    the registry does not hold is refused before anything loads."""
    from mars_demo.errors import OptionError
    from mars_demo.models import registry

    assert backends.backend_for(tiny_settings).name == "transformers"
    assert backends.backend_for(tiny_settings.replace(llm_backend="probe")) is PROBE
    served = tiny_settings.replace(llm_endpoint="http://127.0.0.1:9/v1")
    assert backends.backend_for(served).name == "server"
    with pytest.raises(OptionError, match="llm_backend must be one of llama.cpp, probe, server, "
                                          "transformers; got 'nope'"):
        registry.check_available(tiny_settings.replace(llm_backend="nope"), ["llm"])
    with pytest.raises(OptionError, match="the transformers backend does not use"):
        registry.check_available(served.replace(llm_backend="transformers"), ["llm"])
    with pytest.raises(OptionError, match="give --llm-endpoint URL"):
        registry.check_available(tiny_settings.replace(llm_backend="server"), ["llm"])
    with pytest.raises(ValueError, match="exists already"):
        backends.register(PROBE)
