"""A public page (here: ``SPACE_ID`` set) that no visitor can break: no model switch, no BEM the
host did not set up, capped work per question, one queued analysis per client, small uploads,
download folders that do not outlive the server. Driven through the page's events (as the
browser sends them), the API and a real browser.

The public ``app.py`` runs with ``SPACE_ID`` set, so it reads ``X-Forwarded-For`` (a Space's
proxy appends the client there): the tests play different clients with the (public) address that
header ends with. tests/test_hostile.py tries what a hostile client would. Timeouts
only keep a hung server from hanging the run; nothing asserts on time.
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from ui_helpers import FakeEngine, PageEventError, page_event, running_app

from mars_demo import serve as app
from mars_demo import texts
from mars_demo.downloads import LOCK_NAME, PREFIX
from mars_demo.hosting.access import Access, check_bem_models, public_reasons
from mars_demo.hosting.clients import is_loopback
from mars_demo.ui import build_demo, launch_options
from mars_demo.ui.page.controller import Controller
from mars_demo.ui.work.host import EngineHost

WAIT_S = 300
QUESTION = "Which planet is known as the Red Planet?"
SMALL = {"samples": 2, "max_new_tokens": 4}
PAGE_OPTIONS = [2, 0.5, 4, 0, "auto", "model", "sum", "equal", "strict", "default"]
SPACE = {"SPACE_ID": "someone/mars-demo"}


@pytest.fixture(scope="module")
def public_tmp(tmp_path_factory) -> Path:
    """The public server's temp directory, with a download folder left by a killed server."""
    folder = tmp_path_factory.mktemp("public-tmp")
    stale = folder / f"{PREFIX}killed"
    stale.mkdir()
    (stale / LOCK_NAME).write_text("999999\n")  # nobody holds its lock: its server is gone
    (stale / "x").mkdir()
    (stale / "x" / texts.DOWNLOAD_FILENAME).write_text("{}")
    return folder


@pytest.fixture(scope="module")
def public_url(tiny_models, public_tmp):
    with running_app(tiny_models, env={**SPACE, "TMPDIR": str(public_tmp)}) as url:
        yield url


def client_as(url: str, ip: str) -> Client:
    return Client(url, verbose=False, headers={"X-Forwarded-For": ip})


def config_of(url: str) -> dict:
    return httpx.get(f"{url}/config", timeout=30).json()


def props_by_id(config: dict) -> dict:
    return {c["props"].get("elem_id"): c["props"] for c in config["components"]}


# --- who is public -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "public"),
    [
        ([], {}, False),
        (["--host", "127.0.0.1"], {}, False),
        (["--host", "localhost"], {}, False),
        (["--host", "::1"], {}, False),
        (["--host", "0.0.0.0"], {}, True),
        (["--host", "192.168.1.20"], {}, True),
        (["--share"], {}, True),
        ([], {"MARS_DEMO_SHARE": "1"}, True),
        ([], {"SPACE_ID": "a/b"}, True),
        ([], {"MARS_DEMO_HOST": "0.0.0.0"}, True),
    ],
)
def test_public_mode_is_detected_from_share_host_and_space(argv, env, public):
    access = app.parse_args(argv, env=env).access
    assert access.public is public
    assert access.allow_model_switch is False
    if public:
        assert access.max_sample_tokens == 640 and access.per_client == 1
    else:
        assert access.max_sample_tokens is None and access.per_client is None


@pytest.mark.parametrize(
    ("argv", "env", "identity"),
    [
        (["--host", "0.0.0.0"], {}, "connection"),
        ([], {"SPACE_ID": "a/b"}, "Space proxy"),
        (["--share"], {}, "share tunnel"),
        (["--host", "0.0.0.0", "--trusted-proxy", "127.0.0.1"], {}, "reverse proxy"),
        (["--host", "0.0.0.0"], {"MARS_DEMO_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1"},
         "reverse proxy"),
    ],
)
def test_each_deployment_decides_who_a_client_is(argv, env, identity):
    access = app.parse_args(argv, env=env).access
    assert access.identity.name == identity
    scope = {"client": ("127.0.0.1", 1), "headers": [(b"x-forwarded-for", b"81.9.9.9")]}
    # only where a proxy of the deployment vouches for the header is it read
    assert access.client_of(scope) == ("127.0.0.1" if identity == "connection" else "81.9.9.9")


