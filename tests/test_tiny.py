"""Tests of the offline tiny-model factory (mars_demo.devtools.tiny)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import json  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

from mars_demo.devtools import tiny  # noqa: E402

TEXT = "Mars is known as the Red Planet. 🚀 Ünïcode"


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return tiny.make_tiny_models(tmp_path_factory.mktemp("tiny"), seed=0)


def test_layout(paths):
    assert set(paths) == {"llm", "importance", "nli", "bem", "chunker"}
    for name in ("llm", "importance", "nli", "bem"):
        assert (paths[name] / "config.json").is_file()
        assert (paths[name] / "tokenizer.json").is_file()
    assert paths["chunker"].name == "final-model.pt" and paths["chunker"].is_file()
    readme = (paths["llm"].parent / "README.txt").read_text(encoding="utf-8")
    assert "random" in readme.lower()


def test_llm_tokenizer_and_generate(paths):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(paths["llm"])
    assert tok.is_fast
    enc = tok(TEXT, return_offsets_mapping=True)
    assert "token_type_ids" not in enc
    assert tok.decode(enc["input_ids"]) == TEXT
    # offsets cover the text (byte pieces of one character share its offsets)
    assert enc["offset_mapping"][0][0] == 0 and enc["offset_mapping"][-1][1] == len(TEXT)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"

    chat = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert chat == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n"

    model = AutoModelForCausalLM.from_pretrained(paths["llm"])
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.vocab_size == len(tok)
    assert not model.config.tie_word_embeddings
    assert model.generation_config.eos_token_id == tok.eos_token_id == model.config.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id == model.config.pad_token_id
    inputs = tok([TEXT], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] <= inputs["input_ids"].shape[1] + 5
    assert out.shape[1] > inputs["input_ids"].shape[1]


def test_importance_model(paths):
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(paths["importance"])
    assert tok.is_fast and tok.model_max_length == 512
    question = "Which planet is known as the Red Planet?"
    answer = "It is Mars, the fourth planet from the Sun."
    words = re.findall(r"\w+|[^\w\s]", answer)
    enc = tok([question], words, is_split_into_words=True, truncation=True,
              return_offsets_mapping=True, return_tensors="pt")
    tt = enc["token_type_ids"][0].tolist()
    assert set(tt) == {0, 1} and tt == sorted(tt)
    seq = enc.sequence_ids()
    word_ids = enc.word_ids()
    answer_words = sorted({w for w, s in zip(word_ids, seq) if s == 1})
    assert answer_words == list(range(len(words)))
    assert {w for w, s in zip(word_ids, seq) if s == 0} == {0}  # the question is one item
    for w, s, (a, b), i in zip(word_ids, seq, enc["offset_mapping"][0].tolist(), enc["input_ids"][0]):
        if s == 1 and i != tok.unk_token_id:
            piece = tok.convert_ids_to_tokens(int(i)).removeprefix("##")
            assert words[w].lower()[a:b] == piece

    model = AutoModelForTokenClassification.from_pretrained(paths["importance"])
    assert model.config.id2label == tiny.IMPORTANCE_ID2LABEL
    enc.pop("offset_mapping")
    with torch.no_grad():
        logits = model(**enc).logits
    assert logits.shape == (1, enc["input_ids"].shape[1], 3)

    # segmentation is not degenerate: both boundary classes occur on answer words
    begins = []
    for q, _, full in tiny.FACTS[:20]:
        e = tok([q], re.findall(r"\w+|[^\w\s]", full), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            lg = model(**e).logits[0]
        first = {}
        for i, (w, s) in enumerate(zip(e.word_ids(), e.sequence_ids())):
            if s == 1 and w not in first:
                first[w] = i
        begins += [int(lg[i, :2].argmax() == 0) for w, i in first.items() if w > 0]
    assert 0.1 < sum(begins) / len(begins) < 0.7


def test_nli_and_bem(paths):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(paths["nli"])
    model = AutoModelForSequenceClassification.from_pretrained(paths["nli"])
    assert type(model).__name__ == "DebertaForSequenceClassification"
    assert model.config.id2label == {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}
    assert model.config.label2id == {"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2}
    enc = tok(["Q? It is Mars.", "Q? " + TEXT], ["Q? Mars.", "Q? Venus."], return_tensors="pt", padding=True)
    toks = tok.convert_ids_to_tokens(enc["input_ids"][0])
    assert toks[0] == "[CLS]" and toks.count("[SEP]") == 2
    with torch.no_grad():
        logits = model(**enc).logits
    assert logits.shape == (2, 3)

    btok = AutoTokenizer.from_pretrained(paths["bem"])
    bem = AutoModelForSequenceClassification.from_pretrained(paths["bem"])
    assert bem.config.id2label == {0: "not_equivalent", 1: "equivalent"}
    with torch.no_grad():
        probs = bem(**btok("Q? It is Mars.", "Q? Mars.", return_tensors="pt")).logits.softmax(-1)
    assert probs.shape == (1, 2)


def test_chunker(paths):
    from flair.data import Sentence
    from flair.models import SequenceTagger

    tagger = SequenceTagger.load(str(paths["chunker"]))
    assert tagger.tag_type == tiny.CHUNK_LABEL_TYPE
    spans = []
    for text in ("The happy man has been eating at the diner",
                 "It is Mars, the fourth planet from the Sun."):
        sentence = Sentence(text)
        tagger.predict(sentence)
        spans += sentence.get_spans(tiny.CHUNK_LABEL_TYPE)
    assert spans
    assert any(len(s.tokens) > 1 for s in spans)
    assert {s.tag for s in spans} <= set(tiny.CHUNK_PHRASE_TYPES)


def test_same_seed_same_models(paths, tmp_path):
    import torch
    from safetensors.torch import load_file

    again = tiny.make_tiny_models(tmp_path / "a", seed=0)
    other = tiny.make_tiny_models(tmp_path / "b", seed=1)
    for name in ("llm", "importance", "nli", "bem"):
        w0 = load_file(paths[name] / "model.safetensors")
        w1 = load_file(again[name] / "model.safetensors")
        w2 = load_file(other[name] / "model.safetensors")
        assert w0.keys() == w1.keys()
        assert all(torch.equal(w0[k], w1[k]) for k in w0)
        assert not all(torch.equal(w0[k], w2[k]) for k in w0)
        t0 = json.loads((paths[name] / "tokenizer.json").read_text(encoding="utf-8"))
        t1 = json.loads((again[name] / "tokenizer.json").read_text(encoding="utf-8"))
        assert t0 == t1
    s0 = torch.load(paths["chunker"], weights_only=False)["state_dict"]
    s1 = torch.load(again["chunker"], weights_only=False)["state_dict"]
    assert all(torch.equal(s0[k], s1[k]) for k in s0)


def test_llm_4bit_on_cpu(paths):
    import bitsandbytes  # noqa: F401  (a requirement: 4-bit must work, not be skipped)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
    quant = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.float32,
    )
    tok = AutoTokenizer.from_pretrained(paths["llm"])
    model = AutoModelForCausalLM.from_pretrained(paths["llm"], quantization_config=quant, device_map="cpu")
    assert type(model.model.layers[0].mlp.down_proj).__name__ == "Linear4bit"
    inputs = tok(["Mars is"], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]


def test_configs():
    c = tiny.llm_config("7b")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size) == (3584, 28, 28, 4, 18944)
    assert c.rope_theta == 1e6 and c.vocab_size == tiny.TOKENIZER_VOCAB_SIZE
    assert not c.tie_word_embeddings
    c = tiny.llm_config("cpu")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size) == (896, 24, 14, 2, 4864)
    c = tiny.llm_config("tiny")
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers) == (64, 128, 2)
    b = tiny.importance_config("base")
    assert (b.hidden_size, b.num_hidden_layers, b.num_attention_heads, b.intermediate_size) == (768, 12, 12, 3072)
    assert b.num_labels == 3 and b.max_position_embeddings == 512
    n = tiny.nli_config("large")
    assert (n.hidden_size, n.num_hidden_layers, n.num_attention_heads, n.intermediate_size) == (1024, 24, 16, 4096)
    assert tiny.nli_config("base").hidden_size == 768
    with pytest.raises(ValueError):
        tiny.llm_config("13b")
