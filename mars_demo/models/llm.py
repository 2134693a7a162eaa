"""The LLM: loading (4-bit NF4 on CUDA), prompts, generation and token log-probs.

The greedy answer and the samples come from ONE batched ``generate`` call: row 0 takes the argmax
at every step (:func:`greedy_first_row`), the other rows sample. Token log-probs come from the raw
logits that ``generate`` returns (``output_logits=True``), taken at temperature 1: no extra forward
pass of the LLM is ever made. Character offsets of every token come from an incremental decoder,
so the answer's text and its tokens always line up.

On CPU in float32 the greedy row gives the same tokens as a stand-alone greedy run (log-probs equal
to float rounding; tested). On a GPU in bf16/fp16 a batch of 6 rounds differently from a batch of
1, so at a near-tie between two tokens the greedy row may take the other one.
"""

from __future__ import annotations

import math
import os
from typing import Callable, Sequence

from ..answers import Generation  # noqa: F401  (the type generate() returns; it lived here)
from ..options import RECIPES
from ..errors import GenerationCancelled, InvalidModelOutput, ModelLoadError, OptionError
from ..settings import LLMPreset
from .loading import check_source, load_cached

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


def greedy_first_row(block: int | None = None):
    """A transformers ``LogitsProcessor`` that makes row 0 of a sampled batch greedy.

    It leaves every row but the first as it is and keeps only the argmax of row 0 (score 0,
    everything else -inf), so the sampler can only pick that token. Passed in ``generate``'s
    ``logits_processor`` list it runs after generate's own processors (banned tokens, minimum
    length...) and before the sampling warpers (temperature, top-k, top-p; transformers 4.57
    appends those after the custom list): a lone finite score survives them all (temperature
    scales it, top-k and top-p always keep the best token), so row 0 is exactly what a greedy run
    (``do_sample=False``, argmax of the same processed scores) picks. It works on a copy: the
    tensor it receives is the one ``output_logits`` keeps, from which log-probs are read.

    ``block``: the batch holds several questions, ``block`` consecutive rows each (``generate``
    with ``num_return_sequences=block`` repeats each prompt row that often): the first row of
    every block (rows 0, block, 2*block, ...) is made greedy.
    """
    import torch
    from transformers import LogitsProcessor

    class GreedyFirstRow(LogitsProcessor):
        def __call__(self, input_ids, scores) -> torch.FloatTensor:
            out = scores.clone()
            rows = torch.arange(0, scores.shape[0], block or scores.shape[0],
                                device=scores.device)
            best = scores[rows].argmax(dim=-1)
            out[rows] = float("-inf")
            out[rows, best] = 0.0
            return out

    return GreedyFirstRow()


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


def _cut_answer(pieces: list[str], stop_strings: Sequence[str],
                keep_stop: bool = False) -> tuple[int, int | None]:
    """Find where the answer ends at the first stop string.

    Returns (number of tokens kept, character position where the answer text ends, or None when
    no stop string occurs). By default the stop string is not part of the answer: the token
    holding its start is dropped with all after it, unless it also holds answer characters before
    the stop string (then it stays and its text is clipped). With ``keep_stop`` the stop string
    ends the answer and belongs to it (the published MARS code kept its "." end-of-sequence token,
    scored): every token that starts before the stop string's end is kept, and the text ends
    right after the stop string.
    """
    text = "".join(pieces)
    hits = [(text.find(s), -len(s), s) for s in stop_strings if s and s in text]
    if not hits:
        return len(pieces), None
    cut, _, stop = min(hits)  # the earliest; the longest of those starting there
    if keep_stop:
        cut += len(stop)
    pos = 0
    for i, piece in enumerate(pieces):
        if keep_stop:
            if pos >= cut:
                return i, cut
        elif pos + len(piece) > cut:
            return (i + 1 if pos < cut else i), cut
        pos += len(piece)
    return len(pieces), cut  # keep_stop with the stop string at the very end


def trim_answer(pieces: list[str], cut: int | None, finish: str
                ) -> tuple[str, list[tuple[int, int]], list[str], str]:
    """The answer text of the kept token ``pieces``: cut at character ``cut`` (a stop string)
    and stripped of surrounding whitespace, each token's span shifted into it, and the warnings
    the answer's shape calls for (empty, cut off at the token limit, by ``finish``).

    Returns (stripped text, spans, warnings, the text before stripping)."""
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
    return stripped, spans, warnings, text


