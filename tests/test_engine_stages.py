"""The scoring stages' seam: each stage declares what it reads and adds, the engine runs only the
stages that fill what is asked for, and the runner holds every stage to its declaration."""

from __future__ import annotations

import dataclasses
import doctest

import pytest

import mars_demo.engine.stages as stages
from mars_demo import errors, recipes
from mars_demo.answers import Answer, AnswerSet
from mars_demo.engine.job import INPUTS, RESULT_NEEDS, ScoringJob
from mars_demo.models import contract, prompts
from mars_demo.progress import STAGES
from mars_demo.recipes import resolve
from mars_demo.settings import Settings

FIELDS = {f.name for f in dataclasses.fields(ScoringJob)}


def names(planned) -> list[str]:
    return [stage.name for stage in planned]


def test_the_result_needs_every_stage_in_order():
    assert names(stages.plan(RESULT_NEEDS)) == [
        "importance", "alignment", "nli", "clustering", "uncertainty", "llm_pass", "similarity",
        "lars", "ccp", "embeddings", "methods"]


@pytest.mark.parametrize("wanted, expected", [
    (["phrasings"], ["importance"]),
    (["scored"], ["importance", "alignment"]),
    (["nli"], ["importance", "alignment", "nli"]),
    (["cluster_ids"], ["importance", "alignment", "nli", "clustering"]),
    (["scored", "phrasings"], ["importance", "alignment"]),
    (["question"], []),  # an input: nothing to compute
    (["methods"], ["importance", "alignment", "nli", "clustering", "llm_pass", "similarity",
                   "lars", "ccp", "embeddings", "methods"]),
    (["similarities"], ["importance", "alignment", "similarity"]),
    (["lars_outputs"], ["lars"]),  # from the answers themselves
    (["method_inputs"], ["llm_pass"]),  # from the answers themselves
])
def test_only_the_stages_a_field_needs_are_planned(wanted, expected):
    assert names(stages.plan(wanted)) == expected


def test_a_field_nobody_fills_is_refused():
    with pytest.raises(ValueError, match="no job field"):
        stages.plan(["entropy_of_everything"])
    with pytest.raises(ValueError, match="no stage fills"):
        stages.plan(["uncertainty"], stages.SCORING[2:])  # without importance and alignment


def test_every_declaration_names_job_fields_filled_before_they_are_read():
    filled = set(INPUTS)
    for stage in stages.SCORING:
        assert set(stage.reads) <= filled, (stage.name, set(stage.reads) - filled)
        assert set(stage.adds) <= FIELDS and not set(stage.adds) & filled, stage.name
        assert stage.progress is None or stage.progress in STAGES
        filled |= set(stage.adds)
    assert set(RESULT_NEEDS) <= filled


# --- the runner ----------------------------------------------------------------------------------


def answer(text: str) -> Answer:
    return Answer(text=text, token_ids=[1], token_texts=[text], spans=[(0, len(text))],
                  logprobs=[-0.5])


def job() -> ScoringJob:
    answers = AnswerSet(question="Red planet?", greedy=answer("Mars"), samples=[answer("Mars")])
    return ScoringJob(answers=answers, question="Red planet?", reuse=None,
                      logprob_source="given")


class Fills:
    """A stage that fills ``adds`` with ``value`` (or, ``lies``, fills nothing)."""

    def __init__(self, name, reads, adds, progress, value=None, lies=False):
        self.name, self.reads, self.adds, self.progress = name, reads, adds, progress
        self.timing, self.value, self.lies, self.ran = name, value, lies, 0

    def models(self, jobs, run):
        return ()

    def __call__(self, jobs, ctx):
        self.ran += 1
        if not self.lies:
            for j in jobs:
                for name in self.adds:
                    setattr(j, name, self.value)


def context():
    return stages.ScoringContext(resolve(Settings()))


def test_the_runner_reports_progress_per_stage_group_and_shares_the_seconds():
    first = Fills("one", ("answers",), ("phrasings",), "importance", value=[])
    quiet = Fills("two", ("phrasings",), ("cluster_ids",), None, value=[0])
    last = Fills("three", ("cluster_ids",), ("nli_model_id",), "nli", value="m")
    again = Fills("four", ("nli_model_id",), ("uncertainty",), "nli", value="u")
    seen, checks, jobs = [], [], [job(), job()]
    stages.run([first, quiet, last, again], jobs, context(),
               lambda stage, fraction: seen.append((stage, fraction)),
               lambda: checks.append(len(seen)))
    assert seen == [("importance", 0.0), ("importance", 1.0), ("nli", 0.0), ("nli", 1.0)]
    assert len(checks) == 4  # asked before every stage
    assert all(j.cluster_ids == [0] and j.uncertainty == "u" for j in jobs)
    assert set(jobs[0].timings) == {"one", "two", "three", "four"}
    assert jobs[0].timings == jobs[1].timings  # a batch's seconds shared equally


def test_a_cancel_check_stops_before_the_next_stage():
    first = Fills("one", ("answers",), ("phrasings",), "importance", value=[])
    second = Fills("two", ("phrasings",), ("cluster_ids",), "nli", value=[0])

    def check():
        if first.ran:
            raise errors.AnalysisCancelled("cancelled")

    with pytest.raises(errors.AnalysisCancelled):
        stages.run([first, second], [job()], context(), lambda *a: None, check)
    assert (first.ran, second.ran) == (1, 0)


def test_a_stage_that_breaks_its_declaration_fails_loudly():
    liar = Fills("liar", ("answers",), ("phrasings",), None, lies=True)
    with pytest.raises(RuntimeError, match="liar stage adds phrasings, which is not filled"):
        stages.run([liar], [job()], context(), lambda *a: None, lambda: None)
    early = Fills("early", ("scored",), ("cluster_ids",), None, value=[0])
    with pytest.raises(RuntimeError, match="early stage reads scored, which is not filled"):
        stages.run([early], [job()], context(), lambda *a: None, lambda: None)


@pytest.mark.parametrize("module", [errors, recipes, prompts, contract, stages])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