def test_the_host_names_its_models_and_its_proxies_or_is_told_what_is_wrong(capsys):
    args = app.parse_args(["--llm-name", "Tiny LLM"], env={"MARS_DEMO_NLI_NAME": "Small NLI"})
    assert args.access.model_names == {"llm": "Tiny LLM", "nli": "Small NLI"}
    with pytest.raises(SystemExit):
        app.parse_args(["--host", "0.0.0.0", "--trusted-proxy", "proxy.local"], env={})
    assert "--trusted-proxy 'proxy.local' is not an IP address or network" in (
        capsys.readouterr().err)


def test_gradios_server_name_variable_counts_as_the_host():
    space = {"GRADIO_SERVER_NAME": "0.0.0.0"}  # what a Space sets
    assert public_reasons(None, False, space) == ["--host 0.0.0.0"]
    assert public_reasons(None, False, {"GRADIO_SERVER_NAME": "127.0.0.1"}) == []
    assert app.parse_args([], env=space).access.public
    assert is_loopback(None) and not is_loopback("example.org")


def test_the_model_switch_is_opt_in_locally_and_refused_on_a_public_page(capsys):
    assert app.parse_args(["--allow-model-switch"], env={}).access.allow_model_switch
    assert app.parse_args([], env={"MARS_DEMO_ALLOW_MODEL_SWITCH": "yes"}).access.allow_model_switch
    for argv, env in ((["--allow-model-switch", "--share"], {}),
                      (["--allow-model-switch"], SPACE),
                      (["--allow-model-switch", "--host", "0.0.0.0"], {})):
        with pytest.raises(SystemExit) as stopped:
            app.parse_args(argv, env=env)
        assert stopped.value.code == 2
        assert "--allow-model-switch is for a page only you can open" in capsys.readouterr().err


def test_limits_can_be_set_and_turned_off():
    access = app.parse_args(["--max-sample-tokens", "100", "--per-client", "3"], env=SPACE).access
    assert (access.max_sample_tokens, access.per_client) == (100, 3)
    access = app.parse_args([], env={**SPACE, "MARS_DEMO_MAX_SAMPLE_TOKENS": "0",
                                     "MARS_DEMO_PER_CLIENT": "0"}).access
    assert (access.max_sample_tokens, access.per_client) == (None, None)
    with pytest.raises(SystemExit):
        app.parse_args(["--per-client", "-1"], env={})


def test_bem_is_offered_only_with_both_models_and_local_ones_on_a_public_page(tmp_path, capsys):
    bem, chunker = tmp_path / "bem", tmp_path / "chunker"
    bem.mkdir(), chunker.mkdir()
    assert check_bem_models(None, None, public=True) is False
    assert check_bem_models(str(bem), str(chunker), public=True) is True
    assert check_bem_models("org/bem", "flair/chunk-english", public=False) is True
    with pytest.raises(ValueError, match="not a local path"):
        check_bem_models("org/bem", str(chunker), public=True)
    with pytest.raises(ValueError, match="give --bem and --chunker together"):
        check_bem_models(str(bem), None, public=False)
    args = app.parse_args(["--bem", str(bem), "--chunker", str(chunker)], env=SPACE)
    assert args.access.bem and (args.settings.bem, args.settings.chunker) == (str(bem), str(chunker))
    with pytest.raises(SystemExit):
        app.parse_args(["--bem", "org/bem", "--chunker", "flair/chunk-english"], env=SPACE)
    assert "not a local path" in capsys.readouterr().err


