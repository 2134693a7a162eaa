"""The HTTP side of a client of an OpenAI-compatible server: its URL, API key and timeouts, its
one HTTP client, one request with every failure turned into one
:class:`~mars_demo.errors.EndpointError` that says what to do, and waiting on concurrent
requests while a cancel check is polled.

HTTP goes through ``httpx`` (already a dependency of gradio), imported on first use. One
``httpx.Client`` serves every request to the server for as long as the object lives
(:attr:`ServerClient.client`): its connections stay open between requests, so the prompt's
tokenization check, the answers' requests and the next question reuse them instead of opening
new ones (a new connection costs a round trip before its request is even sent).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import threading
from typing import Any, Callable
from urllib.parse import urlsplit

from ..errors import EndpointError, GenerationCancelled, ModelLoadError, OptionError

DEFAULT_TIMEOUT = 120.0
POLL_S = 0.05  # how often a cancel check is polled while requests run
#: connections kept open between requests: every request of one question at once (the greedy
#: answer, 20 samples at most, the log-prob probe), with room for a batch's questions
KEEP_ALIVE = 64


class ServerClient:
    """The server's address (normalized to end in ``/v1``), the NAME of the environment variable
    holding its API key (the key is read when needed, never stored or shown) and the seconds
    to wait for each request."""

    def __init__(self, url: str, *, api_key_env: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise OptionError(
                f"the endpoint timeout must be a positive number of seconds, not {timeout!r}"
            )
        self.base_url = normalize_url(url)
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self._api_key()  # a missing variable is an error now, not at the first question
        self._client = None
        self._client_lock = threading.Lock()

    @property
    def client(self):
        """The one ``httpx.Client`` of this server, made on first use and kept for the
        object's lifetime; safe to share between threads. No connection limit (a batch's
        questions send all their requests at once, as they always have); :data:`KEEP_ALIVE`
        of them stay open between requests. The API key is sent with each request, read
        from its variable then, never kept in the client."""
        with self._client_lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(
                    timeout=self._timeouts(),
                    limits=httpx.Limits(max_connections=None,
                                        max_keepalive_connections=KEEP_ALIVE))
            return self._client

    def close(self) -> None:
        """Close the HTTP client's connections (a later request opens new ones)."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __del__(self) -> None:  # the registry dropped it: its connections go with it
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to close
            pass

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise EndpointError(
                f"The environment variable {self.api_key_env} (named by --llm-api-key-env) is not "
                "set or empty; export the LLM server's API key in it."
            )
        return key

    def _headers(self) -> dict[str, str]:
        key = self._api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _timeouts(self):
        import httpx

        return httpx.Timeout(self.timeout, connect=min(10.0, self.timeout))

    def _redact(self, text: str) -> str:
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        return text.replace(key, "***") if key else text

    def _request(self, client, method: str, path: str, body: dict | None, *, what: str) -> Any:
        import httpx

        url = self.base_url + path
        where = f"the LLM server at {self.base_url}"
        try:
            resp = client.request(method, url, json=body, headers=self._headers())
        except httpx.TimeoutException:
            raise EndpointError(
                f"Timed out after {self.timeout:g} s waiting for {where} to {what}; check that it "
                "is running and not overloaded, or allow a longer --llm-timeout (`evaluate` "
                "sends the requests of --batch-questions questions at once, up to 16: a "
                "smaller batch sends fewer)."
            ) from None
        except httpx.HTTPError as err:
            kind = type(err).__name__
            raise EndpointError(
                f"Cannot reach {where} to {what} ({kind}); start the server (e.g. `vllm serve "
                "MODEL`) or fix --llm-endpoint."
            ) from None
        if resp.status_code >= 400:
            detail = self._redact(error_detail(resp))
            hint = ""
            if resp.status_code in (401, 403):
                hint = (" The server refused the API key: set --llm-api-key-env to the name of "
                        "the environment variable that holds a valid key.")
            elif resp.status_code == 404:
                hint = (" Check --llm-endpoint (an OpenAI-compatible API usually ends in /v1) "
                        "and --llm-model.")
            raise EndpointError(
                f"{where[0].upper()}{where[1:]} answered HTTP {resp.status_code} when asked to "
                f"{what}: {detail}.{hint}"
            )
        try:
            return resp.json()
        except (json.JSONDecodeError, ValueError):
            raise EndpointError(
                f"{where[0].upper()}{where[1:]} answered with something that is not JSON when "
                f"asked to {what}; check that --llm-endpoint points at an OpenAI-compatible API."
            ) from None


