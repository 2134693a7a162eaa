"""The NLI model that decides whether two sampled answers mean the same thing.

The label meaning is read from the model's ``id2label`` (never hard-coded indices). The question is
put in front of each answer, as in the original semantic-entropy code. Each pair gets ONE
judgement: its label is the arg-max of the probabilities saved with it
(:func:`mars_demo.core.clustering.one_judgement`). Who judges a pair of identical texts (a text
against itself, a repeated answer) is the recipe's choice (``identical``): ``"model"`` asks the
model, as for every other pair (lm-polygraph's ``SemanticMatrixCalculator`` computes the diagonal
so); ``"rule"`` decides exactly equal texts without the model, "entailment" with probabilities
(1, 0, 0), listed in the matrix's ``by_rule``.

Cost without a changed verdict (:meth:`NLIModel.judge`): each distinct (premise, hypothesis)
text pair is judged once, whichever questions or answers ask for it; the pairs are tokenized
once, sorted by length and cut into batches of similar length (at most ``BATCH`` pairs and
:func:`~mars_demo.optional.pairs.tokens_per_batch` padded tokens each: 8192 on a GPU, 1536 on a
CPU, where larger batches cost more per pair), so padding stays small; one forward pass per
batch. The answers come back in the order asked. Padding is masked, so it changes a
probability only by float rounding (about 1e-7 in float32), never a verdict that is not a
near-tie.

Two input formats (``input_format``):

- ``"pair"`` (default): the tokenizer's pair encoding of (question + " " + answer1,
  question + " " + answer2), e.g. ``[CLS] A [SEP] B [SEP]`` with the tokenizer's own specials.
- ``"paper-code"``: the published LLM_Uncertainty code's input, ONE string
  ``question + " " + answer1 + " [SEP] " + question + " " + answer2`` tokenized as a single text
  (a DeBERTa tokenizer reads the literal "[SEP]" as its separator).
  Load the model with ``dtype="float32"`` to judge in fp32 as the published code did.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..core.clustering import IDENTICAL_TEXTS, NLI_LABELS, label_of, one_judgement
from ..errors import ModelLoadError, check_finite
from ..optional.pairs import length_batches, pad_rows, tokenize_pairs, tokens_per_batch

MAX_LENGTH = 512
BATCH = 64  # at most this many pairs per forward pass; bounds memory for many samples
INPUT_FORMATS = ("pair", "paper-code")
#: "auto": float16 on CUDA, float32 on CPU; "int8": the linear layers in int8 on the CPU
DTYPES = ("auto", "float32", "int8")
PAPER_CODE_SEPARATOR = " [SEP] "  # between the two texts of the published code's one string


def paper_code_input(premise: str, hypothesis: str) -> str:
    """The one string the published code gives the NLI model for (premise, hypothesis).

    >>> paper_code_input("Q? Paris", "Q? Lyon")
    'Q? Paris [SEP] Q? Lyon'
    """
    return premise + PAPER_CODE_SEPARATOR + hypothesis


@dataclass
class PairVerdicts:
    """What the NLI model said of a list of (premise, hypothesis) pairs, in the order asked.

    ``labels[k]``: "entailment", "neutral" or "contradiction", the arg-max of
    ``probabilities[k]`` (:func:`~mars_demo.core.clustering.label_of`); ``probabilities[k]``:
    (entailment, neutral, contradiction), the softmax of the model's logits in float64;
    ``truncated`` / ``unknown``: indices of the pairs cut to fit the model's window / holding
    characters the tokenizer does not know ([UNK]); ``passes``: forward passes made.
    """

    labels: list[str] = field(default_factory=list)
    probabilities: list[list[float]] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    passes: int = 0


@dataclass
class NLIMatrix:
    """The verdicts among one question's n answers: ``labels[i][j]`` with answer i as premise,
    the arg-max of ``probabilities[i][j]`` (entailment, neutral, contradiction); ``by_rule``: the
    ``[i, j]`` pairs decided by the identical-text rule, not the model; and ``warnings``
    (sentences for the user when verdicts are degraded: pairs cut to fit, unknown characters)."""

    labels: list[list[str | None]]
    probabilities: list[list[list[float] | None]]
    warnings: list[str] = field(default_factory=list)
    by_rule: list[list[int]] = field(default_factory=list)


def check_choice(name: str, value, allowed: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the allowed values unless ``value`` is one of them."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def label_meaning(id2label: dict) -> dict[int, str]:
    """Map output indices to "entailment" / "neutral" / "contradiction" from ``id2label``."""
    out: dict[int, str] = {}
    for k, v in id2label.items():
        name = str(v).lower()
        if name.startswith("entail"):
            out[int(k)] = "entailment"
        elif name.startswith("neutral"):
            out[int(k)] = "neutral"
        elif name.startswith("contradict"):
            out[int(k)] = "contradiction"
    if sorted(out.values()) != ["contradiction", "entailment", "neutral"]:
        raise ModelLoadError(
            f"The NLI model's labels {dict(id2label)} do not name entailment, neutral and "
            "contradiction; pick an MNLI-style model such as microsoft/deberta-large-mnli."
        )
    return out


def degraded(cut: list[tuple[int, int]], unknown: list[tuple[int, int]], total: int
             ) -> list[str]:
    """The warnings of a question's verdicts: the (i, j) pairs cut to fit the model's window
    and those holding characters the tokenizer does not know, of ``total`` judged."""

    def which(pairs: list[tuple[int, int]]) -> str:
        shown = sorted({f"{i + 1} and {j + 1}" for i, j in pairs})
        return f"{len(pairs)} of {total} comparisons (samples {'; '.join(shown[:5])})"

    warnings = []
    if cut:
        warnings.append(f"The NLI model reads at most {MAX_LENGTH} tokens; {which(cut)} were "
                        "cut to fit, so those verdicts and the clusters are less reliable.")
    if unknown:
        warnings.append(f"The NLI model does not know some characters ([UNK]) in "
                        f"{which(unknown)}; those verdicts and the clusters are less reliable.")
    return warnings


class NLIModel:
    def __init__(self, model, tokenizer, model_id: str):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.labels = label_meaning(model.config.id2label)
        # the output index of each of NLI_LABELS: probabilities are reported in that order
        self.order = [next(k for k, v in self.labels.items() if v == name) for name in NLI_LABELS]
        self.device = next(model.parameters()).device
        #: padded tokens a forward pass takes at most: the device's budget
        #: (:func:`~mars_demo.optional.pairs.tokens_per_batch`)
        self.batch_tokens = tokens_per_batch(self.device)

    @classmethod
    def from_pretrained(cls, source: str, model_id: str, dtype: str = "auto") -> "NLIModel":
        """Load the model saved in ``source``, uncached (load it through
        :func:`mars_demo.models.registry.load_nli`, which caches it). ``dtype``: ``"auto"`` =
        float16 on CUDA and float32 on CPU; ``"float32"`` = float32 everywhere (the published
        code's precision); ``"int8"`` = on the CPU, every linear layer's weights in int8 and its
        input quantized to int8 at run time (torch's dynamic quantization, ``quantize_dynamic``:
        the same model, fewer and cheaper operations; ``--nli-int8``, measured in
        docs/benchmark.md), refused on CUDA."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        check_choice("dtype", dtype, DTYPES)
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source)
        if dtype == "int8":
            if torch.cuda.is_available():
                raise ValueError("the NLI model's int8 runs on the CPU only")
            with warnings.catch_warnings():  # torch 2.13 says torch.ao's quantized tensors
                # are deprecated (torchao takes over); it still runs them, and the docs say so
                warnings.simplefilter("ignore", UserWarning)
                model = torch.ao.quantization.quantize_dynamic(
                    model.eval(), {torch.nn.Linear}, dtype=torch.qint8)
        elif torch.cuda.is_available():
            half = torch.float16 if dtype == "auto" else torch.float32
            model = model.to("cuda", dtype=half)
        model.eval()
        return cls(model, tokenizer, model_id)

    def judge(self, pairs: list[tuple[str, str]], input_format: str = "pair") -> PairVerdicts:
        """Label and probabilities of each (premise, hypothesis) pair, in the order given.

        Each distinct pair is judged once; ALL pairs are sorted by length into batches
        (:func:`length_batches`), one forward pass each (``passes`` counts them), whichever
        caller's they are. Padding is masked, so a pair's probabilities are those of a pass
        over it alone, unpadded, up to float32 rounding (about 1e-7; a test holds them within
        1e-5). ``input_format`` ``"paper-code"`` gives the model :func:`paper_code_input` as
        one text instead of the tokenizer's pair.
        """
        import torch

        check_choice("input_format", input_format, INPUT_FORMATS)
        out = PairVerdicts()
        if not pairs:
            return out
        first_of: dict[tuple[str, str], int] = {}
        where = [first_of.setdefault(pair, len(first_of)) for pair in pairs]
        distinct = list(first_of)
        if input_format == "pair":
            firsts, seconds = [p for p, _ in distinct], [h for _, h in distinct]
        else:
            firsts, seconds = [paper_code_input(p, h) for p, h in distinct], None
        enc, cut, unk = tokenize_pairs(self.tokenizer, firsts, seconds, MAX_LENGTH)
        labels: list[str] = [""] * len(distinct)
        shares: list[list[float]] = [[]] * len(distinct)
        lengths = [len(ids) for ids in enc["input_ids"]]
        for rows in length_batches(lengths, BATCH, self.batch_tokens):
            batch = pad_rows(self.tokenizer, enc, rows)
            with torch.inference_mode():
                logits = self.model(**{k: v.to(self.device) for k, v in batch.items()}).logits
            out.passes += 1
            check_finite(logits, f"The NLI model {self.model_id}")
            p = logits.double().softmax(-1)[:, self.order]
            p = p / p.sum(-1, keepdim=True)  # a model with extra labels
            for i, share in zip(rows, p.cpu().tolist()):
                labels[i], shares[i] = label_of(share), share
        cut_set, unk_set = set(cut), set(unk)
        out.labels = [labels[d] for d in where]
        out.probabilities = [list(shares[d]) for d in where]
        out.truncated = [k for k, d in enumerate(where) if d in cut_set]
        out.unknown = [k for k, d in enumerate(where) if d in unk_set]
        return out

    def verdicts(
        self,
        pairs: list[tuple[str, str]],
        truncated: list[int] | None = None,
        unknown: list[int] | None = None,
        input_format: str = "pair",
    ) -> list[str]:
        """The labels of :meth:`judge`; the indices of pairs cut to fit the model's window, and
        of pairs holding [UNK], are appended to ``truncated`` and ``unknown`` when given."""
        judged = self.judge(pairs, input_format)
        if truncated is not None:
            truncated += judged.truncated
        if unknown is not None:
            unknown += judged.unknown
        return judged.labels

    def matrix(self, question: str, answers: list[str], input_format: str = "pair",
               identical: str = "model") -> NLIMatrix:
        """Verdicts and probabilities among ``answers`` (premise = row), every ordered pair, the
        diagonal included, each label the arg-max of its probabilities.

        ``identical`` (:data:`~mars_demo.core.clustering.IDENTICAL_TEXTS`): with ``"model"``
        every distinct text is also judged against itself (one pair per distinct text, which
        the diagonal and the pairs of a repeated answer share), as lm-polygraph's semantic
        matrix is; with ``"rule"`` exactly equal texts are "entailment" (1, 0, 0) without the
        model, listed in ``by_rule``. The matrix's ``warnings`` say when verdicts are degraded
        (pairs cut to fit the model's window, unknown characters).
        """
        return self.matrices([question], [answers], input_format, identical)[0]

    def matrices(self, questions: list[str], answers: list[list[str]],
                 input_format: str = "pair", identical: str = "model") -> list[NLIMatrix]:
        """:meth:`matrix` for several questions: the needed pairs of ALL questions go through
        ONE :meth:`judge` call; each question's pairs carry its own question. The same verdicts
        as one :meth:`matrix` per question (up to float rounding of another padding width,
        which can only matter for a near-tie)."""
        return self.matrices_and_pairs(questions, answers, [], input_format, identical)[0]

    def matrices_and_pairs(self, questions: list[str], answers: list[list[str]],
                           extra: list[tuple[str, str]], input_format: str = "pair",
                           identical: str = "model") -> tuple[list[NLIMatrix], PairVerdicts]:
        """:meth:`matrices`, and the verdicts of ``extra`` (premise, hypothesis) pairs, all in
        the same ONE :meth:`judge` call: semantic density's greedy-to-sample pairs share the
        samples' length-sorted batches, so an analysis makes one forward pass where its pairs
        fit one batch (``passes`` of the returned verdicts counts them)."""
        check_choice("input_format", input_format, INPUT_FORMATS)
        check_choice("identical", identical, IDENTICAL_TEXTS)
        if len(questions) != len(answers):
            raise ValueError("matrices needs one list of answers per question")
        plans = []
        pairs: list[tuple[str, str]] = []
        for question, texts in zip(questions, answers):
            needed: dict[tuple[str, str], tuple[int, int]] = {}
            for i, premise in enumerate(texts):
                for j, hypothesis in enumerate(texts):  # every ordered pair of texts
                    if identical == "model" or premise != hypothesis:
                        needed.setdefault((premise, hypothesis), (i, j))
            plans.append((list(texts), needed, len(pairs)))
            pairs += [(f"{question} {texts[i]}", f"{question} {texts[j]}")
                      for i, j in needed.values()]
        judged = self.judge(pairs + list(extra), input_format)
        if len(judged.probabilities) != len(pairs) + len(extra):
            raise RuntimeError(f"the NLI model gave {len(judged.probabilities)} probability "
                               f"triples for {len(pairs) + len(extra)} pairs")
        return ([self._matrix_of(plan, judged, identical) for plan in plans],
                _after(judged, len(pairs)))

    def clustering_matrices(self, questions: list[str], answers: list[list[str]], rule: str,
                            extra: list[tuple[str, str]] = (), input_format: str = "pair",
                            identical: str = "model") -> tuple[list[NLIMatrix], PairVerdicts]:
        """:meth:`matrices_and_pairs` judging only the pairs the first-member clustering reads
        (:func:`~mars_demo.core.clustering.pending_pairs` under ``rule``): one round per
        cluster, every question's pairs of a round (and, in the first, the ``extra`` pairs) in
        one :meth:`judge` call. The pairs never read are None in the labels and the
        probabilities (the diagonal too, which the clustering never reads); with ``identical``
        ``"rule"`` exactly equal texts are "entailment" (1, 0, 0) without a call, as in
        :meth:`matrix`. ``passes`` of the returned verdicts counts every round's forward
        passes."""
        from ..core.clustering import pending_pairs

        check_choice("input_format", input_format, INPUT_FORMATS)
        check_choice("identical", identical, IDENTICAL_TEXTS)
        states = []
        for question, texts in zip(questions, answers):
            n = len(texts)
            labels, probabilities, _ = one_judgement(texts, [[None] * n for _ in range(n)],
                                                     identical)
            states.append({"question": question, "texts": list(texts), "labels": labels,
                           "probabilities": probabilities, "cut": [], "unknown": [],
                           "judged": 0})
        rest, passes = None, 0
        while True:
            asks = [(state, i, j) for state in states
                    for i, j in pending_pairs(state["labels"], rule)]
            now = list(extra) if rest is None else []
            if not asks and not now:
                break
            pairs = [(f"{st['question']} {st['texts'][i]}", f"{st['question']} {st['texts'][j]}")
                     for st, i, j in asks]
            judged = self.judge(pairs + now, input_format)
            passes += judged.passes
            for x, (st, i, j) in enumerate(asks):
                st["labels"][i][j], st["probabilities"][i][j] = (judged.labels[x],
                                                                 judged.probabilities[x])
                st["judged"] += 1
                st["cut"] += [(i, j)] if x in judged.truncated else []
                st["unknown"] += [(i, j)] if x in judged.unknown else []
            if rest is None:
                rest = _after(judged, len(pairs))
        rest = rest or PairVerdicts()
        rest.passes = passes
        matrices = []
        for st in states:
            labels, probabilities, by_rule = one_judgement(st["texts"], st["probabilities"],
                                                           identical)
            matrices.append(NLIMatrix(labels, probabilities,
                                      degraded(st["cut"], st["unknown"], st["judged"]), by_rule))
        return matrices, rest

    @staticmethod
    def _matrix_of(plan, judged: PairVerdicts, identical: str) -> NLIMatrix:
        """One question's :class:`NLIMatrix` from its part of the judged pairs."""
        texts, needed, start = plan
        keys = list(needed)
        mine = range(start, start + len(keys))
        found = {k: judged.probabilities[start + x] for x, k in enumerate(keys)}
        cut = [needed[keys[k - start]] for k in judged.truncated if k in mine]
        unk = [needed[keys[k - start]] for k in judged.unknown if k in mine]
        probabilities = [[found.get((a, b)) for b in texts] for a in texts]
        labels, probabilities, by_rule = one_judgement(texts, probabilities, identical)
        return NLIMatrix(labels, probabilities, degraded(cut, unk, len(keys)), by_rule)


def _after(judged: PairVerdicts, n: int) -> PairVerdicts:
    """The verdicts of the pairs after the first ``n`` of ``judged`` (the extra pairs), with
    their indices counted from there; ``passes`` those of the whole call."""
    return PairVerdicts(labels=judged.labels[n:], probabilities=judged.probabilities[n:],
                        truncated=[k - n for k in judged.truncated if k >= n],
                        unknown=[k - n for k in judged.unknown if k >= n],
                        passes=judged.passes)
