"""The verdict under the answer (mars_demo/verdict.py) on answer sets whose agreement is known."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from ui_helpers import make_answer, make_result

from mars_demo import verdict as v


def answers(greedy: str, samples: list[tuple[str, int, float]], greedy_logprob: float = -0.1):
    """A result whose greedy answer is ``greedy`` (one token of log p ``greedy_logprob``) and
    whose samples are (text, cluster, log p of its one token)."""
    base = make_result()
    return dataclasses.replace(
        base,
        greedy=make_answer([greedy], [greedy_logprob], [([0], 1.0)]),
        samples=[make_answer([text], [lp], [([0], 1.0)]) for text, _, lp in samples],
        cluster_ids=[cluster for _, cluster, _ in samples],
    )


class Chance:
    """A calibration that gives every answer it covers the same ``chance`` (``data``: where it
    was measured); ``refuse``: the error it raises for an answer it does not cover."""

    def __init__(self, chance, data="facts.jsonl", n=40, refuse=None):
        self.chance, self.data, self.n, self.refuse = chance, data, n, refuse

    def estimate(self, result):
        if self.refuse is not None:
            raise self.refuse
        return {"chance_correct": self.chance, "data": self.data, "n": self.n}

    def describe(self):
        return f"a calibration on {self.data}"


class Run:
    """A reference run: how answers at each level fared (``levels``) and how an answer was
    made otherwise (``unlike``)."""

    def __init__(self, levels, unlike=()):
        self.levels, self.unlike = levels, list(unlike)

    def differences(self, result):
        return self.unlike


ALL_MARS = [("Mars", 0, -0.1), ("Mars.", 0, -0.2), ("It is Mars", 0, -0.5), ("mars", 0, -0.3),
            ("Mars", 0, -0.1)]
SPLIT = [("Mars", 0, -0.1), ("Jupiter", 1, -0.9), ("Venus", 2, -1.2), ("Saturn", 3, -1.5),
         ("Jupiter", 1, -1.0)]


def test_all_samples_one_meaning_is_consistent():
    found = v.evidence(answers("Mars", ALL_MARS))
    assert found == v.Evidence(agreeing=5, samples=5, meanings=1, scorings_agree=True,
                               sureness=pytest.approx(math.exp(-0.1)), clusters=(0,),
                               matched=(0, 1, 3, 4), members=(0, 1, 2, 3, 4))
    verdict = v.judge(found)
    assert verdict.level == "consistent" and verdict.badge == "Consistent"
    # the line itself says that agreement is not correctness, and its tone is not trust
    assert verdict.text == (
        "Consistent: By the NLI model, all 5 other tries mean the same as this answer: the "
        "model gives it every time. It was sure "
        "of the words that matter: it gave them a 90% chance on average. That does not show it "
        "is right: a model "
        "can repeat a wrong answer.")
    assert verdict.tone == "neutral"
    assert verdict.chance is None and "likely right" not in verdict.text  # no calibration


def test_split_meanings_are_unsure_and_say_how_many():
    verdict = v.verdict(answers("Mars", SPLIT))
    assert verdict.evidence == v.Evidence(agreeing=1, samples=5, meanings=4, scorings_agree=True,
                                          sureness=pytest.approx(math.exp(-0.1)),
                                          clusters=(0,), matched=(0,), members=(0,))
    assert verdict.level == "unsure"
    assert verdict.text == (
        "Unsure: By the NLI model, the 5 other tries give 4 different answers; 1 of them means "
        "the same as this one. It was "
        "sure of the words that matter: it gave them a 90% chance on average. Do not rely on it "
        "without checking it.")
    assert verdict.tone == "caution"


def test_a_majority_is_mostly_consistent_and_names_the_other_meanings():
    samples = [("Mars", 0, -0.1), ("Mars", 0, -0.2), ("Mars", 0, -0.3), ("Venus", 1, -2.0),
               ("Jupiter", 2, -2.5)]
    verdict = v.verdict(answers("Mars", samples))
    assert verdict.level == "mostly"
    assert verdict.sentence.startswith(
        "By the NLI model, 3 of 5 other tries mean the same as this answer; it reads the other "
        "2 as saying something else.")
    assert verdict.sentence.endswith("That does not show it is right; check it before you rely "
                                     "on it.")
    assert verdict.tone == "neutral"


def test_scorings_that_favour_different_meanings_make_a_majority_unsure():
    """Three of five samples share the answer's meaning ("The Mars": an unlikely "The", then a
    likely, important "Mars"), two say "Venus". Length-normalized scoring counts the unlikely
    "The" in full, and gives "Venus" the most mass; MARS weighs "Mars" most, and gives the
    answer's meaning the most mass."""
    base = make_result()
    the_mars = make_answer(["The", " Mars"], [-3.0, -0.01], [([1], 1.0)])
    venus = make_answer(["Venus"], [-0.8], [([0], 1.0)])
    result = dataclasses.replace(base, greedy=the_mars, samples=[the_mars] * 3 + [venus] * 2,
                                 cluster_ids=[0, 0, 0, 1, 1])
    ln, mars = result.cluster_masses("length_normalized"), result.cluster_masses("mars")
    assert ln[1] > ln[0] and mars[0] > mars[1]  # the premise: each favours another meaning
    verdict = v.verdict(result)
    assert verdict.evidence == v.Evidence(agreeing=3, samples=5, meanings=2,
                                          scorings_agree=False,
                                          sureness=pytest.approx(math.exp(the_mars.scores.mars)),
                                          clusters=(0,), matched=(0, 1, 2), members=(0, 1, 2))
    assert verdict.level == "unsure"
    assert verdict.sentence.startswith(
        "By the NLI model, 3 of 5 other tries mean the same as this answer; it reads the other "
        "2 as saying something else. Its "
        "two scorings disagree on which of its answers is the most likely.")


