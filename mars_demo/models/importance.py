"""Importance functions: phrases of an answer and one importance score per phrase.

- "model" (default): the trained MARS model (``duygunuryldz/MARS``), phrase level, one batched
  forward pass for all answers. Input exactly as in training: first segment the question as one
  item, second segment the answer's words ``re.findall(r"\\w+|[^\\w\\s]", answer)``,
  ``is_split_into_words=True``, token type ids on, truncation at 512. A phrase starts at the first
  word and at every word whose first sub-token's argmax over logits[0:2] is 0; its score is
  sigmoid(logits[2]) at its first sub-token.
- "token": the paper's token-level ablation: every word its own phrase, same model and pass.
- "bem": the paper's Algorithm 1: Flair chunk phrases, each masked out of the answer in turn, an
  answer-equivalence classifier decides; score_k = 1 - P(equivalent). All masked answers of all
  answers go through the classifier in one batched pass.

Every answer is returned with the phrases' character spans, so phrases map onto LLM tokens by
offsets (``mars_demo.core.alignment``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.alignment import phrase_spans_from_starts, word_spans
from ..errors import ModelLoadError, check_finite
from ..optional.pairs import encode_pairs

MAX_LENGTH = 512  # the importance model's window (BERT-base)
BATCH = 64  # answers per forward pass of score_many; bounds memory for many questions


@dataclass
class PhraseScoring:
    """Phrases of one answer: character spans into the answer and raw importance scores."""

    spans: list[tuple[int, int]]
    scores: list[float]
    warnings: list[str] = field(default_factory=list)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _check_tokenizer(tokenizer, model_id: str) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"The importance model {model_id!r} needs a fast tokenizer (word ids and "
            "offsets); its tokenizer.json is missing."
        )


def _check_model(model, model_id: str) -> None:
    if model.config.num_labels != 3:
        raise ModelLoadError(
            f"{model_id!r} is not a MARS importance model: it has "
            f"{model.config.num_labels} output logits per token, MARS needs 3 "
            "(begin phrase, inside phrase, importance)."
        )


class ImportanceModel:
    """The trained MARS importance model (BERT token classifier with 3 logits per sub-token)."""

    def __init__(self, model, tokenizer, model_id: str):
        self.model = model
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.device = next(model.parameters()).device

    @classmethod
    def from_pretrained(cls, source: str, model_id: str) -> "ImportanceModel":
        """Load the model saved in ``source``, uncached (load it through
        :func:`mars_demo.models.registry.load_importance`, which caches it); refuses a model
        that is no MARS importance model."""
        import torch
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        _check_tokenizer(tokenizer, model_id)
        model = AutoModelForTokenClassification.from_pretrained(source)
        _check_model(model, model_id)
        if torch.cuda.is_available():
            model = model.to("cuda")
        model.eval()
        return cls(model, tokenizer, model_id)

    @classmethod
    def of(cls, model, tokenizer, model_id: str) -> "ImportanceModel":
        """A model and tokenizer loaded elsewhere, checked as :meth:`from_pretrained` checks
        them and used where they are (put in eval mode)."""
        _check_tokenizer(tokenizer, model_id)
        _check_model(model, model_id)
        model.eval()
        return cls(model, tokenizer, model_id)

    def score(self, question: str, answers: list[str], method: str = "model") -> list[PhraseScoring]:
        """Phrases and scores of every answer, all answers in one batched forward pass."""
        return self._score([question] * len(answers), answers, method)

    def score_many(self, questions: list[str], answers: list[list[str]],
                   method: str = "model") -> list[list[PhraseScoring]]:
        """:meth:`score` for several questions in batched forward passes of up to
        :data:`BATCH` answers (one pass for up to ``BATCH`` answers; the bound keeps the memory
        of many questions' answers in check): ``answers[q]`` are the answers of
        ``questions[q]``, each paired with its own question. Returns one list per question. The
        same numbers as one :meth:`score` per question, up to float rounding (another padding
        width)."""
        if len(questions) != len(answers):
            raise ValueError("score_many needs one list of answers per question")
        pairs_q = [q for q, a in zip(questions, answers) for _ in a]
        pairs_a = [x for a in answers for x in a]
        flat: list[PhraseScoring] = []
        for i in range(0, len(pairs_a), BATCH):
            flat += self._score(pairs_q[i:i + BATCH], pairs_a[i:i + BATCH], method)
        out, k = [], 0
        for a in answers:
            out.append(flat[k:k + len(a)])
            k += len(a)
        return out

    def _score(self, questions: list[str], answers: list[str], method: str) -> list[PhraseScoring]:
        """Phrases and scores of ``answers[i]`` after ``questions[i]``, one forward pass."""
        import torch

        words_of = [word_spans(a) for a in answers]
        results: list[PhraseScoring | None] = [None] * len(answers)
        batch = [i for i, w in enumerate(words_of) if w]
        for i, w in enumerate(words_of):
            if not w:
                results[i] = PhraseScoring([], [], [])
        if not batch:
            return results  # type: ignore[return-value]
        firsts = [[questions[i]] for i in batch]
        seconds = [[answers[i][a:b] for a, b in words_of[i]] for i in batch]
        max_length = min(MAX_LENGTH, self.tokenizer.model_max_length or MAX_LENGTH)
        enc = self.tokenizer(
            firsts,
            seconds,
            is_split_into_words=True,
            truncation="longest_first",
            max_length=max_length,
            padding=True,
            return_tensors="pt",
            return_token_type_ids=True,
        )
        with torch.inference_mode():
            logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
        logits = logits.float().cpu()
        check_finite(logits, f"The importance model {self.model_id}")
        unk = self.tokenizer.unk_token_id
        for row, i in enumerate(batch):
            truncated = int(enc["attention_mask"][row].sum()) >= max_length
            results[i] = self._phrases(
                answers[i], words_of[i], enc, row, logits[row], method, unk, truncated
            )
        return results  # type: ignore[return-value]

    @staticmethod
    def _phrases(answer, words, enc, row, logits, method, unk_id, truncated) -> PhraseScoring:
        warnings: list[str] = []
        seq_ids = enc.sequence_ids(row)
        word_ids = enc.word_ids(row)
        input_ids = enc["input_ids"][row].tolist()
        first_sub: dict[int, int] = {}
        unknown_words: set[int] = set()
        for pos, (seq, w) in enumerate(zip(seq_ids, word_ids)):
            if seq != 1 or w is None:
                continue
            first_sub.setdefault(w, pos)
            if unk_id is not None and input_ids[pos] == unk_id:
                unknown_words.add(w)
        if unknown_words:
            shown = ", ".join(repr(answer[slice(*words[w])]) for w in sorted(unknown_words)[:5])
            warnings.append(
                f"The importance model does not know some characters ([UNK]) in {shown}; "
                "their importance is less reliable."
            )
        if not first_sub:
            # The question alone filled the window, or no word survived the tokenizer.
            warnings.append(
                "The importance model saw no word of this answer, so all tokens weigh the "
                "same (MARS equals length-normalized here)."
            )
            return PhraseScoring([(words[0][0], words[-1][1])], [1.0], warnings)
        last_seen = max(first_sub)
        if truncated and last_seen < len(words) - 1:
            warnings.append(
                f"The answer is longer than the importance model's {MAX_LENGTH}-token window: "
                f"its last {len(words) - 1 - last_seen} of {len(words)} words were joined to the "
                "last phrase that was scored."
            )
        silent = [w for w in range(len(words) if not truncated else last_seen) if w not in first_sub]
        if silent:
            shown = ", ".join(repr(answer[slice(*words[w])]) for w in silent[:5])
            warnings.append(
                f"The importance tokenizer drops {shown}; joined to a neighbouring phrase."
            )
        # A phrase starts at word 0 and at every scored word predicted "begins a phrase"; its
        # score is read at its first scored sub-token. Unscored words join the phrase before.
        starts = [0]
        anchors = [first_sub[min(first_sub)]]
        for w in sorted(first_sub):
            if w > 0 and (method == "token" or int(logits[first_sub[w], 0:2].argmax()) == 0):
                starts.append(w)
                anchors.append(first_sub[w])
        scores = [_sigmoid(float(logits[pos, 2])) for pos in anchors]
        spans = phrase_spans_from_starts(words, starts)  # an unseen tail joins the last phrase
        return PhraseScoring(spans, scores, warnings)


class BEMImportance:
    """The paper's Algorithm 1 with a Flair chunker and an answer-equivalence classifier."""

    def __init__(self, chunker, model, tokenizer, equivalent_index: int, model_id: str):
        self.chunker = chunker
        self.model = model
        self.tokenizer = tokenizer
        self.equivalent_index = equivalent_index
        self.model_id = model_id
        self.device = next(model.parameters()).device

    @staticmethod
    def load_chunker(chunker_id: str):
        """The Flair phrase chunker saved in ``chunker_id`` (a ``*.pt`` file, or a directory
        holding one), uncached."""
        import os

        from flair.models import SequenceTagger

        path = chunker_id
        if os.path.isdir(path):
            pts = sorted(f for f in os.listdir(path) if f.endswith((".pt", ".bin")))
            if not pts:
                raise ModelLoadError(f"No Flair model file (*.pt) in {path!r}.")
            path = os.path.join(path, pts[0])
        return SequenceTagger.load(path)

    @classmethod
    def from_pretrained(cls, source: str, model_id: str,
                        chunker: Callable[[], Any]) -> "BEMImportance":
        """Load the answer-equivalence classifier saved in ``source``, uncached, then take the
        chunker from ``chunker()`` (load both through
        :func:`mars_demo.models.registry.load_bem`, which caches them)."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(source)
        labels = {int(k): str(v).lower() for k, v in model.config.id2label.items()}
        equivalent = [k for k, v in labels.items() if v in ("equivalent", "1", "label_1")]
        if len(equivalent) != 1:
            raise ModelLoadError(
                f"Cannot tell which label of {model_id!r} means 'equivalent': {labels}."
            )
        if torch.cuda.is_available():
            model = model.to("cuda")
        model.eval()
        return cls(chunker(), model, tokenizer, equivalent[0], model_id)

    def chunk(self, answer: str) -> list[tuple[int, int]]:
        """Character spans of Flair's chunks; words outside every chunk are their own phrase."""
        from flair.data import Sentence

        sentence = Sentence(answer)
        self.chunker.predict(sentence)
        label_type = self.chunker.label_type
        chunks = sorted(
            (s.start_position, s.end_position) for s in sentence.get_spans(label_type)
        )
        starts = [c[0] for c in chunks]
        spans = list(chunks)
        for a, b in word_spans(answer):
            k = bisect.bisect_right(starts, a) - 1
            if k < 0 or a >= chunks[k][1]:  # a word outside every chunk: its own phrase
                # Flair may split inside a word ("don't" -> "do", "n't"): the part of the word
                # that runs into the next chunk belongs to that chunk, so phrases never overlap.
                if k + 1 < len(chunks):
                    b = min(b, chunks[k + 1][0])
                spans.append((a, b))
        return sorted(spans)

    def score_many(self, questions: list[str], answers: list[list[str]]) -> list[list[PhraseScoring]]:
        """:meth:`score` of each question's answers, one question after another: BEM is NOT
        batched across questions (one classifier pass per question; the Flair chunker runs per
        answer anyway). The results are those of :meth:`score`, exactly."""
        if len(questions) != len(answers):
            raise ValueError("score_many needs one list of answers per question")
        return [self.score(q, a) for q, a in zip(questions, answers)]

    def score(self, question: str, answers: list[str]) -> list[PhraseScoring]:
        """score_k = 1 - P(equivalent | question, answer, answer without phrase k)."""
        import torch

        chunked = [self.chunk(a) if word_spans(a) else [] for a in answers]
        cands, refs, owners = [], [], []
        for i, (answer, spans) in enumerate(zip(answers, chunked)):
            for a, b in spans:
                masked = " ".join((answer[:a] + answer[b:]).split())
                cands.append(masked)
                refs.append(f"{answer} [SEP] {question}")
                owners.append(i)
        probs: list[float] = []
        notes: list[set[str]] = [set() for _ in answers]
        if cands:
            enc, truncated, unknown = encode_pairs(self.tokenizer, cands, refs, MAX_LENGTH)
            for row, owner in enumerate(owners):
                if row in truncated:
                    notes[owner].add(
                        f"The answer-equivalence model reads at most {MAX_LENGTH} tokens; the "
                        "answer and question were cut to fit, so phrase importance is less "
                        "reliable."
                    )
                if row in unknown:
                    notes[owner].add(
                        "The answer-equivalence model does not know some characters ([UNK]) of "
                        "this answer or the question; phrase importance is less reliable."
                    )
            with torch.inference_mode():
                logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
            check_finite(logits, f"The answer-equivalence model {self.model_id}")
            probs = logits.float().softmax(-1)[:, self.equivalent_index].cpu().tolist()
        out: list[PhraseScoring] = []
        k = 0
        for spans, note in zip(chunked, notes):
            scores = [1.0 - p for p in probs[k : k + len(spans)]]
            k += len(spans)
            out.append(PhraseScoring(list(spans), scores, sorted(note)))
        return out

