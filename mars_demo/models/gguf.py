"""An LLM saved as one GGUF file (llama.cpp's format: quantized weights, the tokenizer and its
chat template in one file), loaded in-process by transformers (``from_pretrained(folder,
gguf_file=NAME)``, which needs the ``gguf`` package: llama.cpp's own reader, on PyPI).

transformers dequantizes the weights (to float32 unless a dtype is asked for), so the numbers
are those of the dequantized weights computed in that dtype, not llama.cpp's arithmetic on the
quantized blocks; :func:`dequantized_note` says so in every analysis of such a model.

transformers' conversion of a GGUF tokenizer of the "llama" kind writes the beginning-of-sequence
token as the end-of-sequence token too, and adds the BOS token in front of every text, whatever
the file says (``tokenizer.ggml.add_bos_token``). :func:`load_tokenizer` puts back what the file
says (its BOS rule, its end and padding tokens), so that the tokenizer reads a prompt as
llama.cpp does when it serves the same file: SmolLM2's GGUF, for one, says ``add_bos_token =
false``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError

SUFFIX = ".gguf"


def named_gguf(name: str | os.PathLike) -> bool:
    """The one rule of what a GGUF file is called: a name ending in ``.gguf``, in any case.

    >>> named_gguf("SmolLM2.Q4_1.GGUF"), named_gguf("Qwen/Qwen2.5-0.5B-Instruct")
    (True, False)
    """
    return str(name).lower().endswith(SUFFIX)


def gguf_file(source: str) -> Path | None:
    """The GGUF file ``source`` names: a ``.gguf`` file, or the one ``.gguf`` file of a folder
    that holds no ``config.json`` (a Hugging Face folder is loaded as such); None for anything
    else. A folder with several GGUF files is refused, naming them.

    >>> gguf_file("Qwen/Qwen2.5-0.5B-Instruct") is None
    True
    """
    path = Path(os.path.expanduser(str(source)))
    if path.is_file():
        return path if named_gguf(path) else None
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(p for p in path.iterdir() if named_gguf(p) and p.is_file())
    if len(found) > 1:
        raise ModelLoadError(
            f"{source} holds {len(found)} GGUF files ({', '.join(p.name for p in found[:6])}); "
            "name the one to load: --llm FOLDER/NAME.gguf")
    return found[0] if found else None


def metadata(path: Path) -> dict[str, Any]:
    """What the file says about its tokenizer and weights: ``add_bos`` (None when it says
    nothing), the ids of its ``bos``, ``eos`` and ``pad`` tokens (None where absent) and the
    ``quantization`` of its weights (llama.cpp's file type, e.g. "Q4_1")."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def field(key: str):
        f = reader.fields.get(key)
        return None if f is None else f.contents()

    file_type = field("general.file_type")
    try:
        quantization = gguf.LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_")
    except (TypeError, ValueError):
        kinds = sorted({t.tensor_type.name for t in reader.tensors})
        quantization = "+".join(kinds) or "unknown"
    return {"add_bos": field("tokenizer.ggml.add_bos_token"),
            "bos": field("tokenizer.ggml.bos_token_id"),
            "eos": field("tokenizer.ggml.eos_token_id"),
            "pad": field("tokenizer.ggml.padding_token_id"),
            "quantization": quantization}


def load_tokenizer(path: Path, meta: dict[str, Any] | None = None):
    """The file's tokenizer through transformers, with the file's own BOS rule, end and padding
    tokens put back (see the module doc)."""
    from transformers import AutoTokenizer

    meta = meta or metadata(path)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for name in ("bos", "eos", "pad"):
        token_id = meta.get(name)
        if token_id is not None and 0 <= int(token_id) < len(tok):
            setattr(tok, f"{name}_token", tok.convert_ids_to_tokens(int(token_id)))
    if meta.get("add_bos") is not None and hasattr(tok, "add_bos_token"):
        tok.add_bos_token = bool(meta["add_bos"])  # a fast Llama tokenizer rebuilds its rule
    return tok


def load(path: Path, **kwargs) -> tuple[Any, Any, dict[str, Any]]:
    """(model, tokenizer, metadata) of the GGUF file ``path``; ``kwargs`` go to the model's
    ``from_pretrained`` (its dtype, device map, quantization)."""
    from transformers import AutoModelForCausalLM

    meta = metadata(path)
    tokenizer = load_tokenizer(path, meta)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    return model, tokenizer, meta


def dequantized_note(path: Path, meta: dict[str, Any], model: Any, quantized: str | None) -> str:
    """The warning every analysis of a model loaded from a GGUF file carries: which weights it
    held, and what transformers turned them into."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    held = meta.get("quantization") or "unknown"
    into = (f"dequantized, then quantized again to 4-bit {quantized}" if quantized
            else f"dequantized to {dtype}")
    return (f"The LLM {path.name} holds {held} weights; transformers {into}, so its answers "
            f"and log-probs are those of the {'re' if quantized else 'de'}quantized weights, "
            "which differ slightly from llama.cpp's (it computes with the quantized blocks).")
