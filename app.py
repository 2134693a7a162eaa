"""Serve the MARS Demo page: ``python app.py [--llm ID_OR_DIR] [--host H] [--port P] [--share]``.

Every option can also come from the environment (MARS_DEMO_LLM, MARS_DEMO_IMPORTANCE, MARS_DEMO_NLI,
MARS_DEMO_HOST, MARS_DEMO_PORT, MARS_DEMO_SHARE); a flag wins over its variable. The models load
once, in a background thread, so the page opens at once and says when they are ready.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from mars_demo import texts
from mars_demo.settings import DEFAULT_IMPORTANCE, Settings

TRUE = ("1", "true", "yes", "on")
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
    return parser


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
        args.settings = Settings(llm=args.llm, importance=args.importance, nli=args.nli)
    except (ValueError, argparse.ArgumentTypeError) as err:  # OptionError is a ValueError
        parser.error(str(err))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise

    from mars_demo.pipeline import Engine
    from mars_demo.ui import build_demo, launch_options

    demo = build_demo(Engine(args.settings))  # starts loading the models in the background
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, **launch_options())


if __name__ == "__main__":
    sys.exit(main())
