"""Serve the MARS Demo page: ``python app.py [--llm ID_OR_DIR] [--host H] [--port P] [--share]``.

Every option can also come from the environment (MARS_DEMO_LLM, MARS_DEMO_IMPORTANCE, MARS_DEMO_NLI,
MARS_DEMO_LLM_ENDPOINT, MARS_DEMO_LLM_MODEL, MARS_DEMO_LLM_API_KEY_ENV,
MARS_DEMO_BEM, MARS_DEMO_CHUNKER, MARS_DEMO_HOST, MARS_DEMO_PORT, MARS_DEMO_SHARE,
MARS_DEMO_ALLOW_MODEL_SWITCH, MARS_DEMO_MAX_SAMPLE_TOKENS, MARS_DEMO_PER_CLIENT,
MARS_DEMO_TRUSTED_PROXIES, MARS_DEMO_LLM_NAME, MARS_DEMO_IMPORTANCE_NAME, MARS_DEMO_NLI_NAME,
MARS_DEMO_METHODS, MARS_DEMO_SIMILARITY, MARS_DEMO_SIMILARITY_NAME, MARS_DEMO_LARS, MARS_DEMO_LARS_NAME,
MARS_DEMO_CALIBRATION, MARS_DEMO_RUNS, MARS_DEMO_LOAD_IN_4BIT, MARS_DEMO_IPV6_PREFIX,
MARS_DEMO_HEADER_TIMEOUT, MARS_DEMO_CONNECTIONS_PER_CLIENT, MARS_DEMO_ALLOWED_ORIGINS); a flag
wins over its variable.

``--calibration FILE`` (made by ``python -m mars_demo evaluate --calibrate RUN_DIR``) shows each
answer's chance of being right; a calibration of other models than the ones named here is
refused before the page is served. ``--runs DIR`` offers the evaluation runs under DIR in the
page's Evaluation view. The models load once, in a background thread, so the page opens at once and says
when they are ready; on a ZeroGPU Space (SPACES_ZERO_GPU) they load before the page serves, in the
main thread, and each analysis gets a GPU through @spaces.GPU (mars_demo/zerogpu.py).

The page is public with --share, a --host that is not a loopback address, or on a Hugging Face
Space (SPACE_ID set): then nobody can switch models, and each question and each client is limited
(see mars_demo/access.py; who a client is depends on the deployment: the connection, the Space's
proxy, the share tunnel or the host's own reverse proxy, --trusted-proxy). On a page only you can
open, --allow-model-switch shows the switch.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from mars_demo import texts, zerogpu
from mars_demo.methods import FREE, METHODS, OWN_MODELS, is_free, parse_methods
from mars_demo.options import OPTIONS, SERVER
from mars_demo.settings import DEFAULT_IMPORTANCE, Settings
from mars_demo.access import (
    PUBLIC_MAX_SAMPLE_TOKENS,
    PUBLIC_PER_CLIENT,
    Access,
    ClientIdentity,
    add_server_flags,
    check_bem_models,
    public_access,
    public_reasons,
    server_settings,
)

TRUE = ("1", "true", "yes", "on")
#: every model a page names, with its name in the help: the three every analysis runs, then
#: the optional ones (mars_demo.options.OWN_MODELS)
MODEL_LABELS = {"llm": "LLM", "importance": "importance", "nli": "NLI",
                **{m.field: m.label for m in OWN_MODELS}}
FALSE = ("0", "false", "no", "off", "")


def env_bool(env: Mapping[str, str], name: str) -> bool:
    """Parse a boolean variable strictly: "0", "false" and "" are False, typos are errors."""
    value = env.get(name, "").strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(texts.APP_BAD_BOOL.format(name=name, value=env[name]))


def port_number(name: str, value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(texts.APP_BAD_PORT.format(name=name, value=value))
    return port


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The flags, with defaults from ``env``; a bad variable is reported by ``parse_args``."""
    parser = argparse.ArgumentParser(prog="python app.py", description=texts.APP_DESCRIPTION)
    parser.add_argument("--llm", default=env.get("MARS_DEMO_LLM") or None, help=texts.APP_HELP_LLM)
    parser.add_argument(
        "--importance",
        default=env.get("MARS_DEMO_IMPORTANCE") or DEFAULT_IMPORTANCE,
        help=texts.APP_HELP_IMPORTANCE,
    )
    parser.add_argument("--nli", default=env.get("MARS_DEMO_NLI") or None, help=texts.APP_HELP_NLI)
    for model in OWN_MODELS:  # the models only some methods run (SAR's similarity, LARS...)
        variable = f"MARS_DEMO_{model.field.upper()}"
        parser.add_argument(
            model.option, default=env.get(variable) or None,
            help=OPTIONS[model.field].describe() + f" (variable {variable})",
        )
    parser.add_argument(
        "--methods", default=env.get("MARS_DEMO_METHODS") or None,
        help="the uncertainty methods every analysis on this page computes beside the three "
        "measures, ids separated by commas (default: the free ones, mars_demo.methods.FREE); an "
        "opt-in one (" + ", ".join(m for m in METHODS if not is_free(METHODS[m]))
        + ") costs an extra pass or model per question, and API callers may then ask for it "
        "too (variable MARS_DEMO_METHODS)",
    )
    parser.add_argument("--bem", default=env.get("MARS_DEMO_BEM") or None, help=texts.APP_HELP_BEM)
    parser.add_argument(
        "--chunker", default=env.get("MARS_DEMO_CHUNKER") or None, help=texts.APP_HELP_CHUNKER
    )
    # The LLM behind an OpenAI-compatible server (vLLM, llama.cpp...): then --llm names only its
    # tokenizer (chat template); help texts come from the one option schema.
    for name in ("llm_endpoint", "llm_model", "llm_api_key_env", "llm_timeout"):
        parser.add_argument(
            OPTIONS[name].flag,
            default=env.get("MARS_DEMO_" + name.upper()) or None,
            type=float if OPTIONS[name].kind is float else None,
            help=OPTIONS[name].describe() + f" (variable MARS_DEMO_{name.upper()})",
        )
    parser.add_argument(
        "--4bit", dest="load_in_4bit", action=argparse.BooleanOptionalAction, default=None,
        help=texts.APP_HELP_4BIT,
    )
    parser.add_argument(
        "--host", default=env.get("MARS_DEMO_HOST") or None, help=texts.APP_HELP_HOST
    )
    parser.add_argument(
        "--port",
        type=lambda value: port_number("--port", value),
        default=None,
        help=texts.APP_HELP_PORT,
    )
    parser.add_argument(
        "--share", action=argparse.BooleanOptionalAction, default=None, help=texts.APP_HELP_SHARE
    )
    parser.add_argument(
        "--allow-model-switch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=texts.APP_HELP_ALLOW_SWITCH,
    )
    parser.add_argument(
        "--max-sample-tokens",
        type=lambda value: count("--max-sample-tokens", value),
        default=None,
        help=texts.APP_HELP_MAX_SAMPLE_TOKENS.replace("%(default)s", str(PUBLIC_MAX_SAMPLE_TOKENS)),
    )
    parser.add_argument(
        "--per-client",
        type=lambda value: count("--per-client", value),
        default=None,
        help=texts.APP_HELP_PER_CLIENT.replace("%(default)s", str(PUBLIC_PER_CLIENT)),
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=None,
        metavar="ADDRESS",
        help=texts.APP_HELP_TRUSTED_PROXY,
    )
    add_server_flags(parser)  # --ipv6-prefix, --header-timeout... (mars_demo.options)
    for model, label in MODEL_LABELS.items():
        parser.add_argument(
            f"--{model.replace('_', '-')}-name",
            default=env.get(f"MARS_DEMO_{model.upper()}_NAME") or None,
            metavar="NAME",
            help=texts.APP_HELP_MODEL_NAME.format(model=label, variable=model.upper()),
        )
    parser.add_argument(
        "--calibration",
        default=env.get("MARS_DEMO_CALIBRATION") or None,
        metavar="FILE",
        help=texts.APP_HELP_CALIBRATION,
    )
    parser.add_argument(
        "--runs",
        default=env.get("MARS_DEMO_RUNS") or None,
        metavar="DIR",
        help="a folder of evaluation runs (python -m mars_demo evaluate --out DIR/NAME) that "
        "the page's Evaluation view offers [env MARS_DEMO_RUNS]",
    )
    return parser


