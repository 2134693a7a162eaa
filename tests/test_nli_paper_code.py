"""The NLI model's two input formats: the tokenizer's pair and the published code's one string."""

import pytest
import torch

from mars_demo.models.nli import INPUT_FORMATS, paper_code_input
from mars_demo.models.registry import load_nli, nli_key

QUESTION = "Which planet is known as the Red Planet?"


def received_inputs(nli, monkeypatch):
    """Record every batch of input ids (without padding) and token types the model gets."""
    seen = []
    original = nli.model.forward

    def forward(*args, **kwargs):
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        types = kwargs.get("token_type_ids")
        for row in range(ids.shape[0]):
            keep = mask[row].bool()
            seen.append((ids[row][keep].tolist(),
                         None if types is None else types[row][keep].tolist()))
        return original(*args, **kwargs)

    monkeypatch.setattr(nli.model, "forward", forward)
    return seen


def test_paper_code_input_is_the_published_string(tiny_models, monkeypatch):
    nli = load_nli(str(tiny_models["nli"]))
    seen = received_inputs(nli, monkeypatch)
    nli.matrix(QUESTION, ["Mars.", "It is Venus"], input_format="paper-code")
    published = [  # both ways, and each text against itself (the matrix's diagonal)
        QUESTION + " " + "Mars." + " [SEP] " + QUESTION + " " + "It is Venus",
        QUESTION + " " + "It is Venus" + " [SEP] " + QUESTION + " " + "Mars.",
        QUESTION + " " + "Mars." + " [SEP] " + QUESTION + " " + "Mars.",
        QUESTION + " " + "It is Venus" + " [SEP] " + QUESTION + " " + "It is Venus",
    ]
    assert [paper_code_input(f"{QUESTION} Mars.", f"{QUESTION} It is Venus")] == published[:1]
    expected = [nli.tokenizer(text)["input_ids"] for text in published]
    assert sorted(ids for ids, _ in seen) == sorted(expected)
    sep = nli.tokenizer.sep_token_id
    for ids, types in seen:
        assert nli.tokenizer.decode(ids).count("[SEP]") == 2  # the literal one and the last
        assert ids.count(sep) == 2  # the literal "[SEP]" is the separator token itself
        assert types is None or set(types) == {0}  # one segment, as the published encode()


def test_paper_code_input_differs_from_the_pair_encoding(tiny_models, monkeypatch):
    nli = load_nli(str(tiny_models["nli"]))
    seen = received_inputs(nli, monkeypatch)
    nli.matrix(QUESTION, ["Mars.", "It is Venus"])
    pair_ids = sorted(ids for ids, _ in seen)
    seen.clear()
    nli.matrix(QUESTION, ["Mars.", "It is Venus"], input_format="paper-code")
    assert sorted(ids for ids, _ in seen) != pair_ids
    # Default: the tokenizer's own pair, premise then hypothesis.
    enc = nli.tokenizer(f"{QUESTION} Mars.", f"{QUESTION} It is Venus")
    assert enc["input_ids"] in pair_ids


def test_paper_code_compares_every_pair_of_distinct_texts(tiny_models, monkeypatch):
    nli = load_nli(str(tiny_models["nli"]))
    seen = received_inputs(nli, monkeypatch)
    answers = ["Mars.", "mars", "Mars."]
    m = nli.matrix(QUESTION, answers, input_format="paper-code", identical="rule")
    # "Mars." / "mars" both ways; equal texts (the repeated "Mars.", the diagonal) by the rule
    assert len(seen) == 2
    assert m.by_rule == [[0, 0], [0, 2], [1, 1], [2, 0], [2, 2]]
    assert m.labels[0][2] == m.labels[2][0] == "entailment"
    assert m.probabilities[0][2] == [1.0, 0.0, 0.0]
    seen.clear()
    # the default asks the model for every ordered pair of the two texts, each against itself
    # too; the repeated "Mars." shares the pair of "Mars." against itself, label and all
    default = nli.matrix(QUESTION, answers)
    assert len(seen) == 4 and default.by_rule == []
    assert default.probabilities[0][2] == default.probabilities[0][0] != [1.0, 0.0, 0.0]
    assert default.labels[0][2] == default.labels[0][0]


def test_paper_code_verdicts_match_the_model_on_the_published_string(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    pairs = [(f"{QUESTION} Mars", f"{QUESTION} Venus")]
    enc = nli.tokenizer([paper_code_input(*pairs[0])], return_tensors="pt")
    with torch.inference_mode():
        index = int(nli.model(**enc).logits.argmax(-1))
    assert nli.verdicts(pairs, input_format="paper-code") == [nli.labels[index]]


def test_input_format_and_dtype_are_checked(tiny_models):
    nli = load_nli(str(tiny_models["nli"]))
    assert INPUT_FORMATS == ("pair", "paper-code")
    with pytest.raises(ValueError, match="input_format"):
        nli.matrix(QUESTION, ["a", "b"], input_format="string")
    with pytest.raises(ValueError, match="dtype"):
        nli_key(str(tiny_models["nli"]), dtype="half")


def test_float32_load_is_cached_apart(tiny_models):
    path = str(tiny_models["nli"])
    assert nli_key(path) == ("nli", nli_key(path)[1])
    assert nli_key(path, "float32") == (*nli_key(path), "float32")
    fp32 = load_nli(path, dtype="float32")
    assert fp32 is not load_nli(path)
    assert fp32 is load_nli(path, dtype="float32")
    assert {p.dtype for p in fp32.model.parameters()} == {torch.float32}
