"""The command line's flags, built from the option schema (:mod:`mars_demo.options`), and the
Settings they give: the one place `ask` and `score` (:mod:`mars_demo.cli`), every `evaluate`
subcommand (:mod:`mars_demo.evaluation.cli`) and the page's server (:mod:`mars_demo.serve`) take
their model and per-request flags from.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from .errors import OptionError
from .options import MODEL_OPTIONS, REQUEST_OPTIONS, Option
from .settings import LLM_PRESETS, MODEL_FIELDS, REQUEST_FIELDS, Settings, for_answers


def add_option(parser: argparse.ArgumentParser, opt: Option, *, keep_default: bool,
               variable: bool = False) -> None:
    """One flag of the schema (the page's server builds its flags with it too). Without
    ``keep_default`` an absent flag leaves no attribute, so the caller can tell "not given" from
    "given the default". ``variable``: the page's server, where an absent flag is None (its
    environment variable, named in the help, may give it) and every value is checked here."""
    if variable:
        default = None
    else:
        default = opt.default if keep_default else argparse.SUPPRESS
    help_text = opt.describe() + (f" [env {opt.variable}]" if variable else "")
    help_text = help_text.replace("%", "%%")
    if opt.kind is bool:  # --4bit / --no-4bit, --share / --no-share
        parser.add_argument(opt.flag, dest=opt.name, action=argparse.BooleanOptionalAction,
                            default=default, help=help_text)
        return
    if opt.kind is list:  # repeated: --trusted-proxy A --trusted-proxy B
        parser.add_argument(opt.flag, dest=opt.name, action="append", default=default,
                            help=help_text, metavar=opt.metavar or opt.name.upper())
        return
    kind = {int: int, float: float}.get(opt.kind, str)
    if variable and opt.kind in (int, float):
        kind = functools.partial(_checked, opt)
    parser.add_argument(opt.flag, dest=opt.name, type=kind, choices=opt.choices,
                        default=default, help=help_text,
                        metavar=None if opt.choices else (opt.metavar or opt.name.upper()))


def _checked(opt: Option, text: str) -> Any:
    """A flag's number, checked against the schema; the message names the flag."""
    try:
        return opt.parse(text, opt.flag)
    except OptionError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_llm_help(parser: argparse.ArgumentParser) -> None:
    """--llm's help with the presets' names (mars_demo.settings.LLM_PRESETS), and
    --llm-backend's with every backend of the registry (mars_demo.models.backends), which are
    its choices."""
    from .models import backends

    for action in parser._actions:
        env = action.help[action.help.index(" [env"):] if " [env" in (action.help or "") else ""
        if action.dest == "llm":
            action.help = (
                "LLM: a Hub id, a local directory, a GGUF file or a preset ("
                + ", ".join(LLM_PRESETS)
                + "); default: the 7B in 4-bit on a GPU, the small CPU preset otherwise" + env
            )
        elif action.dest == "llm_backend":
            action.help = backends.help_text().replace("%", "%%") + env
            action.choices, action.metavar = backends.names(), None


def add_model_flags(parser: argparse.ArgumentParser, *, keep_default: bool = True) -> None:
    """The model flags (``--llm``, ``--importance``, ``--nli``...). Without ``keep_default`` a
    flag not given leaves no attribute, so the models the answers (or a run) recorded can stand
    in for it."""
    for opt in MODEL_OPTIONS:
        add_option(parser, opt, keep_default=keep_default)
    add_llm_help(parser)


def add_request_flags(parser: argparse.ArgumentParser, *, keep_default: bool = True,
                      scoring_only: bool = False) -> None:
    """The per-request flags (``--samples``, ``--normalization``...); with ``scoring_only`` only
    those that change how given answers are scored (and ``--prompt``, for teacher forcing)."""
    for opt in REQUEST_OPTIONS:
        if not scoring_only or opt.stage == "scoring" or opt.name == "prompt":
            add_option(parser, opt, keep_default=keep_default)


def settings_from(args: argparse.Namespace, recorded: dict[str, Any] | None = None) -> Settings:
    """Settings from the flags given; for ``score`` and ``evaluate rejudge``, the models and
    scoring options not given come from the answers' (or the run's) recorded settings
    (``recorded``, :func:`mars_demo.settings.for_answers`), then from the defaults."""
    given = {name: getattr(args, name) for name in MODEL_FIELDS + REQUEST_FIELDS
             if hasattr(args, name)}
    return for_answers(recorded, given) if recorded is not None else Settings(**given)
