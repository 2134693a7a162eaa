"""Build the tiny models from scratch, deterministically, and save them with ``save_pretrained``."""

from __future__ import annotations

import json
import os
import pathlib

from .chunker import build_chunker
from .configs import _check_shape, bem_config, importance_config, llm_config, nli_config
from .corpus import FACTS
from .spec import (
    BEM_ID2LABEL,
    CHUNK_LABEL_TYPE,
    IMPORTANCE_ID2LABEL,
    IMPORTANCE_SHAPES,
    LLM_SHAPES,
    NLI_ID2LABEL,
    NLI_SHAPES,
    SEED_OFFSETS,
)
from .tokenizers import build_llm_tokenizer, build_nli_tokenizer, build_wordpiece_tokenizer


README_TEXT = """\
Tiny random models written by mars_demo.devtools.tiny.make_tiny_models (seed={seed}).

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
Tiny TRAINED models written by mars_demo.devtools.tiny.make_tiny_models(trained=True) (seed={seed}).

llm/, importance/ and nli/ were trained for {seconds} s on the CPU on {facts} trivia facts
(mars_demo/data/tiny_facts.json; details in trained.json). They give real answers to THOSE
questions only (e.g. "Which planet is known as the Red Planet?" -> "Mars is known as the Red
Planet."); anything else gets a confident-sounding guess. bem/ and chunker/ are random.

  llm/         Qwen2ForCausalLM trained on the chat prompt (ChatML template, system text of
               mars_demo.models.prompts.CHAT_SYSTEM), byte-level BPE tokenizer
  importance/  BertForTokenClassification (3 logits: {importance_labels}), trained so that the
               words that answer the question form their own phrase and weigh the most
  nli/         DebertaForSequenceClassification, id2label {nli_labels}, trained on paraphrase
               (entailment), right-vs-wrong (contradiction) and "I am not sure." (neutral) pairs
  bem/         BertForSequenceClassification, id2label {bem_labels} (random)
  chunker/     flair SequenceTagger (final-model.pt), label type "{chunk_label_type}" (random)

Shapes: llm "{llm_shape}", importance "{importance_shape}", nli "{nli_shape}", bem "{bem_shape}".
"""



#: Random heads are calibrated on a few corpus inputs (deterministically) so that outputs are not
#: degenerate: the importance model starts a phrase at about this fraction of answer words ...
_IMPORTANCE_BEGIN_FRACTION = 1 / 3
#: ... and the tiny NLI/BEM bodies get a larger init range, so their outputs depend on the input.
_TINY_CLASSIFIER_INIT_RANGE = 0.2


def _calibration_examples(n: int = 48) -> list[tuple[str, str, str]]:
    """(question, answer, other answer) triples from the corpus, fixed order."""
    facts = FACTS[:n]
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
    torch.manual_seed(seed + SEED_OFFSETS["llm"])
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
    torch.manual_seed(seed + SEED_OFFSETS["importance"])
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
    torch.manual_seed(seed + SEED_OFFSETS["bem"])
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
    torch.manual_seed(seed + SEED_OFFSETS["nli"])
    model = DebertaForSequenceClassification(config).eval()
    if shape == "tiny":  # the big shapes are for compute benchmarks only (and slow to run)
        pairs = [(f"{q} {a}", f"{q} {b}") for q, a, b in _calibration_examples()]
        _center_sequence_classifier(model, tok, pairs)
        model.config.initializer_range = 0.02
    model.save_pretrained(path)
    tok.save_pretrained(path)



def make_tiny_models(
    out_dir,
    seed: int = 0,
    llm_shape: str = "tiny",
    importance_shape: str = "tiny",
    nli_shape: str = "tiny",
    bem_shape: str = "tiny",
    trained: bool = False,
    chunker: bool = True,
) -> dict[str, pathlib.Path]:
    """Write the test models under ``out_dir`` and return their paths.

    Returns ``{"llm", "importance", "nli", "bem": model directories (``from_pretrained``),
    "chunker": path of ``final-model.pt`` (``flair.models.SequenceTagger.load``)}``.
    Same ``seed`` -> identical weights and tokenizers.  Non-tiny shapes only change the
    transformer bodies (see :func:`llm_config`, :func:`importance_config`, :func:`nli_config`).

    ``trained=True`` trains the LLM, importance and NLI models on the facts of
    ``mars_demo/data/tiny_facts.json`` (a few minutes on 2 CPU cores; see
    :mod:`mars_demo.devtools.tiny.trained`), so that they give real answers; the answer-equivalence model
    and the chunker stay random.  Only the tiny shapes can be trained.

    ``chunker=False`` builds no chunker (and returns no "chunker"): flair is then not needed,
    as for the benchmark's models or on a machine without flair (the lent GPU machine).
    """
    if trained and (llm_shape, importance_shape, nli_shape) != ("tiny", "tiny", "tiny"):
        raise ValueError("only the tiny shapes can be trained (trained=True needs shape 'tiny')")
    # Parallel tokenizer training merges in thread order: the same seed must give the same files.
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return _make_tiny_models(out_dir, seed, llm_shape, importance_shape, nli_shape, bem_shape,
                                 trained, chunker)
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def _make_tiny_models(out_dir, seed, llm_shape, importance_shape, nli_shape, bem_shape, trained,
                      chunker):
    _check_shape(llm_shape, LLM_SHAPES, "llm")
    _check_shape(importance_shape, IMPORTANCE_SHAPES, "importance")
    _check_shape(nli_shape, NLI_SHAPES, "nli")
    _check_shape(bem_shape, IMPORTANCE_SHAPES, "bem")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("llm", "importance", "nli", "bem")}

    wordpiece = build_wordpiece_tokenizer()
    if trained:
        from .trained import train_models

        report = train_models(out, seed)
    else:
        _build_llm(paths["llm"], seed, llm_shape)
        _build_importance(paths["importance"], seed, importance_shape, wordpiece)
        _build_nli(paths["nli"], seed, nli_shape)
    _build_bem(paths["bem"], seed, bem_shape, wordpiece)
    for name in ("llm", "importance", "nli", "bem"):
        mark_toy(paths[name])
    if chunker:
        paths["chunker"] = build_chunker(out / "chunker", seed)

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


def mark_toy(folder: str | pathlib.Path) -> None:
    """Write the toy marker (:data:`mars_demo.models.toy.MARKER`) into the ``config.json`` of
    the model saved in ``folder``: loaded through the normal path, its config says it is a
    toy, and every analysis that uses it warns so."""
    from ...models.toy import MARKER

    path = pathlib.Path(folder) / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config[MARKER] = True
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


#: ``microsoft/deberta-large-mnli``'s label order, which TruthTorchLM reads without ``id2label``
MNLI_ORDER = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")


def relabel_nli(source: str | pathlib.Path, target: str | pathlib.Path,
                order: tuple[str, ...] = MNLI_ORDER) -> pathlib.Path:
    """The NLI model saved in ``source`` saved again in ``target`` with its labels in ``order``
    (its classifier's rows reordered, ``id2label`` with them): the same model, the same verdicts,
    for code that assumes a label order (TruthTorchLM reads label 0 as contradiction)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(source))
    rows = [model.config.label2id[name] for name in order]
    with torch.no_grad():
        model.classifier.weight.copy_(model.classifier.weight[rows].clone())
        model.classifier.bias.copy_(model.classifier.bias[rows].clone())
    model.config.id2label = dict(enumerate(order))
    model.config.label2id = {name: k for k, name in enumerate(order)}
    model.save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(target))
    return pathlib.Path(target)
