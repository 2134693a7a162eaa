"""The in-process LLM (Hugging Face transformers): loading (4-bit NF4 on CUDA; the other options
in :mod:`~mars_demo.models.llm_options`), prompt token ids, generation and token log-probs. It
satisfies :class:`~mars_demo.models.contract.LanguageModel`, and :data:`BACKEND` declares it as
the ``transformers`` backend (:mod:`mars_demo.models.backends`), the one for every LLM no other
backend claims.

The greedy answer and the samples come from ONE batched ``generate`` call: row 0 takes the argmax
at every step (:func:`greedy_first_row`), the other rows sample. Token log-probs come from the raw
logits that ``generate`` returns (``output_logits=True``), taken at temperature 1: no extra forward
pass of the LLM is ever made. The prompt goes through the model once for all the rows
(:func:`~mars_demo.models.llm_options.shared_prompt_cache`), not once per row. Character
offsets of every token come from an incremental decoder (:mod:`mars_demo.models.decoding`), so
the answer's text and its tokens always line up.

On CPU in float32 the greedy row gives the same tokens as a stand-alone greedy run (log-probs equal
to float rounding; tested). On a GPU in bf16/fp16 a batch of 6 rounds differently from a batch of
1, so at a near-tie between two tokens the greedy row may take the other one.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable, Sequence

from ..answers import Answer, check_token_ids
from ..errors import GenerationCancelled, InvalidModelOutput, OptionError
from ..recipes import Recipe
from ..settings import CPU_DEFAULT_PRESET, LLM_PRESETS, LLMPreset, Settings, resolve_llm
from . import distributions, forced, gguf, llm_options, next_token, prompts
from .contract import (
    SOURCE_GENERATION,
    Backend,
    Capabilities,
    GenerationRequest,
    GenerationResult,
    Load,
    NextToken,
    Prompt,
)
from .decoding import TextStreamer, build_answer
from .llm_options import greedy_first_row, stop_criterion  # noqa: F401  (their old home)
from .sources import check_source


class LLM:
    """A causal LM with its tokenizer (load it through :func:`mars_demo.models.registry.llm_for`,
    which caches it)."""

    def __init__(self, model, tokenizer, model_id: str, preset: LLMPreset | None, quantized: bool,
                 quantization: str | None = None, decoding: str = llm_options.DYNAMIC,
                 notes: Sequence[str] = ()):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.preset = preset
        self.quantized = quantized
        #: the 4-bit weights ("nf4", "torchao-int4"), None when unquantized
        self.quantization = (quantization or llm_options.NF4) if quantized else None
        self.decoding = decoding  # "dynamic" or "static-compiled" (llm_options)
        #: forward passes made before ``generate``: the prompt's prefill shared by the rows
        self.prefix_passes = 0
        self.device = next(model.parameters()).device
        #: warnings every analysis of this LLM carries (a GGUF file's weights were dequantized)
        self.notes = list(notes)

    @classmethod
    def from_pretrained(cls, source: str, model_id: str, preset: LLMPreset | None = None,
                        load_in_4bit: bool | None = None, quantization: str = "nf4",
                        decoding: str = "dynamic") -> "LLM":
        """Load the model and tokenizer saved in ``source`` (a directory or Hub id), uncached:
        4-bit on CUDA unless ``load_in_4bit`` says otherwise (``quantization``: bitsandbytes NF4
        or torchao int4), bf16/fp16 on CUDA, float32 on CPU; ``decoding`` as
        :mod:`~mars_demo.models.llm_options` says. ``source`` may also be a GGUF file (or a
        folder holding one, :func:`~mars_demo.models.gguf.gguf_file`): its weights dequantized
        by transformers, which every analysis then says (:attr:`notes`). Options that cannot run
        here raise :class:`~mars_demo.errors.ModelLoadError` before anything loads; other errors
        are transformers' own (the registry turns them into messages)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cuda = torch.cuda.is_available()
        quantize = cuda if load_in_4bit is None else load_in_4bit
        llm_options.check(quantization, decoding, bool(quantize))
        kwargs = llm_options.load_kwargs(quantization if quantize else None, cuda)
        notes: list[str] = []
        packed = gguf.gguf_file(source)
        if packed is not None:
            model, tokenizer, meta = gguf.load(packed, **kwargs)
            notes.append(gguf.dequantized_note(packed, meta, model,
                                               quantization if quantize else None))
            from . import llama_cpp

            if not llama_cpp.available():  # the fallback: said, as every fallback is
                notes.append(llama_cpp.fallback_note(packed))
        else:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        model.eval()
        return cls(model, tokenizer, model_id, preset, bool(quantize), quantization, decoding,
                   notes)

    # ---- prompts -------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return prompts.has_chat_template(self.tokenizer)

    @property
    def bos_token_id(self) -> int | None:
        return getattr(self.tokenizer, "bos_token_id", None)

    def default_prompt(self) -> str:
        return prompts.default_preset(self.preset, self.has_chat_template)

    def build_prompt(self, question: str, preset: str | None,
                     recipe: Recipe | None = None,
                     context: Sequence[dict[str, str]] = ()) -> Prompt:
        """The prompt for ``question`` (see :class:`~mars_demo.models.contract.Prompt`): the
        paper's few-shot prompt, ending as the ``recipe`` says (``prompt_trailing_space``), or
        the chat template's (with ``context``, the messages before the question). A chat prompt
        asked for without a chat template becomes the paper prompt, with a warning
        (:func:`~mars_demo.models.prompts.build_text`)."""
        preset, text, ids, warnings = prompts.in_process(
            question, preset, recipe, self.tokenizer, self.preset, self.model_id,
            f"{self.model_id} has no chat template, so the paper's few-shot prompt was used "
            "instead of the chat prompt.", context)
        return Prompt(text, list(ids), preset, warnings)

    @property
    def eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        if ids is None:
            return set()
        return {int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])}

    @property
    def pad_token_id(self) -> int:
        """The id that pads rows: the tokenizer's, else the smallest end-of-sequence id."""
        pad = self.tokenizer.pad_token_id
        if pad is None:
            eos = self.eos_ids
            pad = min(eos) if eos else 0
        return int(pad)

    # ---- generation ----------------------------------------------------------------------
    def banned_token_ids(self, strings: Sequence[str]) -> list[int]:
        """Ids of every vocabulary token whose text contains one of ``strings`` (never an
        end-of-sequence id): banning them keeps those strings out of generated text, whatever
        the tokenizer (byte-level BPE merges such as ".\n", SentencePiece byte tokens such as
        <0x0A>, a space-prefixed ":" ...). The published MARS code banned the ids of ":" and of
        the newline token; this bans every token that would put one of them in the text."""
        strings = tuple(s for s in strings if s)
        if not strings:
            return []
        cache = self.__dict__.setdefault("_banned_cache", {})
        if strings not in cache:
            n = len(self.tokenizer)
            texts = self.tokenizer.batch_decode(
                [[i] for i in range(n)], skip_special_tokens=False,
                clean_up_tokenization_spaces=False,
            )
            eos = self.eos_ids
            cache[strings] = [
                i for i, text in enumerate(texts)
                if i not in eos and any(s in text for s in strings)
            ]
        return list(cache[strings])

    def generate_rows(self, prompt_ids, *, n: int, sample: bool, temperature: float,
                      top_p: float, max_new_tokens: int, stop_strings, top_k: int = 0,
                      greedy_row: bool = False, banned_ids: Sequence[int] = (), streamer=None,
                      should_stop=None):
        """ONE ``model.generate`` call: ``n`` rows continuing the prompt; returns (new ids,
        raw logits). Every answer of :meth:`generate` and :meth:`generate_many` comes from this
        call, so it is also the seam where tests put chosen token ids in place of the model's.

        ``sample=False``: greedy rows. ``sample=True``: sampled rows (temperature, top-p, top-k;
        0 = off), except row 0 when ``greedy_row``: it takes the argmax at every step
        (:func:`greedy_first_row`), so one batched call makes the greedy answer and ``n - 1``
        samples. The raw logits (``output_logits``) are never changed by either, so log-probs
        read from them are the model's own at temperature 1.

        ``prompt_ids`` may also be a list of several prompts (several questions): they are
        left-padded to one width (attention mask 0 on the padding; the model's position ids
        follow the mask), each gets ``n`` consecutive rows, and with ``greedy_row`` the first
        row of each question's block is greedy. New ids start at the same column for all rows.
        """
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        many = bool(prompt_ids) and isinstance(prompt_ids[0], (list, tuple))
        rows = [list(p) for p in prompt_ids] if many else [list(prompt_ids)]
        width = max(len(p) for p in rows)
        pad = self.pad_token_id
        if len(rows) == 1:
            input_ids = torch.tensor(rows, device=self.device)
            attention_mask = torch.ones_like(input_ids)
        else:  # left padding: every prompt ends at the last column, where generation starts
            input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
            attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, p in enumerate(rows):
                input_ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
                attention_mask[i, width - len(p):] = 1
            input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        kwargs = dict(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=pad,
            streamer=streamer,
        )
        if sample:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k)
            if greedy_row:
                kwargs.update(logits_processor=LogitsProcessorList([greedy_first_row(n)]))
        else:
            kwargs.update(do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None)
        if banned_ids:
            kwargs.update(bad_words_ids=[[int(i)] for i in banned_ids])
        if stop_strings:
            kwargs.update(stop_strings=list(stop_strings), tokenizer=self.tokenizer)
        if should_stop is not None:
            kwargs.update(stopping_criteria=StoppingCriteriaList([stop_criterion(should_stop)]))
        kwargs.update(llm_options.generate_kwargs(self.decoding, self.model))
        with torch.inference_mode():
            cache = llm_options.shared_prompt_cache(self.model, input_ids, attention_mask, n,
                                                    self.decoding)
            if cache is not None:
                self.prefix_passes += 1
                kwargs.update(past_key_values=cache)
            out = self.model.generate(**kwargs)
        llm_options.check_compiled(self.model, self.decoding)
        new_ids = out.sequences[:, input_ids.shape[1] :]
        return new_ids, out.logits

    @staticmethod
    def token_logprobs(new_ids, logits) -> "list[list[float]]":
        """log P(chosen token) at temperature 1 from the raw logits of each generation step."""
        return distributions.token_stats(new_ids, logits)[0]

    def generate(self, prompt: Prompt, request: GenerationRequest, *,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> GenerationResult:
        """The greedy answer and ``request.samples`` sampled answers, in ONE batched
        ``generate`` call (:meth:`generate_rows`).

        Row 0 of the batch is the greedy answer (the argmax at every step, the same tokens as a
        stand-alone greedy run up to floating-point rounding), rows 1.. are the samples. Same
        seed and request, same answers. The greedy answer streams to ``on_text`` token by token
        and is reported complete (its final text) as soon as its row ends, while the samples may
        go on. Stop strings and ``max_new_tokens`` apply per row; an end-of-sequence token ends
        a row. Banned strings never appear: tokens containing them are never generated
        (:meth:`banned_token_ids`).

        A request for the greedy answer alone (``samples=0``) is one greedy call of one row; one
        for the samples alone (``greedy=False``) samples every row.

        ``should_stop`` is asked after every generated token; once it returns True generation
        ends at that token and :class:`~mars_demo.errors.GenerationCancelled` is raised."""
        streamer = (
            TextStreamer(self.tokenizer, on_text, eos_ids=self.eos_ids,
                         stop_strings=request.stop_strings, keep_stop=request.keep_stop)
            if on_text and request.greedy else None
        )
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        return self._one_call([prompt.token_ids], request, should_stop, streamer)[0]

    def generate_many(self, prompts: Sequence[Prompt], request: GenerationRequest, *,
                      should_stop: Callable[[], bool] | None = None
                      ) -> list[GenerationResult]:
        """:meth:`generate` for several questions in ONE batched ``generate`` call.

        Returns one result per prompt, in order. The prompts are left-padded to one width (with
        their attention mask); each question gets ``samples + 1`` consecutive rows, the first of
        which is its greedy answer (:func:`greedy_first_row` with a block of ``samples + 1``).
        Stop strings, end-of-sequence tokens and ``max_new_tokens`` end each row on its own, as
        in :meth:`generate`; log-probs are read from the raw logits at temperature 1, as there.
        Nothing streams.

        A question's greedy answer is the same as :meth:`generate` gives it alone (up to float
        rounding: another batch adds up in another order). Its samples are reproducible for
        the same seed, request and the same batch (the same prompts in the same order), but
        may differ from those it gets alone or in another batch: the random draws are shared by
        all rows of the batch. Each result's ``timings_s`` is its equal share of the batch's.
        """
        if not prompts:
            return []
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        return self._one_call([p.token_ids for p in prompts], request, should_stop)

    def _one_call(self, prompts_ids: list[list[int]], request: GenerationRequest, should_stop,
                  streamer=None) -> list[GenerationResult]:
        """ONE :meth:`generate_rows` call for the prompts: for each, its greedy row (unless
        ``request.greedy`` is False) then the sampled rows; log-probs from the raw logits."""
        import torch
        from transformers import set_seed

        if request.samples < 1 and not request.greedy:
            raise ValueError("a generation request must ask for the greedy answer or samples")
        t0 = time.perf_counter()
        set_seed(request.seed)
        torch.manual_seed(request.seed)
        first = 1 if request.greedy else 0
        n = request.samples + first
        ids, logits = self.generate_rows(
            [list(p) for p in prompts_ids], n=n, sample=request.samples > 0,
            greedy_row=request.greedy, temperature=request.temperature, top_p=request.top_p,
            top_k=request.top_k, max_new_tokens=request.max_new_tokens,
            stop_strings=request.stop_strings,
            banned_ids=self.banned_token_ids(request.banned_strings), should_stop=should_stop,
            streamer=streamer,
        )
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        t1 = time.perf_counter()
        greedy_rows = range(0, ids.shape[0], n) if request.greedy else ()
        lps, stats = distributions.token_stats(ids, logits, request.alternatives, greedy_rows)
        answers = self._build_rows([(ids[i].tolist(), lps[i]) for i in range(ids.shape[0])],
                                   request)
        for i, answer in enumerate(answers):
            keep = len(answer.logprobs)
            answer.token_stats = {"entropy": stats["entropy"][i][:keep],
                                  "kl_uniform": stats["kl_uniform"][i][:keep]}
            alts = stats["alternatives"].get(i)
            if alts is not None:
                answer.token_stats["alternatives"] = [self._alternatives(step)
                                                      for step in alts[:keep]]
            if answer.end_token is not None:  # its statistics, at the step after the answer
                answer.end_token.update(entropy=stats["entropy"][i][keep],
                                        kl_uniform=stats["kl_uniform"][i][keep])
                if alts is not None:
                    answer.end_token["alternatives"] = self._alternatives(alts[keep])
        t2 = time.perf_counter()
        share = {"generate": (t1 - t0) / len(prompts_ids), "logprobs": (t2 - t1) / len(prompts_ids)}
        return [
            GenerationResult(
                greedy=answers[q * n] if request.greedy else None,
                samples=answers[q * n + first:(q + 1) * n],
                logprob_source=SOURCE_GENERATION,
                timings_s=dict(share),
            )
            for q in range(len(prompts_ids))
        ]

    def _alternatives(self, step) -> list[list]:
        """One step's top alternatives ``[(id, logprob), ...]`` as ``[[text, logprob], ...]``."""
        return [[self.tokenizer.decode([a], skip_special_tokens=False), lp] for a, lp in step]

    def _build_rows(self, rows, request: GenerationRequest) -> list[Answer]:
        """:class:`Answer` objects of generated rows ``(new ids, log-probs)``; invalid
        log-probs (NaN or infinity) are refused."""
        answers = [build_answer(self.tokenizer, r, lp, self.eos_ids, request.stop_strings,
                                request.keep_stop) for r, lp in rows]
        for answer in answers:
            if not all(math.isfinite(x) for x in answer.logprobs):
                raise InvalidModelOutput(
                    f"The LLM {self.model_id} produced invalid scores (NaN or infinity), so no "
                    "uncertainty can be computed; load it in full precision (without 4-bit) or "
                    "pick another model."
                )
        return answers

    def last_token_embeddings(self, prompt_ids: list[int], answers: Sequence[list[int]]
                              ) -> tuple[list[list[float]], int]:
        """EigenScore's embeddings (see :mod:`mars_demo.models.distributions`)."""
        return distributions.last_token_embeddings(self.model, self.pad_token_id, self.device,
                                                   prompt_ids, answers)

    # ---- teacher forcing -----------------------------------------------------------------
    def next_token_logprob(self, text: str, target: str) -> NextToken:
        """The next token's log-prob after ``text`` (the LLM contract; see
        :func:`mars_demo.models.next_token.in_process`)."""
        return next_token.in_process(self, text, target)

    @property
    def vocabulary_size(self) -> int:
        """The token ids this LLM reads: those of its tokenizer that its embedding holds (an
        embedding often has rows beyond the tokenizer's tokens; those are no tokens)."""
        rows = self.model.get_input_embeddings().num_embeddings
        return min(len(self.tokenizer), rows)

    def teacher_forced(self, prompt: Prompt, answers: Sequence[Answer]) -> list[Answer]:
        """Token log-probs of answers given as text, read at temperature 1 (the same numbers
        generation would have given), with each position's entropy and KL from uniform, by
        :func:`~mars_demo.models.forced.forced_logprobs`: the prompt read once, the answers in
        batches of similar length, the model's head at the answers' own positions only.

        Each answer is tokenized as the model continues the prompt
        (:func:`~mars_demo.models.prompts.answer_ids`).
        The prompt's ids are checked against the vocabulary first (an id out of range is refused
        naming it, before the model sees it). Returns new :class:`Answer` objects with tokens,
        offsets and log-probs; an answer whose text the tokenizer does not reproduce exactly is
        scored as the tokenizer reads it, and says so.
        """
        check_token_ids(list(prompt.token_ids), self.vocabulary_size)
        tok = self.tokenizer
        encoded = prompts.answer_ids(tok, prompt, answers)
        all_read = forced.forced_logprobs(self.model, prompt.token_ids, encoded,
                                          pad_id=self.pad_token_id, device=self.device)
        out: list[Answer] = []
        for a, ids, read in zip(answers, encoded, all_read):
            logprobs = read["logprobs"]
            if not all(math.isfinite(x) for x in logprobs):
                raise InvalidModelOutput(
                    f"The LLM {self.model_id} produced invalid scores (NaN or infinity) for a "
                    "given answer; load it in full precision (without 4-bit) or pick another "
                    "model."
                )
            scored = build_answer(tok, ids, logprobs, eos_ids=set(), stop_strings=())
            keep = len(scored.logprobs)
            scored.token_stats = {"entropy": read["entropy"][:keep],
                                  "kl_uniform": read["kl_uniform"][:keep]}
            notes = [w for w in a.warnings]
            if scored.text != a.text.strip():
                notes.append(
                    f"The LLM's tokenizer reads the given text {a.text!r} as {scored.text!r}; "
                    "that is what was scored."
                )
            scored.finish_reason = a.finish_reason
            scored.warnings = notes
            out.append(scored)
        return out


# ---- the backend ----------------------------------------------------------------------------


def _load(s: Settings, cuda: bool) -> Load:
    """The model ``--llm`` names (a preset, Hub id, folder or GGUF file), once per 4-bit choice,
    quantization and decoding."""
    model_id, preset = resolve_llm(s.llm, cuda)
    source = check_source(model_id, "LLM")
    key = ("llm", source, s.load_in_4bit)
    if (s.quantization, s.decoding) != (llm_options.NF4, llm_options.DYNAMIC):
        key += (s.quantization, s.decoding)
    bare = preset is None and "/" not in model_id and not os.path.isdir(source)
    return Load(key, "LLM", model_id,
                lambda: LLM.from_pretrained(source, model_id, preset, s.load_in_4bit,
                                            s.quantization, s.decoding),
                # a bare name that is no preset: most likely a mistyped preset
                f"{model_id!r} is not an LLM preset either; presets: {', '.join(LLM_PRESETS)}."
                if bare else "")


def _check(s: Settings, cuda: bool) -> None:
    """Refuse a server's URL (this backend runs no server) and LLM options that cannot run on
    this machine (:func:`~mars_demo.models.llm_options.check`): no download can mend them."""
    if s.llm_endpoint:
        raise OptionError("--llm-endpoint names a server, which the transformers backend does "
                          "not use: drop --llm-backend transformers or --llm-endpoint")
    if (s.quantization, s.decoding) != (llm_options.NF4, llm_options.DYNAMIC):
        four_bit = cuda if s.load_in_4bit is None else s.load_in_4bit
        llm_options.check(s.quantization, s.decoding, bool(four_bit))


def _describe(s: Settings, cuda: bool, loaded) -> dict:
    llm, preset = resolve_llm(s.llm, cuda)
    # "No GPU: running the small CPU preset", chosen automatically or picked by hand
    return {"llm": llm, "llm_preset": preset.label if preset else None,
            "cpu_fallback": not cuda and preset is LLM_PRESETS[CPU_DEFAULT_PRESET],
            "load_in_4bit": cuda if s.load_in_4bit is None else s.load_in_4bit}


#: The in-process LLM: the default backend, for every LLM no other backend claims.
BACKEND = Backend(
    name="transformers",
    summary="Hugging Face transformers in this process: a Hub id, a local folder, a preset or "
    "a GGUF file, its weights dequantized",
    chosen="otherwise",
    claims=lambda s: True,
    fields=("llm", "load_in_4bit", "quantization", "decoding"),
    capabilities=Capabilities(full_distribution=True, prompt_ids=True, embeddings=True,
                              batching=True, teacher_forcing=True, next_token=True),
    load=_load,
    named=lambda s, cuda: [("LLM", "--llm", resolve_llm(s.llm, cuda)[0])],
    model_name=lambda s, cuda: resolve_llm(s.llm, cuda)[0],
    describe=_describe,
    check=_check,
)
