"""The peers the project is tested and timed against, lm-polygraph 0.7.0 and TruthTorchLM 0.1.19,
in the virtual environment ``scripts/peers_venv.sh`` builds once (their own dependencies; the
project's torch and transformers through a .pth file), and how a test runs their code there.

Without the venv the peer tests skip and say how to build it; under CI (``CI`` set) they fail,
since CI builds it first (.ci/run).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

POLYGRAPH, TRUTHTORCHLM = "0.7.0", "0.1.19"
PEERS_VENV = Path(os.environ.get("MARS_PEERS_VENV") or Path.home() / ".cache" / "mars-demo"
                  / f"peers-lmp{POLYGRAPH}-ttlm{TRUTHTORCHLM}")
ROOT = Path(__file__).resolve().parents[1]


def peers_env() -> dict[str, str]:
    """The environment of a peers' process: offline, and without the project on its path (what
    it computes is the peers' code alone)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True", WANDB_MODE="disabled",
               TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    return env


def peers_python() -> Path | None:
    """The peers venv's python when it imports both peers, else None."""
    python = PEERS_VENV / "bin" / "python"
    if not python.is_file():
        return None
    done = subprocess.run([str(python), "-c", "import lm_polygraph, TruthTorchLM"],
                          capture_output=True, env=peers_env(), timeout=300)
    return python if done.returncode == 0 else None


def require_peers() -> Path:
    """The peers venv's python. Without it the test skips, saying how to build it; under CI
    (``CI`` set) it fails instead."""
    python = peers_python()
    if python is not None:
        return python
    why = (f"no peers virtual environment at {PEERS_VENV}: build it with `bash "
           "scripts/peers_venv.sh` (lm-polygraph and TruthTorchLM with the project's torch, about "
           "420 MB, built once; MARS_PEERS_VENV moves it)")
    if os.environ.get("CI"):
        pytest.fail(why + " (CI must run the peer tests)")
    pytest.skip(why)


def run_reference(python: Path, script: str, given: dict, work: Path,
                  timeout: int = 1200) -> dict:
    """Run ``tests/reference/SCRIPT`` with the peers' python on ``given`` (written as JSON) and
    return what it wrote; a failure fails the test with the end of its output."""
    inp, out = work / "peers-in.json", work / "peers-out.json"
    inp.write_text(json.dumps(given), encoding="utf-8")
    done = subprocess.run([str(python), str(ROOT / "tests" / "reference" / script), str(inp),
                           str(out)], capture_output=True, text=True, env=peers_env(),
                          timeout=timeout, cwd=work)
    if done.returncode != 0:
        pytest.fail(f"{script} failed in the peers venv:\n{(done.stderr or done.stdout)[-4000:]}")
    return json.loads(out.read_text(encoding="utf-8"))
