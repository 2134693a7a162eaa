"""Model configs of the tiny models and of the real models' shapes (for compute benchmarks)."""

from __future__ import annotations

from typing import Any

from .spec import (
    BEM_ID2LABEL,
    IMPORTANCE_ID2LABEL,
    IMPORTANCE_SHAPES,
    LLM_SHAPES,
    NLI_ID2LABEL,
    NLI_SHAPES,
    TOKENIZER_VOCAB_SIZE,
)


_LLM_SHAPE_KW: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096),
    # as tiny, but with attention heads of 64 dimensions: vLLM's CPU attention refuses 16
    "vllm": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096),
    # Qwen2.5-0.5B-Instruct (its real vocab is 151,936 and it ties embeddings; not here)
    "cpu": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768),
    # Qwen2.5-7B-Instruct (real vocab 152,064)
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768),
}

_BERT_SHAPE_KW: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}

_DEBERTA_SHAPE_KW: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}


def _check_shape(shape: str, allowed: tuple[str, ...], what: str) -> None:
    if shape not in allowed:
        raise ValueError(f"unknown {what} shape {shape!r}; expected one of {allowed}")


def llm_config(shape: str = "tiny", vocab_size: int = TOKENIZER_VOCAB_SIZE, *,
               eos_token_id: int | None = None, pad_token_id: int | None = None,
               bos_token_id: int | None = None):
    """``Qwen2Config`` for ``shape`` in ("tiny", "cpu" = Qwen2.5-0.5B, "7b" = Qwen2.5-7B).

    ``vocab_size`` is the tiny tokenizer's, so the LM head/embeddings are smaller than the real
    model's; embeddings are never tied (``tie_word_embeddings=False``).
    """
    from transformers import Qwen2Config

    _check_shape(shape, LLM_SHAPES, "llm")
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        tie_word_embeddings=False,
        use_sliding_window=False,
        attention_dropout=0.0,
        use_cache=True,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        torch_dtype="float32",
        **_LLM_SHAPE_KW[shape],
    )


def importance_config(shape: str = "tiny", vocab_size: int = TOKENIZER_VOCAB_SIZE, pad_token_id: int = 0):
    """``BertConfig`` of the token-classification importance model (3 labels), "tiny" or "base"."""
    from transformers import BertConfig

    _check_shape(shape, IMPORTANCE_SHAPES, "importance")
    return BertConfig(
        vocab_size=vocab_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        pad_token_id=pad_token_id,
        num_labels=3,
        id2label=dict(IMPORTANCE_ID2LABEL),
        label2id={v: k for k, v in IMPORTANCE_ID2LABEL.items()},
        **_BERT_SHAPE_KW[shape],
    )


def bem_config(shape: str = "tiny", vocab_size: int = TOKENIZER_VOCAB_SIZE, pad_token_id: int = 0):
    """``BertConfig`` of the answer-equivalence classifier (not_equivalent/equivalent)."""
    from transformers import BertConfig

    _check_shape(shape, IMPORTANCE_SHAPES, "bem")
    return BertConfig(
        vocab_size=vocab_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        pad_token_id=pad_token_id,
        num_labels=2,
        id2label=dict(BEM_ID2LABEL),
        label2id={v: k for k, v in BEM_ID2LABEL.items()},
        **_BERT_SHAPE_KW[shape],
    )


def nli_config(shape: str = "tiny", vocab_size: int = TOKENIZER_VOCAB_SIZE, pad_token_id: int = 0):
    """``DebertaConfig`` (v1, as deberta-large-mnli) for "tiny", "base" or "large"."""
    from transformers import DebertaConfig

    _check_shape(shape, NLI_SHAPES, "nli")
    kw = _DEBERTA_SHAPE_KW[shape]
    return DebertaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=512,
        type_vocab_size=0,
        relative_attention=True,
        max_relative_positions=-1,
        position_biased_input=False,
        pos_att_type=["c2p", "p2c"],
        hidden_act="gelu",
        layer_norm_eps=1e-7,
        pooler_dropout=0.0,
        pooler_hidden_act="gelu",
        pooler_hidden_size=kw["hidden_size"],
        pad_token_id=pad_token_id,
        num_labels=3,
        id2label=dict(NLI_ID2LABEL),
        label2id={v: k for k, v in NLI_ID2LABEL.items()},
        **kw,
    )


