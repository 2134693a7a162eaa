"""llama.cpp's decoding as the llama.cpp backend (:mod:`mars_demo.models.llama_cpp`) drives it:
one context whose cache holds every row of a request, the batches of a generation and of a
teacher-forced pass, and what each step's logits say.

**One batch per step.** Each prompt is read once, in the first sequence of its question's
rows, and its cache cells copied to the other rows' sequences (``llama_memory_seq_cp``): the
greedy answer and each sample continue it. Then each step is ONE ``llama_decode`` of one token
per row still running, each in its own sequence. Each sequence has its own cache stream
(``kv_unified`` off: no attention across sequences, llama.cpp's high-throughput mode) and
attention is llama.cpp's flash attention: llama-cpp-python 0.3.36's unified cache, and its
attention without flash attention, give logits of a batch that holds several sequences that
differ from those of each sequence alone (by up to 1.7 in a logit, measured on SmolLM2; a known
llama.cpp defect of the unified cache); these settings give the same logits, bit for bit, alone
or together, and llama.cpp's own completion with flash attention gives them too, which
tests/test_llama_cpp.py checks.

**Log-probs without copies.** After each step llama.cpp's output buffer holds one row of logits
per token of the batch; :class:`Step` reads it in place (``np.ctypeslib.as_array``, no copy of
the logits, and never the logits of the whole context; the first step's rows, which share their
prompt's logits, are copied once): per row the log-softmax's normaliser,
the chosen token's log-prob at temperature 1, the entropy of the next-token distribution and its
KL from uniform (the token-level methods), and for the greedy rows the top alternatives (CCP),
as :func:`mars_demo.models.distributions.token_stats` reads them from transformers' logits.

**Sampling by llama.cpp.** Each row draws its token with a llama.cpp sampler chain over the same
logits: banned tokens biased to minus infinity, then the greedy pick, or temperature, top-k,
top-p (the order of transformers' warpers, so the settings mean what they mean for the other
backends) and a draw from the row's own seeded generator (seed + the sample's index): the same
seed and request give the same answers, alone or in a batch of questions, up to the float
rounding of another batch shape.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

#: the tokens of one llama.cpp micro-batch (its compute buffers are sized for this many)
UBATCH = 512
#: the most logit rows one teacher-forced ``llama_decode`` asks for: rows x vocabulary floats
#: stay within a few tens of MB for a 150k vocabulary
FORCED_ROWS = 64


def threads() -> int:
    """The cores this process may run on (llama.cpp's own default, 4, oversubscribes two)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class Row:
    """One answer being generated: its question (``prompt``), sequence id, position of its next
    token, and what was read so far (ids, log-probs, entropies, KL from uniform, alternatives
    when it is a greedy row that keeps them)."""

    prompt: int
    seq: int
    pos: int
    greedy: bool
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    kl_uniform: list[float] = field(default_factory=list)
    alternatives: list[list[tuple[int, float]]] | None = None
    done: bool = False


class Step:
    """One step's logits (rows x vocabulary, float32), read in place: per row its largest
    logit and the log-softmax's normaliser (so ``log p = logit - top - log_z``), the entropy of
    the next-token distribution (``-sum p log p``) and its KL from uniform (``-mean log p -
    log V`` over the tokens of finite log-prob), the sums taken in float64. Temporaries are rows
    x vocabulary (the shifted logits and their exponentials), never more; nothing refers to the
    logits once the step is read but :meth:`logprob` and :meth:`alternatives`, called before
    the next decode."""

    def __init__(self, logits: np.ndarray) -> None:
        self.logits = logits
        top = logits.max(axis=1, keepdims=True)
        shifted = logits - top
        weights = np.exp(shifted)
        total = weights.sum(axis=1, dtype=np.float64)
        self.top = top[:, 0].astype(np.float64)
        self.log_z = np.log(total)
        if np.isfinite(shifted).all():
            product = np.einsum("ij,ij->i", weights, shifted, dtype=np.float64)
            mean_log_p = shifted.mean(axis=1, dtype=np.float64) - self.log_z
            size = np.full(len(total), float(logits.shape[1]))
        else:  # a token of probability 0: its entropy term is 0, the KL's mean skips it
            finite = np.isfinite(shifted)
            safe = np.where(finite, shifted, 0.0)
            product = np.einsum("ij,ij->i", weights, safe, dtype=np.float64)
            size = finite.sum(axis=1).astype(np.float64)
            mean_log_p = safe.sum(axis=1, dtype=np.float64) / size - self.log_z
        self.entropy = np.maximum(self.log_z - product / total, 0.0).tolist()
        self.kl_uniform = (-mean_log_p - np.log(size)).tolist()

    def logprob(self, row: int, token: int) -> float:
        """log P(``token``) at temperature 1 in row ``row``."""
        return float(np.float64(self.logits[row, token]) - self.top[row] - self.log_z[row])

    def alternatives(self, row: int, chosen: int, k: int) -> list[tuple[int, float]]:
        """The ``k`` most probable tokens of row ``row`` with their log-probs, the chosen token
        first (CCP's alternatives, as :func:`~mars_demo.models.distributions.token_stats`
        lists them)."""
        values = self.logits[row]
        best = np.argpartition(values, -k)[-k:]
        best = best[np.argsort(-values[best], kind="stable")]
        ids = [chosen] + [int(i) for i in best if int(i) != chosen]
        return [(i, self.logprob(row, i)) for i in ids[:k]]


class Decoder:
    """The llama.cpp context of one loaded model (``lib``: the ``llama_cpp`` module, ``model``:
    its ``llama_model`` pointer): made when first needed, made again larger when a request needs
    more cells per sequence, more sequences or a larger batch than it holds; one call at a time
    (:attr:`lock`)."""

    def __init__(self, lib: Any, model: Any, n_vocab: int) -> None:
        self.lib, self.model, self.n_vocab = lib, model, n_vocab
        self.ctx = None
        self.cells = self.seqs = self.batch = 0
        self.lock = threading.Lock()
        self.threads = threads()

    def close(self) -> None:
        if self.ctx is not None:
            self.lib.llama_free(self.ctx)
            self.ctx = None

    def __del__(self) -> None:  # pragma: no cover - at exit
        try:
            self.close()
        except Exception:
            pass

    def ready(self, cells: int, seqs: int, batch: int) -> None:
        """A cleared context of at least ``cells`` cache cells in each of ``seqs`` sequences,
        taking ``batch`` tokens in one ``llama_decode``."""
        if self.ctx is None or cells > self.cells or seqs > self.seqs or batch > self.batch:
            self.close()
            # powers of two: few remakes, and a whole number of cells per sequence
            cells = 1 << (max(cells, self.cells, 256) - 1).bit_length()
            seqs, batch = max(seqs, self.seqs), max(batch, self.batch, UBATCH)
            p = self.lib.llama_context_default_params()
            p.n_ctx = cells * seqs
            p.n_batch = batch
            p.n_ubatch = UBATCH
            p.n_seq_max = seqs
            p.n_threads = p.n_threads_batch = self.threads
            p.kv_unified = False  # a cache stream per sequence (see the module doc)
            p.flash_attn_type = self.lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
            p.no_perf = True
            ctx = self.lib.llama_init_from_model(self.model, p)
            if not ctx:
                raise RuntimeError(f"llama.cpp could not make a context of {seqs} sequences of "
                                   f"{cells} cells with flash attention")
            self.ctx, self.cells, self.seqs, self.batch = ctx, cells, seqs, batch
        self.lib.llama_memory_clear(self.memory, True)

    @property
    def memory(self):
        return self.lib.llama_get_memory(self.ctx)

    def share(self, source: int, targets: Sequence[int]) -> None:
        """Copy sequence ``source``'s cells (a prompt read) to each of ``targets``."""
        for t in targets:
            self.lib.llama_memory_seq_cp(self.memory, source, t, -1, -1)

    def decode(self, batch) -> None:
        code = self.lib.llama_decode(self.ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama.cpp's llama_decode failed (code {code})")

    def logits(self, rows: int) -> np.ndarray:
        """The output buffer's ``rows`` rows of logits, in place (valid until the next
        decode)."""
        return np.ctypeslib.as_array(self.lib.llama_get_logits(self.ctx),
                                     shape=(rows, self.n_vocab))


class Batch:
    """A ``llama_batch`` of up to ``capacity`` tokens, each in one sequence."""

    def __init__(self, lib: Any, capacity: int) -> None:
        self.lib = lib
        self.raw = lib.llama_batch_init(capacity, 0, 1)
        self.capacity = capacity

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc) -> None:
        self.lib.llama_batch_free(self.raw)

    def fill(self, tokens: Sequence[tuple[int, int, int, bool]]) -> None:
        """Tokens as ``(id, position, sequence id, logits wanted)``."""
        b = self.raw
        b.n_tokens = len(tokens)
        for i, (token, pos, seq, wanted) in enumerate(tokens):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if wanted else 0


class Samplers:
    """One llama.cpp sampler chain per row (see the module doc); freed on exit."""

    def __init__(self, lib: Any, n_vocab: int, greedy: Sequence[bool], *, temperature: float,
                 top_k: int, top_p: float, seeds: Sequence[int], banned: Sequence[int]) -> None:
        self.lib = lib
        self.chains = []
        bias = None
        if banned:
            bias = (lib.llama_logit_bias * len(banned))(
                *[lib.llama_logit_bias(int(t), -math.inf) for t in banned])
        for is_greedy, seed in zip(greedy, seeds):
            chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
            if bias is not None:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_logit_bias(
                    n_vocab, len(banned), bias))
            if is_greedy:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            else:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temperature))
                if top_k > 0:
                    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(top_k))
                if top_p < 1.0:
                    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(top_p, 1))
                lib.llama_sampler_chain_add(chain,
                                            lib.llama_sampler_init_dist(seed & 0xFFFFFFFF))
            self.chains.append(chain)

    def __enter__(self) -> "Samplers":
        return self

    def __exit__(self, *exc) -> None:
        for chain in self.chains:
            self.lib.llama_sampler_free(chain)

    def sample(self, row: int, ctx, index: int) -> int:
        """Row ``row``'s next token, drawn from the logits of batch token ``index``."""
        return int(self.lib.llama_sampler_sample(self.chains[row], ctx, index))