def test_help_documents_the_new_flags_and_variables():
    help_text = app.build_parser().format_help()
    for name in ("--bem", "--chunker", "--allow-model-switch", "--max-sample-tokens",
                 "--per-client", "--trusted-proxy", "--llm-name", "--importance-name",
                 "--nli-name", "MARS_DEMO_BEM", "MARS_DEMO_CHUNKER",
                 "MARS_DEMO_ALLOW_MODEL_SWITCH", "MARS_DEMO_MAX_SAMPLE_TOKENS",
                 "MARS_DEMO_PER_CLIENT", "MARS_DEMO_TRUSTED_PROXIES", "MARS_DEMO_LLM_NAME",
                 "MARS_DEMO_IMPORTANCE_NAME", "MARS_DEMO_NLI_NAME", "--similarity",
                 "--similarity-name", "MARS_DEMO_SIMILARITY", "MARS_DEMO_SIMILARITY_NAME",
                 "--lars", "--lars-name", "MARS_DEMO_LARS", "MARS_DEMO_LARS_NAME"):
        assert name in help_text, name
    args = app.parse_args(["--similarity", "/srv/models/sts", "--similarity-name", "STS"], env={})
    assert args.settings.similarity == "/srv/models/sts"
    assert args.access.model_names == {"similarity": "STS"}
    args = app.parse_args(["--lars", "/srv/models/lars"], env={"MARS_DEMO_LARS_NAME": "LARS"})
    assert args.settings.lars == "/srv/models/lars" and args.access.model_names == {"lars": "LARS"}
    args = app.parse_args([], env={"MARS_DEMO_LARS": "/srv/lars"})
    assert args.settings.lars == "/srv/lars"
    assert app.parse_args([], env={}).settings.lars == "duygunuryldz/LARS"


# --- no model switch -------------------------------------------------------------------------------


def test_the_public_page_has_no_model_switch_and_no_handler_for_it(public_url, tiny_models):
    config = config_of(public_url)
    ids = props_by_id(config)
    assert "mars-model" not in ids and "mars-load-model" not in ids
    assert "mars-public-note" in ids
    names = [d["api_name"] for d in config["dependencies"]]
    assert "ask" in names and "switch_model" not in names
    # The old attack: join the switch's event with data [null]. There is no such event, and an
    # event number past the last one is refused.
    joined = httpx.post(
        f"{public_url}/gradio_api/queue/join",
        json={"data": [None], "fn_index": max(d["id"] for d in config["dependencies"]) + 1,
              "session_hash": uuid.uuid4().hex[:11]},
        headers={"X-Forwarded-For": "81.9.9.9"},
        timeout=30,
    )
    assert joined.status_code != 200
    # The banner names the models without the server's folders.
    banner = html.unescape(page_event(public_url, "banner")["mars-banner"])
    # a folder named by its role ("importance") by the folder above it: no "importance
    # importance" (the test's folders are .../tiny-modelsN/llm, .../importance, .../nli)
    above = Path(tiny_models["llm"]).parent.name
    assert (f"Models: LLM <b>{above}</b> · importance <b>{above}</b> · NLI <b>{above}</b>"
            in banner)
    assert str(Path(tiny_models["llm"]).parent) not in banner


def test_a_local_page_has_the_switch_only_with_the_flag(app_url):
    ids = props_by_id(config_of(app_url))
    assert "mars-model" not in ids  # the shared app.py runs without --allow-model-switch


def test_the_switch_handler_refuses_when_switching_is_off():
    engine = FakeEngine()
    controller = Controller(EngineHost(engine))  # the default: no switch
    (update,) = list(controller.switch_model("cpu-small"))
    assert "Switching models is off" in update["switch_status"] and engine.switched == []


def test_an_allowed_switch_refuses_values_off_its_list_without_naming_server_folders():
    engine = FakeEngine()
    engine.settings = engine.settings.replace(llm="/srv/secret-models/tiny-llm")
    demo = build_demo(engine, access=Access(allow_model_switch=True))
    demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True,
                **launch_options(demo))
    try:
        url = demo.local_url.rstrip("/")
        for value in (None, "/etc", "falcon-7b-instruct-but-not-a-preset"):
            try:
                shown = json.dumps(page_event(url, "switch_model", [value]))
            except PageEventError as err:  # Gradio's own refusal of a value off the list
                shown = str(err)
            assert "/srv/secret-models" not in shown, shown
            assert engine.switched == [], value
        back = page_event(url, "switch_model", ["command-line"])  # the model app.py started with
        assert "Loaded" in back["mars-switch-status"]
        assert [s.llm for s in engine.switched] == ["/srv/secret-models/tiny-llm"]
    finally:
        demo.close()


