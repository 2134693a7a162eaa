"""The LLM: loading (4-bit NF4 on CUDA), prompts, generation and token log-probs.

Token log-probs come from the raw logits that ``generate`` returns (``output_logits=True``), taken
at temperature 1: no extra forward pass of the LLM is ever made. Character offsets of every token
come from an incremental decoder, so the answer's text and its tokens always line up.
"""

from __future__ import annotations

import math
import os
from typing import Callable, Sequence

from ..answers import Generation  # noqa: F401  (the type generate() returns; it lived here)
from ..settings import LLMPreset, OptionError
from .loading import InvalidModelOutput, ModelLoadError, check_source, load_cached

PAPER_PROMPT = (
    "Answer these questions:\n"
    "Question: What is the capital city of Australia?\n"
    "Answer: The capital city of Australia is Canberra.\n"
    'Question: Who painted the famous artwork "Starry Night"?\n'
    'Answer: "Starry Night" was painted by Vincent van Gogh.\n'
    "Question: {question}?\n"
    "Answer:"
)
PAPER_STOP_STRINGS = (".", "\n")  # the paper ends answers at "." and newline
CHAT_SYSTEM = "Answer the question briefly, in one short sentence."


class GenerationCancelled(Exception):
    """``should_stop`` asked generation to stop (the request was cancelled); no answer is made.

    :class:`mars_demo.pipeline.Engine` turns it into ``AnalysisCancelled``.
    """


