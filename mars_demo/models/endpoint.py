"""The LLM behind an OpenAI-compatible server (vLLM, llama.cpp's server, SGLang, TGI...).

:class:`EndpointLLM` has the interface of :class:`mars_demo.models.llm.LLM` (``model_id``,
``quantized``, ``preset``, ``build_prompt``, ``stop_strings``, ``generate``), so the pipeline can
use either. It generates through ``POST {url}/completions`` with ``logprobs``:

* the greedy answer (temperature 0) and every sample (seed ``seed + i``) are separate requests
  sent at once; ``n`` is not used, because llama.cpp's server ignores it;
* the prompt is text: the paper's few-shot prompt, or the chat prompt rendered by the model's
  chat template from a local tokenizer (``tokenizer=``, a directory or Hub id). Rendering locally
  and sending the text to ``/completions`` (rather than calling ``/chat/completions``) keeps one
  request format for every server, gives the same prompt text as in-process, and allows the
  teacher-forced re-scoring below, which needs the prompt text;
* sampling is plain: ``top_k=0`` (off), ``min_p=0``, ``repeat_penalty=1`` (llama.cpp otherwise
  applies its defaults 40 / 0.05 / 1.1; vLLM accepts ``top_k=0`` since 0.9 and ignores the
  field it does not know); stop strings are those of the prompt preset ("." and
  newline for the paper prompt), sent to the server and applied again here to the returned
  tokens, exactly as in-process (:func:`mars_demo.models.llm._cut_answer`);
* token texts and character spans come from the server's ``tokens`` / ``text_offset``, checked
  against the returned text; a token that is only part of a UTF-8 character has an empty span,
  and the token that completes the character carries it (as in-process).

Log-probs must be the model's own (temperature 1). ``logprobs_mode``:

* ``"server"``: trust the log-probs returned with the sampled tokens;
* ``"teacher-forced"``: re-score every answer by a teacher-forced request (``echo`` of prompt +
  answer with ``logprobs``), whose prompt log-probs no sampling setting touches;
* ``"auto"`` (default): probe once per (temperature, top_p): the first step's top log-probs of a
  request at that temperature / top_p must equal those at temperature 1 / top_p 1. They do on
  servers that return raw log-probs (vLLM's current engine by default, llama-cpp-python's server:
  measured in tests/test_endpoint.py); otherwise the answers are re-scored by teacher forcing.

The source used is in :attr:`EndpointLLM.logprob_source` after each ``generate``:
``"endpoint"`` (the server's sampled log-probs) or ``"endpoint-teacher-forced"``.

Teacher-forced re-scoring checks itself: under correct prompt log-probs every token of the greedy
answer is the most probable one at its place. llama-cpp-python 0.3.36's ``echo`` log-probs fail
that check (each token gets the log-prob of the *next* position), so with that server teacher
forcing is refused with a message rather than returning wrong numbers.

HTTP goes through ``httpx`` (already a dependency of gradio), not the ``openai`` client: the
requests carry server-specific fields (``top_k``, ``min_p``, ``repeat_penalty``), the raw JSON
of different servers must be checked field by field, and failures must become one clear message
without the client's hidden retries.

The API key is read from the environment variable *named* by ``api_key_env`` and sent as
``Authorization: Bearer``; it never appears in a message, a log line or a setting.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

from ..errors import (
    EndpointError,
    GenerationCancelled,
    InvalidModelOutput,
    ModelLoadError,
    OptionError,
    explain_load_error,
)
from .llm import (
    CHAT_SYSTEM,
    PAPER_PROMPT,
    PAPER_STOP_STRINGS,
    Generation,
    _cut_answer,
    trim_answer,
)

LOGPROB_MODES = ("auto", "server", "teacher-forced")
SOURCE_SERVER = "endpoint"
SOURCE_TEACHER_FORCED = "endpoint-teacher-forced"
DEFAULT_TIMEOUT = 120.0

#: Probe: log-probs at the requested temperature / top_p and at 1 / 1 agree within this when the
#: server returns raw log-probs (the same forward pass; only float noise between two requests).
#: Processed log-probs at temperature 0.5 differ by about the log-prob itself (several nats).
_PROBE_TOLERANCE = 1e-3
#: Self-check of echo log-probs: the greedy token's log-prob may trail the top one by float noise.
_ARGMAX_TOLERANCE = 1e-3
_MAX_WORKERS = 16
_POLL_S = 0.05
# Generic control-token shapes ("<|im_end|>", "<s>", "</s>") refused in questions when no local
# tokenizer tells the exact ones: the server would read them as control tokens.
_CONTROL_RE = re.compile(r"<\|[^<>|\s]{1,40}\|>|</?s>")


@dataclass
class _Answer:
    """One parsed ``/completions`` choice before the stop strings are applied."""

    text: str  # the text the server returned
    pieces: list[str]  # per token: its characters of ``text`` (tokens past its end: own string)
    in_text: int  # tokens [0, in_text) lie inside ``text``
    logprobs: list[float]
    finish_reason: str  # the server's


class EndpointLLM:
    """An LLM served by an OpenAI-compatible ``/v1/completions`` server (see module doc)."""

    quantized = False

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        tokenizer=None,
        tokenizer_id: str | None = None,
        logprobs_mode: str = "auto",
        preset=None,
    ) -> None:
        if logprobs_mode not in LOGPROB_MODES:
            raise OptionError(
                f"logprobs_mode must be one of {', '.join(LOGPROB_MODES)}, not {logprobs_mode!r}"
            )
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise OptionError(
                f"the endpoint timeout must be a positive number of seconds, not {timeout!r}"
            )
        self.base_url = normalize_url(url)
        self.model = model
        self.model_id = model
        self.preset = preset
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.tokenizer = tokenizer
        self.tokenizer_id = tokenizer_id
        self.logprobs_mode = logprobs_mode
        #: "endpoint" or "endpoint-teacher-forced": how the last ``generate`` got its log-probs
        self.logprob_source: str | None = None
        self._probe_cache: dict[tuple[float, float], bool] = {}
        self._api_key()  # a missing variable is an error now, not at the first question

    # ---- loading -------------------------------------------------------------------------
    @staticmethod
    def cache_key(url: str, model: str | None, api_key_env: str | None = None,
                  tokenizer: str | None = None, logprobs_mode: str = "auto") -> tuple:
        return ("endpoint", normalize_url(url), model, api_key_env, tokenizer, logprobs_mode)

    @classmethod
    def load(
        cls,
        url: str,
        model: str | None = None,
        api_key_env: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        tokenizer: str | None = None,
        logprobs_mode: str = "auto",
        preset=None,
    ) -> "EndpointLLM":
        """Check the server (``GET {url}/models``) and return an :class:`EndpointLLM`.

        ``model=None`` picks the served model when exactly one is served. ``tokenizer`` (a local
        directory or Hub id) supplies the chat template for the "chat" prompt. Every failure is
        one :class:`ModelLoadError` that says what to do.
        """
        import httpx

        llm = cls(url, model or "", api_key_env=api_key_env, timeout=timeout,
                  logprobs_mode=logprobs_mode, preset=preset)
        with httpx.Client(timeout=llm._timeouts(), headers=llm._headers()) as client:
            data = llm._request(client, "GET", "/models", None, what="list its models")
        served = _served_models(data)
        if served is None:
            raise ModelLoadError(
                f"The LLM server at {llm.base_url} answered GET /models with something that is "
                "not an OpenAI model list; check that --llm-endpoint points at an "
                "OpenAI-compatible API (usually ending in /v1)."
            )
        if model is None:
            if len(served) != 1:
                listed = ", ".join(served[:10]) or "none"
                raise ModelLoadError(
                    f"The LLM server at {llm.base_url} serves {len(served)} models ({listed}); "
                    "name one with --llm-model."
                )
            model = served[0]
        elif served and model not in served:
            raise ModelLoadError(
                f"The LLM server at {llm.base_url} does not serve {model!r}; it serves: "
                f"{', '.join(served[:10])}. Fix --llm-model."
            )
        llm.model = llm.model_id = model
        if tokenizer:
            llm.tokenizer = _load_tokenizer(tokenizer)
            llm.tokenizer_id = tokenizer
        return llm

    # ---- prompts -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def default_prompt(self) -> str:
        if self.preset is not None and not self.preset.instruct:
            return "paper"
        return "chat" if self.has_chat_template else "paper"

    def build_prompt(
        self, question: str, preset: str | None, recipe: str = "default"
    ) -> tuple[str, list[int], str, list[str]]:
        """Return (prompt text, prompt ids, preset used, warnings), as ``LLM.build_prompt``
        (``recipe="paper-code"``: the paper prompt ends with "Answer: ", as published).

        Prompt ids are those of the local tokenizer when one was given, else ``[]`` (the server
        tokenizes the text)."""
        warnings: list[str] = []
        if preset is None and self.tokenizer is None and self.preset is None:
            warnings.append(
                f"The served model {self.model_id}'s tokenizer is not known (give its Hub id or "
                "directory with --llm), so the paper's few-shot prompt was used; an instruction "
                "model usually answers better with its chat prompt."
            )
        preset = preset or self.default_prompt()
        if preset == "chat" and not self.has_chat_template:
            why = (
                f"the tokenizer {self.tokenizer_id} has no chat template"
                if self.tokenizer is not None
                else "give its Hub id or directory with --llm to use its chat template"
            )
            warnings.append(
                f"No chat template is known for the served model {self.model_id} ({why}), so "
                "the paper's few-shot prompt was used instead of the chat prompt."
            )
            preset = "paper"
        self._check_question(question)
        if preset == "paper":
            prompt = PAPER_PROMPT.format(question=question.rstrip().rstrip("?"))
            if recipe == "paper-code":
                prompt += " "
        else:
            messages = [
                {"role": "system", "content": CHAT_SYSTEM},
                {"role": "user", "content": question},
            ]
            prompt = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            # The server adds the BOS token itself when its tokenizer does; a template that
            # writes it too would give two.
            bos = getattr(self.tokenizer, "bos_token", None)
            if bos and prompt.startswith(bos) and self._adds_bos():
                prompt = prompt[len(bos):]
        ids: list[int] = []
        if self.tokenizer is not None:
            ids = list(self.tokenizer(prompt, add_special_tokens=preset == "paper")["input_ids"])
        return prompt, ids, preset, warnings

    def _adds_bos(self) -> bool:
        tok = self.tokenizer
        if getattr(tok, "bos_token_id", None) is None:
            return False
        return tok("a", add_special_tokens=True)["input_ids"][:1] == [tok.bos_token_id]

    def _check_question(self, question: str) -> None:
        """The server reads control-token texts in the prompt as control tokens: refuse them."""
        if self.tokenizer is not None:
            controls = {str(t) for t in self.tokenizer.all_special_tokens if t}
            for added in getattr(self.tokenizer, "added_tokens_decoder", {}).values():
                if getattr(added, "special", False):
                    controls.add(str(added))
            found = sorted(t for t in controls if t in question)
        else:
            found = _CONTROL_RE.findall(question)
        if found:
            raise OptionError(
                f"the question contains {found[0]!r}, which the LLM server would read as a "
                "control token; remove it from the question"
            )

    def stop_strings(self, preset: str) -> tuple[str, ...]:
        return PAPER_STOP_STRINGS if preset == "paper" else ()

    # ---- generation ----------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: list[int],
        *,
        samples: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int,
        prompt_preset: str,
        on_text: Callable[[str], None] | None = None,
        timings: dict[str, float] | None = None,
        should_stop: Callable[[], bool] | None = None,
        prompt: str | None = None,
        top_k: int = 0,
        keep_stop: bool = False,
        banned_strings: Sequence[str] = (),
    ) -> tuple[Generation, list[Generation]]:
        """The greedy answer and ``samples`` sampled answers, all requested at once.

        ``top_k`` (0 = off), ``keep_stop`` and ``banned_strings`` as ``LLM.generate`` (the
        paper-code recipe): a kept stop string is not sent to the server, which would leave it
        out, but cut here with the stop kept and scored; a server cannot ban tokens, so banned
        strings end the answer instead (sent as stop strings), and each answer says so.

        ``prompt`` (the text from :meth:`build_prompt`) is required; ``prompt_ids`` is not
        used. ``on_text`` receives the greedy answer once it is complete (no token streaming).
        ``should_stop`` is polled while the requests run; once True the requests are abandoned
        and :class:`GenerationCancelled` is raised. ``timings`` receives "generate" and
        "logprobs" (teacher-forced re-scoring) seconds. Sets :attr:`logprob_source`.
        """
        import httpx

        if prompt is None:
            raise ValueError("EndpointLLM.generate needs the prompt text: pass prompt=...")
        timings = timings if timings is not None else {}
        banned = tuple(b for b in banned_strings if b)
        stops = tuple(x for x in self.stop_strings(prompt_preset) if x not in banned)
        server_stops = list(banned) + ([] if keep_stop else list(stops))
        notes = [
            "The LLM server cannot ban tokens, so "
            + ", ".join(repr(b) for b in banned)
            + " ended the answer instead of being banned as in the published code."
        ] if banned else []
        mode = self.logprobs_mode
        probe_needed = mode == "auto" and not (temperature == 1.0 and top_p == 1.0) and (
            (temperature, top_p) not in self._probe_cache
        )
        t0 = time.perf_counter()

        def body(temp: float, p: float, seed_: int) -> dict:
            return self._body(prompt, max_tokens=max_new_tokens, temperature=temp, top_p=p,
                              seed=seed_, stop=server_stops, logprobs=1, top_k=top_k)

        check = _stop_checker(should_stop)
        check()
        # No `with` for the pool: leaving it would wait for requests abandoned on cancellation.
        client = httpx.Client(timeout=self._timeouts(), headers=self._headers(),
                              limits=httpx.Limits(max_connections=_MAX_WORKERS))
        pool = cf.ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, samples + 3))
        try:
            jobs: dict[str, cf.Future] = {
                "greedy": pool.submit(self._complete, client, body(0.0, 1.0, seed)),
            }
            for i in range(samples):
                jobs[f"s{i}"] = pool.submit(
                    self._complete, client, body(temperature, top_p, seed + i)
                )
            if probe_needed:
                jobs["probe"] = pool.submit(self._probe, client, prompt, temperature, top_p, seed)

            def on_done(name: str, fut: cf.Future) -> None:
                if name == "greedy" and on_text is not None:
                    on_text(_to_generation(fut.result(), stops, limit=max_new_tokens,
                                           keep_stop=keep_stop)[0].text)

            results = _wait_all(jobs, check, on_done)
            if probe_needed:
                self._probe_cache[(temperature, top_p)] = results.pop("probe")
            if mode == "auto":
                raw_ok = self._probe_cache.get((temperature, top_p), True)
                mode = "server" if raw_ok else "teacher-forced"
            built = {
                k: _to_generation(a, stops, limit=max_new_tokens, keep_stop=keep_stop,
                                  extra_warnings=notes)
                for k, a in results.items()
            }
            gens = {k: g for k, (g, _) in built.items()}
            t1 = time.perf_counter()
            if mode == "teacher-forced":
                gens = self._teacher_force(client, pool, prompt, built, check)
        except BaseException:
            # Abandon requests still running (cancelled, or another one failed): their threads
            # end with the server's answer or the timeout; nobody waits for them.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        client.close()
        t2 = time.perf_counter()
        greedy = gens["greedy"]
        sampled = [gens[f"s{i}"] for i in range(samples)]
        for gen in [greedy, *sampled]:
            if not all(math.isfinite(x) for x in gen.logprobs):
                raise InvalidModelOutput(
                    f"The LLM server returned invalid log-probs (NaN or infinity) for "
                    f"{self.model_id}, so no uncertainty can be computed; check the server's "
                    "model and its precision."
                )
        self.logprob_source = SOURCE_TEACHER_FORCED if mode == "teacher-forced" else SOURCE_SERVER
        timings["generate"] = timings.get("generate", 0.0) + (t1 - t0)
        timings["logprobs"] = timings.get("logprobs", 0.0) + (t2 - t1)
        return greedy, sampled

    def generate_many(
        self,
        prompts_ids: list[list[int]] | None = None,
        *,
        prompts: Sequence[str],
        concurrency: int = 16,
        timings: dict[str, float] | None = None,
        should_stop: Callable[[], bool] | None = None,
        **options: Any,
    ) -> list[tuple[Generation, list[Generation]]]:
        """:meth:`generate` for several questions, ``concurrency`` questions' requests at once
        (each question's greedy and sample requests are concurrent too), so the server batches
        them (vLLM's continuous batching). Returns one ``(greedy, samples)`` per prompt, in
        order; each is exactly what :meth:`generate` returns for it (the same requests, the
        same seeds). ``prompts`` (texts) are required; ``prompts_ids`` is not used; the other
        options are :meth:`generate`'s. When the log-prob probe is needed it runs once, first.
        The first failing question's error is raised and the others are abandoned. ``timings``
        receives the batch's wall-clock seconds under "generate".
        """
        import httpx

        prompts = list(prompts)
        if not prompts:
            return []
        timings = timings if timings is not None else {}
        check = _stop_checker(should_stop)
        check()
        temperature, top_p = options["temperature"], options["top_p"]
        if (self.logprobs_mode == "auto" and not (temperature == 1.0 and top_p == 1.0)
                and (temperature, top_p) not in self._probe_cache):
            with httpx.Client(timeout=self._timeouts(), headers=self._headers()) as client:
                self._probe_cache[(temperature, top_p)] = self._probe(
                    client, prompts[0], temperature, top_p, options["seed"])
        t0 = time.perf_counter()
        pool = cf.ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(prompts))))
        try:
            jobs = {
                str(i): pool.submit(self.generate, [], prompt=prompt,
                                    should_stop=should_stop, **options)
                for i, prompt in enumerate(prompts)
            }
            results = _wait_all(jobs, check, None)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        timings["generate"] = timings.get("generate", 0.0) + time.perf_counter() - t0
        return [results[str(i)] for i in range(len(prompts))]

    def _body(self, prompt: str, **kw) -> dict:
        body = {"model": self.model, "prompt": prompt, "n": 1, "stream": False,
                # plain sampling: llama.cpp's server would otherwise apply top-k 40, min-p 0.05
                # and a repeat penalty 1.1 (vLLM's defaults are already off)
                "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}
        body.update(kw)
        if not body.get("stop"):
            body.pop("stop", None)
        return body

    def _complete(self, client, body: dict) -> _Answer:
        data = self._request(client, "POST", "/completions", body, what="generate an answer")
        return _parse_choice(data, self.base_url)

    def _probe(self, client, prompt: str, temperature: float, top_p: float, seed: int) -> bool:
        """True when the server's log-probs at (temperature, top_p) are its raw ones."""
        tops = []
        for temp, p in ((temperature, top_p), (1.0, 1.0)):
            body = self._body(prompt, max_tokens=1, temperature=temp, top_p=p, seed=seed,
                              logprobs=5)
            data = self._request(client, "POST", "/completions", body, what="check its log-probs")
            try:
                top = data["choices"][0]["logprobs"]["top_logprobs"][0]
                tops.append({str(k): float(v) for k, v in top.items()})
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                return False  # no top log-probs to compare: re-score to be safe
        # Token strings that several tokens share ("" for lone bytes and control tokens) may
        # map to different tokens in the two answers: compare the unambiguous ones only.
        common = {k for k in set(tops[0]) & set(tops[1]) if _clean(k)}
        if not common:
            return False
        return max(abs(tops[0][k] - tops[1][k]) for k in common) <= _PROBE_TOLERANCE

    # ---- teacher forcing -----------------------------------------------------------------
    def _teacher_force(self, client, pool, prompt: str, built: dict[str, tuple[Generation, str]],
                       check: Callable[[], None]) -> dict[str, Generation]:
        jobs = {
            name: pool.submit(self._rescore, client, prompt, gen, raw)
            for name, (gen, raw) in built.items()
        }
        out = _wait_all(jobs, check, None)
        greedy_tf, greedy_top = out["greedy"]
        # A re-tokenized answer may split a word differently from generation, so one token in
        # three may miss; a server whose echo log-probs are misaligned misses nearly all.
        misses = sum(1 for lp, top in zip(greedy_tf.logprobs, greedy_top)
                     if top is not None and lp < top - _ARGMAX_TOLERANCE)
        if misses and misses * 3 > len(greedy_tf.logprobs):
            raise EndpointError(
                f"The LLM server at {self.base_url} returns prompt (echo) log-probs that do not "
                "belong to their tokens (the greedy answer's tokens are not the most probable ones "
                "under them), so the answers cannot be re-scored by teacher forcing. "
                "llama-cpp-python's server has this bug; its sampled log-probs are raw, so use "
                "logprobs mode 'server' (or 'auto') with it, or serve the model with vLLM."
            )
        return {name: gen for name, (gen, _) in out.items()}

    def _rescore(self, client, prompt: str, gen: Generation, raw: str) -> tuple[Generation, list]:
        """Re-score one answer by echoing prompt + answer: (new Generation, top-1 log-probs).

        An empty answer is scored, as in-process, by its stop token: prompt + the stop text."""
        empty = gen.text == "" and gen.finish_reason == "stop" and raw == ""
        scored = gen.token_texts[0] if empty else raw
        if not _clean(scored):
            raise EndpointError(
                f"The LLM server at {self.base_url} gave an empty answer that stopped at a token "
                "with no text (end of sequence), which cannot be re-scored by teacher forcing; "
                "use logprobs mode 'server' with a server that returns raw log-probs."
            )
        body = self._body(prompt + scored, max_tokens=1, temperature=0.0, top_p=1.0, logprobs=1,
                          echo=True, seed=0)
        data = self._request(client, "POST", "/completions", body, what="re-score an answer")
        tokens, starts, lps, tops = _parse_echo(data, self.base_url, prompt + scored)
        start, end = len(prompt), len(prompt) + len(scored)
        idx = [i for i in range(len(tokens))
               if starts[i] < end and _token_end(i, starts, tokens, end) > start]
        if not idx or any(lps[i] is None for i in idx):
            raise EndpointError(
                f"The LLM server at {self.base_url} returned no log-prob for a re-scored answer "
                "token; use a server that supports echo with logprobs, or logprobs mode 'server'."
            )
        warnings: list[str] = []
        if starts[idx[0]] < start:
            warnings.append(
                "The server's tokenizer joined the end of the prompt and the start of the answer "
                "into one token; that token's log-prob was used for the answer."
            )
        if empty:
            i = idx[0]
            new = Generation(
                text="", token_ids=[None], token_texts=[scored],  # type: ignore[list-item]
                spans=[(0, 0)], logprobs=[float(lps[i])], finish_reason="stop",
                warnings=warnings + list(gen.warnings),
            )
            return new, [tops[i]]
        bounds = [max(starts[i], start) - start for i in idx] + [len(raw)]
        pieces = [raw[bounds[k]:bounds[k + 1]] for k in range(len(idx))]
        answer = _Answer(text=raw, pieces=pieces, in_text=len(pieces),
                         logprobs=[float(lps[i]) for i in idx], finish_reason=gen.finish_reason)
        new, _ = _to_generation(answer, (), finish=gen.finish_reason, extra_warnings=warnings)
        return new, [tops[i] for i in idx]

    # ---- HTTP ----------------------------------------------------------------------------
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
            resp = client.request(method, url, json=body)
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
            detail = self._redact(_error_detail(resp))
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


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


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


def _load_tokenizer(source: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(os.path.expanduser(source))
    except Exception as err:  # say what to do, as for any model
        raise explain_load_error(source, "tokenizer of the served LLM", err) from err


def _served_models(data: Any) -> list[str] | None:
    try:
        return [str(m["id"]) for m in data["data"]]
    except (KeyError, TypeError):
        return None


def _error_detail(resp) -> str:
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


def _stop_checker(should_stop: Callable[[], bool] | None) -> Callable[[], None]:
    def check() -> None:
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")

    return check


def _wait_all(jobs: dict[str, cf.Future], check: Callable[[], None],
              on_done: Callable[[str, cf.Future], None] | None) -> dict[str, Any]:
    """Results of all jobs; polls ``check`` meanwhile; the first error wins."""
    names = {fut: name for name, fut in jobs.items()}
    pending = set(jobs.values())
    while pending:
        check()
        done, pending = cf.wait(pending, timeout=_POLL_S, return_when=cf.FIRST_COMPLETED)
        for fut in done:
            fut.result()  # raises the job's error
            if on_done is not None:
                on_done(names[fut], fut)
    check()
    return {name: fut.result() for name, fut in jobs.items()}


def _bad(base_url: str, what: str) -> EndpointError:
    return EndpointError(
        f"The LLM server at {base_url} returned {what}; MARS needs the token log-probs of "
        "/v1/completions (`logprobs`), which vLLM and llama.cpp's server return: check the server "
        "and its version."
    )


def _parse_choice(data: Any, base_url: str) -> _Answer:
    try:
        choice = data["choices"][0]
        text = choice["text"]
        finish = choice.get("finish_reason") or "stop"
    except (KeyError, IndexError, TypeError):
        raise _bad(base_url, "a completion without choices or text") from None
    if not isinstance(text, str):
        raise _bad(base_url, "a completion whose text is not a string")
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        raise _bad(base_url, "no token log-probs")
    tokens, offsets, values = lp.get("tokens"), lp.get("text_offset"), lp.get("token_logprobs")
    if not (isinstance(tokens, list) and isinstance(values, list) and len(tokens) == len(values)):
        raise _bad(base_url, "malformed token log-probs (tokens and token_logprobs differ)")
    if not all(isinstance(t, str) for t in tokens):
        raise _bad(base_url, "malformed token log-probs (a token is not a string)")
    try:
        logprobs = [float(v) for v in values]
    except (TypeError, ValueError):
        raise _bad(base_url, "a token without a log-prob") from None
    if finish not in ("stop", "length"):
        raise EndpointError(
            f"The LLM server at {base_url} ended an answer with finish_reason {finish!r}; "
            "retry, or check the server's log."
        )
    starts = _token_starts(text, tokens, offsets)
    if starts is None:
        raise _bad(base_url, "token texts and offsets that do not match the answer text")
    # Tokens inside the text: those starting before its end, and empty ones at its very end (a
    # lone byte of a character the server could not render). A non-empty token at or past the
    # end holds the stop string or is an end-of-sequence token the text does not show.
    n_in = 0
    for tok, a in zip(tokens, starts):
        if a > len(text) or (a == len(text) and _clean(tok)):
            break
        n_in += 1
    pieces = []
    for i, (tok, a) in enumerate(zip(tokens, starts)):
        if i < n_in:
            b = starts[i + 1] if i + 1 < n_in else len(text)
            piece = text[a:b]
            if i == n_in - 1 and len(tok) > len(piece) and tok.startswith(piece):
                piece = tok  # the token runs past the returned text: the stop string is in it
            pieces.append(piece)
        else:
            pieces.append(tok)
    return _Answer(text=text, pieces=pieces, in_text=n_in, logprobs=logprobs, finish_reason=finish)


def _clean(tok: str) -> bool:
    """A token string that is its own text (not part of a character, not a byte escape)."""
    return bool(tok) and "\ufffd" not in tok and not tok.startswith("bytes:")


def _token_starts(text: str, tokens: list[str], offsets) -> list[int] | None:
    """Start of every token in ``text`` (non-decreasing; tokens past its end: ``len(text)`` or
    more).

    First the server's ``text_offset`` (relative to the first token), accepted when it agrees
    with the text; else the token strings matched in order, characters skipped by partial
    tokens (empty or replacement-character strings) going to the last of them."""
    n = len(text)
    if isinstance(offsets, list) and len(offsets) == len(tokens) and tokens:
        try:
            rel = [int(o) - int(offsets[0]) for o in offsets]
        except (TypeError, ValueError):
            rel = None
        if rel is not None and all(b >= a for a, b in zip(rel, rel[1:])) and all(
            a >= n or not _clean(t) or text.startswith(t, a) or t.startswith(text[a:])
            for t, a in zip(tokens, rel)
        ):
            return rel
    starts: list[int] = []
    pos = 0
    pending: list[int] = []
    for i, tok in enumerate(tokens):
        if pos >= n:
            starts.append(n)
            continue
        if not _clean(tok):
            pending.append(i)
            starts.append(pos)
            continue
        if text.startswith(tok, pos) or tok.startswith(text[pos:]):
            starts.append(pos)
            pos += len(tok)
            pending = []
            continue
        j = text.find(tok, pos)
        if j == -1 or not pending or j - pos > 4 * len(pending):
            return None
        # The skipped characters [pos, j) were completed by the last partial token: every
        # partial token starts at pos, so the last one's piece runs up to this token's start j.
        starts.append(j)
        pos = j + len(tok)
        pending = []
    return starts


def _parse_echo(data: Any, base_url: str, echoed: str):
    try:
        choice = data["choices"][0]
        text = choice["text"]
        lp = choice["logprobs"]
        tokens, offsets, values = lp["tokens"], lp["text_offset"], lp["token_logprobs"]
        tops = lp.get("top_logprobs") or [None] * len(tokens)
    except (KeyError, IndexError, TypeError):
        raise _bad(base_url, "no prompt log-probs for an echo request") from None
    if not isinstance(text, str) or not text.startswith(echoed):
        raise _bad(base_url, "an echo that does not start with the prompt and answer")
    if not (isinstance(tokens, list) and isinstance(values, list) and isinstance(offsets, list)
            and len(tokens) == len(values) == len(offsets)):
        raise _bad(base_url, "malformed echo log-probs")
    starts = [int(o) for o in offsets]
    lps = [None if v is None else float(v) for v in values]
    top1 = []
    for t in tops:
        top1.append(max(float(v) for v in t.values()) if isinstance(t, dict) and t else None)
    return tokens, starts, lps, top1


def _token_end(i: int, starts: list[int], tokens: list[str], limit: int) -> int:
    return starts[i + 1] if i + 1 < len(starts) else min(limit, starts[i] + len(tokens[i]))


def _to_generation(answer: _Answer, stops, *, finish: str | None = None,
                   extra_warnings: list[str] | None = None,
                   limit: int | None = None, keep_stop: bool = False) -> tuple[Generation, str]:
    """Apply the stop strings to a server answer; mirrors ``llm.build_generation``.

    ``limit`` (max new tokens): llama-cpp-python may return a few tokens more while it completes
    a multi-byte character; the answer keeps at most ``limit`` tokens, as in-process.
    Returns the Generation and the answer's text before stripping (cut at the stop string)."""
    pieces = answer.pieces
    in_text = answer.in_text
    if limit is not None and len(pieces) > limit:
        pieces, in_text = pieces[:limit], min(in_text, limit)
        if _cut_answer(pieces, stops, keep_stop)[1] is None:
            finish = "length"
    keep, cut = _cut_answer(pieces, stops, keep_stop)
    if cut is None:
        keep = in_text  # tokens past the text (an end-of-sequence token) are not scored
        finish = finish or answer.finish_reason
    else:
        finish = "stop"
    warnings = list(extra_warnings or [])
    if keep == 0:
        # Stopped at once: the answer is empty and its score is that of stopping here, the stop
        # token itself (as in-process).
        if not pieces:
            raise EndpointError(
                "The LLM server gave an empty answer without returning its stop token, so the "
                "answer has nothing to score; retry with another seed or question."
            )
        gen = Generation(
            text="",
            token_ids=[None],  # type: ignore[list-item]
            token_texts=[pieces[0]],
            spans=[(0, 0)],
            logprobs=[float(answer.logprobs[0])],
            finish_reason=finish,
            warnings=warnings + [
                "The model gave an empty answer (it stopped at once); its score is the "
                f"probability of stopping with {pieces[0]!r}."
            ],
        )
        return gen, ""
    stripped, spans, notes, text = trim_answer(pieces[:keep], cut, finish)
    warnings += notes
    gen = Generation(
        text=stripped,
        token_ids=[None] * keep,  # type: ignore[list-item]
        token_texts=[stripped[a:b] for a, b in spans],
        spans=spans,
        logprobs=[float(x) for x in answer.logprobs[:keep]],
        finish_reason=finish,
        warnings=warnings,
    )
    return gen, text  # text: the answer before stripping, what teacher forcing re-scores
