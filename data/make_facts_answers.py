"""Write data/facts_answers.jsonl: data/facts.jsonl with hand-written answers and token log-probs.

The answers below were written by hand to look like a 7B model's: most are right, some are wrong
(a plausible wrong city, a neighbouring year), some are phrased as a sentence. The log-probs are
made, deterministically, from a hand-set confidence per answer: the first token of each content
word gets log(confidence) plus noise, the rest of a word is nearly certain, function words vary
(a sentence's "It was" can be unlikely even when the answer is right: the noise that MARS is
meant to discount). No model produced them: they exist to run ``evaluate`` without an LLM.

    python data/make_facts_answers.py          # rewrites data/facts_answers.jsonl
"""

from __future__ import annotations

import json
import math
import pathlib
import random
import re

HERE = pathlib.Path(__file__).parent
FUNCTION_WORDS = {"the", "a", "an", "is", "it", "was", "of", "by", "in", "to", "and", "i",
                  "think", "which", "called", "known", "as", "capital"}

# id -> (greedy answer, confidence of the greedy answer, 5 samples); a sample equal to the greedy
# answer gets the greedy answer's log-probs.
ANSWERS: dict[str, tuple[str, float, list[str]]] = {
    "facts-01": ("Canberra", 0.93, ["Canberra", "Canberra", "Sydney", "Canberra", "Canberra"]),
    "facts-02": ("Mars", 0.97, ["Mars", "Mars", "Mars", "It is Mars", "Mars"]),
    "facts-03": ("William Shakespeare", 0.95, ["William Shakespeare", "Shakespeare",
                 "William Shakespeare", "William Shakespeare", "It was written by Shakespeare"]),
    "facts-04": ("Au", 0.9, ["Au", "Au", "Au", "Ag", "Au"]),
    "facts-05": ("Six", 0.38, ["Seven", "Six", "Seven", "Five", "Six"]),
    "facts-06": ("It was painted by Leonardo da Vinci", 0.9, ["Leonardo da Vinci",
                 "Leonardo da Vinci", "It was painted by Leonardo da Vinci", "Michelangelo",
                 "Leonardo da Vinci"]),
    "facts-07": ("The Pacific Ocean", 0.92, ["The Pacific Ocean", "The Pacific Ocean",
                 "The Atlantic Ocean", "The Pacific Ocean", "Pacific"]),
    "facts-08": ("1991", 0.41, ["1989", "1991", "1990", "1989", "1991"]),
    "facts-09": ("The Amazon River", 0.88, ["The Amazon River", "The Amazon", "The Amazon River",
                 "The Parana River", "The Amazon River"]),
    "facts-10": ("Hydrogen", 0.96, ["Hydrogen", "Hydrogen", "Hydrogen", "Helium", "Hydrogen"]),
    "facts-11": ("Neil Armstrong", 0.95, ["Neil Armstrong", "Neil Armstrong", "Buzz Aldrin",
                 "Neil Armstrong", "Neil Armstrong"]),
    "facts-12": ("The Japanese yen", 0.9, ["The Japanese yen", "The yen", "The Japanese yen",
                 "The Japanese yen", "The Japanese yen"]),
    "facts-13": ("Wolfgang Amadeus Mozart", 0.8, ["Ludwig van Beethoven",
                 "Wolfgang Amadeus Mozart", "Beethoven", "Frederic Chopin",
                 "Ludwig van Beethoven"]),
    "facts-14": ("Diamond", 0.91, ["Diamond", "Diamond", "Diamond", "Graphene", "Diamond"]),
    "facts-15": ("Morocco", 0.86, ["Morocco", "Morocco", "Algeria", "Morocco", "Morocco"]),
    "facts-16": ("2", 0.45, ["2", "1", "2", "2", "The smallest prime number is 2"]),
    "facts-17": ("Albert Einstein", 0.97, ["Albert Einstein", "Albert Einstein",
                 "Albert Einstein", "Einstein", "Albert Einstein"]),
    "facts-18": ("Ottawa", 0.78, ["Ottawa", "Toronto", "Ottawa", "Ottawa", "Montreal"]),
    "facts-19": ("Oxygen", 0.45, ["Carbon dioxide", "Oxygen", "Carbon dioxide", "Nitrogen",
                 "Oxygen"]),
    "facts-20": ("Mount Kilimanjaro", 0.9, ["Mount Kilimanjaro", "Mount Kilimanjaro",
                 "Mount Kenya", "Kilimanjaro", "Mount Kilimanjaro"]),
    "facts-21": ("George Orwell", 0.94, ["George Orwell", "George Orwell", "Aldous Huxley",
                 "George Orwell", "George Orwell"]),
    "facts-22": ("The Taklamakan Desert", 0.4, ["The Gobi Desert", "The Taklamakan Desert",
                 "The Arabian Desert", "The Gobi Desert", "The Thar Desert"]),
    "facts-23": ("Mercury", 0.93, ["Mercury", "Mercury", "Gallium", "Mercury", "Mercury"]),
    "facts-24": ("Rome", 0.97, ["Rome", "Rome", "Rome", "Rome", "Rome"]),
    "facts-25": ("Louis Pasteur", 0.42, ["Alexander Fleming", "Louis Pasteur",
                 "Alexander Fleming", "Joseph Lister", "Louis Pasteur"]),
    "facts-26": ("Ulaanbaatar", 0.62, ["Ulaanbaatar", "Ulan Bator", "Astana", "Ulaanbaatar",
                 "Almaty"]),
    "facts-27": ("The pancreas", 0.89, ["The pancreas", "The pancreas", "The liver",
                 "The pancreas", "The pancreas"]),
    "facts-28": ("The tibia", 0.36, ["The femur", "The tibia", "The femur", "The humerus",
                 "The tibia"]),
    "facts-29": ("The Mayflower", 0.92, ["The Mayflower", "The Mayflower", "The Speedwell",
                 "The Mayflower", "The Mayflower"]),
    "facts-30": ("Almaty", 0.48, ["Astana", "Almaty", "Nur-Sultan", "Almaty", "Bishkek"]),
    "facts-31": ("Marie Curie", 0.93, ["Marie Curie", "Marie Curie", "Marie Curie",
                 "Bertha von Suttner", "Marie Curie"]),
    "facts-32": ("Four", 0.74, ["Four", "Four", "Five", "Four", "Six"]),
    "facts-33": ("Titan", 0.5, ["Titan", "Titan", "Enceladus", "Titan", "Titan"]),
    "facts-34": ("English", 0.75, ["Mandarin Chinese", "English", "Spanish", "Mandarin Chinese",
                 "English"]),
    "facts-35": ("1912", 0.94, ["1912", "1912", "1912", "1911", "1912"]),
    "facts-36": ("Avocado", 0.95, ["Avocado", "Avocado", "Avocado", "Avocado", "Tomato"]),
    "facts-37": ("Isaac Newton", 0.96, ["Isaac Newton", "Isaac Newton", "Galileo Galilei",
                 "Isaac Newton", "Sir Isaac Newton"]),
    "facts-38": ("Bamako", 0.3, ["Ouagadougou", "Bamako", "Niamey", "Ouagadougou", "Bamako"]),
    "facts-39": ("The piano", 0.91, ["The piano", "The piano", "The organ", "The piano",
                 "The piano"]),
    "facts-40": ("The euro", 0.7, ["The Swiss franc", "The euro", "The Swiss franc",
                 "The Swiss franc", "The euro"]),
}


