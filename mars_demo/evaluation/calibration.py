"""From an uncertainty to a chance of being right: isotonic regression, saved as JSON.

:func:`fit` learns a non-increasing map uncertainty -> P(correct) with scikit-learn's
``IsotonicRegression`` on an evaluation run's (uncertainty, correct) pairs. The JSON keeps the
fitted breakpoints, which measure and scoring it was fit on, the models that made and scored
the answers, the data set, n, the accuracy and the AUROC. :meth:`Calibration.predict` needs only
numpy: it interpolates linearly between the breakpoints and clips outside them, exactly as
``IsotonicRegression.predict`` with ``out_of_bounds="clip"`` does.

:func:`cross_validate` says how good such a map is on answers it was not fit on: a k-fold
cross-validation (stratified, seeded) gives each answer its chance from a fit on the other
folds; the Brier score (scikit-learn's ``brier_score_loss``) and the expected calibration error
(equal-width bins, as scikit-learn's ``calibration_curve`` with ``strategy="uniform"``) of
those held-out chances, with the reliability table, are what ``evaluate calibrate`` reports.
:func:`check_classes` refuses labels where one class is missing or too rare for that.

The uncertainty is a measure (``uncertainty.<measure>.<scoring>`` of an analysis) or any other
method of the registry (``methods.<id>.<variant>``, variant ``length_normalized``, ``mars`` or
``value``): :func:`uncertainty_of` reads either from an analysis.

A calibration only holds for the models and the settings it was made with (the sample count,
temperature, prompt, scoring options...: they move the uncertainty's scale):
:meth:`Calibration.check` refuses an analysis made with other ones, with a message that names
them.
"""

from __future__ import annotations

import datetime as _dt
import json
import pathlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..methods import BASE_MODELS, OWN_MODELS, optional_models
from . import MEASURES, SCORINGS
from .checks import NAME, VARIANTS

FORMAT = "mars-demo-calibration"
VERSION = 1
CV_FOLDS = 5  # cross-validation folds; each class needs at least this many answers
ECE_BINS = 10
MODEL_KEYS = BASE_MODELS  # the models every calibration records and checks
#: The settings an uncertainty's scale depends on (as an analysis records them in ``settings``):
#: an analysis made or scored with other values gets no chance from the calibration.
SETTING_KEYS = ("prompt", "samples", "temperature", "top_p", "max_new_tokens",
                "importance_method", "normalization", "softmax_temperature", "distribution",
                "cluster_rule", "recipe")


class CalibrationError(ValueError):
    """A calibration file that cannot be used (unreadable, or made for other models)."""


class OtherSettings(CalibrationError):
    """An analysis made or scored with other settings than the calibration's (same models)."""

    other = "settings"  # what differs, as a verdict says it (mars_demo.verdict.covered)


class TooFewAnswers(CalibrationError):
    """Labels where one class is missing or too rare to fit and check a calibration."""


def valid_uncertainty(measure: Any, scoring: Any) -> bool:
    """Whether (measure, scoring) names an uncertainty: a measure with one of its scorings, or
    a method id (a plain name) with one of :data:`VARIANTS`."""
    if measure in MEASURES:
        return scoring in SCORINGS
    return (isinstance(measure, str) and bool(NAME.fullmatch(measure))
            and scoring in VARIANTS)


def uncertainty_of(data: dict[str, Any], measure: str, scoring: str) -> float:
    """The uncertainty ``measure``/``scoring`` of an analysis's JSON: ``uncertainty`` for a
    measure, ``methods`` for another method. Raises :class:`OtherSettings` when the analysis
    did not compute that method."""
    if measure in MEASURES:
        return float(data["uncertainty"][measure][scoring])
    methods = data.get("methods") or {}
    if measure not in methods or scoring not in (methods[measure] or {}):
        have = ", ".join(methods) or "none"
        raise OtherSettings(
            f"this answer has no {measure} ({scoring}) value, the method the calibration "
            f"reads (its methods: {have}); analyze it with that method asked for")
    return float(methods[measure][scoring])


