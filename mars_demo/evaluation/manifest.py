"""``run.json``: what a run is, as a typed :class:`Manifest` (``to_dict`` / ``from_dict``).

A run started again in the same RUN_DIR must be the same run (:meth:`Manifest.differences`
names what is not), and the shares of one run merged by ``evaluate merge`` must be shares of
the same run (:meth:`Manifest.run_key`). A few fields are for the record only and may differ
(:data:`RECORD_ONLY`): how many processes made it, which folders it was merged from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import RunFileError, count_of, json_object, optional_count, text_list

RUN_VERSION = 2  # 2: each batch's samples drawn with its own seed (:func:`.shares.batch_seed`)
#: may differ between starts of one run and between the shares of one run (and
#: ``batch_questions`` for a run that is not a share: its batch size may change between starts)
RECORD_ONLY = ("processes", "merged_from")


@dataclass
class Manifest:
    """A run: its ``data`` (and the data's fingerprint, its warnings and unusable lines),
    ``limit``, ``seed``, the number of selected ``questions``, the ``judge``
    (:meth:`~.judges.base.Judge.describe`), the ``settings``
    (:meth:`~mars_demo.settings.Settings.to_dict`, without the server timeout), its question
    batch size (``batch_questions``: a batch's samples share their random draws), and, for a
    share made with ``--shard K/N``, ``shard`` (K, N) and ``share_questions`` (how many
    questions the share holds). ``processes``: how many processes the last start ran;
    ``merged_from``: the shares it was merged from; ``rejudged_from``: the run it re-judged."""

    data: str
    data_fingerprint: str | None
    limit: int | None
    seed: int
    questions: int
    judge: dict[str, Any]
    settings: dict[str, Any]
    batch_questions: int | None = None
    shard: tuple[int, int] | None = None
    share_questions: int | None = None
    data_warnings: list[str] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)
    processes: int | None = None
    merged_from: list[str] | None = None
    rejudged_from: dict[str, Any] | None = None
    version: int = RUN_VERSION

    @property
    def expected(self) -> int:
        """The questions this folder should hold: its share's, or the run's."""
        return self.questions if self.share_questions is None else self.share_questions

    def to_dict(self) -> dict[str, Any]:
        out = {"version": self.version, "data": self.data,
               "data_fingerprint": self.data_fingerprint, "limit": self.limit,
               "seed": self.seed, "questions": self.questions, "judge": self.judge,
               "settings": self.settings, "batch_questions": self.batch_questions,
               "shard": None if self.shard is None else list(self.shard),
               "share_questions": self.share_questions, "data_warnings": self.data_warnings,
               "skipped_lines": self.skipped_lines, "processes": self.processes}
        if self.merged_from is not None:
            out["merged_from"] = self.merged_from
        if self.rejudged_from is not None:
            out["rejudged_from"] = self.rejudged_from
        return out

    @classmethod
    def from_dict(cls, raw: Any, where: str = "run.json") -> "Manifest":
        """A run.json, checked (one made before a field existed gets its default)."""
        if not isinstance(raw, dict) or not isinstance(raw.get("data"), str):
            raise RunFileError(f"{where} is not a run's manifest")
        shard = raw.get("shard")
        if shard is not None:
            if (not isinstance(shard, list) or len(shard) != 2
                    or not 1 <= count_of(shard[0], f"{where}: shard") <= count_of(
                        shard[1], f"{where}: shard")):
                raise RunFileError(f"{where}: shard is not [K, N] with 1 <= K <= N")
            shard = (shard[0], shard[1])
        merged = raw.get("merged_from")
        seed = raw.get("seed")
        fingerprint = raw.get("data_fingerprint")
        return cls(
            data=raw["data"],
            data_fingerprint=fingerprint if isinstance(fingerprint, str) else None,
            limit=optional_count(raw.get("limit"), f"{where}: limit"),
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else 0,
            questions=count_of(raw.get("questions", 0), f"{where}: questions"),
            judge=json_object(raw.get("judge"), f"{where}: judge") or {},
            settings=json_object(raw.get("settings"), f"{where}: settings") or {},
            batch_questions=optional_count(raw.get("batch_questions"),
                                           f"{where}: batch_questions"),
            shard=shard,
            share_questions=optional_count(raw.get("share_questions"),
                                           f"{where}: share_questions"),
            data_warnings=text_list(raw.get("data_warnings"), f"{where}: data_warnings"),
            skipped_lines=text_list(raw.get("skipped_lines"), f"{where}: skipped_lines"),
            processes=optional_count(raw.get("processes"), f"{where}: processes"),
            merged_from=None if merged is None else text_list(merged, f"{where}: merged_from"),
            rejudged_from=json_object(raw.get("rejudged_from"), f"{where}: rejudged_from"),
            version=count_of(raw.get("version", 1), f"{where}: version"))

    def _identity(self) -> dict[str, Any]:
        out = self.to_dict()
        for key in RECORD_ONLY:
            out.pop(key, None)
        if self.shard is None:  # a share is made of its batches: its batch size stays
            out.pop("batch_questions")
        return out

    def run_key(self) -> dict[str, Any]:
        """What every share of one run has in common: its identity without the share's own
        place (the number of shares stays)."""
        out = self._identity()
        out["shard"] = None if self.shard is None else self.shard[1]
        out.pop("share_questions")
        return out

    def differences(self, other: "Manifest", mine: str = "in the run",
                    theirs: str = "now", shares: bool = False) -> list[str]:
        """What differs between this run and ``other`` ("seed: 3 in the run, 4 now"; a
        setting by its own name), the record-only fields aside; with ``shares``, the share
        itself aside too (:meth:`run_key`)."""
        have, want = ((self.run_key(), other.run_key()) if shares
                      else (self._identity(), other._identity()))
        diffs = []
        for key in dict.fromkeys([*have, *want]):
            a, b = have.get(key), want.get(key)
            if key == "settings" and isinstance(a, dict) and isinstance(b, dict):
                diffs += [f"{k}: {a.get(k)!r} {mine}, {b.get(k)!r} {theirs}"
                          for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
            elif a != b:
                diffs.append(f"{key}: {a!r} {mine}, {b!r} {theirs}")
        return diffs
