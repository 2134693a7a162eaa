"""Tokenizers of the tiny models, trained offline on :func:`corpus.corpus` (byte-level BPE for the
LLM, WordPiece for the BERT models, a DeBERTa-style one for NLI)."""

from __future__ import annotations

from .corpus import corpus
from .spec import BERT_SPECIAL_TOKENS, LLM_SPECIAL_TOKENS, NLI_SPECIAL_TOKENS, TOKENIZER_VOCAB_SIZE

#: ChatML template (as Qwen2.5-Instruct, without its default system prompt and tool support)
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)



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


