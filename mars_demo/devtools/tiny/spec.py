"""What the tiny models are: label maps, special tokens, shape names and vocabulary size
(shared by the tokenizers, the configs and the factory)."""

from __future__ import annotations

#: (the same as ``flair/chunk-english``).  Span values are the phrase types below ("NP", "VP", ...).
CHUNK_LABEL_TYPE = "np"
#: phrase types of ``flair/chunk-english`` (CoNLL-2000 chunks), encoded as BIOES tags.
CHUNK_PHRASE_TYPES = ("NP", "VP", "PP", "ADVP", "ADJP", "SBAR", "PRT", "CONJP", "INTJ", "LST")

IMPORTANCE_ID2LABEL = {0: "BEGIN_PHRASE", 1: "INSIDE_PHRASE", 2: "IMPORTANCE"}
#: deliberately NOT deberta-large-mnli's order (0 contradiction, 1 neutral, 2 entailment)
NLI_ID2LABEL = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
BEM_ID2LABEL = {0: "not_equivalent", 1: "equivalent"}

LLM_SHAPES = ("tiny", "vllm", "cpu", "7b")
IMPORTANCE_SHAPES = ("tiny", "base")
NLI_SHAPES = ("tiny", "base", "large")

LLM_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BERT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NLI_SPECIAL_TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]  # deberta v1 ids 0..4 order

TOKENIZER_VOCAB_SIZE = 1000


# Seed offsets so each model's weights depend only on (seed, model), not on build order.
SEED_OFFSETS = {"llm": 0, "importance": 1, "nli": 2, "bem": 3, "chunker": 4}
