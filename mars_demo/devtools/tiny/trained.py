"""Trained tiny models: real answers offline, in a few minutes on 2 CPU cores.

:func:`mars_demo.devtools.tiny.make_tiny_models` with ``trained=True`` (``make-tiny-models DIR --trained``)
calls :func:`train_models`, which trains three of the tiny models on the facts of
``mars_demo/data/tiny_facts.json`` (a few dozen trivia questions, each with the answer, its
paraphrases and wrong answers; square brackets mark the words that answer the question):

* ``llm/``        the tiny Qwen2 LM (same tokenizer and ChatML template as the random one) trained
                  on the chat prompt that :mod:`mars_demo.models.llm` builds (system text
                  ``CHAT_SYSTEM``, the question as the user's turn), with the loss on the assistant's
                  answer and its ``<|im_end|>`` only. The answer is seen 3 times as often as each
                  paraphrase, so the greedy answer is the fact's sentence and samples at
                  temperature 0.5 are mostly that sentence, sometimes a paraphrase. For facts
                  marked ``confusable`` the wrong answer is trained too (twice as often as a
                  paraphrase): the model is unsure there, and some samples are wrong.
* ``importance/`` the tiny BERT token classifier in the input format of ``duygunuryldz/MARS``
                  (question as first segment, answer words as second, ``is_split_into_words``),
                  trained so that the answering words form their own phrase (logits[0:2]:
                  begins / inside a phrase) and get a high importance logit (logits[2]).
* ``nli/``        the tiny DeBERTa classifier with the factory's ``id2label``, trained on
                  ``question + answer`` pairs as :mod:`mars_demo.models.nli` builds them:
                  paraphrases entail each other both ways, right vs wrong answers contradict,
                  an answer vs "I am not sure." is neutral.

The answer-equivalence model and the chunker stay random. Training runs on the CPU with one torch
thread (on 2 cores shared with other work, 2 threads made these tiny steps 10-25x slower) and a
fixed seed: the same seed gives the same weights. About 80 s of CPU time in all. A
``trained.json`` next to the models records the time and final loss of each model.

Heavy libraries are imported inside functions only.
"""

from __future__ import annotations

import json
import pathlib
import re
import time
from dataclasses import dataclass

FACTS_PATH = pathlib.Path(__file__).resolve().parents[2] / "data" / "tiny_facts.json"
TRAIN_THREADS = 1  # measured: on 2 shared cores, 2 threads ran tiny steps 10-25x slower than 1

#: how often each text is seen per epoch (the LLM learns these proportions)
ANSWER_REPEATS = 4
PARAPHRASE_REPEATS = 1
CONFUSABLE_WRONG_REPEATS = 2

UNSURE_ANSWERS = ("I am not sure.", "I do not know.")

_WORD_RE = re.compile(r"\w+|[^\w\s]")  # the importance model's word split (REFERENCE.md)
_MARK_RE = re.compile(r"\[([^\[\]]+)\]")

# Shape of the trained LLM (a little wider than the random "tiny" shape, to hold the facts).
_LLM_KW = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)


@dataclass(frozen=True)
class Marked:
    """A text and the character spans of the words that answer the question."""

    text: str
    entity: tuple[tuple[int, int], ...]

    @property
    def entity_text(self) -> str:
        return " ".join(self.text[a:b] for a, b in self.entity)


@dataclass(frozen=True)
class Fact:
    question: str
    answer: Marked
    paraphrases: tuple[Marked, ...]
    wrong: tuple[Marked, ...]
    confusable: bool = False

    @property
    def correct(self) -> tuple[Marked, ...]:
        return (self.answer, *self.paraphrases)


def parse_marked(s: str) -> Marked:
    """``"It is [Mars]."`` -> Marked("It is Mars.", ((6, 10),)); at least one span is required."""
    text, spans, pos = "", [], 0
    for m in _MARK_RE.finditer(s):
        text += s[pos : m.start()]
        spans.append((len(text), len(text) + len(m.group(1))))
        text += m.group(1)
        pos = m.end()
    text += s[pos:]
    if not spans or "[" in text or "]" in text:
        raise ValueError(f"answer {s!r} must mark the answering words once or more as [words]")
    return Marked(text, tuple(spans))


