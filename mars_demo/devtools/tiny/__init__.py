"""Offline factory of tiny models (random, or trained on a few facts) for tests and benchmarks.

Nothing here downloads anything.  :func:`make_tiny_models` builds, from scratch and
deterministically (same ``seed`` -> same weights and tokenizers):

* ``llm/``        a Qwen2 causal LM (``Qwen2ForCausalLM``) with a byte-level BPE tokenizer
                  and a ChatML chat template;
* ``importance/`` a ``BertForTokenClassification`` with 3 logits per sub-token, shaped like
                  the MARS importance model (``duygunuryldz/MARS``): logits[0:2] = phrase
                  boundary classes, logits[2] = importance logit; uncased WordPiece tokenizer;
* ``nli/``        a DeBERTa (v1) sequence classifier with a label order that differs from
                  ``microsoft/deberta-large-mnli`` (code must read ``id2label``);
* ``bem/``        a BERT answer-equivalence classifier (not_equivalent / equivalent);
* ``chunker/``    a flair ``SequenceTagger`` phrase chunker (BIOES chunk tags of
                  ``flair/chunk-english`` style), saved as ``chunker/final-model.pt``.

``make_tiny_models(dir, trained=True)`` (``make-tiny-models DIR --trained``) instead trains the LLM,
importance and NLI models on a few dozen facts so that they give real answers offline
(:mod:`.trained`).

Every model is saved with ``save_pretrained`` (flair: ``tagger.save``) so that it loads through
the ordinary ``from_pretrained(path)`` / ``SequenceTagger.load(path)`` code paths.

The weights are random: outputs are meaningless, only shapes, label maps, tokenization and
the code paths are real.  The random classification heads (and the chunker's emissions) are
re-centred on a few corpus inputs, deterministically, so that outputs are not degenerate: the
importance model starts a phrase at about a third of answer words, every NLI label wins on
some pairs, P(equivalent) varies, and the chunker yields well-formed multi-word BIOES spans.  The ``*_config(shape)`` helpers also give the shapes of the real
models (Qwen2.5-0.5B/7B-Instruct, bert-base, deberta-base/large) for compute benchmarks; the
vocabulary is always the tiny tokenizer's, so embedding matrices and the LM head are much
smaller than the real models' (e.g. ~1k rows instead of 151,936 for Qwen2.5).

Heavy libraries (torch, transformers, tokenizers, flair) are imported inside functions only.

Modules: :mod:`.spec` (label maps, special tokens, shapes), :mod:`.corpus` (the embedded
corpus), :mod:`.tokenizers`, :mod:`.configs`, :mod:`.chunker` (flair), :mod:`.factory`
(:func:`make_tiny_models`), :mod:`.trained` (the trainer of ``trained=True``).
"""

from __future__ import annotations

from .configs import bem_config, importance_config, llm_config, nli_config
from .corpus import FACTS, corpus
from .factory import MNLI_ORDER, make_tiny_models, relabel_nli
from .spec import (
    BEM_ID2LABEL,
    CHUNK_LABEL_TYPE,
    CHUNK_PHRASE_TYPES,
    IMPORTANCE_ID2LABEL,
    IMPORTANCE_SHAPES,
    LLM_SHAPES,
    NLI_ID2LABEL,
    NLI_SHAPES,
    TOKENIZER_VOCAB_SIZE,
)
from .tokenizers import build_llm_tokenizer, build_nli_tokenizer, build_wordpiece_tokenizer

__all__ = [
    "CHUNK_LABEL_TYPE",
    "CHUNK_PHRASE_TYPES",
    "IMPORTANCE_ID2LABEL",
    "NLI_ID2LABEL",
    "BEM_ID2LABEL",
    "LLM_SHAPES",
    "IMPORTANCE_SHAPES",
    "NLI_SHAPES",
    "FACTS",
    "corpus",
    "llm_config",
    "importance_config",
    "nli_config",
    "bem_config",
    "TOKENIZER_VOCAB_SIZE",
    "build_llm_tokenizer",
    "build_wordpiece_tokenizer",
    "build_nli_tokenizer",
    "make_tiny_models",
    "relabel_nli",
    "MNLI_ORDER",
]