def check_calibration(calibration, info: Mapping[str, object], settings: Settings) -> str | None:
    """Refuse (CalibrationError) a calibration made for other models than ``info`` (the
    engine's ``describe()``, known before any model loads). An LLM behind a server without
    --llm-model is named only once the server answers: then its check waits for each answer
    (the page shows no chance for another model's answers) and the returned note says so."""
    models = {"llm": info.get("llm"), "importance": info.get("importance"), "nli": info.get("nli")}
    # an optional model (SAR's similarity model...): checked where the calibration's
    # uncertainty reads one (it recorded it)
    models.update({m.field: getattr(settings, m.field) for m in OWN_MODELS})
    note = None
    if settings.llm_endpoint:
        if settings.llm_model:
            models["llm"] = settings.llm_model
        else:
            models["llm"] = calibration.models.get("llm")
            note = texts.APP_CALIBRATION_LLM_LATER
    calibration.check_models(models)
    return note


def count(name: str, value: str) -> int:
    """A whole number >= 0 (0 = no limit)."""
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(texts.APP_BAD_COUNT.format(name=name, value=value))
    return number


def access_of(args: argparse.Namespace, env: Mapping[str, str]) -> Access:
    """What visitors may do, from the flags (raises ValueError for a forbidden combination)."""
    reasons = public_reasons(args.host, args.share, env)
    bem = check_bem_models(args.bem, args.chunker, public=bool(reasons))
    names = {model: getattr(args, f"{model}_name") for model in MODEL_LABELS}
    names = {model: name.strip() for model, name in names.items() if name and name.strip()}
    proxies = args.trusted_proxy
    if proxies is None:
        proxies = [p for p in env.get("MARS_DEMO_TRUSTED_PROXIES", "").split(",") if p.strip()]
    server = server_settings({name: getattr(args, name) for name in SERVER}, env)
    identity = ClientIdentity.for_deployment(
        space=bool(env.get("SPACE_ID")), share=args.share, trusted_proxies=proxies,
        ipv6_prefix=server.pop("ipv6_prefix"))
    offered = frozenset(FREE) | frozenset(args.settings.method_ids)  # the host's methods too
    if not reasons:
        return Access(allow_model_switch=args.allow_model_switch, bem=bem, model_names=names,
                      methods=offered)
    if args.allow_model_switch:
        raise ValueError(texts.ACCESS_SWITCH_PUBLIC.format(reasons=", ".join(reasons)))
    return public_access(
        bem=bem,
        max_sample_tokens=args.max_sample_tokens,
        per_client=args.per_client,
        identity=identity,
        model_names=names,
        methods=offered,
        **server,
    )


