"""Running the command line inside a test: its exit code and what it printed, and the flags
that point it at the tiny models (tests/conftest.py's ``tiny_models``)."""

from __future__ import annotations

import contextlib
import io

from mars_demo.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    """``mars-demo ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def model_flags(models) -> list[str]:
    """--llm, --importance and --nli of the tiny models."""
    return ["--llm", str(models["llm"]), "--importance", str(models["importance"]),
            "--nli", str(models["nli"])]
