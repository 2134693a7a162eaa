"""The LLM behind an OpenAI-compatible server (vLLM, llama.cpp's server, SGLang, TGI...).

:class:`EndpointLLM` satisfies the LLM contract (:class:`~mars_demo.models.contract.LanguageModel`)
as the in-process :class:`mars_demo.models.llm.LLM` does, so the engine can use either; and
:data:`BACKEND` declares it as the ``server`` backend (:mod:`mars_demo.models.backends`),
chosen by ``--llm-endpoint``. This module holds the requests (through the one HTTP client of
:class:`~mars_demo.models.server.ServerClient`); the answers are parsed by
:mod:`mars_demo.models.completions` and the prompts built by :mod:`mars_demo.models.prompts`.
It generates through ``POST {url}/completions`` with ``logprobs``:

* the greedy answer (temperature 0) and every sample (seed ``seed + i``) are separate requests
  sent at once; ``n`` is not used, because llama.cpp's server ignores it;
* the prompt is text: the paper's few-shot prompt, or the chat prompt rendered by the model's
  chat template from a local tokenizer (``tokenizer=``, a directory, Hub id or GGUF file).
  Rendering locally and sending the text to ``/completions`` (rather than calling
  ``/chat/completions``) keeps one request format for every server, gives the same prompt as
  in-process, and allows the teacher-forced re-scoring below, which needs the prompt text. With
  the tokenizer known, the server's own tokenization of the text is checked against the ids the
  in-process LLM reads before anything is generated, and the text adjusted (its BOS) or the
  difference named in the analysis' warnings (:mod:`mars_demo.models.served_prompt`);
* sampling is plain: ``top_k=0`` (off), ``min_p=0``, ``repeat_penalty=1`` (llama.cpp otherwise
  applies its defaults 40 / 0.05 / 1.1; vLLM accepts ``top_k=0`` since 0.9 and ignores the
  field it does not know); the request's stop strings ("." and newline for the paper prompt) are
  sent to the server and applied again to the returned tokens, exactly as in-process
  (:func:`mars_demo.models.decoding.cut_answer`);
* special tokens stay in the text (``skip_special_tokens=false``, no spaces around them), and with
  the served model's tokenizer known here the tokens come back as ids
  (``return_tokens_as_token_ids``), decoded here as in-process: a special token generated inside
  an answer ("<|endoftext|>") is part of its text and its tokens, as in-process
  (:mod:`mars_demo.models.completions`).

Log-probs must be the model's own (temperature 1). ``logprobs_mode``:

* ``"server"``: trust the log-probs returned with the sampled tokens;
* ``"teacher-forced"``: re-score every answer by a teacher-forced request (``echo`` of prompt +
  answer with ``logprobs``), whose prompt log-probs no sampling setting touches;
* ``"auto"`` (default): probe once per (temperature, top_p): the first step's top log-probs of a
  request at that temperature / top_p must equal those at temperature 1 / top_p 1. They do on
  servers that return raw log-probs (vLLM's current engine by default, llama-cpp-python's server:
  measured in tests/test_endpoint.py); otherwise the answers are re-scored by teacher forcing.

A server that says which log-probs it returns (vLLM's ``/server_info``, served in its
development mode only) and says anything but ``raw_logprobs`` is refused at load, unless
``logprobs_mode="teacher-forced"``; where it says nothing, the probe above decides.

The source used is each result's ``logprob_source``: ``"endpoint"`` (the server's sampled
log-probs) or ``"endpoint-teacher-forced"``.

Teacher forcing (re-scoring, and answers given as text) lives in :mod:`mars_demo.models.echo`
and checks the server's echo log-probs first. llama-cpp-python 0.3.36's fail that check (each
token gets the log-prob of the *next* position), so with that server teacher forcing is refused
with a message rather than returning wrong numbers; vLLM's pass it.

HTTP goes through ``httpx`` (already a dependency of gradio), not the ``openai`` client: the
requests carry server-specific fields (``top_k``, ``min_p``, ``repeat_penalty``), the raw JSON
of different servers must be checked field by field, and failures must become one clear message
without the client's hidden retries.

The API key is read from the environment variable *named* by ``api_key_env`` and sent as
``Authorization: Bearer``; it never appears in a message, a log line or a setting.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import os
import time
from typing import Any, Callable, Sequence

from ..answers import Answer
from ..errors import (
    InvalidModelOutput,
    ModelLoadError,
    OptionError,
    explain_load_error,
)
from ..recipes import Recipe
from ..settings import Settings, resolve_llm
from . import echo, gguf, next_token, prompts, served_prompt
from .completions import ServerChoice, parse_choice, to_answer
from .contract import (
    Backend,
    Capabilities,
    GenerationRequest,
    GenerationResult,
    Load,
    NextToken,
    Prompt,
    Unsupported,
)
from .server import (
    DEFAULT_TIMEOUT,
    ServerClient,
    check_logprobs_mode,
    normalize_url,
    served_logprobs_mode,
    served_model,
    stop_checker,
    wait_all,
)

LOGPROB_MODES = ("auto", "server", "teacher-forced")
SOURCE_SERVER = "endpoint"
SOURCE_TEACHER_FORCED = "endpoint-teacher-forced"

_MAX_WORKERS = 16


class EndpointLLM(ServerClient):
    """An LLM served by an OpenAI-compatible ``/v1/completions`` server (see module doc)."""

    quantized = False
    quantization = decoding = None  # the server's own
    #: how many top log-probs of the next token an extra LLM pass asks for (P(True))
    top_logprobs = next_token.SERVER_TOP_LOGPROBS

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
        super().__init__(url, api_key_env=api_key_env, timeout=timeout)
        self.model = model
        self.model_id = model
        self.preset = preset
        self.tokenizer = tokenizer
        self.tokenizer_id = tokenizer_id
        self.logprobs_mode = logprobs_mode
        self.notes: list[str] = []  # (the LLM contract) nothing to say about how it was loaded
        self._probe_cache: dict[tuple[float, float], bool] = {}
        #: the log-prob mode the server says it returns (vLLM in its development mode), or None
        self.server_logprobs_mode: str | None = None
        #: the server's tokenize route, once found (:mod:`.served_prompt`); None: not asked yet
        self.tokenize_route: str | None = None

    # ---- loading -------------------------------------------------------------------------
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
        one :class:`~mars_demo.errors.ModelLoadError` that says what to do.
        """
        llm = cls(url, model or "", api_key_env=api_key_env, timeout=timeout,
                  logprobs_mode=logprobs_mode, preset=preset)
        data = llm._request(llm.client, "GET", "/models", None, what="list its models")
        llm.server_logprobs_mode = served_logprobs_mode(llm.client, llm.base_url, llm._headers())
        if logprobs_mode != "teacher-forced":
            check_logprobs_mode(llm.server_logprobs_mode, llm.base_url)
        llm.model = llm.model_id = served_model(data, model, llm.base_url)
        if tokenizer:
            llm.tokenizer = _load_tokenizer(tokenizer)
            llm.tokenizer_id = tokenizer
        return llm

    # ---- prompts -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return prompts.has_chat_template(self.tokenizer)

    @property
    def bos_token_id(self) -> int | None:
        return self.tokenizer.bos_token_id if self.tokenizer is not None else None

    def default_prompt(self) -> str:
        return prompts.default_preset(self.preset, self.has_chat_template)

    def build_prompt(self, question: str, preset: str | None,
                     recipe: Recipe | None = None,
                     context: Sequence[dict[str, str]] = ()) -> Prompt:
        """The prompt for ``question``, as ``LLM.build_prompt`` builds it (the ``recipe``'s
        ``prompt_trailing_space`` and the chat ``context`` included;
        :func:`~mars_demo.models.prompts.build_text`).

        With the served model's tokenizer given, the prompt's text is the one the server reads
        as the ids the in-process LLM would read, and its ids are those the server reads: a
        difference the server's tokenization shows is named in the prompt's warnings
        (:mod:`~mars_demo.models.served_prompt`). Without it the ids are ``[]`` (the server
        tokenizes the text, unchecked)."""
        warnings: list[str] = []
        if preset is None and self.tokenizer is None and self.preset is None:
            warnings.append(
                f"The served model {self.model_id}'s tokenizer is not known (give its Hub id or "
                "directory with --llm), so the paper's few-shot prompt was used; an instruction "
                "model usually answers better with its chat prompt."
            )
        why = (f"the tokenizer {self.tokenizer_id} has no chat template"
               if self.tokenizer is not None
               else "give its Hub id or directory with --llm to use its chat template")
        preset, text, said = prompts.build_text(
            question, preset, recipe, self.tokenizer, self.preset,
            no_template=f"No chat template is known for the served model {self.model_id} "
            f"({why}), so the paper's few-shot prompt was used instead of the chat prompt.",
            context=context)
        warnings += said
        # The server reads control-token texts in the prompt as control tokens: refuse them.
        found = prompts.controls_in(question, self.tokenizer)
        if found:
            raise OptionError(
                f"the question contains {found[0]!r}, which the LLM server would read as a "
                "control token; remove it from the question"
            )
        if self.tokenizer is None:
            return Prompt(text, [], preset, warnings)
        # the ids the in-process LLM reads (the chat template writes its own special tokens);
        # the text sent is the one the server reads as them, or the difference is said
        local = list(self.tokenizer(text, add_special_tokens=preset == "paper")["input_ids"])
        reading = self.read_prompt(text, local)
        return Prompt(reading.text, reading.token_ids, preset, warnings + reading.warnings)

    def read_prompt(self, text: str, local_ids: list[int]) -> served_prompt.Reading:
        """The text to send for a prompt the local tokenizer reads as ``local_ids``, and the
        ids the server reads from it (:func:`~mars_demo.models.served_prompt.read_prompt`)."""
        return served_prompt.read_prompt(self, self.client, text, local_ids)

    # ---- generation ----------------------------------------------------------------------
    def generate(self, prompt: Prompt, request: GenerationRequest, *,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> GenerationResult:
        """The greedy answer and ``request.samples`` sampled answers, all requested at once
        (the greedy answer at temperature 0, sample ``i`` with seed ``seed + i``).

        ``top_k`` (0 = off), ``keep_stop`` and ``banned_strings`` as ``LLM.generate`` (the
        paper-code recipe): a kept stop string is not sent to the server, which would leave it
        out, but cut here with the stop kept and scored; a server cannot ban tokens, so banned
        strings end the answer instead (sent as stop strings), and each answer says so.

        The server gets the prompt's text. ``on_text`` receives the greedy answer once it is
        complete (no token streaming). ``should_stop`` is polled while the requests run; once
        True the requests are abandoned and :class:`~mars_demo.errors.GenerationCancelled` is
        raised. ``timings_s`` holds "generate" and "logprobs" (teacher-forced re-scoring)
        seconds; ``logprob_source`` says whether the server's log-probs were kept.
        """
        check = stop_checker(should_stop)
        check()
        t0 = time.perf_counter()
        # No `with` for the pool: leaving it would wait for requests abandoned on cancellation.
        pool = cf.ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, request.samples + 3))
        try:
            choices = self._send_all(pool, prompt.text, request, on_text, check)
            rescore = self._rescore_needed(request)
            built = {k: self._answer(choice, request, k) for k, choice in choices.items()}
            answers = {k: answer for k, (answer, _) in built.items()}
            t1 = time.perf_counter()
            if rescore:
                answers = echo.rescore_generated(self, self.client, pool, prompt.text, built,
                                                 check)
        except BaseException:
            # Abandon requests still running (cancelled, or another one failed): their threads
            # end with the server's answer or the timeout; nobody waits for them.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        greedy = answers.get("greedy")
        sampled = [answers[f"s{i}"] for i in range(request.samples)]
        self._check_finite(([greedy] if greedy is not None else []) + sampled)
        return GenerationResult(
            greedy=greedy,
            samples=sampled,
            logprob_source=SOURCE_TEACHER_FORCED if rescore else SOURCE_SERVER,
            timings_s={"generate": t1 - t0, "logprobs": time.perf_counter() - t1},
        )

    def _send_all(self, pool: cf.ThreadPoolExecutor, text: str, r: GenerationRequest,
                  on_text: Callable[[str], None] | None,
                  check: Callable[[], None]) -> dict[str, ServerChoice]:
        """The server's choice for the greedy answer ("greedy") and each sample ("s0"...), the
        requests sent at once (with the log-prob probe where :meth:`_probe_needed`, whose
        answer is kept); ``on_text`` gets the greedy answer's text as soon as it is here."""
        jobs: dict[str, cf.Future] = {}
        if r.greedy:
            jobs["greedy"] = pool.submit(self._complete, self.client,
                                         self._body(text, r, 0.0, 1.0, r.seed))
        for i in range(r.samples):
            jobs[f"s{i}"] = pool.submit(self._complete, self.client,
                                        self._body(text, r, r.temperature, r.top_p, r.seed + i))
        probe = self._probe_needed(r.temperature, r.top_p)
        if probe:
            jobs["probe"] = pool.submit(echo.raw_logprobs, self, text, r.temperature,
                                        r.top_p, r.seed)

        def on_done(name: str, fut: cf.Future) -> None:
            if name == "greedy" and on_text is not None:
                on_text(to_answer(fut.result(), r.stop_strings, limit=r.max_new_tokens,
                                  keep_stop=r.keep_stop)[0].text)

        results = wait_all(jobs, check, on_done)
        if probe:
            self._probe_cache[(r.temperature, r.top_p)] = results.pop("probe")
        return results

    def _body(self, text: str, r: GenerationRequest, temperature: float, top_p: float,
              seed: int) -> dict:
        """One answer's request: the stop strings the server applies (the banned strings too;
        a kept stop string is cut here, not there), and the top log-probs that give each
        token's entropy (and CCP's alternatives), as many as the server allows."""
        server_stops = [b for b in r.banned_strings if b] + (
            [] if r.keep_stop else list(r.stop_strings))
        return self.completion_body(text, max_tokens=r.max_new_tokens, temperature=temperature,
                                    top_p=top_p, seed=seed, stop=server_stops,
                                    logprobs=self.top_logprobs, top_k=r.top_k,
                                    **self._ids_field())

    def _answer(self, choice: ServerChoice, r: GenerationRequest, name: str):
        """(the :class:`Answer` of a server's choice, the top log-probs of its tokens): cut at
        the stop strings as in-process, the greedy answer's alternatives kept (CCP), and each
        answer saying that the banned strings ended it rather than being banned."""
        banned = [b for b in r.banned_strings if b]
        notes = [
            "The LLM server cannot ban tokens, so " + ", ".join(repr(b) for b in banned)
            + " ended the answer instead of being banned as in the published code."
        ] if banned else []
        return to_answer(choice, r.stop_strings, limit=r.max_new_tokens, keep_stop=r.keep_stop,
                         extra_warnings=notes,
                         alternatives=r.alternatives if name == "greedy" else 0)

    def _rescore_needed(self, r: GenerationRequest) -> bool:
        """Whether the answers' log-probs come from teacher forcing: asked for, or (``auto``)
        the probe found that the server's log-probs at this temperature / top_p are not raw."""
        if self.logprobs_mode == "auto":
            return not self._probe_cache.get((r.temperature, r.top_p), True)
        return self.logprobs_mode == "teacher-forced"

    def _check_finite(self, answers: list[Answer]) -> None:
        for answer in answers:
            if not all(math.isfinite(x) for x in answer.logprobs):
                raise InvalidModelOutput(
                    f"The LLM server returned invalid log-probs (NaN or infinity) for "
                    f"{self.model_id}, so no uncertainty can be computed; check the server's "
                    "model and its precision."
                )

    def generate_many(self, prompts: Sequence[Prompt], request: GenerationRequest, *,
                      should_stop: Callable[[], bool] | None = None,
                      concurrency: int = 16) -> list[GenerationResult]:
        """:meth:`generate` for several questions, ``concurrency`` questions' requests at once
        (each question's greedy and sample requests are concurrent too), so the server batches
        them (vLLM's continuous batching). Returns one result per prompt, in order; each holds
        exactly what :meth:`generate` returns for it (the same requests, the same seeds). When
        the log-prob probe is needed it runs once, first. The first failing question's error is
        raised and the others are abandoned. Each result's ``timings_s`` holds its equal share
        of the batch's wall-clock seconds under "generate".
        """
        prompts = list(prompts)
        if not prompts:
            return []
        check = stop_checker(should_stop)
        check()
        temperature, top_p = request.temperature, request.top_p
        if self._probe_needed(temperature, top_p):
            self._probe_cache[(temperature, top_p)] = echo.raw_logprobs(
                self, prompts[0].text, temperature, top_p, request.seed)
        t0 = time.perf_counter()
        pool = cf.ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(prompts))))
        try:
            jobs = {
                str(i): pool.submit(self.generate, prompt, request, should_stop=should_stop)
                for i, prompt in enumerate(prompts)
            }
            results = wait_all(jobs, check, None)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        share = {"generate": (time.perf_counter() - t0) / len(prompts)}
        out = [results[str(i)] for i in range(len(prompts))]
        for result in out:
            result.timings_s = dict(share)
        return out

    def teacher_forced(self, prompt: Prompt, answers: Sequence[Answer]) -> list[Answer]:
        """Token log-probs of answers given as text, by teacher forcing on the server (prompt +
        answer echoed with ``logprobs``), each tokenized as the model continues the prompt, as
        ``LLM.teacher_forced`` does; refused with a message by a server without correct echo
        log-probs (see :func:`mars_demo.models.echo.score_texts`)."""
        return echo.score_texts(self, prompt, answers)

    def next_token_logprob(self, text: str, target: str) -> NextToken:
        """The next token's log-prob after ``text``, from the server's top log-probs (the LLM
        contract; see :func:`mars_demo.models.next_token.served`)."""
        return next_token.served(self, text, target)

    def last_token_embeddings(self, prompt_ids: list[int], answers: Sequence[list[int]]
                              ) -> tuple[list[list[float]], int]:
        """A server returns no hidden states (the backend declares no ``embeddings``)."""
        raise Unsupported("an OpenAI-compatible server returns no hidden states")

    def completion_body(self, prompt: str, **kw) -> dict:
        """The JSON body of a ``/completions`` request for ``prompt`` (``kw``: its other
        fields), with plain sampling unless ``kw`` says otherwise."""
        body = {"model": self.model, "prompt": prompt, "n": 1, "stream": False,
                # plain sampling: llama.cpp's server would otherwise apply top-k 40, min-p 0.05
                # and a repeat penalty 1.1 (vLLM's defaults are already off)
                "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0,
                # vLLM: a special token generated inside an answer (say "<|endoftext|>") is in
                # the text as its own characters, as in-process, rather than left out of the
                # text while its token and offset still count; and no spaces around it
                "skip_special_tokens": False, "spaces_between_special_tokens": False}
        body.update(kw)
        if not body.get("stop"):
            body.pop("stop", None)
        return body

    def _ids_field(self) -> dict:
        """With the served model's tokenizer known here, ask for the answer's token ids (vLLM's
        ``return_tokens_as_token_ids``; llama.cpp's server ignores it and returns token texts),
        so that the answer is decoded exactly as in-process."""
        return {"return_tokens_as_token_ids": True} if self.tokenizer is not None else {}

    def _complete(self, client, body: dict) -> ServerChoice:
        data = self._request(client, "POST", "/completions", body, what="generate an answer")
        return parse_choice(data, self.base_url, self.tokenizer)

    def _probe_needed(self, temperature: float, top_p: float) -> bool:
        """Whether the log-prob probe must run for this temperature / top_p (``auto``, not
        both 1, not probed yet)."""
        return (self.logprobs_mode == "auto" and not (temperature == 1.0 and top_p == 1.0)
                and (temperature, top_p) not in self._probe_cache)



