"""The project installs as a package: a wheel with the data the code reads and a console script,
and dependencies that follow requirements.txt (the one list; the Space installs that file, alone,
so it names no package of the checkout); the tests' requirements install the checkout itself."""

import configparser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _requirements(name: str) -> list[str]:
    """The requirement lines of a requirements file, without comments and ``-r`` includes."""
    lines = []
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            lines.append(line)
    return lines


def test_the_dev_extra_is_what_requirements_dev_adds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["dev"] == _requirements("requirements-dev.txt")
    # the checkout itself, editable: its dependencies are requirements.txt (pyproject.toml)
    dev = [line.split("#", 1)[0].strip() for line in
           (ROOT / "requirements-dev.txt").read_text().splitlines()]
    assert dev.count("-e .") == 1 and "-r requirements.txt" not in dev
    assert project["dynamic"] == ["dependencies"]


def test_the_space_requirements_name_no_local_package():
    """A Space runs ``pip install -r requirements.txt`` on that file alone, before the code is
    copied in: a path, an editable install or an include would fail its build."""
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        assert not line.startswith(("-", ".", "/", "file:")), line
        assert "@" not in line, line


@pytest.mark.slow
def test_the_wheel_holds_the_package_data_and_the_console_script(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("mars_demo-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(f"{dist}/METADATA").decode()
        entry_points = configparser.ConfigParser()
        entry_points.read_string(z.read(f"{dist}/entry_points.txt").decode())
    for data in ("mars_demo/data/tiny_facts.json", "mars_demo/ui/assets/page.js",
                 "mars_demo/ui/assets/style.css", "mars_demo/ui/assets/examples.json"):
        assert data in names
    assert "mars_demo/devtools/tiny/factory.py" in names  # make-tiny-models works when installed
    assert not any(n.startswith("tests/") for n in names)
    assert entry_points["console_scripts"]["mars-demo"] == "mars_demo.cli:main"
    required = {re.split(r"[<>=\[; ]", line.split(":", 1)[1].strip())[0].lower()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")
                and "extra ==" not in line}
    wanted = {re.split(r"[<>=\[; ]", r)[0].lower() for r in _requirements("requirements.txt")}
    assert required == wanted