def tokenize(text: str) -> list[str]:
    """Word-piece-like tokens: each word keeps its leading space; words longer than 6
    characters are split after their fourth character."""
    tokens = []
    for m in re.finditer(r"\s*\S+", text):
        piece = m.group(0)
        core = piece.lstrip()
        if len(core) > 6:
            cut = len(piece) - len(core) + 4
            tokens += [piece[:cut], piece[cut:]]
        else:
            tokens.append(piece)
    return tokens


def answer(text: str, confidence: float, rng: random.Random) -> dict:
    tokens = []
    for tok in tokenize(text):
        starts_word = tok[:1].isspace() or not tokens
        word = re.sub(r"[^a-z]", "", tok.lower())
        if not starts_word:  # the rest of a word: nearly certain once it has begun
            lp = -rng.uniform(0.005, 0.08)
        elif word in FUNCTION_WORDS:
            lp = -rng.uniform(0.02, 1.6)  # phrasing: often unsure, whatever the answer
        else:
            lp = math.log(confidence) - rng.uniform(0.0, 0.35)
        tokens.append({"text": tok, "logprob": round(min(lp, -1e-4), 4)})
    return {"text": text, "tokens": tokens}


def main() -> None:
    rng = random.Random(20240601)
    out = []
    for line in (HERE / "facts.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        greedy, conf, samples = ANSWERS[row["id"]]
        g = answer(greedy, conf, rng)
        made = []
        for s in samples:
            if s == greedy:
                made.append(g)
            else:  # another answer: its own, lower, confidence
                made.append(answer(s, max(0.05, (1 - conf) * rng.uniform(0.4, 0.9)), rng))
        out.append({**row, "greedy": g, "samples": made,
                    "settings": {"llm": "hand-written (data/make_facts_answers.py)"}})
    with open(HERE / "facts_answers.jsonl", "w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
