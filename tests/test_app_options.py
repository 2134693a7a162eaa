"""``app.py`` options: flags, their environment variables, strict booleans and ports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mars_demo import serve as app
from mars_demo.settings import DEFAULT_IMPORTANCE

ENV_NAMES = (
    "MARS_DEMO_LLM",
    "MARS_DEMO_IMPORTANCE",
    "MARS_DEMO_NLI",
    "MARS_DEMO_HOST",
    "MARS_DEMO_PORT",
    "MARS_DEMO_SHARE",
    "MARS_DEMO_METHODS",
)


def test_defaults_without_flags_or_environment():
    args = app.parse_args([], env={})
    assert (args.llm, args.importance, args.nli) == (None, None, None)  # Settings has the defaults
    assert (args.host, args.port, args.share) == (None, None, False)
    assert args.settings.llm is None and args.settings.importance == DEFAULT_IMPORTANCE


def test_environment_sets_every_option():
    env = {
        "MARS_DEMO_LLM": "/m/llm",
        "MARS_DEMO_IMPORTANCE": "/m/imp",
        "MARS_DEMO_NLI": "/m/nli",
        "MARS_DEMO_HOST": "0.0.0.0",
        "MARS_DEMO_PORT": "8080",
        "MARS_DEMO_SHARE": "yes",
    }
    args = app.parse_args([], env=env)
    assert (args.llm, args.importance, args.nli, args.host, args.port, args.share) == (
        "/m/llm",
        "/m/imp",
        "/m/nli",
        "0.0.0.0",
        8080,
        True,
    )
    assert (args.settings.llm, args.settings.importance, args.settings.nli) == (
        "/m/llm",
        "/m/imp",
        "/m/nli",
    )


def test_flags_win_over_the_environment():
    env = {"MARS_DEMO_LLM": "/env/llm", "MARS_DEMO_PORT": "8080", "MARS_DEMO_SHARE": "1"}
    args = app.parse_args(["--llm", "cpu-small", "--port", "9000", "--no-share"], env=env)
    assert (args.llm, args.port, args.share) == ("cpu-small", 9000, False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("", False),
        ("1", True),
        ("TRUE", True),
        (" on ", True),
    ],
)
def test_share_variable_is_parsed_as_a_boolean(raw, expected):
    assert app.parse_args([], env={"MARS_DEMO_SHARE": raw}).share is expected


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {"MARS_DEMO_SHARE": "maybe"}, "MARS_DEMO_SHARE must be one of"),
        ([], {"MARS_DEMO_PORT": "http"}, "MARS_DEMO_PORT must be an integer from 1 to 65535"),
        (["--port", "70000"], {}, "--port must be an integer from 1 to 65535"),
        (["--importance", " "], {}, "importance must be a Hub id or a local directory"),
        (["--methods", "eigv,entropy_of_nothing"], {}, "unknown method 'entropy_of_nothing'"),
        ([], {"MARS_DEMO_METHODS": " , "}, "methods is empty"),
    ],
)
def test_bad_values_stop_with_a_clear_message(argv, env, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        app.parse_args(argv, env=env)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("public", [False, True])
def test_the_hosts_methods_are_computed_and_offered_to_visitors(public):
    """--methods (or MARS_DEMO_METHODS) sets what every analysis of the page computes, and API
    callers may ask for those too; the free ones stay offered, nothing else is."""
    from mars_demo.methods import FREE

    argv = ["--host", "0.0.0.0"] if public else []
    args = app.parse_args(argv, env={"MARS_DEMO_METHODS": "eigv, sar,lars"})
    assert args.settings.method_ids == ("eigv", "sar", "lars")
    assert args.access.public is public
    assert args.access.methods == frozenset(FREE) | {"sar", "lars"}
    args.access.check_models(args.settings.replace(methods=("sar", "degree")))  # offered
    with pytest.raises(ValueError, match="p_true"):
        args.access.check_models(args.settings.replace(methods=("p_true",)))
    from ui_helpers import FakeEngine

    from mars_demo.ui.page.controller import Controller
    from mars_demo.ui.work.host import EngineHost

    engine = FakeEngine()
    engine.settings = engine.settings.replace(methods=args.settings.methods)
    page = Controller(EngineHost(engine), access=args.access)
    # the API's "auto" is the page's own methods, not the free ones
    assert page.settings_from("auto", names=("methods",)).method_ids == ("eigv", "sar", "lars")
    assert page.settings_from("degree", names=("methods",)).method_ids == ("degree",)
    plain = app.parse_args(argv, env={})
    assert plain.settings.method_ids == tuple(FREE) and plain.access.methods == frozenset(FREE)


def test_help_documents_every_flag_and_variable():
    out = subprocess.run(
        [sys.executable, "app.py", "--help"],
        cwd=Path(__file__).resolve().parents[1],  # the repository: app.py
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in ("--llm", "--importance", "--nli", "--host", "--port", "--share", "--methods"):
        assert flag in out
    for name in ENV_NAMES:
        assert name in out


def test_the_llm_server_flags_and_their_variables():
    env = {"MARS_DEMO_LLM_ENDPOINT": "http://127.0.0.1:8000/v1", "MARS_DEMO_LLM_MODEL": "m"}
    args = app.parse_args(["--llm-api-key-env", "MY_KEY"], env=env)
    s = args.settings
    assert (s.llm_endpoint, s.llm_model, s.llm_api_key_env) == (
        "http://127.0.0.1:8000/v1", "m", "MY_KEY")
    flag = app.parse_args(["--llm-endpoint", "http://10.0.0.1:8000/v1"], env=env).settings
    assert flag.llm_endpoint == "http://10.0.0.1:8000/v1"  # a flag wins over its variable
    assert app.parse_args([], env={}).settings.llm_endpoint is None


def test_app_serves_with_its_llm_behind_a_real_server(llama_server, llama_api_key, tiny_models):
    """python app.py --llm-endpoint: the page's /analyze goes through the llama.cpp server."""
    from endpoint_servers import API_KEY_ENV
    from gradio_client import Client
    from ui_helpers import running_app

    extra = ("--llm-endpoint", llama_server, "--llm-api-key-env", API_KEY_ENV)
    with running_app(tiny_models, *extra) as url:
        data = Client(url, verbose=False).predict(
            "Which planet is known as the Red Planet?", samples=2, max_new_tokens=4,
            api_name="/analyze")
    assert data["settings"]["llm_endpoint"] == llama_server
    assert data["settings"]["logprob_source"].startswith("endpoint")
    assert len(data["samples"]) == 2


