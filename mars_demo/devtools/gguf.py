"""Write a Qwen2 causal LM saved with ``save_pretrained`` (e.g. the tiny test LLM) as a GGUF file.

Used by the tests to serve the tiny random LLM from a real OpenAI-compatible server (llama.cpp's,
through ``python -m llama_cpp.server --model FILE.gguf``), offline.

Why not llama.cpp's ``convert_hf_to_gguf.py``: it is not on PyPI as a package (only inside the
76 MB llama-cpp-python source archive), and it refuses byte-level BPE tokenizers it does not know
by hash (every tokenizer trained by :mod:`mars_demo.devtools.tiny`), so it would need patching. For Qwen2
the conversion is a plain renaming of tensors plus the tokenizer's vocabulary and merges, which
the ``gguf`` package (llama.cpp's own GGUF library, on PyPI) writes directly: the same tensor
name map, keys and token types the converter uses. Weights stay float32, so the server computes
with exactly the transformers model's weights.

Only what the tiny LLM uses is supported: ``Qwen2ForCausalLM`` with a byte-level BPE tokenizer
whose pre-tokenizer is GPT-2's regex (llama.cpp pre-tokenizer "gpt-2"); anything else is refused
with a ValueError rather than written wrong.
"""

from __future__ import annotations

import json
import pathlib

__all__ = ["write_gguf"]


def write_gguf(model_dir, out_file) -> pathlib.Path:
    """Write the Qwen2 model in ``model_dir`` (config.json, safetensors, tokenizer.json) to
    ``out_file`` as an all-float32 GGUF; returns the path written."""
    import gguf
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    model_dir = pathlib.Path(model_dir)
    out_file = pathlib.Path(out_file)
    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type != "qwen2":
        raise ValueError(f"write_gguf supports Qwen2 models only, not {config.model_type!r}")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tok_json = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    _check_tokenizer(tok_json)

    writer = gguf.GGUFWriter(out_file, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN2])
    writer.add_name(model_dir.name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_theta))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))

    # Vocabulary, as convert_hf_to_gguf.py's get_vocab_base() does for a "gpt2" BPE tokenizer.
    vocab = tokenizer.get_vocab()
    added = {tok.content: tok for tok in tokenizer.added_tokens_decoder.values()}
    n_vocab = config.vocab_size
    by_id = {i: t for t, i in vocab.items()}
    tokens: list[str] = []
    types: list[int] = []
    for i in range(n_vocab):
        if i not in by_id:  # rows of the embedding that no token uses
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
            continue
        text = by_id[i]
        tokens.append(text)
        if text in added:
            special_token = added[text].special
            types.append(gguf.TokenType.CONTROL if special_token else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # GPT-2's split regex: what _check_tokenizer verified
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special = gguf.SpecialVocab(model_dir, load_merges=True, n_vocab=n_vocab)
    special.add_to_gguf(writer, quiet=True)
    writer.add_add_bos_token(False)  # the HF tokenizer adds no BOS token either

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name.endswith("rotary_emb.inv_freq"):
            continue
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ValueError(f"write_gguf: no GGUF name for tensor {name!r}")
        writer.add_tensor(new_name, tensor.detach().to(torch.float32).contiguous().numpy())

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out_file


def _check_tokenizer(tok_json: dict) -> None:
    """Refuse tokenizers whose pre-tokenization llama.cpp's "gpt-2" pre-tokenizer would not
    reproduce (the served model must tokenize exactly as transformers does)."""
    model = tok_json.get("model") or {}
    pre = tok_json.get("pre_tokenizer") or {}
    ok = (
        model.get("type") == "BPE"
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
        and not pre.get("add_prefix_space", False)
        and tok_json.get("normalizer") is None
    )
    if not ok:
        raise ValueError(
            "write_gguf supports byte-level BPE tokenizers with GPT-2's pre-tokenizer only "
            "(no normalizer, no prefix space)"
        )