@dataclass
class Calibration:
    measure: str
    scoring: str
    x: list[float]  # breakpoints of uncertainty, increasing
    y: list[float]  # P(correct) at each breakpoint, non-increasing
    models: dict[str, Any]
    data: str
    n: int
    accuracy: float
    auroc: float | None
    judge: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # SETTING_KEYS of the run's answers
    held_out: dict[str, Any] = field(default_factory=dict)  # cross_validate()'s figures

    def predict(self, uncertainty: float | Sequence[float]) -> np.ndarray | float:
        """P(correct) for each uncertainty (a float for a float)."""
        u = np.asarray(uncertainty, dtype=float)
        p = np.interp(u, self.x, self.y) if len(self.x) > 1 else np.full(u.shape, self.y[0])
        return float(p) if np.ndim(uncertainty) == 0 else p

    def chance(self, result: Any) -> float:
        """P(correct) of an analysis (an :class:`~mars_demo.result.AnalysisResult` or its JSON)
        from its own ``uncertainty.<measure>.<scoring>`` (or ``methods.<id>.<variant>``),
        after checking that it was made by this calibration's models and settings (its
        recorded ``settings``)."""
        data = result.to_dict() if hasattr(result, "to_dict") else result
        self.check(data.get("settings") or {})
        return float(self.predict(uncertainty_of(data, self.measure, self.scoring)))

    def estimate(self, result: Any) -> dict[str, Any]:
        """:meth:`chance` with where it comes from, as JSON (the API's ``calibration`` field):
        ``chance_correct``, the ``uncertainty`` it was read from, ``measure``, ``scoring``,
        ``data``, ``n``, ``accuracy``, ``auroc``, ``judge``, ``models`` and ``source`` (words).
        Raises :class:`CalibrationError` when ``result`` was made by other models or with
        other settings."""
        data = result.to_dict() if hasattr(result, "to_dict") else result
        chance = self.chance(data)
        return {"chance_correct": chance,
                "uncertainty": uncertainty_of(data, self.measure, self.scoring),
                "measure": self.measure, "scoring": self.scoring, "data": self.data,
                "n": self.n, "accuracy": self.accuracy, "auroc": self.auroc,
                "judge": dict(self.judge), "models": dict(self.models),
                "source": self.describe()}

    def describe(self) -> str:
        """Where the estimate comes from, in words, e.g. for the page."""
        auroc = "undefined" if self.auroc is None else f"{self.auroc:.3f}"
        return (f"isotonic calibration of {self.measure} ({self.scoring}) on {self.data}, "
                f"n = {self.n}, accuracy {self.accuracy:.1%}, AUROC {auroc}")

    @property
    def model_keys(self) -> tuple[str, ...]:
        """The models this calibration checks: :data:`MODEL_KEYS`, and each optional model
        (SAR's similarity model...) it recorded, as it does when its uncertainty reads one."""
        return MODEL_KEYS + tuple(m.field for m in OWN_MODELS if self.models.get(m.field))

    def check_models(self, models: dict[str, Any]) -> None:
        """Raise :class:`CalibrationError` unless ``models`` (llm, importance, nli ids, and an
        optional model's where :attr:`model_keys` has it) are the ones this calibration was
        made with."""
        wrong = [f"{k}: calibrated with {self.models.get(k)!r}, loaded {models.get(k)!r}"
                 for k in self.model_keys if self.models.get(k) != models.get(k)]
        if wrong:
            raise CalibrationError(
                "this calibration was made for other models (" + "; ".join(wrong) + "); "
                "calibrate a run of the loaded models, or load the calibrated ones"
            )

    def check(self, settings: dict[str, Any]) -> None:
        """Raise :class:`CalibrationError` unless an analysis's recorded ``settings`` have this
        calibration's models (:meth:`check_models`) and its :data:`SETTING_KEYS` values (those
        the calibration recorded)."""
        self.check_models({k: settings.get(k) for k in self.model_keys})
        wrong = [f"{k} {settings.get(k)!r} here, {self.settings[k]!r} in the calibration"
                 for k in SETTING_KEYS if k in self.settings and settings.get(k) != self.settings[k]]
        if wrong:
            raise OtherSettings(
                "this answer was made or scored with other settings than the calibration's ("
                + "; ".join(wrong) + "), which change the uncertainty's scale"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "measure": self.measure,
                "scoring": self.scoring, "x": self.x, "y": self.y, "models": self.models,
                "settings": self.settings, "data": self.data, "n": self.n,
                "accuracy": self.accuracy, "auroc": self.auroc, "judge": self.judge,
                "held_out": self.held_out, "created": self.created}

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        path = pathlib.Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: Any) -> "Calibration":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationError(f"not a calibration file (no \"format\": \"{FORMAT}\")")
        if data.get("version") != VERSION:
            raise CalibrationError(f"calibration version {data.get('version')!r} is not "
                                   f"{VERSION}, the one this version reads")
        try:
            x = [float(v) for v in data["x"]]
            y = [float(v) for v in data["y"]]
            out = cls(measure=data["measure"], scoring=data["scoring"], x=x, y=y,
                      models=dict(data["models"]), data=str(data["data"]), n=int(data["n"]),
                      accuracy=float(data["accuracy"]),
                      auroc=None if data["auroc"] is None else float(data["auroc"]),
                      judge=dict(data.get("judge") or {}), created=str(data.get("created", "")),
                      settings={k: v for k, v in dict(data.get("settings") or {}).items()
                                if k in SETTING_KEYS},
                      held_out=dict(data.get("held_out") or {}))
        except (KeyError, TypeError, ValueError) as err:
            raise CalibrationError(f"the calibration file is incomplete or malformed ({err})") from err
        if not valid_uncertainty(out.measure, out.scoring):
            raise CalibrationError(
                f"the calibration's uncertainty {out.measure!r} ({out.scoring!r}) is neither a "
                f"measure ({', '.join(MEASURES)}) with a scoring ({', '.join(SCORINGS)}) nor a "
                f"method id with a variant ({', '.join(VARIANTS)})")
        if (not x
                or len(x) != len(y) or any(b < a for a, b in zip(x, x[1:]))
                or any(b > a for a, b in zip(y, y[1:]))
                or not all(0.0 <= v <= 1.0 for v in y) or not np.all(np.isfinite(x))):
            raise CalibrationError("the calibration file's breakpoints are malformed")
        return out


