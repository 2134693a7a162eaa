"""A GGUF file's tokenizer as llama.cpp reads it (:class:`GGUFVocab`), behind the part of a
Hugging Face tokenizer's interface the project's prompts and answers use, so that the llama.cpp
backend (:mod:`mars_demo.models.llama_cpp`) builds prompts, cuts answers and decodes tokens with
the shared code of :mod:`~mars_demo.models.prompts` and :mod:`~mars_demo.models.decoding`.

Everything comes from the file through llama.cpp: the ids of a text (``llama_tokenize``, its BOS
added where the file says, ``tokenizer.ggml.add_bos_token``), the text of ids
(``llama_detokenize``), which tokens are control tokens and which end generation, and the chat
template the file carries, rendered by llama-cpp-python's Jinja2 formatter (the same sandboxed
Jinja2 settings as transformers' ``apply_chat_template``). Nothing is converted, so it loads in
the time llama.cpp takes to read the vocabulary, where transformers' conversion of a GGUF
tokenizer takes half a minute or more.

llama_cpp is imported by the caller (:mod:`.llama_cpp`); this module only calls into it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Sequence


class GGUFVocab:
    """The vocabulary of a model loaded by llama.cpp (``model``: its ``llama_model`` pointer;
    ``lib``: the ``llama_cpp`` module), read as a Hugging Face tokenizer would be (see the
    module doc)."""

    is_fast = True  # offsets are given (prompts.encode asks for them)
    added_tokens_decoder: dict = {}  # the control tokens are all in all_special_tokens

    def __init__(self, lib: Any, model: Any) -> None:
        self._lib = lib
        self.vocab = lib.llama_model_get_vocab(model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.add_bos_token = bool(lib.llama_vocab_get_add_bos(self.vocab))
        self.bos_token_id = self._id(lib.llama_vocab_bos(self.vocab))
        self.eos_token_id = self._id(lib.llama_vocab_eos(self.vocab))
        self.pad_token_id = self._id(lib.llama_vocab_pad(self.vocab))
        self.unk_token_id = None
        template = lib.llama_model_chat_template(model, None)
        self.chat_template = template.decode("utf-8") if template else None
        self._pieces: list[bytes] | None = None
        #: every token that ends generation as llama.cpp says (its end-of-generation set: the
        #: file's EOS and EOT tokens and those it recognises, such as <|im_end|>)
        self.eog_ids = {i for i in range(self.n_vocab) if lib.llama_vocab_is_eog(self.vocab, i)}
        self._controls = {self.piece(i).decode("utf-8", "replace"): i
                          for i in range(self.n_vocab)
                          if lib.llama_vocab_is_control(self.vocab, i)}

    @staticmethod
    def _id(token: int) -> int | None:
        return int(token) if token >= 0 else None

    def __len__(self) -> int:
        return self.n_vocab

    @property
    def all_special_tokens(self) -> list[str]:
        """The texts of the control tokens (``<|im_start|>``, ``<|im_end|>``, ...)."""
        return sorted(t for t in self._controls if t)

    @property
    def bos_token(self) -> str:
        return "" if self.bos_token_id is None else self.decode([self.bos_token_id])

    @property
    def eos_token(self) -> str:
        return "" if self.eos_token_id is None else self.decode([self.eos_token_id])

    def convert_tokens_to_ids(self, texts: Sequence[str]) -> list[int]:
        """The ids of control tokens given by their texts (as ``control_texts`` lists them)."""
        return [self._controls[t] for t in texts if t in self._controls]

    # ---- text -> ids ---------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True,
               split_special_tokens: bool = False) -> list[int]:
        """The ids of ``text``: the BOS in front where the file says and ``add_special_tokens``;
        control-token texts read as control tokens unless ``split_special_tokens``."""
        raw = text.encode("utf-8")
        room = len(raw) + 8
        buf = (self._lib.llama_token * room)()
        n = self._lib.llama_tokenize(self.vocab, raw, len(raw), buf, room,
                                     add_special_tokens, not split_special_tokens)
        if n < 0:  # more tokens than bytes: never for a byte-level or SentencePiece vocabulary
            room = -n
            buf = (self._lib.llama_token * room)()
            n = self._lib.llama_tokenize(self.vocab, raw, len(raw), buf, room,
                                         add_special_tokens, not split_special_tokens)
        return list(buf[:n])

    def __call__(self, text: str, add_special_tokens: bool = True,
                 split_special_tokens: bool = False,
                 return_offsets_mapping: bool = False) -> dict[str, list]:
        """``{"input_ids": [...]}`` as a Hugging Face tokenizer returns it, and with
        ``return_offsets_mapping`` each token's ``(start, end)`` characters in ``text`` (a token
        holding part of a character ends where the character does)."""
        ids = self.encode(text, add_special_tokens, split_special_tokens)
        out: dict[str, list] = {"input_ids": ids}
        if return_offsets_mapping:
            added = add_special_tokens and self.add_bos_token and self.bos_token_id is not None
            out["offset_mapping"] = self._offsets(text, ids, added)
        return out

    def _offsets(self, text: str, ids: list[int], added_bos: bool) -> list[tuple[int, int]]:
        """Each token's character span in ``text``, from the bytes of its piece (a BOS the
        tokenizer added spans nothing)."""
        char_at: list[int] = []  # byte index -> index of the character it belongs to
        for i, ch in enumerate(text):
            char_at += [i] * len(ch.encode("utf-8"))
        char_at.append(len(text))
        spans, pos = [], 0
        for k, token in enumerate(ids):
            if k == 0 and added_bos and token == self.bos_token_id:
                spans.append((0, 0))
                continue
            end = min(pos + len(self.piece(token)), len(char_at) - 1)
            spans.append((char_at[pos], char_at[end]))
            pos = end
        return spans

    # ---- ids -> text ---------------------------------------------------------------------
    def piece(self, token: int) -> bytes:
        """The bytes of one token (a control token's text included)."""
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self.vocab, int(token), buf, 64, 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self.vocab, int(token), buf, -n, 0, True)
        return buf.raw[:n]

    def pieces(self) -> list[bytes]:
        """The bytes of every token of the vocabulary, read once."""
        if self._pieces is None:
            self._pieces = [self.piece(i) for i in range(self.n_vocab)]
        return self._pieces

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool = False) -> str:
        """The text of ``ids`` as llama.cpp writes it (``llama_detokenize``; control tokens
        written unless ``skip_special_tokens``); bytes that end inside a character read as
        U+FFFD, as a Hugging Face tokenizer's ``decode`` gives them."""
        ids = [int(i) for i in ids]
        if not ids:
            return ""
        tokens = (self._lib.llama_token * len(ids))(*ids)
        room = 16 * len(ids) + 16
        buf = ctypes.create_string_buffer(room)
        n = self._lib.llama_detokenize(self.vocab, tokens, len(ids), buf, room, False,
                                       not skip_special_tokens)
        if n < 0:
            room = -n
            buf = ctypes.create_string_buffer(room)
            n = self._lib.llama_detokenize(self.vocab, tokens, len(ids), buf, room, False,
                                           not skip_special_tokens)
        return buf.raw[:n].decode("utf-8", errors="replace")

    # ---- the chat template ---------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False,
                            add_generation_prompt: bool = True) -> Any:
        """The chat template the file carries, rendered for ``messages`` (text; its ids with
        ``tokenize``, read with their control tokens and no BOS added, as a Hugging Face
        tokenizer's ``apply_chat_template`` gives them)."""
        if not self.chat_template:
            raise ValueError("the GGUF file carries no chat template")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        text = Jinja2ChatFormatter(self.chat_template, eos_token=self.eos_token,
                                   bos_token=self.bos_token,
                                   add_generation_prompt=add_generation_prompt
                                   )(messages=messages).prompt
        return self.encode(text, add_special_tokens=False) if tokenize else text