# --- BEM, work per question --------------------------------------------------------------------


def test_bem_is_not_offered_and_the_api_and_the_page_refuse_it(public_url):
    props = props_by_id(config_of(public_url))
    values = [choice[1] for choice in props["mars-importance-method"]["choices"]]
    assert values == ["model", "token"]
    with pytest.raises(AppError, match="importance_method bem is not available on this server"):
        client_as(public_url, "81.1.0.1").predict(
            QUESTION, **SMALL, importance_method="bem", api_name="/analyze")
    options = list(PAGE_OPTIONS)
    options[5] = "bem"
    try:  # Gradio's dropdown refuses a value off its list; our handler would refuse it too
        shown = page_event(public_url, "ask", [QUESTION, "mars", *options])["mars-error"]
    except PageEventError as err:
        shown = str(err)
    assert "bem" in shown and "not in the list of choices" in shown or "not available" in shown


def test_bem_is_offered_when_the_host_set_it_up():
    props = props_by_id(build_demo(FakeEngine(), access=Access(bem=True)).get_config_file())
    assert [c[1] for c in props["mars-importance-method"]["choices"]] == ["model", "token", "bem"]
    controller = Controller(EngineHost(FakeEngine()))
    with pytest.raises(ValueError, match="not available"):
        controller.settings_from(*PAGE_OPTIONS[:5], "bem", *PAGE_OPTIONS[6:])


def test_the_work_of_one_question_is_capped(public_url):
    client = client_as(public_url, "81.1.0.2")
    with pytest.raises(AppError) as refused:
        client.predict(QUESTION, samples=20, max_new_tokens=512, api_name="/analyze")
    assert "20 x 512 = 10240; this public page allows at most 640" in str(refused.value)
    options = list(PAGE_OPTIONS)
    options[0], options[2] = 20, 512
    shown = html.unescape(page_event(public_url, "ask", [QUESTION, "mars", *options],
                                     )["mars-error"])
    assert "allows at most 640" in shown
    assert client.predict(QUESTION, **SMALL, api_name="/analyze")["question"] == QUESTION


def test_a_number_too_large_for_a_float_is_refused_without_echoing_it(public_url):
    with pytest.raises(AppError) as refused:
        client_as(public_url, "81.1.0.3").predict(QUESTION, temperature=10**400, **SMALL,
                                                  api_name="/analyze")
    message = str(refused.value)
    assert "temperature must be a number from 0.05 to 2.0" in message
    assert "integer of about 401 digits" in message and not re.search(r"\d{40}", message)


def test_every_api_parameter_is_described(app_url):
    info = httpx.get(f"{app_url}/gradio_api/info", timeout=30).json()["named_endpoints"]
    for endpoint in ("/analyze", "/score"):
        for parameter in info[endpoint]["parameters"]:
            assert parameter["python_type"]["description"].strip(), (endpoint, parameter)
    samples = next(p for p in info["/analyze"]["parameters"] if p["parameter_name"] == "samples")
    assert "allowed: 1 to 20" in samples["python_type"]["description"]


# --- uploads -----------------------------------------------------------------------------------


def test_uploads_over_one_megabyte_are_refused(public_url):
    def upload(size: int) -> httpx.Response:
        return httpx.post(f"{public_url}/gradio_api/upload",
                          files={"files": ("report.json", b"0" * size, "application/json")},
                          timeout=60)

    too_big = upload(2 * 1024 * 1024)
    assert too_big.status_code == 413, too_big.text
    assert upload(300 * 1024).status_code == 200  # e.g. the evaluation view's report.json


# --- one client cannot fill the queue -------------------------------------------------------------


