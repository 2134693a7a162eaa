"""A GGUF file run by llama.cpp in this process (llama-cpp-python's low-level API): the
``llama.cpp`` backend, which takes ``--llm FILE.gguf`` wherever llama-cpp-python is installed
(the ``llama-cpp`` extra, ``pip install -e ".[llama-cpp]"``); without it transformers loads the
file, dequantized, and every analysis says so (:mod:`mars_demo.models.llm`).

:class:`LlamaCppLLM` satisfies :class:`~mars_demo.models.contract.LanguageModel`:

* the file is memory-mapped (it loads in about a second) and its weights are used as the file
  holds them, with llama.cpp's own arithmetic: the answers and log-probs are those of llama.cpp's
  own completion of the same prompt (with flash attention, which this backend uses);
* the prompt is built by the shared code (:func:`~mars_demo.models.prompts.build_text`), the
  chat template being the one the file carries, and read by the file's own tokenizer through
  llama.cpp, its BOS added where the file says (:class:`~.gguf_vocab.GGUFVocab`);
* the greedy answer and the samples are decoded together, one ``llama_decode`` per step, their
  log-probs, entropies and alternatives read from llama.cpp's logits in place
  (:mod:`~mars_demo.models.llama_run`); the greedy text streams to ``on_text``, ``should_stop``
  is asked after every step;
* answers given as text are scored by a teacher-forced pass, and one next token's log-prob is
  read after a text (P(True)). Hidden states are not given (llama.cpp's API returns the last
  layer's only, and EigenScore reads the middle one): the backend declares no ``embeddings``,
  and the engine says so where EigenScore is asked for.

llama.cpp's own log lines are silenced (llama-cpp-python's logger set to errors only) unless a
level is set on the ``llama-cpp-python`` logger already. Importing this module imports
neither llama_cpp nor numpy.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..answers import Answer, check_token_ids
from ..errors import GenerationCancelled, InvalidModelOutput, ModelLoadError, OptionError
from ..recipes import Recipe
from ..settings import Settings
from . import gguf, llm_options, prompts
from .contract import (
    SOURCE_GENERATION,
    Backend,
    Capabilities,
    GenerationRequest,
    GenerationResult,
    Load,
    NextToken,
    Prompt,
    Unsupported,
)
from .decoding import IncrementalDecoder, TextStreamer, build_answer, cut_answer
from .next_token import target_token
from .sources import check_source

NAME = "llama.cpp"
#: how to install it: the project's ``llama-cpp`` extra (pyproject.toml), by its pin
INSTALL = ('pip install "llama-cpp-python==0.3.36" (the llama-cpp extra: '
           'pip install -e ".[llama-cpp]")')


@functools.lru_cache(maxsize=1)
def _library() -> tuple[Any, str]:
    """(the ``llama_cpp`` module, "") once it imports, else (None, why not)."""
    try:
        import llama_cpp
    except Exception as err:  # not installed, or its shared library does not load here
        return None, f"{type(err).__name__}: {err}"
    quiet = logging.getLogger("llama-cpp-python")
    if quiet.level == logging.NOTSET:
        quiet.setLevel(logging.ERROR)  # llama.cpp's load and context log lines
    llama_cpp.llama_backend_init()
    return llama_cpp, ""


def available() -> bool:
    """Whether llama-cpp-python imports here (tried once)."""
    return _library()[0] is not None


def unavailable_reason() -> str:
    return _library()[1]


def fallback_note(path: Path) -> str:
    """What an analysis of a GGUF file says when transformers ran it because llama-cpp-python
    does not import here."""
    return (f"llama-cpp-python does not import here ({unavailable_reason()}), so transformers "
            f"loaded {path.name} instead of llama.cpp: it took longer to load and runs slower; "
            f"{INSTALL} to run GGUF files with llama.cpp.")


class LlamaCppLLM:
    """A GGUF file loaded by llama.cpp (load it through
    :func:`mars_demo.models.registry.llm_for`, which caches it)."""

    quantized = False  # no 4-bit loading of this project's: the file's own weights
    quantization = None
    decoding = None  # llama.cpp's own
    preset = None

    def __init__(self, lib: Any, model: Any, path: Path, model_id: str) -> None:
        from .gguf_vocab import GGUFVocab
        from .llama_run import Decoder

        self._lib, self._model = lib, model
        self.path = path
        self.model_id = model_id
        self.tokenizer = GGUFVocab(lib, model)
        self.n_vocab = len(self.tokenizer)
        self.decoder = Decoder(lib, model, self.n_vocab)
        #: warnings every analysis of this LLM carries: none, its numbers are llama.cpp's own
        self.notes: list[str] = []

    @classmethod
    def load(cls, path: Path, model_id: str) -> "LlamaCppLLM":
        """Memory-map the GGUF file ``path`` (uncached; the registry caches)."""
        lib, why = _library()
        if lib is None:
            raise ModelLoadError(f"the {NAME} backend needs llama-cpp-python, which does not "
                                 f"import here ({why}): {INSTALL}, or drop --llm-backend "
                                 f"{NAME} to let transformers load the file (dequantized)")
        params = lib.llama_model_default_params()
        params.load_mode = lib.LLAMA_LOAD_MODE_MMAP
        params.n_gpu_layers = 0
        model = lib.llama_model_load_from_file(str(path).encode("utf-8"), params)
        if not model:
            raise ModelLoadError(f"llama.cpp could not load {path} (not a GGUF file it reads, "
                                 "or an architecture it does not know)")
        return cls(lib, model, path, model_id)

    @property
    def n_params(self) -> int:
        """The model's parameters, as llama.cpp counts them."""
        return int(self._lib.llama_model_n_params(self._model))

    def close(self) -> None:
        """Free the context and the model (the registry drops it; at exit)."""
        self.decoder.close()
        if self._model is not None:
            self._lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # pragma: no cover - at exit
        try:
            self.close()
        except Exception:
            pass

    # ---- prompts -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return prompts.has_chat_template(self.tokenizer)

    @property
    def bos_token_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    @property
    def eos_ids(self) -> set[int]:
        """The tokens that end an answer: llama.cpp's end-of-generation set for the file."""
        return set(self.tokenizer.eog_ids)

    def default_prompt(self) -> str:
        return prompts.default_preset(None, self.has_chat_template)

    def build_prompt(self, question: str, preset: str | None,
                     recipe: Recipe | None = None,
                     context: Sequence[dict[str, str]] = ()) -> Prompt:
        """The prompt for ``question`` as every in-process LLM builds it
        (:func:`~mars_demo.models.prompts.in_process`; the chat template the file carries, with
        ``context``, the messages before the question), its ids as llama.cpp reads the text
        (the BOS in front of the paper prompt where the file says; a control token's text inside
        the question read as plain text)."""
        preset, text, ids, warnings = prompts.in_process(
            question, preset, recipe, self.tokenizer, None, self.model_id,
            f"{self.model_id} carries no chat template, so the paper's few-shot prompt was used "
            "instead of the chat prompt.", context)
        return Prompt(text, list(ids), preset, warnings)

    # ---- generation ----------------------------------------------------------------------
    def banned_token_ids(self, strings: Sequence[str]) -> list[int]:
        """Ids of every token whose text holds one of ``strings`` (never an end-of-generation
        token), as :meth:`mars_demo.models.llm.LLM.banned_token_ids` finds them."""
        strings = tuple(s for s in strings if s)
        if not strings:
            return []
        cache = self.__dict__.setdefault("_banned_cache", {})
        if strings not in cache:
            eog = self.tokenizer.eog_ids
            cache[strings] = [i for i, piece in enumerate(self.tokenizer.pieces())
                              if i not in eog and any(s in piece.decode("utf-8", "replace")
                                                      for s in strings)]
        return list(cache[strings])

    def generate(self, prompt: Prompt, request: GenerationRequest, *,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> GenerationResult:
        """The greedy answer and ``request.samples`` samples, decoded together
        (:func:`~mars_demo.models.llama_run.generate`); the greedy text streams to ``on_text``
        as it grows and is reported complete once its row ends. Same seed and request, same
        answers."""
        streamer = (TextStreamer(self.tokenizer, on_text, eos_ids=self.eos_ids,
                                 stop_strings=request.stop_strings, keep_stop=request.keep_stop)
                    if on_text and request.greedy else None)
        result = self._run([prompt], request, should_stop, streamer)[0]
        if streamer is not None:
            streamer.end()
        return result

    def generate_many(self, prompts: Sequence[Prompt], request: GenerationRequest, *,
                      should_stop: Callable[[], bool] | None = None
                      ) -> list[GenerationResult]:
        """:meth:`generate` for several questions, every row of every question in one batch
        per step; each question's answers are those it gets alone (each sample has its own
        seeded generator), up to the float rounding of another batch. Nothing streams; each
        result's ``timings_s`` is its equal share of the batch's."""
        if not prompts:
            return []
        return self._run(list(prompts), request, should_stop, None)

    def _run(self, prompts_: list[Prompt], request: GenerationRequest, should_stop,
             streamer: TextStreamer | None) -> list[GenerationResult]:
        from .llama_run import Sampling, generate

        if request.samples < 1 and not request.greedy:
            raise ValueError("a generation request must ask for the greedy answer or samples")
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        for p in prompts_:
            check_token_ids(list(p.token_ids), self.n_vocab)
            if not p.token_ids:
                raise OptionError("the prompt has no tokens")
        n = request.samples + (1 if request.greedy else 0)
        how = Sampling(n=n, greedy=request.greedy, temperature=request.temperature,
                       top_k=request.top_k, top_p=request.top_p, seed=request.seed,
                       max_new_tokens=request.max_new_tokens,
                       banned=tuple(self.banned_token_ids(request.banned_strings)),
                       alternatives=request.alternatives)
        ends = _Ends(self.tokenizer, self.eos_ids, request.stop_strings, request.keep_stop,
                     len(prompts_) * n)
        on_token = None
        if streamer is not None:
            def on_token(row, token: int) -> None:
                if row.seq == 0:
                    streamer.push(token)
        t0 = time.perf_counter()
        with self.decoder.lock:
            rows, reading = generate(self.decoder, [p.token_ids for p in prompts_], how,
                                     ended=ends, on_token=on_token, should_stop=should_stop,
                                     cancelled=GenerationCancelled)
        t1 = time.perf_counter()
        answers = [self._answer(r, request) for r in rows]
        t2 = time.perf_counter()
        share = {"generate": (t1 - t0 - reading) / len(prompts_),
                 "logprobs": (reading + t2 - t1) / len(prompts_)}
        first = 1 if request.greedy else 0
        return [GenerationResult(greedy=answers[q * n] if request.greedy else None,
                                 samples=answers[q * n + first:(q + 1) * n],
                                 logprob_source=SOURCE_GENERATION, timings_s=dict(share))
                for q in range(len(prompts_))]

    def _answer(self, row, request: GenerationRequest) -> Answer:
        """The :class:`Answer` of a generated row, cut and trimmed as every backend's are, with
        its tokens' statistics (and those of the end token it stopped on)."""
        answer = build_answer(self.tokenizer, row.ids, row.logprobs, self.eos_ids,
                              request.stop_strings, request.keep_stop)
        _check_finite(self.model_id, answer.logprobs)
        keep = len(answer.logprobs)
        answer.token_stats = {"entropy": row.entropy[:keep], "kl_uniform": row.kl_uniform[:keep]}
        if row.alternatives is not None:
            answer.token_stats["alternatives"] = [self._alternatives(s)
                                                  for s in row.alternatives[:keep]]
        if answer.end_token is not None:
            answer.end_token.update(entropy=row.entropy[keep], kl_uniform=row.kl_uniform[keep])
            if row.alternatives is not None:
                answer.end_token["alternatives"] = self._alternatives(row.alternatives[keep])
        return answer

    def _alternatives(self, step) -> list[list]:
        return [[self.tokenizer.decode([a]), lp] for a, lp in step]

    # ---- teacher forcing -----------------------------------------------------------------
    def teacher_forced(self, prompt: Prompt, answers: Sequence[Answer]) -> list[Answer]:
        """Token log-probs of answers given as text, each tokenized as the model continues the
        prompt (:func:`~mars_demo.models.prompts.answer_ids`) and read by llama.cpp after the
        prompt's ids (:func:`~mars_demo.models.llama_run.forced`), with each position's entropy
        and KL from uniform; an answer whose text the tokenizer does not reproduce exactly is
        scored as the tokenizer reads it, and says so."""
        from .llama_run import forced

        check_token_ids(list(prompt.token_ids), self.n_vocab)
        encoded = prompts.answer_ids(self.tokenizer, prompt, answers)
        with self.decoder.lock:
            read = forced(self.decoder, list(prompt.token_ids), encoded)
        out: list[Answer] = []
        for a, ids, got in zip(answers, encoded, read):
            _check_finite(self.model_id, got["logprobs"])
            scored = build_answer(self.tokenizer, ids, got["logprobs"], eos_ids=set(),
                                  stop_strings=())
            keep = len(scored.logprobs)
            scored.token_stats = {"entropy": got["entropy"][:keep],
                                  "kl_uniform": got["kl_uniform"][:keep]}
            notes = list(a.warnings)
            if scored.text != a.text.strip():
                notes.append(f"The LLM's tokenizer reads the given text {a.text!r} as "
                             f"{scored.text!r}; that is what was scored.")
            scored.finish_reason = a.finish_reason
            scored.warnings = notes
            out.append(scored)
        return out

    def next_token_logprob(self, text: str, target: str) -> NextToken:
        """The log-prob that the token after ``text`` (its ids as llama.cpp reads it, the BOS
        where the file says) is the first token of ``target``."""
        from .llama_run import last_logits

        token_id, warnings = target_token(self.tokenizer, target)
        ids = self.tokenizer.encode(text)
        with self.decoder.lock:
            step = last_logits(self.decoder, ids)
        value = step.logprob(0, token_id)
        _check_finite(self.model_id, [value])
        return NextToken(value, self.tokenizer.decode([token_id]), warnings)

    def last_token_embeddings(self, prompt_ids: list[int], answers: Sequence[list[int]]
                              ) -> tuple[list[list[float]], int]:
        """Not given (the backend declares no ``embeddings``; see the module doc)."""
        raise Unsupported("the llama.cpp backend returns no middle-layer hidden states")


class _Ends:
    """Whether a row ends after a token: an end-of-generation token, or a stop string in its
    text so far (each row's text decoded as it grows)."""

    def __init__(self, tokenizer, eos_ids: set[int], stop_strings: Sequence[str],
                 keep_stop: bool, rows: int) -> None:
        self.eos_ids, self.stops, self.keep_stop = eos_ids, tuple(s for s in stop_strings if s), \
            keep_stop
        self.decoders = [IncrementalDecoder(tokenizer) for _ in range(rows)] if self.stops \
            else []
        self.pieces: list[list[str]] = [[] for _ in range(rows)]

    def __call__(self, row, token: int) -> bool:
        if token in self.eos_ids:
            return True
        if not self.stops:
            return False
        piece = self.decoders[row.seq].push(token)
        if not piece:
            return False
        self.pieces[row.seq].append(piece)
        return cut_answer(self.pieces[row.seq], self.stops, self.keep_stop)[1] is not None


def _check_finite(model_id: str, logprobs: Sequence[float]) -> None:
    if not all(math.isfinite(x) for x in logprobs):
        raise InvalidModelOutput(f"The LLM {model_id} produced invalid scores (NaN or "
                                 "infinity), so no uncertainty can be computed.")


# ---- the backend ----------------------------------------------------------------------------


def _gguf(s: Settings) -> Path | None:
    """The GGUF file ``--llm`` names (a file, or a folder holding one), else None."""
    if not s.llm:
        return None
    try:
        return gguf.gguf_file(s.llm)
    except ModelLoadError:  # a folder of several: the loading says which to name
        return None


def _claims(s: Settings) -> bool:
    return not s.llm_endpoint and _gguf(s) is not None and available()


def _load(s: Settings, cuda: bool) -> Load:
    """The GGUF file ``--llm`` names, memory-mapped once."""
    check_source(s.llm or "", "LLM")  # a path that is not there says so
    path = _gguf(s) or gguf.gguf_file(s.llm or "")  # a folder of several GGUF files says so
    if path is None:
        raise OptionError(f"the {NAME} backend runs a GGUF file; --llm names {s.llm!r}")
    return Load(("llama.cpp", str(path.resolve())), "LLM", s.llm,
                lambda: LlamaCppLLM.load(path, s.llm))


def _check(s: Settings, cuda: bool) -> None:
    """Refuse what this backend cannot run, before anything loads: a server's URL, an LLM that
    is no GGUF file, the options of transformers' loading, and a machine without
    llama-cpp-python."""
    if s.llm_endpoint:
        raise OptionError(f"--llm-endpoint names a server, which the {NAME} backend does not "
                          f"use: drop --llm-backend {NAME} or --llm-endpoint")
    if _gguf(s) is None and not (s.llm and gguf.named_gguf(s.llm)):
        raise OptionError(f"the {NAME} backend runs a GGUF file (--llm FILE.gguf); --llm names "
                          f"{s.llm!r}")
    if s.load_in_4bit or (s.quantization, s.decoding) != (llm_options.NF4,
                                                          llm_options.DYNAMIC):
        raise OptionError(f"--load-in-4bit, --quantization and --decoding are options of the "
                          f"transformers backend; the {NAME} backend runs the GGUF file's own "
                          "weights: drop them, or add --llm-backend transformers")
    if not available():
        raise ModelLoadError(f"the {NAME} backend needs llama-cpp-python, which does not import "
                             f"here ({unavailable_reason()}): {INSTALL}")


def _describe(s: Settings, cuda: bool, loaded) -> dict:
    return {"llm": s.llm, "llm_preset": None, "cpu_fallback": False, "load_in_4bit": False}


#: llama.cpp in this process: chosen for a GGUF file where llama-cpp-python is installed.
BACKEND = Backend(
    name=NAME,
    summary="llama.cpp in this process (llama-cpp-python): a GGUF file, memory-mapped, its "
    "quantized weights computed as llama.cpp computes them",
    chosen="for --llm FILE.gguf where llama-cpp-python is installed",
    claims=_claims,
    fields=("llm",),
    capabilities=Capabilities(full_distribution=True, prompt_ids=True, embeddings=False,
                              batching=True, teacher_forcing=True, next_token=True),
    load=_load,
    named=lambda s, cuda: [("LLM", "--llm", s.llm)] if s.llm else [],
    model_name=lambda s, cuda: s.llm,
    describe=_describe,
    check=_check,
)