def normalize_url(url: str) -> str:
    """``http://host:8000`` -> ``http://host:8000/v1``; a URL with a path keeps it."""
    if not isinstance(url, str) or not url.strip():
        raise EndpointError("The LLM endpoint URL is empty; give e.g. http://127.0.0.1:8000/v1.")
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EndpointError(
            f"The LLM endpoint {url!r} is not an http(s) URL; give e.g. http://127.0.0.1:8000/v1."
        )
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def served_models(data: Any) -> list[str] | None:
    """The model names of a ``GET /models`` answer (None: not an OpenAI model list)."""
    try:
        return [str(m["id"]) for m in data["data"]]
    except (KeyError, TypeError):
        return None


def served_model(data: Any, model: str | None, base_url: str) -> str:
    """The model to ask the server for, from its ``GET /models`` answer ``data``: ``model``
    when it is served (or the list is empty), else the only one served; refused otherwise."""
    served = served_models(data)
    if served is None:
        raise ModelLoadError(
            f"The LLM server at {base_url} answered GET /models with something that is "
            "not an OpenAI model list; check that --llm-endpoint points at an "
            "OpenAI-compatible API (usually ending in /v1)."
        )
    if model is None:
        if len(served) != 1:
            listed = ", ".join(served[:10]) or "none"
            raise ModelLoadError(
                f"The LLM server at {base_url} serves {len(served)} models ({listed}); "
                "name one with --llm-model."
            )
        return served[0]
    if served and model not in served:
        raise ModelLoadError(
            f"The LLM server at {base_url} does not serve {model!r}; it serves: "
            f"{', '.join(served[:10])}. Fix --llm-model."
        )
    return model


#: vLLM's log-prob modes (``--logprobs-mode``); MARS needs the first: log-probs at temperature 1,
#: before penalties, top-k and top-p.
RAW_LOGPROBS = "raw_logprobs"


def served_logprobs_mode(client, base_url: str, headers: dict[str, str]) -> str | None:
    """The log-prob mode the server says it returns, or None where it says nothing.

    vLLM says it on ``GET /server_info?config_format=json`` (``model_config.logprobs_mode``),
    a route it serves only in its development mode (``VLLM_SERVER_DEV_MODE=1``); other servers
    have no such route. Any failure here means "not said"."""
    import httpx

    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    try:
        resp = client.get(root + "/server_info", params={"config_format": "json"},
                          headers=headers)
        if resp.status_code != 200:
            return None
        mode = resp.json()["vllm_config"]["model_config"]["logprobs_mode"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return mode if isinstance(mode, str) else None


def check_logprobs_mode(mode: str | None, base_url: str) -> None:
    """Refuse a server that says it returns anything but raw log-probs (``mode``: what
    :func:`served_logprobs_mode` read; None: it said nothing)."""
    if mode is not None and mode != RAW_LOGPROBS:
        raise ModelLoadError(
            f"The LLM server at {base_url} says it returns {mode} (vLLM's --logprobs-mode); MARS "
            "needs the model's own log-probs at temperature 1, before penalties, top-k and "
            f"top-p: start it with --logprobs-mode {RAW_LOGPROBS} (vLLM's default)."
        )


def error_detail(resp) -> str:
    """The server's error message, one line, short."""
    text = resp.text or ""
    try:
        data = resp.json()
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            text = str(err.get("message") or err.get("detail") or err)
        elif isinstance(data, dict) and "detail" in data:
            text = str(data["detail"])
        else:
            text = str(err)
    except ValueError:
        pass
    line = " ".join(text.split())
    return (line[:300] + "...") if len(line) > 300 else (line or resp.reason_phrase or "no detail")


def stop_checker(should_stop: Callable[[], bool] | None) -> Callable[[], None]:
    """A function that raises :class:`~mars_demo.errors.GenerationCancelled` once
    ``should_stop()`` is True."""

    def check() -> None:
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")

    return check


def wait_all(jobs: dict[str, cf.Future], check: Callable[[], None],
              on_done: Callable[[str, cf.Future], None] | None) -> dict[str, Any]:
    """Results of all jobs; polls ``check`` meanwhile; the first error wins."""
    names = {fut: name for name, fut in jobs.items()}
    pending = set(jobs.values())
    while pending:
        check()
        done, pending = cf.wait(pending, timeout=POLL_S, return_when=cf.FIRST_COMPLETED)
        for fut in done:
            fut.result()  # raises the job's error
            if on_done is not None:
                on_done(names[fut], fut)
    check()
    return {name: fut.result() for name, fut in jobs.items()}