def test_one_client_with_many_parallel_requests_cannot_fill_the_queue(public_url):
    attempts = 8
    greedy = [client_as(public_url, "81.2.0.1") for _ in range(attempts)]
    other = client_as(public_url, "81.2.0.2")
    start = threading.Barrier(attempts + 1, timeout=WAIT_S)

    def send(client: Client, question: str):
        start.wait()
        try:  # long enough (5 x 64 tokens) that all joins arrive while the first one runs
            job = client.submit(question, samples=5, max_new_tokens=64, api_name="/analyze")
            return job.result(timeout=WAIT_S)
        except Exception as exc:  # noqa: BLE001  (the refusal is what we look at)
            return exc

    with ThreadPoolExecutor(max_workers=attempts) as pool:
        futures = [pool.submit(send, c, f"Question {i}: which planet is red?")
                   for i, c in enumerate(greedy)]
        start.wait()
        time.sleep(1.0)  # the flood is in; now someone else asks
        theirs = other.predict(QUESTION, **SMALL, api_name="/analyze")
        outcomes = [f.result(timeout=WAIT_S) for f in futures]
    served = [o for o in outcomes if isinstance(o, dict)]
    refused = [o for o in outcomes if not isinstance(o, dict)]
    assert len(served) == 1, outcomes
    assert len(refused) == attempts - 1
    for exc in refused:  # gradio_client raises httpx's error; the body says why
        response = getattr(exc, "response", None)
        assert response is not None and response.status_code == 429, repr(exc)
        assert texts.ACCESS_ONE_AT_A_TIME == response.json()["detail"]
    assert theirs["question"] == QUESTION
    # Once its analysis is done, the same client may ask again.
    assert greedy[0].predict(QUESTION, **SMALL, api_name="/analyze")["question"] == QUESTION


# --- download folders (tests/test_stop.py: what a server leaves when it stops) --------------


def test_the_public_server_cleaned_up_the_killed_servers_folder(public_url, public_tmp):
    assert not (public_tmp / f"{PREFIX}killed").exists()
    assert len(list(public_tmp.glob(PREFIX + "*"))) == 1  # its own


