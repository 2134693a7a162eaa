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
(:mod:`mars_demo.tiny_trained`).

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
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

__all__ = [
    "CHUNK_LABEL_TYPE",
    "CHUNK_PHRASE_TYPES",
    "IMPORTANCE_ID2LABEL",
    "NLI_ID2LABEL",
    "BEM_ID2LABEL",
    "LLM_SHAPES",
    "IMPORTANCE_SHAPES",
    "NLI_SHAPES",
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
]

#: label type under which the chunker's spans are stored: ``sentence.get_spans(CHUNK_LABEL_TYPE)``
#: (the same as ``flair/chunk-english``).  Span values are the phrase types below ("NP", "VP", ...).
CHUNK_LABEL_TYPE = "np"
#: phrase types of ``flair/chunk-english`` (CoNLL-2000 chunks), encoded as BIOES tags.
CHUNK_PHRASE_TYPES = ("NP", "VP", "PP", "ADVP", "ADJP", "SBAR", "PRT", "CONJP", "INTJ", "LST")

IMPORTANCE_ID2LABEL = {0: "BEGIN_PHRASE", 1: "INSIDE_PHRASE", 2: "IMPORTANCE"}
#: deliberately NOT deberta-large-mnli's order (0 contradiction, 1 neutral, 2 entailment)
NLI_ID2LABEL = {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
BEM_ID2LABEL = {0: "not_equivalent", 1: "equivalent"}

LLM_SHAPES = ("tiny", "cpu", "7b")
IMPORTANCE_SHAPES = ("tiny", "base")
NLI_SHAPES = ("tiny", "base", "large")

LLM_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BERT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NLI_SPECIAL_TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]  # deberta v1 ids 0..4 order

TOKENIZER_VOCAB_SIZE = 1000

#: ChatML template (as Qwen2.5-Instruct, without its default system prompt and tool support)
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

README_TEXT = """\
Tiny random models written by mars_demo.tiny.make_tiny_models (seed={seed}).

THESE MODELS ARE RANDOMLY INITIALISED AND UNTRAINED. They exist only so that tests and
benchmarks can exercise the real code paths (from_pretrained, tokenization, generation,
token classification, NLI, flair chunking) without any download. Their outputs are noise
(classification biases are only re-centred so that every class occurs). Do not use them
for anything but tests.

  llm/         Qwen2ForCausalLM, shape "{llm_shape}", byte-level BPE tokenizer, ChatML template
  importance/  BertForTokenClassification (3 logits: {importance_labels}), shape "{importance_shape}"
  nli/         DebertaForSequenceClassification, id2label {nli_labels}, shape "{nli_shape}"
  bem/         BertForSequenceClassification, id2label {bem_labels}, shape "{bem_shape}"
  chunker/     flair SequenceTagger (final-model.pt), label type "{chunk_label_type}", BIOES chunk tags

All tokenizers were trained on a small embedded English corpus (vocabulary ~1000), so every
model's vocabulary (embeddings, LM head) is far smaller than the real model's, whatever shape.
"""

TRAINED_README_TEXT = """\
Tiny TRAINED models written by mars_demo.tiny.make_tiny_models(trained=True) (seed={seed}).

llm/, importance/ and nli/ were trained for {seconds} s on the CPU on {facts} trivia facts
(mars_demo/data/tiny_facts.json; details in trained.json). They give real answers to THOSE
questions only (e.g. "Which planet is known as the Red Planet?" -> "Mars is known as the Red
Planet."); anything else gets a confident-sounding guess. bem/ and chunker/ are random.

  llm/         Qwen2ForCausalLM trained on the chat prompt (ChatML template, system text of
               mars_demo.models.llm.CHAT_SYSTEM), byte-level BPE tokenizer
  importance/  BertForTokenClassification (3 logits: {importance_labels}), trained so that the
               words that answer the question form their own phrase and weigh the most
  nli/         DebertaForSequenceClassification, id2label {nli_labels}, trained on paraphrase
               (entailment), right-vs-wrong (contradiction) and "I am not sure." (neutral) pairs
  bem/         BertForSequenceClassification, id2label {bem_labels} (random)
  chunker/     flair SequenceTagger (final-model.pt), label type "{chunk_label_type}" (random)

Shapes: llm "{llm_shape}", importance "{importance_shape}", nli "{nli_shape}", bem "{bem_shape}".
"""

