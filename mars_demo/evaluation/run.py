"""The ``evaluate`` run: labelled questions in, results.jsonl and a report out, resumable.

The selected questions go through the public seam in batches of ``batch_questions``
(``--batch-questions``): the answers of a batch's questions are generated together
(:meth:`Engine.generate_many`: one batched ``generate`` call in-process, concurrent requests to
an ``--llm-endpoint``) unless the source carries them, then scored together
(:meth:`Engine.score_many`: importance and NLI batched across the questions); the judge decides
whether each greedy answer is correct; as soon as the batch is done its questions are appended
to ``RUN_DIR/results.jsonl``, one line each, each flushed and fsynced. Greedy answers and every
result of pre-generated answers do not depend on the batch size; generated samples do (the
random draws are shared by a batch), so a run's samples are reproducible for the same batch
size and the same starting point. A run started
again with the same RUN_DIR skips the questions already there (a last line cut short by a kill is
dropped and redone) and never rewrites a finished one. ``RUN_DIR/run.json`` records what the run
is (data, its fingerprint, limit, seed, judge, settings); a RUN_DIR made with other ones is
refused. At the end (and on every start), report.json, report.md and the plots are written from
all lines of results.jsonl.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import pathlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..methods import models_of
from .data import Item, load_source, select
from .judges import Judge
from .records import Record
from .report import write_report
from .runs import MANIFEST, RESULTS, RunError, RunFileError, read_results
from .schema import Failure, Report

RUN_VERSION = 1


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass
class EvalConfig:
    data: str
    out: pathlib.Path  # a str is taken too
    judge: Judge
    settings: Any  # mars_demo.settings.Settings
    limit: int | None = None
    resamples: int = 1000
    plots: bool = True
    batch_questions: int = 16  # questions per generate_many / score_many call
    messages: Callable[[str], None] = field(default=_stderr)

    def __post_init__(self) -> None:
        self.out = pathlib.Path(self.out)


def _manifest(config: EvalConfig, fingerprint: str, n: int) -> dict[str, Any]:
    settings = config.settings.to_dict()
    settings.pop("llm_timeout", None)  # may change between resumes (a server that was slow)
    return {"version": RUN_VERSION, "data": config.data, "data_fingerprint": fingerprint,
            "limit": config.limit, "seed": config.settings.seed, "questions": n,
            "judge": config.judge.describe(), "settings": settings}


def _check_manifest(path: pathlib.Path, wanted: dict[str, Any]) -> None:
    try:
        have = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise RunError(f"{path} cannot be read ({err}); use a new --out directory") from err
    if have == wanted:
        return
    diffs = []
    for key in sorted(set(have) | set(wanted)):
        a, b = have.get(key), wanted.get(key)
        if key == "settings" and isinstance(a, dict) and isinstance(b, dict):
            diffs += [f"{k}: {a.get(k)!r} in the run, {b.get(k)!r} now"
                      for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            diffs.append(f"{key}: {a!r} in the run, {b!r} now")
    raise RunError(
        f"{path.parent} holds a run made with other settings ({'; '.join(diffs)[:600]}); "
        "resume it with the same options, or use a new --out directory"
    )


@contextlib.contextmanager
def _locked(out: pathlib.Path):
    import fcntl

    with open(out / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            raise RunError(f"another evaluate is running in {out}") from err
        yield


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
    """The line of results.jsonl of a question: its analysis ``result``, and the judge's
    ``verdict`` (None: the data gave its label)."""
    return Record(
        index=item.index, id=item.id, line=item.line, question=item.question,
        references=tuple(item.references), greedy=result.greedy.text,
        correct=bool(item.label if verdict is None else verdict.correct),
        label="judged" if verdict is not None else "given",
        judge=None if verdict is None else {"score": verdict.score, "detail": verdict.detail},
        uncertainty=_uncertainty(result), methods=result.methods, analysis=result.to_dict(),
        seconds=seconds,  # the batch's seconds per question
        finished_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"))


def _run_batches(config: EvalConfig, engine, todo: list[Item], total: int, f,
                 models: dict[str, Any] | None, failed: list[Failure]) -> None:
    """Analyze, judge and append the ``todo`` questions batch by batch."""
    from tqdm import tqdm

    from ..answers import AnswerSetError
    from ..settings import OptionError

    out = config.out
    with tqdm(total=total, initial=total - len(todo), unit="q", desc="evaluating",
              file=sys.stderr, dynamic_ncols=True, smoothing=0.1) as bar:
        def skip(item: Item, err: BaseException) -> None:
            where = f"line {item.line}, " if item.line is not None else ""
            failed.append(Failure(item.index, item.id, item.line, str(err)))
            bar.write(f"question {item.index} ({where}{item.id or repr(item.question[:40])}) "
                      f"skipped: {err}", file=sys.stderr)
            bar.update(1)

        size = max(1, int(config.batch_questions))
        for first in range(0, len(todo), size):
            batch, answer_sets = [], []
            for item in todo[first:first + size]:
                try:
                    answer_sets.append(_prepare(item))
                except (AnswerSetError, OptionError) as err:
                    skip(item, err)
                    continue
                batch.append(item)
            if not batch:
                continue
            started = time.perf_counter()
            results = _results_of(engine, batch, answer_sets, config.settings)
            seconds = round((time.perf_counter() - started) / len(batch), 4)
            done = [(item, r) for item, r in zip(batch, results) if not isinstance(r, Exception)]
            for item, r in zip(batch, results):
                if isinstance(r, Exception):
                    skip(item, r)
            for _, result in done:
                models = _check_models(models, result, out)
            judged = [(item, result) for item, result in done if item.label is None]
            verdicts = dict(zip((item.index for item, _ in judged), config.judge.judge_many(
                [(item.question, result.greedy.text, item.references)
                 for item, result in judged])))
            for item, result in done:
                record = _record(item, result, verdicts.get(item.index), seconds)
                f.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
                bar.update(1)


def evaluate(config: EvalConfig, engine: Any = None) -> Report:
    """Run (or resume) the evaluation and write its report; returns the report. Lines of the
    data file that cannot be used are reported (``config.messages``) and skipped; the report
    lists them in ``skipped_lines``, and the questions that failed in ``failed``."""
    source = load_source(config.data)
    for problem in source.problems:
        config.messages(f"skipped {problem}")
    items = select(source.items, config.limit, config.settings.seed)
    out = config.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunError(f"cannot create the run directory {str(out)!r}: {err}") from err
    with _locked(out):
        manifest = _manifest(config, source.fingerprint, len(items))
        mpath = out / MANIFEST
        if mpath.exists():
            _check_manifest(mpath, manifest)
        else:
            if (out / RESULTS).exists():
                raise RunError(f"{out} holds results without {MANIFEST}; use a new --out "
                               "directory")
            mpath.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        results_path = out / RESULTS
        try:
            finished = read_results(results_path, repair=True)
        except RunFileError as err:
            raise RunError(str(err)) from err
        done = {r["index"] for r in finished}
        models = models_of(finished[0]["analysis"]["settings"]) if finished else None
        todo = [it for it in items if it.index not in done]
        if done:
            config.messages(f"resuming {out}: {len(items) - len(todo)} of {len(items)} "
                            "questions already done")
        failed: list[Failure] = []
        if todo:
            if engine is None:
                from ..engine import Engine

                engine = Engine(config.settings)
            with open(results_path, "a", encoding="utf-8") as f:
                _run_batches(config, engine, todo, len(items), f, models, failed)
        wanted = {it.index for it in items}
        records = [Record.from_dict(r, f"{results_path} line {i}")
                   for i, r in enumerate(read_results(results_path), 1) if r["index"] in wanted]
        return write_report(out, records, manifest=manifest, resamples=config.resamples,
                            plots=config.plots, messages=config.messages, failed=failed,
                            warnings=source.warnings, skipped_lines=source.problems)
