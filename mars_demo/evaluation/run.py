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

from . import judge_check
from . import methods_table
from . import report as reporting
from ..methods import models_of
from .data import Item, load_source, select
from .judges import Judge
from .runs import MANIFEST, RESULTS, Record, RunFileError, read_results, read_run

RUN_VERSION = 1


class RunError(ValueError):
    """A run that cannot start or go on (a RUN_DIR of other settings, one in use, bad data)."""


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


def _run_batches(config: EvalConfig, engine, todo: list[Item], total: int, f,
                 models: dict[str, Any] | None, failed: list[dict]) -> None:
    """Analyze, judge and append the ``todo`` questions batch by batch."""
    from tqdm import tqdm

    from ..answers import AnswerSetError
    from ..settings import OptionError

    out = config.out
    with tqdm(total=total, initial=total - len(todo), unit="q", desc="evaluating",
              file=sys.stderr, dynamic_ncols=True, smoothing=0.1) as bar:
        def skip(item: Item, err: BaseException) -> None:
            where = f"line {item.line}, " if item.line is not None else ""
            failed.append({"index": item.index, "id": item.id, "line": item.line,
                           "error": str(err)})
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
                verdict = verdicts.get(item.index)
                line = {
                    "index": item.index, "id": item.id, "line": item.line,
                    "question": item.question, "references": item.references,
                    "greedy": result.greedy.text,
                    "correct": bool(item.label if verdict is None else verdict.correct),
                    "label": "judged" if verdict is not None else "given",
                    "judge": None if verdict is None else {"score": verdict.score,
                                                           "detail": verdict.detail},
                    "uncertainty": _uncertainty(result), "methods": result.methods,
                    "analysis": result.to_dict(),
                    "seconds": seconds,  # the batch's seconds per question
                    "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(
                        timespec="milliseconds"),
                }
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                f.flush()
                os.fsync(f.fileno())
                bar.update(1)


def evaluate(config: EvalConfig, engine: Any = None) -> dict[str, Any]:
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
        failed: list[dict] = []
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


def _models(records: Sequence[Record], manifest: dict[str, Any]) -> dict[str, Any]:
    """The models that made and scored the answers, as the analyses recorded them (a run's
    answers all come from the same ones: :func:`_check_models`): the LLM, importance and NLI
    models, and an optional one (SAR's similarity model...) only where the run's methods ran
    it (:func:`mars_demo.methods.models_of`)."""
    first = ((records[0].data.get("analysis") or {}).get("settings") or {}) if records else {}
    return models_of({**(manifest.get("settings") or {}), **first})


def write_report(out: pathlib.Path, records: Sequence[Record], *, manifest: dict[str, Any],
                 resamples: int, plots: bool = True,
                 messages: Callable[[str], None] = _stderr, failed: Sequence[dict] = (),
                 warnings: Sequence[str] = (), skipped_lines: Sequence[str] = ()) -> dict[str, Any]:
    """report.json, report.md and the plots of a run directory from its records; returns the
    report. ``manifest``: the run's run.json (its data, judge, settings, seed)."""
    n = len(records)
    given = sum(r.label == "given" for r in records)
    seed = manifest.get("seed") or 0
    warnings = list(warnings)  # e.g. rows of the data set left out
    if n < manifest["questions"]:
        warnings.append(f"{manifest['questions'] - n} of {manifest['questions']} selected "
                        "questions have no result (failed, see above); the metrics use the "
                        f"{n} that have one")
    warnings += methods_table.incomplete(records)
    long = reporting.long_answer_warning(records, manifest["judge"])
    if long:
        warnings.append(long)
    check = judge_check.load(out)
    if check is not None and check.get("judge") != manifest["judge"]:
        check = None  # a check of another judge
    metrics = reporting.compute_metrics(records, resamples=resamples, seed=seed)
    report = {
        "data": manifest["data"], "n": n,
        "accuracy": sum(r.correct for r in records) / n if n else 0.0,
        "labels": {"given": given, "judged": n - given},
        "judge": manifest["judge"], "judge_check": check,
        "models": _models(records, manifest),
        "settings": manifest["settings"], "limit": manifest.get("limit"), "seed": seed,
        "bootstrap": {"resamples": resamples, "seed": seed,
                      "interval": "percentile 2.5-97.5"},
        "metrics": metrics,
        "methods_table": methods_table.compute(records, resamples=resamples, seed=seed,
                                               metrics=metrics,
                                               judge=manifest["judge"].get("name")),
        "failed": list(failed), "skipped_lines": list(skipped_lines),
        "seconds_per_question": (round(sum(float(r.data.get("seconds") or 0.0)
                                           for r in records) / n, 4) if n else None),
        "warnings": warnings,
        "plots": [],
    }
    if manifest.get("rejudged_from"):
        report["rejudged_from"] = manifest["rejudged_from"]
    if plots and n:
        top, top_warnings = methods_table.roc_figure(
            records, methods_table.ranked_rows(report["methods_table"]))
        files, plot_warnings = reporting.plots(records, out, {"roc_methods": top})
        report["plots"] = files
        report["warnings"] += top_warnings + plot_warnings
    for w in report["warnings"]:
        messages(f"warning: {w}")
    save_report(out, report)
    return report


