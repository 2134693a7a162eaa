"""The tiny flair phrase chunker of the ``bem`` importance method (random weights, well-formed
BIOES spans)."""

from __future__ import annotations

import pathlib

from .corpus import corpus
from .spec import CHUNK_LABEL_TYPE, CHUNK_PHRASE_TYPES, SEED_OFFSETS

_CHUNK_EMISSION_STD = 2.0  # spread of the re-centred emission scores

def _chunker_vocabulary() -> list[str]:
    import re

    words: set[str] = set()
    for line in corpus():
        words.update(re.findall(r"\w+|[^\w\s]", line))
    return sorted(words)


def build_chunker(path: pathlib.Path, seed: int) -> pathlib.Path:
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
        torch.manual_seed(seed + SEED_OFFSETS["chunker"])
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


