"""Serve the MARS Demo page: the launch logic behind ``python app.py`` (the Space's entry point).

``python app.py [--llm ID_OR_DIR] [--host H] [--port P] [--share]``. The flags come from the
option schema (:mod:`mars_demo.options`), as the CLI's do: the model options, ``--methods`` and
:data:`~mars_demo.options.SERVER_OPTIONS`. Each can also come from its environment variable,
``MARS_DEMO_`` + the option's name in capitals (MARS_DEMO_LLM, MARS_DEMO_PORT, ...; the trusted
proxies: MARS_DEMO_TRUSTED_PROXIES), named in ``--help``; a flag wins over its variable.

``--calibration FILE`` (made by ``python -m mars_demo evaluate calibrate RUN_DIR``) shows each
answer's chance of being right; a calibration of other models than the ones named here is
refused before the page is served. ``--runs DIR`` offers the evaluation runs under DIR in the
page's Evaluation view. The models load once, in a background thread, so the page opens at once
and says when they are ready; on a ZeroGPU Space (SPACES_ZERO_GPU) they load before the page
serves, in the main thread, and each analysis gets a GPU through @spaces.GPU
(mars_demo/hosting/zerogpu.py).

The page is public with --share, a --host that is not a loopback address, or on a Hugging Face
Space (SPACE_ID set): then nobody can switch models, and each question and each client is limited
(see mars_demo/hosting/access.py; who a client is depends on the deployment: the connection, the Space's
proxy, the share tunnel or the host's own reverse proxy, --trusted-proxy). On a page only you can
open, --allow-model-switch shows the switch.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from mars_demo import texts
from mars_demo.flags import add_llm_help, add_option
from mars_demo.hosting import zerogpu
from mars_demo.hosting.access import (
    PUBLIC_MAX_SAMPLE_TOKENS,
    PUBLIC_PER_CLIENT,
    Access,
    check_bem_models,
    public_access,
    public_reasons,
)
from mars_demo.hosting.clients import ClientIdentity, web_origin
from mars_demo.methods import FREE, OWN_MODELS, parse_methods
from mars_demo.models.backends import backend_for
from mars_demo.options import MODEL_LABELS, MODEL_OPTIONS, OPTIONS, SERVER_OPTIONS, Option
from mars_demo.settings import Settings

#: The page's flags, in --help's order: the models (the CLI's), the methods every analysis
#: computes, then the server's own (mars_demo.options.SERVER_OPTIONS).
FLAGS: tuple[Option, ...] = (*MODEL_OPTIONS, OPTIONS["methods"], *SERVER_OPTIONS)
#: what the page adds to a flag's help from the schema
PAGE_NOTES = {
    "bem": "; the page offers BEM only when --bem and --chunker are both given, and a public "
           "page only local folders",
    "chunker": "; a .pt file works too, and a public page takes only local ones",
    "methods": "; every analysis of this page computes them, and API callers may then ask for "
               "an opt-in one too (default here: the free ones, mars_demo.methods.FREE)",
}


def build_parser() -> argparse.ArgumentParser:
    """The flags of :data:`FLAGS`, from the option schema as the CLI's are; each absent flag is
    None, for its environment variable (:func:`parse_args`)."""
    parser = argparse.ArgumentParser(prog="python app.py", description=texts.APP_DESCRIPTION)
    for opt in FLAGS:
        add_option(parser, opt, keep_default=False, variable=True)
        if opt.name in PAGE_NOTES:
            action = parser._actions[-1]
            cut = action.help.index(" [env")
            action.help = action.help[:cut] + PAGE_NOTES[opt.name] + action.help[cut:]
    add_llm_help(parser)
    return parser


def from_environment(args: argparse.Namespace, env: Mapping[str, str]) -> None:
    """Fill each flag not given from its variable (an empty one counts as not set), a server
    option then from the schema's default. A model option neither flag nor variable gives stays
    None: :class:`Settings` has its default, and BEM's two are offered only where the host gave
    them. Raises OptionError naming the variable of a bad value."""
    for opt in FLAGS:
        if getattr(args, opt.name) is not None:
            continue
        raw = env.get(opt.variable, "")
        value = opt.parse(raw, opt.variable) if raw.strip() else None
        if value is None and opt.stage == "server":
            value = opt.default
        setattr(args, opt.name, value)


def check_calibration(calibration, info: Mapping[str, object], settings: Settings) -> str | None:
    """Refuse (CalibrationError) a calibration made for other models than ``info`` (the
    engine's ``describe()``, known before any model loads) and ``settings`` name; the LLM by
    the id its backend knows then. An LLM behind a server without --llm-model is named only
    once the server answers: then its check waits for each answer (the page shows no chance
    for another model's answers) and the returned note says so."""
    llm = backend_for(settings).model_name(settings, info.get("device") == "cuda")
    models = {"llm": llm, "importance": info.get("importance"), "nli": info.get("nli")}
    # an optional model (SAR's similarity model...): checked where the calibration's
    # uncertainty reads one (it recorded it)
    models.update({m.field: getattr(settings, m.field) for m in OWN_MODELS})
    note = None
    if llm is None:  # the model is named once it loads (a server asked without --llm-model)
        models["llm"] = calibration.models.get("llm")
        note = texts.APP_CALIBRATION_LLM_LATER
    calibration.check_models(models)
    return note


def access_of(args: argparse.Namespace, env: Mapping[str, str]) -> Access:
    """What visitors may do, from the flags (raises ValueError for a forbidden combination)."""
    reasons = public_reasons(args.host, args.share, env)
    bem = check_bem_models(args.bem, args.chunker, public=bool(reasons))
    names = {model: getattr(args, f"{model}_name") for model in MODEL_LABELS}
    names = {model: name.strip() for model, name in names.items() if name and name.strip()}
    proxies = args.trusted_proxy or []
    identity = ClientIdentity.for_deployment(
        space=bool(env.get("SPACE_ID")), share=args.share, trusted_proxies=proxies,
        ipv6_prefix=args.ipv6_prefix)
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
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        connections_per_client=args.connections_per_client,
        # repeated flags, or one text with commas: each a web origin, written as browsers send it
        allowed_origins=tuple(web_origin(origin) for given in args.allowed_origins or ()
                              for origin in given.split(",") if origin.strip()),
        # the names visitors reach the page by: those the host gives, and the address it
        # listens on (a Space's host and the share link's are known when the page serves)
        hosts=[name for given in args.public_host or () for name in given.split(",")
               if name.strip()] + [host for host in (args.host,) if host],
    )


def parse_args(
    argv: Sequence[str] | None = None, env: Mapping[str, str] = os.environ
) -> argparse.Namespace:
    """The flags, each absent one from its variable; ``settings`` (the engine's),
    ``access`` (what visitors may do) and ``calibration_data`` added. A bad value stops with
    one line (status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from_environment(args, env)
        if (args.load_in_4bit is None and zerogpu.requested(env)
                and args.quantization in (None, "nf4")):
            # A ZeroGPU slice (48 GB and more) holds the 7B unquantized (bf16, about 15 GB), and
            # bitsandbytes' 4-bit there is unverified (docs/zerogpu.md): --4bit opts in (so does
            # --quantization torchao-int4, which is 4-bit by itself).
            args.load_in_4bit = False
        if args.max_sample_tokens is None:
            args.max_sample_tokens = PUBLIC_MAX_SAMPLE_TOKENS
        if args.per_client is None:
            args.per_client = PUBLIC_PER_CLIENT
        models = {opt.name: getattr(args, opt.name) for opt in MODEL_OPTIONS}
        args.settings = Settings(
            **{name: value for name, value in models.items() if value is not None},
            **({"methods": parse_methods(args.methods)} if args.methods else {}),
        )
        backend_for(args.settings)  # a backend no registry entry names: refused now
        refusal = zerogpu.decoding_refusal(args.settings.decoding, env)
        if refusal:  # before any model loads: torch.compile is never called on ZeroGPU
            raise ValueError(f"--decoding: {refusal}")
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
    # On a ZeroGPU Space: imports `spaces` before anything touches CUDA (mars_demo/hosting/zerogpu.py).
    zero_gpu = zerogpu.active()

    from mars_demo.downloads import cleanup_stale_downloads, exit_on_sigterm
    from mars_demo.engine import Engine
    from mars_demo.ui import build_demo, launch_options, stop

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
    from mars_demo.ui.draw import methods_panel

    # the run whose answers the "Compared with other methods" panel places each value among
    methods_run = methods_panel.load_reference(
        *methods_panel.reference_folder(args.calibration, args.runs))
    if methods_run.run is not None:
        logging.getLogger("mars_demo.app").info(
            "methods panel: placing values among the %d answers of run %s",
            methods_run.run.n, methods_run.run.name)
    elif methods_run.note:
        logging.getLogger("mars_demo.app").warning("methods panel: %s", methods_run.note)
    from mars_demo.ui.page.example_store import default_folder

    examples = args.example_cache or default_folder()
    logging.getLogger("mars_demo.app").info("example analyses kept in %s", examples)
    demo = build_demo(engine, access=access, calibration=args.calibration_data,
                      runs_dir=args.runs, load_here=zero_gpu, methods_run=methods_run,
                      example_cache=examples, warm_examples=not zero_gpu)
    try:
        demo.launch(
            server_name=args.host, server_port=args.port, share=args.share, **launch_options(demo)
        )
    finally:  # Ctrl-C, SIGTERM (exit_on_sigterm): the files the page made go with it
        stop(demo)


if __name__ == "__main__":
    sys.exit(main())