# --- the queue, seen in a real browser ----------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_a_waiting_visitor_sees_the_queue_position_and_a_second_tab_is_refused(
    public_url, width, tmp_path_factory
):
    from playwright import sync_api
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    shots = Path(os.environ.get("MARS_DEMO_ARTIFACTS") or tmp_path_factory.mktemp("public-shots"))
    shots.mkdir(parents=True, exist_ok=True)

    def open_as(browser, ip: str):
        context = browser.new_context(viewport={"width": width, "height": 900},
                                      extra_http_headers={"X-Forwarded-For": ip})
        page = context.new_page()
        page.goto(public_url)
        page.wait_for_selector("#mars-banner")
        page.wait_for_function(
            "() => document.querySelector('#mars-banner').innerText.includes('Models:')"
            " && !document.querySelector('#mars-banner').innerText.includes('Loading')",
            timeout=WAIT_S * 1000)
        return page

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            first = open_as(browser, f"81.3.{width % 256}.1")
            waiting = open_as(browser, f"81.3.{width % 256}.2")
            second_tab = open_as(browser, f"81.3.{width % 256}.1")  # the first visitor again
            assert waiting.locator("#mars-model").count() == 0  # no switch on a public page
            first.locator("#mars-settings").get_by_text("Settings", exact=True).click()
            first.fill("#mars-max-new-tokens input[type=number]", "128")  # 5 x 128: a long one
            first.press("#mars-max-new-tokens input[type=number]", "Enter")
            first.fill("#mars-question textarea", "Which planet is known as the Red Planet?")
            first.click("#mars-ask")
            first.wait_for_selector("#mars-answer .mars-streaming", timeout=WAIT_S * 1000)

            waiting.fill("#mars-question textarea", "What is the capital city of Japan?")
            waiting.click("#mars-ask")
            # Gradio's "queue: 1/1 | 2.9/0.4s", in words over the answer box (ui/assets/page.js)
            status = waiting.locator("#mars-queue-line .mars-queue-line")
            status.get_by_text("In line: number 1 of 1 waiting").wait_for(timeout=WAIT_S * 1000)
            assert status.is_visible() and "Waited" in status.inner_text()
            assert not waiting.get_by_text(re.compile(r"queue: \d")).is_visible()  # not cryptic
            box = status.bounding_box()
            assert box and 0 <= box["x"] and box["x"] + box["width"] <= width
            status.scroll_into_view_if_needed()
            waiting.screenshot(path=str(shots / f"public-queued-{width}.png"))

            second_tab.fill("#mars-question textarea", "And another one?")
            second_tab.click("#mars-ask")
            toast = second_tab.get_by_text(texts.ACCESS_ONE_AT_A_TIME)
            toast.wait_for(timeout=WAIT_S * 1000)  # Gradio's error toast with our message
            assert toast.is_visible()
            second_tab.wait_for_timeout(500)  # the toast slides in
            second_tab.screenshot(path=str(shots / f"public-refused-{width}.png"))

            # its verdict (an example kept on disk shows a note, not a 'done' progress line)
            waiting.wait_for_selector("#mars-verdict .mars-verdict[data-level]",
                                      timeout=WAIT_S * 1000)
            assert "capital city of Japan" in waiting.inner_text("#mars-answer .mars-question")
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_the_settings_say_the_cap_and_no_plot_toolbar_is_shown(public_url, width,
                                                                    tmp_path_factory):
    from playwright import sync_api
    from test_browser import CHROMIUM, CHROMIUM_ARGS

    shots = Path(os.environ.get("MARS_DEMO_ARTIFACTS") or tmp_path_factory.mktemp("public-shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(
                viewport={"width": width, "height": 900},
                extra_http_headers={"X-Forwarded-For": f"81.4.0.{width % 256}"})
            page = context.new_page()
            page.goto(public_url)
            page.wait_for_selector("#mars-banner")
            page.locator("#mars-settings").get_by_text("Settings", exact=True).click()
            note = page.locator("#mars-work-note")
            assert "≤ 640: now 5 × 64 = 320" in note.inner_text()
            page.fill("#mars-max-new-tokens input[type=number]", "512")
            page.press("#mars-max-new-tokens input[type=number]", "Enter")
            note.get_by_text("5 × 512 = 2560 is over this page's 640").wait_for(timeout=10_000)
            note.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"public-work-cap-{width}.png"))
            page.fill("#mars-max-new-tokens input[type=number]", "4")
            page.press("#mars-max-new-tokens input[type=number]", "Enter")
            page.fill("#mars-question textarea", QUESTION)
            page.click("#mars-ask")
            page.wait_for_selector("#mars-uncertainty-plot .main-svg", timeout=WAIT_S * 1000)
            plot = page.locator("#mars-uncertainty-plot")
            plot.scroll_into_view_if_needed()
            plot.hover()
            # Plotly's toolbar is not for visitors: shown at no width, hovered or not
            shown = page.evaluate("() => [...document.querySelectorAll("
                                  "'#mars-uncertainty-plot .modebar-btn')]"
                                  ".filter(b => b.getClientRects().length > 0).length")
            assert shown == 0, shown
            # each measure on its fixed scale, the doubt in this answer from 0, with its numbers
            ticks = page.evaluate("() => [...document.querySelectorAll("
                                  "'#mars-uncertainty-plot .xtick text')].map(t => t.textContent)")
            assert "0" in ticks, ticks
            page.screenshot(path=str(shots / f"public-uncertainty-plot-{width}.png"))
        finally:
            browser.close()


# --- the per-client limit holds whatever door a call comes through --------------------------------


def test_the_client_is_the_rightmost_address_the_proxy_added():
    from mars_demo.hosting.clients import ClientIdentity

    space = Access(public=True, per_client=1, identity=ClientIdentity.for_deployment(space=True))
    scope = {"headers": [(b"x-forwarded-for", b"1.2.3.4, 81.9.8.7")], "client": ("10.0.0.1", 1)}
    assert space.client_of(scope) == "81.9.8.7"  # "1.2.3.4" is whatever the client sent
    assert space.client_of({"headers": [], "client": ("10.0.0.1", 1)}) == "10.0.0.1"
    assert Access().client_of(scope) == "10.0.0.1"  # not behind a proxy: the connection


def _analyze_fn_index(url: str) -> int:
    config = config_of(url)
    return next(i for i, d in enumerate(config["dependencies"]) if d["api_name"] == "analyze")


