"""What an optional model declares: :class:`OptionalModel`, one per model (or pass of a model)
that only some uncertainty methods run, beside its class; and :class:`ReadsAnswers`, what a
class does whose model reads each analysis' answers (the engine's stage for it is derived from
the declaration: :class:`mars_demo.engine.stages.optional.ModelStage`).

Pure Python: no torch or transformers here (a model's class imports them in its functions).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class OptionalModel:
    """One model (or a pass of one) that only some uncertainty methods run: loaded only when a
    method asked for needs it, so an analysis, a run or a page names it only then. Declared
    once, as ``SPEC`` beside its class; :data:`mars_demo.optional.OPTIONAL_MODELS` lists the
    declarations, and everything else is derived from them: the option and its flag
    (``--FIELD``, ``MARS_DEMO_FIELD``, ``--FIELD-name``), the :class:`~mars_demo.settings.Settings`
    field, the methods' need and the family file the registry reads, the scoring job's field and
    the analysis entry it is saved under, the model's loading, a public page's redaction, the
    banner and the evaluation view's line.
    """

    #: the Settings field (and recorded settings key, and flag) naming the model; for a pass of
    #: a model every analysis names already (``cls`` None), that model's field ("nli")
    field: str
    #: the need (mars_demo.methods NEEDS) of the methods that run it
    need: str
    #: its name for people
    label: str
    #: the analysis' ``method_inputs`` entry where what it computed is saved, what that entry
    #: holds, and the key inside it naming the model
    saved: str
    holds: str
    model_key: str
    #: the methods' family file (``mars_demo/methods/FAMILY.py``) holding the methods it serves
    family: str
    #: the scoring job's field (:class:`~mars_demo.engine.job.ScoringJob`) its stage fills
    output: str
    #: its class, whose ``from_pretrained(source, model_id)`` loads it; None: the pass runs a
    #: model every analysis names already (CCP's NLI of the alternatives): no flag, no loader,
    #: no banner line of its own
    cls: type | None = None
    #: its default id, its help and its label on the page (a model of its own)
    default: str | None = None
    help: str = ""
    page_label: str = ""
    #: the parts of its entry that only some of its methods read, ``(key, what it holds)``:
    #: each is also a need of those methods, so the model is sent only the parts' inputs that
    #: the asked methods read, and a saved entry without a part names what it lacks
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def own(self) -> bool:
        """Whether it is a model of its own (a Settings field, a flag, a loader, a line of the
        banner and of a run's models)."""
        return self.cls is not None

    @property
    def option(self) -> str:
        """The command-line option naming the model."""
        return "--" + self.field.replace("_", "-")


class ReadsAnswers(ABC):
    """A model that reads each analysis' question and answers (the greedy answer, then the
    samples) and says something of them that its methods read from the saved analysis: the
    engine runs it through one stage derived from its declaration, which saves
    ``{model_key: id, "question": ..., "answers": [texts], **what it said}`` and reuses an
    earlier analysis' entry where :meth:`same_reading` holds."""

    @abstractmethod
    def read(self, items: Sequence[tuple[str, list[Any]]]) -> list[tuple[dict, list[str]]]:
        """For each ``(question, answers)`` (:class:`~mars_demo.answers.Answer` objects, the
        greedy one first): what the model says of them (a JSON-able dict) and the warnings the
        user should read; the items may share batches."""

    @classmethod
    def same_reading(cls, entry: dict, question: str, answers: list[Any]) -> bool:
        """Whether an earlier entry of the same model, question and answer texts is what the
        model would say of ``answers`` now (read from the entry alone, before any model loads);
        True unless it read more than the texts (their log-probs, say)."""
        return True