def test_an_answer_no_sample_shares_words_with_is_placed_nowhere():
    verdict = v.verdict(answers("The fourth planet", ALL_MARS))
    assert verdict.evidence.agreeing is None and verdict.level == "unsure"
    assert "By the NLI model, none of the 5 other tries means the same as this answer (they " \
        "give 1 different answer)." in verdict.text
    assert verdict.evidence.clusters == () and verdict.evidence.members == ()


def with_greedy_nli(result, probabilities, greedy=None, answers=None):
    """``result`` holding the NLI verdicts of its greedy answer against each sample, as the NLI
    stage saves them for semantic density: (entailment, neutral, contradiction) per sample."""
    result.method_inputs = {"greedy_nli": {
        "nli_model": "nli", "question": result.question,
        "greedy": result.greedy.text if greedy is None else greedy,
        "answers": [s.text for s in result.samples] if answers is None else answers,
        "probabilities": probabilities, "pairs": len(probabilities)}}
    return result


ENTAILS, NEUTRAL, CONTRADICTS = [0.9, 0.08, 0.02], [0.2, 0.7, 0.1], [0.05, 0.15, 0.8]


def test_an_answer_in_other_words_is_placed_by_the_samples_it_entails():
    # "The fourth planet" shares no words with a sample; the NLI model finds it entails three of
    # them, all in cluster 0: the answer is in cluster 0, with all 5 samples
    result = with_greedy_nli(answers("The fourth planet", ALL_MARS),
                             [ENTAILS, ENTAILS, NEUTRAL, ENTAILS, NEUTRAL])
    found = v.evidence(result)
    assert found == v.Evidence(agreeing=5, samples=5, meanings=1, scorings_agree=True,
                               placed_by="nli", sureness=pytest.approx(math.exp(-0.1)),
                               clusters=(0,), matched=(0, 1, 3), members=(0, 1, 2, 3, 4))
    assert v.judge(found).sentence.startswith(
        "By the NLI model, all 5 other tries mean the same as this answer, in other words.")
    # split: it entails the two "Jupiter"s (cluster 1) and contradicts "Mars" (cluster 0)
    split = with_greedy_nli(answers("The largest planet", SPLIT),
                            [CONTRADICTS, ENTAILS, NEUTRAL, NEUTRAL, ENTAILS])
    assert v.evidence(split).agreeing == 2 and v.evidence(split).placed_by == "nli"
    assert v.verdict(split).level == "unsure"
    # a tie between clusters: the cluster first seen among the entailed samples
    tie = with_greedy_nli(answers("A planet", SPLIT),
                          [NEUTRAL, ENTAILS, ENTAILS, NEUTRAL, NEUTRAL])
    assert v.evidence(tie).agreeing == 2  # Jupiter's cluster (samples 1 and 4), not Venus'


def test_the_same_words_win_over_the_nli_verdicts():
    result = with_greedy_nli(answers("Mars", SPLIT), [CONTRADICTS, ENTAILS, ENTAILS, ENTAILS,
                                                      ENTAILS])
    found = v.evidence(result)
    assert (found.agreeing, found.placed_by) == (1, "words")


@pytest.mark.parametrize("change", [
    {"probabilities": [NEUTRAL] * 5},                    # it entails no sample
    {"probabilities": [ENTAILS] * 5, "greedy": "Mars"},  # verdicts of another answer
    {"probabilities": [ENTAILS] * 5, "answers": ["Mars"] * 5},  # of other samples
    {"probabilities": [ENTAILS] * 4},                    # not one per sample
])
def test_nli_verdicts_that_place_nothing_or_are_not_these_answers_place_it_nowhere(change):
    result = with_greedy_nli(answers("The fourth planet", ALL_MARS), **change)
    found = v.evidence(result)
    assert (found.agreeing, found.placed_by) == (None, "")
    assert "none of the 5 other tries means the same as this answer" in v.judge(found).text