def load_facts(path: str | pathlib.Path = FACTS_PATH) -> list[Fact]:
    """The facts of ``path`` (default: the packaged ``tiny_facts.json``)."""
    data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    facts = []
    for i, item in enumerate(data["facts"]):
        try:
            facts.append(Fact(
                question=str(item["question"]),
                answer=parse_marked(item["answer"]),
                paraphrases=tuple(parse_marked(p) for p in item["paraphrases"]),
                wrong=tuple(parse_marked(w) for w in item["wrong"]),
                confusable=bool(item.get("confusable", False)),
            ))
        except (KeyError, ValueError) as err:
            raise ValueError(f"{path}: fact {i + 1}: {err}") from err
    questions = [f.question for f in facts]
    if len(set(questions)) != len(questions):
        raise ValueError(f"{path}: a question occurs twice")
    return facts


# --------------------------------------------------------------------------------------------
# shared training helpers
# --------------------------------------------------------------------------------------------


class TrainingThreads:
    """Run with a fixed number of torch threads (same results on every machine), then restore."""

    def __enter__(self):
        import torch

        self.before = torch.get_num_threads()
        torch.set_num_threads(TRAIN_THREADS)
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.before)


def _pad(rows: list[list[int]], value: int):
    import torch

    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows])


def _fit(model, batches_of_epoch, epochs: int, lr: float, seed: int, loss_fn) -> float:
    """AdamW with linear warm-up and decay; returns the last epoch's mean loss.

    ``batches_of_epoch(generator)`` yields the batches of one epoch in a seeded order.
    """
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    n_batches = sum(1 for _ in batches_of_epoch(torch.Generator().manual_seed(0)))
    total = max(1, n_batches * epochs)
    warmup = max(1, total // 20)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min((step + 1) / warmup, max(0.0, (total - step) / (total - warmup + 1)))
    )
    model.train()
    last = 0.0
    for _ in range(epochs):
        losses = []
        for batch in batches_of_epoch(gen):
            loss = loss_fn(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        last = sum(losses) / len(losses)
    model.eval()
    return last


def _batches(items: list, size: int):
    def epoch(gen):
        import torch

        order = torch.randperm(len(items), generator=gen).tolist()
        for i in range(0, len(order), size):
            yield [items[j] for j in order[i : i + size]]

    return epoch


# --------------------------------------------------------------------------------------------
# LLM
# --------------------------------------------------------------------------------------------


def chat_prompt(tokenizer, question: str) -> str:
    """The chat prompt exactly as :class:`mars_demo.models.llm.LLM` builds it."""
    from ...models.prompts import CHAT_SYSTEM

    return tokenizer.apply_chat_template(
        [{"role": "system", "content": CHAT_SYSTEM}, {"role": "user", "content": question}],
        tokenize=False,
        add_generation_prompt=True,
    )


def llm_examples(facts: list[Fact]) -> list[tuple[str, str, int]]:
    """(question, answer text, weight): the weight is how often the text counts per epoch, so
    the LLM learns these proportions (answer 3, each paraphrase 1, wrong answers of confusable
    facts 2)."""
    out = []
    for f in facts:
        out.append((f.question, f.answer.text, ANSWER_REPEATS))
        out += [(f.question, p.text, PARAPHRASE_REPEATS) for p in f.paraphrases]
        if f.confusable:
            out += [(f.question, w.text, CONFUSABLE_WRONG_REPEATS) for w in f.wrong]
    return out


def _common_prefix(rows: list[list[int]]) -> int:
    n = min(len(r) for r in rows)
    for i in range(n):
        if any(r[i] != rows[0][i] for r in rows):
            return i
    return n


def train_llm(path: pathlib.Path, facts: list[Fact], seed: int, epochs: int = 80) -> dict:
    """Train the chat LLM; the loss is on the assistant's answer and its ``<|im_end|>``.

    Every prompt starts with the same system turn: it is run once per batch (with gradients)
    and its keys/values are shared by the batch, which halves the work per step.
    """
    import torch
    from transformers import DynamicCache, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from .configs import llm_config
    from .tokenizers import build_llm_tokenizer

    tok = build_llm_tokenizer()
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    base = llm_config("tiny", vocab_size=len(tok), eos_token_id=eos, pad_token_id=pad,
                      bos_token_id=pad).to_dict()
    base.update(_LLM_KW)
    base.pop("head_dim", None)
    config = Qwen2Config(**{k: v for k, v in base.items() if k not in ("model_type", "transformers_version")})
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)

    prompts = {f.question: tok(chat_prompt(tok, f.question))["input_ids"] for f in facts}
    n_prefix = _common_prefix(list(prompts.values()))
    prefix = torch.tensor([next(iter(prompts.values()))[:n_prefix]])
    items = []  # (suffix ids, index of the first predicted position in the suffix, weight)
    for q, answer, weight in llm_examples(facts):
        a = tok(answer, add_special_tokens=False)["input_ids"] + [eos]
        suffix = prompts[q][n_prefix:] + a
        items.append((suffix, len(suffix) - len(a), float(weight)))

    def loss_fn(m, batch):
        ids = _pad([x for x, _, _ in batch], pad)
        bsz, width = ids.shape
        cache = DynamicCache()
        m.model(input_ids=prefix, past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(bsz)
        lengths = torch.tensor([len(x) for x, _, _ in batch])
        mask = torch.cat([torch.ones(bsz, n_prefix, dtype=torch.long),
                          (torch.arange(width)[None, :] < lengths[:, None]).long()], dim=1)
        hidden = m.model(input_ids=ids, attention_mask=mask, past_key_values=cache,
                         use_cache=True).last_hidden_state
        rows, cols, targets, weights = [], [], [], []
        for r, (x, start, w) in enumerate(batch):
            for c in range(start, len(x)):  # position c - 1 predicts token c
                rows.append(r)
                cols.append(c - 1)
                targets.append(x[c])
                weights.append(w / (len(x) - start))
        logits = m.lm_head(hidden[rows, cols])
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(targets), reduction="none")
        w = torch.tensor(weights)
        return (nll * w).sum() / w.sum()

    loss = _fit(model, _batches(items, 16), epochs, 6e-3, seed, loss_fn)
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return {"examples": len(items), "epochs": epochs, "final_loss": round(loss, 4),
            "hidden_size": config.hidden_size, "layers": config.num_hidden_layers}