def build_generation(
    tokenizer,
    token_ids: Sequence[int],
    logprobs: Sequence[float],
    eos_ids: set[int],
    stop_strings: Sequence[str],
    keep_stop: bool = False,
) -> Generation:
    """Turn generated ids (prompt excluded) into a :class:`Generation` with exact offsets.

    The answer ends before the first end-of-sequence token, which is not scored, and at the first
    stop string: before it (not scored) or, with ``keep_stop``, after it (its token is kept and
    scored, see :func:`_cut_answer`).
    """
    ids = [int(t) for t in token_ids]
    n = next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))
    finish = "stop" if n < len(ids) else "length"
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.push(t) for t in ids[:n]]
    tail = decoder.flush()
    if tail and pieces:
        pieces[-1] += tail
    keep, cut = _cut_answer(pieces, stop_strings, keep_stop)
    if cut is not None:
        finish = "stop"
    if keep == 0:
        # The model stopped at once: the answer is empty and its probability is that of
        # stopping here, so its only scored token is the stop itself.
        return _empty_generation(tokenizer, ids[0], logprobs[0], finish)
    stripped, spans, warnings, _ = trim_answer(pieces[:keep], cut, finish)
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
    """A ``generate`` streamer that reports the greedy answer's text as it grows.

    ``generate`` hands it the whole batch (one new token per row and step); the greedy answer is
    row 0, the other rows are ignored. The answer is reported complete (``on_text`` with its final
    text, cut as :func:`build_generation` cuts it) as soon as row 0 ends at an end-of-sequence
    token or a stop string, even while the sampled rows go on; later tokens of row 0 (padding)
    are ignored.
    """

    def __init__(self, tokenizer, on_text: Callable[[str], None], *, eos_ids: set[int] = frozenset(),
                 stop_strings: Sequence[str] = (), keep_stop: bool = False) -> None:
        self.decoder = IncrementalDecoder(tokenizer)
        self.on_text = on_text
        self.eos_ids = set(eos_ids)
        self.stop_strings = tuple(stop_strings)
        self.keep_stop = keep_stop
        self.pieces: list[str] = []
        self.prompt_seen = False
        self.done = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def put(self, value) -> None:
        if not self.prompt_seen:  # the first call carries the prompt
            self.prompt_seen = True
            return
        row = value[0] if value.dim() > 1 else value[:1]  # (batch,) per step; row 0 = greedy
        for t in row.reshape(-1).tolist():
            if self.done:
                return
            if int(t) in self.eos_ids:
                self._finish()
                return
            piece = self.decoder.push(t)
            if piece:
                self.pieces.append(piece)
                if self.stop_strings and _cut_answer(
                    self.pieces, self.stop_strings, self.keep_stop
                )[1] is not None:
                    self._finish()
                    return
                self.on_text(self.text.strip())

    def _finish(self) -> None:
        """Report the final text: all tokens so far (and any held-back partial character), cut
        at the first stop string."""
        self.done = True
        tail = self.decoder.flush()
        if tail:
            self.pieces.append(tail)
        cut = _cut_answer(self.pieces, self.stop_strings, self.keep_stop)[1]
        self.on_text((self.text if cut is None else self.text[:cut]).strip())

    def end(self) -> None:
        if not self.done:
            self._finish()