def stop_criterion(should_stop: Callable[[], bool]):
    """A transformers ``StoppingCriteria`` that finishes every row once ``should_stop()`` is True.

    ``generate`` calls it after each new token with ``(input_ids, scores)`` and wants a bool
    tensor of shape ``(batch,)``. (Built on call, so importing this module stays cheap.)
    """
    import torch
    from transformers import StoppingCriteria

    class StopWhen(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
            stop = bool(should_stop())
            return torch.full(
                (input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device
            )

    return StopWhen()


class IncrementalDecoder:
    """Decode tokens one at a time into text pieces whose concatenation is the full text.

    Each step decodes a window of at most a few tokens (the previous piece as context, so that
    tokenizers which drop a leading space keep it right), so offsets cost O(L), not O(L^2).
    A token that only completes part of a multi-byte character yields an empty piece; the token
    that completes the character carries it.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window
        self.read = 0  # tokens before this are already turned into text

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            piece = after[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)
            return piece
        return ""

    def flush(self) -> str:
        """Text of tokens still held back (an incomplete character at the very end)."""
        if self.read == len(self.ids):
            return ""
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return after[len(before) :]


def _cut_answer(pieces: list[str], stop_strings: Sequence[str]) -> tuple[int, int | None]:
    """Find where the answer ends at the first stop string.

    Returns (number of tokens kept, character position where the answer text ends, or None when
    no stop string occurs). The token holding the start of the stop string is dropped with all
    after it, unless it also holds answer characters before the stop string (then it stays and
    its text is clipped).
    """
    text = "".join(pieces)
    hits = [text.find(s) for s in stop_strings if s and s in text]
    if not hits:
        return len(pieces), None
    cut = min(hits)
    pos = 0
    for i, piece in enumerate(pieces):
        if pos + len(piece) > cut:
            return (i + 1 if pos < cut else i), cut
        pos += len(piece)
    return len(pieces), cut  # unreachable: cut < len(text)


def build_generation(
    tokenizer,
    token_ids: Sequence[int],
    logprobs: Sequence[float],
    eos_ids: set[int],
    stop_strings: Sequence[str],
) -> Generation:
    """Turn generated ids (prompt excluded) into a :class:`Generation` with exact offsets.

    The answer ends before the first end-of-sequence token or stop string; neither is scored.
    """
    ids = [int(t) for t in token_ids]
    n = next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))
    finish = "stop" if n < len(ids) else "length"
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.push(t) for t in ids[:n]]
    tail = decoder.flush()
    if tail and pieces:
        pieces[-1] += tail
    keep, cut = _cut_answer(pieces, stop_strings)
    if cut is not None:
        finish = "stop"
    if keep == 0:
        # The model stopped at once: the answer is empty and its probability is that of
        # stopping here, so its only scored token is the stop itself.
        return _empty_generation(tokenizer, ids[0], logprobs[0], finish)
    pieces = pieces[:keep]
    spans: list[tuple[int, int]] = []
    pos = 0
    for piece in pieces:
        spans.append((pos, pos + len(piece)))
        pos += len(piece)
    text = "".join(pieces)
    if cut is not None:
        text = text[:cut]
        spans = [(min(a, cut), min(b, cut)) for a, b in spans]
    # Strip surrounding whitespace and shift offsets into the stripped text.
    lead = len(text) - len(text.lstrip())
    stripped = text.strip()
    end = len(stripped)
    spans = [(max(0, min(a - lead, end)), max(0, min(b - lead, end))) for a, b in spans]
    warnings = []
    if not stripped:
        warnings.append(
            "The model gave an empty answer (only whitespace); its score is the probability of "
            "that whitespace."
        )
    if finish == "length":
        warnings.append(
            "The answer hit the max-new-tokens limit and was cut off; raise max new tokens for a "
            "complete answer."
        )
    return Generation(
        text=stripped,
        token_ids=ids[:keep],
        token_texts=[stripped[a:b] for a, b in spans],
        spans=spans,
        logprobs=[float(x) for x in logprobs[:keep]],
        finish_reason=finish,
        warnings=warnings,
    )


def _empty_generation(tokenizer, token_id: int, logprob: float, finish: str) -> Generation:
    piece = tokenizer.decode([token_id], skip_special_tokens=False)
    return Generation(
        text="",
        token_ids=[int(token_id)],
        token_texts=[piece],
        spans=[(0, 0)],
        logprobs=[float(logprob)],
        finish_reason=finish,
        warnings=[
            "The model gave an empty answer (it stopped at once); its score is the probability "
            f"of stopping with {piece!r}."
        ],
    )


class _TextStreamer:
    """A ``generate`` streamer that reports the greedy answer's text as it grows."""

    def __init__(self, tokenizer, on_text: Callable[[str], None]) -> None:
        self.decoder = IncrementalDecoder(tokenizer)
        self.on_text = on_text
        self.text = ""
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # the first call carries the prompt
            self.prompt_seen = True
            return
        for t in value.reshape(-1).tolist():
            piece = self.decoder.push(t)
            if piece:
                self.text += piece
                self.on_text(self.text.strip())

    def end(self) -> None:
        tail = self.decoder.flush()
        if tail:
            self.text += tail
            self.on_text(self.text.strip())


class LLM:
    """A causal LM with its tokenizer, loaded once."""

    def __init__(self, model, tokenizer, model_id: str, preset: LLMPreset | None, quantized: bool):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.preset = preset
        self.quantized = quantized
        self.device = next(model.parameters()).device

    @staticmethod
    def cache_key(model_id: str, load_in_4bit: bool | None) -> tuple:
        """The key under which :meth:`load` caches this model (raises ``ModelLoadError`` for a
        path that does not exist)."""
        return ("llm", check_source(model_id, "LLM"), load_in_4bit)

    @classmethod
    def load(
        cls,
        model_id: str,
        preset: LLMPreset | None = None,
        load_in_4bit: bool | None = None,
        progress=None,
    ) -> "LLM":
        key = cls.cache_key(model_id, load_in_4bit)
        source = key[1]

        def loader() -> LLM:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

            cuda = torch.cuda.is_available()
            quantize = cuda if load_in_4bit is None else load_in_4bit
            kwargs: dict = {}
            if quantize:
                if cuda:
                    compute = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
                else:
                    compute = torch.float32
                kwargs["quantization_config"] = BitsAndBytesConfig(
                    load_in_4bit=True,
                    bnb_4bit_quant_type="nf4",
                    bnb_4bit_use_double_quant=True,
                    bnb_4bit_compute_dtype=compute,
                )
                kwargs["device_map"] = {"": 0} if cuda else {"": "cpu"}
            elif cuda:
                kwargs["dtype"] = (
                    torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
                )
                kwargs["device_map"] = {"": 0}
            else:
                kwargs["dtype"] = torch.float32
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
            model.eval()
            return cls(model, tokenizer, model_id, preset, bool(quantize))

        try:
            return load_cached(key, "LLM", model_id, loader, progress)
        except ModelLoadError as err:
            if preset is None and "/" not in model_id and not os.path.isdir(source):
                # A bare name that is no preset: most likely a mistyped preset.
                from ..settings import LLM_PRESETS

                raise ModelLoadError(
                    f"{err} {model_id!r} is not an LLM preset either; presets: "
                    f"{', '.join(LLM_PRESETS)}."
                ) from err
            raise

    # ---- prompts -------------------------------------------------------------------------
    def default_prompt(self) -> str:
        if self.preset is not None:
            return "chat" if self.preset.instruct and self.has_chat_template else "paper"
        return "chat" if self.has_chat_template else "paper"

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def build_prompt(self, question: str, preset: str | None) -> tuple[str, list[int], str, list[str]]:
        """Return (prompt text, prompt ids, preset used, warnings)."""
        warnings: list[str] = []
        preset = preset or self.default_prompt()
        if preset == "chat" and not self.has_chat_template:
            warnings.append(
                f"{self.model_id} has no chat template, so the paper's few-shot prompt was used "
                "instead of the chat prompt."
            )
            preset = "paper"
        if preset == "paper":
            content = question.rstrip().rstrip("?")
            prompt = PAPER_PROMPT.format(question=content)
            start = PAPER_PROMPT.index("{question}")
            ids = self._encode(prompt, content, (start, start + len(content)), True)
        else:
            prompt = self._chat(question)
            ids = self._encode(prompt, question, None, False)
        return prompt, list(ids), preset, warnings

    def _chat(self, content: str) -> str:
        messages = [
            {"role": "system", "content": CHAT_SYSTEM},
            {"role": "user", "content": content},
        ]
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def _control_texts(self) -> list[str]:
        """Texts of the tokenizer's special (control) tokens, e.g. "<|im_end|>"."""
        texts = set(self.tokenizer.all_special_tokens)
        for added in getattr(self.tokenizer, "added_tokens_decoder", {}).values():
            if getattr(added, "special", False):
                texts.add(str(added))
        return sorted(t for t in texts if t)

    def _encode(self, prompt: str, question: str, span: tuple[int, int] | None,
                add_special_tokens: bool) -> list[int]:
        """Token ids of the prompt, the question's text always read as plain text.

        A question that contains a control token's text (say "<|im_end|>") must not end the
        user's turn or the prompt: such tokens inside the question are encoded as ordinary
        characters; everything else is tokenized exactly as the whole prompt would be.
        """
        tok = self.tokenizer
        controls = [t for t in self._control_texts() if t in question]
        if not controls:
            return list(tok(prompt, add_special_tokens=add_special_tokens)["input_ids"])
        if span is None:  # chat: find the question's place by rendering a marker in its stead
            marker = "\x00MARS-QUESTION\x00"
            parts = self._chat(marker).split(marker)
            if len(parts) == 2 and parts[0] + question + parts[1] == prompt:
                span = (len(parts[0]), len(parts[0]) + len(question))
            elif prompt.count(question) == 1:
                span = (prompt.index(question), prompt.index(question) + len(question))
        if span is None or not getattr(tok, "is_fast", False):
            raise OptionError(
                f"the question contains {controls[0]!r}, a control token of {self.model_id}; "
                "remove it from the question"
            )
        a, b = span
        enc = tok(prompt, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
        special_ids = set(tok.convert_tokens_to_ids(self._control_texts()))
        ids: list[int] = []
        for tid, (start, end) in zip(enc["input_ids"], enc["offset_mapping"]):
            if tid in special_ids and a <= start < end <= b:
                ids += tok(prompt[start:end], add_special_tokens=False,
                           split_special_tokens=True)["input_ids"]
            else:
                ids.append(tid)
        return ids

    def stop_strings(self, preset: str) -> tuple[str, ...]:
        return PAPER_STOP_STRINGS if preset == "paper" else ()

    @property
    def eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        if ids is None:
            return set()
        return {int(i) for i in (ids if isinstance(ids, (list, tuple)) else [ids])}

    # ---- generation ----------------------------------------------------------------------
    def _generate(self, prompt_ids, *, n: int, sample: bool, temperature: float, top_p: float,
                  max_new_tokens: int, stop_strings, streamer=None, should_stop=None):
        import torch
        from transformers import StoppingCriteriaList

        input_ids = torch.tensor([prompt_ids], device=self.device)
        kwargs = dict(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=self._pad_id(),
            streamer=streamer,
        )
        if sample:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
        else:
            kwargs.update(do_sample=False, num_beams=1, temperature=None, top_p=None, top_k=None)
        if stop_strings:
            kwargs.update(stop_strings=list(stop_strings), tokenizer=self.tokenizer)
        if should_stop is not None:
            kwargs.update(stopping_criteria=StoppingCriteriaList([stop_criterion(should_stop)]))
        with torch.inference_mode():
            out = self.model.generate(**kwargs)
        new_ids = out.sequences[:, input_ids.shape[1] :]
        return new_ids, out.logits

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        if pad is None:
            eos = self.eos_ids
            pad = min(eos) if eos else 0
        return int(pad)

    @staticmethod
    def token_logprobs(new_ids, logits) -> "list[list[float]]":
        """log P(chosen token) at temperature 1 from the raw logits of each generation step."""
        import torch

        steps = min(len(logits), new_ids.shape[1])
        out = torch.empty((new_ids.shape[0], steps), dtype=torch.float32)
        for t in range(steps):
            step = logits[t].float()
            chosen = new_ids[:, t].to(step.device).unsqueeze(1)
            lp = step.gather(1, chosen).squeeze(1) - torch.logsumexp(step, dim=1)
            out[:, t] = lp.cpu()
        return out.tolist()

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
    ) -> tuple[Generation, list[Generation]]:
        """The greedy answer (streamed to ``on_text``) and ``samples`` sampled answers (one
        batched call). ``timings`` receives "generate" and "logprobs" seconds. ``prompt``, the
        prompt's text, is not needed here (``prompt_ids`` are); a server-backed LLM uses it.

        ``should_stop`` is asked after every generated token (and between the two calls); once it
        returns True generation ends at that token and :class:`GenerationCancelled` is raised."""
        import time

        import torch
        from transformers import set_seed

        timings = timings if timings is not None else {}
        stops = self.stop_strings(prompt_preset)
        eos = self.eos_ids
        t0 = time.perf_counter()
        streamer = _TextStreamer(self.tokenizer, on_text) if on_text else None
        stop = {"should_stop": should_stop} if should_stop is not None else {}

        def check() -> None:
            if should_stop is not None and should_stop():
                raise GenerationCancelled("generation was cancelled")

        check()
        g_ids, g_logits = self._generate(
            prompt_ids, n=1, sample=False, temperature=1.0, top_p=1.0,
            max_new_tokens=max_new_tokens, stop_strings=stops, streamer=streamer, **stop,
        )
        check()
        set_seed(seed)
        torch.manual_seed(seed)
        s_ids, s_logits = self._generate(
            prompt_ids, n=samples, sample=True, temperature=temperature, top_p=top_p,
            max_new_tokens=max_new_tokens, stop_strings=stops, **stop,
        )
        check()
        t1 = time.perf_counter()
        g_lp = self.token_logprobs(g_ids, g_logits)
        s_lp = self.token_logprobs(s_ids, s_logits)
        greedy = build_generation(self.tokenizer, g_ids[0].tolist(), g_lp[0], eos, stops)
        sampled = [
            build_generation(self.tokenizer, s_ids[i].tolist(), s_lp[i], eos, stops)
            for i in range(samples)
        ]
        for gen in [greedy, *sampled]:
            if not all(math.isfinite(x) for x in gen.logprobs):
                raise InvalidModelOutput(
                    f"The LLM {self.model_id} produced invalid scores (NaN or infinity), so no "
                    "uncertainty can be computed; load it in full precision (without 4-bit) or "
                    "pick another model."
                )
        t2 = time.perf_counter()
        timings["generate"] = timings.get("generate", 0.0) + (t1 - t0)
        timings["logprobs"] = timings.get("logprobs", 0.0) + (t2 - t1)
        return greedy, sampled

    # ---- teacher forcing -----------------------------------------------------------------
    def teacher_forced(
        self, prompt_ids: list[int], answers: Sequence[Generation], *, prompt_preset: str,
        lead: str | None = None,
    ) -> list[Generation]:
        """Token log-probs of answers given as text: one batched forward pass over
        prompt + answer, read at temperature 1 (the same numbers generation would have given).

        Each answer is tokenized as the model continues the prompt: after a space for the
        paper prompt ("Answer: Mars"), directly for a chat prompt; ``lead`` overrides what goes
        before the answer's text ("" after a prompt that ends with a space). Returns new
        :class:`Generation` objects with tokens, offsets and log-probs; an answer whose text the
        tokenizer does not reproduce exactly is scored as the tokenizer reads it, and says so.
        """
        import torch

        if lead is None:
            lead = " " if prompt_preset == "paper" else ""
        tok = self.tokenizer
        encoded = [
            list(tok(lead + a.text, add_special_tokens=False)["input_ids"]) for a in answers
        ]
        for a, ids in zip(answers, encoded):
            if not ids:
                raise OptionError(f"the answer {a.text!r} has no tokens to score")
        rows = [list(prompt_ids) + ids for ids in encoded]
        width = max(len(r) for r in rows)
        pad = self._pad_id()
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):  # right padding: positions of the real tokens stay put
            input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
        input_ids, mask = input_ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=input_ids, attention_mask=mask).logits
        start = len(prompt_ids)
        out: list[Generation] = []
        for i, (a, ids) in enumerate(zip(answers, encoded)):
            step = logits[i, start - 1 : start - 1 + len(ids)].float()
            chosen = torch.tensor(ids, device=step.device).unsqueeze(1)
            lp = (step.gather(1, chosen).squeeze(1) - torch.logsumexp(step, dim=1)).cpu()
            logprobs = [float(x) for x in lp.tolist()]
            if not all(math.isfinite(x) for x in logprobs):
                raise InvalidModelOutput(
                    f"The LLM {self.model_id} produced invalid scores (NaN or infinity) for a "
                    "given answer; load it in full precision (without 4-bit) or pick another "
                    "model."
                )
            gen = build_generation(tok, ids, logprobs, eos_ids=set(), stop_strings=())
            notes = [w for w in a.warnings]
            if gen.text != a.text.strip():
                notes.append(
                    f"The LLM's tokenizer reads the given text {a.text!r} as {gen.text!r}; "
                    "that is what was scored."
                )
            gen.finish_reason = a.finish_reason
            gen.warnings = notes
            out.append(gen)
        return out