def greedy_answers(path: pathlib.Path, questions: list[str], max_new_tokens: int = 24) -> list[str]:
    """Greedy chat answers of the LLM at ``path`` (to check what it learned)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    out = []
    for q in questions:
        ids = torch.tensor([tok(chat_prompt(tok, q))["input_ids"]])
        with torch.no_grad():
            seq = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=max_new_tokens, do_sample=False)
        out.append(tok.decode(seq[0, ids.shape[1]:], skip_special_tokens=True).strip())
    return out


# --------------------------------------------------------------------------------------------
# importance model
# --------------------------------------------------------------------------------------------


def importance_targets(answer: Marked) -> tuple[list[str], list[int], list[float]]:
    """Words of ``answer`` (the importance model's split), the boundary class of each word
    (0 = begins a phrase, 1 = inside) and its importance target (1 = answers the question).

    Phrases: the words before the answering words, the answering words (one phrase per marked
    span), and the words after them.
    """
    words, begins, important = [], [], []
    prev_in = None
    for m in _WORD_RE.finditer(answer.text):
        inside = next((k for k, (a, b) in enumerate(answer.entity) if a <= m.start() < b), None)
        words.append(m.group())
        begins.append(0 if not words[:-1] or inside != prev_in else 1)
        important.append(1.0 if inside is not None else 0.0)
        prev_in = inside
    return words, begins, important


def importance_examples(facts: list[Fact]) -> list[tuple[str, Marked]]:
    out = []
    for f in facts:
        for a in (*f.correct, *f.wrong):
            out.append((f.question, a))
        out.append((f.question, Marked(f.answer.entity_text + ".",
                                       ((0, len(f.answer.entity_text)),))))
    return out


def train_importance(path: pathlib.Path, facts: list[Fact], seed: int, epochs: int = 40) -> dict:
    import torch
    from transformers import BertForTokenClassification

    from .configs import importance_config
    from .tokenizers import build_wordpiece_tokenizer

    tok = build_wordpiece_tokenizer()
    config = importance_config("tiny", vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = BertForTokenClassification(config)

    items = []
    for q, answer in importance_examples(facts):
        words, begins, important = importance_targets(answer)
        enc = tok([q], words, is_split_into_words=True, truncation=True)
        cls_labels, imp_labels, seen = [], [], set()
        for w, s in zip(enc.word_ids(), enc.sequence_ids()):
            if s == 1 and w is not None and w not in seen:
                seen.add(w)
                cls_labels.append(begins[w])
                imp_labels.append(important[w])
            else:
                cls_labels.append(-100)
                imp_labels.append(-1.0)
        items.append((enc["input_ids"], enc["token_type_ids"], cls_labels, imp_labels))

    def loss_fn(m, batch):
        ids = _pad([b[0] for b in batch], tok.pad_token_id)
        types = _pad([b[1] for b in batch], 0)
        cls = _pad([b[2] for b in batch], -100)
        imp = _pad([b[3] for b in batch], -1.0).float()
        logits = m(input_ids=ids, token_type_ids=types, attention_mask=(ids != tok.pad_token_id).long()).logits
        ce = torch.nn.functional.cross_entropy(logits[..., :2].reshape(-1, 2), cls.reshape(-1), ignore_index=-100)
        keep = imp >= 0
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits[..., 2][keep], imp[keep])
        return ce + bce

    loss = _fit(model, _batches(items, 32), epochs, 3e-3, seed, loss_fn)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return {"examples": len(items), "epochs": epochs, "final_loss": round(loss, 4)}


# --------------------------------------------------------------------------------------------
# NLI model
# --------------------------------------------------------------------------------------------


def nli_examples(facts: list[Fact]) -> list[tuple[str, str, str]]:
    """(premise, hypothesis, label) with the question in front of each answer, as
    :meth:`mars_demo.models.nli.NLIModel.matrix` builds them."""
    out = []
    for f in facts:
        q = f.question
        short = f.answer.entity_text + "."
        correct = [a.text for a in f.correct] + [short]
        wrong = [w.text for w in f.wrong]
        for a in correct:
            for b in correct:
                if a != b:
                    out.append((f"{q} {a}", f"{q} {b}", "ENTAILMENT"))
            for b in wrong:
                out.append((f"{q} {a}", f"{q} {b}", "CONTRADICTION"))
                out.append((f"{q} {b}", f"{q} {a}", "CONTRADICTION"))
        for a in wrong:
            for b in wrong:
                if a != b:
                    out.append((f"{q} {a}", f"{q} {b}", "CONTRADICTION"))
        for a, u in zip((f.answer.text, *wrong[:1]), UNSURE_ANSWERS):
            out.append((f"{q} {a}", f"{q} {u}", "NEUTRAL"))
            out.append((f"{q} {u}", f"{q} {a}", "NEUTRAL"))
    return out


def train_nli(path: pathlib.Path, facts: list[Fact], seed: int, epochs: int = 20) -> dict:
    import torch
    from transformers import DebertaForSequenceClassification

    from .configs import nli_config
    from .tokenizers import build_nli_tokenizer

    tok = build_nli_tokenizer()
    config = nli_config("tiny", vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = DebertaForSequenceClassification(config)
    label2id = config.label2id
    items = []
    for p, h, label in nli_examples(facts):
        enc = tok(p, h)
        items.append((enc["input_ids"], label2id[label]))

    def loss_fn(m, batch):
        ids = _pad([b[0] for b in batch], tok.pad_token_id)
        y = torch.tensor([b[1] for b in batch])
        return m(input_ids=ids, attention_mask=(ids != tok.pad_token_id).long(), labels=y).loss

    loss = _fit(model, _batches(items, 32), epochs, 4e-3, seed, loss_fn)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return {"examples": len(items), "epochs": epochs, "final_loss": round(loss, 4)}


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------

_SEED_OFFSETS = {"llm": 10, "importance": 11, "nli": 12}


def train_models(out: pathlib.Path, seed: int, facts_path: str | pathlib.Path = FACTS_PATH) -> dict:
    """Train the LLM, importance and NLI models into ``out/{llm,importance,nli}``.

    Returns the training report (also written to ``out/trained.json``): wall-clock and CPU
    seconds per model (CPU seconds count both threads), examples, epochs and final losses.
    """
    facts = load_facts(facts_path)
    report: dict = {"seed": seed, "facts": len(facts), "threads": TRAIN_THREADS, "models": {}}
    with TrainingThreads():
        for name, fn in (("llm", train_llm), ("importance", train_importance), ("nli", train_nli)):
            t, cpu = time.perf_counter(), time.process_time()
            info = fn(out / name, facts, seed + _SEED_OFFSETS[name])
            info["seconds"] = round(time.perf_counter() - t, 1)
            info["cpu_seconds"] = round(time.process_time() - cpu, 1)
            report["models"][name] = info
    for key in ("seconds", "cpu_seconds"):
        report[key] = round(sum(m[key] for m in report["models"].values()), 1)
    (out / "trained.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
