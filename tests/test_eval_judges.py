"""Judges: the contains judge that reads sentences, SQuAD exact match and F1, ROUGE-L, the NLI
judge (a fake NLI model for its pairs, the factory's tiny models for its loading, the trained
tiny NLI model for meaningful verdicts), and the LLM judge's request/response shape.

The LLM judge is tested against a small local fake OpenAI-compatible server (a thread running
``http.server``) for the shape of its requests and replies only. A real server (llama.cpp) can be
plugged into the same tests through ``judge_server_url`` below.
"""

from __future__ import annotations

import json
import pathlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mars_demo.evaluation import judges
from mars_demo.evaluation.judges.llm import parse_verdict
from mars_demo.evaluation.judges.nli import NLIJudge

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, expected", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an   apple,  a pear ", "apple pear"),
    ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
    ("A.D. 1066", "ad 1066"),
])
def test_squad_normalization(text, expected):
    assert judges.normalize_answer(text) == expected


def test_exact_match_against_any_reference():
    judge = judges.make_judge("em")
    assert judge("q", "the Pacific Ocean.", ["Atlantic", "Pacific ocean"]).correct
    assert not judge("q", "Pacific", ["Pacific Ocean"]).correct
    assert judge.describe() == {"name": "em", "threshold": None}


def test_token_f1_by_hand():
    # pred {canberra, city}, ref {canberra}: P = 1/2, R = 1, F1 = 2/3
    assert judges.token_f1("Canberra city", "Canberra") == pytest.approx(2 / 3)
    assert judges.token_f1("the", "a") == 1.0  # both empty after normalization
    assert judges.token_f1("Paris", "London") == 0.0
    judge = judges.make_judge("f1", 0.6)
    v = judge("q", "Canberra city", ["Sydney", "Canberra"])
    assert v.correct and v.score == pytest.approx(2 / 3)
    assert not judges.make_judge("f1", 0.7)("q", "Canberra city", ["Canberra"]).correct
    assert judge.describe() == {"name": "f1", "threshold": 0.6}


def lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def rouge_l_by_hand(pred: str, ref: str) -> float:
    p = re.sub(r"[^a-z0-9]+", " ", pred.lower()).split()
    r = re.sub(r"[^a-z0-9]+", " ", ref.lower()).split()
    n = lcs(p, r)
    if n == 0:
        return 0.0
    prec, rec = n / len(p), n / len(r)
    return 2 * prec * rec / (prec + rec)


@pytest.mark.parametrize("pred, ref", [
    ("It was painted by Vincent van Gogh", "Vincent van Gogh"),
    ("Leonardo da Vinci painted it", "da Vinci"),
    ("Mars", "Venus"),
])
def test_rouge_l_matches_an_lcs_by_hand(pred, ref):
    judge = judges.make_judge("rouge", 0.3)
    v = judge("q", pred, [ref])
    assert v.score == pytest.approx(rouge_l_by_hand(pred, ref))
    assert v.correct == (rouge_l_by_hand(pred, ref) >= 0.3)


def test_bad_thresholds_and_names_are_refused():
    with pytest.raises(ValueError, match="from 0 to 1"):
        judges.make_judge("f1", 1.5)
    with pytest.raises(ValueError, match="takes no threshold"):
        judges.make_judge("em", 0.5)
    with pytest.raises(ValueError, match="one of contains, em, f1, llm, nli, rouge"):
        judges.make_judge("bleu")
    with pytest.raises(ValueError, match="takes no threshold"):
        judges.make_judge("contains", 0.5)
    with pytest.raises(ValueError, match="needs the NLI model"):
        judges.make_judge("nli")
    with pytest.raises(ValueError, match="--judge-endpoint"):
        judges.make_judge("llm")


# ---- the contains judge -------------------------------------------------------------------------

CAPITAL = "What is the capital city of Australia?"


