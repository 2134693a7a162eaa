"""The NLI model that decides whether two sampled answers mean the same thing.

The label meaning is read from the model's ``id2label`` (never hard-coded indices). The question is
put in front of each answer, as in the original semantic-entropy code. Answers that are identical
after :func:`mars_demo.core.clustering.normalize_answer` are the same meaning without a model call;
every other ordered pair goes through the model in one batched pass.
"""

from __future__ import annotations

from ..core.clustering import normalize_answer
from .loading import ModelLoadError, check_source, load_cached

MAX_LENGTH = 512
BATCH = 64  # pairs per forward pass chunk; bounds memory for many samples


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
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, model_id: str, progress=None) -> "NLIModel":
        source = check_source(model_id, "NLI model")

        def loader() -> NLIModel:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForSequenceClassification.from_pretrained(source)
            if torch.cuda.is_available():
                model = model.to("cuda", dtype=torch.float16)
            model.eval()
            return cls(model, tokenizer, model_id)

        return load_cached(("nli", source), "NLI model", model_id, loader, progress)

    def verdicts(self, pairs: list[tuple[str, str]]) -> list[str]:
        """NLI label of each (premise, hypothesis) pair, batched."""
        import torch

        out: list[str] = []
        for i in range(0, len(pairs), BATCH):
            chunk = pairs[i : i + BATCH]
            enc = self.tokenizer(
                [p for p, _ in chunk], [h for _, h in chunk], truncation=True,
                max_length=MAX_LENGTH, padding=True, return_tensors="pt",
            )
            with torch.inference_mode():
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
            out.extend(self.labels[int(j)] for j in logits.argmax(-1).tolist())
        return out

    def matrix(self, question: str, answers: list[str]) -> list[list[str]]:
        """n x n verdicts, premise = row; identical answers and the diagonal are "entailment"."""
        norm = [normalize_answer(a) for a in answers]
        n = len(answers)
        needed: dict[tuple[str, str], tuple[int, int]] = {}
        for i in range(n):
            for j in range(n):
                if norm[i] != norm[j]:
                    needed.setdefault((norm[i], norm[j]), (i, j))
        keys = list(needed)
        pairs = [
            (f"{question} {answers[i]}", f"{question} {answers[j]}")
            for i, j in (needed[k] for k in keys)
        ]
        found = dict(zip(keys, self.verdicts(pairs))) if pairs else {}
        return [
            ["entailment" if norm[i] == norm[j] else found[(norm[i], norm[j])] for j in range(n)]
            for i in range(n)
        ]