def _load_tokenizer(source: str):
    """The served model's tokenizer: a Hub id or folder, or the GGUF file the server serves
    (its own BOS rule and end token, :func:`~mars_demo.models.gguf.load_tokenizer`)."""
    from transformers import AutoTokenizer

    try:
        packed = gguf.gguf_file(source)
        if packed is not None:
            return gguf.load_tokenizer(packed)
        return AutoTokenizer.from_pretrained(os.path.expanduser(source))
    except Exception as err:  # say what to do, as for any model
        raise explain_load_error(source, "tokenizer of the served LLM", err) from err


# ---- the backend ----------------------------------------------------------------------------


def _load(s: Settings, cuda: bool) -> Load:
    """The client of ``--llm-endpoint``'s server, once per URL, model, key variable, tokenizer
    (``--llm``, which names the served model's tokenizer: its chat template) and timeout."""
    tokenizer, preset = resolve_llm(s.llm, cuda) if s.llm else (None, None)
    key = ("endpoint", normalize_url(s.llm_endpoint), s.llm_model, s.llm_api_key_env, tokenizer,
           s.llm_timeout)
    return Load(key, "LLM server", s.llm_endpoint,
                lambda: EndpointLLM.load(s.llm_endpoint, s.llm_model, s.llm_api_key_env,
                                         tokenizer=tokenizer, preset=preset,
                                         timeout=s.llm_timeout))