def save_report(out: pathlib.Path, report: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(reporting.markdown(
        report, methods_table.markdown_lines(report.get("methods_table"))), encoding="utf-8")


def calibrate(run_dir: str | pathlib.Path, measure: str = "semantic_entropy",
              scoring: str | None = "mars", out: str | pathlib.Path | None = None, *,
              plots: bool = True) -> pathlib.Path:
    """Fit the isotonic calibration of one uncertainty of a finished run and check it by
    cross-validation: ``measure`` is a measure or any method id the run's records hold
    (``methods``), ``scoring`` its variant (length_normalized, mars, or value for a method
    that reads no sequence score; None: mars where the row has it, else value). Writes
    ``out`` (default RUN_DIR/calibration.json), adds the held-out Brier score, calibration
    error and reliability diagram to the run's report, and returns the calibration's path.
    Raises :class:`RunError` for a run that is not finished or unreadable, or that has no such
    uncertainty (naming the ones it has), :class:`~.calibration.TooFewAnswers` (with the
    reason) when one class is missing or too rare."""
    from . import calibration
    from . import metrics as metric_math

    try:
        run = read_run(run_dir)
    except RunFileError as err:
        raise RunError(str(err)) from err
    if not run.records:
        raise RunError(f"{run.path} has no results to calibrate on")
    correct, u = methods_table.arrays(run.records)
    variants = [v for name, v in u if name == measure]
    if not variants:
        raise RunError(f"{run.path} has no uncertainty {measure!r}; it has "
                       + ", ".join(dict.fromkeys(name for name, _ in u)))
    if scoring is None:
        scoring = "mars" if "mars" in variants else variants[0]
    if scoring not in variants:
        raise RunError(f"{run.path} has no {measure} ({scoring}) uncertainty; {measure} has "
                       + ", ".join(variants))
    values = u[measure, scoring]
    quality = calibration.cross_validate(values, correct, seed=run.manifest.get("seed") or 0)
    try:
        auroc = metric_math.auroc(values, correct)
    except metric_math.UndefinedMetric:
        auroc = None
    cal = calibration.fit(values, correct, measure=measure, scoring=scoring,
                          models=run.report.models, data=run.report.data, auroc=auroc,
                          judge=run.report.judge,
                          settings=run.records[0].data.get("analysis", {}).get("settings"))
    cal.held_out = quality
    path = cal.save(out or run.path / "calibration.json")
    report = dict(run.report.raw)
    section = {"measure": measure, "scoring": scoring, "file": path.name, **quality,
               "plots": []}
    if plots:
        title = reporting.method_label(measure, scoring)
        files, warnings = reporting.write_figures(
            {"reliability": calibration.reliability_figure(quality, title)}, run.path)
        section["plots"] = files
        report["warnings"] = list(dict.fromkeys([*report.get("warnings", []), *warnings]))
    report["calibration"] = section
    save_report(run.path, report)
    return path