@pytest.mark.parametrize("answer, correct", [
    # whole words, in a sentence or alone
    ("Canberra", True), ("The capital city of Australia is Canberra.", True),
    ("CANBERRA!", True), ("Canberras", True),  # case, punctuation, a plural s
    ("Canberra's parliament", True),  # a possessive
    ("Sydney", False), ("The capital city of Australia is Sydney.", False),  # question's words
    ("Canberrae", False),  # not a whole word
    # denials: a negation before it in its clause, or a negated verb after it
    ("It is Canberra, not Sydney.", True), ("Not Canberra, it is Sydney.", False),
    ("It isn't Sydney; it's Canberra.", True), ("Canberra is not the capital.", False),
    ("I don't think it is Canberra.", False), ("No, it is Canberra.", True),
    ("Sydney rather than Canberra", False), ("Apart from Canberra, Sydney.", False),
    # hedges: committed guesses count, non-answers and several candidates do not
    ("I'm not sure, but I think it's Canberra.", True), ("Probably Canberra.", True),
    ("I am not sure whether it is Canberra.", False), ("I don't know.", False),
    ("Either Sydney or Canberra.", False), ("Canberra or maybe Sydney", False),
    # comparisons and orders
    ("Sydney is bigger than Canberra.", False), ("Sydney, followed by Canberra.", False),
    ("", False),
])
def test_contains_reads_sentences_denials_and_hedges(answer, correct):
    verdict = judges.make_judge("contains")(CAPITAL, answer, ["Canberra"])
    assert verdict.correct is correct, verdict.detail
    assert verdict.detail  # it says why


