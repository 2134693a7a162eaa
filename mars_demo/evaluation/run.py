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
from typing import Any, Callable

from . import MEASURES, SCORINGS
from . import report as R
from .data import Item, load_source, select
from .calibration import MODEL_KEYS
from .judges import Judge

RUN_VERSION = 1
RESULTS = "results.jsonl"
MANIFEST = "run.json"


class RunError(ValueError):
    """A run that cannot start or go on (a RUN_DIR of other settings, one in use, bad data)."""


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
    messages: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr))

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


def read_results(path: pathlib.Path, repair: bool = False) -> list[dict]:
    """The finished lines of results.jsonl. A last line without its newline or not valid JSON
    (a run killed while writing it) is not counted; with ``repair`` it is cut off the file."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    records, good_end, pos = [], 0, 0
    while pos < len(raw):
        nl = raw.find(b"\n", pos)
        if nl < 0:
            break  # no newline: the line was cut short
        line = raw[pos:nl]
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            break
        records.append(rec)
        pos = good_end = nl + 1
    if good_end < len(raw):
        rest = raw[good_end:]
        if rest.count(b"\n") > 1 or (rest.count(b"\n") == 1 and not rest.endswith(b"\n")):
            raise RunError(f"{path} is damaged in the middle (not just its last line); use a "
                           "new --out directory")
        if repair:
            with open(path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
    return records


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
    used = {k: result.settings.get(k) for k in MODEL_KEYS}
    if expected is not None and used != expected:
        diffs = "; ".join(f"{k}: {expected[k]!r} in the run, {used[k]!r} now"
                          for k in MODEL_KEYS if expected[k] != used[k])
        raise RunError(
            f"{out} holds answers of other models ({diffs}); resume with the run's models "
            "(--llm, --importance, --nli, --load-in-4bit as it was), or use a new --out directory"
        )
    return used


def evaluate(config: EvalConfig, engine: Any = None) -> dict[str, Any]:
    """Run (or resume) the evaluation and write its report; returns the report."""
    from tqdm import tqdm

    from ..errors import AnswerSetError, EndpointError, InvalidModelOutput, OptionError

    # errors of one question (a bad line, NaN scores, a request the server refuses): that
    # question is skipped and the run goes on
    one_question = (AnswerSetError, OptionError, InvalidModelOutput, EndpointError)

    source = load_source(config.data)
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
        finished = read_results(results_path, repair=True)
        done = {r["index"] for r in finished}
        models = ({k: finished[0]["analysis"]["settings"].get(k) for k in MODEL_KEYS}
                  if finished else None)
        todo = [it for it in items if it.index not in done]
        if done:
            config.messages(f"resuming {out}: {len(items) - len(todo)} of {len(items)} "
                            "questions already done")
        failed: list[dict] = []
        if todo:
            if engine is None:
                from ..engine import Engine

                engine = Engine(config.settings)
            with open(results_path, "a", encoding="utf-8") as f, tqdm(
                total=len(items), initial=len(items) - len(todo), unit="q", desc="evaluating",
                file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
            ) as bar:
                def skip(item: Item, err: BaseException) -> None:
                    failed.append({"index": item.index, "id": item.id, "error": str(err)})
                    bar.write(f"question {item.index} ({item.id or item.question[:40]!r}) "
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
                    try:
                        results = _analyze_batch(engine, batch, answer_sets, config.settings)
                    except one_question as err:
                        if len(batch) == 1:
                            if isinstance(err, EndpointError):
                                raise  # maybe the server, not the question: stop, resumable
                            results = [err]
                        else:
                            # each question alone, so that only the bad one is skipped (their
                            # generated samples are then those of a batch of one; greedy
                            # answers and scores of given answers are the same)
                            results = []
                            for item, answers in zip(batch, answer_sets):
                                try:
                                    results += _analyze_batch(engine, [item], [answers],
                                                              config.settings)
                                except one_question as alone:
                                    results.append(alone)
                            errors = [r for r in results if isinstance(r, Exception)]
                            if len(errors) == len(batch) and all(
                                    isinstance(e, EndpointError) for e in errors):
                                raise errors[0]  # every question: the server, not a question
                    seconds = round((time.perf_counter() - started) / len(batch), 4)
                    for item, result in zip(batch, results):
                        if isinstance(result, Exception):
                            skip(item, result)
                            continue
                        models = _check_models(models, result, out)
                        verdict = config.judge(item.question, result.greedy.text, item.references)
                        analysis = result.to_dict()
                        line = {
                            "index": item.index, "id": item.id, "question": item.question,
                            "references": item.references, "greedy": result.greedy.text,
                            "correct": bool(verdict.correct),
                            "judge": {"score": verdict.score, "detail": verdict.detail},
                            "uncertainty": _uncertainty(result), "analysis": analysis,
                            "seconds": seconds,  # the batch's seconds per question
                            "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(
                                timespec="milliseconds"),
                        }
                        f.write(json.dumps(line, ensure_ascii=False) + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                        bar.update(1)
        records = read_results(results_path)
        wanted = {it.index for it in items}
        records = [r for r in records if r["index"] in wanted]
        return write_report(config, records, failed, manifest, source.warnings)


def _models(records: list[dict], settings) -> dict[str, Any]:
    """The models that made and scored the answers, as the analyses recorded them (a run's
    answers all come from the same ones: :func:`_check_models`)."""
    first = records[0]["analysis"]["settings"] if records else {}
    return {"llm": first.get("llm", settings.llm), "importance": first.get(
        "importance", settings.importance), "nli": first.get("nli", settings.nli)}


def write_report(config: EvalConfig, records: list[dict], failed: list[dict],
                 manifest: dict[str, Any], data_warnings: list[str] = ()) -> dict[str, Any]:
    out = config.out
    n = len(records)
    accuracy = sum(bool(r["correct"]) for r in records) / n if n else 0.0
    warnings = list(data_warnings)  # e.g. rows of the data set left out
    if n < manifest["questions"]:
        warnings.append(f"{manifest['questions'] - n} of {manifest['questions']} selected "
                        "questions have no result (failed, see above); the metrics use the "
                        f"{n} that have one")
    report = {
        "data": config.data, "n": n, "accuracy": accuracy,
        "judge": manifest["judge"], "models": _models(records, config.settings),
        "settings": manifest["settings"], "limit": config.limit, "seed": config.settings.seed,
        "bootstrap": {"resamples": config.resamples, "seed": config.settings.seed,
                      "interval": "percentile 2.5-97.5"},
        "metrics": R.compute_metrics(records, resamples=config.resamples,
                                     seed=config.settings.seed),
        "failed": failed,
        "seconds_per_question": (round(sum(r.get("seconds", 0.0) for r in records) / n, 4)
                                 if n else None),
        "warnings": warnings,
        "plots": [],
    }
    if config.plots and n:
        files, plot_warnings = R.plots(records, out)
        report["plots"] = files
        report["warnings"] += plot_warnings
    for w in report["warnings"]:
        config.messages(f"warning: {w}")
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(R.markdown(report), encoding="utf-8")
    return report


def calibrate(run_dir: str | pathlib.Path, measure: str = "semantic_entropy",
              scoring: str = "mars", out: str | pathlib.Path | None = None) -> pathlib.Path:
    """Fit the isotonic calibration of ``measure``/``scoring`` on a finished run; writes
    ``out`` (default RUN_DIR/calibration.json) and returns its path."""
    from . import calibration as K

    run = pathlib.Path(run_dir)
    report = R.load_report(run)
    records = read_results(run / RESULTS)
    if not records:
        raise RunError(f"{run} has no results to calibrate on")
    if report.get("n") != len(records):
        raise RunError(
            f"{run}/report.json covers {report.get('n')} questions but results.jsonl has "
            f"{len(records)}: the run did not finish; run the same evaluate command again to "
            "finish it (and rewrite its report), then calibrate"
        )
    correct, u = R.arrays(records)
    auroc = report["metrics"]["auroc"][measure][scoring]["value"]
    cal = K.fit(u[measure, scoring], correct, measure=measure, scoring=scoring,
                models=report["models"], data=report["data"], auroc=auroc,
                judge=report["judge"], settings=records[0]["analysis"].get("settings"))
    return cal.save(out or run / "calibration.json")
