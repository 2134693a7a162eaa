"""A reference run (the page's ``--runs``, or the run folder of ``--calibration``; the command
line's ``--reference``): its answers' values of every method, to place an answer's values among
(a percentile), and how often the answers at each verdict level were right there
(:mod:`mars_demo.evaluation.levels`), which every verdict of an engine given the run says.

The run is read through :mod:`mars_demo.evaluation.runs` alone, once, when the page (or the
command) starts. The
places are said in words: "less trustworthy than 82% of the run's answers" is the share of the
run's values of the same method and variant that are strictly lower; equal values are not counted
as lower, their share is given apart. Pure: no gradio, no models.
"""

from __future__ import annotations

import bisect
import logging
import os
import pathlib
from dataclasses import dataclass, field

from .. import texts
from ..methods import OWN_MODELS, models_of, values_of
from ..result import AnalysisResult
from ..verdict import LevelRecord
# the models and settings that set an uncertainty's scale (those a calibration checks)
from .calibration import MODEL_KEYS, SETTING_KEYS
from .levels import level_records

log = logging.getLogger(__name__)

RUN_FILES = ("run.json", "report.json", "results.jsonl")


@dataclass(frozen=True)
class Place:
    """Where a value falls among a run's ``lower + equal + higher`` values."""

    lower: int
    equal: int
    higher: int

    @property
    def n(self) -> int:
        return self.lower + self.equal + self.higher

    @property
    def below(self) -> float:
        """The share of the run's values strictly lower (ties not counted)."""
        return self.lower / self.n

    @property
    def ties(self) -> float:
        return self.equal / self.n


#: values this close (relative to 1 or to the value, if larger) count as equal: the same value
#: computed twice may differ in its last bits (an eigen-decomposition's 1e-16 for a 0)
SAME = 1e-12


def place(sorted_values: list[float], value: float) -> Place:
    """Where ``value`` falls among ``sorted_values`` (ascending, not empty); values within
    :data:`SAME` of it count as equal."""
    if not sorted_values:
        raise ValueError("a place among no values")
    tolerance = SAME * max(1.0, abs(value))
    lower = bisect.bisect_left(sorted_values, value - tolerance)
    upper = bisect.bisect_right(sorted_values, value + tolerance)
    return Place(lower, upper - lower, len(sorted_values) - upper)


@dataclass(frozen=True)
class RunValues:
    """Every method's values among one evaluation run's answers: ``values[(id, variant)]``
    sorted; ``name`` (the run folder's last part), ``data`` (its file name) and ``n`` to say
    which run; ``models`` and ``settings`` (:data:`SETTING_KEYS` of its answers, where the
    records hold their analysis) to say when an answer was made otherwise."""

    name: str
    data: str
    n: int
    models: dict[str, str | None] = field(default_factory=dict)
    settings: dict[str, object] = field(default_factory=dict)
    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    #: how often the run's answers at each verdict level were right (runs that recorded levels)
    levels: dict[str, LevelRecord] = field(default_factory=dict)
    #: the run's judge, named as its report names it ("contains", "rouge ≥ 0.3")
    judge: str = ""
    #: whether that judge counts some wrong answers right (its entry's ``lenient``)
    lenient: bool = False

    def place(self, method_id: str, variant: str, value: float) -> Place | None:
        """Where ``value`` falls among the run's values of the same method and variant; None
        when the run has none."""
        values = self.values.get((method_id, variant))
        return place(values, value) if values else None

    def placed(self, method_id: str, variant: str, value: float) -> str | None:
        """Where ``value`` falls among the run's values, in words (:func:`place_words`); None
        when the run has none of that method and variant."""
        where = self.place(method_id, variant, value)
        return place_words(where)[0] if where is not None else None

    def differences(self, result: AnalysisResult) -> list[str]:
        """How ``result`` was made otherwise than this run's answers (:func:`differences`)."""
        return differences(result, self)


def run_values(run, name: str | None = None) -> RunValues:
    """:class:`RunValues` of a :class:`~mars_demo.evaluation.runs.Run`: every method's values
    of its records (:func:`mars_demo.methods.values_of`: a run made before the measures were
    methods still has them in its ``uncertainty`` block, the same numbers)."""
    collected: dict[tuple[str, str], list[float]] = {}
    for record in run.records:
        by_method = values_of({"methods": record.methods, "uncertainty": record.uncertainty})
        for method_id, by_variant in by_method.items():
            for variant, value in by_variant.items():
                collected.setdefault((method_id, variant), []).append(float(value))
    models = {k: run.report.models.get(k) for k in MODEL_KEYS}
    models.update({m.field: run.report.models[m.field] for m in OWN_MODELS
                   if run.report.models.get(m.field)})  # SAR's similarity model, where it ran
    recorded = run.records[0].analysis_settings if run.records else {}
    settings = {k: recorded[k] for k in SETTING_KEYS if k in recorded}
    data = pathlib.PurePath(run.report.data).name or run.report.data  # no server folders
    name = name or run.path.name
    return RunValues(name, data, len(run.records), models=models, settings=settings,
                     values={key: sorted(v) for key, v in collected.items()},
                     levels=level_records(run.records, name), judge=run.report.judge_text(),
                     lenient=lenient(run.report.judge.get("name")))


def lenient(judge: object) -> bool:
    """Whether the judge named ``judge`` is a lenient one (its registry entry says so; a judge
    the registry does not know is not called lenient)."""
    from .judges import entries

    entry = entries().get(str(judge))
    return bool(entry is not None and entry.lenient)


