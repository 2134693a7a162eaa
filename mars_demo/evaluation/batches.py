"""One batch of a run's questions through the engine: analyzed together, judged, appended.

:func:`run_batches` takes a share's batches (:mod:`.shares`), each with its own seed: the
answers of a batch's questions are generated together (:meth:`Engine.generate_many`: one
batched ``generate`` call in-process, concurrent requests to an ``--llm-endpoint``) unless the
data carries them, then scored together (:meth:`Engine.score_many`: importance and NLI batched
across the questions); the judge decides whether each greedy answer is correct; as soon as the
batch is done its questions are appended, one :class:`~.records.Record` a line, each flushed
and fsynced. A batch some of whose questions are already done (a run killed while writing it)
runs whole again, so that its questions keep their batch's random draws, and only the missing
ones are written.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..methods import models_of
from .data import Item
from .judges import Judge
from .records import Record
from .runs import RunError
from .schema import Failure
from .shares import batch_seed


def _uncertainty(result) -> dict[str, dict[str, float]]:
    from . import MEASURES, SCORINGS

    return {m: {s: float(getattr(getattr(result.uncertainty, m), s)) for s in SCORINGS}
            for m in MEASURES}


def _prepare(item: Item):
    """The answer set a question brings (None: generate it); raises AnswerSetError or
    OptionError for a bad line, before any model runs."""
    from ..answers import AnswerSet
    from ..settings import clean_question

    if item.answer_set is None:
        clean_question(item.question)
        return None
    data = dict(item.answer_set)
    data.setdefault("question", item.question)
    return AnswerSet.from_dict(data)


def _analyze_batch(engine, items: list[Item], answer_sets: list, settings) -> list:
    """The analyses of a batch of questions through the public seam: the answers of the
    questions without any are generated together (:meth:`Engine.generate_many`), then all are
    scored together (:meth:`Engine.score_many`)."""
    todo = [k for k, a in enumerate(answer_sets) if a is None]
    sets = list(answer_sets)
    if todo:
        made = engine.generate_many([items[k].question for k in todo], settings)
        for k, answers in zip(todo, made):
            sets[k] = answers
    return engine.score_many(sets, settings)


def _check_models(expected: dict[str, Any] | None, result, out: pathlib.Path) -> dict[str, Any]:
    """The models that made and scored ``result``; a run's results must all come from the same
    ones (a run resumed on another machine may resolve the defaults to other models, or a
    server may serve another model now): refused with what differs."""
    used = models_of(result.settings)
    if expected is not None and used != expected:
        diffs = "; ".join(f"{k}: {expected.get(k)!r} in the run, {used.get(k)!r} now"
                          for k in dict.fromkeys([*expected, *used])
                          if expected.get(k) != used.get(k))
        flags = ", ".join("--" + k.replace("_", "-") for k in dict.fromkeys([*expected, *used]))
        raise RunError(
            f"{out} holds answers of other models ({diffs}); resume with the run's models "
            f"({flags}, --load-in-4bit as it was), or use a new --out directory"
        )
    return used


def _one_question_errors() -> tuple[type[BaseException], ...]:
    """Errors of one question (a bad line, NaN scores, a refused request): that question is
    skipped and the run goes on."""
    from ..errors import AnswerSetError, EndpointError, InvalidModelOutput, OptionError

    return (AnswerSetError, OptionError, InvalidModelOutput, EndpointError)


def _results_of(engine, batch: list[Item], answer_sets: list, settings) -> list:
    """The batch's analyses, or for a batch where one question fails, each question alone (an
    exception in place of the failed ones). An endpoint error of a lone question, or of every
    question of the batch, is raised: the server, not a question, is the likely cause."""
    from ..errors import EndpointError

    one_question = _one_question_errors()
    try:
        return _analyze_batch(engine, batch, answer_sets, settings)
    except one_question as err:
        if len(batch) == 1:
            if isinstance(err, EndpointError):
                raise  # maybe the server, not the question: stop, resumable
            return [err]
    # each question alone, so that only the bad one is skipped (their generated samples are
    # then those of a batch of one; greedy answers and scores of given answers are the same)
    results: list = []
    for item, answers in zip(batch, answer_sets):
        try:
            results += _analyze_batch(engine, [item], [answers], settings)
        except one_question as alone:
            results.append(alone)
    errors = [r for r in results if isinstance(r, Exception)]
    if len(errors) == len(batch) and all(isinstance(e, EndpointError) for e in errors):
        raise errors[0]  # every question: the server, not a question
    return results


def _record(item: Item, result, verdict, seconds: float) -> Record:
    """The line of results.jsonl of a question: its analysis ``result`` (with its verdict),
    the judge's ``verdict`` (None: the data gave its label), and the level of the analysis'
    verdict on the answer (the one the page and the command line show)."""
    return Record(
        index=item.index, id=item.id, line=item.line, question=item.question,
        references=tuple(item.references), greedy=result.greedy.text,
        correct=bool(item.label if verdict is None else verdict.correct),
        label="judged" if verdict is not None else "given",
        judge=None if verdict is None else {"score": verdict.score, "detail": verdict.detail},
        uncertainty=_uncertainty(result), methods=result.methods, analysis=result.to_dict(),
        seconds=seconds,  # the batch's seconds per question
        level=result.verdict.level,
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"))


@dataclass
class BatchRun:
    """What :func:`run_batches` needs: the ``engine``, the ``judge``, the run's ``settings``
    (each batch's seed is drawn from theirs), the file ``f`` records are appended to, the
    indices already ``done``, the ``models`` the run's records came from (None: none yet),
    ``out`` (named in errors), ``note`` (a message for the user) and ``advance`` (questions
    finished or skipped, for a progress bar); ``failed`` collects the questions that failed."""

    engine: Any
    judge: Judge
    settings: Any
    f: Any
    done: set[int]
    models: dict[str, Any] | None
    out: pathlib.Path
    note: Callable[[str], None]
    advance: Callable[[int], None]
    failed: list[Failure] = field(default_factory=list)

    def skip(self, item: Item, err: BaseException) -> None:
        where = f"line {item.line}, " if item.line is not None else ""
        self.failed.append(Failure(item.index, item.id, item.line, str(err)))
        self.note(f"question {item.index} ({where}{item.id or repr(item.question[:40])}) "
                  f"skipped: {err}")
        self.advance(1)


def run_batches(run: BatchRun, share: list[tuple[int, list[Item]]]) -> None:
    """Analyze, judge and append the questions of ``share`` ((number, batch) pairs) that are
    not done yet, batch by batch."""
    from ..answers import AnswerSetError
    from ..settings import OptionError

    for number, items in share:
        if all(item.index in run.done for item in items):
            continue
        batch, answer_sets = [], []
        for item in items:
            try:
                answer_sets.append(_prepare(item))
            except (AnswerSetError, OptionError) as err:
                if item.index not in run.done:
                    run.skip(item, err)
                continue
            batch.append(item)
        if all(item.index in run.done for item in batch):
            continue
        settings = run.settings.replace(seed=batch_seed(run.settings.seed, number))
        started = time.perf_counter()
        results = _results_of(run.engine, batch, answer_sets, settings)
        seconds = round((time.perf_counter() - started) / len(batch), 4)
        new = [(item, r) for item, r in zip(batch, results) if item.index not in run.done]
        for item, r in new:
            if isinstance(r, Exception):
                run.skip(item, r)
        new = [(item, r) for item, r in new if not isinstance(r, Exception)]
        for _, result in new:
            run.models = _check_models(run.models, result, run.out)
        judged = [(item, result) for item, result in new if item.label is None]
        verdicts = dict(zip((item.index for item, _ in judged), run.judge.judge_many(
            [(item.question, result.greedy.text, item.references) for item, result in judged])))
        for item, result in new:
            record = _record(item, result, verdicts.get(item.index), seconds)
            run.f.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            run.f.flush()
            os.fsync(run.f.fileno())
            run.done.add(item.index)
            run.advance(1)