@dataclass(frozen=True)
class Sampling:
    """How the rows of a generation draw their tokens (a request's settings): ``n`` rows per
    prompt, the first greedy when ``greedy``; the samples' ``temperature``, ``top_k`` (0 = off),
    ``top_p`` (1 = off); sample ``i`` seeded ``seed + i``; ``banned`` ids never drawn;
    ``alternatives`` kept per greedy token (0 = none)."""

    n: int
    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    seed: int
    max_new_tokens: int
    banned: tuple[int, ...] = ()
    alternatives: int = 0


def generate(dec: Decoder, prompts: Sequence[Sequence[int]], how: Sampling, *,
             ended: Callable[[Row, int], bool], on_token: Callable[[Row, int], None] | None,
             should_stop: Callable[[], bool] | None, cancelled: type[Exception]
             ) -> tuple[list[Row], float]:
    """Every row of every prompt, decoded together (see the module doc): the prompts read in
    one ``llama_decode``, then one batch of the running rows per step. A row stops after the
    token for which ``ended(row, token)`` is True (an end-of-generation token, a stop string)
    or at ``how.max_new_tokens``; ``on_token(row, token)`` hears every token drawn. Once
    ``should_stop()`` is True the ``cancelled`` exception is raised. Returns the rows (in
    order: prompt by prompt, ``how.n`` each) and the seconds spent reading log-probs."""
    import time

    rows = [Row(prompt=q, seq=q * how.n + k, pos=len(ids), greedy=how.greedy and k == 0)
            for q, ids in enumerate(prompts) for k in range(how.n)]
    for r in rows:
        if r.greedy and how.alternatives:
            r.alternatives = []
    total = sum(len(p) for p in prompts)
    dec.ready(max(len(p) for p in prompts) + how.max_new_tokens, len(rows),
              max(total, len(rows)))
    first = 1 if how.greedy else 0
    seeds = [how.seed + (r.seq % how.n) - first for r in rows]
    reading = 0.0
    with Batch(dec.lib, max(total, len(rows))) as batch, \
            Samplers(dec.lib, dec.n_vocab, [r.greedy for r in rows],
                     temperature=how.temperature, top_k=how.top_k, top_p=how.top_p,
                     seeds=seeds, banned=how.banned) as samplers:
        tokens: list[tuple[int, int, int, bool]] = []
        last: list[int] = []
        for q, ids in enumerate(prompts):  # each prompt in its first row's sequence
            tokens += [(t, i, q * how.n, i == len(ids) - 1) for i, t in enumerate(ids)]
            last.append(len(tokens) - 1)
        batch.fill(tokens)
        dec.decode(batch.raw)
        for q in range(len(prompts)):
            dec.share(q * how.n, range(q * how.n + 1, (q + 1) * how.n))
        active = rows
        index = [last[r.prompt] for r in rows]  # the batch token each row draws from
        output: Sequence[int] | None = [r.prompt for r in rows]  # its output row (step 0)
        while active:
            chosen = [samplers.sample(r.seq, dec.ctx, i) for r, i in zip(active, index)]
            t0 = time.perf_counter()
            logits = dec.logits(len(prompts) if output is not None else len(active))
            step = Step(logits[output] if output is not None else logits)
            for j, (r, token) in enumerate(zip(active, chosen)):
                r.ids.append(token)
                r.logprobs.append(step.logprob(j, token))
                r.entropy.append(step.entropy[j])
                r.kl_uniform.append(step.kl_uniform[j])
                if r.alternatives is not None:
                    r.alternatives.append(step.alternatives(j, token, how.alternatives))
            reading += time.perf_counter() - t0
            for r, token in zip(active, chosen):
                if on_token is not None:
                    on_token(r, token)
                r.done = ended(r, token) or len(r.ids) >= how.max_new_tokens
            if should_stop is not None and should_stop():
                raise cancelled("generation was cancelled")
            active = [r for r in active if not r.done]
            if not active:
                break
            batch.fill([(r.ids[-1], r.pos, r.seq, True) for r in active])
            for r in active:
                r.pos += 1
            dec.decode(batch.raw)
            index, output = list(range(len(active))), None
    return rows, reading