@dataclass(frozen=True)
class Reference:
    """What the panel places values among: a run's values, or None with ``note`` saying why
    (empty when no run was asked for: the values are then not comparable across rows)."""

    run: RunValues | None = None
    note: str = ""


def is_run(folder: pathlib.Path) -> bool:
    return all((folder / name).is_file() for name in RUN_FILES)


def reference_folder(calibration: str | os.PathLike | None,
                     runs_dir: str | os.PathLike | None) -> tuple[pathlib.Path | None, str]:
    """The run the panel compares with, and a note when one was wanted but none is found: the
    folder of the ``--calibration`` file when it is a run (``evaluate calibrate`` writes
    RUN_DIR/calibration.json), else the first run of ``--runs`` by name (the Evaluation view's
    first)."""
    note = ""
    if calibration:
        folder = pathlib.Path(calibration).parent
        if is_run(folder):
            return folder, ""
        note = texts.METHODS_RUN_NOT_FOUND
    if runs_dir:
        root = pathlib.Path(runs_dir)
        found = sorted(p for p in root.iterdir() if p.is_dir() and is_run(p)) if root.is_dir() else []
        if found:
            return found[0], ""
    return None, note


def load_reference(folder: str | os.PathLike | None, note: str = "") -> Reference:
    """The :class:`Reference` of a run folder (None: no run; ``note`` says why). A run that
    cannot be read is logged and said on the panel."""
    if folder is None:
        return Reference(None, note)
    from .runs import RunFileError, read_run

    folder = pathlib.Path(folder)
    try:
        return Reference(run_values(read_run(folder)))
    except (RunFileError, OSError) as err:
        log.warning("the methods panel cannot read the run %s: %s", folder, err)
        return Reference(None, texts.METHODS_RUN_UNREADABLE.format(
            run=folder.name, error=type(err).__name__))


def load_run(folder: str | os.PathLike) -> RunValues:
    """The :class:`RunValues` of the run in ``folder`` (what ``Engine(reference=...)`` and the
    command line's ``--reference`` take). Raises
    :class:`~mars_demo.evaluation.checks.RunFileError` (a ``ValueError``) for a folder that
    holds no readable, finished run."""
    from .runs import read_run

    return run_values(read_run(pathlib.Path(folder)))


def grounds(calibration: str | os.PathLike | None, reference: str | os.PathLike | None
            ) -> tuple[object, RunValues | None]:
    """The calibration (the file ``calibration``) and the reference run (the folder
    ``reference``, else the calibration's own run folder when it is one) that the command
    line's ``--calibration`` and ``--reference`` name; raises
    :class:`~mars_demo.errors.OptionError` naming the flag for a file or folder that is none."""
    from ..errors import OptionError

    loaded = None
    if calibration:
        from .calibration import load

        try:
            loaded = load(calibration)
        except ValueError as err:  # CalibrationError
            raise OptionError(f"--calibration: {err}") from err
        parent = pathlib.Path(calibration).parent
        reference = reference or (parent if is_run(parent) else None)
    if not reference:
        return loaded, None
    try:
        return loaded, load_run(reference)
    except ValueError as err:  # RunFileError
        raise OptionError(f"--reference: {err}") from err


def differences(result: AnalysisResult, run: RunValues) -> list[str]:
    """How ``result`` (the original, not the redacted one) was made otherwise than the run's
    answers, in words that name no model ("other models", "samples 5 here, 2 in the run");
    empty when alike."""
    settings = result.settings or {}

    def said(value: object) -> object:  # a setting not kept is said so, never as "None"
        return texts.METHODS_RUN_UNRECORDED if value is None else value

    out = [texts.METHODS_RUN_SETTING.format(name=k, here=said(settings.get(k)), run=said(v))
           for k, v in run.settings.items() if settings.get(k) != v]
    used = models_of(settings)  # an optional model only where the answer's methods ran it
    keys = MODEL_KEYS + tuple(k for k in used if k not in MODEL_KEYS and run.models.get(k))
    if any(settings.get(k) != run.models.get(k) for k in keys):
        out.insert(0, texts.METHODS_RUN_MODELS)
    return out


def whole_percent(share: float) -> str:
    """A share in whole percents that never says "all" or "none" when it is not: 0.995 ->
    "99%", 0.004 -> "<1%", 0.583 -> "58%"."""
    shown = round(share * 100)
    if shown == 100 and share < 1:
        return "99%"
    if shown == 0 and share > 0:
        return "<1%"
    return f"{shown}%"


def place_words(where: Place) -> tuple[str, str]:
    """Where a value falls, in words ("less trustworthy than 82% of the run's answers; as high
    as 3% of them"; where none is lower, "more trustworthy than 75% of the run's answers", never
    "less trustworthy than 0%"), and the counts behind it (a tooltip)."""
    def share(count: int) -> str:
        return texts.METHODS_ALL if count == where.n else whole_percent(count / where.n)

    if where.lower:
        line = texts.METHODS_PERCENTILE.format(below=share(where.lower))
    elif where.higher:
        line = texts.METHODS_PERCENTILE_ABOVE.format(above=share(where.higher))
    else:  # every answer of the run has this value
        return texts.METHODS_PERCENTILE_SAME, texts.METHODS_PERCENTILE_TITLE.format(
            lower=0, equal=where.equal, higher=0, n=where.n)
    if where.equal:
        line += "; " + texts.METHODS_TIES.format(ties=whole_percent(where.ties))
    title = texts.METHODS_PERCENTILE_TITLE.format(
        lower=where.lower, equal=where.equal, higher=where.higher, n=where.n)
    return line, title
