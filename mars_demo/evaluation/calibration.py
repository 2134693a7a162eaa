"""From an uncertainty to a chance of being right: isotonic regression, saved as JSON.

:func:`fit` learns a non-increasing map uncertainty -> P(correct) with scikit-learn's
``IsotonicRegression`` on an evaluation run's (uncertainty, correct) pairs. The JSON keeps the
fitted breakpoints, which measure and scoring it was fit on, the models that made and scored
the answers, the data set, n, the accuracy and the AUROC. :meth:`Calibration.predict` needs only
numpy: it interpolates linearly between the breakpoints and clips outside them, exactly as
``IsotonicRegression.predict`` with ``out_of_bounds="clip"`` does.

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

from . import MEASURES, SCORINGS

FORMAT = "mars-demo-calibration"
VERSION = 1
MODEL_KEYS = ("llm", "importance", "nli")
#: The settings an uncertainty's scale depends on (as an analysis records them in ``settings``):
#: an analysis made or scored with other values gets no chance from the calibration.
SETTING_KEYS = ("prompt", "samples", "temperature", "top_p", "max_new_tokens",
                "importance_method", "normalization", "softmax_temperature", "distribution",
                "cluster_rule", "recipe")


class CalibrationError(ValueError):
    """A calibration file that cannot be used (unreadable, or made for other models)."""


class OtherSettings(CalibrationError):
    """An analysis made or scored with other settings than the calibration's (same models)."""


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

    def predict(self, uncertainty: float | Sequence[float]) -> np.ndarray | float:
        """P(correct) for each uncertainty (a float for a float)."""
        u = np.asarray(uncertainty, dtype=float)
        p = np.interp(u, self.x, self.y) if len(self.x) > 1 else np.full(u.shape, self.y[0])
        return float(p) if np.ndim(uncertainty) == 0 else p

    def chance(self, result: Any) -> float:
        """P(correct) of an analysis (an :class:`~mars_demo.result.AnalysisResult` or its JSON)
        from its own ``uncertainty.<measure>.<scoring>``, after checking that it was made by
        this calibration's models and settings (its recorded ``settings``)."""
        data = result.to_dict() if hasattr(result, "to_dict") else result
        self.check(data.get("settings") or {})
        return float(self.predict(float(data["uncertainty"][self.measure][self.scoring])))

    def estimate(self, result: Any) -> dict[str, Any]:
        """:meth:`chance` with where it comes from, as JSON (the API's ``calibration`` field):
        ``chance_correct``, the ``uncertainty`` it was read from, ``measure``, ``scoring``,
        ``data``, ``n``, ``accuracy``, ``auroc``, ``judge``, ``models`` and ``source`` (words).
        Raises :class:`CalibrationError` when ``result`` was made by other models or with
        other settings."""
        data = result.to_dict() if hasattr(result, "to_dict") else result
        chance = self.chance(data)
        return {"chance_correct": chance,
                "uncertainty": float(data["uncertainty"][self.measure][self.scoring]),
                "measure": self.measure, "scoring": self.scoring, "data": self.data,
                "n": self.n, "accuracy": self.accuracy, "auroc": self.auroc,
                "judge": dict(self.judge), "models": dict(self.models),
                "source": self.describe()}

    def describe(self) -> str:
        """Where the estimate comes from, in words, e.g. for the page."""
        auroc = "undefined" if self.auroc is None else f"{self.auroc:.3f}"
        return (f"isotonic calibration of {self.measure} ({self.scoring}) on {self.data}, "
                f"n = {self.n}, accuracy {self.accuracy:.1%}, AUROC {auroc}")

    def check_models(self, models: dict[str, Any]) -> None:
        """Raise :class:`CalibrationError` unless ``models`` (llm, importance, nli ids) are the
        ones this calibration was made with."""
        wrong = [f"{k}: calibrated with {self.models.get(k)!r}, loaded {models.get(k)!r}"
                 for k in MODEL_KEYS if self.models.get(k) != models.get(k)]
        if wrong:
            raise CalibrationError(
                "this calibration was made for other models (" + "; ".join(wrong) + "); "
                "calibrate a run of the loaded models, or load the calibrated ones"
            )

    def check(self, settings: dict[str, Any]) -> None:
        """Raise :class:`CalibrationError` unless an analysis's recorded ``settings`` have this
        calibration's models (:meth:`check_models`) and its :data:`SETTING_KEYS` values (those
        the calibration recorded)."""
        self.check_models({k: settings.get(k) for k in MODEL_KEYS})
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
                "created": self.created}

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
                                if k in SETTING_KEYS})
        except (KeyError, TypeError, ValueError) as err:
            raise CalibrationError(f"the calibration file is incomplete or malformed ({err})") from err
        if (out.measure not in MEASURES or out.scoring not in SCORINGS or not x
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
    """Fit the non-increasing isotonic map uncertainty -> P(correct). ``settings``: the
    answers' recorded settings (an analysis's ``settings``); their :data:`SETTING_KEYS` are
    kept and checked by :meth:`Calibration.check`."""
    from sklearn.isotonic import IsotonicRegression

    if measure not in MEASURES or scoring not in SCORINGS:
        raise ValueError(f"measure must be one of {MEASURES} and scoring one of {SCORINGS}")
    u = np.asarray(uncertainty, dtype=float)
    c = np.asarray(correct, dtype=float)
    if u.size < 2:
        raise ValueError(f"a calibration needs at least 2 answers; the run has {u.size}")
    iso = IsotonicRegression(increasing=False, y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(u, c)
    return Calibration(
        measure=measure, scoring=scoring,
        x=[float(v) for v in iso.X_thresholds_], y=[float(v) for v in iso.y_thresholds_],
        models={k: models.get(k) for k in MODEL_KEYS}, data=data, n=int(u.size),
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