# --------------------------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------------------------

# (question, short answer, full-sentence answer)
_FACTS: tuple[tuple[str, str, str], ...] = (
    ("What is the capital city of Australia?", "Canberra", "The capital city of Australia is Canberra."),
    ('Who painted the famous artwork "Starry Night"?', "Vincent van Gogh", '"Starry Night" was painted by Vincent van Gogh.'),
    ("Which planet is known as the Red Planet?", "Mars", "Mars is known as the Red Planet."),
    ("What is the largest ocean on Earth?", "the Pacific Ocean", "The largest ocean on Earth is the Pacific Ocean."),
    ("Who wrote the play Romeo and Juliet?", "William Shakespeare", "Romeo and Juliet was written by William Shakespeare."),
    ("What is the chemical symbol for gold?", "Au", "The chemical symbol for gold is Au."),
    ("How many continents are there?", "seven", "There are seven continents."),
    ("What is the boiling point of water in Celsius?", "100 degrees", "Water boils at 100 degrees Celsius at sea level."),
    ("Who was the first person to walk on the Moon?", "Neil Armstrong", "Neil Armstrong was the first person to walk on the Moon in 1969."),
    ("What is the capital of France?", "Paris", "The capital of France is Paris."),
    ("Which element has the atomic number 1?", "hydrogen", "Hydrogen has the atomic number 1."),
    ("What is the tallest mountain in the world?", "Mount Everest", "Mount Everest is the tallest mountain in the world."),
    ("Who developed the theory of relativity?", "Albert Einstein", "Albert Einstein developed the theory of relativity."),
    ("What is the longest river in Africa?", "the Nile", "The Nile is the longest river in Africa."),
    ("In which year did World War II end?", "1945", "World War II ended in 1945."),
    ("What is the smallest prime number?", "2", "The smallest prime number is 2."),
    ("Which country is home to the kangaroo?", "Australia", "The kangaroo is native to Australia."),
    ("Who composed the Fifth Symphony?", "Ludwig van Beethoven", "Ludwig van Beethoven composed the Fifth Symphony."),
    ("What is the hardest natural substance?", "diamond", "Diamond is the hardest natural substance."),
    ("What gas do plants absorb from the air?", "carbon dioxide", "Plants absorb carbon dioxide from the air."),
    ("Which city hosted the 2012 Summer Olympics?", "London", "London hosted the 2012 Summer Olympics."),
    ("What is the currency of Japan?", "the yen", "The currency of Japan is the yen."),
    ("Who discovered penicillin?", "Alexander Fleming", "Penicillin was discovered by Alexander Fleming in 1928."),
    ("What is the largest mammal?", "the blue whale", "The blue whale is the largest mammal on the planet."),
    ("How many legs does a spider have?", "eight", "A spider has eight legs."),
    ("What is the main language spoken in Brazil?", "Portuguese", "The main language spoken in Brazil is Portuguese."),
    ("Which organ pumps blood through the body?", "the heart", "The heart pumps blood through the body."),
    ("What is the freezing point of water in Fahrenheit?", "32 degrees", "Water freezes at 32 degrees Fahrenheit."),
    ("Who invented the telephone?", "Alexander Graham Bell", "Alexander Graham Bell is credited with inventing the telephone."),
    ("What is the capital of Canada?", "Ottawa", "The capital of Canada is Ottawa, not Toronto."),
    ("Which planet has the most moons?", "Saturn", "Saturn has the most known moons."),
    ("What is the square root of 81?", "9", "The square root of 81 is 9."),
    ("Who wrote the novel Pride and Prejudice?", "Jane Austen", "Pride and Prejudice is a novel by Jane Austen."),
    ("What is the capital of Italy?", "Rome", "Rome is the capital of Italy."),
    ("Which metal is liquid at room temperature?", "mercury", "Mercury is a metal that is liquid at room temperature."),
    ("What is the largest desert in the world?", "Antarctica", "The largest desert in the world is Antarctica; the largest hot desert is the Sahara."),
    ("Who was the first President of the United States?", "George Washington", "George Washington was the first President of the United States."),
    ("What is the speed of light?", "about 300,000 km per second", "Light travels at about 300,000 kilometres per second."),
    ("Which bird is a symbol of peace?", "the dove", "The dove is a symbol of peace."),
    ("What is the primary ingredient in guacamole?", "avocado", "The primary ingredient in guacamole is avocado."),
    ("In which country are the pyramids of Giza?", "Egypt", "The pyramids of Giza are in Egypt."),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci", "The Mona Lisa was painted by Leonardo da Vinci."),
    ("What is H2O commonly called?", "water", "H2O is commonly called water."),
    ("Which sport is played at Wimbledon?", "tennis", "Tennis is played at Wimbledon every summer."),
    ("What is the largest planet in our solar system?", "Jupiter", "Jupiter is the largest planet in our solar system."),
    ("Who wrote the Odyssey?", "Homer", "The Odyssey is attributed to Homer."),
    ("How many days are there in a leap year?", "366", "A leap year has 366 days."),
    ("What colour do you get by mixing blue and yellow?", "green", "Mixing blue and yellow gives green."),
    ("Which animal is known as the king of the jungle?", "the lion", "The lion is known as the king of the jungle."),
    ("What is the capital of Germany?", "Berlin", "Berlin is the capital of Germany."),
    ("Who is the author of Harry Potter?", "J. K. Rowling", "The Harry Potter books were written by J. K. Rowling."),
    ("What instrument has 88 keys?", "the piano", "A standard piano has 88 keys."),
    ("Which vitamin does sunlight help the body produce?", "vitamin D", "Sunlight helps the body produce vitamin D."),
    ("What is the capital of Spain?", "Madrid", "Madrid is the capital of Spain."),
    ("Who discovered gravity when an apple fell?", "Isaac Newton", "Isaac Newton described gravity, according to the story of the falling apple."),
    ("What is the largest country by area?", "Russia", "Russia is the largest country by area."),
    ("Which ocean lies between Africa and Australia?", "the Indian Ocean", "The Indian Ocean lies between Africa and Australia."),
    ("How many minutes are in an hour?", "60", "There are 60 minutes in an hour."),
    ("What is the national flower of Japan?", "the cherry blossom", "The cherry blossom is the national flower of Japan."),
    ("Who sculpted the statue of David?", "Michelangelo", "Michelangelo sculpted the statue of David."),
)

