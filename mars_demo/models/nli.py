"""The NLI model that decides whether two sampled answers mean the same thing.

The label meaning is read from the model's ``id2label`` (never hard-coded indices). The question is
put in front of each answer, as in the original semantic-entropy code. Answers that are identical
after :func:`mars_demo.core.clustering.normalize_answer` are the same meaning without a model call;
every other ordered pair goes through the model in one batched pass.

Two input formats (``input_format``):

- ``"pair"`` (default): the tokenizer's pair encoding of (question + " " + answer1,
  question + " " + answer2), e.g. ``[CLS] A [SEP] B [SEP]`` with the tokenizer's own specials.
- ``"paper-code"``: the published LLM_Uncertainty code's input, ONE string
  ``question + " " + answer1 + " [SEP] " + question + " " + answer2`` tokenized as a single text
  (a DeBERTa tokenizer reads the literal "[SEP]" as its separator). Only answers with exactly
  equal texts skip the model, as the published code compares every pair of distinct texts.
  Load the model with ``dtype="float32"`` to judge in fp32 as the published code did.
"""

from __future__ import annotations

from ..core.clustering import NLI_LABELS, normalize_answer
from ..errors import ModelLoadError, check_finite
from ._pairs import encode_pairs

MAX_LENGTH = 512
BATCH = 64  # pairs per forward pass chunk; bounds memory for many samples
INPUT_FORMATS = ("pair", "paper-code")
DTYPES = ("auto", "float32")  # "auto": float16 on CUDA, float32 on CPU
PAPER_CODE_SEPARATOR = " [SEP] "  # between the two texts of the published code's one string
SAME = (1.0, 0.0, 0.0)  # probabilities of a text against itself (or an identical one): no call


def paper_code_input(premise: str, hypothesis: str) -> str:
    """The one string the published code gives the NLI model for (premise, hypothesis).

    >>> paper_code_input("Q? Paris", "Q? Lyon")
    'Q? Paris [SEP] Q? Lyon'
    """
    return premise + PAPER_CODE_SEPARATOR + hypothesis


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