def test_too_few_samples_say_so():
    verdict = v.verdict(answers("Mars", ALL_MARS[:2]))
    assert verdict.level == "few" and verdict.badge == "Too few tries"
    assert verdict.sentence.startswith(
        "Only 2 other tries: too few to tell whether the model keeps to this answer.")
    assert verdict.sentence.endswith("Ask again with more sampled answers (Settings) for a "
                                     "verdict.")
    one = v.verdict(answers("Mars", ALL_MARS[:1]))
    assert one.sentence.startswith("Only 1 other try: too few")


@pytest.mark.parametrize("samples", [ALL_MARS, SPLIT])
def test_a_calibration_adds_its_chance_and_where_it_was_made(samples):
    plain = v.verdict(answers("Mars", samples))
    # the data set is named by its file's name, never its folders
    calibrated = v.verdict(answers("Mars", samples), Chance(0.823, "/srv/data/facts.jsonl"))
    assert calibrated.level == plain.level
    # the chance replaces the caveat that agreement is not correctness
    assert plain.sentence == f"{calibrated.sentence} {v.texts.VERDICT_ADVICE[plain.level]}"
    assert calibrated.calibrated == "About 82% likely right (calibrated on facts.jsonl, 40 questions)."
    assert calibrated.text == f"{calibrated.badge}: {calibrated.sentence} {calibrated.calibrated}"
    assert calibrated.calibration["data"] == "/srv/data/facts.jsonl"  # where it was measured


def test_a_calibration_that_does_not_cover_the_answer_says_why_and_gives_no_chance():
    class OtherSettings(ValueError):
        other = "settings"

    refused = v.verdict(answers("Mars", ALL_MARS),
                        Chance(0.9, refuse=OtherSettings("samples 5 here, 10 there")))
    assert refused.chance is None and refused.calibrated == "" and refused.tone == "neutral"
    assert refused.calibration == {"chance_correct": None, "reason": "samples 5 here, 10 there",
                                   "other": "settings", "source": "a calibration on facts.jsonl"}
    # the caveat stays: without a chance, agreement is still not correctness
    assert refused.sentence.endswith(v.texts.VERDICT_ADVICE["consistent"])
    models = v.verdict(answers("Mars", ALL_MARS), Chance(0.9, refuse=KeyError("llm")))
    assert models.calibration["other"] == "models"


@pytest.mark.parametrize("calibration", [None, Chance(0.7)])
def test_the_verdict_is_json_and_reads_back_the_same(calibration):
    made = v.verdict(answers("Mars", SPLIT), calibration)
    data = made.to_dict()
    assert data["text"] == made.text and data["tone"] == made.tone
    assert json.loads(json.dumps(data)) == data
    assert v.Verdict.from_dict(data) == made
    with pytest.raises(ValueError, match="level must be one of"):
        v.Verdict.from_dict({**data, "level": "sure"})


def test_same_words_sets_aside_case_spaces_and_end_punctuation_only():
    assert v.same_words("Mars.", "  mars ") and v.same_words("It is  Mars!", "it is mars")
    assert not v.same_words("Mars", "It is Mars") and not v.same_words("", "")
    assert not v.same_words("Mars", "Marseille")


@pytest.mark.parametrize("chance,tone", [(None, "neutral"), (0.93, "likely"), (0.8, "likely"),
                                         (0.62, "maybe"), (0.2, "unlikely")])
def test_only_a_calibrated_chance_gets_a_tone_of_trust(chance, tone):
    """Without a calibration, five agreeing samples read neutral, never as a "yes"; the tone
    follows the calibrated chance where there is one, whatever the agreement."""
    calibration = Chance(chance) if chance is not None else None
    assert v.verdict(answers("Mars", ALL_MARS), calibration).tone == tone
    if chance is not None:
        assert v.verdict(answers("Mars", SPLIT), calibration).tone == tone


