"""The development tools stay beside the library: the library and the app never import them."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Each snippet does what a user's process does; none may load mars_demo.devtools.
USES = {
    "import mars_demo": "import mars_demo; mars_demo.Engine",
    "the command line": (
        "from mars_demo import cli; cli.build_parser().parse_args(['ask', 'q'])"
    ),
    "the engine": "from mars_demo.engine import Engine; Engine()",
    "app.py's page": (
        "import runpy, sys; sys.argv = ['app.py', '--help']\n"
        "try:\n    runpy.run_path('app.py', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "from mars_demo.ui import build_demo"
    ),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_the_library_never_imports_the_devtools(use):
    code = USES[use] + "\nimport sys\nloaded = [m for m in sys.modules if 'devtools' in m]\n" \
        "assert not loaded, loaded"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_make_tiny_models_command_loads_the_factory_only_when_it_runs():
    code = ("import sys; from mars_demo import cli\n"
            "assert not [m for m in sys.modules if 'devtools' in m]\n"
            "import mars_demo.devtools.tiny as t; assert callable(t.make_tiny_models)")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
