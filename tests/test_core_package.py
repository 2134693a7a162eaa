"""The core package stays light, and its docstring examples are correct."""

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

import mars_demo.core

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_importing_core_loads_no_heavy_library():
    code = (
        "import mars_demo.core, sys; "
        "assert not any(m in sys.modules for m in ('torch','transformers','flair','gradio','nltk'))"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


MODULES = [getattr(mars_demo.core, name) for name in mars_demo.core.__all__]


@pytest.mark.parametrize("module", MODULES, ids=mars_demo.core.__all__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
