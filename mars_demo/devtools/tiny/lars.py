"""A random LARS-shaped model: a RoBERTa sequence classifier with one output whose tokenizer
holds LARS's probability-bin tokens ``[prob_token_0]`` ... as special tokens and whose config
carries ``number_of_bins`` and ``edges`` (see :mod:`mars_demo.optional.lars`). The tests use the
"tiny" shape; the benchmark the "base" one (``duygunuryldz/LARS`` is built on roberta-base)."""

from __future__ import annotations

import json
import pathlib
import tempfile

SHAPES = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
}


def build_lars(path, tokenizer_dir, *, bins: int = 8, edges=None, shape: str = "tiny",
               seed: int = 19, initializer_range: float = 0.5) -> pathlib.Path:
    """Write the model to ``path`` and return it. The tokenizer is the byte-level BPE one saved
    in ``tokenizer_dir`` (the tiny NLI model's), rebuilt as a RoBERTa tokenizer; ``edges``
    None leaves them out of the config (LARS then bins evenly). ``initializer_range`` wide
    (0.5) makes the tiny model's logit follow its input."""
    import torch
    from transformers import (AutoTokenizer, RobertaConfig, RobertaForSequenceClassification,
                              RobertaTokenizerFast)

    if shape not in SHAPES:
        raise ValueError(f"LARS shape must be one of {', '.join(SHAPES)}; got {shape!r}")
    with tempfile.TemporaryDirectory() as tmp:
        source = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        vocab_file, merges = source.backend_tokenizer.model.save(tmp)
        # RoBERTa's specials first (<pad> = 1, as its position ids expect), then the BPE tokens
        old = json.loads(pathlib.Path(vocab_file).read_text(encoding="utf-8"))
        words = sorted((w for w in old if w not in source.all_special_tokens), key=old.get)
        vocab = {w: i for i, w in enumerate(["<s>", "<pad>", "</s>", "<unk>", *words, "<mask>"])}
        pathlib.Path(vocab_file).write_text(json.dumps(vocab), encoding="utf-8")
        tok = RobertaTokenizerFast(vocab_file=vocab_file, merges_file=merges,
                                   model_max_length=512)
    tok.add_special_tokens(
        {"additional_special_tokens": [f"[prob_token_{i}]" for i in range(bins)]})
    config = RobertaConfig(vocab_size=len(tok), num_labels=1, max_position_embeddings=514,
                           pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                           eos_token_id=tok.eos_token_id, initializer_range=initializer_range,
                           **SHAPES[shape])
    config.number_of_bins = bins
    if edges is not None:
        config.edges = list(edges)
    torch.manual_seed(seed)
    model = RobertaForSequenceClassification(config).eval()
    path = pathlib.Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