_EXTRA_SENTENCES: tuple[str, ...] = (
    "Answer these questions:",
    "The happy man has been eating at the diner.",
    "It is Mars.",
    "I am not sure, but I think the answer is correct.",
    "This is a simple question with a short answer.",
    "The quick brown fox jumps over the lazy dog.",
    "She said that the museum opens at nine o'clock.",
    "They were walking slowly along the river bank.",
    "My favourite colours are red, blue and green!",
    "Is it true that cats sleep for most of the day?",
    "Yes, it is true; cats can sleep for 16 hours.",
    "No, that is not right.",
    "Scientists believe the universe is about 13.8 billion years old.",
    "The old library was built in the nineteenth century.",
    "Please answer the question in one sentence.",
    "You are a helpful assistant.",
    "Café, naïve, résumé and Ünïcode are words with accents.",
    "Mars is known as the Red Planet. 🚀",
    "Temperatures can drop to -80 °C at night.",
    "A dog, a cat & a bird (all pets) live here.",
    "He asked: \"Who won the game?\"",
    "The train leaves at 10:45 from platform 3.",
    "Water covers about 71% of the Earth's surface.",
    "Over the years, many explorers have tried to reach the North Pole.",
    "The children were playing football in the park after school.",
)


def corpus() -> list[str]:
    """The small embedded English corpus (trivia Q&A style) the tokenizers are trained on."""
    lines: list[str] = list(_EXTRA_SENTENCES)
    for q, short, full in _FACTS:
        lines.append(f"Question: {q}\nAnswer: {full}")
        lines.append(f"Q: {q} A: {short}.")
        lines.append(f"The answer is {short}.")
        lines.append(f"I think it is {short}, but I am not completely sure.")
        lines.append(full.lower())
    return lines