def parse_args(
    argv: Sequence[str] | None = None, env: Mapping[str, str] = os.environ
) -> argparse.Namespace:
    parser = build_parser(env)
    args = parser.parse_args(argv)
    try:
        if args.share is None:
            args.share = env_bool(env, "MARS_DEMO_SHARE")
        if args.port is None and env.get("MARS_DEMO_PORT"):
            args.port = port_number("MARS_DEMO_PORT", env["MARS_DEMO_PORT"])
        if args.allow_model_switch is None:
            args.allow_model_switch = env_bool(env, "MARS_DEMO_ALLOW_MODEL_SWITCH")
        if args.load_in_4bit is None and env.get("MARS_DEMO_LOAD_IN_4BIT", "").strip():
            args.load_in_4bit = env_bool(env, "MARS_DEMO_LOAD_IN_4BIT")
        if args.load_in_4bit is None and zerogpu.requested(env):
            # A ZeroGPU slice (48 GB and more) holds the 7B unquantized (bf16, about 15 GB), and
            # bitsandbytes' 4-bit there is unverified (docs/zerogpu.md): --4bit opts in.
            args.load_in_4bit = False
        for name in ("max_sample_tokens", "per_client"):
            variable = "MARS_DEMO_" + name.upper()
            if getattr(args, name) is None:
                default = PUBLIC_MAX_SAMPLE_TOKENS if name == "max_sample_tokens" else PUBLIC_PER_CLIENT
                raw = env.get(variable, "").strip()
                setattr(args, name, count(variable, raw) if raw else default)
        models = {"bem": args.bem, "chunker": args.chunker,
                  **{m.field: getattr(args, m.field) for m in OWN_MODELS}}
        args.settings = Settings(
            llm=args.llm,
            importance=args.importance,
            nli=args.nli,
            llm_endpoint=args.llm_endpoint,
            llm_model=args.llm_model,
            llm_api_key_env=args.llm_api_key_env,
            load_in_4bit=args.load_in_4bit,
            **({"llm_timeout": args.llm_timeout} if args.llm_timeout is not None else {}),
            **{name: value for name, value in models.items() if value},
            **({"methods": parse_methods(args.methods)} if args.methods else {}),
        )
        args.access = access_of(args, env)
        args.calibration_data = None
        if args.calibration:
            from mars_demo.evaluation.calibration import load

            args.calibration_data = load(args.calibration)  # CalibrationError is a ValueError
        if args.runs and not os.path.isdir(args.runs):
            raise ValueError(f"--runs {args.runs}: no such folder")
    except (ValueError, argparse.ArgumentTypeError) as err:  # OptionError is a ValueError
        parser.error(str(err))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    # On a ZeroGPU Space: imports `spaces` before anything touches CUDA (mars_demo/zerogpu.py).
    zero_gpu = zerogpu.active()

    from mars_demo.engine import Engine
    from mars_demo.ui import build_demo, launch_options
    from mars_demo.downloads import cleanup_stale_downloads, exit_on_sigterm

    access = args.access
    if access.public:
        logging.getLogger("mars_demo.app").info(
            texts.APP_PUBLIC_LOG.format(
                reasons=", ".join(public_reasons(args.host, args.share, os.environ)),
                limit=access.max_sample_tokens or "unlimited",
                per_client=access.per_client or "unlimited",
                identity=access.identity.name,
            )
        )
    cleanup_stale_downloads()  # folders of servers that were killed
    exit_on_sigterm()  # a stop removes this server's download folder too
    engine = Engine(args.settings)
    if args.calibration_data is not None:  # before anything loads or serves
        from mars_demo.evaluation.calibration import CalibrationError

        try:
            note = check_calibration(args.calibration_data, engine.describe(), args.settings)
        except CalibrationError as err:
            print(f"python app.py: error: "
                  f"{texts.APP_CALIBRATION_MODELS.format(path=args.calibration, error=err)}",
                  file=sys.stderr)
            return 2
        if note:
            logging.getLogger("mars_demo.app").warning(note)
        logging.getLogger("mars_demo.app").info(
            "calibration: %s", args.calibration_data.describe())
    # Loads the models in the background while the page opens; on ZeroGPU first, in this (the
    # main) thread, where `spaces` emulates CUDA: models must be on "cuda" before the launch.
    if zero_gpu:
        logging.getLogger("mars_demo.app").info(texts.APP_ZEROGPU_LOG)
    from mars_demo.ui import methods_panel

    # the run whose answers the "Compared with other methods" panel places each value among
    methods_run = methods_panel.load_reference(
        *methods_panel.reference_folder(args.calibration, args.runs))
    if methods_run.run is not None:
        logging.getLogger("mars_demo.app").info(
            "methods panel: placing values among the %d answers of run %s",
            methods_run.run.n, methods_run.run.name)
    elif methods_run.note:
        logging.getLogger("mars_demo.app").warning("methods panel: %s", methods_run.note)
    demo = build_demo(engine, access=access, calibration=args.calibration_data,
                      runs_dir=args.runs, load_here=zero_gpu, methods_run=methods_run)
    demo.launch(
        server_name=args.host, server_port=args.port, share=args.share, **launch_options(demo)
    )


if __name__ == "__main__":
    sys.exit(main())