def _check(s: Settings, cuda: bool) -> None:
    if not s.llm_endpoint:
        raise OptionError("the server backend needs the server's URL: give --llm-endpoint URL")


def _describe(s: Settings, cuda: bool, loaded) -> dict:
    """The served model's name: the server's once loaded, else ``--llm-model``'s."""
    served = loaded.model_id if loaded is not None else s.llm_model
    return {"llm": f"{served or 'the model'} (served over HTTP)", "llm_preset": None,
            "cpu_fallback": False, "load_in_4bit": False}


#: An OpenAI-compatible server: chosen by ``--llm-endpoint``.
BACKEND = Backend(
    name="server",
    summary="an OpenAI-compatible server at --llm-endpoint, such as vLLM's or llama.cpp's; "
    "--llm names the served model's tokenizer",
    chosen="with --llm-endpoint",
    claims=lambda s: bool(s.llm_endpoint),
    fields=("llm", "llm_endpoint", "llm_model", "llm_api_key_env", "llm_timeout"),
    capabilities=Capabilities(full_distribution=False, prompt_ids=False, embeddings=False,
                              batching=True, teacher_forcing=True, next_token=True),
    load=_load,
    # the server holds the model; a tokenizer named with --llm is loaded here
    named=lambda s, cuda: [("LLM's tokenizer", "--llm", resolve_llm(s.llm, False)[0])]
    if s.llm else [],
    model_name=lambda s, cuda: s.llm_model,
    describe=_describe,
    check=_check,
)