# --------------------------------------------------------------------------------------------
# tokenizers
# --------------------------------------------------------------------------------------------


def _train_byte_level_bpe(special_tokens: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def build_llm_tokenizer(vocab_size: int = TOKENIZER_VOCAB_SIZE):
    """Byte-level BPE (Qwen2-style, no prefix space) with ChatML specials and chat template."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = _train_byte_level_bpe(LLM_SPECIAL_TOKENS, vocab_size)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        model_input_names=["input_ids", "attention_mask"],
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    hf.chat_template = CHATML_TEMPLATE
    return hf


def build_wordpiece_tokenizer(vocab_size: int = TOKENIZER_VOCAB_SIZE):
    """Uncased BERT-style WordPiece ``BertTokenizerFast`` (token_type_ids 0/1, max length 512).

    The ``tokenizers`` WordPiece trainer numbers the "##x" continuation characters in hash-map
    order, which makes its merges (ties) differ from run to run.  To be deterministic, every
    "##x" of the corpus alphabet is handed to the trainer up front (as a special token, so it
    gets a fixed id); the trained vocabulary is then rebuilt into a plain WordPiece model whose
    only special tokens are the five BERT ones.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    def pipeline(model):
        tok = Tokenizer(model)
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        return tok

    trained = pipeline(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    alphabet: set[str] = set()
    for line in corpus():
        normalized = trained.normalizer.normalize_str(line)
        for word, _ in trained.pre_tokenizer.pre_tokenize_str(normalized):
            alphabet.update(word)
    continuation = ["##" + c for c in sorted(alphabet)]
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(BERT_SPECIAL_TOKENS) + continuation,
        continuing_subword_prefix="##",
        show_progress=False,
    )
    trained.train_from_iterator(corpus(), trainer=trainer)

    vocab = trained.get_vocab(with_added_tokens=True)
    tok = pipeline(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.add_special_tokens(list(BERT_SPECIAL_TOKENS))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return BertTokenizerFast(
        tokenizer_object=tok,
        do_lower_case=True,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=512,
    )


def build_nli_tokenizer(vocab_size: int = TOKENIZER_VOCAB_SIZE):
    """Byte-level BPE with DeBERTa-v1 style specials and "[CLS] A [SEP] B [SEP]" pairs."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = _train_byte_level_bpe(NLI_SPECIAL_TOKENS, vocab_size)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="[CLS]:0 $A:0 [SEP]:0",
                pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
            ),
        ]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        # like DebertaTokenizer; the model has type_vocab_size=0 and ignores token_type_ids
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        bos_token="[CLS]",
        eos_token="[SEP]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        unk_token="[UNK]",
        mask_token="[MASK]",
        clean_up_tokenization_spaces=False,
        model_max_length=512,
    )


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------

_LLM_SHAPE_KW: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096),
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


# --------------------------------------------------------------------------------------------
# builders
# --------------------------------------------------------------------------------------------

# Seed offsets so each model's weights depend only on (seed, model), not on build order.
_SEED_OFFSETS = {"llm": 0, "importance": 1, "nli": 2, "bem": 3, "chunker": 4}
_CHUNK_EMISSION_STD = 2.0

#: Random heads are calibrated on a few corpus inputs (deterministically) so that outputs are not
#: degenerate: the importance model starts a phrase at about this fraction of answer words ...
_IMPORTANCE_BEGIN_FRACTION = 1 / 3
#: ... and the tiny NLI/BEM bodies get a larger init range, so their outputs depend on the input.
_TINY_CLASSIFIER_INIT_RANGE = 0.2


def _calibration_examples(n: int = 48) -> list[tuple[str, str, str]]:
    """(question, answer, other answer) triples from the corpus, fixed order."""
    facts = _FACTS[:n]
    out = []
    for i, (q, short, full) in enumerate(facts):
        other = facts[(i + 1) % len(facts)][1]
        out.append((q, full if i % 2 == 0 else f"I think it is {short}.", short if i % 3 else other))
    return out


def _build_llm(path: pathlib.Path, seed: int, shape: str) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2ForCausalLM

    tok = build_llm_tokenizer()
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    config = llm_config(shape, vocab_size=len(tok), eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)
    torch.manual_seed(seed + _SEED_OFFSETS["llm"])
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(path)
    tok.save_pretrained(path)


def _build_importance(path: pathlib.Path, seed: int, shape: str, tok) -> None:
    """Token classifier; the head is calibrated so that about a third of answer words start a
    phrase (argmax of logits[0:2] == 0) and sigmoid(logits[2]) spreads around 0.5."""
    import re

    import torch
    from transformers import BertForTokenClassification

    config = importance_config(shape, vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed + _SEED_OFFSETS["importance"])
    model = BertForTokenClassification(config).eval()
    with torch.no_grad():
        model.classifier.weight.normal_(0.0, 1.5 / config.hidden_size**0.5)  # logit std ~1.5
        model.classifier.bias.zero_()
        diffs, imps = [], []
        for q, answer, _ in _calibration_examples(24):
            words = re.findall(r"\w+|[^\w\s]", answer)
            enc = tok([q], words, is_split_into_words=True, truncation=True, return_tensors="pt")
            logits = model(**enc).logits[0]
            seen = set()
            for i, (w, sid) in enumerate(zip(enc.word_ids(), enc.sequence_ids())):
                if sid == 1 and w is not None and w not in seen:
                    seen.add(w)
                    if w > 0:  # the first word always starts a phrase
                        diffs.append(float(logits[i, 0] - logits[i, 1]))
                    imps.append(float(logits[i, 2]))
        threshold = torch.tensor(diffs).quantile(1.0 - _IMPORTANCE_BEGIN_FRACTION)
        model.classifier.bias[0] = -threshold
        model.classifier.bias[2] = -torch.tensor(imps).median()
    model.save_pretrained(path)
    tok.save_pretrained(path)


def _center_sequence_classifier(model, tok, pairs) -> None:
    """Set the classification bias so that the mean logit of every class is 0 on ``pairs``."""
    import torch

    with torch.no_grad():
        model.classifier.bias.zero_()
        enc = tok([a for a, _ in pairs], [b for _, b in pairs], return_tensors="pt", padding=True, truncation=True)
        logits = model(**enc).logits
        model.classifier.bias.copy_(-logits.mean(0))


def _build_bem(path: pathlib.Path, seed: int, shape: str, tok) -> None:
    import torch
    from transformers import BertForSequenceClassification

    config = bem_config(shape, vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    if shape == "tiny":
        config.initializer_range = _TINY_CLASSIFIER_INIT_RANGE
    torch.manual_seed(seed + _SEED_OFFSETS["bem"])
    model = BertForSequenceClassification(config).eval()
    if shape == "tiny":  # the big shapes are for compute benchmarks only (and slow to run)
        pairs = [(f"{q} {a}", f"{q} {b}") for q, a, b in _calibration_examples()]
        _center_sequence_classifier(model, tok, pairs)
        model.config.initializer_range = 0.02
    model.save_pretrained(path)
    tok.save_pretrained(path)


def _build_nli(path: pathlib.Path, seed: int, shape: str) -> None:
    import torch
    from transformers import DebertaForSequenceClassification

    tok = build_nli_tokenizer()
    config = nli_config(shape, vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    if shape == "tiny":
        config.initializer_range = _TINY_CLASSIFIER_INIT_RANGE
    torch.manual_seed(seed + _SEED_OFFSETS["nli"])
    model = DebertaForSequenceClassification(config).eval()
    if shape == "tiny":  # the big shapes are for compute benchmarks only (and slow to run)
        pairs = [(f"{q} {a}", f"{q} {b}") for q, a, b in _calibration_examples()]
        _center_sequence_classifier(model, tok, pairs)
        model.config.initializer_range = 0.02
    model.save_pretrained(path)
    tok.save_pretrained(path)


def _chunker_vocabulary() -> list[str]:
    import re

    words: set[str] = set()
    for line in corpus():
        words.update(re.findall(r"\w+|[^\w\s]", line))
    return sorted(words)


def _build_chunker(path: pathlib.Path, seed: int) -> pathlib.Path:
    import logging

    import torch
    import flair
    from flair.data import Dictionary
    from flair.embeddings import OneHotEmbeddings
    from flair.models import SequenceTagger

    flair_log = logging.getLogger("flair")
    old_level, old_device = flair_log.level, flair.device
    flair_log.setLevel(logging.WARNING)  # OneHotEmbeddings logs its whole vocabulary at INFO
    flair.device = torch.device("cpu")
    try:
        torch.manual_seed(seed + _SEED_OFFSETS["chunker"])
        vocab = Dictionary(add_unk=True)
        for w in _chunker_vocabulary():
            vocab.add_item(w)
        embeddings = OneHotEmbeddings(vocab, embedding_length=32)
        tags = Dictionary(add_unk=False)
        for t in CHUNK_PHRASE_TYPES:
            tags.add_item(t)
        tags.span_labels = True
        tagger = SequenceTagger(
            embeddings=embeddings,
            tag_dictionary=tags,
            tag_type=CHUNK_LABEL_TYPE,
            tag_format="BIOES",
            hidden_size=32,
            use_crf=True,
            use_rnn=True,
            dropout=0.0,
            word_dropout=0.0,
            locked_dropout=0.0,
        )
        tagger.eval()
        _make_crf_well_formed(tagger)
        path.mkdir(parents=True, exist_ok=True)
        pt = path / "final-model.pt"
        tagger.save(pt)
    finally:
        flair.device = old_device
        flair_log.setLevel(old_level)
    return pt


def _make_crf_well_formed(tagger) -> None:
    """Make the random tagger produce plausible chunks.

    * CRF ``transitions[to, from]``: invalid BIOES moves get -10000, valid ones 0, so Viterbi
      decoding only yields well-formed spans;
    * emissions are standardised on the corpus (every tag's score gets mean ~0 and std
      ``_CHUNK_EMISSION_STD`` over corpus tokens) so that they depend on the input, plus a small
      prior: NP most frequent, "O" rare, continuing a span slightly penalised.
    """
    import torch
    from flair.data import Sentence

    d = tagger.label_dictionary
    items = d.get_items()
    idx = {t: i for i, t in enumerate(items)}
    n = len(items)

    def kind(tag: str) -> tuple[str, str]:
        if tag in ("<START>", "<STOP>", "O"):
            return tag, ""
        return tag[0], tag[2:]

    trans = torch.full((n, n), -10000.0)
    for frm in items:
        fk, ft = kind(frm)
        if frm == "<STOP>":
            continue
        for to in items:
            tk, tt = kind(to)
            if to == "<START>":
                continue
            if fk in ("B", "I"):  # a span is open: continue (I-) or close (E-) the same type
                ok = tk in ("I", "E") and tt == ft
            else:
                ok = tk in ("B", "S", "O", "<STOP>")
            if ok:
                trans[idx[to], idx[frm]] = 0.0

    captured: list = []
    hook = tagger.linear.register_forward_hook(lambda mod, inp, out: captured.append(inp[0].detach()))
    try:
        with torch.no_grad():
            sentences = sorted((Sentence(line) for line in corpus()[:120]), key=len, reverse=True)
            sentence_tensor, lengths = tagger._prepare_tensors(sentences)
            tagger.forward(sentence_tensor, lengths)
    finally:
        hook.remove()
    feats = torch.cat([captured[0][i, : int(length)] for i, length in enumerate(lengths)])
    type_prior = {"NP": 1.0, "VP": 0.5, "PP": 0.3}  # the rare phrase types get -1.5
    kind_prior = {"S": -0.7, "B": 0.0, "I": -0.2, "E": 0.3, "O": -1.0}
    with torch.no_grad():
        tagger.crf.transitions.copy_(trans)
        w, b = tagger.linear.weight, tagger.linear.bias
        b.zero_()
        scores = feats @ w.T
        mean, std = scores.mean(0), scores.std(0).clamp_min(1e-6)
        w.mul_((_CHUNK_EMISSION_STD / std)[:, None])
        b.copy_(-mean * _CHUNK_EMISSION_STD / std)
        for t, i in idx.items():
            k, ty = kind(t)
            b[i] += kind_prior.get(k, 0.0) + (type_prior.get(ty, -1.5) if ty else 0.0)
            if t in ("<START>", "<STOP>"):
                b[i] = -10000.0


def make_tiny_models(
    out_dir,
    seed: int = 0,
    llm_shape: str = "tiny",
    importance_shape: str = "tiny",
    nli_shape: str = "tiny",
    bem_shape: str = "tiny",
    trained: bool = False,
) -> dict[str, pathlib.Path]:
    """Write the test models under ``out_dir`` and return their paths.

    Returns ``{"llm", "importance", "nli", "bem": model directories (``from_pretrained``),
    "chunker": path of ``final-model.pt`` (``flair.models.SequenceTagger.load``)}``.
    Same ``seed`` -> identical weights and tokenizers.  Non-tiny shapes only change the
    transformer bodies (see :func:`llm_config`, :func:`importance_config`, :func:`nli_config`).

    ``trained=True`` trains the LLM, importance and NLI models on the facts of
    ``mars_demo/data/tiny_facts.json`` (a few minutes on 2 CPU cores; see
    :mod:`mars_demo.tiny_trained`), so that they give real answers; the answer-equivalence model
    and the chunker stay random.  Only the tiny shapes can be trained.
    """
    if trained and (llm_shape, importance_shape, nli_shape) != ("tiny", "tiny", "tiny"):
        raise ValueError("only the tiny shapes can be trained (trained=True needs shape 'tiny')")
    # Parallel tokenizer training merges in thread order: the same seed must give the same files.
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return _make_tiny_models(out_dir, seed, llm_shape, importance_shape, nli_shape, bem_shape,
                                 trained)
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def _make_tiny_models(out_dir, seed, llm_shape, importance_shape, nli_shape, bem_shape, trained):
    _check_shape(llm_shape, LLM_SHAPES, "llm")
    _check_shape(importance_shape, IMPORTANCE_SHAPES, "importance")
    _check_shape(nli_shape, NLI_SHAPES, "nli")
    _check_shape(bem_shape, IMPORTANCE_SHAPES, "bem")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("llm", "importance", "nli", "bem")}

    wordpiece = build_wordpiece_tokenizer()
    if trained:
        from .tiny_trained import train_models

        report = train_models(out, seed)
    else:
        _build_llm(paths["llm"], seed, llm_shape)
        _build_importance(paths["importance"], seed, importance_shape, wordpiece)
        _build_nli(paths["nli"], seed, nli_shape)
    _build_bem(paths["bem"], seed, bem_shape, wordpiece)
    paths["chunker"] = _build_chunker(out / "chunker", seed)

    text = TRAINED_README_TEXT if trained else README_TEXT
    (out / "README.txt").write_text(
        text.format(
            facts=report["facts"] if trained else 0,
            seconds=report["seconds"] if trained else 0,
            seed=seed,
            llm_shape=llm_shape,
            importance_shape=importance_shape,
            nli_shape=nli_shape,
            bem_shape=bem_shape,
            importance_labels=json.dumps(IMPORTANCE_ID2LABEL),
            nli_labels=json.dumps(NLI_ID2LABEL),
            bem_labels=json.dumps(BEM_ID2LABEL),
            chunk_label_type=CHUNK_LABEL_TYPE,
        ),
        encoding="utf-8",
    )
    return paths
