"""The ``evaluate`` run: labelled questions in, results.jsonl and a report out, resumable, in one
process or several.

The selected questions are cut into batches of ``batch_questions`` (``--batch-questions``), each
with its own seed (:mod:`.shares`), and go through the engine batch by batch
(:mod:`.batches`); each question's record is appended to ``RUN_DIR/results.jsonl`` as soon as
its batch is done. Greedy answers and every result of pre-generated answers do not depend on the
batch size; generated samples do (a batch shares its random draws), so a run's samples are
reproducible for the same seed and batch size, whether one process made it or several.

``RUN_DIR/run.json`` records what the run is (:class:`~.manifest.Manifest`: data, its
fingerprint, limit, seed, judge, settings); a RUN_DIR made with other ones is refused. A run
started again with the same RUN_DIR skips the questions already there (a last line cut short by
a kill is dropped and redone) and never rewrites a finished one. At the end, report.json,
report.md and the plots are written from the records, in the data's order.

Several processes (``accelerate launch`` / ``torchrun``, :mod:`.parallel`) share one RUN_DIR:
each runs its share of the batches into its own part, and the main process folds the parts into
results.jsonl and writes the report. ``--shard K/N`` (:attr:`EvalConfig.shard`) runs one share
into a RUN_DIR of its own; ``evaluate merge`` (:mod:`.merge`) joins the shares.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from ..methods import models_of
from .batches import BatchRun, run_batches
from .checks import loads
from .data import load_source, select
from .judges import Judge
from .manifest import Manifest
from .parallel import (PARTS, PartsProgress, Processes, absorb_parts, one_process_note,
                       part_path)
from .records import Record
from .report import write_report
from .runs import MANIFEST, RESULTS, RunError, RunFileError, read_results
from .schema import Failure, Report
from .shares import batches, empty_share, share


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
    shard: tuple[int, int] | None = None  # (K, N): run share K of N only (--shard K/N)

    def __post_init__(self) -> None:
        self.out = pathlib.Path(self.out)


def _manifest(config: EvalConfig, source, n: int, share_questions: int | None,
              processes: int) -> Manifest:
    settings = config.settings.to_dict()
    settings.pop("llm_timeout", None)  # may change between resumes (a server that was slow)
    return Manifest(data=config.data, data_fingerprint=source.fingerprint, limit=config.limit,
                    seed=config.settings.seed, questions=n, judge=config.judge.describe(),
                    settings=settings, batch_questions=max(1, int(config.batch_questions)),
                    shard=config.shard, share_questions=share_questions,
                    data_warnings=list(source.warnings), skipped_lines=list(source.problems),
                    processes=processes)


def _check_manifest(path: pathlib.Path, wanted: Manifest) -> None:
    try:
        have = Manifest.from_dict(loads(path.read_text(encoding="utf-8"), str(path)), str(path))
    except (OSError, UnicodeDecodeError, RunFileError) as err:
        raise RunError(f"{path} cannot be read ({err}); use a new --out directory") from err
    diffs = have.differences(wanted)
    if diffs:
        raise RunError(
            f"{path.parent} holds a run made with other settings ({'; '.join(diffs)[:600]}); "
            "resume it with the same options, or use a new --out directory")


def _write_manifest(path: pathlib.Path, manifest: Manifest) -> None:
    path.write_text(json.dumps(manifest.to_dict(), indent=2) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _locked(out: pathlib.Path):
    import fcntl

    with open(out / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            raise RunError(f"another evaluate is running in {out}") from err
        yield


def _prepare_dir(out: pathlib.Path, manifest: Manifest) -> None:
    """The main process's part of a start: check (or write) run.json, cut off a torn last
    line of results.jsonl, and fold into it the parts a killed run of several processes
    left."""
    mpath = out / MANIFEST
    if mpath.exists():
        _check_manifest(mpath, manifest)
    elif (out / RESULTS).exists():
        raise RunError(f"{out} holds results without {MANIFEST}; use a new --out directory")
    _write_manifest(mpath, manifest)  # with this start's record-only fields
    try:
        read_results(out / RESULTS, repair=True)  # a torn last line is cut off, and redone
        absorb_parts(out)
    except RunFileError as err:
        raise RunError(str(err)) from err


def evaluate(config: EvalConfig, engine: Any = None,
             processes: Processes | None = None) -> Report | None:
    """Run (or resume) the evaluation and write its report; returns the report. Lines of the
    data file that cannot be used are reported (``config.messages``) and skipped; the report
    lists them in ``skipped_lines``, and the questions that failed in ``failed``.

    ``processes``: this process among several (:func:`.parallel.processes`): it runs its share
    into its part; the main process (rank 0) then merges the parts and returns the report, the
    others return None."""
    source = load_source(config.data)
    main = processes is None or processes.main
    say = config.messages if main else (
        lambda m: config.messages(f"[{processes.name}] {m}"))
    if main:
        for problem in source.problems:
            say(f"skipped {problem}")
    note = one_process_note()
    if note:
        say(f"warning: {note}")
    items = select(source.items, config.limit, config.settings.seed)
    notes: list[str] = []  # warnings of this run's report beside the data's
    everything = batches(items, config.batch_questions)
    if config.shard is not None:
        if processes is not None:
            raise RunError("--shard K/N runs in one process; under accelerate launch or "
                           "torchrun the processes share the run among themselves")
        mine = share(everything, *config.shard)
        if not mine:  # said now, and in the share's report
            notes.append(empty_share(*config.shard, len(items), config.batch_questions))
            say(f"warning: {notes[-1]}")
    elif processes is not None:
        mine = share(everything, processes.rank + 1, processes.count)
    else:
        mine = list(enumerate(everything))
    out = config.out
    manifest = _manifest(config, source, len(items),
                         None if config.shard is None else sum(len(b) for _, b in mine),
                         1 if processes is None else processes.count)
    with contextlib.ExitStack() as stack:
        if main:
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise RunError(f"cannot create the run directory {str(out)!r}: {err}") from err
            stack.enter_context(_locked(out))
            _prepare_dir(out, manifest)
            if processes is not None:
                (out / PARTS).mkdir(exist_ok=True)
        if processes is not None:
            processes.wait()  # the run directory is checked and ready
        try:
            finished = read_results(out / RESULTS)
        except RunFileError as err:
            raise RunError(str(err)) from err
        done = {r["index"] for r in finished}
        wanted = {item.index for _, batch in mine for item in batch}
        total = len(items) if processes is not None else len(wanted)
        already = len(done & ({it.index for it in items} if processes is not None else wanted))
        if done and main:
            say(f"resuming {out}: {already} of {total} questions already done")
        target = out / RESULTS if processes is None else part_path(out, processes.rank,
                                                                   processes.count)
        failed = _run_share(config, engine, mine, done, target, total, already,
                            models_of(finished[0]["analysis"]["settings"]) if finished else None,
                            processes, say)
        if processes is not None:
            if not main:
                return None
            absorb_parts(out)
            wanted = {it.index for it in items}
        records = sorted((Record.from_dict(r, f"{out / RESULTS} line {i}")
                          for i, r in enumerate(read_results(out / RESULTS), 1)
                          if r["index"] in wanted), key=lambda r: r.index)
        return write_report(out, records, manifest=manifest, resamples=config.resamples,
                            plots=config.plots, messages=config.messages, failed=failed,
                            warnings=[*manifest.data_warnings, *notes],
                            skipped_lines=manifest.skipped_lines)


def _run_share(config: EvalConfig, engine: Any, mine: list, done: set[int],
               target: pathlib.Path, total: int, already: int, models: dict[str, Any] | None,
               processes: Processes | None, say: Callable[[str], None]) -> list[Failure]:
    """Run this process's batches into ``target`` (results.jsonl, or its part) with a progress
    bar: its own in one process; under several, the main process's bar counts every part's
    lines until every process is done, and the others show none. Returns the questions that
    failed: this process's, or under several processes every process's (in the data's
    order)."""
    from tqdm import tqdm

    todo = any(item.index not in done for _, batch in mine for item in batch)
    main = processes is None or processes.main
    with tqdm(total=total, initial=already, unit="q", desc="evaluating", file=sys.stderr,
              dynamic_ncols=True, smoothing=0.1, disable=not main) as bar:
        watcher = None
        if processes is not None and main:
            watcher = PartsProgress(bar, target.parent).start()

        def advance(n: int) -> None:
            if processes is None:  # (under several processes the watcher counts the lines)
                bar.update(n)
                # drawn at once: tqdm draws at most every 0.1 s by itself, so the questions a
                # batch writes within that time would show only with the next batch
                bar.refresh()

        note = (lambda m: bar.write(m, file=sys.stderr)) if main else say
        failed: list[Failure] = []
        if todo:
            if engine is None:
                from ..engine import Engine

                engine = Engine(config.settings)
            with open(target, "a", encoding="utf-8") as f:
                run = BatchRun(engine, config.judge, config.settings, f, set(done), models,
                               config.out, note, advance)
                run_batches(run, mine)
            failed = run.failed
        if processes is not None:
            everyone = processes.gather(failed)  # every process has finished its part
            failed = sorted((f for part in everyone for f in part), key=lambda f: f.index)
        if watcher is not None:
            watcher.stop()
            bar.update(len(failed))  # the failed questions have no line
    return failed