@pytest.mark.parametrize("question, answer, refs, correct", [
    # numbers in words and digits, years, thousands, ordinals, roman numerals
    ("How many continents are there?", "There are seven continents.", ["7"], True),
    ("How many continents are there?", "Seventeen", ["7"], False),
    ("How many continents are there?", "Six or seven.", ["7"], False),
    ("How many bones does an adult have?", "Two hundred and six", ["206"], True),
    ("How many days are in a leap year?", "three hundred sixty-six days", ["366"], True),
    ("When did the wall fall?", "In nineteen eighty-nine.", ["1989"], True),
    ("How fast is light in km/s?", "about 300 000 km per second", ["300,000"], True),
    ("How fast is light in km/s?", "about 3,000 km per second", ["300,000"], False),
    ("Which war ended in 1945?", "World War 2", ["World War II"], True),
    ("Which war ended in 1945?", "World War I", ["World War II"], False),
    ("Which place did she finish?", "She came twenty-first.", ["21st"], True),
    ("It did not happen until when?", "It wasn't until 1969.", ["1969"], True),
    # a reference's words the question already says may be left out
    ("What is the largest ocean on Earth?", "The Pacific.", ["Pacific Ocean"], True),
    ("What is the largest ocean on Earth?", "The Atlantic Ocean", ["Pacific Ocean"], False),
    ("Which vitamin does sunlight make?", "Vitamin C", ["Vitamin D"], False),
    # a person by the last name, unless another first name stands before it
    ("Who was the first person on the Moon?", "Armstrong did.", ["Neil Armstrong"], True),
    ("Who was the first person on the Moon?", "Louis Armstrong", ["Neil Armstrong"], False),
    ("Which trumpeter played with the band?", "Armstrong", ["Louis Armstrong"], False),
    # alternatives that are references themselves are fine
    ("What do caterpillars become?", "Butterflies or moths.", ["butterfly", "moth"], True),
    # folded forms: accents, Unicode subscripts
    ("Which river?", "The Parana", ["Paraná"], True),
    ("What is the formula of water?", "It is H₂O.", ["H2O"], True),
])
def test_contains_numbers_question_words_and_names(question, answer, refs, correct):
    verdict = judges.make_judge("contains")(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("words, numbers", [
    (["two", "hundred", "and", "six"], [206]), (["nineteen", "twelve"], [1912]),
    (["six", "seven"], [6, 7]), (["a", "hundred"], [100]), (["one", "million"], [1_000_000]),
    (["twenty", "four"], [24]), (["ninety", "nine", "forty"], [9940]),
])
def test_number_words_by_hand(words, numbers):
    from mars_demo.evaluation.judges.contains.answer_words import parse_number_words

    assert parse_number_words(words) == numbers


# ---- the contains judge's second round of rules: each with cases where it must not fire ------


def _contains(question, answer, refs):
    return judges.make_judge("contains")(question, answer, refs)


MOZART = ["Wolfgang Amadeus Mozart", "Mozart"]
KENNEDY = ["John F. Kennedy", "Kennedy"]


@pytest.mark.parametrize("question, answer, refs, correct", [
    # a short reference that ends a longer one, after another given name: another person
    ("Which composer wrote The Magic Flute?", "Leopold Mozart", MOZART, False),
    ("Which president?", "Robert F. Kennedy", KENNEDY, False),
    ("Who was the first woman to win a Nobel Prize?", "Pierre Curie", ["Marie Curie", "Curie"],
     False),
    ("What is the currency of India?", "The Pakistani rupee", ["Indian rupee", "rupee"], False),
    ("Which country is divided?", "South Korea", ["North Korea", "Korea"], False),
    ("Who painted The Starry Night?", "Theo van Gogh", ["Vincent van Gogh", "Van Gogh"], False),
    ("Who was the first US president?", "Booker T. Washington",
     ["George Washington", "Washington"], False),
    ("Who wrote Frankenstein?", "Percy Bysshe Shelley", ["Mary Shelley", "Shelley"], False),
    ("Who wrote Frankenstein?", "Mary Wollstonecraft Shelley", ["Mary Shelley", "Shelley"], True),
    # ... not when one of the reference's own names, a title or a possessive stands there
    ("Which composer wrote The Magic Flute?", "W. A. Mozart", MOZART, True),
    ("Which composer wrote The Magic Flute?", "Wolfgang Mozart", MOZART, True),
    ("Which composer wrote The Magic Flute?", "It was composed by Mozart in 1791.", MOZART, True),
    ("Which president?", "John Fitzgerald Kennedy", KENNEDY, True),  # a middle name
    ("Which president?", "President Kennedy", KENNEDY, True),
    ("Who was the first woman to win a Nobel Prize?", "Physicist Marie Curie",
     ["Marie Curie", "Curie"], True),
    ("Who invented the phonograph?", "Thomas Alva Edison", ["Thomas Edison", "Edison"], True),
    ("What is the longest river in Africa?", "Egypt's Nile", ["Nile", "River Nile"], True),
    ("What is the tallest mountain?", "Mt Everest", ["Mount Everest", "Everest"], True),
    ("What is the currency of India?", "Rupees", ["Indian rupee", "rupee"], True),
    # a short reference with no longer one: nothing to tell another person by
    ("Who wrote Hamlet?", "William Shakespeare", ["Shakespeare"], True),
])
def test_contains_a_short_reference_after_another_name_is_another_person(question, answer, refs,
                                                                          correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


NILE = ["Nile"]
RIVER = "What is the longest river in Africa?"


@pytest.mark.parametrize("answer, correct", [
    # hearsay before a contrast, a correction after it: not the answer's claim
    ("The Nile is often cited, but it's actually the Congo.", False),
    ("People often say the Nile, but the answer is the Congo.", False),
    ("Many people assume the Nile, but in fact the Congo is longer.", False),
    ("I thought it was the Nile, but it is actually the Congo.", False),
    ("The Nile is commonly cited. However, in fact it is the Congo.", False),
    ("Although many people think it is the Nile, it is actually the Congo.", False),
    # the correction names the reference, or one of the two is missing: it counts
    ("Many say the Congo, but it is actually the Nile.", True),
    ("Although many think it is the Congo, it is actually the Nile.", True),
    ("The Nile, though some people say the Amazon is longer.", True),
    ("The Nile is usually considered the longest, but measurements vary.", True),  # no correction
    ("I think it's the Nile, but I'm not sure.", True),  # a first-person hedge, not hearsay
    ("The Nile has many tributaries, but it is not the widest river.", True),  # "many" alone
    ("It is often said to be the Nile, and it is.", True),  # no contrast
    ("Although the Nile is often overlooked, it is the longest.", True),  # no correction
])
def test_contains_a_mention_others_make_and_the_answer_corrects(answer, correct):
    verdict = _contains(RIVER, answer, NILE)
    assert verdict.correct is correct, verdict.detail


def test_contains_a_credit_the_answer_qualifies_still_counts():
    question, refs = "Who discovered penicillin?", ["Alexander Fleming"]
    assert _contains(question, "Alexander Fleming is credited with discovering penicillin in "
                     "1928, but he did not mass-produce it.", refs).correct
    assert not _contains(question, "Fleming is often credited, but he did not discover "
                         "penicillin.", refs).correct


COFFEE = "Which country is the largest producer of coffee?"


@pytest.mark.parametrize("answer, refs, correct", [
    # one example of several, several candidates: not committed
    ("Coffee is grown in many countries, including Colombia, Vietnam, Ethiopia and Brazil.",
     ["Brazil"], False),
    ("Countries such as Brazil grow coffee.", ["Brazil"], False),
    ("Colombia, Vietnam or Brazil.", ["Brazil"], False),
    ("Brazil, Vietnam or Colombia.", ["Brazil"], False),
    ("It's between Brazil and Vietnam.", ["Brazil"], False),
    ("Maybe Brazil, maybe Vietnam.", ["Brazil"], False),
    ("Probably Brazil, but it could also be Vietnam.", ["Brazil"], False),
    ("Colombia, Vietnam and Brazil grow a lot; I can't say which grows most.", ["Brazil"],
     False),
    ("Brazil, which grows the most, and then Vietnam.", ["Brazil"], True),  # no "not sure which"
    # a committed answer with more detail, an order, a reference that is a list: it counts
    ("Brazil, followed by Vietnam and Colombia.", ["Brazil"], True),
    ("Brazil, which exports to many countries, including the US, Germany and Japan.",
     ["Brazil"], True),
    ("Among all countries Brazil produces the most coffee.", ["Brazil"], True),
    ("Producers such as Vietnam trail far behind Brazil.", ["Brazil"], True),
    ("Maybe Brazil.", ["Brazil"], True),
    ("Probably Brazil, though Vietnam is close.", ["Brazil"], True),
    ("Brazil; it may also be called the coffee giant.", ["Brazil"], True),
    ("Brazil, located between Peru and the Atlantic.", ["Brazil"], True),
    ("Brazil and Vietnam grow the most.", ["Brazil"], True),  # two parts: not a candidate list
    ("Kangaroos live in Australia, New Guinea and nearby islands.", ["Australia"], True),
    ("Water is made of hydrogen and oxygen.", ["Hydrogen and oxygen"], True),
    ("Red, green, and blue.", ["Red, green and blue"], True),
    ("The primary colours are red, green and blue.", ["Red, green and blue"], True),
    ("Insects such as butterflies and moths.", ["butterfly", "moth"], True),
    ("The border between Canada and the United States.", ["Canada and the United States"],
     True),
])
def test_contains_examples_and_candidate_lists(answer, refs, correct):
    verdict = _contains(COFFEE, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("question, answer, refs, correct", [
    # dates: ordinal days, "of", the month first or second
    ("When did Apollo 11 land?", "On 20th July 1969.", ["20 July 1969"], True),
    ("When did Apollo 11 land?", "On July 20, 1969.", ["20 July 1969"], True),
    ("When did Apollo 11 land?", "On the 20th of July, 1969.", ["July 20, 1969"], True),
    ("When did Apollo 11 land?", "On 21 July 1969.", ["20 July 1969"], False),
    ("When did the war end in Europe?", "On May 8th, 1945.", ["8 May 1945"], True),
    ("When is Independence Day?", "July the 4th.", ["4 July"], True),
    ("When is Independence Day?", "On the 4th.", ["July 4"], False),
    ("When is Independence Day?", "The 4th may be it.", ["4 May"], False),  # "may", a verb
    # powers, scaled numbers, roman years
    ("How many metres are in a kilometre?", "10^3 metres", ["1000"], True),
    ("How many metres are in a kilometre?", "10³", ["1000"], True),
    ("How many metres are in a kilometre?", "10^4", ["1000"], False),
    ("How many seconds are in an hour?", "3.6 × 10^3 seconds", ["3600"], True),
    ("How many people live there?", "About 1.5 million.", ["1,500,000"], True),
    ("What is the speed of light in km/s?", "About 3 × 10^5 km/s.", ["300,000"], True),
    ("What is the speed of light in km/s?", "About 300 thousand km/s.", ["300,000"], True),
    ("How many people live there?", "About 2 million.", ["1,500,000"], False),
    ("How many eggs are in a box of two dozen?", "Two dozen is 24.", ["24"], True),
    ("In what year did the First World War begin?", "MCMXIV", ["1914"], True),
    ("In what year did the First World War begin?", "MCMXV", ["1914"], False),
    ("Where is the White House?", "In Washington DC", ["Washington, D.C."], True),
    ("Which city was Leningrad?", "It is St. Petersburg.", ["St Petersburg"], True),
    # already read before this round: digit groups with a space, units
    ("How many minutes are in a day?", "1 440 minutes", ["1440"], True),
    ("How many degrees are in a full circle?", "360°", ["360"], True),
    ("How many centimetres are in one inch?", "2.54 cm", ["2.54"], True),
])
def test_contains_dates_powers_and_roman_years(question, answer, refs, correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


DONOR = "Which blood type is the universal donor?"


@pytest.mark.parametrize("question, answer, refs, correct", [
    # a sign that normalization would drop carries the meaning
    (DONOR, "O positive", ["O negative", "O-"], False),
    (DONOR, "O-", ["O negative", "O-"], True),
    (DONOR, "Type O\u2212.", ["O-"], True),  # a minus sign
    ("Which is the universal recipient?", "AB-", ["AB+"], False),
    ("Which language?", "C", ["C#"], False),
    # a one-character reference keeps its case and stands alone
    ("Which vitamin does sunlight make?", "D", ["Vitamin D", "D"], True),
    ("Which vitamin does sunlight make?", "It makes vitamin D.", ["D"], True),
    ("Which vitamin does sunlight make?", "Vitamin D3, made in the skin.", ["D"], False),
])
def test_contains_signs_and_one_character_references(question, answer, refs, correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("question, answer, refs, correct", [
    ("Which planet is sixth from the Sun?", "Saturn is the seventh planet; the sixth is Uranus.",
     ["Saturn"], False),
    ("Who was the 35th President?", "Kennedy was the 36th president.", ["Kennedy"], False),
    ("Which planet is sixth from the Sun?", "Saturn is the sixth planet.", ["Saturn"], True),
    ("Which is the second largest planet?", "Saturn is the sixth planet and the second largest.",
     ["Saturn"], True),  # the rank asked, in the same sentence
    # the question's ordinal is not the rank asked for, or there is none
    ("Who was president during the first Moon landing?", "Nixon was the 37th president.",
     ["Richard Nixon", "Nixon"], True),
    ("Which planet is known as the Red Planet?", "Mars is the fourth planet from the Sun.",
     ["Mars"], True),
])
def test_contains_a_rank_other_than_the_one_asked(question, answer, refs, correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("question, answer, refs, correct", [
    ("Which president?", "JFK", ["John F. Kennedy"], True),
    ("Which city is the Big Apple?", "NYC", ["New York City"], True),
    ("Which country?", "The U.S.A.", ["United States of America"], True),
    ("Which country?", "the US", ["United States"], True),
    ("Who gave the speech?", "MLK", ["Martin Luther King Jr."], True),
    ("Which war ended in 1945?", "WWII", ["World War II"], True),
    ("Which war ended in 1945?", "WW2", ["World War II"], True),
    # written in capitals only, the same letters, not denied, not a word
    ("Which president?", "RFK", ["John F. Kennedy"], False),
    ("Which war ended in 1945?", "WWI", ["World War II"], False),
    ("Which war ended in 1945?", "It was not WW2.", ["World War II"], False),
    ("Which country?", "Tell us more.", ["United States"], False),
    ("Which country?", "The US", ["United Kingdom"], False),
    ("Which city?", "NO, it is Baton Rouge.", ["New Orleans"], False),
    ("Which president?", "Kennedy", ["JFK"], False),  # one way only: the reference's letters
])
def test_contains_initialisms_of_a_reference(question, answer, refs, correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("answer, correct", [
    ("Sydney? No, Canberra.", True), ("Canberra? No, Sydney.", False),
    ("Canberra - no, wait, Sydney.", False), ("Canberra is wrong; it is Sydney.", False),
    ("It's Canberra, no?", True), ("Canberra. No doubt about it.", True),
    ("Canberra is the right answer.", True),
])
def test_contains_a_mention_taken_back(answer, correct):
    verdict = _contains(CAPITAL, answer, ["Canberra"])
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("question, answer, refs, correct", [
    ("Who wrote War and Peace?", "Leo Tolstoy's contemporary Fyodor Dostoevsky wrote it.",
     ["Leo Tolstoy", "Tolstoy"], False),
    ("Who wrote The Magic Flute?", "Mozart's father Leopold wrote it.", ["Mozart"], False),
    ("Who wrote Hamlet?", "Shakespeare's play Hamlet.", ["Shakespeare"], True),
    ("Who invented the phonograph?", "Edison's company General Electric made it.", ["Edison"],
     True),
    ("Who taught Plato?", "Socrates's student Plato wrote his dialogues.", ["Socrates"], True),
    ("Who wrote Pride and Prejudice?", "Austen's sister Cassandra kept her letters.",
     ["Jane Austen", "Austen"], False),
])
def test_contains_a_possessive_that_names_a_relative(question, answer, refs, correct):
    verdict = _contains(question, answer, refs)
    assert verdict.correct is correct, verdict.detail


@pytest.mark.parametrize("text, texts", [
    ("John F. Kennedy was president.", ["john", "f", "kennedy", "was", "president", "|"]),
    ("J. K. Rowling", ["j", "k", "rowling"]),
    ("It is vitamin C. It is sour.", ["it", "is", "vitamin", "c", "|", "it", "is", "sour", "|"]),
    ("The U.S. army", ["us", "army"]),
    ("On July 20th, 1969", ["on", "20", "july", "|", "1969"]),
    ("It may be March 3", ["it", "may", "be", "3", "march"]),
    ("2^10 and 10³", ["1024", "and", "1000"]),
    ("MMXX, DC, CIV, XIV", ["2020", "|", "dc", "|", "civ", "|", "14"]),
])
def test_answer_words_initials_dates_powers_numerals(text, texts):
    from mars_demo.evaluation.judges.contains.answer_words import words

    assert [w.text for w in words(text)] == texts


def test_answer_words_keep_signs_capitals_and_boundary_marks():
    from mars_demo.evaluation.judges.contains.answer_words import BOUNDARY, words

    said = words("Although O- and AB+, JFK's; but not C#.")
    assert [(w.text, w.sign) for w in said if w.sign] == [("o", "-"), ("ab", "+"), ("c", "#")]
    assert [w.raw for w in said if w.text == BOUNDARY] == ["although", ",", "; but", "."]
    jfk = next(w for w in said if w.text == "jfk")
    assert jfk.upper and jfk.possessive and jfk.capital
    assert not next(w for w in said if w.text == "not").upper


# ---- the NLI judge -----------------------------------------------------------------------------


class FakeNLI:
    """Entailment when the hypothesis's last word is in the premise; records every pair."""

    model_id = "fake/nli"

    def __init__(self):
        self.pairs = []

    def verdicts(self, pairs, truncated=None):
        self.pairs += pairs
        return ["entailment" if h.split()[-1].strip(".").lower() in p.lower() else "neutral"
                for p, h in pairs]


def test_nli_judge_asks_both_ways_with_the_question_in_front():
    nli = FakeNLI()
    judge = judges.make_judge("nli", nli=nli)
    verdicts = judge.judge_many([
        ("Capital of Australia?", "It is Canberra", ["Canberra"]),
        ("Capital of Australia?", "Sydney", ["Canberra", "canberra."]),
        ("Who wrote Hamlet?", "the Shakespeare!", ["Shakespeare"]),  # the same words: no call
    ])
    assert [v.correct for v in verdicts] == [True, False, True]
    assert nli.pairs == [
        ("Capital of Australia? Canberra", "Capital of Australia? It is Canberra"),
        ("Capital of Australia? It is Canberra", "Capital of Australia? Canberra"),
        ("Capital of Australia? Canberra", "Capital of Australia? Sydney"),
        ("Capital of Australia? Sydney", "Capital of Australia? Canberra"),
        ("Capital of Australia? canberra.", "Capital of Australia? Sydney"),
        ("Capital of Australia? Sydney", "Capital of Australia? canberra."),
    ]  # one batch for the three items
    assert "entailment / entailment" in verdicts[0].detail
    assert "neutral" in verdicts[1].detail
    # entailment one way only is not enough
    one_way = FakeNLI()
    one_way.verdicts = lambda pairs, truncated=None: ["entailment", "neutral"]
    assert not NLIJudge(one_way)("Q?", "Canberra city", ["Canberra"]).correct
    assert judge.describe() == {"name": "nli", "threshold": None, "model": "fake/nli"}


def test_nli_judge_loads_the_engines_nli_model(tiny_models):
    from mars_demo.models import registry
    from mars_demo.settings import Settings

    judge = NLIJudge.load(Settings(nli=str(tiny_models["nli"])))
    assert judge.nli is registry.load_nli(str(tiny_models["nli"]))  # the cached one, not a copy
    verdict = judge("What is the capital of France?", "Paris is the capital.", ["Lyon"])
    assert isinstance(verdict.correct, bool) and "Lyon" in verdict.detail
    assert judge.describe()["model"] == str(tiny_models["nli"])


def test_nli_judge_reads_paraphrases_with_the_trained_nli_model(trained_tiny_models):
    """The trained tiny NLI model knows its facts: a paraphrase of the reference sentence is
    accepted both ways, a wrong answer is not."""
    from mars_demo.devtools.tiny.trained import load_facts

    paths = trained_tiny_models
    from mars_demo.settings import Settings

    judge = NLIJudge.load(Settings(nli=str(paths["nli"])))
    items, expected = [], []
    for fact in load_facts():
        for para in fact.paraphrases:
            items.append((fact.question, para.text, [fact.answer.text]))
            expected.append(True)
        for wrong in fact.wrong:
            items.append((fact.question, wrong.text, [fact.answer.text]))
            expected.append(False)
    got = [v.correct for v in judge.judge_many(items)]
    agree = sum(g == e for g, e in zip(got, expected))
    assert agree >= 0.9 * len(items), (agree, len(items))


# ---- the shipped check set ---------------------------------------------------------------------


def test_the_shipped_check_set_and_the_default_judges_figures():
    """data/judge_check.jsonl: enough rows of every kind the issue names, and the default judge
    agrees with its labels on at least 95% (counted here, row by row)."""
    import collections

    rows = [json.loads(x) for x in (ROOT / "data" / "judge_check.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert len(rows) >= 150
    kinds = collections.Counter(r["kind"] for r in rows)
    for kind in ("short", "sentence", "paraphrase", "number", "shares-reference",
                 "shares-question", "hedge", "denial", "wrong"):
        assert kinds[kind] >= 10, kind
    assert 0.3 < sum(r["correct"] for r in rows) / len(rows) < 0.7
    judge = judges.make_judge(judges.DEFAULT_JUDGE)
    agree = sum(judge(r["question"], r["answer"], r["answers"]).correct == r["correct"]
                for r in rows)
    assert agree / len(rows) >= 0.95


def test_the_second_annotators_set_and_the_default_judges_figures():
    """data/judge_check_holdout.jsonl (a second annotator's, now a development set): the
    default judge keeps at least 92% agreement and accepts no answer labelled wrong."""
    rows = [json.loads(x) for x in (ROOT / "data" / "judge_check_holdout.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert len(rows) == 183 and len({r["id"] for r in rows}) == 183
    judge = judges.make_judge(judges.DEFAULT_JUDGE)
    said = [judge(r["question"], r["answer"], r["answers"]).correct for r in rows]
    assert sum(s == r["correct"] for s, r in zip(said, rows)) / len(rows) >= 0.92
    assert not any(s and not r["correct"] for s, r in zip(said, rows))


@pytest.mark.parametrize("reply, verdict", [
    ("correct", True), ("Correct.", True), ("\n\"correct\"", True),
    ("false", False), ("False.", False), ("incorrect", False),
])
def test_verdicts_are_read_from_the_first_word(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_an_unclear_verdict_is_an_error_not_a_guess():
    with pytest.raises(judges.JudgeError, match="neither 'correct' nor 'false'"):
        parse_verdict("I think the answer is right")


# ---- the LLM judge over HTTP ---------------------------------------------------------------


class FakeServer:
    """An OpenAI-compatible server that answers "correct" when the generated answer contains the
    first ground truth, else "false"; it records every request."""

    def __init__(self, reply=None):
        self.requests: list[tuple[str, dict | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.requests.append((self.path, None))
                self._send(200, {"object": "list", "data": [{"id": "fake-judge"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body))
                text = (body["messages"][0]["content"] if self.path.endswith("chat/completions")
                        else body["prompt"])
                truth = re.search(r"Ground Truth: (.*?)( / |,\n)", text).group(1)
                generated = text.split("Generated Answer: ", 1)[1]
                verdict = reply or ("correct" if truth.lower() in generated.lower() else "false")
                if self.path.endswith("chat/completions"):
                    self._send(200, {"choices": [{"message": {"role": "assistant",
                                                              "content": verdict}}]})
                else:
                    self._send(200, {"choices": [{"text": " " + verdict}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def fake():
    server = FakeServer()
    yield server
    server.close()


def test_llm_judge_chat_request_carries_the_papers_prompt(fake):
    judge = judges.make_judge("llm", endpoint=fake.url)
    assert judge.model == "fake-judge"  # the only model /models lists
    v = judge("What is the capital of Australia?", "Canberra is the capital",
              ["Canberra", "Canberra, ACT"])
    assert v.correct and v.detail == "correct"
    path, body = fake.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["model"] == "fake-judge" and body["temperature"] == 0.0
    content = body["messages"][0]["content"]
    assert content.startswith("You will behave as a question-answer evaluator.")
    assert "Question: What is the capital of Australia?, \n" in content  # one "?", as the paper
    assert "Ground Truth: Canberra / Canberra, ACT,\n" in content
    assert content.endswith("Generated Answer: Canberra is the capital")
    assert not judge("Capital of Australia?", "Sydney", ["Canberra"]).correct
    assert judge.describe() == {"name": "llm", "threshold": None, "endpoint": fake.url,
                                "model": "fake-judge", "api": "chat", "prompt": "paper"}


def test_llm_judge_completions_api(fake):
    judge = judges.make_judge("llm", endpoint=fake.url.removesuffix("/v1"), model="m",
                         api="completions")
    assert judge("Who wrote Hamlet", "William Shakespeare", ["Shakespeare"]).correct
    path, body = fake.requests[-1]
    assert path == "/v1/completions" and body["model"] == "m"
    assert body["prompt"].startswith("You will behave") and "Question: Who wrote Hamlet?," in body["prompt"]
    assert not any(p == "/v1/models" for p, _ in fake.requests)  # a named model: no listing


def test_llm_judge_unclear_reply_and_dead_server_are_errors():
    server = FakeServer(reply="maybe")
    try:
        judge = judges.make_judge("llm", endpoint=server.url)
        with pytest.raises(judges.JudgeError, match="neither"):
            judge("q?", "a", ["b"])
    finally:
        server.close()
    with pytest.raises(judges.JudgeError, match="cannot be reached|cannot list"):
        judges.make_judge("llm", endpoint=server.url, model="m")("q?", "a", ["b"])


def test_llm_judge_api_key_from_a_named_variable(fake, monkeypatch):
    with pytest.raises(ValueError, match="JUDGE_KEY is not set"):
        judges.make_judge("llm", endpoint=fake.url, api_key_env="JUDGE_KEY")
    monkeypatch.setenv("JUDGE_KEY", "sekret")
    judge = judges.make_judge("llm", endpoint=fake.url, api_key_env="JUDGE_KEY", model="m")
    assert "sekret" not in json.dumps(judge.describe())


def test_the_worked_examples_in_the_docstrings_hold():
    import doctest

    from mars_demo.evaluation.judges.contains import answer_words, candidates, claims, containment

    for module in (answer_words, candidates, claims, containment):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted >= 3, module.__name__