def _api_data(url: str, question: str) -> list:
    """/analyze's data in parameter order: the question, 5 x 64 tokens, the defaults."""
    info = httpx.get(f"{url}/gradio_api/info", timeout=30).json()["named_endpoints"]
    parameters = info["/analyze"]["parameters"]
    values = {"question": question, "samples": 5, "max_new_tokens": 64}
    return [values.get(p["parameter_name"], p.get("parameter_default")) for p in parameters]


@pytest.mark.parametrize("door", ["call", "fn_index as a string"])
def test_a_second_analysis_of_one_client_is_refused_through_every_door(public_url, door):
    ip = f"81.5.{len(door)}.1"
    headers = {"X-Forwarded-For": ip}
    data = _api_data(public_url, "a second question?")  # ready before the first one starts
    fn_index = _analyze_fn_index(public_url)
    # the longest analysis the page allows (5 x 128 tokens): it still runs when the second comes
    first = client_as(public_url, ip).submit(QUESTION, samples=5, max_new_tokens=128,
                                             api_name="/analyze")
    try:
        deadline = time.monotonic() + WAIT_S
        while first.status().code.name not in ("PROCESSING", "ITERATING") and not first.done():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not first.done()
        if door == "call":
            second = httpx.post(f"{public_url}/gradio_api/call/analyze", json={"data": data},
                                headers=headers, timeout=60)
        else:
            second = httpx.post(f"{public_url}/gradio_api/queue/join", headers=headers,
                                timeout=60, json={"data": data, "session_hash": uuid.uuid4().hex,
                                                  "fn_index": str(fn_index)})
        assert second.status_code == 429, second.text
        assert second.json()["detail"] == texts.ACCESS_ONE_AT_A_TIME
    finally:
        first.result(timeout=WAIT_S)


def test_the_direct_run_route_that_skips_the_queue_is_closed(public_url):
    response = httpx.post(f"{public_url}/gradio_api/run/analyze",
                          json={"data": _api_data(public_url, QUESTION)}, timeout=60)
    assert response.status_code != 200, response.text[:300]


def test_uploads_are_one_file_per_request_and_a_few_per_hour(public_url):
    ip = "81.6.0.1"
    files = [("files", (f"r{i}.json", b"0" * 600_000, "application/json")) for i in range(2)]
    two = httpx.post(f"{public_url}/gradio_api/upload", files=files,
                     headers={"X-Forwarded-For": ip}, timeout=60)
    assert two.status_code == 413, two.text  # two files of 600 kB: each fits, both do not
    codes = [httpx.post(f"{public_url}/gradio_api/upload",
                        files={"files": ("r.json", b"{}", "application/json")},
                        headers={"X-Forwarded-For": ip}, timeout=60).status_code
             for _ in range(31)]
    assert codes[:30] == [200] * 30 and codes[30] == 429, codes
    other = httpx.post(f"{public_url}/gradio_api/upload",
                       files={"files": ("r.json", b"{}", "application/json")},
                       headers={"X-Forwarded-For": "81.6.0.2"}, timeout=60)
    assert other.status_code == 200  # another visitor is not affected


def test_the_public_api_and_download_name_no_server_paths(public_url, tiny_models):
    result = client_as(public_url, "81.7.0.1").predict(QUESTION, **SMALL, api_name="/analyze")
    text = json.dumps(result)
    for path in tiny_models.values():
        assert str(Path(path).parent) not in text
    assert result["settings"]["llm"] == Path(result["settings"]["llm"]).name
    for key in ("llm_endpoint", "bem", "chunker"):
        assert key not in result["settings"]


def test_the_work_cap_counts_the_recipes_answer_length():
    access = Access(public=True, max_sample_tokens=640)
    from mars_demo.settings import OptionError, Settings

    access.check_work(Settings(samples=5, max_new_tokens=32))  # 160: allowed
    with pytest.raises(OptionError, match="5 x 128 = 640|x 128"):
        access.check_work(Settings(samples=6, max_new_tokens=32, recipe="paper-code"))


def test_the_client_modules_examples_hold():
    """The worked examples in the docstrings of who a client is (the allowance's refill, host
    names, web origins) run as tests."""
    import doctest

    from mars_demo.hosting import clients

    result = doctest.testmod(clients)
    assert result.attempted >= 8 and result.failed == 0, result