class LLM:
    """A causal LM with its tokenizer, loaded once."""

    def __init__(self, model, tokenizer, model_id: str, preset: LLMPreset | None, quantized: bool):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.preset = preset
        self.quantized = quantized
        self.device = next(model.parameters()).device
        self.static_cache = False  # cache_implementation="static" (see _generate)

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

    def build_prompt(self, question: str, preset: str | None, recipe: str = "default",
                     ) -> tuple[str, list[int], str, list[str]]:
        """Return (prompt text, prompt ids, preset used, warnings).

        ``recipe="paper-code"`` ends the paper prompt with "Answer: " (a trailing space, as the
        published MARS code did); ``"default"`` ends it with "Answer:" as the paper prints it.
        The chat prompt is the same for both recipes.
        """
        if recipe not in RECIPES:
            raise OptionError(f"unknown recipe {recipe!r}; use one of {', '.join(RECIPES)}")
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
            if recipe == "paper-code":
                prompt += " "
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

    def _generate(self, prompt_ids, *, n: int, sample: bool, temperature: float, top_p: float,
                  max_new_tokens: int, stop_strings, top_k: int = 0, greedy_row: bool = False,
                  banned_ids: Sequence[int] = (), streamer=None, should_stop=None):
        """One ``generate`` call: ``n`` rows continuing the prompt; returns (new ids, raw logits).

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
        prompts = [list(p) for p in prompt_ids] if many else [list(prompt_ids)]
        width = max(len(p) for p in prompts)
        if len(prompts) == 1:
            input_ids = torch.tensor(prompts, device=self.device)
            attention_mask = torch.ones_like(input_ids)
        else:  # left padding: every prompt ends at the last column, where generation starts
            input_ids = torch.full((len(prompts), width), self._pad_id(), dtype=torch.long)
            attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
            for i, p in enumerate(prompts):
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
            pad_token_id=self._pad_id(),
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
        if self.static_cache:
            kwargs.update(cache_implementation="static")
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
        top_k: int = 0,
        keep_stop: bool = False,
        banned_strings: Sequence[str] = (),
        prompt: str | None = None,
    ) -> tuple[Generation, list[Generation]]:
        """The greedy answer and ``samples`` sampled answers, in ONE batched ``generate`` call.

        Row 0 of the batch is the greedy answer (the argmax at every step, the same tokens as a
        stand-alone greedy run up to floating-point rounding), rows 1.. are the samples
        (``temperature``, ``top_p``, ``top_k``; 0 = no top-k). Same ``seed`` and settings, same
        answers. The greedy answer streams to ``on_text`` token by token and is reported
        complete (its final text) as soon as its row ends, while the samples may go on. Stop
        strings (the paper prompt's) and ``max_new_tokens`` apply per row; an end-of-sequence
        token ends a row. ``keep_stop``: a stop string ends the answer but stays in its text and
        its token is scored (the published code's "." end-of-sequence token). ``banned_strings``:
        tokens containing them are never generated (:meth:`banned_token_ids`) and they are no
        stop strings. ``timings`` receives "generate" and "logprobs" seconds. ``prompt``, the
        prompt's text, is not needed here (``prompt_ids`` are); a server-backed LLM uses it.

        ``should_stop`` is asked after every generated token; once it returns True generation
        ends at that token and :class:`GenerationCancelled` is raised."""
        return self._answers(
            prompt_ids, samples=samples, temperature=temperature, top_p=top_p, top_k=top_k,
            max_new_tokens=max_new_tokens, seed=seed, prompt_preset=prompt_preset,
            on_text=on_text, timings=timings, should_stop=should_stop, keep_stop=keep_stop,
            banned_strings=banned_strings, one_call=True,
        )

    def _generate_two_calls(self, prompt_ids: list[int], **options) -> tuple[Generation,
                                                                            list[Generation]]:
        """:meth:`generate` the way it was done before one call: the greedy answer (batch 1),
        then the samples (batch ``samples``). Kept as the benchmark's reference
        (``one_call_speedup``); the samples differ from :meth:`generate`'s for the same seed
        (the random numbers are drawn for another batch)."""
        return self._answers(prompt_ids, one_call=False, **options)

    def _answers(self, prompt_ids, *, samples, temperature, top_p, max_new_tokens, seed,
                 prompt_preset, on_text=None, timings=None, should_stop=None, top_k=0,
                 keep_stop=False, banned_strings=(), one_call=True):
        import time

        import torch
        from transformers import set_seed

        timings = timings if timings is not None else {}
        banned = tuple(s for s in banned_strings if s)
        stops = tuple(s for s in self.stop_strings(prompt_preset) if s not in banned)
        banned_ids = self.banned_token_ids(banned)
        eos = self.eos_ids
        t0 = time.perf_counter()
        streamer = (
            _TextStreamer(self.tokenizer, on_text, eos_ids=eos, stop_strings=stops,
                          keep_stop=keep_stop)
            if on_text else None
        )
        common = dict(max_new_tokens=max_new_tokens, stop_strings=stops, banned_ids=banned_ids,
                      should_stop=should_stop)

        def check() -> None:
            if should_stop is not None and should_stop():
                raise GenerationCancelled("generation was cancelled")

        check()
        if one_call:
            return self._one_call(
                [prompt_ids], samples=samples, temperature=temperature, top_p=top_p,
                top_k=top_k, seed=seed, max_new_tokens=max_new_tokens, stops=stops,
                banned_ids=banned_ids, should_stop=should_stop, eos=eos, keep_stop=keep_stop,
                timings=timings, streamer=streamer,
            )[0]
        g_ids, g_logits = self._generate(
            prompt_ids, n=1, sample=False, temperature=1.0, top_p=1.0,
            streamer=streamer, **common,
        )
        check()
        set_seed(seed)
        torch.manual_seed(seed)
        s_ids, s_logits = self._generate(
            prompt_ids, n=samples, sample=True, temperature=temperature, top_p=top_p,
            top_k=top_k, **common,
        )
        check()
        t1 = time.perf_counter()
        g_lp = self.token_logprobs(g_ids, g_logits)
        s_lp = self.token_logprobs(s_ids, s_logits)
        rows = [(g_ids[0].tolist(), g_lp[0])]
        rows += [(s_ids[i].tolist(), s_lp[i]) for i in range(samples)]
        gens = self._build_rows(rows, eos, stops, keep_stop)
        t2 = time.perf_counter()
        timings["generate"] = timings.get("generate", 0.0) + (t1 - t0)
        timings["logprobs"] = timings.get("logprobs", 0.0) + (t2 - t1)
        return gens[0], gens[1:]

    def _one_call(self, prompts_ids, *, samples, temperature, top_p, top_k, seed, max_new_tokens,
                  stops, banned_ids, should_stop, eos, keep_stop, timings, streamer=None) -> list[tuple[Generation, list[Generation]]]:
        """ONE batched ``generate`` call for the prompts (one or several questions): for each,
        its greedy row then ``samples`` sampled rows (:meth:`_generate` with ``greedy_row``);
        log-probs from the raw logits; one ``(greedy, samples)`` per prompt. ``streamer`` (one
        prompt only) streams the greedy row. Adds "generate" and "logprobs" to ``timings``."""
        import time

        import torch
        from transformers import set_seed

        t0 = time.perf_counter()
        set_seed(seed)
        torch.manual_seed(seed)
        n = samples + 1
        ids, logits = self._generate(
            [list(p) for p in prompts_ids], n=n, sample=True, greedy_row=True,
            temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens,
            stop_strings=stops, banned_ids=banned_ids, should_stop=should_stop,
            streamer=streamer,
        )
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        t1 = time.perf_counter()
        lps = self.token_logprobs(ids, logits)
        gens = self._build_rows([(ids[i].tolist(), lps[i]) for i in range(ids.shape[0])],
                                eos, stops, keep_stop)
        t2 = time.perf_counter()
        timings["generate"] = timings.get("generate", 0.0) + (t1 - t0)
        timings["logprobs"] = timings.get("logprobs", 0.0) + (t2 - t1)
        return [(gens[q * n], gens[q * n + 1:(q + 1) * n]) for q in range(len(prompts_ids))]

    def _build_rows(self, rows, eos, stops, keep_stop) -> list[Generation]:
        """:class:`Generation` objects of generated rows ``(new ids, log-probs)``; invalid
        log-probs (NaN or infinity) are refused."""
        gens = [build_generation(self.tokenizer, r, lp, eos, stops, keep_stop) for r, lp in rows]
        for gen in gens:
            if not all(math.isfinite(x) for x in gen.logprobs):
                raise InvalidModelOutput(
                    f"The LLM {self.model_id} produced invalid scores (NaN or infinity), so no "
                    "uncertainty can be computed; load it in full precision (without 4-bit) or "
                    "pick another model."
                )
        return gens

    def generate_many(
        self,
        prompts_ids: list[list[int]],
        *,
        samples: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int,
        prompt_preset: str,
        timings: dict[str, float] | None = None,
        should_stop: Callable[[], bool] | None = None,
        top_k: int = 0,
        keep_stop: bool = False,
        banned_strings: Sequence[str] = (),
        prompts: Sequence[str] | None = None,
    ) -> list[tuple[Generation, list[Generation]]]:
        """:meth:`generate` for several questions in ONE batched ``generate`` call.

        Returns one ``(greedy, samples)`` per prompt, in order. The prompts are left-padded to
        one width (with their attention mask); each question gets ``samples + 1`` consecutive
        rows, the first of which is its greedy answer (:func:`greedy_first_row` with a block of
        ``samples + 1``). Stop strings, end-of-sequence tokens and ``max_new_tokens`` end each
        row on its own, as in :meth:`generate`; log-probs are read from the raw logits at
        temperature 1, as there. Options as :meth:`generate` (no ``on_text``: nothing streams).

        A question's greedy answer is the same as :meth:`generate` gives it alone (up to float
        rounding: another batch adds up in another order). Its samples are reproducible for
        the same ``seed``, settings and the same batch (the same prompts in the same order),
        but may differ from those it gets alone or in another batch: the random draws are
        shared by all rows of the batch. ``timings`` receives the whole batch's "generate" and
        "logprobs" seconds. ``prompts`` (texts) are not needed here; a server-backed LLM uses
        them.
        """
        if not prompts_ids:
            return []
        banned = tuple(b for b in banned_strings if b)
        stops = tuple(x for x in self.stop_strings(prompt_preset) if x not in banned)
        if should_stop is not None and should_stop():
            raise GenerationCancelled("generation was cancelled")
        return self._one_call(
            prompts_ids, samples=samples, temperature=temperature, top_p=top_p, top_k=top_k,
            seed=seed, max_new_tokens=max_new_tokens, stops=stops,
            banned_ids=self.banned_token_ids(banned), should_stop=should_stop,
            eos=self.eos_ids, keep_stop=keep_stop,
            timings=timings if timings is not None else {},
        )

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