def test_the_words_differ_where_the_evidence_differs():
    """Two answers the model repeats every time: one whose words it was sure of, one it made up
    (improbable words), and one matched by meaning only: three sentences."""
    known = v.verdict(answers("Canberra", [("Canberra", 0, -0.1)] * 5, greedy_logprob=-0.05))
    made_up = v.verdict(answers("The Burj Khalifa is the world",
                                [("The Burj Khalifa is the world", 0, -2.0)] * 5,
                                greedy_logprob=-1.6))
    assert known.level == made_up.level == "consistent"
    assert ("It was sure of the words that matter: it gave them a 95% chance on average."
            in known.sentence)
    assert ("It was unsure of the words that matter: it gave them a 20% chance on average."
            in made_up.sentence)
    fairly = v.verdict(answers("Mars", ALL_MARS, greedy_logprob=-0.4))
    assert ("It was fairly sure of the words that matter: it gave them a 67% chance on average."
            in fairly.sentence)
    # a chance that is not none is never said as 0%
    tiny = v.verdict(answers("Mars", ALL_MARS, greedy_logprob=-6.0))
    assert "it gave them a <1% chance on average." in tiny.sentence, tiny.sentence
    sentences = {known.sentence, made_up.sentence, fairly.sentence}
    assert len(sentences) == 3
    for verdict in (known, made_up, fairly):  # plain words: no cluster talk in the line
        assert "cluster" not in verdict.text and "follows from" not in verdict.text


class Served(Run):
    """A reference run as the page serves it: its name, its judge and whether it is lenient."""

    def __init__(self, levels, judge="contains", lenient=False, unlike=()):
        super().__init__(levels, unlike)
        self.name, self.judge, self.lenient = "visit-run", judge, lenient


def record(level, right, n):
    from mars_demo.core.intervals import wilson

    return v.LevelRecord(level, right, n, *wilson(right, n), "visit-run")


def test_a_run_whose_answers_share_one_level_cannot_tell_the_levels_apart():
    """Every answer of the run was "unsure" and 10 of 12 were right: 83% is the run's accuracy,
    and the level told nothing there; the record says so instead of "right 83% of the time"
    under "Do not rely on it"."""
    verdict = v.verdict(answers("Mars", SPLIT), reference=Served({"unsure": record("unsure", 10,
                                                                                   12)}))
    assert verdict.level == "unsure"
    assert verdict.record == (
        "The evaluation run visit-run (judged by contains) cannot tell this level from the "
        "others: it holds 12 answers the page called unsure and 0 at other levels, and at least "
        "10 of each are needed.")
    assert "83%" not in verdict.text and "right" not in verdict.record
    # an answer at a level the run never reached gets the same line, never a share
    consistent = v.verdict(answers("Mars", ALL_MARS),
                           reference=Served({"unsure": record("unsure", 10, 12)}))
    assert consistent.record.startswith("The evaluation run visit-run (judged by contains) "
                                        "cannot tell this level from the others: it holds 0 "
                                        "answers the page called consistent and 12")


def test_a_level_whose_record_overlaps_the_others_is_not_told_apart():
    levels = {"consistent": record("consistent", 14, 20), "unsure": record("unsure", 10, 20)}
    verdict = v.verdict(answers("Mars", ALL_MARS), reference=Served(levels))
    assert verdict.record == (
        "The evaluation run visit-run (judged by contains) cannot tell this level from the "
        "others: its answers the page called consistent were right neither more nor less often "
        "than the rest beyond chance (their 95% intervals overlap).")


def test_a_level_the_run_tells_apart_is_said_beside_the_runs_accuracy():
    levels = {"consistent": record("consistent", 38, 40), "mostly": record("mostly", 6, 10),
              "unsure": record("unsure", 8, 30)}
    verdict = v.verdict(answers("Mars", ALL_MARS), reference=Served(levels))
    assert verdict.record == (
        "On the evaluation run visit-run (judged by contains), 65% of its 80 answers were "
        "right; of those the page called consistent, 95% (n = 40; 95% interval 83% to 99%).")
    unsure = v.verdict(answers("Mars", SPLIT), reference=Served(levels))
    assert unsure.record.startswith("On the evaluation run visit-run (judged by contains), 65% "
                                    "of its 80 answers were right; of those the page called "
                                    "unsure, 27% (n = 30;")
    # a lenient judge is named with its caveat; a run made otherwise is said so
    lenient = v.verdict(answers("Mars", ALL_MARS),
                        reference=Served(levels, "rouge ≥ 0.3", True, ["other models"]))
    assert "(judged by rouge ≥ 0.3)" in lenient.record
    assert v.texts.VERDICT_RUN_LENIENT.format(judge="rouge ≥ 0.3") in lenient.record
    assert lenient.record.endswith(v.texts.VERDICT_RECORD_OTHER.format(what="other models"))
    # a run that recorded no levels says nothing
    assert v.verdict(answers("Mars", ALL_MARS), reference=Served({})).record == ""


def test_the_judges_that_count_wrong_answers_right_are_lenient():
    from mars_demo.evaluation.judges import entries
    from mars_demo.evaluation.reference import lenient

    assert {name for name, e in entries().items() if e.lenient} == {"f1", "rouge"}
    assert lenient("rouge") and not lenient("contains") and not lenient("no-such-judge")
