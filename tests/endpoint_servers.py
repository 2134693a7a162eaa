"""A real OpenAI-compatible LLM server for tests: llama.cpp's (``llama-cpp-python[server]``),
serving the tiny test LLM written to GGUF by :func:`mars_demo.devtools.gguf.write_gguf`.

Used through the ``llama_server`` fixture of ``tests/conftest.py`` (session scope: one server for
every test that needs it). The server requires :data:`API_KEY` as a Bearer token; tests pass it
with ``api_key_env=API_KEY_ENV`` after setting the variable (the ``llama_api_key`` fixture).
"""

from __future__ import annotations

import contextlib
import importlib.util
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
    import httpx

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
            deadline = time.monotonic() + _START_S
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"llama.cpp server exited ({proc.returncode}):\n"
                                f"{log_path.read_text(errors='replace')[-3000:]}")
                try:
                    r = httpx.get(url + "/models", timeout=2,
                                  headers={"Authorization": f"Bearer {API_KEY}"})
                    if r.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("llama.cpp server did not start:\n"
                                f"{log_path.read_text(errors='replace')[-3000:]}")
                time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