def test_every_flag_comes_from_the_option_schema_with_its_variable():
    """app.py's flags are the schema's (mars_demo/options.py), as the CLI's are: each with its
    variable in the help, parsed and checked by Option.parse (the message names the source)."""
    from mars_demo.options import SERVER_OPTIONS

    help_text = app.build_parser().format_help()
    assert len(app.FLAGS) == len({o.name for o in app.FLAGS})
    assert set(SERVER_OPTIONS) <= set(app.FLAGS)
    for opt in app.FLAGS:
        assert opt.flag in help_text and opt.variable in help_text, opt.name
    proxies = app.parse_args([], env={"MARS_DEMO_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1"})
    assert proxies.trusted_proxy == ["10.0.0.0/8", "127.0.0.1"]
    assert app.parse_args(["--trusted-proxy", "10.0.0.1", "--trusted-proxy", "10.0.0.2"],
                          env={}).trusted_proxy == ["10.0.0.1", "10.0.0.2"]
    timeout = app.parse_args([], env={"MARS_DEMO_LLM_TIMEOUT": "30"})
    assert timeout.settings.llm_timeout == 30.0
    with pytest.raises(SystemExit):
        app.parse_args([], env={"MARS_DEMO_LLM_TIMEOUT": "0"})  # the schema's range: 1 to 3600