class NLIModel:
    def __init__(self, model, tokenizer, model_id: str):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.labels = label_meaning(model.config.id2label)
        # the output index of each of NLI_LABELS: probabilities are reported in that order
        self.order = [next(k for k, v in self.labels.items() if v == name) for name in NLI_LABELS]
        self.device = next(model.parameters()).device

    @classmethod
    def from_pretrained(cls, source: str, model_id: str, dtype: str = "auto") -> "NLIModel":
        """Load the model saved in ``source``, uncached (load it through
        :func:`mars_demo.models.registry.load_nli`, which caches it). ``dtype``: ``"auto"`` =
        float16 on CUDA and float32 on CPU; ``"float32"`` = float32 everywhere (the published
        code's precision)."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        check_choice("dtype", dtype, DTYPES)
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source)
        if torch.cuda.is_available():
            half = torch.float16 if dtype == "auto" else torch.float32
            model = model.to("cuda", dtype=half)
        model.eval()
        return cls(model, tokenizer, model_id)

    def verdicts(
        self,
        pairs: list[tuple[str, str]],
        truncated: list[int] | None = None,
        unknown: list[int] | None = None,
        input_format: str = "pair",
        probabilities: list[list[float]] | None = None,
    ) -> list[str]:
        """NLI label of each (premise, hypothesis) pair, batched.

        The indices of pairs longer than the model's window (cut to fit before judging) are
        appended to ``truncated``, and of pairs holding characters the tokenizer does not know
        ([UNK]) to ``unknown``, when those lists are given. ``input_format`` ``"paper-code"``
        gives the model :func:`paper_code_input` as one text instead of the tokenizer's pair.
        ``probabilities``, when given, receives each pair's (entailment, neutral,
        contradiction) probabilities, the softmax of the same logits in float64 (the label is
        the arg-max of the logits, as always).
        """
        import torch

        check_choice("input_format", input_format, INPUT_FORMATS)
        out: list[str] = []
        for i in range(0, len(pairs), BATCH):
            chunk = pairs[i : i + BATCH]
            if input_format == "pair":
                firsts, seconds = [p for p, _ in chunk], [h for _, h in chunk]
            else:
                firsts, seconds = [paper_code_input(p, h) for p, h in chunk], None
            enc, cut, unk = encode_pairs(self.tokenizer, firsts, seconds, MAX_LENGTH)
            if truncated is not None:
                truncated += [i + k for k in cut]
            if unknown is not None:
                unknown += [i + k for k in unk]
            with torch.inference_mode():
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
            check_finite(logits, f"The NLI model {self.model_id}")
            out.extend(self.labels[int(j)] for j in logits.argmax(-1).tolist())
            if probabilities is not None:
                shares = logits.double().softmax(-1)[:, self.order]
                shares = shares / shares.sum(-1, keepdim=True)  # a model with extra labels
                probabilities.extend(shares.cpu().tolist())
        return out

    def matrix(
        self,
        question: str,
        answers: list[str],
        warnings: list[str] | None = None,
        input_format: str = "pair",
        probabilities: list | None = None,
    ) -> list[list[str]]:
        """n x n verdicts, premise = row; identical answers and the diagonal are "entailment".

        Identical means equal after ``normalize_answer`` for ``input_format="pair"``, and
        exactly equal text for ``"paper-code"`` (see the module docstring). A sentence per
        degraded result (pairs cut to fit the model's window) is appended to ``warnings`` when
        it is given. ``probabilities``, when given, receives the n x n x 3 probabilities
        (entailment, neutral, contradiction) of every ordered pair, (1, 0, 0) where the label
        is "entailment" without a model call.
        """
        many = [] if probabilities is not None else None
        labels = self.matrices([question], [answers], [warnings], input_format, many)[0]
        if many is not None:
            probabilities.extend(many[0])
        return labels

    def matrices(
        self,
        questions: list[str],
        answers: list[list[str]],
        warnings: list[list[str] | None] | None = None,
        input_format: str = "pair",
        probabilities: list | None = None,
    ) -> list[list[list[str]]]:
        """:meth:`matrix` for several questions: the needed pairs of ALL questions go through
        ONE :meth:`verdicts` call (batched in chunks of ``BATCH`` pairs as always); each
        question's pairs carry its own question. ``warnings[q]`` (when given) receives question
        ``q``'s sentences. The same verdicts as one :meth:`matrix` per question (up to float
        rounding of another padding width, which can only matter for a near-tie).
        ``probabilities``, when given, receives one n x n x 3 list per question (see
        :meth:`matrix`)."""
        check_choice("input_format", input_format, INPUT_FORMATS)
        if len(questions) != len(answers):
            raise ValueError("matrices needs one list of answers per question")
        warnings = list(warnings) if warnings is not None else [None] * len(questions)
        plans = []
        pairs: list[tuple[str, str]] = []
        for question, texts in zip(questions, answers):
            if input_format == "pair":
                norm = [normalize_answer(a) for a in texts]
            else:
                norm = list(texts)
            n = len(texts)
            needed: dict[tuple[str, str], tuple[int, int]] = {}
            for i in range(n):
                for j in range(n):
                    if norm[i] != norm[j]:
                        needed.setdefault((norm[i], norm[j]), (i, j))
            keys = list(needed)
            plans.append((norm, needed, keys, len(pairs)))
            pairs += [
                (f"{question} {texts[i]}", f"{question} {texts[j]}")
                for i, j in (needed[k] for k in keys)
            ]
        truncated: list[int] = []
        unknown: list[int] = []
        shares: list[list[float]] = []
        verdicts = (self.verdicts(pairs, truncated, unknown, input_format, shares)
                    if pairs else [])
        if len(shares) != len(pairs):
            raise RuntimeError(f"the NLI model gave {len(shares)} probability triples for "
                               f"{len(pairs)} pairs")
        out = []
        for (norm, needed, keys, start), notes in zip(plans, warnings):
            found = dict(zip(keys, verdicts[start:start + len(keys)]))
            found_shares = dict(zip(keys, shares[start:start + len(keys)]))
            mine = range(start, start + len(keys))
            cut = [k - start for k in truncated if k in mine]
            unk = [k - start for k in unknown if k in mine]

            def which(rows: list[int], keys=keys, needed=needed) -> str:
                shown = sorted({f"{i + 1} and {j + 1}"
                                for i, j in (needed[keys[k]] for k in rows)})
                return f"{len(rows)} of {len(keys)} comparisons (samples {'; '.join(shown[:5])})"

            if cut and notes is not None:
                notes.append(
                    f"The NLI model reads at most {MAX_LENGTH} tokens; {which(cut)} were cut "
                    "to fit, so those verdicts and the clusters are less reliable."
                )
            if unk and notes is not None:
                notes.append(
                    f"The NLI model does not know some characters ([UNK]) in {which(unk)}; "
                    "those verdicts and the clusters are less reliable."
                )
            n = len(norm)
            out.append([
                ["entailment" if norm[i] == norm[j] else found[(norm[i], norm[j])]
                 for j in range(n)]
                for i in range(n)
            ])
            if probabilities is not None:
                probabilities.append([
                    [list(SAME) if norm[i] == norm[j] else found_shares[(norm[i], norm[j])]
                     for j in range(n)]
                    for i in range(n)
                ])
        return out