def load(path: str | pathlib.Path) -> Calibration:
    try:
        data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CalibrationError(f"cannot read the calibration file {str(path)!r}: {err}") from err
    return Calibration.from_dict(data)


def fit(
    uncertainty: Sequence[float],
    correct: Sequence[bool],
    *,
    measure: str,
    scoring: str,
    models: dict[str, Any],
    data: str,
    auroc: float | None,
    judge: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
) -> Calibration:
    """Fit the non-increasing isotonic map uncertainty -> P(correct). ``models``: the run's
    (its report's); the calibration keeps :data:`MODEL_KEYS` and the optional models its
    uncertainty reads (``sar``'s similarity model), since those set its scale. ``settings``:
    the answers' recorded settings (an analysis's ``settings``); their :data:`SETTING_KEYS`
    are kept and checked by :meth:`Calibration.check`."""
    from sklearn.isotonic import IsotonicRegression

    if not valid_uncertainty(measure, scoring):
        raise ValueError(f"measure must be one of {MEASURES} with a scoring of {SCORINGS}, or "
                         f"a method id with a variant of {VARIANTS}; got {measure!r} "
                         f"({scoring!r})")
    u = np.asarray(uncertainty, dtype=float)
    c = np.asarray(correct, dtype=float)
    if u.size < 2:
        raise ValueError(f"a calibration needs at least 2 answers; the run has {u.size}")
    iso = IsotonicRegression(increasing=False, y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(u, c)
    return Calibration(
        measure=measure, scoring=scoring,
        x=[float(v) for v in iso.X_thresholds_], y=[float(v) for v in iso.y_thresholds_],
        models={k: models.get(k) for k in MODEL_KEYS + optional_models([measure])},
        data=data, n=int(u.size),
        accuracy=float(c.mean()), auroc=auroc, judge=dict(judge or {}),
        settings={k: (settings or {}).get(k) for k in SETTING_KEYS} if settings else {},
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def chance_of(result: Any, calibration: "Calibration | str | pathlib.Path") -> float:
    """P(correct) of ``result`` (an :class:`~mars_demo.result.AnalysisResult` or its JSON)
    under ``calibration`` (a :class:`Calibration` or the path of its JSON file). Raises
    :class:`CalibrationError` for a result of other models or an unreadable file."""
    if not isinstance(calibration, Calibration):
        calibration = load(calibration)
    return calibration.chance(result)


# --- held-out quality -------------------------------------------------------------------------


def check_classes(correct: Sequence[bool], folds: int = CV_FOLDS) -> None:
    """Raise :class:`TooFewAnswers`, with the reason, unless both classes have ``folds``
    answers or more (one class missing: nothing to fit; fewer: no held-out check)."""
    c = np.asarray(correct, dtype=bool)
    right, n = int(c.sum()), int(c.size)
    wrong = n - right
    if right == 0 or wrong == 0:
        raise TooFewAnswers(
            f"every one of the {n} answers is {'wrong' if right == 0 else 'correct'}: a chance "
            "of being right cannot be fit on one class")
    if min(right, wrong) < folds:
        few, which = (right, "correct") if right < wrong else (wrong, "wrong")
        raise TooFewAnswers(
            f"only {few} of the {n} answers {'is' if few == 1 else 'are'} {which}: at least "
            f"{folds} of each are needed to fit the calibration and check it by {folds}-fold "
            "cross-validation")


def _isotonic():
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(increasing=False, y_min=0.0, y_max=1.0, out_of_bounds="clip")


def held_out_chances(uncertainty: Sequence[float], correct: Sequence[bool], *,
                     folds: int = CV_FOLDS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(each answer's chance from an isotonic fit on the other folds, each answer's chance
    from the accuracy of the other folds), over stratified shuffled folds."""
    from sklearn.model_selection import StratifiedKFold

    u = np.asarray(uncertainty, dtype=float)
    c = np.asarray(correct, dtype=bool)
    chance, constant = np.empty(u.size), np.empty(u.size)
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(u, c):
        chance[test] = _isotonic().fit(u[train], c[train].astype(float)).predict(u[test])
        constant[test] = c[train].mean()
    return chance, constant


def reliability(chance: Sequence[float], correct: Sequence[bool],
                bins: int = ECE_BINS) -> tuple[float, list[dict[str, Any]]]:
    """(expected calibration error, the non-empty bins): equal-width bins of the chance (the
    first one closed, the others (low, high], as ``calibration_curve``), each with its count,
    mean chance and share of correct answers; ECE = sum over bins of n_bin / n *
    |share correct - mean chance|."""
    p = np.asarray(chance, dtype=float)
    c = np.asarray(correct, dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    ids = np.searchsorted(edges[1:-1], p)
    table, ece = [], 0.0
    for b in range(bins):
        inside = ids == b
        k = int(inside.sum())
        if not k:
            continue
        mean_chance, share = float(p[inside].mean()), float(c[inside].mean())
        ece += k / p.size * abs(share - mean_chance)
        table.append({"low": float(edges[b]), "high": float(edges[b + 1]), "n": k,
                      "mean_chance": mean_chance, "share_correct": share})
    return float(ece), table


def cross_validate(uncertainty: Sequence[float], correct: Sequence[bool], *,
                   folds: int = CV_FOLDS, bins: int = ECE_BINS, seed: int = 0) -> dict[str, Any]:
    """Held-out quality of the isotonic calibration (see the module docstring): ``folds``,
    ``brier``, ``brier_constant`` (the accuracy of the other folds as every answer's chance:
    the score to beat), ``ece`` and ``bins``. Raises :class:`TooFewAnswers` first when
    :func:`check_classes` does."""
    from sklearn.metrics import brier_score_loss

    check_classes(correct, folds)
    c = np.asarray(correct, dtype=bool)
    chance, constant = held_out_chances(uncertainty, c, folds=folds, seed=seed)
    ece, table = reliability(chance, c, bins)
    return {"folds": folds, "seed": seed,
            "brier": float(brier_score_loss(c.astype(int), chance)),
            "brier_constant": float(brier_score_loss(c.astype(int), constant)),
            "ece": ece, "bins": table}


def reliability_figure(quality: dict[str, Any], title: str) -> Any:
    """The reliability diagram of :func:`cross_validate`'s bins (plotly): share correct
    against mean chance per bin, marker area by the bin's count, and the diagonal."""
    import plotly.graph_objects as go

    bins = quality["bins"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                             line=dict(color="#bbbbbb", dash="dot")))
    biggest = max((b["n"] for b in bins), default=1)
    fig.add_trace(go.Scatter(
        x=[b["mean_chance"] for b in bins], y=[b["share_correct"] for b in bins],
        mode="lines+markers", name="held-out chances", line=dict(color="#d62728"),
        marker=dict(size=[8 + 22 * (b["n"] / biggest) ** 0.5 for b in bins]),
        text=[f"{b['n']} answers" for b in bins],
        hovertemplate="mean chance %{x:.2f}, share correct %{y:.2f}<br>%{text}<extra></extra>"))
    fig.update_xaxes(title_text="chance of being right (held out)", range=[0, 1])
    fig.update_yaxes(title_text="share of answers that were right", range=[0, 1.02])
    fig.update_layout(title=f"{title}: Brier {quality['brier']:.3f}, ECE {quality['ece']:.3f}",
                      width=600, height=500, template="plotly_white")
    return fig


def calibrate(run_dir: str | pathlib.Path, measure: str = "semantic_entropy",
              scoring: str | None = "mars", out: str | pathlib.Path | None = None, *,
              plots: bool = True) -> pathlib.Path:
    """Fit the isotonic calibration of one uncertainty of a finished run and check it by
    cross-validation: ``measure`` is a measure or any method id the run's records hold
    (``methods``), ``scoring`` its variant (length_normalized, mars, or value for a method
    that reads no sequence score; None: mars where the row has it, else value). Writes
    ``out`` (default RUN_DIR/calibration.json), adds the held-out Brier score, calibration
    error and reliability diagram to the run's report, and returns the calibration's path.
    Raises :class:`~.runs.RunError` for a run that is not finished or unreadable, or that has
    no such uncertainty (naming the ones it has), :class:`TooFewAnswers` (with the reason) when
    one class is missing or too rare."""
    from . import methods_table
    from . import metrics as metric_math
    from .report import method_label, save_report, write_figures
    from .runs import RunError, RunFileError, read_run

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
    quality = cross_validate(values, correct, seed=run.manifest.seed)
    try:
        auroc = metric_math.auroc(values, correct)
    except metric_math.UndefinedMetric:
        auroc = None
    cal = fit(values, correct, measure=measure, scoring=scoring,
                          models=run.report.models, data=run.report.data, auroc=auroc,
                          judge=run.report.judge,
                          settings=run.records[0].analysis_settings)
    cal.held_out = quality
    path = cal.save(out or run.path / "calibration.json")
    report = run.report
    section = {"measure": measure, "scoring": scoring, "file": path.name, **quality,
               "plots": []}
    if plots:
        files, warnings = write_figures(
            {"reliability": reliability_figure(quality, method_label(measure, scoring))},
            run.path)
        section["plots"] = files
        report.warnings = list(dict.fromkeys([*report.warnings, *warnings]))
    report.calibration = section
    save_report(run.path, report)
    return path