def forced(dec: Decoder, prompt: Sequence[int], answers: Sequence[Sequence[int]]
           ) -> list[dict[str, list[float]]]:
    """For every answer (token ids after ``prompt``) and each of its tokens, log P(token |
    prompt, the answer's tokens before it) at temperature 1, with that position's entropy and
    KL from uniform (``"logprobs"``, ``"entropy"``, ``"kl_uniform"``): the prompt read once for
    every answer (its tokens in every answer's sequence), then the answers' tokens, at most
    :data:`FORCED_ROWS` positions per ``llama_decode``, their logits read as they come."""
    if not prompt:
        raise ValueError("a teacher-forced pass needs a prompt of at least one token")
    n = len(answers)
    out = [{"logprobs": [], "entropy": [], "kl_uniform": []} for _ in answers]

    def take(step: Step, row: int, i: int, token: int) -> None:
        out[i]["logprobs"].append(step.logprob(row, token))
        out[i]["entropy"].append(step.entropy[row])
        out[i]["kl_uniform"].append(step.kl_uniform[row])

    dec.ready(len(prompt) + max(len(a) for a in answers), n,
              max(len(prompt), FORCED_ROWS))
    with Batch(dec.lib, max(len(prompt), FORCED_ROWS)) as batch:
        batch.fill([(t, k, 0, k == len(prompt) - 1) for k, t in enumerate(prompt)])
        dec.decode(batch.raw)
        step = Step(dec.logits(1))
        for i, ids in enumerate(answers):
            take(step, 0, i, ids[0])
        dec.share(0, range(1, n))
        # each answer's tokens but its last, each predicting the next
        todo = [(i, k) for i, ids in enumerate(answers) for k in range(len(ids) - 1)]
        for start in range(0, len(todo), FORCED_ROWS):
            chunk = todo[start:start + FORCED_ROWS]
            batch.fill([(answers[i][k], len(prompt) + k, i, True) for i, k in chunk])
            dec.decode(batch.raw)
            step = Step(dec.logits(len(chunk)))
            for row, (i, k) in enumerate(chunk):
                take(step, row, i, answers[i][k + 1])
    return out


def last_logits(dec: Decoder, ids: Sequence[int]) -> Step:
    """The step after ``ids`` (one sequence): its logits read (see :class:`Step`)."""
    if not ids:
        raise ValueError("the text of an LLM pass has no tokens")
    dec.ready(len(ids), 1, len(ids))
    with Batch(dec.lib, len(ids)) as batch:
        batch.fill([(t, k, 0, k == len(ids) - 1) for k, t in enumerate(ids)])
        dec.decode(batch.raw)
        step = Step(dec.logits(1).copy())
    return step
